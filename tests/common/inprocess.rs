//! Result documents of runs measured in-process on the simulator, made by the same library
//! step as the command line's (`analysis::assemble`): the tests check what a run's document
//! says, not a copy of how it is made.

use commbench::analysis::allpairs::Rule;
use commbench::analysis::assemble::{self, BackendRun, Outcome, Recipe, Started};
use commbench::analysis::document::{ResultDoc, RunConfig};
use commbench::analysis::fit::Breakpoint;
use commbench::core::method::allpairs::{AllPairs, AllPairsCollected, AllPairsConfig};
use commbench::core::method::engine::{Collected, KernelSpec, Measurement};
use commbench::core::method::MethodConfig;
use commbench_sim::SimConfig;

/// What a document of `config` on the simulator is made with: no fit for seed 001's and
/// seed 004's runs (as their plans ask), the transport routing over its cube.
fn recipe(method: &MethodConfig, config: RunConfig) -> Recipe {
    Recipe {
        cut_coef: method.cut_coef,
        breakpoint: Breakpoint::None,
        instructions_per_second: None,
        config: RunConfig {
            method: method.clone(),
            ..config
        },
        transport_forwards: true,
        command: vec!["commbench".into(), "(in process)".into()],
    }
}

/// The document of `collected` and `result` of a run on `machine`.
fn document(
    machine: &SimConfig,
    recipe: &Recipe,
    collected: Collected,
    result: Result<(), commbench::core::Error>,
) -> ResultDoc {
    let outcome = Outcome {
        ranks: machine.nodes(),
        launcher: "simulator".into(),
        rank: 0,
        runs: vec![BackendRun {
            backend: "sim",
            collected,
            result,
        }],
    };
    assemble::document(recipe, outcome, Started::now())
}

/// `spec` measured under `method` on `machine`, and its document (`config` says what the run
/// was: `sixtimes`, `queue`, ...).
pub fn sim_document<S: KernelSpec>(
    machine: &SimConfig,
    spec: S,
    method: MethodConfig,
    config: RunConfig,
) -> ResultDoc {
    let recipe = recipe(&method, config);
    let m = Measurement::new(spec, method, None);
    let result = commbench_sim::run(machine, &m).map(drop);
    document(machine, &recipe, m.take_collected(), result)
}

/// An all-pairs run's document: `method` and `config` on `machine`, the suspects measured
/// again alone, the matrix attributed under `rule`.
pub fn sim_matrix_document(
    machine: &SimConfig,
    method: MethodConfig,
    config: AllPairsConfig,
    rule: Rule,
) -> ResultDoc {
    let recipe = recipe(&method, RunConfig::default());
    let pick = |c: &AllPairsCollected, size: u64| {
        commbench::analysis::matrix::pick_retests(c, size, &rule)
    };
    let prog = AllPairs::new(method, config.clone(), None).with_retest(&pick);
    let result = commbench_sim::run(machine, &prog).map(drop);
    let collected = prog.take_collected();
    let timers = Collected::of(
        collected.timers.first().cloned(),
        collected.backend_info.clone(),
        Vec::new(),
    );
    let doc = document(machine, &recipe, timers, result);
    assemble::with_matrix(doc, collected, config, rule)
}
