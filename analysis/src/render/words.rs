//! What every text output of a document says the same way, below the formats and the kinds
//! that use it: how much a text report prints ([`Detail`]), what a confidence interval covers
//! ([`CI_NOTE`]), sizes in words, what the times of each pattern are ([`Measured`]): a one-way
//! time is half a ping-pong's round trip, an exchange's time is that of one simultaneous
//! exchange, a streaming time is per message in a window, a transpose's time is that of the
//! whole (verified) transpose; the document's patterns and backends in the order measured,
//! the host in one line, which backends a fit covers, and what the messages of a run were.

use crate::analysis::document::{Environment, ResultDoc, RunConfig};
use crate::analysis::model::FitSection;
use crate::analysis::point::Point;
use crate::spec::format_size;
use commbench_core::method::buffers::{BufferReuse, CacheState};
use commbench_core::method::engine::PointBuffers;
use commbench_core::method::sixtimes::{rate_streams, Experiment};

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

/// The bins of a histogram from `origin`, `width` wide, as Luecke et al. (2009) Appendix A
/// prints them (`lo <= times < hi with count = c`, then the overflow), each bound written by
/// `unit`: the one histogram of a point's times and of the timer's.
pub fn bins(
    out: &mut String,
    (origin, width): (f64, f64),
    counts: &[u64],
    overflow: u64,
    unit: &dyn Fn(f64) -> String,
) {
    use std::fmt::Write;
    for (k, c) in counts.iter().enumerate() {
        let lo = origin + k as f64 * width;
        let _ = writeln!(
            out,
            "    {:>10} <= times < {:>10} with count = {c}",
            unit(lo),
            unit(lo + width)
        );
    }
    let _ = writeln!(
        out,
        "    {:>10} <= times with count = {overflow}",
        unit(origin + counts.len() as f64 * width)
    );
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

/// What the times of `pattern` are, for its `points` (one pattern, any backends) in `doc`; a
/// step of a sweep of windows and pairs (`pattern` its [`Point::group`]) is named with its
/// place in the sweep.
pub fn measured(pattern: &str, points: &[&Point], doc: &ResultDoc) -> Measured {
    let Some(at) = points.first().and_then(|p| p.sweep) else {
        return measured_pattern(pattern, points, doc);
    };
    let base = points.first().map_or(pattern, |p| p.pattern.as_str());
    let m = measured_pattern(base, points, doc);
    let at = crate::analysis::point::sweep_words(at);
    Measured {
        name: format!("{} ({at})", m.name),
        cited: format!("{} ({at})", m.cited),
        ..m
    }
}

/// [`measured`] of a pattern's own points.
fn measured_pattern(pattern: &str, points: &[&Point], doc: &ResultDoc) -> Measured {
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
    let k = points
        .iter()
        .filter_map(|p| p.pairs.as_ref().map(|q| q.pairs))
        .max()
        .unwrap_or(1);
    let m = streaming_one(pattern, &w);
    if k < 2 {
        return m;
    }
    // Pairs at once: a trial's time is its slowest pair's.
    Measured {
        how: format!(
            "{k} pairs at once: {}",
            m.how.replacen("source", "each sender", 1)
        ),
        quantity: format!("{} of the slowest of {k} pairs", m.quantity),
        formula: format!("{}; the trial is the slowest pair's", m.formula),
        ..m
    }
}

/// [`streaming`] of one pair.
fn streaming_one(pattern: &str, w: &str) -> Measured {
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

/// The series of `points` in the order measured ([`Point::group`]: the patterns, each step
/// of a sweep of windows and pairs apart), each with its points.
pub(crate) fn by_pattern(points: &[Point]) -> Vec<(String, Vec<&Point>)> {
    let mut groups: Vec<(String, Vec<&Point>)> = Vec::new();
    for p in points {
        let key = p.group();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(p),
            None => groups.push((key, vec![p])),
        }
    }
    groups
}

/// The backends of `points` in the order measured.
pub(crate) fn backends_of(points: &[Point]) -> Vec<&str> {
    let mut b: Vec<&str> = Vec::new();
    for p in points {
        if !b.contains(&p.backend.as_str()) {
            b.push(&p.backend);
        }
    }
    b
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

/// `8 B, 64 KiB`.
pub(crate) fn sizes_list(v: &[u64]) -> String {
    v.iter()
        .map(|&s| format_size(s))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `s` word-wrapped to `width` characters, the first line after `first`, the others after
/// `indent`.
pub(crate) fn hang(out: &mut String, s: &str, first: &str, indent: &str, width: usize) {
    use std::fmt::Write;
    let mut line = String::new();
    let mut lead = first;
    for w in s.split_whitespace() {
        if !line.is_empty() && lead.len() + line.len() + 1 + w.len() > width {
            let _ = writeln!(out, "{lead}{line}");
            line.clear();
            lead = indent;
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{lead}{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_words() {
        assert_eq!(size_words(1), "1 byte");
        assert_eq!(size_words(0), "0 bytes");
        assert_eq!(size_words(1000), "1000 bytes");
        assert_eq!(size_words(4096), "4096 bytes (4 KiB)");
    }
}
