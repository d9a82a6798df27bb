//! `commbench report`, `plot` and `compare`: reading result documents (or a run's stream, as
//! the document of what it holds) back without re-measuring (design §5). Exit codes: 0 success, 1 a failed step or a regression found by
//! `--fail-if-slower`, 2 bad usage (a missing or malformed document, an unknown choice).

use crate::cli::args::{Colour, CompareArgs, Format, Kind, PlotArgs, ReportArgs};
use crate::cli::fatal::Fatal;
use clap::ValueEnum;
use commbench::analysis::compare::{self, SizeComparison};
use commbench::analysis::document::ReportCard;
use commbench::analysis::document::ResultDoc;
use commbench::analysis::fit;
use commbench::analysis::launches::{self, LaunchSet};
use commbench::analysis::matrix_compare;
use commbench::analysis::stream;
use commbench::render;
use commbench::render::{Csv, Detail, Markdown, MatrixColour, Plot, PlotKind, Renderer, Text};
use commbench::spec;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Seed of the bootstrap, fixed so that a comparison is reproducible.
const COMPARE_SEED: u64 = 0x00c0_ffee_5eed;

/// Read a result document, or a run's stream as the document of the points it holds (a
/// killed run's: status `partial`); a missing or malformed file is a usage error naming it.
pub fn load(path: &Path) -> Result<ResultDoc, Fatal> {
    let hint = "give the result.json a run wrote (commbench pingpong --output DIR, or --json \
                FILE), or its --stream FILE";
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fatal::usage(format!("cannot read {}: {e}", path.display()), hint))?;
    stream::read_document(&text)
        .map_err(|e| Fatal::usage(format!("{}: {}", path.display(), e.reason()), hint))
}

/// `commbench report`.
pub fn report(a: ReportArgs) -> Result<(), Fatal> {
    if a.full && a.format != Format::Text {
        return Err(Fatal::usage(
            "--full applies to --format text only",
            "drop --full or use --format text",
        ));
    }
    let mut doc = load(&a.file)?;
    // A document written before the card was recorded gets the card its points give.
    if doc.report_card.is_none() {
        doc.report_card = ReportCard::of(&doc);
    }
    if doc.allpairs.is_some() && a.format != Format::Text {
        return Err(Fatal::usage(
            format!(
                "{} is an all-pairs document: markdown and csv tabulate points against size, which it does not hold",
                a.file.display()
            ),
            "use --format text (the default); the cells are in the document's `allpairs.cells`",
        ));
    }
    let fits = fit::fits_of(&doc);
    let renderer: Box<dyn Renderer> = match a.format {
        Format::Markdown => Box::new(Markdown),
        Format::Csv => Box::new(Csv),
        Format::Text => {
            let detail = if a.full { Detail::Full } else { Detail::Table };
            Box::new(Text::new(detail))
        }
    };
    let out = renderer.render(&doc, &fits).map_err(|e| {
        Fatal::usage(
            format!("{}: {}", a.file.display(), e.reason()),
            "`commbench report FILE.json` renders the documents a run wrote",
        )
    })?;
    crate::cli::files::to_stdout(&out);
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
    if size.is_some() && kind != PlotKind::Histogram && kind != PlotKind::Matrix {
        return Err(Fatal::usage(
            "--size applies to --kind histogram and matrix only",
            "add --kind histogram (--kind matrix for an all-pairs document) or drop --size",
        ));
    }
    if a.colour.is_some() && kind != PlotKind::Matrix {
        return Err(Fatal::usage(
            "--colour applies to --kind matrix only",
            "add --kind matrix (for an all-pairs document) or drop --colour",
        ));
    }
    let colour = match a.colour {
        Some(Colour::Time) => MatrixColour::Time,
        Some(Colour::Excess) | None => MatrixColour::Excess,
    };
    let doc = load(&a.file)?;
    check_kind_fits(&a.file, &doc, a.kind)?;
    let fits = fit::fits_of(&doc);
    let svg = Plot::new(kind, size)
        .colour(colour)
        .render(&doc, &fits)
        .map_err(|e| {
            Fatal::usage(
                format!("{}: {}", a.file.display(), e.reason()),
                "`commbench report FILE.json` lists the sizes measured",
            )
        })?;
    crate::cli::files::write_file(&a.output, &|f| f.write_all(svg.as_bytes())).map_err(|e| {
        Fatal::run(
            e,
            Some("check that the directory exists and is writable".into()),
        )
    })?;
    say!("wrote {}", a.output.display());
    Ok(())
}

/// Rejects a kind that does not draw `doc`: the matrix kind on a document without an all-pairs
/// matrix, the other kinds on one with.
fn check_kind_fits(file: &Path, doc: &ResultDoc, kind: Kind) -> Result<(), Fatal> {
    let name = kind
        .to_possible_value()
        .map_or_else(String::new, |v| v.get_name().to_string());
    match (&doc.allpairs, kind) {
        (None, Kind::Matrix) => {
            let mut fit = vec!["latency", "bandwidth", "histogram", "signature"];
            if doc.queue.is_some() {
                fit.push("queue");
            }
            Err(Fatal::usage(
                format!(
                    "{}: no all-pairs matrix to draw (--kind matrix needs a `commbench allpairs` document)",
                    file.display()
                ),
                format!("kinds that draw this document: {}", fit.join(", ")),
            ))
        }
        (Some(m), k) if k != Kind::Matrix => {
            let sizes: Vec<String> = m.sizes.iter().map(u64::to_string).collect();
            Err(Fatal::usage(
                format!(
                    "{} is an all-pairs document: --kind {name} draws points against size, which it does not hold",
                    file.display()
                ),
                format!(
                    "use --kind matrix (--size BYTES for another of its sizes: {})",
                    sizes.join(", ")
                ),
            ))
        }
        _ => Ok(()),
    }
}

/// The sizes where B is slower than A by more than `pct` percent with 95 % confidence for all
/// sizes together (none unless each side has enough runs for a verdict).
pub fn regressions(rows: &[SizeComparison], pct: f64) -> Vec<&SizeComparison> {
    rows.iter().filter(|r| r.slower_than(pct)).collect()
}

/// Whether `name` matches `pattern`, in which `*` stands for any characters and `?` for one.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut i, mut j) = (0, 0);
    // The last `*` seen, and the position in `name` it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while let Some(&c) = n.get(j) {
        match p.get(i) {
            Some('*') => {
                star = Some((i, j));
                i += 1;
            }
            Some(&q) if q == '?' || q == c => {
                i += 1;
                j += 1;
            }
            _ => match star {
                Some((si, sj)) => {
                    star = Some((si, sj + 1));
                    i = si + 1;
                    j = sj + 1;
                }
                None => return false,
            },
        }
    }
    p.get(i..)
        .is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

fn has_wildcard(s: &str) -> bool {
    s.contains('*') || s.contains('?')
}

/// `arg` as files: itself, or when its file name holds `*` or `?` (and no such file exists),
/// the files of its directory that match, sorted. A shell expands unquoted patterns first;
/// quoted ones (and shells that do not expand) come here.
pub(super) fn expand(arg: &Path) -> Result<Vec<PathBuf>, Fatal> {
    let name = arg
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !has_wildcard(&arg.to_string_lossy()) || arg.exists() {
        return Ok(vec![arg.to_path_buf()]);
    }
    let parent = arg.parent().unwrap_or(Path::new(""));
    if has_wildcard(&parent.to_string_lossy()) {
        return Err(Fatal::usage(
            format!("{}: * and ? work in the file name only", arg.display()),
            "name the directory in full, for example 'base/*.json'",
        ));
    }
    let dir = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Fatal::usage(
            format!(
                "{}: cannot read the directory {}: {e}",
                arg.display(),
                dir.display()
            ),
            "check the path of the pattern",
        )
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| (name.starts_with('.') || !n.starts_with('.')) && wildcard_match(&name, n))
        .map(|n| parent.join(n))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(Fatal::usage(
            format!("no file matches {}", arg.display()),
            "give result documents a run wrote (commbench pingpong --json FILE), or a pattern such as 'base/*.json'",
        ));
    }
    Ok(found)
}

/// The two sides of `commbench compare`: the files of A and of B, patterns expanded.
fn sides(a: &CompareArgs) -> Result<(Vec<PathBuf>, Vec<PathBuf>), Fatal> {
    let two_sides =
        "give A.json B.json, or several runs a side: A1.json A2.json A3.json --against B1.json B2.json B3.json";
    let (a_args, b_args): (&[PathBuf], &[PathBuf]) = if a.against.is_empty() {
        match a.files.as_slice() {
            [x, y] => (std::slice::from_ref(x), std::slice::from_ref(y)),
            [_] => {
                return Err(Fatal::usage(
                    "compare needs two sides and got one file",
                    two_sides,
                ))
            }
            more => {
                return Err(Fatal::usage(
                    format!(
                        "{} files and no --against: which are A and which are B?",
                        more.len()
                    ),
                    two_sides,
                ))
            }
        }
    } else {
        (&a.files, &a.against)
    };
    let mut out = Vec::new();
    for (label, args) in [("A", a_args), ("B", b_args)] {
        let mut files: Vec<PathBuf> = Vec::new();
        for arg in args {
            let expanded = match set_documents(arg) {
                Some(set) => set?,
                None => expand(arg)?,
            };
            for f in expanded {
                if files.contains(&f) {
                    return Err(Fatal::usage(
                        format!("{} is given twice in {label}", f.display()),
                        "give each run once: a run counted twice looks like two runs that agree",
                    ));
                }
                files.push(f);
            }
        }
        out.push(files);
    }
    let b = out.pop().unwrap_or_default();
    let a = out.pop().unwrap_or_default();
    Ok((a, b))
}

/// `commbench compare`.
pub fn compare(a: CompareArgs) -> Result<(), Fatal> {
    check_compare_options(&a)?;
    let (fa, fb) = sides(&a)?;
    check_runs_for_fail_if_slower(a.fail_if_slower, &fa, &fb)?;
    let load_all = |files: &[PathBuf]| files.iter().map(|f| load(f)).collect::<Result<Vec<_>, _>>();
    let (mut da, mut db) = (load_all(&fa)?, load_all(&fb)?);
    // A matrix's cells are summaries; the comparison resamples their trials where the run
    // wrote them (--raw all).
    for (f, d) in fa.iter().zip(&mut da).chain(fb.iter().zip(&mut db)) {
        crate::cli::raw::attach(f, d);
    }
    if let Some(w) = buffers_differ((&fa, &da), (&fb, &db)) {
        say!("commbench: warning: {w}");
    }
    if da.iter().chain(&db).any(|d| d.allpairs.is_some()) {
        return compare_matrices(&a, (&fa, &da), (&fb, &db));
    }
    let (ra, rb): (Vec<&ResultDoc>, Vec<&ResultDoc>) = (da.iter().collect(), db.iter().collect());
    for (label, runs, files) in [("A", &ra, &fa), ("B", &rb, &fb)] {
        check_same_points(label, runs, files)?;
    }
    let rows = compare::compare_runs(&ra, &rb, a.resamples, COMPARE_SEED).map_err(|e| {
        Fatal::usage(
            e.reason(),
            "compare documents that measured the same pattern at some of the same sizes",
        )
    })?;
    show_comparison(&a, (&fa, &ra), (&fb, &rb), &rows)?;
    if let Some(pct) = a.fail_if_slower {
        check_no_regression(&rows, pct, fa.len(), fb.len())?;
    }
    Ok(())
}

/// The message buffer options of a document (docs/buffers.md) in a few words: `default`, or
/// what was asked (`validated, cache cold, buffers single, 3 B past 4096 B`).
fn buffers_short(d: &ResultDoc) -> String {
    use commbench::core::method::buffers::{BufferReuse, CacheState};
    let Some(c) = &d.config else {
        return "default".into();
    };
    let o = &c.method.buffers;
    let mut w = Vec::new();
    if o.validate {
        w.push("validated".to_string());
    }
    if o.cache == CacheState::Cold {
        w.push(match o.cache_pool {
            Some(p) => format!("cache cold (pool {p} B)"),
            None => "cache cold".to_string(),
        });
    }
    if o.buffers == BufferReuse::Single {
        w.push("buffers single".to_string());
    }
    if let Some((align, offset)) = o.placement() {
        w.push(format!("messages {offset} B past {align} B"));
    }
    if w.is_empty() {
        "default".into()
    } else {
        w.join(", ")
    }
}

/// A warning when the documents compared did not measure the same messages: the buffer
/// options of the first of A against the first document (of either side) that differs.
/// Validation alone changes no timed work, but a cold cache, single buffers or another
/// alignment change what is timed.
fn buffers_differ(
    (fa, da): (&[PathBuf], &[ResultDoc]),
    (fb, db): (&[PathBuf], &[ResultDoc]),
) -> Option<String> {
    let opts = |d: &ResultDoc| {
        d.config
            .as_ref()
            .map(|c| c.method.buffers.clone())
            .unwrap_or_default()
    };
    let first = da.first()?;
    let (f, d) = fa
        .iter()
        .zip(da)
        .chain(fb.iter().zip(db))
        .find(|(_, d)| opts(d) != opts(first))?;
    Some(format!(
        "the documents' message buffers differ ({}: {}; {}: {}): the times may differ for that \
         reason alone (docs/buffers.md)",
        fa[0].display(),
        buffers_short(first),
        f.display(),
        buffers_short(d)
    ))
}

/// `commbench compare` of two all-pairs documents: cell by cell, one document a side.
fn compare_matrices(
    a: &CompareArgs,
    (fa, da): (&[PathBuf], &[ResultDoc]),
    (fb, db): (&[PathBuf], &[ResultDoc]),
) -> Result<(), Fatal> {
    let hint =
        "compare two `commbench allpairs` documents: commbench compare before.json after.json";
    for (f, d) in fa.iter().zip(da).chain(fb.iter().zip(db)) {
        if d.allpairs.is_none() {
            return Err(Fatal::usage(
                format!(
                    "{} has no all-pairs matrix, and the other side does: a matrix compares only with a matrix",
                    f.display()
                ),
                hint,
            ));
        }
    }
    if da.len() != 1 || db.len() != 1 {
        return Err(Fatal::usage(
            format!(
                "all-pairs documents compare one a side ({} in A, {} in B)",
                da.len(),
                db.len()
            ),
            hint,
        ));
    }
    if a.fail_if_slower.is_some() {
        return Err(Fatal::usage(
            "--fail-if-slower does not apply to all-pairs documents",
            "drop it: the comparison flags each cell whose CI excludes 1 (allpairs --fail-on-suspect checks one run)",
        ));
    }
    let (Some(ma), Some(mb)) = (&da[0].allpairs, &db[0].allpairs) else {
        return Err(Fatal::usage("no all-pairs matrix to compare", hint));
    };
    let c = matrix_compare::compare(ma, mb, a.resamples, COMPARE_SEED).map_err(|e| {
        Fatal::usage(
            e.reason(),
            "compare all-pairs runs that measured some of the same sizes",
        )
    })?;
    let (na, nb) = (fa[0].display().to_string(), fb[0].display().to_string());
    let json_stdout = a.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if !json_stdout {
        crate::cli::files::to_stdout(&render::matrix::comparison(&c, ma, (&na, &nb)));
    }
    if let Some(p) = &a.json {
        crate::cli::files::write_json_value(p, &c)?;
    }
    Ok(())
}

/// Rejects a negative or non-finite `--fail-if-slower` and a `--resamples` out of range.
fn check_compare_options(a: &CompareArgs) -> Result<(), Fatal> {
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
    Ok(())
}

/// Rejects `--fail-if-slower` when a side has fewer than [`compare::MIN_RUNS`] runs.
fn check_runs_for_fail_if_slower(
    fail_if_slower: Option<f64>,
    fa: &[PathBuf],
    fb: &[PathBuf],
) -> Result<(), Fatal> {
    if fail_if_slower.is_some() && (fa.len() < compare::MIN_RUNS || fb.len() < compare::MIN_RUNS) {
        return Err(Fatal::usage(
            format!(
                "--fail-if-slower needs {} or more runs a side to tell a slowdown from the variation between runs (A has {}, B has {})",
                compare::MIN_RUNS,
                fa.len(),
                fb.len()
            ),
            "record each side 3 or more times and give all the runs: commbench compare A1.json A2.json A3.json --against B1.json B2.json B3.json (or 'base/*.json' --against 'new/*.json')",
        ));
    }
    Ok(())
}

/// Rejects a side whose runs measured different points, naming the two files that differ.
fn check_same_points(label: &str, runs: &[&ResultDoc], files: &[PathBuf]) -> Result<(), Fatal> {
    if let Some(m) = compare::run_mismatch(runs) {
        let name = |i: usize| files.get(i).map_or("?".into(), |f| f.display().to_string());
        let (lacking, having) = if m.missing {
            (name(m.run), name(0))
        } else {
            (name(0), name(m.run))
        };
        return Err(Fatal::usage(
            format!(
                "the runs of {label} measured different points: {having} has {} {} B, {lacking} does not",
                m.key.0, m.key.1
            ),
            "each side's runs must be the same command (same sizes and patterns); compare runs of different sizes in separate comparisons",
        ));
    }
    Ok(())
}

/// Prints the table (or, with `--json -`, only its notes on stderr) and writes the JSON.
fn show_comparison(
    a: &CompareArgs,
    (fa, ra): (&[PathBuf], &[&ResultDoc]),
    (fb, rb): (&[PathBuf], &[&ResultDoc]),
    rows: &[SizeComparison],
) -> Result<(), Fatal> {
    let json_stdout = a.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    let names = |files: &[PathBuf]| -> Vec<String> {
        files.iter().map(|f| f.display().to_string()).collect()
    };
    let (na, nb) = (names(fa), names(fb));
    if json_stdout {
        let _ = write!(std::io::stderr().lock(), "{}", render::compare::notes(rows));
    } else {
        let side = |names, runs| render::compare::Side { names, runs };
        crate::cli::files::to_stdout(&render::compare::report_runs(
            side(&na, ra),
            side(&nb, rb),
            rows,
        ));
    }
    if let Some(p) = &a.json {
        crate::cli::files::write_json_value(p, &rows)?;
    }
    Ok(())
}

/// Fails the run (exit 1) listing the sizes where B is slower than A by more than `pct` %.
fn check_no_regression(
    rows: &[SizeComparison],
    pct: f64,
    runs_a: usize,
    runs_b: usize,
) -> Result<(), Fatal> {
    let bad = regressions(rows, pct);
    if bad.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = bad
        .iter()
        .map(|r| {
            format!(
                "{} {} B ({:+.1} %, CI of B/A [{:.3}, {:.3}])",
                r.pattern,
                r.size,
                (r.ratio - 1.0) * 100.0,
                r.ci95_simultaneous.lo,
                r.ci95_simultaneous.hi
            )
        })
        .collect();
    Err(Fatal::run(
        format!(
            "B is slower than A by more than {pct} % at {} size(s): {}",
            bad.len(),
            list.join("; ")
        ),
        Some(format!(
            "each listed size has the whole 95% CI of B/A (over {} runs of A and {} of B, simultaneous for all {} sizes) above {:.3}",
            runs_a,
            runs_b,
            rows.len(),
            1.0 + pct / 100.0
        )),
    ))
}

/// The summary of a set of launches in its directory (`--launches`, `commbench launches`).
pub const SUMMARY_JSON: &str = "launches.json";

/// The documents of the set at `arg` (a set's directory, or its launches.json) for `compare`,
/// the complete launches in order; `None` when `arg` is not a set.
pub fn set_documents(arg: &Path) -> Option<Result<Vec<PathBuf>, Fatal>> {
    let summary = if arg.is_dir() {
        arg.join(SUMMARY_JSON)
    } else {
        arg.to_path_buf()
    };
    let text = std::fs::read_to_string(&summary).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    if value.get("schema").and_then(|s| s.as_str()) != Some(launches::SCHEMA) {
        return None;
    }
    let base = summary.parent().unwrap_or(Path::new("")).to_path_buf();
    Some(read_set(&summary, value).map(|set| {
        set.launches
            .iter()
            .filter(|l| l.status == "complete")
            .map(|l| base.join(&l.document))
            .collect()
    }))
}

fn read_set(summary: &Path, value: serde_json::Value) -> Result<LaunchSet, Fatal> {
    let set: LaunchSet = serde_json::from_value(value).map_err(|e| {
        Fatal::usage(
            format!(
                "{}: not a set of launches this version reads: {e}",
                summary.display()
            ),
            "give the launches.json a `--launches` run or `commbench launches` wrote",
        )
    })?;
    if !set.launches.iter().any(|l| l.status == "complete") {
        return Err(Fatal::usage(
            format!("{}: no launch of the set is complete", summary.display()),
            "compare sets whose launches ran to their end",
        ));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::wildcard_match;

    #[test]
    fn wildcards() {
        for (p, n) in [
            ("*.json", "a.json"),
            ("*", "anything"),
            ("r?.json", "r1.json"),
            ("r*1.json", "r1.json"),
            ("r*1.json", "r211.json"),
            ("*a*b*", "xaybz"),
            ("a**b", "ab"),
            ("", ""),
        ] {
            assert!(wildcard_match(p, n), "{p} {n}");
        }
        for (p, n) in [
            ("*.json", "a.jso"),
            ("r?.json", "r12.json"),
            ("r*1.json", "r12.json"),
            ("a*b", "ba"),
            ("?", ""),
            ("", "a"),
        ] {
            assert!(!wildcard_match(p, n), "{p} {n}");
        }
    }
}
