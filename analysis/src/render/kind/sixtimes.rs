//! The text report of seed 001's programs (`echo`, `overhead`, `interference`): the echo's
//! round trips per distance, the six times per size as the paper's Table 1 prints them (mean
//! and standard deviation over the repetitions), their lines as Table 3, what could not be
//! separated, and §5.2's interference rows.

use crate::analysis::document::ResultDoc;
use crate::analysis::sixtimes::{Detail, InterferenceRow, Params, TimeLine};
use crate::render::number::{text, Style};
use crate::render::words::{buffers_words, hang, sizes_list};
use std::fmt::Write;

/// `mean ± sd` of one size's value.
fn cell(l: &TimeLine, size: u64) -> String {
    match l.values.iter().find(|v| v.size == size) {
        Some(v) => format!(
            "{} ± {}",
            text(v.mean_us, Style::Fixed(1)),
            text(v.std_dev_us, Style::Fixed(1))
        ),
        None => "-".into(),
    }
}

/// A table with one row per `(name, line)` and one column per size.
fn table(out: &mut String, rows: &[(String, &TimeLine)]) {
    let mut sizes: Vec<u64> = rows
        .iter()
        .flat_map(|(_, l)| l.values.iter().map(|v| v.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(_, l)| sizes.iter().map(|&s| cell(l, s)).collect())
        .collect();
    let name_w = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
    let widths: Vec<usize> = (0..sizes.len())
        .map(|j| {
            cells
                .iter()
                .map(|r| r[j].chars().count())
                .chain([sizes[j].to_string().len()])
                .max()
                .unwrap_or(1)
        })
        .collect();
    let mut head = format!("  {:<name_w$}", "size");
    for (j, s) in sizes.iter().enumerate() {
        let _ = write!(head, "  {:>w$}", s, w = widths[j]);
    }
    let _ = writeln!(out, "{head}");
    for ((name, _), r) in rows.iter().zip(&cells) {
        let mut line = format!("  {name:<name_w$}");
        for (j, c) in r.iter().enumerate() {
            let _ = write!(line, "  {:>w$}", c, w = widths[j]);
        }
        let _ = writeln!(out, "{line}");
    }
}

/// `X0 + X1 n` with its maximum error, as Table 3 and Appendix B print it.
fn formula(name: &str, l: &TimeLine) -> String {
    let sign = if l.slope_us_per_byte < 0.0 { '-' } else { '+' };
    format!(
        "  {name:<12} {:>10} {sign} {:<10} n us   max error {} us",
        text(l.intercept_us, Style::Fixed(1)),
        text(l.slope_us_per_byte.abs(), Style::Decimals(4)),
        text(l.max_error_us, Style::Fixed(2))
    )
}

/// The echo's section.
fn echo(out: &mut String, d: &Detail) {
    if d.echo.is_empty() && d.echo_idle.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nEcho round trip T(d) = 2F + 2dE + 2U (§3.2), us, mean ± sd over the repetitions:"
    );
    let mut rows: Vec<(String, &TimeLine)> = Vec::new();
    for (dist, l) in &d.echo {
        rows.push((format!("busy d={dist}"), l));
    }
    for (dist, l) in &d.echo_idle {
        rows.push((format!("idle d={dist}"), l));
    }
    table(out, &rows);
    if !d.transport_forwards && d.echo.len() > 1 {
        let _ = writeln!(
            out,
            "  (ranks between 0 and the echoing rank forward in their own program: E here is \
             one hop through a rank's receive and send)"
        );
    }
}

/// The report of a seed 001 document.
pub fn render(out: &mut String, doc: &ResultDoc) {
    let Some(d) = &doc.sixtimes else { return };
    header(out, doc, d);
    echo(out, d);
    if let Some(p) = &doc.params {
        six_times(out, d, p);
    }
    not_separable(out, d);
    sums(out, d);
    if let Some(rows) = &doc.interference {
        interference(out, rows);
    }
}

/// The first line: backend, ranks, Q and the readings.
fn header(out: &mut String, doc: &ResultDoc, d: &Detail) {
    let env = &doc.environment;
    let q = doc
        .config
        .as_ref()
        .and_then(|c| c.sixtimes)
        .map_or("int", |x| x.q.name());
    let _ = writeln!(
        out,
        "Krumme & Greenfield (1988) over {} ({} ranks, started by {}): Q {q}, {} ns per \
         iteration; {} repetitions of {} messages per clock reading",
        env.backend,
        env.ranks,
        env.launcher,
        text(d.q_ns_per_iter.unwrap_or(f64::NAN), Style::Significant),
        d.repetitions,
        d.messages_per_reading
    );
    if let Some(b) = buffers_words(doc) {
        let _ = writeln!(out, "{b}");
    }
}

/// Tables 1 and 3 of the times solved, and E idle against busy (§5.1).
fn six_times(out: &mut String, d: &Detail, p: &Params) {
    let lines: Vec<(String, &TimeLine)> = p
        .lines()
        .into_iter()
        .filter_map(|(n, l)| l.map(|l| (n.to_string(), l)))
        .collect();
    let _ = writeln!(
        out,
        "\nTable 1: the times per size, us (mean ± sd over {} repetitions):",
        d.repetitions
    );
    table(out, &lines);
    let _ = writeln!(
        out,
        "\nTable 3: least-squares lines (Appendix B), n in bytes:"
    );
    for (n, l) in &lines {
        let _ = writeln!(out, "{}", formula(n, l));
    }
    if let (Some(idle), Some(busy)) = (&d.e_idle, &p.e) {
        let _ = writeln!(out, "{}", formula("E idle", idle));
        let _ = writeln!(out, "{}", formula("E busy", busy));
        let _ = writeln!(out, "  (§5.1: the echo with the ranks idle against busy)");
    }
}

/// The times that could not be separated, with the reasons: those the experiments run cannot
/// separate at all, then those an assumption of the solve failed for at some sizes.
fn not_separable(out: &mut String, d: &Detail) {
    let (all, some): (Vec<_>, Vec<_>) = d.not_separable.iter().partition(|n| n.sizes.is_empty());
    if !all.is_empty() {
        let mut names: Vec<&str> = all.iter().map(|n| n.time.as_str()).collect();
        names.dedup();
        let _ = writeln!(out, "\nNot separable here: {}", names.join(", "));
        let mut reasons: Vec<&str> = all.iter().map(|n| n.reason.as_str()).collect();
        reasons.dedup();
        for r in reasons {
            let _ = writeln!(out, "  {r}");
        }
    }
    if !some.is_empty() {
        let _ = writeln!(
            out,
            "\nNot separable at some sizes (an assumption of the solve fails there; no value is \
             given):"
        );
        for n in some {
            let lead = format!("  {} at {}: ", n.time, sizes_list(&n.sizes));
            hang(out, &n.reason, &lead, "      ", WIDTH);
        }
    }
    if !d.notes.is_empty() {
        let _ = writeln!(
            out,
            "\nHow the solve went where §3.5's assumptions do not hold:"
        );
        for n in &d.notes {
            let lead = format!("  {} at {}: ", n.time, sizes_list(&n.sizes));
            hang(out, &n.note, &lead, "      ", WIDTH);
        }
    }
}

/// Width the notes are wrapped to.
const WIDTH: usize = 100;

/// The experiments' own values and the sums o_s and o_r, per size and as lines.
fn sums(out: &mut String, d: &Detail) {
    let sums: Vec<(String, &TimeLine)> = ["F+S", "o_r", "A+U", "R+S", "2(F+E+U)"]
        .iter()
        .filter_map(|k| d.measured.get(*k).map(|l| (label(k), l)))
        .collect();
    if sums.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nMeasured (Q subtracted where the experiment ran it), us:"
    );
    table(out, &sums);
    for (n, l) in &sums {
        let _ = writeln!(out, "{}", formula(n, l));
    }
}

/// §5.2's rows.
fn interference(out: &mut String, rows: &[InterferenceRow]) {
    let _ = writeln!(
        out,
        "\nInterference (§5.2): Q with neighbours streaming {} B messages through rank 0",
        commbench_core::method::sixtimes::INTERFERENCE_BYTES
    );
    let _ = writeln!(
        out,
        "  neighbours  channels  us/message  slowdown  predicted (no interaction)"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:>10}  {:>8}  {:>10}  {:>8}  {:>9}",
            r.neighbours,
            r.channels,
            text(r.us_per_message, Style::Decimals(1)),
            text(r.slowdown, Style::Decimals(3)),
            text(r.predicted_slowdown, Style::Decimals(3))
        );
    }
}

/// How the report names a measured sum.
fn label(key: &str) -> String {
    match key {
        "F+S" => "F+S (o_s)".into(),
        "o_r" => "A+U+R (o_r)".into(),
        k => k.into(),
    }
}
