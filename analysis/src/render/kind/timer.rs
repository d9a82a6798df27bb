//! The timer's characterisation as text (Luecke et al. 2009 §3.1 and Appendix A): the report
//! of `commbench timer`, and the `TIMER` section of a document's summary and full outputs.

use crate::analysis::document::TimerSection;
use crate::render::number::{text, Style};
use crate::render::words::{bins, Detail};
use commbench_core::method::timer::TimerReport;
use std::fmt::Write;

/// A clock reading in nanoseconds: a whole number as it is (`40`, `146286`), a fraction
/// with four significant digits.
pub(crate) fn ns(x: f64) -> String {
    if x.fract() == 0.0 {
        text(x, Style::Decimals(0))
    } else {
        text(x, Style::Significant)
    }
}

/// The clock's backward steps in words, `None` when it never stepped back.
pub fn backward_words(t: &TimerReport) -> Option<String> {
    (t.backward_steps > 0).then(|| {
        format!(
            "the clock stepped backwards in {} of the {} pairs: left out of min_ov, res_timing \
             and the statistics",
            t.backward_steps, t.samples
        )
    })
}

/// `commbench timer`: the clock's overhead and resolution (Luecke et al. 2009 §3.1) and its
/// distribution (Appendix A).
pub fn report(t: &TimerReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "TIMER: {} ({} back-to-back read pairs, Luecke et al. 2009 §3.1)",
        t.clock, t.samples
    );
    let _ = writeln!(
        s,
        "  minimum overhead min_ov  = {} ns",
        ns(t.min_overhead_ns)
    );
    let _ = writeln!(s, "  resolution res_timing    = {} ns", ns(t.resolution_ns));
    let _ = writeln!(
        s,
        "  clock stepped backwards  = {} of the pairs{}",
        t.backward_steps,
        if t.backward_steps > 0 {
            " (left out of every figure here)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "  median / average / max   = {} / {} / {} ns",
        ns(t.median_ns),
        text(t.mean_ns, Style::Decimals(2)),
        ns(t.max_ns)
    );
    let _ = writeln!(
        s,
        "  standard deviation       = {} ns",
        text(t.std_dev_ns, Style::Decimals(2))
    );
    if let Some(c) = t.claimed_resolution_ns {
        let _ = writeln!(
            s,
            "  resolution the OS claims = {} ns (clock_getres)",
            ns(c)
        );
    }
    distribution(&mut s, t);
    s
}

/// Appendix A: the binned distribution and the frequency of each distinct value.
pub fn distribution(out: &mut String, t: &TimerReport) {
    let h = &t.histogram;
    let _ = writeln!(
        out,
        "  DISTRIBUTION OF TIMES FROM THE TIMER OVERHEAD MEASUREMENTS (ns)"
    );
    bins(out, (0.0, h.bin_width), &h.counts, h.overflow, &ns);
    let _ = writeln!(
        out,
        "  FREQUENCY OF TIMES FROM THE TIMER OVERHEAD MEASUREMENTS (ns)"
    );
    for (v, c) in &t.frequencies {
        let _ = writeln!(out, "    time = {} with frequency = {c}", ns(*v));
    }
    if t.frequencies_omitted > 0 {
        let _ = writeln!(
            out,
            "    ({} larger distinct values not listed)",
            t.frequencies_omitted
        );
    }
}

/// The `TIMER` section of the summary and full outputs: the clock, its overhead and
/// resolution, its median, mean, maximum and spread, and in `Full` its distribution.
pub fn section(out: &mut String, t: &TimerSection, detail: Detail) {
    let _ = writeln!(
        out,
        "TIMER ({}, {} back-to-back read pairs, Luecke et al. 2009 §3.1)",
        t.detail.clock, t.samples
    );
    let _ = writeln!(
        out,
        "  minimum overhead min_ov = {} ns   resolution res_timing = {} ns",
        ns(t.min_overhead_ns),
        ns(t.resolution_ns)
    );
    let _ = writeln!(
        out,
        "  median = {} ns   average = {} ns   maximum = {} ns   std dev = {} ns",
        ns(t.detail.median_ns),
        text(t.detail.mean_ns, Style::Decimals(2)),
        ns(t.detail.max_ns),
        text(t.detail.std_dev_ns, Style::Decimals(2))
    );
    if let Some(w) = backward_words(&t.detail) {
        let _ = writeln!(out, "  {w}");
    }
    if detail == Detail::Full {
        distribution(out, &t.detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit;
    use crate::render::kind::sweep;
    use commbench_core::method::timer::report_from_counts;

    /// A clock with overhead 40 ns that stepped back in `back` of its 1000 pairs.
    fn stepping(back: u64) -> TimerReport {
        let mut t = report_from_counts("c".into(), 1000, &[(40, 1000 - back)], None);
        t.backward_steps = back;
        t
    }

    #[test]
    fn timer_report_counts_backward_steps() {
        let r = report(&stepping(0));
        assert!(
            r.contains("clock stepped backwards  = 0 of the pairs\n"),
            "{r}"
        );
        let r = report(&stepping(3));
        assert!(
            r.contains("clock stepped backwards  = 3 of the pairs (left out of every figure here)"),
            "{r}"
        );
        let mut out = String::new();
        section(&mut out, &stepping(3).into(), Detail::Summary);
        assert!(
            out.contains("the clock stepped backwards in 3 of the 1000 pairs: left out"),
            "{out}"
        );
        let mut out = String::new();
        section(&mut out, &stepping(0).into(), Detail::Summary);
        assert!(!out.contains("backwards"), "{out}");
    }

    /// The default report says what was subtracted from every trial, and warns of a clock
    /// that stepped back.
    #[test]
    fn table_report_names_what_was_subtracted() {
        let mut doc = testkit::sweep(1.0);
        doc.timer = Some(stepping(2).into());
        let mut out = String::new();
        sweep::table_report(&mut out, &doc, &[]);
        assert!(
            out.contains("overhead min_ov 40 ns (subtracted from every trial)"),
            "{out}"
        );
        assert!(
            out.contains("! timer: the clock stepped backwards in 2 of the 1000 pairs"),
            "{out}"
        );
        doc.timer = Some(stepping(0).into());
        let mut out = String::new();
        sweep::table_report(&mut out, &doc, &[]);
        assert!(!out.contains("backwards"), "{out}");
    }
}
