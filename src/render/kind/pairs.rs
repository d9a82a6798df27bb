//! Pairs that streamed at once (`bandwidth --pairs`): where they ran, then per size the three
//! aggregates with their message rates and the straggler; at full detail every pair's rate.

use crate::analysis::document::{Point, ResultDoc};
use crate::analysis::pairs::{placement_name, Aggregate, PairsPoint, PairsSection};
use crate::render::kind::sweep::aligned;
use crate::render::number::{text, Style};
use crate::render::words::Detail;
use crate::spec::format_size;
use std::fmt::Write;

/// The section of a document whose points have pairs; nothing otherwise.
pub fn render(out: &mut String, doc: &ResultDoc, detail: Detail) {
    let points: Vec<(&Point, &PairsPoint)> = doc
        .points
        .iter()
        .filter_map(|p| p.pairs.as_ref().map(|q| (p, q)))
        .collect();
    let Some((_, first)) = points.first() else {
        return;
    };
    let _ = writeln!(out);
    head(out, doc.pairs.as_ref(), first);
    let mut cells = vec![[
        "size",
        "makespan MB/s",
        "msg/s",
        "mean-time MB/s",
        "msg/s",
        "sum MB/s",
        "msg/s",
        "straggler",
    ]
    .map(String::from)
    .to_vec()];
    let several = points.iter().any(|(p, _)| p.backend != points[0].0.backend);
    if several {
        cells[0].insert(1, "backend".into());
    }
    let mut marks = vec![false];
    for (p, q) in &points {
        let mut row = vec![format_size(p.size)];
        if several {
            row.push(p.backend.clone());
        }
        for name in ["makespan", "mean_time", "sum"] {
            match q.aggregates.iter().find(|a| a.name == name) {
                Some(a) => row.extend(rates(a)),
                None => row.extend(["-".to_string(), "-".to_string()]),
            }
        }
        // Pairs whose medians are all equal have no straggler.
        let slower = q
            .straggler
            .as_ref()
            .filter(|s| q.pairs > 1 && s.slowdown > 1.0);
        row.push(slower.map_or("-".into(), |s| {
            format!("pair {} x{}", s.pair, text(s.slowdown, Style::Fixed(2)))
        }));
        marks.push(q.unusable_samples > 0);
        cells.push(row);
    }
    aligned(out, &cells, &[], &marks);
    let _ = writeln!(
        out,
        "makespan = K x B / max_p t_p (IMB); mean time = K x B / mean_p t_p (OSU 7.4 and \
         later); sum = sum_p B / t_p, at least the others; medians over the samples"
    );
    for (p, q) in points.iter().filter(|(_, q)| q.unusable_samples > 0) {
        let _ = writeln!(
            out,
            "! {}: {} of {} samples left out: a pair's time was not positive (a clock too \
             coarse for the loop), so no rate can be taken from it",
            format_size(p.size),
            q.unusable_samples,
            q.samples
        );
    }
    if detail == Detail::Full {
        per_pair(out, &points);
    }
}

/// What the aggregates count and where the pairs ran.
fn head(out: &mut String, section: Option<&PairsSection>, first: &PairsPoint) {
    let k = first.pairs;
    let place = section.map_or(String::new(), |s| {
        let crossing = s
            .pairs
            .iter()
            .filter(|p| p.crosses_hosts == Some(true))
            .count();
        let known = s.pairs.iter().all(|p| p.crosses_hosts.is_some());
        let hosts = if known {
            format!(", {crossing} of {k} crossing hosts")
        } else {
            String::new()
        };
        format!(
            " ({} placement{hosts}; every sample starts after a barrier)",
            placement_name(&s.placement)
        )
    });
    let _ = writeln!(out, "{k} pairs streaming at once{place}");
    let _ = writeln!(
        out,
        "B = bytes one pair moves in a sample (npp windows; both ways when --bidirectional), \
         t_p = pair p's time for it; the acknowledgements are timed, not counted"
    );
    if let Some(note) = section.and_then(|s| s.note.as_ref()) {
        let _ = writeln!(out, "! {note}");
    }
}

/// An aggregate's median bandwidth and message rate.
fn rates(a: &Aggregate) -> [String; 2] {
    [
        text(a.mb_s.median, Style::Column),
        text(a.messages_per_s.median, Style::Column),
    ]
}

/// Every pair's median sample as rates, the pairs in order.
fn per_pair(out: &mut String, points: &[(&Point, &PairsPoint)]) {
    let _ = writeln!(out, "\nevery pair's median sample, MB/s (msg/s):");
    for (p, q) in points {
        let each: Vec<String> = q
            .per_pair
            .iter()
            .map(|s| {
                format!(
                    "{}: {} ({})",
                    s.pair,
                    text(s.mb_s, Style::Significant),
                    text(s.messages_per_s, Style::Significant)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:>8} {:>5}  {}",
            format_size(p.size),
            p.backend,
            each.join("  ")
        );
    }
}
