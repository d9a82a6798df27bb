//! Text reports. By default a table, one line per size, in the spirit of OSU's
//! `# Size Latency (us)` with the median's 95% CI; the summary (Luecke et al. 2009,
//! Appendix C) and the full output (the summary plus the distributions of Appendices A and B)
//! give every statistic of every size.
//!
//! Every report says what its times are for the pattern measured ([`Measured`]): a one-way
//! time is half a ping-pong's round trip, an exchange's time is that of one simultaneous
//! exchange, a streaming time is per message in a window, a transpose's time is that of the
//! whole (verified) transpose.

use crate::analysis::document::{Environment, Point, ResultDoc, RunConfig};
use crate::analysis::model::FitSection;
use crate::render::format::{text, Style};
use crate::spec::format_size;
use commbench_core::method::buffers::{BufferReuse, CacheState};
use commbench_core::method::engine::PointBuffers;
use commbench_core::method::sixtimes::{rate_streams, Experiment};
use commbench_core::method::timer::TimerReport;
use commbench_core::method::NppChoice;
use commbench_core::stats::Summary;
use std::fmt::Write;

/// How much to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// A table per pattern and backend, one line per size (min, median with its 95% CI,
    /// mean, p99, max, MB/s, trials kept and removed), and the fitted models in brief.
    Table,
    /// Luecke et al. (2009) Appendix C for every size: parameters, timing results and
    /// statistics, rates, filtered results; and the fitted models in full.
    Summary,
    /// The summary plus the timer's distribution and each size's distribution.
    Full,
}

/// The line under every report: what a confidence interval here does and does not cover.
pub const CI_NOTE: &str = "95% CIs describe this run only; run-to-run variation is not \
included (compare several runs with `commbench compare`)";

/// A statistic as Luecke et al. print it (`0.1463E+00`): scientific with four decimals.
fn e(x: f64) -> String {
    text(x, Style::Scientific)
}

/// A rate or time with four significant digits.
fn sig(x: f64) -> String {
    text(x, Style::Significant)
}

/// A time in microseconds with four decimals (more below 1 us).
fn us(x: f64) -> String {
    text(x, Style::Decimals(4))
}

/// A table cell.
fn col(x: f64) -> String {
    text(x, Style::Column)
}

/// A clock reading in nanoseconds: a whole number as it is (`40`, `146286`), a fraction
/// with four significant digits.
fn ns(x: f64) -> String {
    if x.fract() == 0.0 {
        text(x, Style::Decimals(0))
    } else {
        text(x, Style::Significant)
    }
}

/// `1 byte`, `8 bytes`, `4096 bytes (4 KiB)`.
pub fn size_words(n: u64) -> String {
    let short = format_size(n);
    match n {
        1 => "1 byte".to_string(),
        _ if short.ends_with(" B") => format!("{n} bytes"),
        _ => format!("{n} bytes ({short})"),
    }
}

/// What the times of one pattern are, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    /// Its name in headings: `ping-pong`, `exchange`, ...
    pub name: String,
    /// The name with where it comes from: `ping-pong (Hockney's COMMS1)`.
    pub cited: String,
    /// What one iteration does: `source sends, dest returns the message`.
    pub how: String,
    /// The time reported: `one-way time (half a round trip)`.
    pub quantity: String,
    /// The same in the plural, for headings: `one-way times`.
    pub plural: &'static str,
    /// How it comes from a trial's time: `trial / (2 npp)`.
    pub formula: String,
    /// What a rate counts: empty, or ` per direction`.
    pub rate_per: &'static str,
    /// For a kernel whose result is checked, what was checked and whether it held.
    pub verified: Option<String>,
}

/// The window of a streaming pattern across `points`: `W` or `W1 to W2`.
fn window_words(points: &[&Point]) -> String {
    let lo = points
        .iter()
        .map(|p| p.trips_per_iteration)
        .min()
        .unwrap_or(0);
    let hi = points
        .iter()
        .map(|p| p.trips_per_iteration)
        .max()
        .unwrap_or(0);
    if lo == hi {
        format!("{hi}")
    } else {
        format!("{hi} (down to {lo} for the largest sizes)")
    }
}

/// The order `N` of a transpose's `N x N` matrix: from the configuration, else from the
/// matrix's bytes.
fn transpose_n(points: &[&Point], config: Option<&RunConfig>) -> u64 {
    if let Some(n) = config.and_then(|c| c.transpose_n) {
        return n as u64;
    }
    let doubles = points.first().map_or(0, |p| p.size / 8);
    (doubles as f64).sqrt().round() as u64
}

/// The time a point of `pattern` reports, in a few words for axes and headings: `one-way
/// time`, `time per exchange`, `time per message`, `time per transpose`.
pub fn time_noun(pattern: &str) -> &'static str {
    match pattern {
        "pingpong" => "one-way time",
        "exchange" => "time per exchange",
        p if p.starts_with("transpose") => "time per transpose",
        _ => "time per message",
    }
}

/// A [`Measured`] of every kernel without a rate per direction or a verification.
fn plain(
    name: &str,
    cited: &str,
    how: String,
    quantity: String,
    plural: &'static str,
    formula: &str,
) -> Measured {
    Measured {
        name: name.to_string(),
        cited: cited.to_string(),
        how,
        quantity,
        plural,
        formula: formula.to_string(),
        rate_per: "",
        verified: None,
    }
}

/// What the times of `pattern` are, for its `points` (one pattern, any backends) in `doc`.
pub fn measured(pattern: &str, points: &[&Point], doc: &ResultDoc) -> Measured {
    match pattern {
        "pingpong" => plain(
            "ping-pong",
            "ping-pong (Hockney's COMMS1)",
            "source sends, dest returns the message".into(),
            "one-way time (half a round trip)".into(),
            "one-way times",
            "trial / (2 npp)",
        ),
        "exchange" => Measured {
            rate_per: " per direction",
            ..plain(
                "exchange",
                "exchange (Hockney's COMMS2)",
                "both ranks send to each other at once, then return the messages".into(),
                "time per exchange (both ranks send one message at once)".into(),
                "times per exchange",
                "trial / (2 npp)",
            )
        },
        "queue_posted" => plain(
            "pre-posted receive queue",
            "pre-posted receive queue (Underwood & Brightwell §3.1)",
            "receives pre-posted in front of and behind the matching one; source sends, dest \
             returns the message"
                .into(),
            "one-way time (half a round trip)".into(),
            "one-way times",
            "trial / (2 npp)",
        ),
        "queue_unexpected" => plain(
            "unexpected message queue",
            "unexpected message queue (Underwood & Brightwell §3.2)",
            "unexpected messages queued at both ranks; source sends, then posts its receive \
             (counted), dest returns the message"
                .into(),
            "one-way time (half a round trip, receive post included)".into(),
            "one-way times",
            "trial / (2 npp)",
        ),
        "bandwidth" | "bibandwidth" => streaming(pattern, points),
        "transpose-pack" | "transpose-vector" => transpose(pattern, points, doc),
        p if Experiment::from_name(p).is_some() || rate_streams(p).is_some() => seed001(p),
        other => {
            let trips = points.first().map_or(1, |p| p.trips_per_iteration);
            plain(
                other,
                other,
                String::new(),
                "time per message".into(),
                "times per message",
                &format!("trial / ({trips} npp)"),
            )
        }
    }
}

/// Streaming, one way or both: a window of sends, then an acknowledgement.
fn streaming(pattern: &str, points: &[&Point]) -> Measured {
    let w = window_words(points);
    if pattern == "bandwidth" {
        return plain(
            "bandwidth",
            "streaming bandwidth",
            format!(
                "source keeps a window of {w} sends outstanding, dest acknowledges each window"
            ),
            format!("time per message in a window of {w}"),
            "times per message",
            "trial / (window x npp), acknowledgement included",
        );
    }
    Measured {
        rate_per: " per direction",
        ..plain(
            "bidirectional bandwidth",
            "bidirectional streaming bandwidth",
            format!("each rank keeps a window of {w} sends and receives outstanding"),
            format!("time per message and direction in a window of {w}"),
            "times per message",
            "trial / (window x npp)",
        )
    }
}

/// The Janus report's column transpose, packed or with MPI's vector datatype, verified.
fn transpose(pattern: &str, points: &[&Point], doc: &ResultDoc) -> Measured {
    let n = transpose_n(points, doc.config.as_ref());
    let (variant, how) = if pattern == "transpose-pack" {
        ("packed", "each column packed into a buffer")
    } else {
        (
            "MPI vector datatype",
            "each column sent with an MPI derived vector datatype",
        )
    };
    let verified = match &doc.error {
        None => "verified: after the trials dest's matrix was overwritten, one more transpose \
                 ran, and dest found every element of B equal to A^T"
            .to_string(),
        Some(_) => "verification not confirmed: the run failed (see the error below)".to_string(),
    };
    Measured {
        verified: Some(verified),
        ..plain(
            &format!("transpose ({variant})"),
            &format!(
                "column transpose of a {n} x {n} matrix of doubles, {variant} (the Janus cluster \
                 report)"
            ),
            format!(
                "source sends the matrix one column per message, {how}; dest stores the columns \
                 as rows"
            ),
            format!(
                "time per transpose ({n} messages of {}, then an 8-byte acknowledgement)",
                size_words(n * 8)
            ),
            "times per transpose",
            "trial / npp",
        )
    }
}

/// One of Krumme & Greenfield's experiments: each reading times npp iterations of it
/// (docs/seed001.md §2).
fn seed001(pattern: &str) -> Measured {
    plain(
        pattern,
        &format!("{pattern} (Krumme & Greenfield 1988)"),
        String::new(),
        "time per iteration of the experiment".into(),
        "times per iteration",
        "trial / npp",
    )
}

impl Measured {
    /// The pattern, where it comes from and what it does, in one line.
    pub fn title(&self) -> String {
        if self.how.is_empty() {
            self.cited.clone()
        } else {
            format!("{}: {}", self.cited, self.how)
        }
    }
}

/// The patterns of `points` in the order measured, each with its points.
pub(crate) fn by_pattern(points: &[Point]) -> Vec<(&str, Vec<&Point>)> {
    let mut groups: Vec<(&str, Vec<&Point>)> = Vec::new();
    for p in points {
        match groups.iter_mut().find(|(k, _)| *k == p.pattern) {
            Some((_, v)) => v.push(p),
            None => groups.push((&p.pattern, vec![p])),
        }
    }
    groups
}

/// The backends of `points` in the order measured.
fn backends_of(points: &[Point]) -> Vec<&str> {
    let mut b: Vec<&str> = Vec::new();
    for p in points {
        if !b.contains(&p.backend.as_str()) {
            b.push(&p.backend);
        }
    }
    b
}

fn stats_block(out: &mut String, s: &Summary, title: &str, m: &Measured) {
    let _ = writeln!(
        out,
        "  {title} ({} = {}, microseconds)",
        m.quantity, m.formula
    );
    let _ = writeln!(out, "    minimum time             = {}", us(s.min));
    let _ = writeln!(out, "    median time              = {}", us(s.median));
    let _ = writeln!(out, "    average time             = {}", us(s.mean));
    let _ = writeln!(out, "    maximum time             = {}", us(s.max));
    let _ = writeln!(
        out,
        "    p90 / p99 / p99.9        = {} / {} / {}",
        us(s.p90),
        us(s.p99),
        us(s.p999)
    );
    let _ = writeln!(
        out,
        "    95% CI of the median     = [{}, {}]",
        us(s.ci95_median.lo),
        us(s.ci95_median.hi)
    );
    let _ = writeln!(
        out,
        "    95% CI of the mean       = [{}, {}]",
        us(s.ci95_mean.lo),
        us(s.ci95_mean.hi)
    );
    let _ = writeln!(out, "    variance                 = {} us^2", e(s.variance));
    let _ = writeln!(out, "    standard deviation       = {} us", e(s.std_dev));
    let _ = writeln!(
        out,
        "    coefficient of variation = {} ({} %)",
        e(s.cv),
        text(s.cv * 100.0, Style::Decimals(2))
    );
    let _ = writeln!(out, "    standard error           = {} us", e(s.std_err));
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
fn rates(out: &mut String, p: &Point, m: &Measured) {
    let r = &p.rate_mb_s;
    let _ = writeln!(
        out,
        "  COMMUNICATION RATES (MB/s = 10^6 bytes/s{}) using minimum / median / average / \
         maximum time",
        m.rate_per
    );
    four_rates(out, [r.min, r.median, r.mean, r.max]);
    if p.pattern.contains("bandwidth") {
        let mps = |t: f64| if t > 0.0 { 1e6 / t } else { 0.0 };
        let s = &p.one_way_us;
        let _ = writeln!(
            out,
            "  MESSAGE RATES (messages/s{}) using minimum / median / average / maximum time",
            m.rate_per
        );
        four_rates(out, [mps(s.min), mps(s.median), mps(s.mean), mps(s.max)]);
    }
}

/// The full output's distribution of one point: its bins and its smallest distinct times.
fn distribution(out: &mut String, p: &Point, m: &Measured) {
    let d = &p.distribution_us;
    let plural = m.plural.to_uppercase();
    let _ = writeln!(out, "  DISTRIBUTION OF {plural} (us)");
    if d.underflow > 0 {
        let _ = writeln!(
            out,
            "    times < {} with count = {}",
            us(d.origin),
            d.underflow
        );
    }
    for (k, c) in d.counts.iter().enumerate() {
        let lo = d.origin + k as f64 * d.bin_width;
        let _ = writeln!(
            out,
            "    {:>10} <= times < {:>10} with count = {c}",
            us(lo),
            us(lo + d.bin_width)
        );
    }
    let _ = writeln!(
        out,
        "    {:>10} <= times with count = {}",
        us(d.origin + d.counts.len() as f64 * d.bin_width),
        d.overflow
    );
    let _ = writeln!(
        out,
        "  FREQUENCY OF {plural} (us, smallest {} distinct values)",
        p.frequencies_us.len()
    );
    for (t, c) in &p.frequencies_us {
        let _ = writeln!(out, "    time = {} with frequency = {c}", us(*t));
    }
}

/// Render one point as Appendix C does (and, in `Full`, its distribution).
pub fn point(out: &mut String, p: &Point, m: &Measured, detail: Detail) {
    let queue = p
        .queue_words()
        .map_or_else(String::new, |q| format!(", queue {q}"));
    let _ = writeln!(
        out,
        "\n{} of {} over {}{queue}",
        m.name,
        size_words(p.size),
        p.backend
    );
    match p.npp_calculated {
        Some(c) => {
            let _ = writeln!(
                out,
                "  calculated value of npp = {c}   value of npp used = {}   (median_ppt = {} ns)",
                p.npp,
                text(p.median_ppt_ns.unwrap_or(f64::NAN), Style::Decimals(1))
            );
        }
        None => {
            let _ = writeln!(out, "  value of npp used = {} (fixed)", p.npp);
        }
    }
    let _ = writeln!(out, "  timing trials = {}", p.trials);
    stats_block(out, &p.one_way_us, "TIMING RESULTS AND STATISTICS", m);
    rates(out, p, m);
    let f = &p.filtered;
    let _ = writeln!(
        out,
        "  FILTERED: cut-off coefficient = {}, trials kept = {}, removed = {}",
        us(f.cut_coef),
        f.kept,
        f.removed
    );
    stats_block(
        out,
        &f.one_way_us,
        "FILTERED TIMING RESULTS AND STATISTICS",
        m,
    );
    for w in p.warnings() {
        let _ = writeln!(out, "  WARNING: {w}");
    }
    if detail == Detail::Full {
        distribution(out, p, m);
    }
}

/// Render the whole document with its stored fit.
pub fn render(doc: &ResultDoc, detail: Detail) -> String {
    render_with_fits(doc, detail, doc.fit.as_slice())
}

/// Render the whole document with `fits` as its fitted models (`commbench report` fits the
/// patterns a run did not).
pub fn render_with_fits(doc: &ResultDoc, detail: Detail, fits: &[FitSection]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "commbench {}: {}",
        doc.tool_version,
        doc.command.join(" ")
    );
    match detail {
        _ if doc.allpairs.is_some() => super::matrix::render(&mut out, doc, detail),
        Detail::Table if doc.sixtimes.is_some() => super::sixtimes::render(&mut out, doc),
        Detail::Table => table_report(&mut out, doc, fits),
        Detail::Summary | Detail::Full => {
            appendix_c(&mut out, doc, fits, detail);
            if doc.sixtimes.is_some() {
                out.push('\n');
                super::sixtimes::render(&mut out, doc);
            }
            if doc.queue.is_some() {
                super::queue::render(&mut out, doc);
            }
        }
    }
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
    out
}

/// `between ranks 0 and 1` from the configuration, or nothing from an older document.
fn ranks_words(doc: &ResultDoc) -> String {
    match &doc.config {
        Some(c) => format!(" between ranks {} and {}", c.method.source, c.method.dest),
        None => String::new(),
    }
}

/// The summary and full outputs.
fn appendix_c(out: &mut String, doc: &ResultDoc, fits: &[FitSection], detail: Detail) {
    let env = &doc.environment;
    let groups = by_pattern(&doc.points);
    let _ = writeln!(out, "PROGRAM PARAMETERS");
    let _ = writeln!(
        out,
        "  backend = {} ({} ranks, started by {})",
        env.backend, env.ranks, env.launcher
    );
    if let Some(c) = &doc.config {
        for (pattern, points) in &groups {
            let m = measured(pattern, points, doc);
            // Seed 001's experiments each place their own ranks (docs/seed001.md §2).
            let ranks = match c.sixtimes {
                Some(_) => String::new(),
                None => format!(
                    " between ranks source = {} and dest = {}",
                    c.method.source, c.method.dest
                ),
            };
            let _ = writeln!(out, "  {}{ranks}", m.cited);
            if !m.how.is_empty() {
                let _ = writeln!(out, "    {}", m.how);
            }
        }
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
    // Seed 001's own header, below, says it.
    if let Some(b) = buffers_words(doc).filter(|_| doc.sixtimes.is_none()) {
        let _ = writeln!(out, "  {b}");
    }
    if let Some(t) = &doc.timer {
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
        if detail == Detail::Full {
            timer_distribution(out, &t.detail);
        }
    }
    for p in &doc.points {
        let group = groups
            .iter()
            .find(|(k, _)| *k == p.pattern)
            .map_or(&[][..], |(_, v)| v.as_slice());
        let m = measured(&p.pattern, group, doc);
        point(out, p, &m, detail);
    }
    for (pattern, points) in &groups {
        if let Some(v) = measured(pattern, points, doc).verified {
            let _ = writeln!(out, "\n{pattern}: {v}");
        }
    }
    npp_study(out, doc);
    side_by_side(out, doc);
    let _ = writeln!(out, "\n{CI_NOTE}");
    for f in fits {
        out.push('\n');
        if let Some(note) = fit_coverage(f, &doc.points) {
            let _ = writeln!(out, "The fit of {} below {note}.", f.pattern);
        }
        crate::render::fit::fit_section(out, f);
    }
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

/// The backends whose medians `f` was fitted to, when the document holds several: `covers
/// only the mpi points (tcp, shm not fitted)`, or `covers the points of every backend
/// together`; `None` when one backend measured the pattern.
pub(crate) fn fit_coverage(f: &FitSection, points: &[Point]) -> Option<String> {
    let mine: Vec<&Point> = points.iter().filter(|p| p.pattern == f.pattern).collect();
    let mut backends: Vec<&str> = Vec::new();
    for p in &mine {
        if !backends.contains(&p.backend.as_str()) {
            backends.push(&p.backend);
        }
    }
    if backends.len() < 2 {
        return None;
    }
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300);
    let fitted: Vec<&str> = backends
        .iter()
        .copied()
        .filter(|b| {
            f.points.iter().all(|fp| {
                mine.iter().any(|p| {
                    p.backend == *b && p.size == fp.size && same(p.one_way_us.median, fp.time_us)
                })
            })
        })
        .collect();
    match fitted.as_slice() {
        [one] => {
            let rest: Vec<&str> = backends.iter().copied().filter(|b| b != one).collect();
            Some(format!(
                "covers only the {one} points ({} not fitted)",
                rest.join(", ")
            ))
        }
        _ => Some(format!(
            "covers the points of {} together",
            backends.join(", ")
        )),
    }
}

/// The backend settings in one line, leaving out values longer than `max` characters;
/// several backends' settings are each under the backend's name.
fn settings_words(env: &Environment, max: usize) -> (String, usize) {
    let mut shown = Vec::new();
    let mut left = 0;
    let mut add = |k: String, v: &serde_json::Value| {
        let s = format!("{k}={v}");
        if s.len() <= max {
            shown.push(s);
        } else {
            left += 1;
        }
    };
    for (k, v) in &env.backend_info {
        match v {
            serde_json::Value::Object(m) if env.backend.contains(',') => {
                for (k2, v2) in m {
                    add(format!("{k}.{k2}"), v2);
                }
            }
            _ => add(k.clone(), v),
        }
    }
    (shown.join(", "), left)
}

/// A cut-off coefficient as given (`2`, `1.5`).
fn coef(x: f64) -> String {
    text(x, Style::Exact)
}

/// The method's settings in one line.
fn method_words(doc: &ResultDoc) -> String {
    let Some(c) = &doc.config else {
        let trials = doc.points.first().map_or(0, |p| p.trials);
        return format!("method of Luecke et al. 2009: {trials} trials per size");
    };
    let m = &c.method;
    let npp = match &m.npp {
        NppChoice::Auto { .. } => "npp per size from the timer resolution (§3.3)".to_string(),
        NppChoice::Fixed(v) => format!("npp = {v} fixed"),
        NppChoice::Study(v) => {
            let v: Vec<String> = v.iter().map(|x| x.to_string()).collect();
            format!("each size with npp = {} (Tables 4.1-4.3)", v.join(", "))
        }
    };
    format!(
        "method of Luecke et al. 2009: {} trials per size after {} warm-up, {npp}; the filter \
         removes trials above {} x median (§3.4)",
        m.trials,
        m.warmup,
        coef(m.cut_coef)
    )
}

/// What the messages of a run were, in one line, when the run asked for anything but the
/// default (docs/buffers.md): the trials checked byte for byte, the pool a cold cache wrote
/// through (none where the backend models no caches), single buffers, and the alignment asked
/// against the one the addresses had. `None` for a default run and for a document that
/// predates the options.
pub fn buffers_words(doc: &ResultDoc) -> Option<String> {
    let opts = &doc.config.as_ref()?.method.buffers;
    if *opts == Default::default() {
        return None;
    }
    let facts: Vec<&PointBuffers> = match &doc.allpairs {
        Some(m) => m.cells.iter().filter_map(|c| c.buffers.as_ref()).collect(),
        None => doc
            .points
            .iter()
            .filter_map(|p| p.buffers.as_ref())
            .collect(),
    };
    let mut parts = Vec::new();
    if opts.validate {
        parts.push(if facts.is_empty() {
            "validated (no trial checked yet)".to_string()
        } else {
            let n: u64 = facts.iter().map(|f| f.validated_trials).sum();
            format!("validated: {n} trials checked byte for byte")
        });
    }
    if opts.cache == CacheState::Cold {
        let pool = facts.iter().filter_map(|f| f.cache_pool).max();
        parts.push(match pool {
            Some(p) => format!(
                "cache cold: a pool of {} written through before each trial",
                format_size(p)
            ),
            None if facts.is_empty() => "cache cold (no trial measured yet)".to_string(),
            None => "cache cold asked, but no pool written: the backend models no caches \
                     (the simulator)"
                .to_string(),
        });
    }
    if opts.buffers == BufferReuse::Single {
        parts.push("buffers single: one a direction, posted the whole window".to_string());
    }
    if let Some((align, offset)) = opts.placement() {
        let least = |f: fn(&PointBuffers) -> Option<u64>| {
            facts
                .iter()
                .filter_map(|p| f(p))
                .min()
                .map_or("?".to_string(), |a| format!("{a} B"))
        };
        parts.push(format!(
            "each message {offset} B past a multiple of {align} B, addresses aligned to {} on \
             the source and {} on the dest",
            least(|f| f.source_alignment),
            least(|f| f.dest_alignment)
        ));
    }
    Some(format!("messages: {}", parts.join("; ")))
}

/// The default report's first lines: what ran where, with which settings, method and clock.
fn report_head(
    out: &mut String,
    doc: &ResultDoc,
    groups: &[(&str, Vec<&Point>)],
    backends: &[&str],
) {
    let env = &doc.environment;
    let over = if backends.is_empty() {
        env.backend.clone()
    } else {
        backends.join(", ")
    };
    let what = match groups {
        [(pattern, points)] => measured(pattern, points, doc).cited,
        _ => "measured".to_string(),
    };
    let _ = writeln!(
        out,
        "{what}{} over {over} ({} ranks, started by {})",
        ranks_words(doc),
        env.ranks,
        env.launcher
    );
    let (settings, left) = settings_words(env, 72);
    if !settings.is_empty() || left > 0 {
        let more = if left > 0 {
            format!(" (+{left} in --full)")
        } else {
            String::new()
        };
        let _ = writeln!(out, "  settings: {settings}{more}");
    }
    let _ = writeln!(out, "  {}", host_line(env, " "));
    let _ = writeln!(out, "{}", method_words(doc));
    if let Some(b) = buffers_words(doc) {
        let _ = writeln!(out, "{b}");
    }
    if let Some(t) = &doc.timer {
        let _ = writeln!(
            out,
            "timer: {}: overhead {} ns, resolution {} ns (§3.1, {} read pairs)",
            t.detail.clock,
            ns(t.min_overhead_ns),
            ns(t.resolution_ns),
            t.samples
        );
    }
}

/// The default report: what ran, one table per pattern and backend, the fit in brief.
fn table_report(out: &mut String, doc: &ResultDoc, fits: &[FitSection]) {
    let groups = by_pattern(&doc.points);
    let backends = backends_of(&doc.points);
    report_head(out, doc, &groups, &backends);
    if doc.queue.is_some() {
        super::queue::render(out, doc);
        let _ = writeln!(out, "{CI_NOTE}");
        return;
    }
    let mut warned = Vec::new();
    for (pattern, points) in &groups {
        let m = measured(pattern, points, doc);
        let _ = writeln!(out);
        if groups.len() > 1 {
            let _ = writeln!(out, "{}", m.title());
        }
        let _ = writeln!(
            out,
            "{} = {}, in us; MB/s{} = 10^6 bytes/s at the median",
            m.quantity, m.formula, m.rate_per
        );
        let per_backend = backends.len() > 1;
        for b in &backends {
            let rows: Vec<&Point> = points.iter().copied().filter(|p| p.backend == *b).collect();
            if rows.is_empty() {
                continue;
            }
            if per_backend {
                let _ = writeln!(out, "{b}:");
            }
            table(out, &rows, &mut warned);
        }
        if let Some(v) = &m.verified {
            let _ = writeln!(out, "{v}");
        }
    }
    for (size, backend, w) in &warned {
        let on = if backends.len() > 1 {
            format!(" over {backend}")
        } else {
            String::new()
        };
        let _ = writeln!(out, "! {size}{on}: {w}");
    }
    let _ = writeln!(out, "{CI_NOTE}");
    let before = out.len();
    npp_study(out, doc);
    side_by_side(out, doc);
    if out.len() > before && !fits.is_empty() {
        out.push('\n');
    }
    for f in fits {
        fit_brief(out, f, doc);
    }
}

/// A column of [`table`]: its heading and whether it is aligned left.
type Column = (&'static str, bool);

/// One table: a header naming the columns, one line per point. A point with warnings ends
/// with `!`; its warnings go to `warned` (size, backend, text) to be listed under the tables.
fn table(out: &mut String, rows: &[&Point], warned: &mut Vec<(String, String, String)>) {
    let study = rows
        .iter()
        .enumerate()
        .any(|(i, p)| rows[..i].iter().any(|q| q.size == p.size));
    let mut head: Vec<Column> = vec![
        ("size", false),
        ("min", false),
        ("median", false),
        ("[95% CI]", true),
        ("mean", false),
        ("p99", false),
        ("max", false),
        ("MB/s", false),
        ("kept/removed", false),
    ];
    if study {
        head.insert(1, ("npp", false));
    }
    let mut cells: Vec<Vec<String>> = vec![head.iter().map(|(h, _)| h.to_string()).collect()];
    let mut marks = vec![false];
    for p in rows {
        let o = &p.one_way_us;
        let mut line = vec![
            format_size(p.size),
            col(o.min),
            col(o.median),
            format!("[{}, {}]", col(o.ci95_median.lo), col(o.ci95_median.hi)),
            col(o.mean),
            col(o.p99),
            col(o.max),
            col(p.rate_mb_s.median),
            format!("{}/{}", p.filtered.kept, p.filtered.removed),
        ];
        if study {
            line.insert(1, p.npp.to_string());
        }
        let w = p.warnings();
        marks.push(!w.is_empty());
        for w in w {
            warned.push((format_size(p.size), p.backend.clone(), w));
        }
        cells.push(line);
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (row, mark) in cells.iter().zip(marks) {
        let mut line = String::new();
        for ((c, w), (_, left)) in row.iter().zip(&widths).zip(&head) {
            if *left {
                let _ = write!(line, " {c:<w$}");
            } else {
                let _ = write!(line, "  {c:>w$}");
            }
        }
        if mark {
            line.push_str("  !");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The fitted models in a few lines: the latency and bandwidth with their CIs, then each
/// regime's Hockney parameters; the points and residuals are left to the full output.
fn fit_brief(out: &mut String, f: &FitSection, doc: &ResultDoc) {
    let h = &f.hockney;
    let covers = fit_coverage(f, &doc.points).map_or(String::new(), |n| format!("; it {n}"));
    let bp = match h.breakpoint_bytes {
        Some(b) => format!(
            ", breakpoint {} {}",
            format_size(b),
            match h.breakpoint_source.as_str() {
                "auto" => "found automatically",
                "given" => "as given",
                other => other,
            }
        ),
        None => String::new(),
    };
    let l = &f.linear;
    let _ = writeln!(
        out,
        "fit of the {} medians (weighted {}{bp}{covers}):",
        measured(&f.pattern, &[], doc).name,
        f.weighting
    );
    let note = if l.se_latency_us.is_finite() {
        "95% CIs; "
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  {} ({note}the Janus report's intercept and 1/slope)",
        crate::render::fit::linear_brief(l)
    );
    let segs: Vec<_> = if h.segments.is_empty() {
        let lo = f.points.first().map_or(0, |p| p.size);
        let hi = f.points.last().map_or(0, |p| p.size);
        vec![(lo, hi, &h.whole)]
    } else {
        h.segments
            .iter()
            .map(|s| (s.from_bytes, s.to_bytes, s))
            .collect()
    };
    for (lo, hi, s) in segs {
        let _ = writeln!(
            out,
            "  Hockney's t = t0 + n / r_inf over {}..{}: {}",
            format_size(lo),
            format_size(hi),
            crate::render::fit::regime_brief(s)
        );
    }
    for w in f.warnings() {
        let _ = writeln!(out, "  ! {w}");
    }
}

/// `commbench timer`: the clock's overhead and resolution (Luecke et al. 2009 §3.1) and its
/// distribution (Appendix A).
pub fn timer_report(t: &TimerReport) -> String {
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
            "    {:>10} <= times < {:>10} with count = {c}",
            ns(lo),
            ns(lo + h.bin_width)
        );
    }
    let _ = writeln!(
        out,
        "    {:>10} <= times with count = {}",
        ns(h.counts.len() as f64 * h.bin_width),
        h.overflow
    );
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

/// A row of the npp study: its label and the statistic it shows.
type Row = (&'static str, fn(&Summary) -> f64);

/// Luecke et al. (2009) Tables 4.1-4.3: for each size measured with several fixed npp
/// values, one column per npp and one row per statistic of the time (us; variance us^2).
pub fn npp_study(out: &mut String, doc: &ResultDoc) {
    let points = &doc.points;
    let mut keys: Vec<(&str, &str, u64)> = Vec::new();
    for p in points {
        let k = (p.pattern.as_str(), p.backend.as_str(), p.size);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let several = backends_of(points).len() > 1;
    for (pattern, backend, size) in keys {
        let cols: Vec<&Point> = points
            .iter()
            .filter(|p| {
                p.pattern == pattern
                    && p.backend == backend
                    && p.size == size
                    && p.npp_calculated.is_none()
            })
            .collect();
        if cols.len() < 2 {
            continue;
        }
        let group: Vec<&Point> = points.iter().filter(|p| p.pattern == pattern).collect();
        let m = measured(pattern, &group, doc);
        let on = if several {
            format!(" over {backend}")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "\nNPP STUDY: {} of {}{on}, {} (Luecke et al. 2009 Tables 4.1-4.3)",
            m.name,
            size_words(size),
            m.plural
        );
        let mut line = format!("  {:24}", "npp =");
        for p in &cols {
            let _ = write!(line, "{:>12}", p.npp);
        }
        let _ = writeln!(out, "{line}");
        let rows: [Row; 6] = [
            ("minimum time (us)", |s| s.min),
            ("median time (us)", |s| s.median),
            ("average time (us)", |s| s.mean),
            ("maximum time (us)", |s| s.max),
            ("variance (us^2)", |s| s.variance),
            ("standard deviation (us)", |s| s.std_dev),
        ];
        for (name, f) in rows {
            let mut line = format!("  {name:24}");
            for p in &cols {
                let _ = write!(line, "{:>12}", sig(f(&p.one_way_us)));
            }
            let _ = writeln!(out, "{line}");
        }
    }
}

/// Several backends measured between the same ranks: per pattern and size, each backend's
/// median time (us) and its ratio to the first backend's, with the 95% CI of each median.
pub fn side_by_side(out: &mut String, doc: &ResultDoc) {
    let points = &doc.points;
    let backends = backends_of(points);
    if backends.len() < 2 {
        return;
    }
    for (pattern, group) in by_pattern(points) {
        let m = measured(pattern, &group, doc);
        let mut sizes: Vec<u64> = Vec::new();
        for p in &group {
            if !sizes.contains(&p.size) {
                sizes.push(p.size);
            }
        }
        let _ = writeln!(
            out,
            "\nSIDE BY SIDE: {}, median {} in us [95% CI], ratio to {}",
            m.name, m.plural, backends[0]
        );
        let mut head = format!("  {:>10}", "size");
        for b in &backends {
            let _ = write!(head, "{b:>34}");
        }
        let _ = writeln!(out, "{head}");
        for size in sizes {
            let find = |b: &str| group.iter().find(|p| p.size == size && p.backend == b);
            let base = find(backends[0]).map(|p| p.one_way_us.median);
            let mut line = format!("  {:>10}", format_size(size));
            for b in &backends {
                let cell = match find(b) {
                    Some(p) => {
                        let s = &p.one_way_us;
                        let ratio = match base {
                            Some(m) if m > 0.0 => {
                                format!("x{}", text(s.median / m, Style::Decimals(2)))
                            }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit::{doc, point, point_of, sweep};

    /// Documents as commbench 0.1.0 wrote them before the run configuration was typed
    /// (`analysis::document`'s tests read them field by field), with their summaries as this
    /// version writes them: earlier documents keep rendering.
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
        };
        Point::from_raw(raw, backend, 2.0).unwrap()
    }

    #[test]
    fn sizes_in_words() {
        assert_eq!(size_words(1), "1 byte");
        assert_eq!(size_words(0), "0 bytes");
        assert_eq!(size_words(1000), "1000 bytes");
        assert_eq!(size_words(4096), "4096 bytes (4 KiB)");
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
            // The full fit section is rendered by `render::fit`.
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
