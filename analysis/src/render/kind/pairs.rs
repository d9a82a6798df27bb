//! Pairs that streamed at once (`bandwidth --pairs`): where they ran, then per size the three
//! aggregates with their message rates and the straggler; at full detail every pair's rate.
//! A sweep of windows adds the window profile, and a sweep of pairs the max-rate model fitted
//! to it.

use crate::analysis::document::{Point, ResultDoc};
use crate::analysis::maxrate::MaxRateFit;
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
    let swept = points.iter().any(|(p, _)| p.sweep.is_some());
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
    if swept {
        cells[0].splice(1..1, ["window".to_string(), "pairs".to_string()]);
    }
    if several {
        cells[0].insert(1, "backend".into());
    }
    let mut marks = vec![false];
    for (p, q) in &points {
        let mut row = vec![format_size(p.size)];
        if several {
            row.push(p.backend.clone());
        }
        if swept {
            // The window asked for, and the one used where the largest sizes capped it.
            let used = p.trips_per_iteration;
            row.push(match p.sweep {
                Some(at) if u64::from(at.window) != used => format!("{} ({used})", at.window),
                Some(at) => at.window.to_string(),
                None => used.to_string(),
            });
            row.push(q.pairs.to_string());
        }
        for name in ["makespan", "mean_time", "sum"] {
            match q.aggregate(name) {
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
    for f in doc.max_rate.iter().flatten() {
        max_rate(out, f);
    }
}

/// The max-rate model fitted to one backend's sweep of pairs at one window.
fn max_rate(out: &mut String, f: &MaxRateFit) {
    let _ = writeln!(
        out,
        "\nmax-rate model (Gropp, Olson & Samfass, EuroMPI 2016), T(n, k) = alpha + k n / \
         min(R_N, k R_b), over {}, window {}, {} points:",
        f.backend,
        f.window,
        f.points.len()
    );
    let rate = |r: Option<f64>| r.map_or("-".to_string(), |v| text(v, Style::Significant));
    let _ =
        writeln!(
        out,
        "  alpha = {} us, R_b = {} MB/s (one pair alone), R_N = {} MB/s (all pairs){}, k* = R_N \
         / R_b = {}; rms relative residual {}%",
        text(f.alpha_us, Style::Significant),
        rate(f.r_b_mb_s),
        rate(f.r_n_mb_s),
        if f.per_direction { " per direction" } else { "" },
        f.k_star.map_or("-".into(), |k| text(k, Style::Fixed(2))),
        text(100.0 * f.rms_rel_residual, Style::Fixed(1))
    );
    if let Some(b) = &f.bound {
        let at_least = f.r_n_at_least_mb_s.or(f.r_b_at_least_mb_s);
        let v = at_least.map_or(String::new(), |v| {
            format!(" = {} MB/s", text(v, Style::Significant))
        });
        let _ = writeln!(out, "  ! {b}{v}");
    }
    for w in f.warnings() {
        let _ = writeln!(out, "  ! {w}");
    }
}

/// What the aggregates count and where the pairs ran.
fn head(out: &mut String, section: Option<&PairsSection>, first: &PairsPoint) {
    let k = section.map_or(first.pairs, |s| s.pairs.len() as u32);
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
    let s = if k == 1 { "" } else { "s" };
    let _ = writeln!(out, "{k} pair{s} streaming at once{place}");
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
                let rate = |r: Option<f64>| r.map_or("-".into(), |v| text(v, Style::Significant));
                format!("{}: {} ({})", s.pair, rate(s.mb_s), rate(s.messages_per_s))
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

/// A sweep of windows (`--window 1..128`, osu_mbw_mr's -V): for each backend and number of
/// pairs, the rate at the median of every size (rows) and window (columns): the aggregate of
/// the pairs' makespan where pairs streamed, else the pair's own. Nothing without a sweep of
/// two windows or more.
pub fn window_profile(out: &mut String, doc: &ResultDoc) {
    let swept: Vec<&Point> = doc.points.iter().filter(|p| p.sweep.is_some()).collect();
    let mut windows: Vec<u32> = swept
        .iter()
        .filter_map(|p| p.sweep.map(|s| s.window))
        .collect();
    windows.sort_unstable();
    windows.dedup();
    if windows.len() < 2 {
        return;
    }
    let mut groups: Vec<(&str, u32)> = Vec::new();
    for p in &swept {
        let k = (p.backend.as_str(), p.sweep.map_or(1, |s| s.pairs));
        if !groups.contains(&k) {
            groups.push(k);
        }
    }
    for (backend, k) in groups {
        let (s, of) = if k == 1 {
            ("", "")
        } else {
            ("s", " (the pairs' makespan aggregate)")
        };
        let _ = writeln!(
            out,
            "\nwindow profile over {backend}, {k} pair{s}: MB/s at the median{of}, by window"
        );
        let mut cells = vec![std::iter::once("size".to_string())
            .chain(windows.iter().map(|w| w.to_string()))
            .collect::<Vec<_>>()];
        let mine: Vec<&&Point> = swept
            .iter()
            .filter(|p| p.backend == backend && p.sweep.map_or(1, |s| s.pairs) == k)
            .collect();
        let mut sizes: Vec<u64> = mine.iter().map(|p| p.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        for size in sizes {
            let mut row = vec![format_size(size)];
            for &w in &windows {
                let at = mine
                    .iter()
                    .find(|p| p.size == size && p.sweep.map(|s| s.window) == Some(w));
                row.push(at.map_or("-".into(), |p| text(point_rate(p), Style::Column)));
            }
            cells.push(row);
        }
        aligned(out, &cells, &[], &[]);
    }
}

/// A point's rate at the median, MB/s: its pairs' makespan aggregate, else its own.
fn point_rate(p: &Point) -> f64 {
    p.pairs
        .as_ref()
        .and_then(|q| q.aggregate("makespan"))
        .map_or(p.rate_mb_s.median, |a| a.mb_s.median)
}
