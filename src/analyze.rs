//! `commbench report`, `plot` and `compare`: reading result documents back without
//! re-measuring (design §5). Exit codes: 0 success, 1 a failed step or a regression found by
//! `--fail-if-slower`, 2 bad usage (a missing or malformed document, an unknown choice).

use crate::cli::Fatal;
use clap::Args;
use commbench::analysis::compare::{self, SizeComparison};
use commbench::analysis::document::ResultDoc;
use commbench::analysis::fit::{self, Breakpoint, FitSection};
use commbench::render::svg::{self as plot, PlotKind};
use commbench::render::text::{self as report, Detail};
use commbench::spec;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// `commbench report FILE.json`: re-render a result document.
#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// The result document a run wrote (result.json of --output DIR, or --json FILE).
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,

    /// text (the summary of seed 000 Appendix C with the fitted models), markdown or csv.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    pub format: String,

    /// text: add each size's distribution and the timer's (the full output of seed 000 sec. 5).
    #[arg(long)]
    pub full: bool,
}

/// `commbench plot FILE.json -o out.svg`: draw a result document as SVG.
#[derive(Debug, Args, Clone)]
pub struct PlotArgs {
    /// The result document a run wrote.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,

    /// The SVG file to write.
    #[arg(long, short = 'o', value_name = "OUT.svg")]
    pub output: PathBuf,

    /// latency (log-log, 95% CI error bars, fit), bandwidth (MB/s against size), histogram
    /// (one size's trial times with the cut_coef line) or signature (throughput against time).
    #[arg(long, default_value = "latency", value_name = "KIND")]
    pub kind: String,

    /// histogram: the message size to draw (default: the first measured).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<String>,
}

/// `commbench compare A.json B.json`: is B faster or slower than A, size by size?
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// The baseline document.
    #[arg(value_name = "A.json")]
    pub a: PathBuf,

    /// The document compared against it.
    #[arg(value_name = "B.json")]
    pub b: PathBuf,

    /// Exit 1 when B is slower than A by more than PCT percent at some size, with 95%
    /// confidence (the lower end of the CI of median(B)/median(A) is above 1 + PCT/100).
    #[arg(long, value_name = "PCT")]
    pub fail_if_slower: Option<f64>,

    /// Bootstrap resamples per size (at most 2000).
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub resamples: usize,

    /// Also write the comparison as JSON to FILE ('-' for standard output, instead of the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// Seed of the bootstrap, fixed so that a comparison is reproducible.
const COMPARE_SEED: u64 = 0x00c0_ffee_5eed;

/// A document read from a file, with the fit it carries (if it has one).
#[derive(Debug)]
pub struct Loaded {
    /// The document.
    pub doc: ResultDoc,
    /// Its `fit` section, when the run stored one.
    pub stored_fit: Option<FitSection>,
}

/// Read a result document; a missing or malformed file is a usage error naming it.
pub fn load(path: &Path) -> Result<Loaded, Fatal> {
    let hint = "give the result.json a run wrote (commbench pingpong --output DIR, or --json FILE)";
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fatal::usage(format!("cannot read {}: {e}", path.display()), hint))?;
    let doc = ResultDoc::read_json(&text)
        .map_err(|e| Fatal::usage(format!("{}: {}", path.display(), e.reason()), hint))?;
    #[derive(serde::Deserialize)]
    struct FitOnly {
        #[serde(default)]
        fit: Option<FitSection>,
    }
    let stored_fit = serde_json::from_str::<FitOnly>(&text)
        .ok()
        .and_then(|f| f.fit);
    Ok(Loaded { doc, stored_fit })
}

/// The fits to show: the stored one for its pattern, fresh ones (automatic breakpoint) for
/// the other patterns or when none is stored.
pub fn fits_of(l: &Loaded) -> Vec<FitSection> {
    let mut fits = fit::fit_points(&l.doc.points, Breakpoint::Auto, None);
    if let Some(s) = &l.stored_fit {
        match fits.iter_mut().find(|f| f.pattern == s.pattern) {
            Some(f) => *f = s.clone(),
            None => fits.insert(0, s.clone()),
        }
    }
    fits
}

/// `commbench report`.
pub fn report(a: ReportArgs) -> Result<(), Fatal> {
    let format = a.format.as_str();
    if !["text", "markdown", "csv"].contains(&format) {
        return Err(Fatal::usage(
            format!("--format {format}: unknown format"),
            "use text, markdown or csv",
        ));
    }
    if a.full && format != "text" {
        return Err(Fatal::usage(
            "--full applies to --format text only",
            "drop --full or use --format text",
        ));
    }
    let l = load(&a.file)?;
    let fits = fits_of(&l);
    let out = match format {
        "markdown" => render_markdown(&l.doc, &fits),
        "csv" => render_csv(&l.doc),
        _ => {
            let detail = if a.full {
                Detail::Full
            } else {
                Detail::Summary
            };
            let mut s = report::render(&l.doc, detail);
            if !s.contains("FITTED MODELS") {
                for f in &fits {
                    fit::render_fit(&mut s, f);
                }
            }
            s
        }
    };
    print!("{out}");
    Ok(())
}

/// `commbench plot`.
pub fn plot(a: PlotArgs) -> Result<(), Fatal> {
    let kind: PlotKind = a.kind.parse().map_err(|e: commbench::core::Error| {
        Fatal::usage(
            format!("--kind: {}", e.reason()),
            "for example --kind latency",
        )
    })?;
    let size = match &a.size {
        None => None,
        Some(s) => Some(spec::parse_size(s).map_err(|e| {
            Fatal::usage(
                format!("--size {s}: {e}"),
                "for example --size 8 or --size 4K",
            )
        })?),
    };
    if size.is_some() && kind != PlotKind::Histogram {
        return Err(Fatal::usage(
            "--size applies to --kind histogram only",
            "add --kind histogram or drop --size",
        ));
    }
    let l = load(&a.file)?;
    let svg = plot::plot_with(&l.doc, kind, size, &fits_of(&l)).map_err(|e| {
        Fatal::usage(
            format!(
                "{}: {}",
                a.file.display(),
                e.to_string().trim_start_matches("invalid argument: ")
            ),
            "`commbench report FILE.json` lists the sizes measured",
        )
    })?;
    std::fs::write(&a.output, svg).map_err(|e| {
        Fatal::run(
            format!("cannot write {}: {e}", a.output.display()),
            Some("check that the directory exists and is writable".into()),
        )
    })?;
    eprintln!("wrote {}", a.output.display());
    Ok(())
}

/// The sizes where B is slower than A by more than `pct` percent with 95 % confidence.
pub fn regressions(rows: &[SizeComparison], pct: f64) -> Vec<&SizeComparison> {
    rows.iter().filter(|r| r.slower_than(pct)).collect()
}

/// `commbench compare`.
pub fn compare(a: CompareArgs) -> Result<(), Fatal> {
    if let Some(p) = a.fail_if_slower {
        if !(p.is_finite() && p >= 0.0) {
            return Err(Fatal::usage(
                format!("--fail-if-slower {p}: must be a percentage, 0 or more"),
                "for example --fail-if-slower 5",
            ));
        }
    }
    if a.resamples == 0 || a.resamples > compare::MAX_RESAMPLES {
        return Err(Fatal::usage(
            format!(
                "--resamples {}: must be 1 to {}",
                a.resamples,
                compare::MAX_RESAMPLES
            ),
            "leave it out for 2000",
        ));
    }
    let la = load(&a.a)?;
    let lb = load(&a.b)?;
    let rows = compare::compare(&la.doc, &lb.doc, a.resamples, COMPARE_SEED).map_err(|e| {
        Fatal::usage(
            e.to_string()
                .trim_start_matches("invalid argument: ")
                .to_string(),
            "compare documents that measured the same pattern at some of the same sizes",
        )
    })?;
    let json_stdout = a.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if !json_stdout {
        let mut s = String::new();
        let who = |name: &str, p: &Path, d: &ResultDoc| {
            format!(
                "{name}: {} (backend {}, host {}, {} points)",
                p.display(),
                d.environment.backend,
                d.environment.hostname.as_deref().unwrap_or("?"),
                d.points.len()
            )
        };
        let _ = writeln!(s, "{}", who("A", &a.a, &la.doc));
        let _ = writeln!(s, "{}", who("B", &a.b, &lb.doc));
        let _ = writeln!(
            s,
            "ratio = median(B) / median(A) of the one-way time; 95% bootstrap CI; Mann-Whitney p; a verdict only where the CI excludes 1\n"
        );
        s.push_str(&compare::render(&rows));
        let (only_a, only_b) = compare::unmatched(&la.doc, &lb.doc);
        for (name, only) in [("A", only_a), ("B", only_b)] {
            if !only.is_empty() {
                let list: Vec<String> = only.iter().map(|(p, n)| format!("{p} {n} B")).collect();
                let _ = writeln!(s, "only in {name} (not compared): {}", list.join(", "));
            }
        }
        print!("{s}");
    }
    if let Some(p) = &a.json {
        crate::output::write_json_value(p, &rows)?;
    }
    if let Some(pct) = a.fail_if_slower {
        let bad = regressions(&rows, pct);
        if !bad.is_empty() {
            let list: Vec<String> = bad
                .iter()
                .map(|r| {
                    format!(
                        "{} {} B ({:+.1} %, CI of B/A [{:.3}, {:.3}])",
                        r.pattern,
                        r.size,
                        (r.ratio - 1.0) * 100.0,
                        r.ci95.lo,
                        r.ci95.hi
                    )
                })
                .collect();
            return Err(Fatal::run(
                format!(
                    "B is slower than A by more than {pct} % at {} size(s): {}",
                    bad.len(),
                    list.join("; ")
                ),
                Some(format!(
                    "each listed size has the whole 95% CI of median(B)/median(A) above {:.3}",
                    1.0 + pct / 100.0
                )),
            ));
        }
    }
    Ok(())
}

/// A number for a Markdown table: [`fit::decimals`], `-` when undefined.
fn md_num(x: f64, prec: usize) -> String {
    fit::decimals(x, prec).unwrap_or_else(|| "-".into())
}

/// The document as Markdown: run description, one table row per point, the fitted models.
pub fn render_markdown(doc: &ResultDoc, fits: &[FitSection]) -> String {
    let mut s = String::new();
    let env = &doc.environment;
    let _ = writeln!(s, "# commbench {} result\n", doc.tool_version);
    let _ = writeln!(s, "- command: `{}`", doc.command.join(" "));
    let _ = writeln!(
        s,
        "- backend: {} ({} ranks, started by {})",
        env.backend, env.ranks, env.launcher
    );
    let _ = writeln!(
        s,
        "- host: {}, cpu: {}, kernel: {}",
        env.hostname.as_deref().unwrap_or("?"),
        env.cpu_model.as_deref().unwrap_or("?"),
        env.kernel.as_deref().unwrap_or("?")
    );
    if let Some(t) = &doc.timer {
        let _ = writeln!(
            s,
            "- timer: {}, min_ov = {} ns, resolution = {} ns (seed 000 sec. 3.1)",
            t.detail.clock, t.min_overhead_ns, t.resolution_ns
        );
    }
    let _ = writeln!(s, "- status: {}", doc.status);
    if let Some(e) = &doc.error {
        let _ = writeln!(s, "- error: {e}");
    }
    let _ = writeln!(s, "\n## One-way time per size (us)\n");
    let _ = writeln!(s, "| pattern | size (B) | npp | trials | min | median | 95% CI of median | mean | p99 | max | MB/s at median | kept by cut |");
    let _ = writeln!(
        s,
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"
    );
    for p in &doc.points {
        let o = &p.one_way_us;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | [{}, {}] | {} | {} | {} | {} | {} / {} |",
            p.pattern,
            p.size,
            p.npp,
            p.trials,
            md_num(o.min, 4),
            md_num(o.median, 4),
            md_num(o.ci95_median.lo, 4),
            md_num(o.ci95_median.hi, 4),
            md_num(o.mean, 4),
            md_num(o.p99, 4),
            md_num(o.max, 4),
            md_num(p.rate_mb_s.median, 2),
            p.filtered.kept,
            p.trials
        );
    }
    for f in fits {
        let h = &f.hockney;
        let _ = writeln!(
            s,
            "\n## Fitted models: {} ({}, least squares weighted {})\n",
            f.pattern, f.basis, f.weighting
        );
        let _ = writeln!(
            s,
            "| model | sizes (B) | t0 (us) | r_inf (MB/s) | n_half (B) | pi0 (1/s) | r2 |"
        );
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|");
        let mut rows = vec![("Hockney, whole range".to_string(), h.whole.clone())];
        for (name, seg) in ["below", "at and above"].iter().zip(&h.segments) {
            rows.push((
                format!(
                    "Hockney, {name} {} B",
                    h.breakpoint_bytes.unwrap_or(seg.from_bytes)
                ),
                seg.clone(),
            ));
        }
        for (name, seg) in rows {
            let range = if name.ends_with("whole range") {
                format!(
                    "{}..{}",
                    f.points.first().map_or(0, |p| p.size),
                    f.points.last().map_or(0, |p| p.size)
                )
            } else {
                format!("{}..{}", seg.from_bytes, seg.to_bytes)
            };
            let _ = writeln!(
                s,
                "| {name} | {range} | {} ± {} | {} ± {} | {} ± {} | {} | {} |",
                md_num(seg.t0_us, 4),
                md_num(seg.se_t0_us, 4),
                md_num(seg.r_inf_mb_s, 2),
                md_num(seg.se_r_inf_mb_s, 2),
                md_num(seg.n_half_bytes, 1),
                md_num(seg.se_n_half_bytes, 1),
                md_num(seg.pi0_per_s, 0),
                md_num(seg.r2, 6)
            );
        }
        let l = &f.linear;
        let _ = writeln!(
            s,
            "\nBreakpoint: {} ({}). Seed 003: latency = {} us (95% CI [{}, {}]), bandwidth = {} MB/s (95% CI [{}, {}]).",
            h.breakpoint_bytes.map_or("none".to_string(), |b| format!("{b} B")),
            h.breakpoint_source,
            md_num(l.latency_us, 4),
            md_num(l.ci95_latency_us.lo, 4),
            md_num(l.ci95_latency_us.hi, 4),
            md_num(l.bandwidth_mb_s, 2),
            md_num(l.ci95_bandwidth_mb_s.lo, 2),
            md_num(l.ci95_bandwidth_mb_s.hi, 2)
        );
        if let Some(c) = &l.cycles {
            let _ = writeln!(
                s,
                "Cycles (seed 003 eq. 4): {} + {} n at {:e} instructions/s.",
                md_num(c.a_cycles, 2),
                c.b_cycles_per_byte,
                c.instructions_per_second
            );
        }
        for n in &h.notes {
            let _ = writeln!(s, "\n> {n}");
        }
    }
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        String::new()
    }
}

/// The columns of [`render_csv`].
pub const CSV_HEADER: &str = "pattern,backend,size_bytes,npp,trials,min_us,median_us,ci95_median_lo_us,ci95_median_hi_us,mean_us,ci95_mean_lo_us,ci95_mean_hi_us,max_us,std_dev_us,p90_us,p99_us,p999_us,rate_median_mb_s,cut_coef,kept,removed,filtered_median_us,filtered_mean_us";

/// One CSV row per point (one-way times in us, rates in MB/s; an undefined value is empty).
pub fn render_csv(doc: &ResultDoc) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{CSV_HEADER}");
    for p in &doc.points {
        let o = &p.one_way_us;
        let f = &p.filtered;
        let cells = [
            csv_field(&p.pattern),
            csv_field(&p.backend),
            p.size.to_string(),
            p.npp.to_string(),
            p.trials.to_string(),
            csv_num(o.min),
            csv_num(o.median),
            csv_num(o.ci95_median.lo),
            csv_num(o.ci95_median.hi),
            csv_num(o.mean),
            csv_num(o.ci95_mean.lo),
            csv_num(o.ci95_mean.hi),
            csv_num(o.max),
            csv_num(o.std_dev),
            csv_num(o.p90),
            csv_num(o.p99),
            csv_num(o.p999),
            csv_num(p.rate_mb_s.median),
            csv_num(f.cut_coef),
            f.kept.to_string(),
            f.removed.to_string(),
            csv_num(f.one_way_us.median),
            csv_num(f.one_way_us.mean),
        ];
        let _ = writeln!(s, "{}", cells.join(","));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_num(f64::NAN), "");
        assert_eq!(CSV_HEADER.split(',').count(), 23);
    }
}
