//! A measuring run from its plan to its exit status (design §2): launch the backends, collect
//! what rank 0 measured, build the document, print it and write its files.

use super::fatal::Fatal;
use super::files;
use super::plan::{Outputs, Plan, Work};
use super::progress::ProgressBar;
use super::record::{self, Started};
use crate::cli::backend::{BackendRun, Outcome};
use commbench::analysis::document::ResultDoc;
use commbench::core::method::engine::{KernelSpec, Measurement, Progress, ProgressFn};
use commbench::render::text::{self as report, Detail};

/// Run the plan and report it (on rank 0; other ranks report only their own failure).
pub fn measure(plan: Plan) -> Result<(), Fatal> {
    match plan.work {
        Work::Pattern(kind) => measure_spec(&plan, kind),
        Work::Transpose(t) => measure_spec(&plan, t),
    }
}

fn measure_spec<S: KernelSpec + Copy>(plan: &Plan, spec: S) -> Result<(), Fatal> {
    let started = Started::now();
    let bar = ProgressBar::new(plan.outputs.progress, plan.outputs.quiet);
    let cb = |p: Progress| bar.update(p);
    let outcome = launch(plan, spec, &cb);
    bar.finish();
    let outcome = outcome?;
    if outcome.rank != 0 {
        for r in outcome.runs {
            if let Err(e) = r.result {
                let who = if plan.under_mpi() {
                    format!("rank {}: {}: {e}", outcome.rank, r.backend)
                } else {
                    format!("rank {}: {e}", outcome.rank)
                };
                return Err(Fatal::run(who, None));
            }
        }
        return Ok(());
    }
    deliver(&plan.outputs, &record::document(plan, outcome, started))
}

/// Start the ranks: under MPI every backend in turn, otherwise the one backend.
fn launch<S: KernelSpec + Copy>(
    plan: &Plan,
    spec: S,
    progress: &ProgressFn<'_>,
) -> Result<Outcome, Fatal> {
    if plan.under_mpi() {
        return under_mpi(plan, spec, progress);
    }
    let b = &plan.backends[0];
    let m = Measurement::new(spec, plan.method.clone(), Some(progress));
    let ran = b.run(&plan.job, &m)?;
    Ok(Outcome {
        ranks: ran.ranks,
        launcher: ran.launcher,
        rank: ran.rank,
        runs: vec![BackendRun {
            backend: b.name(),
            collected: m.take_collected(),
            result: ran.result,
        }],
    })
}

#[cfg(feature = "mpi")]
fn under_mpi<S: KernelSpec + Copy>(
    plan: &Plan,
    spec: S,
    progress: &ProgressFn<'_>,
) -> Result<Outcome, Fatal> {
    crate::cli::backend::mpi::run_all(&plan.backends, &plan.job, &plan.method, spec, progress)
}

#[cfg(not(feature = "mpi"))]
fn under_mpi<S: KernelSpec + Copy>(
    _plan: &Plan,
    _spec: S,
    _progress: &ProgressFn<'_>,
) -> Result<Outcome, Fatal> {
    Err(Fatal::usage(
        "measuring several backends in one run, or the mpi backend, needs MPI",
        "rebuild with `cargo build --release --features mpi` and start it under mpirun",
    ))
}

/// Print the report, write the files, and turn a failed run into exit 1 (its partial
/// results printed and written all the same).
fn deliver(out: &Outputs, doc: &ResultDoc) -> Result<(), Fatal> {
    let mut written = Vec::new();
    let mut write_problem = None;
    if let Some(dir) = &out.dir {
        match files::write_dir(dir, doc) {
            Ok(f) => written.extend(f),
            Err(e) => write_problem = Some(e),
        }
    }
    match &out.json {
        Some(_) if out.json_to_stdout() => {
            let _ = doc.write_json(std::io::stdout().lock());
        }
        Some(p) => match files::write_doc(p, doc) {
            Ok(()) => written.push(p.display().to_string()),
            Err(e) => write_problem = Some(e),
        },
        None => {}
    }
    if !out.quiet && !out.json_to_stdout() {
        let detail = if out.full {
            Detail::Full
        } else {
            Detail::Table
        };
        print!("{}", report::render(doc, detail));
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
    failure(doc)
}

/// Exit 1 for a run that failed, saying what was kept.
fn failure(doc: &ResultDoc) -> Result<(), Fatal> {
    let Some(e) = &doc.error else {
        return Ok(());
    };
    let kept = if doc.points.is_empty() {
        "no size was completed".to_string()
    } else {
        format!(
            "the {} point(s) measured before the failure are reported and written",
            doc.points.len()
        )
    };
    Err(Fatal::run(
        e.clone(),
        Some(format!("{kept}; a slow peer may need a longer --timeout")),
    ))
}
