//! A measuring run from its plan to its exit status (design §2): launch the backends, collect
//! what rank 0 measured, build the document, print it and write its files.

use super::fatal::Fatal;
use super::files;
use super::plan::{Outputs, Plan};
use super::progress::ProgressBar;
use super::{live, signals, stream};
use crate::cli::backend;
use commbench::analysis::assemble::{self, BackendRun, Outcome, Started};
use commbench::analysis::document::ResultDoc;
use commbench::core::launch::RankEnv;
use commbench::core::method::engine::{KernelSpec, Progress};
use commbench::core::Error;
use commbench::render::{Detail, Text};

/// Whether this process is rank 0, the one that reports and writes (rank numbers are known
/// from the launcher's variables before any backend starts).
pub(super) fn reporting_rank(plan: &Plan) -> bool {
    RankEnv::detect(plan.job.manual, None, 2).map_or(true, |e| e.rank == 0)
}

/// Measure `spec` as `plan` says and report it (on rank 0; other ranks report only their own
/// failure).
pub(super) fn measure_spec<S: KernelSpec + Clone>(plan: &Plan, spec: S) -> Result<(), Fatal> {
    let started = Started::now();
    if reporting_rank(plan) {
        save_on_signal(plan, started);
    }
    let bar = ProgressBar::new(plan.outputs.progress, plan.outputs.quiet);
    let cb = |p: Progress| bar.update(p);
    let outcome = backend::measure(&plan.backends, &plan.job, &plan.method, spec, &cb);
    bar.finish();
    let outcome = outcome?;
    if outcome.rank != 0 {
        return other_rank(plan, outcome);
    }
    signals::clear_checkpoint();
    let ending = Ending::of(&outcome.runs);
    let done = live::take_analysed();
    deliver(
        &plan.outputs,
        &assemble::document_with(&plan.recipe(), outcome, started, &done),
        ending,
    )
}

/// On rank 0 of a run with output files: when the first signal arrives, write the sizes
/// measured so far at once (status `interrupted`), before a launcher's kill can follow. The
/// run then goes on to its safe point and writes the files again, with the size that was
/// under way.
fn save_on_signal(plan: &Plan, started: Started) {
    let recipe = plan.recipe();
    let who = Who::of(plan);
    checkpoint(&plan.outputs, "size(s)", move |signal| {
        let runs = live::so_far(signal)?;
        let kept = runs.iter().map(|r| r.collected.points.len()).sum();
        let done = live::analysed();
        Some((
            assemble::document_with(&recipe, who.outcome(runs), started, &done),
            kept,
        ))
    });
}

/// The ranks and launcher of this run as rank 0 sees them before the run ends, for a
/// document written at a signal.
#[derive(Debug, Clone)]
pub(super) struct Who {
    /// Ranks in the run.
    pub(super) ranks: u32,
    /// Who started them, as the document names it.
    pub(super) launcher: String,
}

impl Who {
    pub(super) fn of(plan: &Plan) -> Self {
        // A backend that starts its ranks itself (the simulator) fixes how many.
        let own = plan.backends.first().and_then(|b| {
            let (n, _) = b.fixed_ranks()?;
            Some((n, b.own_launcher()?))
        });
        if let Some((ranks, launcher)) = own {
            return Who {
                ranks,
                launcher: launcher.to_string(),
            };
        }
        let env = RankEnv::detect(plan.job.manual, None, plan.job.ranks).ok();
        Who {
            ranks: env.as_ref().map_or(plan.job.ranks, |e| e.size),
            launcher: env.map_or_else(|| "local".to_string(), |e| backend::launcher_name(&e)),
        }
    }

    /// The outcome of `runs` on rank 0.
    pub(super) fn outcome(&self, runs: Vec<BackendRun>) -> Outcome {
        Outcome {
            ranks: self.ranks,
            launcher: self.launcher.clone(),
            rank: 0,
            runs,
        }
    }
}

/// Save what `snapshot(signal)` makes of the run so far (the document and how many `units`
/// it holds) when the first signal arrives, to every output path a later write replaces (a
/// pipe or device takes only the final document). Nothing to do without output files.
pub(super) fn checkpoint(
    out: &Outputs,
    units: &'static str,
    snapshot: impl Fn(i32) -> Option<(ResultDoc, usize)> + Send + 'static,
) {
    let dir = out.dir.clone();
    let json = out
        .json
        .clone()
        .filter(|p| p.as_os_str() != "-" && files::takes_checkpoints(p));
    if dir.is_none() && json.is_none() {
        return;
    }
    signals::set_checkpoint(Box::new(move |signal| {
        let (doc, kept) = snapshot(signal).ok_or("what was measured could not be read")?;
        let mut written = Vec::new();
        if let Some(dir) = &dir {
            let w = files::write_dir(dir, &doc);
            written.extend(w.files);
            if let Some(e) = w.problem {
                return Err(e);
            }
        }
        if let Some(p) = &json {
            files::write_doc(p, &doc)?;
            written.push(p.display().to_string());
        }
        Ok(format!(
            "the {kept} {units} measured so far are saved in {}",
            written.join(", ")
        ))
    }));
}

/// A rank other than 0 reports only its own failure: a stop is rank 0's to report, and a
/// configuration this rank cannot work with is a usage error (exit 2).
pub(super) fn other_rank(plan: &Plan, outcome: Outcome) -> Result<(), Fatal> {
    for r in outcome.runs {
        let Err(e) = r.result else { continue };
        if let Some(signal) = e.interrupted() {
            return Err(Fatal::silent(signals::exit_code(signal)));
        }
        let who = if plan.under_mpi() {
            format!("rank {}: {}: {e}", outcome.rank, r.backend)
        } else {
            format!("rank {}: {e}", outcome.rank)
        };
        if e.is_configuration() {
            return Err(Fatal::usage(who, CONFIGURATION_HINT));
        }
        let hint = matches!(e.root(), Error::Corrupt { .. }).then(|| CORRUPT_HINT.to_string());
        return Err(Fatal::run(who, hint));
    }
    Ok(())
}

/// The hint of a configuration found unworkable once the ranks ran.
const CONFIGURATION_HINT: &str =
    "the run cannot work as configured on this host; change the option the reason names";

/// The hint of a validated run that found a message other than the one sent.
const CORRUPT_HINT: &str = "a transport delivered bytes other than those sent; the transport or \
     the memory under it is faulty: run the same command again to see whether it recurs, and \
     compare another --backend (docs/buffers.md)";

/// How a run ended, beyond its document: what decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// Every backend ran, or one failed while running (exit 0 or 1).
    Ran,
    /// A signal stopped it at a safe point (exit 128 + the signal).
    Interrupted(i32),
    /// A rank found the configuration unworkable (exit 2).
    Configuration,
    /// A rank timed out (exit 1, with a hint about `--timeout`).
    TimedOut,
    /// A validated run found a message other than the one sent (exit 1, with a hint that
    /// the transport is at fault).
    Corrupt,
}

impl Ending {
    pub(super) fn of(runs: &[BackendRun]) -> Self {
        let Some(e) = runs.iter().find_map(|r| r.result.as_ref().err()) else {
            return Ending::Ran;
        };
        match (e.interrupted(), e.root()) {
            (Some(signal), _) => Ending::Interrupted(signal),
            (None, Error::Timeout { .. }) => Ending::TimedOut,
            (None, Error::Corrupt { .. }) => Ending::Corrupt,
            _ if e.is_configuration() => Ending::Configuration,
            _ => Ending::Ran,
        }
    }
}

/// Print the report, write the files, and turn a failed run into exit 1 (its partial
/// results printed and written all the same).
pub(super) fn deliver(out: &Outputs, doc: &ResultDoc, ending: Ending) -> Result<(), Fatal> {
    let mut written = Vec::new();
    // Where the whole document went, for the stream's end line.
    let mut documents = Vec::new();
    let mut write_problem = None;
    if let Some(dir) = &out.dir {
        let w = files::write_dir(dir, doc);
        documents.extend(w.files.first().cloned());
        written.extend(w.files);
        write_problem = w.problem;
    }
    match &out.json {
        Some(_) if out.json_to_stdout() => {
            let sent = doc.write_json(std::io::stdout().lock());
            documents.extend(sent.ok().map(|()| "-".to_string()));
        }
        Some(p) => match files::write_doc(p, doc) {
            Ok(()) => {
                written.push(p.display().to_string());
                documents.push(p.display().to_string());
            }
            Err(e) => {
                write_problem.get_or_insert(format!("{e} (a document already there is unchanged)"));
            }
        },
        None => {}
    }
    if let Some(e) = stream::end(doc, documents) {
        write_problem.get_or_insert(e);
    }
    if !out.quiet && !out.json_to_stdout() {
        let detail = if out.full {
            Detail::Full
        } else {
            Detail::Table
        };
        files::for_people(out, &Text::new(detail).report(doc, doc.fit.as_slice()));
    }
    for f in &written {
        say!("wrote {f}");
    }
    // A placement the launcher did not give is in the report; without one, said here.
    let noted = doc.pairs.as_ref().and_then(|p| p.note.as_ref());
    if let Some(note) = noted.filter(|_| out.quiet || out.json_to_stdout()) {
        say!("commbench: note: {note}");
    }
    if let Some(e) = write_problem {
        return Err(Fatal::run(
            e,
            Some("free space on the disk, or choose another --output, --json or --stream".into()),
        ));
    }
    failure(doc, ending)
}

/// The exit of a run that did not complete, saying what was kept: 128 + the signal for a
/// stop, 2 for a configuration a rank could not work with, 1 for a failure.
fn failure(doc: &ResultDoc, ending: Ending) -> Result<(), Fatal> {
    let Some(e) = &doc.error else {
        return Ok(());
    };
    let (kept, what, none) = match &doc.allpairs {
        Some(m) => (m.cells.len(), "cell(s)", "no cell was completed"),
        None => (doc.points.len(), "point(s)", "no size was completed"),
    };
    let kept = if kept == 0 {
        none.to_string()
    } else {
        format!(
            "the {kept} {what} measured before the {} are reported and written",
            if matches!(ending, Ending::Interrupted(_)) {
                "stop"
            } else {
                "failure"
            }
        )
    };
    Err(match ending {
        Ending::Interrupted(signal) => Fatal {
            code: signals::exit_code(signal),
            reason: e.clone(),
            hint: Some(format!("{kept} (status \"interrupted\")")),
        },
        Ending::Configuration => Fatal::usage(e.clone(), format!("{kept}; {CONFIGURATION_HINT}")),
        Ending::TimedOut => Fatal::run(
            e.clone(),
            Some(format!("{kept}; a slow peer may need a longer --timeout")),
        ),
        Ending::Corrupt => Fatal::run(e.clone(), Some(format!("{kept}; {CORRUPT_HINT}"))),
        Ending::Ran => Fatal::run(e.clone(), Some(kept)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench::core::method::engine::Collected;

    /// A run of `backend` that ended with `e`.
    fn failed(e: Error) -> Vec<BackendRun> {
        vec![BackendRun {
            backend: "shm",
            collected: Collected::default(),
            result: Err(e.in_phase("ping-pong 8 B, npp 1")),
        }]
    }

    #[test]
    fn a_corrupted_message_fails_the_run_keeping_what_was_measured() {
        let corrupt = || Error::Corrupt {
            rank: 1,
            from: 0,
            which: "message 0 of trial 17".into(),
            offset: 5,
            expected: 0x5a,
            got: 0xa5,
        };
        let ending = Ending::of(&failed(corrupt()));
        assert_eq!(ending, Ending::Corrupt);
        let mut doc = ResultDoc::read_json(include_str!(
            "../../analysis/src/analysis/testdata/v0.1-sweep.json"
        ))
        .unwrap();
        doc.error = Some(corrupt().to_string());
        doc.status = "partial".into();
        let f = failure(&doc, ending).unwrap_err();
        assert_eq!(f.code, super::super::fatal::EXIT_RUN);
        assert!(
            f.reason.contains("differs from what was sent"),
            "{}",
            f.reason
        );
        let hint = f.hint.unwrap();
        assert!(
            hint.starts_with(&format!(
                "the {} point(s) measured before the failure are reported and written; a \
                 transport delivered bytes other than those sent",
                doc.points.len()
            )),
            "{hint}"
        );
        // Any other failure keeps its own ending.
        let other = Ending::of(&failed(Error::Protocol("a frame of 3 bytes".into())));
        assert_eq!(other, Ending::Ran);
    }
}
