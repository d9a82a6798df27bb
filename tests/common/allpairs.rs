//! All-pairs matrices measured in-process on the simulator: the whole program (measurement,
//! suspects measured again alone, attribution), for the tests that check what comes of it.

use super::inprocess::sim_matrix_document;
use commbench::analysis::allpairs::Rule;
use commbench::analysis::document::ResultDoc;
use commbench::analysis::matrix::MatrixSection;
use commbench::core::method::allpairs::AllPairsConfig;
use commbench::core::method::{MethodConfig, NppChoice};
use commbench_sim::SimConfig;

/// The all-pairs run on `cfg` at `sizes` with `trials` per cell (npp 1, one warm-up), the
/// suspects measured again alone with 15 trials, under the default rule: its document, made
/// as the command line makes it.
pub fn sim_matrix_doc(cfg: &SimConfig, sizes: &[u64], trials: u64) -> ResultDoc {
    sim_matrix_doc_under(cfg, sizes, trials, Rule::default())
}

/// [`sim_matrix_doc`] under `rule`.
pub fn sim_matrix_doc_under(cfg: &SimConfig, sizes: &[u64], trials: u64, rule: Rule) -> ResultDoc {
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
    let doc = sim_matrix_document(cfg, method, config, rule);
    assert_eq!(doc.status, "complete", "{:?}", doc.error);
    doc
}

/// [`sim_matrix_doc`]'s matrix section.
pub fn sim_matrix(cfg: &SimConfig, sizes: &[u64], trials: u64) -> MatrixSection {
    sim_matrix_doc(cfg, sizes, trials)
        .allpairs
        .expect("the matrix")
}
