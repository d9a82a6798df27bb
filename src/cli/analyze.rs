//! `commbench report`, `plot` and `compare`: reading result documents back without
//! re-measuring (design §5). Exit codes: 0 success, 1 a failed step or a regression found by
//! `--fail-if-slower`, 2 bad usage (a missing or malformed document, an unknown choice).

use crate::cli::fatal::Fatal;
use clap::{Args, ValueEnum};
use commbench::analysis::compare::{self, SizeComparison};
use commbench::analysis::document::ResultDoc;
use commbench::analysis::fit::{self, Breakpoint};
use commbench::analysis::model::FitSection;
use commbench::render;
use commbench::render::svg::{self as plot, PlotKind};
use commbench::render::text::{self as report, Detail};
use commbench::spec;
use std::path::{Path, PathBuf};

/// `commbench report FILE.json`: re-render a result document.
#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// The result document a run wrote (result.json of --output DIR, or --json FILE).
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,

    /// text (the summary of Luecke et al. 2009, Appendix C, with the fitted models), markdown
    /// or csv.
    #[arg(long, value_enum, default_value_t = Format::Text, value_name = "FORMAT")]
    pub format: Format,

    /// text: add each size's distribution and the timer's (the full output of Luecke et al.
    /// 2009 §5).
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
    #[arg(long, value_enum, default_value_t = Kind::Latency, value_name = "KIND")]
    pub kind: Kind,

    /// histogram: the message size to draw (default: the first measured).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<String>,
}

/// `commbench report --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The summary of Luecke et al. 2009, Appendix C, with the fitted models.
    Text,
    /// A Markdown table per pattern.
    Markdown,
    /// One row per point.
    Csv,
}

/// `commbench plot --kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Median one-way time against size, log-log, with 95% CI error bars and the fit.
    Latency,
    /// Rate (MB/s) against size.
    Bandwidth,
    /// One size's trial times with the median and cut_coef lines.
    Histogram,
    /// Throughput against transfer time (NetPIPE's signature graph).
    Signature,
}

impl From<Kind> for PlotKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Latency => PlotKind::Latency,
            Kind::Bandwidth => PlotKind::Bandwidth,
            Kind::Histogram => PlotKind::Histogram,
            Kind::Signature => PlotKind::Signature,
        }
    }
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

/// Read a result document; a missing or malformed file is a usage error naming it.
pub fn load(path: &Path) -> Result<ResultDoc, Fatal> {
    let hint = "give the result.json a run wrote (commbench pingpong --output DIR, or --json FILE)";
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fatal::usage(format!("cannot read {}: {e}", path.display()), hint))?;
    ResultDoc::read_json(&text)
        .map_err(|e| Fatal::usage(format!("{}: {}", path.display(), e.reason()), hint))
}

/// The fits to show: the stored one for its pattern, fresh ones (automatic breakpoint) for
/// the other patterns or when none is stored.
pub fn fits_of(doc: &ResultDoc) -> Vec<FitSection> {
    let mut fits = fit::fit_points(&doc.points, Breakpoint::Auto, None);
    if let Some(s) = &doc.fit {
        match fits.iter_mut().find(|f| f.pattern == s.pattern) {
            Some(f) => *f = s.clone(),
            None => fits.insert(0, s.clone()),
        }
    }
    fits
}

/// `commbench report`.
pub fn report(a: ReportArgs) -> Result<(), Fatal> {
    if a.full && a.format != Format::Text {
        return Err(Fatal::usage(
            "--full applies to --format text only",
            "drop --full or use --format text",
        ));
    }
    let doc = load(&a.file)?;
    let fits = fits_of(&doc);
    let out = match a.format {
        Format::Markdown => render::markdown::render(&doc, &fits),
        Format::Csv => render::csv::render(&doc),
        Format::Text => {
            let detail = if a.full { Detail::Full } else { Detail::Table };
            report::render_with_fits(&doc, detail, &fits)
        }
    };
    print!("{out}");
    Ok(())
}

/// `commbench plot`.
pub fn plot(a: PlotArgs) -> Result<(), Fatal> {
    let kind = PlotKind::from(a.kind);
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
    let doc = load(&a.file)?;
    let svg = plot::plot_with(&doc, kind, size, &fits_of(&doc)).map_err(|e| {
        Fatal::usage(
            format!("{}: {}", a.file.display(), e.reason()),
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
    let da = load(&a.a)?;
    let db = load(&a.b)?;
    let rows = compare::compare(&da, &db, a.resamples, COMPARE_SEED).map_err(|e| {
        Fatal::usage(
            e.reason(),
            "compare documents that measured the same pattern at some of the same sizes",
        )
    })?;
    let json_stdout = a.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if !json_stdout {
        let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
        print!("{}", render::compare::report(&na, &da, &nb, &db, &rows));
    }
    if let Some(p) = &a.json {
        crate::cli::files::write_json_value(p, &rows)?;
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
