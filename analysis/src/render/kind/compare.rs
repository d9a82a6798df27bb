//! A comparison of two sides (each one or more result documents, the runs) as text: which
//! runs, one row per `(pattern, size)` with the ratio, its simultaneous CI, the spread between
//! runs and the verdict, then what the intervals account for (the variation between runs, or
//! within one run only) and the points that only one side measured.

use crate::analysis::compare::{unmatched, Scope, SizeComparison, Verdict, MIN_RUNS};
use crate::analysis::document::ResultDoc;
use std::fmt::Write;

/// One side of a comparison: its runs and the names they were read from, in the same order.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// File names (or any labels), one per run.
    pub names: &'a [String],
    /// The runs.
    pub runs: &'a [&'a ResultDoc],
}

fn spread(s: Option<f64>) -> String {
    s.map_or_else(|| "-".into(), |s| format!("{s:.2}x"))
}

fn verdict(r: &SizeComparison) -> String {
    match r.verdict {
        Verdict::NoDifference => r.verdict.to_string(),
        Verdict::Faster | Verdict::Slower => {
            format!("{} ({:+.1} %)", r.verdict, (r.ratio - 1.0) * 100.0)
        }
        Verdict::Unknown if r.runs_a == 1 && r.runs_b == 1 => "unknown (1 run per side)".into(),
        Verdict::Unknown if r.runs_a < MIN_RUNS || r.runs_b < MIN_RUNS => {
            format!("unknown (needs {MIN_RUNS} runs per side)")
        }
        Verdict::Unknown => "unknown (no interval)".into(),
    }
}

/// The comparison as a text table.
pub fn table(rows: &[SizeComparison]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>10} {:>12} {:>12} {:>8} {:>19} {:>16}  verdict (B against A)",
        "pattern", "size", "median A us", "median B us", "B/A", "95% CI of B/A", "run-to-run A/B"
    );
    for r in rows {
        let ci = format!(
            "[{:.4}, {:.4}]",
            r.ci95_simultaneous.lo, r.ci95_simultaneous.hi
        );
        let runs = format!("{} / {}", spread(r.run_spread_a), spread(r.run_spread_b));
        let _ = writeln!(
            s,
            "{:<10} {:>10} {:>12.4} {:>12.4} {:>8.4} {:>19} {:>16}  {}",
            r.pattern,
            r.size,
            r.median_a_us,
            r.median_b_us,
            r.ratio,
            ci,
            runs,
            verdict(r)
        );
    }
    s
}

fn describe(s: &mut String, label: &str, side: Side<'_>) {
    let distinct = |f: &dyn Fn(&ResultDoc) -> String| {
        let mut v: Vec<String> = Vec::new();
        for d in side.runs {
            let x = f(d);
            if !v.contains(&x) {
                v.push(x);
            }
        }
        v.join("/")
    };
    let backend = distinct(&|d: &ResultDoc| d.environment.backend.clone());
    let host =
        distinct(&|d: &ResultDoc| d.environment.hostname.clone().unwrap_or_else(|| "?".into()));
    let points = side.runs.first().map_or(0, |d| d.points.len());
    if side.runs.len() == 1 {
        let name = side.names.first().map_or("?", String::as_str);
        let _ = writeln!(
            s,
            "{label}: {name} (backend {backend}, host {host}, {points} points)"
        );
    } else {
        let _ = writeln!(
            s,
            "{label}: {} runs (backend {backend}, host {host}, {points} points each): {}",
            side.runs.len(),
            side.names.join(", ")
        );
    }
}

/// The largest run-to-run spread of one side over the rows: `(spread, pattern, size)`.
fn widest(
    rows: &[SizeComparison],
    of: impl Fn(&SizeComparison) -> Option<f64>,
) -> Option<(f64, &str, u64)> {
    rows.iter()
        .filter_map(|r| of(r).map(|s| (s, r.pattern.as_str(), r.size)))
        .filter(|x| x.0.is_finite())
        .max_by(|x, y| x.0.total_cmp(&y.0))
}

/// What the intervals account for, in plain words: the variation between runs that was seen,
/// or that it is unknown.
pub fn notes(rows: &[SizeComparison]) -> String {
    let mut s = String::new();
    let Some(first) = rows.first() else {
        return s;
    };
    let (na, nb) = (first.runs_a, first.runs_b);
    if first.scope == Scope::WithinRun {
        let which = match (na, nb) {
            (1, 1) => "One run per side".to_string(),
            (1, _) => format!("A has one run (B {nb})"),
            _ => format!("B has one run (A {na})"),
        };
        let _ = writeln!(
            s,
            "{which}: the run-to-run variance is unknown.\n\
             The CIs describe the variation within one run only (its trials share one state of \
             the machine);\nseparate runs of the same benchmark often differ by more, so no size \
             is called slower or faster.\nRecord each side {MIN_RUNS} or more times and give all \
             the runs:\n  commbench compare A1.json A2.json A3.json --against B1.json B2.json B3.json"
        );
        return s;
    }
    let mut seen = Vec::new();
    for (label, w) in [
        ("A", widest(rows, |r| r.run_spread_a)),
        ("B", widest(rows, |r| r.run_spread_b)),
    ] {
        if let Some((x, p, n)) = w {
            seen.push(format!("{x:.2}x in {label} ({p} {n} B)"));
        }
    }
    let k = first.sizes_compared;
    let _ = writeln!(
        s,
        "Run-to-run variation: the medians of runs of one side differed by up to {}.\n\
         The CIs include it: they resample the runs, then the trials of each, and hold for all \
         {k} size(s) together with 95% confidence.",
        seen.join(" and ")
    );
    if na < MIN_RUNS || nb < MIN_RUNS {
        let _ = writeln!(
            s,
            "Too few runs for a verdict (A {na}, B {nb}): with fewer than {MIN_RUNS} runs a side, \
             its spread rests on one degree of freedom.\nRecord more runs of each side."
        );
    }
    s
}

/// The whole comparison of side `b` against side `a`: which runs, how to read the table, the
/// table, what the intervals account for, and what was not compared.
pub fn report_runs(a: Side<'_>, b: Side<'_>, rows: &[SizeComparison]) -> String {
    let mut s = String::new();
    describe(&mut s, "A", a);
    describe(&mut s, "B", b);
    let several = rows.first().is_some_and(|r| r.runs_a > 1 || r.runs_b > 1);
    let k = rows.first().map_or(0, |r| r.sizes_compared);
    let (stat, how) = if several {
        (
            "B/A: ratio of the one-way times (a side's: the geometric mean of its runs' medians)",
            "hierarchical bootstrap: runs, then the trials of each",
        )
    } else {
        (
            "B/A: median(B) / median(A) of the one-way time",
            "bootstrap of the trials of one run",
        )
    };
    let _ = writeln!(
        s,
        "{stat}\n95% CI of B/A: for all {k} size(s) together ({how})\n\
         run-to-run: largest / smallest run median of a side\n\
         verdict: only with {MIN_RUNS} or more runs a side, where the CI excludes 1\n"
    );
    s.push_str(&table(rows));
    s.push('\n');
    s.push_str(&notes(rows));
    if let (Some(fa), Some(fb)) = (a.runs.first(), b.runs.first()) {
        let (only_a, only_b) = unmatched(fa, fb);
        for (side, only) in [("A", only_a), ("B", only_b)] {
            if !only.is_empty() {
                let list: Vec<String> = only.iter().map(|(p, n)| format!("{p} {n} B")).collect();
                let _ = writeln!(s, "only in {side} (not compared): {}", list.join(", "));
            }
        }
    }
    s
}

/// The whole comparison of document `b` (read from `b_name`) against `a` (from `a_name`), one
/// run per side: [`report_runs`].
pub fn report(
    a_name: &str,
    a: &ResultDoc,
    b_name: &str,
    b: &ResultDoc,
    rows: &[SizeComparison],
) -> String {
    let (na, nb) = ([a_name.to_string()], [b_name.to_string()]);
    report_runs(
        Side {
            names: &na,
            runs: &[a],
        },
        Side {
            names: &nb,
            runs: &[b],
        },
        rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::compare::{compare, compare_runs};
    use crate::analysis::testkit::{doc, point};

    fn sweep(scale: f64, seed: u64) -> ResultDoc {
        doc((0..6)
            .map(|k| point("pingpong", 1 << k, scale, 0.1, 301, seed))
            .collect())
    }

    #[test]
    fn one_run_per_side_says_the_variance_between_runs_is_unknown() {
        let a = sweep(1.0, 1);
        let mut b = sweep(1.2, 2);
        b.points.push(point("exchange", 8, 1.0, 0.1, 51, 3));
        let rows = compare(&a, &b, 500, 9).unwrap();
        let t = table(&rows);
        assert_eq!(t.lines().count(), 7, "{t}");
        assert_eq!(t.matches("unknown (1 run per side)").count(), 6, "{t}");
        assert!(!t.contains("slower"), "{t}");
        let r = report("a.json", &a, "b.json", &b, &rows);
        assert!(r.starts_with("A: a.json (backend sim, host testhost, 6 points)\nB: b.json"));
        assert!(
            r.contains("One run per side: the run-to-run variance is unknown.")
                && r.contains("describe the variation within one run only")
                && r.contains("--against B1.json"),
            "{r}"
        );
        assert!(
            r.ends_with("only in B (not compared): exchange 8 B\n"),
            "{r}"
        );
    }

    #[test]
    fn several_runs_report_their_spread() {
        let a: Vec<ResultDoc> = [1.0, 1.04, 0.98]
            .iter()
            .enumerate()
            .map(|(i, f)| sweep(*f, i as u64))
            .collect();
        let b: Vec<ResultDoc> = [1.3, 1.31, 1.29]
            .iter()
            .enumerate()
            .map(|(i, f)| sweep(*f, 10 + i as u64))
            .collect();
        let (ra, rb): (Vec<&ResultDoc>, Vec<&ResultDoc>) = (a.iter().collect(), b.iter().collect());
        let rows = compare_runs(&ra, &rb, 500, 9).unwrap();
        let t = table(&rows);
        assert_eq!(t.matches("slower (+").count(), 6, "{t}");
        let (sa, sb) = (rows[0].run_spread_a.unwrap(), rows[0].run_spread_b.unwrap());
        assert!((sa - 1.04 / 0.98).abs() < 0.02 && (sb - 1.31 / 1.29).abs() < 0.02);
        assert!(t.contains(&format!("{sa:.2}x / {sb:.2}x")), "{t}");
        let names = |p: &str| (1..=3).map(|i| format!("{p}{i}.json")).collect::<Vec<_>>();
        let (na, nb) = (names("a"), names("b"));
        let r = report_runs(
            Side {
                names: &na,
                runs: &ra,
            },
            Side {
                names: &nb,
                runs: &rb,
            },
            &rows,
        );
        assert!(
            r.starts_with(
                "A: 3 runs (backend sim, host testhost, 6 points each): a1.json, a2.json, a3.json\n"
            ),
            "{r}"
        );
        assert!(
            r.contains(
                "Run-to-run variation: the medians of runs of one side differed by up to 1.0"
            ),
            "{r}"
        );
        assert!(!r.contains("unknown"), "{r}");
        // Two runs a side: the spread is shown, the verdict waits.
        let rows = compare_runs(&ra[..2], &rb[..2], 500, 9).unwrap();
        let r = report_runs(
            Side {
                names: &na[..2],
                runs: &ra[..2],
            },
            Side {
                names: &nb[..2],
                runs: &rb[..2],
            },
            &rows,
        );
        assert!(r.contains("Too few runs for a verdict (A 2, B 2)"), "{r}");
        assert_eq!(
            r.matches("unknown (needs 3 runs per side)").count(),
            6,
            "{r}"
        );
    }
}
