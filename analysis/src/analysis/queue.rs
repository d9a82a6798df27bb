//! The analysis of Underwood & Brightwell's queue benchmarks (seed 004 §3, docs/seed004.md):
//! the median one-way time against the queue, a least-squares line per message size and
//! fraction traversed, whose slope is the cost of one queue entry.
//!
//! * Pre-posted queue traversed `p > 0` %: the line is against the receives traversed
//!   (`floor(length p / 100)`), so its slope is the time one traversed entry adds to the
//!   one-way latency (the seed's 0.49 us per entry on Elan3, §5.1).
//! * Pre-posted queue traversed 0 %, and the unexpected queue: against the queue length. The
//!   unexpected queue is walked when a receive is posted, which overlaps the transfer (§3.2,
//!   §5.2): latency stays flat while the walk hides behind it, then climbs. The line over the
//!   longer half of the lengths ([`QueueLine::tail`]) gives the climb's slope.
//!
//! Each line is the `fit` of seed 001 Appendix B ([`inference::fit_line`]): intercept, slope
//! and the largest residual.

use crate::analysis::inference;
use crate::analysis::point::Point;
use commbench_core::method::queue::QueueKind;
use commbench_core::stats;
use serde::{Deserialize, Serialize};

/// What a line's x is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Against {
    /// Receives traversed before the match.
    Traversed,
    /// Entries in the queue.
    Length,
}

/// A least-squares line of the median one-way time against queue entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryLine {
    /// Smallest x of the points fitted.
    pub from: u64,
    /// Points fitted.
    pub points: usize,
    /// One-way time at x = 0, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub intercept_us: f64,
    /// Added one-way time per entry, ns.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub slope_ns_per_entry: f64,
    /// Standard error of the slope, ns (NaN with two points).
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub se_slope_ns: f64,
    /// Largest absolute residual, us (seed 001 App. B's "max. error").
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub max_err_us: f64,
}

/// The queue effect of one series: one pattern, backend and size, and (posted queue) one
/// fraction traversed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueLine {
    /// `queue_posted` or `queue_unexpected`.
    pub pattern: String,
    /// Backend.
    pub backend: String,
    /// Message size, bytes.
    pub size: u64,
    /// Per cent traversed (posted queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traversed_pct: Option<u32>,
    /// What x is.
    pub against: Against,
    /// The median one-way time (us) of the shortest queue measured.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub base_us: f64,
    /// The line through every point (`None` with fewer than two distinct x).
    pub all: Option<EntryLine>,
    /// The line through the longer half of the queues (at least three points; `None`
    /// below four points).
    pub tail: Option<EntryLine>,
}

/// The x of a point in its series, or `None` when it is not a queue benchmark's point.
fn x_of(p: &Point, against: Against) -> Option<u64> {
    match against {
        Against::Traversed => p.traversed,
        Against::Length => p.queue_length,
    }
}

/// Points `(x, median us)` sorted by x.
fn line_of(xy: &[(u64, f64)]) -> Option<EntryLine> {
    let x: Vec<f64> = xy.iter().map(|p| p.0 as f64).collect();
    let y: Vec<f64> = xy.iter().map(|p| p.1).collect();
    let l = inference::fit_line(&x, &y)?;
    Some(EntryLine {
        from: xy.first().map_or(0, |p| p.0),
        points: xy.len(),
        intercept_us: l.intercept,
        slope_ns_per_entry: l.slope * 1000.0,
        se_slope_ns: l.se_slope * 1000.0,
        max_err_us: l.max_abs_err,
    })
}

/// The series key of a queue point: pattern, backend, size, fraction traversed.
type Key = (String, String, u64, Option<u32>);

/// One line per series of the document's queue points, in order of first appearance; `None`
/// when the document has no queue point.
pub fn analyse(points: &[Point]) -> Option<Vec<QueueLine>> {
    let mut series: Vec<(Key, Vec<&Point>)> = Vec::new();
    for p in points {
        if QueueKind::of_pattern(&p.pattern).is_none() || p.queue_length.is_none() {
            continue;
        }
        let key = (
            p.pattern.clone(),
            p.backend.clone(),
            p.size,
            p.traversed_pct,
        );
        match series.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(p),
            None => series.push((key, vec![p])),
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(
        series
            .into_iter()
            .map(|(k, pts)| series_line(k, &pts))
            .collect(),
    )
}

fn series_line((pattern, backend, size, pct): Key, pts: &[&Point]) -> QueueLine {
    let against = match pct {
        Some(p) if p > 0 => Against::Traversed,
        _ => Against::Length,
    };
    let mut xy: Vec<(u64, f64)> = pts
        .iter()
        .filter_map(|p| Some((x_of(p, against)?, p.one_way_us.median)))
        .filter(|(_, y)| y.is_finite())
        .collect();
    xy.sort_by_key(|p| p.0);
    let tail = (xy.len() >= 4).then(|| {
        let from = (xy.len() / 2).min(xy.len() - 3);
        line_of(&xy[from..])
    });
    QueueLine {
        pattern,
        backend,
        size,
        traversed_pct: pct,
        against,
        base_us: xy.first().map_or(f64::NAN, |p| p.1),
        all: line_of(&xy),
        tail: tail.flatten(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit::point_of;

    fn queue_point(pattern: &str, length: u64, pct: Option<u32>, us: f64) -> Point {
        // Two trips per iteration, npp 1: one-way = trial / 2.
        let ns = (us * 2000.0).round() as i64;
        let mut p = point_of(pattern, 8, vec![ns; 9]);
        p.queue_length = Some(length);
        p.traversed_pct = pct;
        p.traversed = pct.map(|c| length * u64::from(c) / 100);
        p
    }

    #[test]
    fn slope_per_traversed_entry_and_per_length() {
        let c_us = 0.137;
        let mut pts = Vec::new();
        for pct in [0, 50, 100] {
            for l in [0u64, 100, 200, 400, 800] {
                let t = l * pct / 100;
                pts.push(queue_point(
                    "queue_posted",
                    l,
                    Some(pct as u32),
                    2.0 + c_us * t as f64,
                ));
            }
        }
        let lines = analyse(&pts).unwrap();
        assert_eq!(lines.len(), 3);
        let zero = &lines[0];
        assert_eq!(zero.against, Against::Length);
        assert!(zero.all.as_ref().unwrap().slope_ns_per_entry.abs() < 1e-6);
        for l in &lines[1..] {
            assert_eq!(l.against, Against::Traversed);
            let s = l.all.as_ref().unwrap().slope_ns_per_entry;
            assert!((s - 137.0).abs() < 0.01, "{s}");
            assert!((l.base_us - 2.0).abs() < 1e-3);
        }
    }

    #[test]
    fn tail_sees_the_climb_after_the_hidden_part() {
        // Flat at 3 us while the walk hides, then 0.05 us per entry past 40 entries.
        let pts: Vec<Point> = [0u64, 20, 40, 100, 200, 300]
            .iter()
            .map(|&l| {
                let us = 3.0 + 0.05 * (l.saturating_sub(40)) as f64;
                queue_point("queue_unexpected", l, None, us)
            })
            .collect();
        let lines = analyse(&pts).unwrap();
        let tail = lines[0].tail.as_ref().unwrap();
        assert_eq!(tail.from, 100);
        assert!((tail.slope_ns_per_entry - 50.0).abs() < 0.01);
        let all = lines[0].all.as_ref().unwrap().slope_ns_per_entry;
        assert!(all < 50.0, "the hidden part flattens the whole line: {all}");
    }

    #[test]
    fn no_queue_points_no_analysis() {
        let p = point_of("pingpong", 8, vec![100; 5]);
        assert!(analyse(&[p]).is_none());
        let one = queue_point("queue_unexpected", 10, None, 1.0);
        let lines = analyse(&[one]).unwrap();
        assert!(lines[0].all.is_none() && lines[0].tail.is_none());
    }
}
