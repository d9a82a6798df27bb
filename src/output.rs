//! Progress display, the result document and the files of `--output`.

use crate::cli::{Fatal, Plan};
use commbench::analysis::document::{Environment, Point, ResultDoc, SCHEMA, SCHEMA_VERSION};
use commbench::core::method::engine::{Collected, Progress, Stage};
use commbench::render::text::{self as report, Detail};
use commbench::spec::format_size;
use std::io::IsTerminal;
use std::path::Path;
use std::time::Instant;

/// Progress on standard error: a bar on a terminal; with `--progress always` and no terminal
/// (a log, a batch job), plain lines at each quarter of every size's trials.
pub struct ProgressBar {
    show: Show,
}

enum Show {
    Hidden,
    Bar(indicatif::ProgressBar),
    /// The last line printed: (size index, quarter of its trials).
    Lines(std::sync::Mutex<Option<(usize, u64)>>),
}

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Timer => "timer",
        Stage::Warmup => "warm-up",
        Stage::Npp => "npp",
        Stage::Trials => "trials",
    }
}

impl ProgressBar {
    /// For `--progress` (auto, always or never, validated by the caller) on rank 0 only; an
    /// explicit `always` wins over `--quiet`, which is about the report.
    pub fn new(out: &crate::cli::OutputArgs, root: bool) -> Self {
        let when = out.progress.as_str();
        let allowed = root && (!out.quiet || when == "always");
        let terminal = std::io::stderr().is_terminal();
        let show = match (allowed, when, terminal) {
            (false, _, _) | (_, "never", _) => Show::Hidden,
            (true, "always", false) => Show::Lines(std::sync::Mutex::new(None)),
            (true, "always", true) | (true, _, true) => {
                let b = indicatif::ProgressBar::with_draw_target(
                    Some(1),
                    indicatif::ProgressDrawTarget::stderr(),
                );
                let style = indicatif::ProgressStyle::with_template(
                    "{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> ");
                b.set_style(style);
                Show::Bar(b)
            }
            _ => Show::Hidden,
        };
        ProgressBar { show }
    }

    /// Show a progress report.
    pub fn update(&self, p: Progress) {
        let prefix = format!(
            "size {}/{} ({})",
            p.size_index + 1,
            p.sizes,
            format_size(p.size)
        );
        match &self.show {
            Show::Hidden => {}
            Show::Bar(b) => {
                b.set_prefix(prefix);
                b.set_message(stage_name(p.stage).to_string());
                b.set_length(p.total.max(1));
                b.set_position(p.done);
            }
            Show::Lines(last) => {
                if p.stage != Stage::Trials || p.total == 0 {
                    return;
                }
                let quarter = p.done * 4 / p.total;
                let mut last = match last.lock() {
                    Ok(g) => g,
                    Err(e) => e.into_inner(),
                };
                if quarter > 0 && *last != Some((p.size_index, quarter)) {
                    *last = Some((p.size_index, quarter));
                    eprintln!("progress: {prefix}: trials {}/{}", p.done, p.total);
                }
            }
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Show::Bar(b) = &self.show {
            b.finish_and_clear();
        }
    }
}

/// One backend's part of a run, as rank 0 saw it.
pub struct BackendRun {
    /// Backend name.
    pub backend: &'static str,
    /// What rank 0 collected (also from a failed run).
    pub collected: Collected,
    /// The outcome.
    pub result: Result<(), commbench::core::Error>,
}

/// Analyse what rank 0 collected from each backend (each run carries its own outcome), print
/// it, write the files, and turn a failure into exit 1.
pub fn finish(
    plan: &Plan,
    ranks: u32,
    launcher: &str,
    runs: Vec<BackendRun>,
    started: Instant,
    started_unix: u64,
) -> Result<(), Fatal> {
    let mut analysed = Vec::new();
    let mut analysis_error = None;
    let mut timer = None;
    let mut infos = serde_json::Map::new();
    let mut error = None;
    let names: Vec<&str> = runs.iter().map(|r| r.backend).collect();
    for run in runs {
        let Collected {
            timer: t,
            backend_info,
            points,
        } = run.collected;
        if timer.is_none() {
            timer = t;
        }
        if let Some(i) = backend_info {
            infos.insert(run.backend.to_string(), serde_json::Value::Object(i));
        }
        for raw in points {
            match Point::from_raw(raw, run.backend, plan.method.cut_coef) {
                Ok(p) => analysed.push(p),
                Err(e) => analysis_error = Some(e.to_string()),
            }
        }
        if let Err(e) = run.result {
            if error.is_none() {
                error = Some(if names.len() > 1 {
                    format!("{}: {e}", run.backend)
                } else {
                    e.to_string()
                });
            }
        }
    }
    let error = error.or(analysis_error);
    // One backend: its own record; several: each under its name.
    let backend_info = if names.len() == 1 {
        match infos.into_iter().next() {
            Some((_, serde_json::Value::Object(m))) => m,
            _ => serde_json::Map::new(),
        }
    } else {
        infos
    };
    let a = &plan.args.backend;
    let config = Some(commbench::analysis::document::RunConfig {
        method: plan.method.clone(),
        backend: names.join(","),
        ranks,
        timeout_s: plan.timeout.as_secs_f64(),
        poll: a.poll,
        wait: a.wait.clone(),
        cpus: a.cpus.clone(),
        sim_config: a.sim_config.clone(),
        clock: a.clock.clone(),
        sizes_spec: plan.sizes_spec.clone(),
        pattern: plan.kind,
        transpose_n: plan.transpose_n,
    });
    // Fitted models describe one backend's sweep: the first backend's.
    let first: Vec<Point> = analysed
        .iter()
        .filter(|p| p.backend == names[0])
        .cloned()
        .collect();
    let fit = commbench::analysis::fit::fit_points(
        &first,
        plan.breakpoint,
        plan.args.instructions_per_second,
    )
    .into_iter()
    .next();
    let doc = ResultDoc {
        fit,
        schema: SCHEMA.into(),
        version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: std::env::args().collect(),
        config,
        environment: Environment::probe(&names.join(","), backend_info, ranks, launcher),
        timer: timer.map(Into::into),
        status: if error.is_some() {
            "partial".into()
        } else {
            "complete".into()
        },
        error: error.clone(),
        points: analysed,
        started_unix_s: started_unix,
        wall_s: started.elapsed().as_secs_f64(),
    };
    let out = &plan.args.out;
    let mut written = Vec::new();
    let mut write_problem = None;
    if let Some(dir) = &out.output {
        match write_dir(dir, &doc) {
            Ok(files) => written.extend(files),
            Err(e) => write_problem = Some(e),
        }
    }
    if let Some(p) = &out.json {
        if p.as_os_str() == "-" {
            let _ = doc.write_json(std::io::stdout().lock());
        } else {
            match std::fs::File::create(p)
                .map_err(|e| e.to_string())
                .and_then(|f| doc.write_json(f).map_err(|e| e.to_string()))
            {
                Ok(()) => written.push(p.display().to_string()),
                Err(e) => write_problem = Some(format!("cannot write {}: {e}", p.display())),
            }
        }
    }
    let json_to_stdout = out.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if !out.quiet && !json_to_stdout {
        let detail = if out.full {
            Detail::Full
        } else {
            Detail::Summary
        };
        print!("{}", report::render(&doc, detail));
    }
    for f in &written {
        eprintln!("wrote {f}");
    }
    if let Some(e) = write_problem {
        return Err(Fatal::run(
            e,
            Some("check that the output directory is writable".into()),
        ));
    }
    match error {
        None => Ok(()),
        Some(e) => {
            let kept = if doc.points.is_empty() {
                "no size was completed".to_string()
            } else {
                format!(
                    "the {} point(s) measured before the failure are reported and written",
                    doc.points.len()
                )
            };
            Err(Fatal::run(
                e,
                Some(format!("{kept}; a slow peer may need a longer --timeout")),
            ))
        }
    }
}

fn write_dir(dir: &Path, doc: &ResultDoc) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let full = dir.join("commbench.output.txt");
    let summary = dir.join("commbench.summary.txt");
    let json = dir.join("result.json");
    std::fs::write(&full, report::render(doc, Detail::Full))
        .map_err(|e| format!("cannot write {}: {e}", full.display()))?;
    std::fs::write(&summary, report::render(doc, Detail::Summary))
        .map_err(|e| format!("cannot write {}: {e}", summary.display()))?;
    let f = std::fs::File::create(&json)
        .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    doc.write_json(f)
        .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    Ok(vec![
        full.display().to_string(),
        summary.display().to_string(),
        json.display().to_string(),
    ])
}

/// Write any serialisable value as JSON to a file or standard output ('-').
pub fn write_json_value<T: serde::Serialize>(p: &Path, v: &T) -> Result<(), Fatal> {
    let s = serde_json::to_string_pretty(v).map_err(|e| Fatal::run(e.to_string(), None))?;
    if p.as_os_str() == "-" {
        println!("{s}");
        Ok(())
    } else {
        std::fs::write(p, s + "\n")
            .map_err(|e| Fatal::run(format!("cannot write {}: {e}", p.display()), None))
    }
}
