//! `commbench allpairs` from its plan to its exit status: the all-pairs program on the chosen
//! backend, its suspects measured again as the analysis names them, the matrix document, the
//! report with the suspects first, the files, and `--fail-on-suspect`.

use super::fatal::Fatal;
use super::plan::{AllPairsWork, Plan};
use super::progress::ProgressBar;
use super::raw::{self, RawWriter};
use super::run::{checkpoint, deliver, other_rank, reporting_rank, Ending, Who};
use super::{signals, stream};
use commbench::analysis::allpairs::Rule;
use commbench::analysis::assemble::{self, BackendRun, Outcome, Started};
use commbench::analysis::document::ResultDoc;
use commbench::analysis::matrix::{self, RawFiles};
use commbench::core::method::allpairs::{AllPairs, AllPairsCollected, AllPairsProgress, RoundSeen};
use commbench::core::method::engine::{Collected, Progress, Stage};
use commbench::core::{Error, Rank};

/// Run the all-pairs plan and report it (rank 0; other ranks report only their failure).
pub fn run(plan: &Plan, work: &AllPairsWork) -> Result<(), Fatal> {
    let started = Started::now();
    let rule = work.rule();
    let bar = ProgressBar::new(plan.outputs.progress, plan.outputs.quiet);
    let cb = |p: AllPairsProgress| bar.update(progress(p));
    let pick = |c: &AllPairsCollected, size: u64| -> Vec<(Rank, Rank)> {
        matrix::pick_retests(c, size, &rule)
    };
    let mut prog = AllPairs::new(plan.method.clone(), work.config.clone(), Some(&cb))
        .with_stop(&signals::STOP);
    if work.config.retest_trials > 0 {
        prog = prog.with_retest(&pick);
    }
    if let Some(map) = &work.switches {
        prog = prog.with_switches(map);
    }
    let b = &plan.backends[0];
    let one_process = b.transport(2).one_process;
    let writer = raw_writer(work, one_process);
    if let Some(w) = &writer {
        prog = prog.with_raw_sink(w);
    }
    let name = b.name();
    let seen = |r: RoundSeen| stream::round(name, r);
    prog = prog.with_rounds(&seen);
    if reporting_rank(plan) {
        signals::set_safe_point("the round under way");
        save_on_signal(plan, work, rule, b.name(), &prog, started);
    }
    let ran = b.run(&plan.job, &prog);
    // No checkpoint from here on: one written after the take would hold nothing.
    signals::clear_checkpoint();
    bar.finish();
    let mut ran = ran?;
    if let (Some(w), true) = (&writer, ran.result.is_ok()) {
        ran.result = w.finish();
    }
    if ran.rank != 0 {
        let outcome = Outcome {
            ranks: ran.ranks,
            launcher: ran.launcher,
            rank: ran.rank,
            runs: vec![backend_run(b.name(), &prog.take_collected(), ran.result)],
        };
        return other_rank(plan, outcome);
    }
    // The final document replaces the checkpoint: none is written from here on.
    signals::clear_checkpoint();
    let collected = prog.take_collected();
    // A stop that cut a round short (the simulator's, after its grace) counts what was kept.
    let result = ran.result.map_err(|e| match e.interrupted() {
        Some(signal) if !matches!(e, Error::Interrupted { sizes, .. } if sizes > 0) => {
            Error::Interrupted {
                signal,
                done: sizes_done(&collected, &plan.method.sizes),
                sizes: plan.method.sizes.len(),
            }
        }
        _ => e,
    });
    let outcome = Outcome {
        ranks: ran.ranks,
        launcher: ran.launcher,
        rank: ran.rank,
        runs: vec![backend_run(b.name(), &collected, result)],
    };
    let ending = Ending::of(&outcome.runs);
    let doc = assemble::document(&plan.recipe(), outcome, started);
    let mut doc = assemble::with_matrix(doc, collected, work.config.clone(), rule);
    if let Some(m) = doc.allpairs.as_mut() {
        m.raw_files = raw_files(work, m.ranks, one_process);
    }
    deliver(&plan.outputs, &doc, ending)?;
    match faults_named(&doc) {
        Some(names) if work.fail_on_suspect => Err(Fatal::run(
            format!("--fail-on-suspect: the verdicts name {names}"),
            Some("the report lists each verdict with its evidence".into()),
        )),
        _ => Ok(()),
    }
}

/// Where an all-pairs run is, as the progress bar shows it.
fn progress(p: AllPairsProgress) -> Progress {
    Progress {
        size_index: p.size_index,
        sizes: p.sizes,
        size: p.size,
        stage: if p.retest {
            Stage::Retests
        } else {
            Stage::Rounds
        },
        done: p.round,
        total: p.rounds,
        run_done: p.run_done,
        run_floor: std::time::Duration::ZERO,
    }
}

/// This process's writer of raw trials (`--raw all`); `one_process`: every rank runs in it.
fn raw_writer(work: &AllPairsWork, one_process: bool) -> Option<RawWriter> {
    let dir = work.raw_dir.as_ref()?;
    Some(RawWriter::new(dir.clone(), one_process))
}

/// The raw files the run's `ranks` wrote (`--raw all`), as the document lists them.
fn raw_files(work: &AllPairsWork, ranks: u32, one_process: bool) -> Option<RawFiles> {
    let dir = work.raw_dir.as_ref()?;
    let files = if one_process {
        vec![raw::file_name(None)]
    } else {
        (0..ranks).map(|r| raw::file_name(Some(r))).collect()
    };
    Some(RawFiles {
        dir: dir.display().to_string(),
        files,
    })
}

/// The run of `backend` as the document records it: rank 0's timer and the backend's
/// description (the cells go to the matrix).
fn backend_run(
    backend: &'static str,
    c: &AllPairsCollected,
    result: commbench::core::Result<()>,
) -> BackendRun {
    BackendRun {
        backend,
        collected: Collected::of(
            c.timers.first().cloned(),
            c.backend_info.clone(),
            Vec::new(),
        ),
        result,
    }
}

/// On rank 0 of a run with output files: when the first signal arrives, write the matrix
/// of the rounds completed so far at once (status `interrupted`; a round's cells reach rank
/// 0 together, so only whole rounds are kept), before a launcher's kill or a second signal
/// can follow. The run then stops before its next round and writes the files again.
fn save_on_signal(
    plan: &Plan,
    work: &AllPairsWork,
    rule: Rule,
    backend: &'static str,
    prog: &AllPairs<'_>,
    started: Started,
) {
    let recipe = plan.recipe();
    let who = Who::of(plan);
    let handle = prog.collected_handle();
    let config = work.config.clone();
    let sizes = plan.method.sizes.clone();
    checkpoint(&plan.outputs, "cell(s)", move |signal| {
        let collected = handle.lock().ok()?.clone();
        let stopped = Err(Error::Interrupted {
            signal,
            done: sizes_done(&collected, &sizes),
            sizes: sizes.len(),
        });
        let run = backend_run(backend, &collected, stopped);
        let kept = collected.cells.len();
        let doc = assemble::document(&recipe, who.outcome(vec![run]), started);
        Some((
            assemble::with_matrix(doc, collected, config.clone(), rule),
            kept,
        ))
    });
}

/// The sizes of `sizes` measured in full in `c`: those before the size of its last round.
fn sizes_done(c: &AllPairsCollected, sizes: &[u64]) -> usize {
    c.cells
        .last()
        .and_then(|cell| sizes.iter().position(|&s| s == cell.size))
        .unwrap_or(0)
}

/// The faults the verdicts name (switches, uplinks and switch pairs by path, nodes, links,
/// dimensions; not contention), if any.
fn faults_named(doc: &ResultDoc) -> Option<String> {
    let s = doc.allpairs.as_ref().filter(|s| s.has_fault())?;
    let names: Vec<String> = s
        .verdicts
        .iter()
        .filter(|v| v.kind != "contention")
        .map(|v| match (&v.switch, v.dimension) {
            (Some(p), _) => match &v.other_switch {
                Some(o) => format!("switch pair {p} - {o}"),
                None => format!("{} {p}", v.kind),
            },
            (None, Some(d)) if v.nodes.is_empty() => format!("{} {d}", v.kind),
            _ => format!("{} {:?}", v.kind, v.nodes),
        })
        .collect();
    Some(names.join(", "))
}
