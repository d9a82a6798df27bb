//! Synthetic points and documents for the unit tests of the analysis and the renderers.

/// The counts of the randomized tests: the CI sample, or the full count under
/// `COMMBENCH_TEST_SCALE=full` (tests/full.sh).
#[path = "../../../backends/sim/tests/common/scale.rs"]
pub(crate) mod scale;

use crate::analysis::document::{Environment, ResultDoc, SCHEMA, SCHEMA_VERSION};
use crate::analysis::point::Point;
use commbench_core::method::engine::RawPoint;

/// Deterministic noise in [0, 1).
fn unit(i: u64) -> f64 {
    (i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64
}

/// A point of `pattern` measured with npp 1 and two trips per iteration (one-way time =
/// trial / 2), analysed with cut_coef 2.
pub(crate) fn point_of(pattern: &str, size: u64, trial_ns: Vec<i64>) -> Point {
    let raw = RawPoint {
        trial_ns,
        trips_per_iteration: 2,
        npp: 1,
        npp_calculated: None,
        median_ppt_ns: None,
        pattern: pattern.into(),
        size,
        queue: None,
        buffers: None,
        npp_check: None,
        trial_start_ns: Vec::new(),
        until_ci: None,
        pair_trial_ns: Vec::new(),
        sweep: None,
    };
    Point::from_raw(raw, "sim", 2.0).expect("analysable")
}

/// A bandwidth point of `pairs` pairs at `window` of a sweep, npp 1: pair `p`'s trial `i`
/// takes `t_ns x (1 + p / 10) x (1 + u / 20)`, `u` uniform.
pub(crate) fn pairs_point(size: u64, window: u32, pairs: u32, t_ns: f64) -> Point {
    let each: Vec<Vec<i64>> = (0..pairs)
        .map(|p| {
            (0..12)
                .map(|i| {
                    let u = unit(i ^ u64::from(p) << 8 ^ size);
                    (t_ns * (1.0 + f64::from(p) / 10.0) * (1.0 + u / 20.0)).round() as i64
                })
                .collect()
        })
        .collect();
    let trial_ns = (0..12)
        .map(|i| each.iter().map(|v| v[i]).max().unwrap_or(0))
        .collect();
    let raw = RawPoint {
        pattern: "bandwidth".into(),
        size,
        npp: 1,
        trips_per_iteration: u64::from(window),
        trial_ns,
        pair_trial_ns: each,
        sweep: Some(commbench_core::method::pairs::SweepAt { window, pairs }),
        ..RawPoint::default()
    };
    Point::from_raw(raw, "sim", 2.0).expect("analysable")
}

/// A ping-pong point whose one-way times are `t_us x (1 + spread u)`, `u` uniform.
pub(crate) fn point(
    pattern: &str,
    size: u64,
    t_us: f64,
    spread: f64,
    trials: u64,
    seed: u64,
) -> Point {
    let trial_ns = (0..trials)
        .map(|i| {
            (2000.0 * t_us * (1.0 + spread * unit(i ^ seed.rotate_left(17) ^ size))).round() as i64
        })
        .collect();
    point_of(pattern, size, trial_ns)
}

/// A complete document of `points` from host `testhost` over the sim backend.
pub(crate) fn doc(points: Vec<Point>) -> ResultDoc {
    ResultDoc {
        pairs: None,
        max_rate: None,
        params: None,
        interference: None,
        sixtimes: None,
        queue: None,
        allpairs: None,
        report_card: None,
        schema: SCHEMA.into(),
        version: SCHEMA_VERSION,
        tool_version: "0.1.0".into(),
        command: vec!["commbench".into(), "pingpong".into()],
        config: None,
        environment: Environment {
            hostname: Some("testhost".into()),
            cpus: Some(2),
            target: "x86_64-linux".into(),
            backend: "sim".into(),
            ranks: 2,
            launcher: "local".into(),
            ..Environment::default()
        },
        timer: None,
        points,
        fit: None,
        status: "complete".into(),
        error: None,
        started_unix_s: 0,
        wall_s: 1.0,
    }
}

/// Two-regime ping-pong sweep 1 B..1 MiB: 1 us + n / 500 MB/s below 1 KiB, 6 us + n / 4000
/// from 1 KiB, times scaled by `scale`.
pub(crate) fn sweep(scale: f64) -> ResultDoc {
    let pts = (0..=20)
        .map(|k| {
            let n = 1u64 << k;
            let t = if n < 1024 {
                1.0 + n as f64 / 500.0
            } else {
                6.0 + n as f64 / 4000.0
            };
            point("pingpong", n, t * scale, 0.05, 201, 1)
        })
        .collect();
    doc(pts)
}

/// What rank 0 of a local run of two ranks on shm collected: `points`, run to its end.
pub(crate) fn shm_outcome(points: Vec<RawPoint>) -> crate::analysis::assemble::Outcome {
    use crate::analysis::assemble::{BackendRun, Outcome};
    Outcome {
        ranks: 2,
        launcher: "local".into(),
        rank: 0,
        runs: vec![BackendRun {
            backend: "shm",
            collected: commbench_core::method::engine::Collected::of(None, None, points),
            result: Ok(()),
        }],
    }
}
