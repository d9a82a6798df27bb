//! A result document as CSV: one row per point, for spreadsheets and scripts.

use super::Renderer;
use crate::analysis::document::ResultDoc;
use crate::analysis::model::FitSection;
use crate::render::number::{number, Style, CSV_UNDEFINED};
use commbench_core::transport::error::Result;
use std::fmt::Write;

/// The columns of [`Csv`].
pub const HEADER: &str = "pattern,backend,size_bytes,npp,trials,min_us,median_us,ci95_median_lo_us,ci95_median_hi_us,mean_us,ci95_mean_lo_us,ci95_mean_hi_us,max_us,std_dev_us,p90_us,p99_us,p999_us,rate_median_mb_s,cut_coef,kept,removed,filtered_median_us,filtered_mean_us";

/// A text cell, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A number cell: exact, empty when undefined.
fn num(x: f64) -> String {
    number(x, Style::Exact, CSV_UNDEFINED)
}

/// The columns a queue benchmark's document adds after [`HEADER`].
pub const QUEUE_COLUMNS: &str = "queue_length,traversed_pct,traversed";

/// An optional count: empty when absent.
fn count<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |x| x.to_string())
}

/// One CSV row per point (times in us as the pattern defines them: the one-way time of a
/// ping-pong, the time per exchange, per message of a window, per transpose; rates in MB/s;
/// an undefined value is empty). A queue benchmark's document has three more columns,
/// [`QUEUE_COLUMNS`] (`traversed_pct` and `traversed` empty for the unexpected queue). The
/// rows hold no fitted models.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Csv;

impl Renderer for Csv {
    fn render(&self, doc: &ResultDoc, _fits: &[FitSection]) -> Result<String> {
        Ok(rows(doc))
    }
}

/// The header and one row per point.
fn rows(doc: &ResultDoc) -> String {
    let mut s = String::new();
    let queue = doc.points.iter().any(|p| p.queue_length.is_some());
    if queue {
        let _ = writeln!(s, "{HEADER},{QUEUE_COLUMNS}");
    } else {
        let _ = writeln!(s, "{HEADER}");
    }
    for p in &doc.points {
        let o = &p.one_way_us;
        let f = &p.filtered;
        let cells = [
            field(&p.pattern),
            field(&p.backend),
            p.size.to_string(),
            p.npp.to_string(),
            p.trials.to_string(),
            num(o.min),
            num(o.median),
            num(o.ci95_median.lo),
            num(o.ci95_median.hi),
            num(o.mean),
            num(o.ci95_mean.lo),
            num(o.ci95_mean.hi),
            num(o.max),
            num(o.std_dev),
            num(o.p90),
            num(o.p99),
            num(o.p999),
            num(p.rate_mb_s.median),
            num(f.cut_coef),
            f.kept.to_string(),
            f.removed.to_string(),
            num(f.one_way_us.median),
            num(f.one_way_us.mean),
        ];
        let _ = write!(s, "{}", cells.join(","));
        if queue {
            let _ = write!(
                s,
                ",{},{},{}",
                count(p.queue_length),
                count(p.traversed_pct),
                count(p.traversed)
            );
        }
        let _ = writeln!(s);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_columns() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("plain"), "plain");
        assert_eq!(num(f64::NAN), "");
        assert_eq!(HEADER.split(',').count(), 23);
    }

    #[test]
    fn queue_points_add_their_columns() {
        use crate::analysis::testkit::{doc, point_of};
        let plain = Csv
            .render(&doc(vec![point_of("pingpong", 8, vec![100; 5])]), &[])
            .unwrap();
        assert!(!plain.contains("queue_length"));
        let mut q = point_of("queue_posted", 8, vec![100; 5]);
        q.queue_length = Some(200);
        q.traversed_pct = Some(25);
        q.traversed = Some(50);
        let mut u = point_of("queue_unexpected", 8, vec![100; 5]);
        u.queue_length = Some(7);
        let out = Csv.render(&doc(vec![q, u]), &[]).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].ends_with(",queue_length,traversed_pct,traversed"));
        assert!(lines[1].ends_with(",200,25,50"), "{}", lines[1]);
        assert!(lines[2].ends_with(",7,,"), "{}", lines[2]);
        for l in &lines {
            assert_eq!(l.split(',').count(), 26);
        }
    }
}
