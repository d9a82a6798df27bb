//! What a run may ask for: sizes beyond a backend or this host's memory, counts beyond their
//! bounds, runs of weeks. Each is a usage error (exit 2) with one line naming the value and a
//! hint, given at once, before any rank starts: no abort, no panic, no second rank's message.

use crate::common;

use common::{assert_usage_output, bounded, commbench, stderr};
use std::process::{Command, Output};
use std::time::Duration;

/// Refusals come from the plan: far within this, even on a loaded machine.
const QUICK: Duration = Duration::from_secs(60);

/// Run `commbench args`, bounded in time.
fn refused(args: &[&str]) -> Output {
    let (o, in_time) = bounded(commbench(args), QUICK);
    assert!(in_time, "{args:?} did not end at once: {}", stderr(&o));
    o
}

/// `commbench args` under `ulimit -v KIB`, as many clusters set it.
fn under_ulimit_v(kib: u64, args: &[&str]) -> Output {
    let inner = commbench(args);
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let (o, in_time) = bounded(c, QUICK);
    assert!(in_time, "{args:?} did not end at once: {}", stderr(&o));
    o
}

/// A usage error naming every needle, in one line and a hint and nothing else: no rank was
/// started to say anything of its own.
fn assert_refused(o: &Output, needles: &[&str], what: &[&str]) {
    assert_usage_output(o, needles[0], what);
    let e = stderr(o);
    let first = e.lines().next().unwrap_or("");
    for n in needles {
        assert!(first.contains(n), "{what:?}: expected {n:?} in {first:?}");
    }
    assert_eq!(
        e.lines().count(),
        2,
        "{what:?}: more than a line and a hint: {e}"
    );
    assert!(o.stdout.is_empty(), "{what:?}: a report was printed");
}

#[test]
fn sizes_beyond_64_bits_of_buffers_are_refused_on_every_backend() {
    for backend in ["shm", "tcp", "sim"] {
        let args = [
            "pingpong",
            "--backend",
            backend,
            "--sizes",
            "18446744073709551615",
        ];
        assert_refused(&refused(&args), &["--sizes", "18446744073709551615"], &args);
    }
}

#[test]
fn a_size_over_what_shm_carries_names_its_limit() {
    let args = ["pingpong", "--sizes", "8,64G"];
    let o = refused(&args);
    assert_refused(&o, &["size 64 GiB", "4294967295 B", "shm"], &args);
    assert!(stderr(&o).contains("hint: measure sizes up to 4294967295 B"));
}

#[test]
fn sizes_beyond_the_address_space_limit_are_refused_not_aborted() {
    // 2 GiB of buffers and as much again for a message the transport holds do not fit in
    // ulimit -v 4000000 (3.8 GiB); 64 GiB fits no host at all under it. A host with less
    // memory available than the ranks need says so first.
    for (backend, size) in [
        ("shm", "2g"),
        ("tcp", "2g"),
        ("tcp", "64G"),
        ("sim", "2g"),
        ("sim", "64G"),
    ] {
        let args = ["pingpong", "--backend", backend, "--sizes", size];
        let o = under_ulimit_v(4_000_000, &args);
        assert_ne!(
            o.status.code(),
            Some(134),
            "{args:?} aborted: {}",
            stderr(&o)
        );
        assert_refused(&o, &["--sizes", "needs about"], &args);
        let e = stderr(&o);
        assert!(
            e.contains("address space in one process") && e.contains("ulimit -v")
                || e.contains("of memory") && e.contains("available"),
            "{e}"
        );
        assert!(e.contains("hint: sizes up to"), "{e}");
    }
}

#[test]
fn a_shared_segment_beyond_the_address_space_limit_names_the_ranks() {
    let args = ["pingpong", "--ranks", "256", "--trials", "1"];
    let o = under_ulimit_v(4_000_000, &args);
    assert_refused(&o, &["--ranks 256", "shm backend maps", "ulimit -v"], &args);
}

#[test]
fn counts_beyond_their_bounds_are_refused_naming_value_and_bound() {
    let max = "18446744073709551615";
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["pingpong", "--npp", max],
            &["--npp", max, "at most 1000000000"],
        ),
        (
            &["pingpong", "--warmup", max],
            &["--warmup", max, "at most 1000000000"],
        ),
        (&["pingpong", "--npp-init", max], &["--npp-init", max]),
        (&["pingpong", "--npp-trials", max], &["--npp-trials", max]),
        (
            &["timer", "--samples", max],
            &["--samples", max, "at most 4294967296"],
        ),
        (&["pingpong", "--samples", max], &["--samples", max]),
        (
            &["pingpong", "--trials", "1000000000"],
            &["--trials", "1000000000", "at most 100000000"],
        ),
        (
            &["bandwidth", "--window", "1000000000"],
            &["--window", "1000000000", "at most 65536"],
        ),
        (
            &["bandwidth", "--bidirectional", "--window", "65537"],
            &["--window", "65537"],
        ),
        (
            &["pingpong", "--sizes", "1..1000000:+1"],
            &["--sizes", "1..1000000:+1", "more than 10000"],
        ),
        (
            &["pingpong", "--sizes", "1..4096:+1", "--npp", "1,2,3"],
            &["--npp", "4096 sizes x 3 npp values", "at most 10000"],
        ),
    ];
    for (args, needles) in cases {
        assert_refused(&refused(args), needles, args);
    }
}

#[test]
fn a_run_of_weeks_is_refused_with_its_length() {
    let args = ["pingpong", "--npp", "1000000000"];
    let o = refused(&args);
    assert_refused(&o, &["--npp", "23 days", "more than the 7 days"], &args);
    let args = [
        "pingpong",
        "--backend",
        "tcp",
        "--sizes",
        "64M..256M",
        "--trials",
        "10000000",
        "--npp",
        "100",
    ];
    assert_refused(
        &refused(&args),
        &["--trials", "10000000 trials of npp 100", "217 days"],
        &args,
    );
}

/// A memory error names the count that multiplies every size's buffers when even the
/// smallest size does not fit, not `--sizes`.
#[test]
fn memory_errors_name_the_count_at_fault() {
    for (args, needle) in [
        (
            vec![
                "queue",
                "posted",
                "--backend",
                "sim",
                "--sizes",
                "8",
                "--warmup",
                "1000000000",
            ],
            "--warmup 1000000000",
        ),
        (
            vec![
                "queue",
                "unexpected",
                "--backend",
                "sim",
                "--sizes",
                "8",
                "--npp",
                "1000000000",
            ],
            "--npp 1000000000",
        ),
        (
            vec![
                "echo",
                "--backend",
                "sim",
                "--sizes",
                "8",
                "--messages",
                "1000000000",
            ],
            "--messages 1000000000",
        ),
    ] {
        let o = under_ulimit_v(4_000_000, &args);
        assert_usage_output(&o, needle, &args);
        assert!(!stderr(&o).contains("--sizes"), "{args:?}: {}", stderr(&o));
    }
}

/// The simulator refuses, before anything runs, what this host cannot hold: a machine whose
/// coroutine stacks need more memory mappings than a process may have, a stack per rank
/// beyond the address-space limit for `timer` as for a measurement, and a check of bytes the
/// machine does not carry.
#[test]
#[cfg(feature = "sim")]
fn the_simulator_refuses_what_the_host_cannot_hold() {
    use common::machine::Machine;
    let d = common::tmpdir("sim-host");
    let big = Machine::new("big", 15).write(&d.join("big.toml"));
    let limit: u64 = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(u64::MAX);
    if limit < 2 * (1 << 15) {
        for cmd in [&["pingpong"][..], &["timer"], &["allpairs"]] {
            let mut args = cmd.to_vec();
            args.extend(["--backend", "sim", "--sim-config", big.to_str().unwrap()]);
            let (o, in_time) = bounded(commbench(&args), Duration::from_secs(30));
            assert!(in_time, "{args:?}");
            assert_usage_output(&o, "vm.max_map_count", &args);
        }
    } else {
        eprintln!("skipped the mapping case: vm.max_map_count is {limit} here");
    }
    let wide = Machine::new("wide", 10).write(&d.join("wide.toml"));
    let args = [
        "timer",
        "--backend",
        "sim",
        "--sim-config",
        wide.to_str().unwrap(),
    ];
    let o = under_ulimit_v(500_000, &args);
    assert_usage_output(&o, "ulimit -v", args);
    let blind = Machine::new("blind", 2)
        .carry_bytes(Some(0))
        .write(&d.join("blind.toml"));
    let args = [
        "pingpong",
        "--backend",
        "sim",
        "--validate",
        "--sim-config",
        blind.to_str().unwrap(),
    ];
    assert_usage_output(&common::run(&args), "--validate: size 8 B", args);
}

/// Values inside the simulator's documented bounds that once wrapped its clock into negative
/// or zero times: refused before the run, or ended by a configuration error naming the
/// machine; never a reported time below zero.
#[test]
#[cfg(feature = "sim")]
fn the_simulated_clock_never_wraps_into_a_reported_time() {
    use common::machine::{line, Machine};
    let d = common::tmpdir("sim-clock");
    let slow = Machine::new("slow", 1)
        .set_times(|t| {
            t.f = line(1e12, 0.0);
            t.u = line(1e12, 0.0);
            t.e = line(1e12, 0.0);
        })
        .write(&d.join("slow.toml"));
    let coarse = Machine::new("coarse", 1)
        .tick_ns(1_000_000_000_000_000)
        .write(&d.join("coarse.toml"));
    let busy = Machine::new("busy", 4)
        .compute_ns_per_iter(1e6)
        .write(&d.join("busy.toml"));
    for (cmd, machine, needle) in [
        (&["pingpong"][..], &slow, "virtual time"),
        (&["pingpong", "--npp", "1"][..], &coarse, "under one tick"),
        (&["pingpong"][..], &coarse, "tick_ns = 1000000000000000"),
    ] {
        let mut args = cmd.to_vec();
        args.extend([
            "--backend",
            "sim",
            "--sim-config",
            machine.to_str().unwrap(),
        ]);
        let (o, in_time) = bounded(commbench(&args), Duration::from_secs(120));
        assert!(in_time, "{args:?}");
        assert_usage_output(&o, needle, &args);
    }
    // Past a millisecond an iteration is refused: interference would simulate every stream
    // message that arrives while node 0 computes (hours for seconds of result).
    let past = d.join("past.toml");
    let text = std::fs::read_to_string(&busy).expect("busy.toml");
    let text = text.replace(
        "compute_ns_per_iter = 1000000.0",
        "compute_ns_per_iter = 1e15",
    );
    assert!(text.contains("1e15"), "{text}");
    std::fs::write(&past, text).expect("past.toml");
    let args = [
        "interference",
        "--backend",
        "sim",
        "--sim-config",
        past.to_str().unwrap(),
    ];
    assert_usage_output(
        &common::run(&args),
        "at most 1000000 (1 ms an iteration)",
        args,
    );
    // A machine at that bound is slow to simulate (every stream message simulated while
    // node 0 computes for a millisecond an iteration): it stops soon after a signal, what it
    // measured kept and every time it reports non-negative.
    let json = d.join("busy.json");
    let mut c = commbench(&[
        "interference",
        "--streams",
        "1",
        "--backend",
        "sim",
        "--sim-config",
        busy.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let mut child = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    std::thread::sleep(Duration::from_secs(3));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("kill");
    let status = common::wait_for(&mut child, Duration::from_secs(30)).expect("stops");
    assert_eq!(status.code(), Some(143));
    let doc = common::read_json(&json);
    assert_eq!(doc["status"], "interrupted");
    for p in doc["points"].as_array().expect("points") {
        for t in p["trial_ns"].as_array().into_iter().flatten() {
            assert!(t.as_f64().is_some_and(|t| t >= 0.0), "{t}");
        }
    }
}
