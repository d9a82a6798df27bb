//! The text format: the report a run prints and `commbench report` writes by default, at a
//! [`Detail`]. Its first line is the command that ran; the document's kind decides what
//! follows (an all-pairs matrix, seed 001's six times, or the points of any other run, with a
//! queue benchmark's grids), then the report card where the document has one, and its last
//! lines say how the run ended and how long it took.

use super::Renderer;
use crate::analysis::document::ResultDoc;
use crate::analysis::model::FitSection;
use crate::render::kind::{card, matrix, pairs, queue, sixtimes, sweep};
use commbench_core::transport::error::Result;
use std::fmt::Write;

pub use crate::render::words::Detail;

/// The text report at `detail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Text {
    /// How much to print.
    pub detail: Detail,
}

impl Text {
    /// The text report at `detail`.
    pub fn new(detail: Detail) -> Text {
        Text { detail }
    }

    /// The report of `doc` with `fits` as its fitted models (the stored fit,
    /// `doc.fit.as_slice()`, or those `commbench report` fits where a run did not). Text
    /// cannot fail: this is [`Renderer::render`] without the `Result`, for the callers that
    /// write a report whatever the document holds.
    pub fn report(&self, doc: &ResultDoc, fits: &[FitSection]) -> String {
        let detail = self.detail;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "commbench {}: {}",
            doc.tool_version,
            doc.command.join(" ")
        );
        match detail {
            _ if doc.allpairs.is_some() => matrix::render(&mut out, doc, detail),
            Detail::Table if doc.sixtimes.is_some() => sixtimes::render(&mut out, doc),
            Detail::Table => sweep::table_report(&mut out, doc, fits),
            Detail::Summary | Detail::Full => {
                sweep::appendix_c(&mut out, doc, fits, detail);
                if doc.sixtimes.is_some() {
                    out.push('\n');
                    sixtimes::render(&mut out, doc);
                }
                if doc.queue.is_some() {
                    queue::render(&mut out, doc);
                }
            }
        }
        if doc.allpairs.is_none() {
            pairs::render(&mut out, doc, detail);
            pairs::window_profile(&mut out, doc);
        }
        if let Some(c) = doc.report_card.as_ref().filter(|_| doc.allpairs.is_none()) {
            card::render(&mut out, c, detail);
        }
        ending(&mut out, doc, detail);
        out
    }
}

impl Renderer for Text {
    fn render(&self, doc: &ResultDoc, fits: &[FitSection]) -> Result<String> {
        Ok(self.report(doc, fits))
    }
}

/// The last lines: how the run ended, when it did not complete, and the program's time.
fn ending(out: &mut String, doc: &ResultDoc, detail: Detail) {
    // An all-pairs run keeps cells, not points.
    let (kept, what) = match &doc.allpairs {
        Some(m) => (m.cells.len(), "cell(s)"),
        None => (doc.points.len(), "point(s)"),
    };
    match (&doc.error, doc.status.as_str()) {
        (Some(err), "interrupted") if doc.allpairs.is_some() => {
            let _ = writeln!(
                out,
                "\nRUN STOPPED: {err}; the {kept} cell(s) measured are reported"
            );
        }
        (Some(err), "interrupted") => {
            let _ = writeln!(
                out,
                "\nRUN STOPPED: {err}; the {kept} size(s) measured in full are reported"
            );
        }
        (Some(err), _) => {
            let _ = writeln!(out, "\nRUN FAILED after {kept} {what}: {err}");
        }
        (None, _) => {}
    }
    if detail != Detail::Table {
        out.push('\n');
    }
    let _ = writeln!(out, "program time = {:.3} s", doc.wall_s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::point::Point;
    use crate::analysis::testkit::{doc, point, point_of, sweep};
    use crate::render::words::CI_NOTE;

    /// The report of `d` with its stored fit.
    fn render(d: &ResultDoc, detail: Detail) -> String {
        Text { detail }.report(d, d.fit.as_slice())
    }

    /// Documents as commbench 0.1.0 wrote them before the run configuration was typed
    /// (`analysis::document`'s tests read them field by field), with their summaries as this
    /// version writes them: earlier documents keep rendering.
    const EARLIER: [(&str, &str); 2] = [
        (
            include_str!("../../analysis/testdata/v0.1-sweep.json"),
            include_str!("../../analysis/testdata/v0.1-sweep.txt"),
        ),
        (
            include_str!("../../analysis/testdata/v0.1-fixed-npp.json"),
            include_str!("../../analysis/testdata/v0.1-fixed-npp.txt"),
        ),
    ];

    #[test]
    fn earlier_documents_render_as_before() {
        for (json, text) in EARLIER {
            let doc = ResultDoc::read_json(json).unwrap();
            assert_eq!(render(&doc, Detail::Summary), text);
        }
    }

    /// The lines of a table: those ending in `kept/removed` (and the warning mark).
    fn rows(s: &str) -> Vec<&str> {
        s.lines()
            .filter(|l| {
                let last = l.trim_end_matches('!').split_whitespace().last();
                last.and_then(|c| c.split_once('/'))
                    .is_some_and(|(a, b)| a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok())
            })
            .collect()
    }

    /// A point of `pattern` over `backend` with `trips` message times per iteration.
    fn raw_point(pattern: &str, backend: &str, size: u64, trips: u64, trial_ns: Vec<i64>) -> Point {
        let raw = commbench_core::method::engine::RawPoint {
            trial_ns,
            trips_per_iteration: trips,
            npp: 1,
            npp_calculated: None,
            median_ppt_ns: None,
            pattern: pattern.into(),
            size,
            queue: None,
            buffers: None,
            npp_check: None,
            trial_start_ns: Vec::new(),
            until_ci: None,
            pair_trial_ns: Vec::new(),
            sweep: None,
        };
        Point::from_raw(raw, backend, 2.0).unwrap()
    }

    #[test]
    fn the_table_has_a_line_per_size_and_says_what_a_ci_covers() {
        let mut d = sweep(1.0);
        d.fit = crate::analysis::fit::fit_points(
            &d.points,
            crate::analysis::fit::Breakpoint::Auto,
            None,
        )
        .into_iter()
        .next();
        let t = render(&d, Detail::Table);
        assert_eq!(rows(&t).len(), d.points.len(), "{t}");
        assert!(t.contains(CI_NOTE), "{t}");
        assert!(t.contains("size") && t.contains("median") && t.contains("[95% CI]"));
        assert!(
            t.contains("one-way time (half a round trip) = trial / (2 npp)"),
            "{t}"
        );
        assert!(
            t.contains("latency") && t.contains("breakpoint 1 KiB"),
            "{t}"
        );
        assert!(
            !t.contains("TIMING RESULTS") && !t.contains("POINTS:"),
            "{t}"
        );
        assert!(t.lines().count() < d.points.len() + 16, "{t}");
        // The summary and the full output keep every statistic; only the full output has the
        // distributions.
        let s = render(&d, Detail::Summary);
        let f = render(&d, Detail::Full);
        assert_eq!(
            s.matches("TIMING RESULTS AND STATISTICS").count(),
            2 * d.points.len()
        );
        assert!(s.contains("variance                 = ") && s.contains(" us^2"));
        assert!(!s.contains("DISTRIBUTION OF") && f.contains("DISTRIBUTION OF ONE-WAY TIMES"));
        assert!(s.contains("FITTED MODELS") && s.contains(CI_NOTE));
        for out in [&t, &s, &f] {
            assert!(!out.contains("1 bytes"), "{out}");
        }
    }

    #[test]
    fn each_pattern_says_what_its_time_is() {
        let t = |p: Point, error: Option<&str>| {
            let mut d = doc(vec![p]);
            d.error = error.map(String::from);
            (render(&d, Detail::Table), render(&d, Detail::Summary))
        };
        let times = || (0..50).map(|i| 100_000 + i).collect::<Vec<i64>>();
        let (table, summary) = t(point("pingpong", 1, 5.0, 0.1, 50, 1), None);
        assert!(table.starts_with("commbench") && table.contains("ping-pong (Hockney's COMMS1)"));
        assert!(
            summary.contains("ping-pong of 1 byte over sim"),
            "{summary}"
        );
        let (table, _) = t(point("exchange", 8, 5.0, 0.1, 50, 1), None);
        assert!(table.contains("exchange (Hockney's COMMS2)"), "{table}");
        assert!(table.contains("time per exchange") && table.contains("per direction"));
        assert!(
            !table.contains("one-way") && !table.contains("ping-pong"),
            "{table}"
        );
        let (table, summary) = t(raw_point("bandwidth", "sim", 64, 64, times()), None);
        assert!(
            table.contains("time per message in a window of 64"),
            "{table}"
        );
        assert!(table.contains("trial / (window x npp)"), "{table}");
        assert!(summary.contains("MESSAGE RATES"), "{summary}");
        let (table, summary) = t(raw_point("transpose-pack", "sim", 2048, 1, times()), None);
        assert!(
            table.contains("column transpose of a 16 x 16 matrix"),
            "{table}"
        );
        assert!(
            table.contains("time per transpose (16 messages of 128 bytes"),
            "{table}"
        );
        assert!(table.contains("verified: after the trials"), "{table}");
        assert!(
            !table.contains("time per message") && !table.contains("one-way"),
            "{table}"
        );
        assert!(summary.contains("verified: after the trials"), "{summary}");
        let (table, _) = t(
            raw_point("transpose-pack", "sim", 2048, 1, times()),
            Some("rank 1: transpose verification failed"),
        );
        assert!(table.contains("verification not confirmed"), "{table}");
        assert!(!table.contains("verified: after"), "{table}");
    }

    #[test]
    fn no_seed_numbers_and_papers_by_author() {
        let mut docs = vec![sweep(1.0)];
        for (json, _) in EARLIER {
            let mut d = ResultDoc::read_json(json).unwrap();
            // The full fit section is rendered by `render::kind::fit`.
            d.fit = None;
            docs.push(d);
        }
        for d in &docs {
            for detail in [Detail::Table, Detail::Summary, Detail::Full] {
                let s = render(d, detail);
                assert!(!s.contains("seed 0"), "{s}");
                if detail == Detail::Table || d.timer.is_some() {
                    assert!(s.contains("Luecke et al. 2009"), "{s}");
                }
                for (i, _) in s.match_indices("COMMS") {
                    assert!(s[..i].ends_with("Hockney's "), "{s}");
                }
            }
        }
    }

    #[test]
    fn warnings_are_marked_and_listed() {
        // A third of the trials far above the median: the filter removes them.
        let trials: Vec<i64> = (0..60)
            .map(|i| if i % 3 == 0 { 10_000_000 } else { 10_000 + i })
            .collect();
        let noisy = point_of("pingpong", 8, trials);
        assert!(!noisy.warnings().is_empty());
        let d = doc(vec![point("pingpong", 1, 5.0, 0.01, 60, 1), noisy]);
        let t = render(&d, Detail::Table);
        let r = rows(&t);
        assert_eq!(r.len(), 2, "{t}");
        assert!(!r[0].ends_with('!') && r[1].ends_with('!'), "{t}");
        assert!(t.contains("! 8 B: the cut_coef filter removed"), "{t}");
        let s = render(&d, Detail::Summary);
        assert_eq!(
            s.matches("  WARNING: the cut_coef filter removed").count(),
            1,
            "{s}"
        );
    }

    #[test]
    fn several_backends_have_a_table_each_and_the_fit_says_which_it_covers() {
        let mpi: Vec<Point> = (0..6)
            .map(|k| {
                raw_point(
                    "pingpong",
                    "mpi",
                    1 << (2 * k),
                    2,
                    (0..40).map(|i| 2_000 + 8 * (1 << (2 * k)) + i).collect(),
                )
            })
            .collect();
        let tcp: Vec<Point> = (0..6)
            .map(|k| {
                raw_point(
                    "pingpong",
                    "tcp",
                    1 << (2 * k),
                    2,
                    (0..40).map(|i| 9_000 + 20 * (1 << (2 * k)) + i).collect(),
                )
            })
            .collect();
        let fit =
            crate::analysis::fit::fit_points(&mpi, crate::analysis::fit::Breakpoint::None, None)
                .into_iter()
                .next();
        let mut d = doc(mpi.into_iter().chain(tcp).collect());
        d.environment.backend = "mpi,tcp".into();
        d.fit = fit;
        let t = render(&d, Detail::Table);
        assert_eq!(rows(&t).len(), 12, "{t}");
        assert!(t.contains("\nmpi:\n") && t.contains("\ntcp:\n"), "{t}");
        assert!(
            t.contains("covers only the mpi points (tcp not fitted)"),
            "{t}"
        );
        assert!(t.contains("SIDE BY SIDE"), "{t}");
        let s = render(&d, Detail::Summary);
        assert!(
            s.contains("The fit of pingpong below covers only the mpi points"),
            "{s}"
        );
        // A fit of every backend's points together says so.
        d.fit = crate::analysis::fit::fit_points(
            &d.points,
            crate::analysis::fit::Breakpoint::None,
            None,
        )
        .into_iter()
        .next();
        let t = render(&d, Detail::Table);
        assert!(t.contains("covers the points of mpi, tcp together"), "{t}");
    }
}
