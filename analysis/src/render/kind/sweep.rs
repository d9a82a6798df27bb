//! The text of a document measured size by size (every kind but an all-pairs matrix): by
//! default a table per pattern and backend, one line per size, in the spirit of OSU's `# Size
//! Latency (us)` with the median's 95% CI, and the fitted models in brief; the summary
//! (Luecke et al. 2009, Appendix C) and the full output (the summary plus the distributions
//! of Appendices A and B) give every statistic of every size. Both add the npp study (Tables
//! 4.1-4.3) and several backends side by side where the document holds them.

use crate::analysis::document::{Environment, ResultDoc};
use crate::analysis::model::FitSection;
use crate::analysis::point::Point;
use crate::render::kind::fit::{fit_section, linear_brief, regime_brief};
use crate::render::kind::queue;
use crate::render::kind::timer::{self, ns};
use crate::render::number::{text, Style};
use crate::render::words::{
    backends_of, bins, buffers_words, by_pattern, fit_coverage, host_line, measured, size_words,
    Detail, Measured, CI_NOTE,
};
use crate::spec::format_size;
use commbench_core::method::until::Outcome;
use commbench_core::method::NppChoice;
use commbench_core::stats::Summary;
use std::fmt::Write;

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
    bins(out, (d.origin, d.bin_width), &d.counts, d.overflow, &us);
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
    for r in &p.npp_rejected {
        let _ = writeln!(
            out,
            "  rejected estimate: median_ppt = {} ns gave npp {}, its trials took {} ns per \
             iteration (npp {}): estimated again",
            text(r.median_ppt_ns, Style::Decimals(1)),
            r.npp,
            text(r.trials_ppt_ns, Style::Decimals(1)),
            r.npp_from_trials
        );
    }
    let _ = writeln!(out, "  timing trials = {}", p.trials);
    if let Some(u) = &p.until_ci {
        let pct = crate::analysis::point::percent_exact;
        let _ = writeln!(
            out,
            "  measured until the {} interval of the median was within {}: {} after {} block(s) \
             (half-width {})",
            pct(u.level),
            pct(u.rel),
            match u.outcome {
                Outcome::Converged => "converged".to_string(),
                Outcome::Separated => "separated from its threshold".to_string(),
                Outcome::Borderline => "borderline".to_string(),
                Outcome::DidNotConverge => format!(
                    "did_not_converge, stopped by {}",
                    u.bound.map_or("a bound", |b| b.words())
                ),
            },
            u.checks,
            if u.half_width_rel.is_finite() {
                pct(u.half_width_rel)
            } else {
                "undefined".into()
            }
        );
    }
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

/// `between ranks 0 and 1` from the configuration, or nothing from an older document.
fn ranks_words(doc: &ResultDoc) -> String {
    match &doc.config {
        Some(c) => format!(" between ranks {} and {}", c.method.source, c.method.dest),
        None => String::new(),
    }
}

/// The summary and full outputs.
pub fn appendix_c(out: &mut String, doc: &ResultDoc, fits: &[FitSection], detail: Detail) {
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
        timer::section(out, t, detail);
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
        fit_section(out, f);
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

/// The default report's first lines: what ran where, with which settings, method and clock.
fn report_head(
    out: &mut String,
    doc: &ResultDoc,
    groups: &[(String, Vec<&Point>)],
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
            "timer: {}: overhead min_ov {} ns (subtracted from every trial), resolution {} ns \
             (§3.1, {} read pairs)",
            t.detail.clock,
            ns(t.min_overhead_ns),
            ns(t.resolution_ns),
            t.samples
        );
        if let Some(w) = timer::backward_words(&t.detail) {
            let _ = writeln!(out, "! timer: {w}");
        }
    }
}

/// The default report: what ran, one table per pattern and backend, the fit in brief.
pub fn table_report(out: &mut String, doc: &ResultDoc, fits: &[FitSection]) {
    let groups = by_pattern(&doc.points);
    let backends = backends_of(&doc.points);
    report_head(out, doc, &groups, &backends);
    if doc.queue.is_some() {
        queue::render(out, doc);
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
    // A sweep of windows and pairs fits each step; the report shows the first (--full, all).
    let swept = doc.points.iter().any(|p| p.sweep.is_some());
    let shown = if swept {
        &fits[..fits.len().min(1)]
    } else {
        fits
    };
    for f in shown {
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
    // Sizes measured until their interval was narrow enough each took their own count.
    let counted = rows.iter().any(|p| p.until_ci.is_some());
    if counted {
        head.push(("trials", false));
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
        if counted {
            line.push(p.trials.to_string());
        }
        let w = p.warnings();
        marks.push(!w.is_empty());
        for w in w {
            warned.push((format_size(p.size), p.backend.clone(), w));
        }
        cells.push(line);
    }
    let left: Vec<bool> = head.iter().map(|(_, l)| *l).collect();
    aligned(out, &cells, &left, &marks);
}

/// Rows of cells in columns as wide as their widest cell: right-aligned, or left-aligned
/// where `left` says so; a row marked gets a `!` at its end.
pub(crate) fn aligned(out: &mut String, cells: &[Vec<String>], left: &[bool], marks: &[bool]) {
    let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            cells
                .iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, row) in cells.iter().enumerate() {
        let mut line = String::new();
        for (j, (c, w)) in row.iter().zip(&widths).enumerate() {
            if left.get(j).copied().unwrap_or(false) {
                let _ = write!(line, " {c:<w$}");
            } else {
                let _ = write!(line, "  {c:>w$}");
            }
        }
        if marks.get(i).copied().unwrap_or(false) {
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
        linear_brief(l)
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
            regime_brief(s)
        );
    }
    for w in f.warnings() {
        let _ = writeln!(out, "  ! {w}");
    }
}

/// A row of the npp study: its label and the statistic it shows.
type Row = (&'static str, fn(&Summary) -> f64);

/// Luecke et al. (2009) Tables 4.1-4.3: for each size measured with several fixed npp
/// values, one column per npp and one row per statistic of the time (us; variance us^2).
pub fn npp_study(out: &mut String, doc: &ResultDoc) {
    let points = &doc.points;
    // Each step of a sweep of windows and pairs is a series of its own ([`Point::group`]).
    let mut keys: Vec<(String, &str, u64)> = Vec::new();
    for p in points {
        let k = (p.group(), p.backend.as_str(), p.size);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let several = backends_of(points).len() > 1;
    for (pattern, backend, size) in keys {
        let cols: Vec<&Point> = points
            .iter()
            .filter(|p| {
                p.group() == pattern
                    && p.backend == backend
                    && p.size == size
                    && p.npp_calculated.is_none()
            })
            .collect();
        if cols.len() < 2 {
            continue;
        }
        let group: Vec<&Point> = points.iter().filter(|p| p.group() == pattern).collect();
        let m = measured(&pattern, &group, doc);
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
        let m = measured(&pattern, &group, doc);
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
