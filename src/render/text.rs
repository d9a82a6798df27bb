//! Text reports in the spirit of seed 000 Appendix C (the summary) and §5 (the full output,
//! which adds the distributions of Appendices A and B).

use crate::analysis::document::{Environment, Point, ResultDoc};
use crate::render::format::{text, Style};
use crate::spec::format_size;
use commbench_core::method::timer::TimerReport;
use commbench_core::stats::Summary;
use std::fmt::Write;

/// How much to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Appendix C: parameters, timing results, statistics, rates, filtered results.
    Summary,
    /// The summary plus the timer distribution and each point's distribution.
    Full,
}

/// A statistic as seed 000 prints it (`0.1463E+00`): scientific with four decimals.
fn e(x: f64) -> String {
    text(x, Style::Scientific)
}

/// A rate or time with four significant digits.
fn sig(x: f64) -> String {
    text(x, Style::Significant)
}

fn time_definition(p: &Point) -> String {
    match p.pattern.as_str() {
        "pingpong" => "one-way time = trial / (2 npp)".to_string(),
        "exchange" => "exchange time = trial / (2 npp)".to_string(),
        _ => format!("time per message = trial / ({} npp)", p.trips_per_iteration),
    }
}

fn stats_block(out: &mut String, s: &Summary, title: &str, def: &str) {
    let _ = writeln!(out, "  {title} ({def}, microseconds)");
    let _ = writeln!(out, "    minimum time             = {:.4}", s.min);
    let _ = writeln!(out, "    median time              = {:.4}", s.median);
    let _ = writeln!(out, "    average time             = {:.4}", s.mean);
    let _ = writeln!(out, "    maximum time             = {:.4}", s.max);
    let _ = writeln!(
        out,
        "    p90 / p99 / p99.9        = {:.4} / {:.4} / {:.4}",
        s.p90, s.p99, s.p999
    );
    let _ = writeln!(
        out,
        "    95% CI of the median     = [{:.4}, {:.4}]",
        s.ci95_median.lo, s.ci95_median.hi
    );
    let _ = writeln!(
        out,
        "    95% CI of the mean       = [{:.4}, {:.4}]",
        s.ci95_mean.lo, s.ci95_mean.hi
    );
    let _ = writeln!(out, "    variance                 = {}", e(s.variance));
    let _ = writeln!(out, "    standard deviation       = {}", e(s.std_dev));
    let _ = writeln!(
        out,
        "    coefficient of variation = {} ({:.2} %)",
        e(s.cv),
        s.cv * 100.0
    );
    let _ = writeln!(out, "    standard error           = {}", e(s.std_err));
    let _ = writeln!(out, "    relative standard error  = {}", e(s.rel_std_err));
}

/// The four rates of `v` (from the minimum, median, mean and maximum time) on one line.
fn four_rates(out: &mut String, v: [f64; 4]) {
    let _ = writeln!(
        out,
        "    {} / {} / {} / {}",
        sig(v[0]),
        sig(v[1]),
        sig(v[2]),
        sig(v[3])
    );
}

/// Appendix C's communication rates, and for the streaming patterns the message rates.
fn rates(out: &mut String, p: &Point) {
    let r = &p.rate_mb_s;
    let _ = writeln!(out, "  COMMUNICATION RATES (MB/s = 10^6 bytes/s) using minimum / median / average / maximum time");
    four_rates(out, [r.min, r.median, r.mean, r.max]);
    if p.pattern.contains("bandwidth") {
        let mps = |t: f64| if t > 0.0 { 1e6 / t } else { 0.0 };
        let s = &p.one_way_us;
        let _ = writeln!(
            out,
            "  MESSAGE RATES (messages/s) using minimum / median / average / maximum time"
        );
        four_rates(out, [mps(s.min), mps(s.median), mps(s.mean), mps(s.max)]);
    }
}

/// The full output's distribution of one point: its bins and its smallest distinct times.
fn distribution(out: &mut String, p: &Point) {
    let d = &p.distribution_us;
    let _ = writeln!(out, "  DISTRIBUTION OF ONE-WAY TIMES (us)");
    if d.underflow > 0 {
        let _ = writeln!(
            out,
            "    times < {:.4} with count = {}",
            d.origin, d.underflow
        );
    }
    for (k, c) in d.counts.iter().enumerate() {
        let lo = d.origin + k as f64 * d.bin_width;
        let _ = writeln!(
            out,
            "    {:10.4} <= times < {:10.4} with count = {c}",
            lo,
            lo + d.bin_width
        );
    }
    let _ = writeln!(
        out,
        "    {:10.4} <= times with count = {}",
        d.origin + d.counts.len() as f64 * d.bin_width,
        d.overflow
    );
    let _ = writeln!(
        out,
        "  FREQUENCY OF ONE-WAY TIMES (us, smallest {} distinct values)",
        p.frequencies_us.len()
    );
    for (t, c) in &p.frequencies_us {
        let _ = writeln!(out, "    time = {t:.4} with frequency = {c}");
    }
}

/// Render one point.
pub fn point(out: &mut String, p: &Point, detail: Detail) {
    let _ = writeln!(
        out,
        "\n{} of {} ({} bytes) over {}",
        p.pattern,
        format_size(p.size),
        p.size,
        p.backend
    );
    match p.npp_calculated {
        Some(c) => {
            let _ = writeln!(out, "  calculated value of npp = {c}   value of npp used = {}   (median_ppt = {:.1} ns)", p.npp, p.median_ppt_ns.unwrap_or(f64::NAN));
        }
        None => {
            let _ = writeln!(out, "  value of npp used = {} (fixed)", p.npp);
        }
    }
    let _ = writeln!(out, "  timing trials = {}", p.trials);
    let def = time_definition(p);
    stats_block(out, &p.one_way_us, "TIMING RESULTS AND STATISTICS", &def);
    rates(out, p);
    let f = &p.filtered;
    let _ = writeln!(
        out,
        "  FILTERED: cut-off coefficient = {:.4}, trials kept = {}, removed = {}",
        f.cut_coef, f.kept, f.removed
    );
    stats_block(
        out,
        &f.one_way_us,
        "FILTERED TIMING RESULTS AND STATISTICS",
        &def,
    );
    if detail == Detail::Full {
        distribution(out, p);
    }
}

/// Render the whole document.
pub fn render(doc: &ResultDoc, detail: Detail) -> String {
    let mut out = String::new();
    let env = &doc.environment;
    let _ = writeln!(
        out,
        "commbench {}: {}",
        doc.tool_version,
        doc.command.join(" ")
    );
    let _ = writeln!(out, "PROGRAM PARAMETERS");
    let _ = writeln!(
        out,
        "  backend = {} ({} ranks, started by {})",
        env.backend, env.ranks, env.launcher
    );
    if let Some(c) = &doc.config {
        let _ = writeln!(
            out,
            "  ping-pongs between ranks source = {} and dest = {}",
            c.method.source, c.method.dest
        );
    }
    if !env.backend_info.is_empty() {
        let info: Vec<String> = env
            .backend_info
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(out, "  backend settings: {}", info.join(", "));
    }
    let _ = writeln!(out, "  {}", host_line(env, " = "));
    if let Some(t) = &doc.timer {
        let _ = writeln!(
            out,
            "TIMER ({}, {} back-to-back read pairs, seed 000 section 3.1)",
            t.detail.clock, t.samples
        );
        let _ = writeln!(
            out,
            "  minimum overhead min_ov = {} ns   resolution res_timing = {} ns",
            t.min_overhead_ns, t.resolution_ns
        );
        let _ = writeln!(
            out,
            "  median = {} ns   average = {:.2} ns   maximum = {} ns   std dev = {:.2} ns",
            t.detail.median_ns, t.detail.mean_ns, t.detail.max_ns, t.detail.std_dev_ns
        );
        if detail == Detail::Full {
            timer_distribution(&mut out, &t.detail);
        }
    }
    for p in &doc.points {
        point(&mut out, p, detail);
    }
    npp_study(&mut out, &doc.points);
    side_by_side(&mut out, &doc.points);
    if let Some(f) = &doc.fit {
        out.push('\n');
        crate::render::fit::fit_section(&mut out, f);
    }
    if let Some(err) = &doc.error {
        let _ = writeln!(
            out,
            "\nRUN FAILED after {} point(s): {err}",
            doc.points.len()
        );
    }
    let _ = writeln!(out, "\nprogram time = {:.3} s", doc.wall_s);
    out
}

/// `host = H, cpu = C, kernel = K` with `sep` between each name and its value.
pub(crate) fn host_line(env: &Environment, sep: &str) -> String {
    format!(
        "host{sep}{}, cpu{sep}{}, kernel{sep}{}",
        env.hostname.as_deref().unwrap_or("?"),
        env.cpu_model.as_deref().unwrap_or("?"),
        env.kernel.as_deref().unwrap_or("?")
    )
}

/// `commbench timer`: the clock's overhead and resolution (seed 000 §3.1) and its
/// distribution (Appendix A).
pub fn timer_report(t: &TimerReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "TIMER: {} ({} back-to-back read pairs, seed 000 section 3.1)",
        t.clock, t.samples
    );
    let _ = writeln!(s, "  minimum overhead min_ov  = {} ns", t.min_overhead_ns);
    let _ = writeln!(s, "  resolution res_timing    = {} ns", t.resolution_ns);
    let _ = writeln!(
        s,
        "  median / average / max   = {} / {:.2} / {} ns",
        t.median_ns, t.mean_ns, t.max_ns
    );
    let _ = writeln!(s, "  standard deviation       = {:.2} ns", t.std_dev_ns);
    if let Some(c) = t.claimed_resolution_ns {
        let _ = writeln!(s, "  resolution the OS claims = {c} ns (clock_getres)");
    }
    timer_distribution(&mut s, t);
    s
}

/// Appendix A: the binned distribution and the frequency of each distinct value.
pub fn timer_distribution(out: &mut String, t: &TimerReport) {
    let h = &t.histogram;
    let _ = writeln!(
        out,
        "  DISTRIBUTION OF TIMES FROM THE TIMER OVERHEAD MEASUREMENTS (ns)"
    );
    for (k, c) in h.counts.iter().enumerate() {
        let lo = k as f64 * h.bin_width;
        let _ = writeln!(
            out,
            "    {:10} <= times < {:10} with count = {c}",
            lo,
            lo + h.bin_width
        );
    }
    let _ = writeln!(
        out,
        "    {:10} <= times with count = {}",
        h.counts.len() as f64 * h.bin_width,
        h.overflow
    );
    let _ = writeln!(
        out,
        "  FREQUENCY OF TIMES FROM THE TIMER OVERHEAD MEASUREMENTS (ns)"
    );
    for (v, c) in &t.frequencies {
        let _ = writeln!(out, "    time = {v} with frequency = {c}");
    }
    if t.frequencies_omitted > 0 {
        let _ = writeln!(
            out,
            "    ({} larger distinct values not listed)",
            t.frequencies_omitted
        );
    }
}

/// A row of the npp study: its label and the statistic it shows.
type Row = (&'static str, fn(&Summary) -> f64);

/// Seed 000 Tables 4.1-4.3: for each size measured with several fixed npp values, one column
/// per npp and one row per statistic of the one-way time (us).
pub fn npp_study(out: &mut String, points: &[Point]) {
    let mut keys: Vec<(&str, u64)> = Vec::new();
    for p in points {
        if !keys.contains(&(p.pattern.as_str(), p.size)) {
            keys.push((p.pattern.as_str(), p.size));
        }
    }
    for (pattern, size) in keys {
        let cols: Vec<&Point> = points
            .iter()
            .filter(|p| p.pattern == pattern && p.size == size && p.npp_calculated.is_none())
            .collect();
        if cols.len() < 2 {
            continue;
        }
        let _ = writeln!(
            out,
            "\nNPP STUDY: {pattern} of {}, one-way times in microseconds (seed 000 Tables 4.1-4.3)",
            format_size(size)
        );
        let mut line = format!("  {:20}", "npp =");
        for p in &cols {
            let _ = write!(line, "{:>12}", p.npp);
        }
        let _ = writeln!(out, "{line}");
        let rows: [Row; 6] = [
            ("minimum time", |s| s.min),
            ("median time", |s| s.median),
            ("average time", |s| s.mean),
            ("maximum time", |s| s.max),
            ("variance", |s| s.variance),
            ("standard deviation", |s| s.std_dev),
        ];
        for (name, f) in rows {
            let mut line = format!("  {name:20}");
            for p in &cols {
                let _ = write!(line, "{:>12}", sig(f(&p.one_way_us)));
            }
            let _ = writeln!(out, "{line}");
        }
    }
}

/// Several backends measured between the same ranks: per pattern and size, each backend's
/// median time (us) and its ratio to the first backend's, with the 95% CI of each median.
pub fn side_by_side(out: &mut String, points: &[Point]) {
    let mut backends: Vec<&str> = Vec::new();
    let mut keys: Vec<(&str, u64)> = Vec::new();
    for p in points {
        if !backends.contains(&p.backend.as_str()) {
            backends.push(&p.backend);
        }
        if !keys.contains(&(p.pattern.as_str(), p.size)) {
            keys.push((p.pattern.as_str(), p.size));
        }
    }
    if backends.len() < 2 {
        return;
    }
    let _ = writeln!(
        out,
        "\nSIDE BY SIDE (median time per message in us [95% CI]; ratio to {})",
        backends[0]
    );
    let mut head = format!("  {:24}", "pattern / size");
    for b in &backends {
        let _ = write!(head, "{:>34}", b);
    }
    let _ = writeln!(out, "{head}");
    for (pattern, size) in keys {
        let find = |b: &str| {
            points
                .iter()
                .find(|p| p.pattern == pattern && p.size == size && p.backend == b)
        };
        let base = find(backends[0]).map(|p| p.one_way_us.median);
        let mut line = format!("  {:24}", format!("{pattern} {}", format_size(size)));
        for b in &backends {
            let cell = match find(b) {
                Some(p) => {
                    let s = &p.one_way_us;
                    let ratio = match base {
                        Some(m) if m > 0.0 => format!("x{:.2}", s.median / m),
                        _ => "-".to_string(),
                    };
                    format!(
                        "{} [{}, {}] {ratio}",
                        sig(s.median),
                        sig(s.ci95_median.lo),
                        sig(s.ci95_median.hi)
                    )
                }
                None => "-".to_string(),
            };
            let _ = write!(line, "{cell:>34}");
        }
        let _ = writeln!(out, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Documents and their reports as commbench 0.1.0 wrote them before the run configuration
    /// was typed (`analysis::document`'s tests read them field by field).
    const EARLIER: [(&str, &str); 2] = [
        (
            include_str!("../analysis/testdata/v0.1-sweep.json"),
            include_str!("../analysis/testdata/v0.1-sweep.txt"),
        ),
        (
            include_str!("../analysis/testdata/v0.1-fixed-npp.json"),
            include_str!("../analysis/testdata/v0.1-fixed-npp.txt"),
        ),
    ];

    #[test]
    fn earlier_documents_render_as_before() {
        for (json, text) in EARLIER {
            let doc = ResultDoc::read_json(json).unwrap();
            assert_eq!(render(&doc, Detail::Summary), text);
        }
    }
}
