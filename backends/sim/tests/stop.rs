//! A run asked to stop ends at the next safe point between sizes on every rank, keeping the
//! sizes measured: the engine's stop check, run on the simulator's many ranks.

use commbench_core::method::engine::{Measurement, Progress, Stage, StopFlag};
use commbench_core::method::{MethodConfig, NppChoice, PatternKind};
use commbench_core::Error;
use commbench_sim::{run, SimConfig};

use crate::common;
use common::machine::Machine;

fn cube(dimensions: u32) -> SimConfig {
    Machine::preset("ncube7")
        .dimensions(dimensions)
        .stack_kib(128)
        .config()
}

fn method(sizes: Vec<u64>, dest: u32) -> MethodConfig {
    MethodConfig {
        sizes,
        trials: 20,
        warmup: 2,
        npp: NppChoice::Fixed(3),
        timer_samples: 1000,
        source: 0,
        dest,
        ..MethodConfig::default()
    }
}

/// Ask for a stop while size `at` is measured; the run must stop after it, on every rank.
fn stop_during(sim: &SimConfig, kind: PatternKind, nsizes: usize, at: usize, dest: u32) {
    let sizes: Vec<u64> = (0..nsizes as u64).map(|i| 1 << (2 * i)).collect();
    let stop = StopFlag::new();
    let progress = |p: Progress| {
        if p.size_index == at && p.stage == Stage::Trials {
            stop.request(15);
        }
    };
    let m = Measurement::new(kind, method(sizes, dest), Some(&progress)).with_stop(&stop);
    let result = run(sim, &m);
    if at + 1 == nsizes {
        // Asked during the last size: there is no safe point left, and the run is whole.
        result.expect("a stop during the last size leaves the run complete");
        assert_eq!(m.take_collected().points.len(), nsizes);
        return;
    }
    let err = result.expect_err("the run was asked to stop");
    match err.root() {
        Error::Interrupted {
            signal,
            done,
            sizes,
        } => {
            assert_eq!((*signal, *done, *sizes), (15, at + 1, nsizes), "{err}");
        }
        other => panic!("not an interruption: {other}"),
    }
    assert_eq!(err.interrupted(), Some(15));
    let c = m.take_collected();
    assert_eq!(c.points.len(), at + 1, "the sizes measured are kept");
    assert!(c.points.iter().all(|p| p.trial_ns.len() == 20));
}

#[test]
fn a_stop_ends_the_run_after_the_current_size_on_every_rank() {
    // Small and larger cubes, the stop early, in the middle and at the last size, and a
    // destination that is not rank 1: every rank, participant or not, leaves together.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for dims in [1, 2, 3] {
        let sim = cube(dims);
        let nodes = 1u32 << dims;
        for _ in 0..3 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let nsizes = 2 + (seed % 5) as usize;
            let at = (seed >> 8) as usize % nsizes;
            let dest = 1 + (seed >> 16) as u32 % (nodes - 1);
            stop_during(&sim, PatternKind::PingPong, nsizes, at, dest);
        }
    }
    stop_during(&cube(1), PatternKind::Exchange, 4, 1, 1);
}

#[test]
fn a_stop_asked_before_the_first_size_measures_nothing() {
    let stop = StopFlag::new();
    stop.request(2);
    let m = Measurement::new(PatternKind::PingPong, method(vec![8, 64], 1), None).with_stop(&stop);
    let err = run(&cube(2), &m).expect_err("stopped");
    assert_eq!(err.interrupted(), Some(2));
    assert!(
        err.to_string().contains("SIGINT after 0 of 2 sizes"),
        "{err}"
    );
    assert!(m.take_collected().points.is_empty());
}

#[test]
fn without_a_stop_the_run_completes() {
    let stop = StopFlag::new();
    let m =
        Measurement::new(PatternKind::PingPong, method(vec![8, 64, 512], 1), None).with_stop(&stop);
    run(&cube(1), &m).expect("complete");
    assert_eq!(m.take_collected().points.len(), 3);
}

#[test]
fn the_first_request_is_the_one_remembered() {
    let stop = StopFlag::new();
    assert_eq!(stop.requested(), None);
    stop.request(15);
    stop.request(2);
    assert_eq!(stop.requested(), Some(15));
}
