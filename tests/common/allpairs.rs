//! All-pairs matrices measured in-process on the simulator: the whole program (measurement,
//! suspects measured again alone, attribution), for the tests that check what comes of it.

use commbench::analysis::allpairs::Rule;
use commbench::analysis::matrix::{self, MatrixSection};
use commbench::core::method::allpairs::{AllPairs, AllPairsCollected, AllPairsConfig};
use commbench::core::method::{MethodConfig, NppChoice};
use commbench::core::Rank;
use commbench_sim::SimConfig;

/// The all-pairs run on `cfg` at `sizes` with `trials` per cell (npp 1, one warm-up), the
/// suspects measured again alone with 15 trials, under the default rule.
pub fn sim_matrix(cfg: &SimConfig, sizes: &[u64], trials: u64) -> MatrixSection {
    let rule = Rule::default();
    let method = MethodConfig {
        sizes: sizes.to_vec(),
        trials,
        warmup: 1,
        npp: NppChoice::Fixed(1),
        timer_samples: 64,
        ..MethodConfig::default()
    };
    let config = AllPairsConfig {
        retest_trials: 15,
        ..AllPairsConfig::default()
    };
    let pick = |c: &AllPairsCollected, size: u64| -> Vec<(Rank, Rank)> {
        matrix::pick_retests(c, size, &rule)
    };
    let prog = AllPairs::new(method, config.clone(), None).with_retest(&pick);
    commbench_sim::run(cfg, &prog).expect("the simulated run");
    MatrixSection::build(prog.take_collected(), config, rule).expect("the matrix")
}
