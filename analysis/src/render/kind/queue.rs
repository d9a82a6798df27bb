//! The text report of Underwood & Brightwell's queue benchmarks (`queue posted`, `queue
//! unexpected`; docs/seed004.md): per backend and message size, a grid of the median one-way
//! time with one row per queue length and one column per fraction traversed, then the time
//! one queue entry adds (the slope of each column's least-squares line).

use crate::analysis::document::ResultDoc;
use crate::analysis::point::Point;
use crate::analysis::queue::{Against, EntryLine, QueueLine};
use crate::render::number::{text, Style};
use commbench_core::method::queue::QueueKind;
use std::fmt::Write;

/// The grids and lines of a queue document (nothing for another document).
pub fn render(out: &mut String, doc: &ResultDoc) {
    let Some(lines) = &doc.queue else { return };
    let any = doc
        .config
        .as_ref()
        .and_then(|c| c.queue.as_ref())
        .is_some_and(|q| q.any_source);
    let mut groups: Vec<(&str, &str, u64)> = Vec::new();
    for p in doc.points.iter().filter(|p| p.queue_length.is_some()) {
        let key = (p.pattern.as_str(), p.backend.as_str(), p.size);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    for (pattern, backend, size) in groups {
        let pts: Vec<&Point> = doc
            .points
            .iter()
            .filter(|p| p.pattern == pattern && p.backend == backend && p.size == size)
            .collect();
        let _ = writeln!(out, "\n{}", title(pattern, backend, size, any));
        grid(out, &pts);
        let ls: Vec<&QueueLine> = lines
            .iter()
            .filter(|l| l.pattern == pattern && l.backend == backend && l.size == size)
            .collect();
        entry_lines(out, &ls);
    }
}

/// What the grid below holds.
fn title(pattern: &str, backend: &str, size: u64, any: bool) -> String {
    let source = if any {
        "receives from any source"
    } else {
        "receives from the peer (exact source)"
    };
    let what = match QueueKind::of_pattern(pattern) {
        Some(QueueKind::Posted) => {
            "pre-posted receive queue (Underwood & Brightwell §3.1): median one-way time, us, \
             by queue length (rows) and per cent traversed (columns)"
        }
        _ => {
            "unexpected message queue (Underwood & Brightwell §3.2): median one-way time, us, \
             receive post included, by queue length"
        }
    };
    format!("{what}; {backend}, {size} B messages, {source}")
}

/// One row per length, one column per fraction traversed (one column for the unexpected
/// queue). A cell whose point has warnings ends with `!`.
fn grid(out: &mut String, pts: &[&Point]) {
    let mut lengths: Vec<u64> = pts.iter().filter_map(|p| p.queue_length).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut cols: Vec<Option<u32>> = Vec::new();
    for p in pts {
        if !cols.contains(&p.traversed_pct) {
            cols.push(p.traversed_pct);
        }
    }
    let head: Vec<String> = std::iter::once("length".to_string())
        .chain(cols.iter().map(|c| match c {
            Some(pct) => format!("{pct} %"),
            None => "median".to_string(),
        }))
        .collect();
    let mut rows = vec![head];
    for &l in &lengths {
        let mut row = vec![l.to_string()];
        for c in &cols {
            let cell = pts
                .iter()
                .find(|p| p.queue_length == Some(l) && p.traversed_pct == *c)
                .map_or("-".to_string(), |p| {
                    let mark = if p.warnings().is_empty() { "" } else { "!" };
                    format!("{}{mark}", text(p.one_way_us.median, Style::Decimals(3)))
                });
            row.push(cell);
        }
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|j| rows.iter().map(|r| r[j].chars().count()).max().unwrap_or(1))
        .collect();
    for r in &rows {
        let mut line = String::from(" ");
        for (j, c) in r.iter().enumerate() {
            let _ = write!(line, " {:>w$}", c, w = widths[j]);
        }
        let _ = writeln!(out, "{line}");
    }
    if pts.iter().any(|p| !p.warnings().is_empty()) {
        let _ = writeln!(
            out,
            "  ! the point's trials are spread or multimodal: `commbench report --full` lists why"
        );
    }
}

/// `b ns per entry (± se), a us at 0 entries, max error e us, over k points`.
fn line_words(l: &EntryLine) -> String {
    format!(
        "{} ns per entry (± {}), {} us at 0 entries, max error {} us, {} points from {}",
        text(l.slope_ns_per_entry, Style::Decimals(2)),
        text(l.se_slope_ns, Style::Significant),
        text(l.intercept_us, Style::Decimals(3)),
        text(l.max_err_us, Style::Significant),
        l.points,
        l.from
    )
}

/// The time one entry adds, per column: least squares of the medians against the entries
/// traversed (posted queue, p > 0) or the length.
fn entry_lines(out: &mut String, lines: &[&QueueLine]) {
    if lines.iter().all(|l| l.all.is_none()) {
        return;
    }
    let _ = writeln!(out, "  per queue entry (least squares of the medians):");
    for l in lines {
        let Some(all) = &l.all else { continue };
        let name = match (l.traversed_pct, l.against) {
            (Some(p), Against::Traversed) => format!("{p} % traversed, per receive traversed"),
            (Some(p), Against::Length) => format!("{p} % traversed, per receive queued"),
            (None, _) => "per unexpected message queued".to_string(),
        };
        let _ = writeln!(out, "    {name}: {}", line_words(all));
        if let (Some(t), None) = (&l.tail, l.traversed_pct) {
            let _ = writeln!(
                out,
                "      longer queues only (the walk no longer hidden): {}",
                line_words(t)
            );
        }
        if l.traversed_pct.is_none() {
            let _ = writeln!(out, "      {}", per_entry_walked(l));
        }
    }
}

/// The unexpected queue's slope is half a matcher's cost per entry (docs/seed004.md §4): each
/// rank's receive post walks the whole queue, the two walks overlap in the round trip, and a
/// one-way time is half of it. The cost per entry walked, from the longer queues' line where
/// there is one.
fn per_entry_walked(l: &QueueLine) -> String {
    let why = "a one-way time is half a round trip, in which both ranks' walks of the queue \
               overlap";
    match &l.tail {
        Some(t) => format!(
            "per entry walked by one rank's matcher: {} ns, twice the slope of the longer \
             queues ({why})",
            text(2.0 * t.slope_ns_per_entry, Style::Decimals(2))
        ),
        None => format!(
            "per entry walked by one rank's matcher: twice a slope, once the walk no longer \
             hides ({why})"
        ),
    }
}
