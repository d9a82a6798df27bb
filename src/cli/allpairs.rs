//! `commbench allpairs` from its plan to its exit status: the all-pairs program on the chosen
//! backend, its suspects measured again as the analysis names them, the matrix document, the
//! report with the suspects first, the files, and `--fail-on-suspect`.

use super::fatal::Fatal;
use super::plan::{AllPairsWork, Plan};
use super::progress::ProgressBar;
use super::run::{deliver, other_rank, Ending};
use super::signals;
use commbench::analysis::allpairs::Rule;
use commbench::analysis::assemble::{self, BackendRun, Outcome, Started};
use commbench::analysis::document::ResultDoc;
use commbench::analysis::matrix;
use commbench::core::method::allpairs::{AllPairs, AllPairsCollected, AllPairsProgress};
use commbench::core::method::engine::{Collected, Progress, Stage};
use commbench::core::Rank;

/// Run the all-pairs plan and report it (rank 0; other ranks report only their failure).
pub fn run(plan: &Plan, work: &AllPairsWork) -> Result<(), Fatal> {
    let started = Started::now();
    let rule = Rule {
        z: work.z,
        min_factor: work.min_factor,
    };
    let bar = ProgressBar::new(plan.outputs.progress, plan.outputs.quiet);
    let cb = |p: AllPairsProgress| {
        bar.update(Progress {
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
        })
    };
    let pick = |c: &AllPairsCollected, size: u64| -> Vec<(Rank, Rank)> {
        matrix::pick_retests(c, size, &rule)
    };
    let mut prog = AllPairs::new(plan.method.clone(), work.config.clone(), Some(&cb))
        .with_stop(&signals::STOP);
    if work.config.retest_trials > 0 {
        prog = prog.with_retest(&pick);
    }
    let b = &plan.backends[0];
    let ran = b.run(&plan.job, &prog);
    bar.finish();
    let ran = ran?;
    let collected = prog.take_collected();
    let rank0_timer = collected.timers.first().cloned();
    let backend_info = collected.backend_info.clone();
    let outcome = Outcome {
        ranks: ran.ranks,
        launcher: ran.launcher,
        rank: ran.rank,
        runs: vec![BackendRun {
            backend: b.name(),
            collected: Collected {
                timer: rank0_timer,
                backend_info,
                points: Vec::new(),
            },
            result: ran.result,
        }],
    };
    if outcome.rank != 0 {
        return other_rank(plan, outcome);
    }
    signals::clear_checkpoint();
    let ending = Ending::of(&outcome.runs);
    let doc = assemble::document(&plan.recipe(), outcome, started);
    let doc = assemble::with_matrix(doc, collected, work.config.clone(), rule);
    deliver(&plan.outputs, &doc, ending)?;
    match faults_named(&doc) {
        Some(names) if work.fail_on_suspect => Err(Fatal::run(
            format!("--fail-on-suspect: the verdicts name {names}"),
            Some("the report lists each verdict with its evidence".into()),
        )),
        _ => Ok(()),
    }
}

/// The faults the verdicts name (nodes, links, dimensions; not contention), if any.
fn faults_named(doc: &ResultDoc) -> Option<String> {
    let s = doc.allpairs.as_ref().filter(|s| s.has_fault())?;
    let names: Vec<String> = s
        .verdicts
        .iter()
        .filter(|v| v.kind != "contention")
        .map(|v| match v.dimension {
            Some(d) if v.nodes.is_empty() => format!("{} {d}", v.kind),
            _ => format!("{} {:?}", v.kind, v.nodes),
        })
        .collect();
    Some(names.join(", "))
}
