//! Integration tests of the `commbench` command line: exit codes, the JSON contract, runs
//! started by hand with --rank/--ranks, a refused token, a killed peer, and the options refused
//! before anything starts.

use crate::common;

use common::runs::{
    check_contract, free_port, killed_peer_gives_error_and_partial_results, quick_doc, spawn_rank,
    TCP,
};
use common::{
    assert_ok, assert_usage_error, commbench, quick, read_json, run, run_json, stderr, stdout,
    tmpdir, wait_for,
};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

#[test]
fn help_and_version_succeed() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("pingpong") && s.contains("timer"));
    let o = run(&["pingpong", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let s = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--sizes",
        "--trials",
        "--npp",
        "--res-npp",
        "--cut-coef",
        "--samples",
        "--source",
        "--dest",
        "--timeout",
        "--poll",
        "--output",
        "--rendezvous",
    ] {
        assert!(s.contains(flag), "pingpong --help lacks {flag}");
    }
    assert_eq!(run(&["--version"]).status.code(), Some(0));
}

#[test]
fn bad_usage_is_exit_2_with_reason_and_hint() {
    assert_usage_error(
        &["pingpong", "--backend", "carrier-pigeon"],
        "unknown backend",
    );
    assert_usage_error(&["pingpong", "--backend", "mpi"], "mpi");
    assert_usage_error(&["pingpong", "--sizes", "8..x"], "--sizes");
    assert_usage_error(&["pingpong", "--sizes", "16..8"], "--sizes");
    assert_usage_error(&["pingpong", "--npp", "0"], "npp");
    assert_usage_error(&["pingpong", "--source", "1", "--dest", "1"], "rank 1");
    assert_usage_error(&["pingpong", "--dest", "5", "--ranks", "2"], "out of range");
    assert_usage_error(&["pingpong", "--trials", "0"], "trials");
    assert_usage_error(&["pingpong", "--cut-coef", "0.5"], "cut-coef");
    assert_usage_error(&["pingpong", "--timeout", "0"], "timeout");
    for t in ["5e-324", "1e-9", "9e-4", "1e7", "inf", "0"] {
        assert_usage_error(
            &["pingpong", "--timeout", t],
            &format!("--timeout {t} s: 0.001 s (1 ms) to 1e7 s"),
        );
    }
    assert_usage_error(&["pingpong", "--backend", "tcp", "--wait", "futex"], "shm");
    assert_usage_error(&["timer", "--samples", "0"], "samples");
    // clap's errors in the same form: what is missing or wrong, and a hint.
    assert_usage_error(&["transpose"], "--n <N>");
    assert_usage_error(&["pingpong", "--progress", "sometimes"], "--progress");
    assert_usage_error(&["pingpong", "--backend", "mpi,tcp"], "mpi");
    // clap's own errors are usage errors too.
    let o = run(&["pingpong", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["pingpong", "--trials", "many"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn timer_prints_overhead_and_resolution() {
    let d = tmpdir("timer");
    let j = d.join("timer.json");
    let o = run(&["timer", "--samples", "20000", "--json", j.to_str().unwrap()]);
    assert_ok(&o);
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains("min_ov") && s.contains("res_timing"));
    let v = read_json(&j);
    assert_eq!(v["samples"], 20000);
    assert!(
        v["resolution_ns"].as_f64().unwrap() >= v["min_overhead_ns"].as_f64().unwrap()
            || v["resolution_ns"] == 0.0
    );
}

#[test]
fn tcp_run_writes_the_documented_outputs() {
    let d = tmpdir("tcp-out");
    let o = run(&[
        "pingpong",
        "--backend",
        "tcp",
        "--sizes",
        "0,8,1K",
        "--trials",
        "50",
        "--samples",
        "10000",
        "--warmup",
        "5",
        "--output",
        d.to_str().unwrap(),
    ]);
    assert_ok(&o);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("median") && text.contains("kept/removed"),
        "{text}"
    );
    // Piped, there is no progress bar: standard error holds only the names of the files.
    let err = stderr(&o);
    assert!(
        err.lines().all(|l| l.starts_with("wrote ")),
        "unexpected standard error: {err}"
    );
    for f in [
        "commbench.output.txt",
        "commbench.summary.txt",
        "result.json",
    ] {
        assert!(d.join(f).is_file(), "{f} missing");
    }
    let doc = read_json(&d.join("result.json"));
    check_contract(&doc, &[0, 8, 1024], 50);
    assert_eq!(doc["status"], "complete");
    assert_eq!(doc["environment"]["backend_info"]["mode"], "blocking");
}

/// [`quick_doc`] of an 8-byte tcp ping-pong.
fn tcp_doc(name: &str, extra: &[&str]) -> serde_json::Value {
    quick_doc(name, TCP, &[8], extra)
}

#[test]
fn tcp_poll_mode_and_fixed_npp_are_recorded() {
    let doc = tcp_doc("tcp-poll", &["--poll", "--npp", "3"]);
    assert_eq!(doc["points"][0]["npp"], 3);
    assert!(doc["points"][0]["npp_calculated"].is_null());
    assert_eq!(doc["environment"]["backend_info"]["mode"], "poll");
    // The backend's options, under its name, and the flat key earlier documents had.
    let c = &doc["config"];
    assert_eq!(c["poll"], true, "{c}");
    let tcp = &c["backend_options"]["tcp"];
    assert_eq!(
        (
            tcp["poll"].clone(),
            tcp["bind"].clone(),
            tcp["cpus"].clone()
        ),
        (
            true.into(),
            serde_json::Value::Null,
            serde_json::Value::Null
        ),
        "{c}"
    );
}

/// Every backend records its options under its name, as they ran (the defaults included),
/// beside the flat keys of earlier documents, which keep saying what was given.
#[test]
fn backends_record_their_options_as_they_ran() {
    let sim = quick_doc("options-sim", &["--backend", "sim"], &[8], &[]);
    let c = &sim["config"];
    assert!(c["sim_config"].is_null(), "{c}");
    assert_eq!(c["backend_options"]["sim"]["sim_config"], "ncube7", "{c}");
    assert_eq!(c["backend_options"]["sim"]["machine"], "ncube7", "{c}");
    let shm = quick_doc(
        "options-shm",
        &["--backend", "shm"],
        &[8],
        &["--wait", "futex"],
    );
    let c = &shm["config"];
    assert_eq!(c["wait"], "futex", "{c}");
    assert_eq!(c["backend_options"]["shm"]["wait"], "futex", "{c}");
    assert_eq!(
        c["backend_options"].as_object().map(|m| m.len()),
        Some(1),
        "{c}"
    );
}

#[test]
fn tcp_ranks_are_pinned_with_cpus() {
    let doc = tcp_doc("tcp-cpus", &["--cpus", "0"]);
    let info = &doc["environment"]["backend_info"];
    assert_eq!(info["pinned_cpu"], 0, "{info}");
    assert_eq!(info["cpu_affinity"], serde_json::json!([0]), "{info}");
    assert_usage_error(&["pingpong", "--backend", "sim", "--cpus", "0"], "--cpus");
    assert_usage_error(
        &["pingpong", "--backend", "tcp", "--wait", "futex"],
        "--wait",
    );
}

#[test]
fn ranks_started_by_hand_and_a_wrong_token_is_refused() {
    let d = tmpdir("manual");
    let rdv = format!("127.0.0.1:{}", free_port());
    let j = d.join("r.json");
    let mut r0 = spawn_rank(TCP, 0, &rdv, "right-token-0123456789", Some(&j));
    std::thread::sleep(Duration::from_millis(300));
    // An impostor with the wrong token is refused and does not disturb the run.
    let mut bad = spawn_rank(TCP, 1, &rdv, "wrong-token-0123456789", None);
    let bad_status = wait_for(&mut bad, Duration::from_secs(15));
    assert!(
        bad_status.map(|s| !s.success()).unwrap_or(true),
        "impostor succeeded"
    );
    let mut r1 = spawn_rank(TCP, 1, &rdv, "right-token-0123456789", None);
    let s1 = wait_for(&mut r1, Duration::from_secs(30));
    let s0 = wait_for(&mut r0, Duration::from_secs(30));
    let mut e0 = String::new();
    r0.stderr.take().unwrap().read_to_string(&mut e0).unwrap();
    assert!(
        s0.map(|s| s.success()).unwrap_or(false),
        "rank 0 failed: {e0}"
    );
    assert!(s1.map(|s| s.success()).unwrap_or(false));
    assert!(
        e0.to_lowercase().contains("token") || e0.contains("refused"),
        "the refusal is logged: {e0}"
    );
    let doc = read_json(&j);
    check_contract(&doc, &[8], 30);
    assert_eq!(doc["environment"]["launcher"], "manual");
}

#[test]
fn tcp_killed_peer() {
    killed_peer_gives_error_and_partial_results(&["--backend", "tcp"]);
}

#[test]
fn shm_killed_peer() {
    killed_peer_gives_error_and_partial_results(&["--backend", "shm"]);
}

#[test]
fn sim_ncube7_corner_to_corner_matches_the_closed_form() {
    let d = tmpdir("sim");
    let j = d.join("r.json");
    // Fixed npp so the expected trial time is exact: npp round trips plus one clock read.
    let args = [
        "pingpong",
        "--backend",
        "sim",
        "--sim-config",
        "ncube7",
        "--source",
        "0",
        "--dest",
        "63",
        "--trials",
        "20",
        "--samples",
        "2000",
        "--npp",
        "4",
    ];
    let doc = run_json(&j, &args);
    check_contract(&doc, &[8], 20);
    // Seed 001 Table 3 at n = 8 bytes over d = 6 hops: F + 6E + U.
    let f = 160.0 + 0.60 * 8.0;
    let e = 220.0 + 1.285 * 8.0;
    let u = 130.0 + 0.61 * 8.0;
    let closed = f + 6.0 * e + u;
    let tick_us = doc["timer"]["resolution_ns"].as_f64().unwrap() / 1000.0;
    assert!(
        (tick_us - 146.286).abs() < 1e-9,
        "the timer method finds the tick: {tick_us}"
    );
    assert_eq!(doc["timer"]["min_overhead_ns"], 0.0);
    let median = doc["points"][0]["one_way_us"]["median"].as_f64().unwrap();
    // The clock is quantised to the tick: a trial of 2 npp trips is off by under one tick.
    assert!(
        (median - closed).abs() <= tick_us / 8.0 + 20.0 / 8.0,
        "median {median} vs closed form {closed}"
    );
    // Deterministic: a second run gives the same trial times.
    let j2 = d.join("r2.json");
    let doc2 = run_json(&j2, &args);
    assert_eq!(doc["points"][0]["trial_ns"], doc2["points"][0]["trial_ns"]);
}

#[test]
fn sim_rejects_ranks_outside_the_machine() {
    assert_usage_error(
        &[
            "pingpong",
            "--backend",
            "sim",
            "--sim-config",
            "ncube7",
            "--dest",
            "64",
        ],
        "out of range",
    );
    assert_usage_error(
        &[
            "pingpong",
            "--backend",
            "sim",
            "--sim-config",
            "/no/such/file.toml",
        ],
        "sim-config",
    );
}

/// The names in /dev/shm.
fn dev_shm() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn shm_is_the_default_and_records_wait_policy_and_pinning() {
    let j = tmpdir("shm").join("r.json");
    let before = dev_shm();
    let doc = run_json(
        &j,
        &[
            "pingpong",
            "--wait",
            "spin-yield",
            "--cpus",
            "0",
            "--trials",
            "50",
            "--samples",
            "1000",
            "--sizes",
            "8,1M",
        ],
    );
    check_contract(&doc, &[8, 1 << 20], 50);
    assert_eq!(doc["environment"]["backend"], "shm");
    let info = &doc["environment"]["backend_info"];
    assert_eq!(info["wait"], "spin-yield", "{info}");
    assert_eq!(info["cpu_affinity"], serde_json::json!([0]), "{info}");
    let after = dev_shm();
    assert!(
        after.iter().all(|f| before.contains(f)),
        "left in /dev/shm: {after:?}"
    );
    assert_usage_error(&["pingpong", "--wait", "nap"], "--wait");
    assert_usage_error(&["pingpong", "--cpus", "3-1"], "--cpus");
}

/// Every subcommand's `--help` text.
fn help_of(sub: &str) -> String {
    let o = run(&[sub, "--help"]);
    assert_ok(&o);
    stdout(&o)
}

#[test]
fn each_command_offers_only_what_it_accepts_and_cites_papers() {
    let t = help_of("transpose");
    for flag in [
        "--sizes",
        "--sweep",
        "--breakpoint",
        "--instructions-per-second",
    ] {
        assert!(!t.contains(flag), "transpose --help offers {flag}");
    }
    assert!(t.contains("--n <N>") && t.contains("--trials") && t.contains("--ranks"));
    // The rank count is --ranks; the old --size and --nranks are hidden aliases.
    let p = help_of("pingpong");
    assert!(p.contains("--ranks <N>") && p.contains("--rank <R>"));
    assert!(!p.contains("--size ") && !p.contains("--nranks"), "{p}");
    assert!(p.contains("--breakpoint") && p.contains("Hockney"));
    let mut all = stdout(&run(&["--help"]));
    for sub in [
        "pingpong",
        "exchange",
        "bandwidth",
        "transpose",
        "timer",
        "report",
        "plot",
        "compare",
    ] {
        all += &help_of(sub);
    }
    // As one line: the help is wrapped to the terminal's width.
    let all = all.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        !all.to_lowercase().contains("seed 0"),
        "help names a seed document"
    );
    assert!(all.contains("Luecke et al. 2009 §3.3") && all.contains("Hockney's COMMS1"));
}

/// `args` is a usage error naming `needle` whose hint contains `hint`, and nothing ran: the
/// `--output` directory it was given was never made.
fn refused(args: &[&str], needle: &str, hint: &str) {
    let d = tmpdir(&format!(
        "refused-{}",
        args.join("_").replace(['/', ' ', ':'], "")
    ));
    let out = d.join("out");
    let mut all = args.to_vec();
    let custom_output = args.contains(&"--output");
    if !custom_output {
        all.extend_from_slice(&["--output", out.to_str().unwrap()]);
    }
    let o = run(&all);
    common::assert_usage_output(&o, needle, &all);
    let e = stderr(&o);
    let h = e.lines().find(|l| l.starts_with("hint: ")).unwrap_or("");
    assert!(h.contains(hint), "{all:?}: expected {hint:?} in {h:?}");
    assert_eq!(e.lines().count(), 2, "{all:?}: one line and a hint: {e}");
    assert!(stdout(&o).is_empty(), "{all:?} printed a report");
    assert!(!out.exists(), "{all:?} wrote its output");
}

#[test]
fn options_the_run_would_ignore_are_refused() {
    let sim = ["pingpong", "--backend", "sim"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut v = sim.to_vec();
        v.extend_from_slice(extra);
        v
    };
    refused(
        &with(&["--rendezvous", "node1:7000"]),
        "--rendezvous is not used by the sim backend",
        "every node",
    );
    refused(
        &with(&["--full", "--quiet"]),
        "--full with --quiet",
        "drop one of them",
    );
    refused(
        &with(&["--full", "--json", "-"]),
        "--full with --json -",
        "drop one of them",
    );
    refused(
        &with(&["--ranks", "4"]),
        "--ranks is not used by the sim backend",
        "drop --ranks",
    );
    refused(
        &with(&["--timeout", "5"]),
        "--timeout is not used by the sim backend",
        "virtual",
    );
    refused(
        &with(&["--rank", "0", "--size", "2"]),
        "not used by the sim backend",
        "drop",
    );
    refused(
        &["pingpong", "--backend", "tcp", "--poll", "--wait", "futex"],
        "--wait is not used by the tcp backend",
        "--backend shm",
    );
    refused(
        &[
            "pingpong",
            "--rendezvous",
            "127.0.0.1:7000",
            "--rank",
            "0",
            "--ranks",
            "2",
        ],
        "--rendezvous is not used by the shm backend",
        "--backend tcp",
    );
    refused(
        &[
            "pingpong",
            "--backend",
            "tcp",
            "--rendezvous",
            "127.0.0.1:7000",
        ],
        "not used by a local run",
        "--rank R --ranks N",
    );
    refused(
        &["pingpong", "--npp", "4", "--npp-trials", "50"],
        "--npp-trials is not used with --npp",
        "drop --npp-trials",
    );
    refused(
        &["pingpong", "--sizes", "8", "--breakpoint", "none"],
        "--breakpoint is not used with one message size",
        "--sweep",
    );
    refused(
        &["exchange", "--instructions-per-second", "2e9"],
        "--instructions-per-second is not used with one message size",
        "--sizes",
    );
    refused(&["pingpong", "--output", "-"], "--output -", "--json -");
    let o = run(&["pingpong", "--quiet"]);
    common::assert_usage_output(
        &o,
        "--quiet without --output, --json or --stream",
        "--quiet",
    );
    assert!(stderr(&o).contains("hint: add --json FILE or --output DIR"));
    // transpose has no sizes to give.
    refused(
        &["transpose", "--n", "8", "--sizes", "8"],
        "--sizes is not used by transpose",
        "--n",
    );
    refused(
        &["transpose", "--n", "8", "--sweep"],
        "--sweep is not used by transpose",
        "--n",
    );
    // timer: --sim-config is the simulator's.
    let o = run(&["timer", "--samples", "1000", "--sim-config", "ncube7"]);
    common::assert_usage_output(&o, "--sim-config is not used by timer", "timer");
    assert!(stdout(&o).is_empty());
    let o = run(&["timer", "--backend", "tcp", "--sim-config", "ncube7"]);
    common::assert_usage_output(&o, "--sim-config is not used by the tcp backend", "timer");
}

/// The CPUs this process may run on, as /proc writes them (`0-3,6`).
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    let mut out = Vec::new();
    for item in list.split(',') {
        match item.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => out.push(item.parse().unwrap()),
        }
    }
    out
}

#[test]
fn cpu_lists_are_checked_against_the_host_before_any_rank_starts() {
    let allowed = allowed_cpus();
    let beyond = (allowed.iter().max().unwrap() + 1).to_string();
    let first = allowed[0].to_string();
    for backend in ["shm", "tcp"] {
        let list = format!("{beyond},{first}");
        refused(
            &["pingpong", "--backend", backend, "--cpus", &list],
            &format!("--cpus {list}: CPU {beyond} "),
            &format!("--cpus {first}"),
        );
    }
    if let [a, b, ..] = allowed[..] {
        let list = format!("{a},{b}");
        refused(
            &["pingpong", "--cpus", &list, "--ranks", "3"],
            &format!("--cpus {list}: 2 CPUs for 3 ranks"),
            "one CPU per rank",
        );
    }
    refused(
        &["pingpong", "--cpus", &format!("{first},{first}")],
        "more than once",
        "--cpus 0,1",
    );
}

#[test]
fn bad_rendezvous_and_ranks_are_usage_errors() {
    let tcp = [
        "pingpong",
        "--backend",
        "tcp",
        "--rank",
        "0",
        "--ranks",
        "2",
    ];
    for (addr, why) in [
        ("node1", "no port"),
        (":7000", "no host"),
        ("127.0.0.1:0", "port 0"),
        ("127.0.0.1:http", "not a number"),
        ("no-such-host.invalid:7000", "cannot resolve"),
    ] {
        let mut a = tcp.to_vec();
        a.extend_from_slice(&["--rendezvous", addr]);
        refused(&a, why, "--rendezvous node1:7000");
    }
    for host in ["192.0.2.1", "no-such-host.invalid"] {
        refused(
            &["pingpong", "--backend", "tcp", "--bind", host],
            &format!("--bind {host}: cannot listen there"),
            "--bind 127.0.0.1",
        );
    }
    // --size is still accepted for the rank count; --rank needs it.
    refused(
        &["pingpong", "--backend", "tcp", "--rank", "5", "--size", "2"],
        "rank 5 is out of range for 2 ranks",
        "--rank/--ranks",
    );
    let o = run(&["pingpong", "--rank", "1"]);
    common::assert_usage_output(&o, "--ranks", "--rank without --ranks");
}

#[test]
fn timer_json_on_standard_output_is_the_json_alone() {
    let o = run(&["timer", "--samples", "2000", "--json", "-"]);
    assert_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON alone");
    assert_eq!(v["samples"], 2000);
}

/// A reader that stops early (`| head`) ends the output quietly: no panic, no error line.
#[test]
fn a_closed_standard_output_is_not_a_crash() {
    for args in [
        &["timer", "--samples", "1000", "--json", "-"][..],
        &[
            "pingpong",
            "--backend",
            "sim",
            "--sizes",
            "1..1M:x2",
            "--trials",
            "20",
            "--samples",
            "1000",
        ][..],
    ] {
        let mut c = commbench(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starts");
        // Close the pipe before anything is written, as a reader that has had enough does.
        drop(c.stdout.take());
        let o = c.wait_with_output().expect("ends");
        let e = stderr(&o);
        assert!(!e.contains("panicked"), "{args:?}: {e}");
        assert!(o.status.code() == Some(0), "{args:?}: {:?} {e}", o.status);
    }
}

/// The default report names the `min_ov` subtracted from every trial, and it is what the
/// characterisation of each machine's clock finds (docs/simulator.md §3): not 0 for a 40 ns
/// tick and a 30 ns read, whose back-to-back reads always straddle a tick.
#[test]
fn report_names_the_overhead_subtracted_from_every_trial() {
    use common::machine::Machine;
    let d = tmpdir("min-ov-subtracted");
    for (tick, read, min_ov) in [(40, 30, 40.0), (7, 5, 0.0), (1, 20, 20.0)] {
        let m = Machine::new(&format!("t{tick}r{read}"), 1)
            .tick_ns(tick)
            .clock_read_ns(read)
            .write(&d.join(format!("t{tick}r{read}.toml")));
        let j = d.join(format!("t{tick}r{read}.json"));
        let m = m.to_str().unwrap();
        let j = j.to_str().unwrap();
        let o = run(&quick(&[
            "pingpong",
            "--backend",
            "sim",
            "--sim-config",
            m,
            "--json",
            j,
        ]));
        assert_ok(&o);
        let out = stdout(&o);
        let line = format!("overhead min_ov {min_ov} ns (subtracted from every trial)");
        assert!(out.contains(&line), "tick {tick}, read {read}: {out}");
        let doc = read_json(Path::new(j));
        assert_eq!(doc["timer"]["min_overhead_ns"], min_ov, "tick {tick}");
        assert_eq!(doc["timer"]["detail"]["backward_steps"], 0, "tick {tick}");
    }
}
