//! The MPI backend under `mpirun`: the examples of this crate (built by `cargo test`) started
//! with 2 ranks, each bounded in time so that a hang is a failure, not a stuck test. Also the
//! transpose of seed 003 on tcp threads, which needs no launcher.

use commbench_core::method::engine::Measurement;
use commbench_core::method::transpose::Transpose;
use commbench_core::method::{MethodConfig, NppChoice};
use commbench_core::testkit::CHECKS;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// This crate's example `name` (built by `cargo test`): target/<profile>/deps/<this test> ->
/// target/<profile>/examples/<name>.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target directory")
        .join("examples")
        .join(name)
}

/// `mpirun -np 2 <example>`.
fn on_two_ranks(name: &str) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["-np", "2"])
        .arg(example(name));
    c
}

/// Run `c` under coreutils' `timeout`, which ends it (TERM to its process group, KILL 10 s
/// later) after `limit_s` seconds, so that a hang is a failure, not a stuck test. The output,
/// and whether `c` ended by itself within the limit.
fn within(limit_s: u64, c: &Command) -> (Output, bool) {
    let mut t = Command::new("timeout");
    t.args(["--kill-after=10", &limit_s.to_string()])
        .arg(c.get_program())
        .args(c.get_args());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => t.env(k, v),
            None => t.env_remove(k),
        };
    }
    let start = Instant::now();
    let o = t.output().expect("start timeout");
    (o, start.elapsed() < Duration::from_secs(limit_s))
}

#[test]
fn conformance_suite_over_mpi_on_two_ranks() {
    let (out, in_time) = within(120, &on_two_ranks("conformance"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(in_time, "conformance hung\n{stdout}\n{stderr}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // Every conformance check once on 2 ranks, the silent peer, a truncated message inside a
    // span, and the six pattern runs (four patterns, both transposes).
    let checks = CHECKS.len() + 2 + 6;
    assert!(
        stdout.contains(&format!("{checks} checks passed on up to 2 ranks")),
        "{stdout}"
    );
}

#[test]
fn a_killed_rank_ends_the_run_with_an_error() {
    let (out, in_time) = within(60, &on_two_ranks("victim"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(in_time, "a killed rank made the run hang\n{stderr}");
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("killing rank 1"), "{stderr}");
}

#[test]
fn without_a_launcher_it_says_how_to_start() {
    let mut c = Command::new(example("conformance"));
    for v in commbench_mpi::LAUNCHER_VARIABLES {
        c.env_remove(v);
    }
    let (out, in_time) = within(30, &c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(in_time);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("mpirun -np 2 commbench pingpong --backend mpi"),
        "{stderr}"
    );
}

fn quick(source: u32, dest: u32) -> MethodConfig {
    MethodConfig {
        sizes: vec![],
        trials: 20,
        warmup: 2,
        npp: NppChoice::Fixed(2),
        timer_samples: 1 << 12,
        source,
        dest,
        ..MethodConfig::default()
    }
}

#[test]
fn packed_transpose_is_verified_on_tcp() {
    let cfg = commbench_tcp::TcpConfig::default();
    for (n, ranks, s, d) in [(1, 2, 0, 1), (7, 2, 1, 0), (40, 3, 2, 0)] {
        let t = Measurement::new(Transpose { n }, quick(s, d), None);
        commbench_tcp::run_threads(ranks, &cfg, &t).unwrap();
        let c = t.take_collected();
        assert_eq!(c.points.len(), 1);
        let p = &c.points[0];
        assert_eq!(
            (p.pattern.as_str(), p.size, p.npp, p.trips_per_iteration),
            ("transpose-pack", (n * n * 8) as u64, 2, 1)
        );
        assert_eq!(p.trial_ns.len(), 20);
        assert!(c.timer.is_some());
    }
    let t = Measurement::new(Transpose { n: 0 }, quick(0, 1), None);
    assert!(commbench_tcp::run_threads(2, &cfg, &t).is_err());
}
