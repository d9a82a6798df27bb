//! A comparison of two result documents as text: which documents, one row per
//! `(pattern, size)` with the ratio of medians, its CI, the rank test and the verdict, and
//! the points that only one side measured.

use crate::analysis::compare::{unmatched, SizeComparison, Verdict};
use crate::analysis::document::ResultDoc;
use std::fmt::Write;

/// The comparison as a text table.
pub fn table(rows: &[SizeComparison]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>10} {:>12} {:>12} {:>8} {:>19} {:>10}  verdict (B against A)",
        "pattern", "size", "median A us", "median B us", "B/A", "95% CI of B/A", "p (rank)"
    );
    for r in rows {
        let ci = format!("[{:.4}, {:.4}]", r.ci95.lo, r.ci95.hi);
        let pct = (r.ratio - 1.0) * 100.0;
        let verdict = match r.verdict {
            Verdict::NoDifference => r.verdict.to_string(),
            _ => format!("{} ({:+.1} %)", r.verdict, pct),
        };
        let _ = writeln!(
            s,
            "{:<10} {:>10} {:>12.4} {:>12.4} {:>8.4} {:>19} {:>10.3e}  {}",
            r.pattern, r.size, r.median_a_us, r.median_b_us, r.ratio, ci, r.p_value, verdict
        );
    }
    s
}

/// The whole comparison of `b` (read from `b_name`) against `a` (from `a_name`): which
/// documents, how to read the table, the table, and what was not compared.
pub fn report(
    a_name: &str,
    a: &ResultDoc,
    b_name: &str,
    b: &ResultDoc,
    rows: &[SizeComparison],
) -> String {
    let mut s = String::new();
    for (side, name, d) in [("A", a_name, a), ("B", b_name, b)] {
        let _ = writeln!(
            s,
            "{side}: {name} (backend {}, host {}, {} points)",
            d.environment.backend,
            d.environment.hostname.as_deref().unwrap_or("?"),
            d.points.len()
        );
    }
    let _ = writeln!(
        s,
        "ratio = median(B) / median(A) of the one-way time; 95% bootstrap CI; Mann-Whitney p; a verdict only where the CI excludes 1\n"
    );
    s.push_str(&table(rows));
    let (only_a, only_b) = unmatched(a, b);
    for (side, only) in [("A", only_a), ("B", only_b)] {
        if !only.is_empty() {
            let list: Vec<String> = only.iter().map(|(p, n)| format!("{p} {n} B")).collect();
            let _ = writeln!(s, "only in {side} (not compared): {}", list.join(", "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::compare;
    use crate::analysis::testkit::{doc, point};

    #[test]
    fn rows_verdicts_and_unmatched_points() {
        let a = doc((0..6)
            .map(|k| point("pingpong", 1 << k, 1.0, 0.1, 301, 1))
            .collect());
        let mut b = doc((0..6)
            .map(|k| point("pingpong", 1 << k, 1.2, 0.1, 301, 2))
            .collect());
        b.points.push(point("exchange", 8, 1.0, 0.1, 51, 3));
        let rows = compare(&a, &b, 1000, 9).unwrap();
        let t = table(&rows);
        assert!(t.contains("slower (+") && t.lines().count() == 7, "{t}");
        let r = report("a.json", &a, "b.json", &b, &rows);
        assert!(r.starts_with("A: a.json (backend sim, host testhost, 6 points)\nB: b.json"));
        assert!(
            r.ends_with("only in B (not compared): exchange 8 B\n"),
            "{r}"
        );
    }
}
