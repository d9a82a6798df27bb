//! Integration tests of the `commbench` command line: exit codes, the JSON contract, runs
//! started by hand with --rank/--ranks, a refused token, a killed peer, and the options refused
//! before anything starts.

mod common;

use common::{
    assert_ok, assert_usage_error, commbench, quick, read_json, run, run_json, stderr, stdout,
    tmpdir, wait_for, QUICK_TRIALS,
};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
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

fn check_contract(doc: &serde_json::Value, sizes: &[u64], trials: u64) {
    for k in [
        "schema",
        "version",
        "command",
        "config",
        "environment",
        "timer",
        "points",
    ] {
        assert!(doc.get(k).is_some(), "missing top-level key {k}");
    }
    assert_eq!(doc["schema"], "commbench-result");
    assert_eq!(doc["version"], 1);
    for k in ["samples", "min_overhead_ns", "resolution_ns"] {
        assert!(doc["timer"][k].is_number(), "timer.{k}");
    }
    let points = doc["points"].as_array().expect("points");
    assert_eq!(points.len(), sizes.len());
    for (p, &size) in points.iter().zip(sizes) {
        assert_eq!(p["pattern"], "pingpong");
        assert_eq!(p["size"], size);
        assert!(p["npp"].as_u64().unwrap() >= 1);
        assert!(p.get("npp_calculated").is_some());
        assert_eq!(p["trials"], trials);
        let t = p["trial_ns"].as_array().unwrap();
        assert_eq!(t.len() as u64, trials);
        let ow = &p["one_way_us"];
        for k in [
            "min",
            "median",
            "mean",
            "max",
            "variance",
            "std_dev",
            "cv",
            "std_err",
            "rel_std_err",
            "p90",
            "p99",
            "ci95_median",
            "ci95_mean",
        ] {
            assert!(ow.get(k).is_some(), "one_way_us.{k}");
        }
        // The statistics are of trial / (2 npp): check the minimum against the raw array.
        let npp = p["npp"].as_f64().unwrap();
        let min_raw = t
            .iter()
            .map(|x| x.as_f64().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert!((ow["min"].as_f64().unwrap() - min_raw / (2.0 * npp) / 1000.0).abs() < 1e-9);
        assert!(ow["cv"].as_f64().unwrap() < 100.0, "cv is a fraction");
        for k in ["min", "median", "mean", "max"] {
            assert!(p["rate_mb_s"][k].is_number(), "rate_mb_s.{k}");
        }
        let f = &p["filtered"];
        assert_eq!(
            f["kept"].as_u64().unwrap() + f["removed"].as_u64().unwrap(),
            trials
        );
        assert!(f["cut_coef"].is_number() && f["one_way_us"]["median"].is_number());
    }
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

/// A quick ping-pong of `sizes` on `backend` (`--backend NAME` and its options) with `extra`
/// arguments; its result document, checked against the contract.
fn quick_doc(name: &str, backend: &[&str], sizes: &[u64], extra: &[&str]) -> serde_json::Value {
    let list: Vec<String> = sizes.iter().map(u64::to_string).collect();
    let list = list.join(",");
    let mut args = quick(&["pingpong", "--sizes", &list]);
    args.extend_from_slice(backend);
    args.extend_from_slice(extra);
    let doc = run_json(&tmpdir(name).join("r.json"), &args);
    check_contract(&doc, sizes, QUICK_TRIALS);
    doc
}

/// A validated, cold-cache, single-buffer window of messages placed 3 bytes past a multiple
/// of 64 on `backend` (`--backend NAME` and its options): every point records its trials as
/// checked, the pool written through and addresses 3 bytes past a 64-byte boundary.
#[cfg_attr(not(any(feature = "ofi", feature = "ucx")), allow(dead_code))]
fn buffers_recorded(name: &str, backend: &[&str]) {
    let mut args = vec![
        "bandwidth",
        "--window",
        "4",
        "--buffers",
        "single",
        "--validate",
    ];
    args.extend_from_slice(&["--align", "64", "--offset", "3", "--cache", "cold"]);
    args.extend_from_slice(&["--cache-pool", "2M", "--npp", "2", "--trials", "10"]);
    args.extend_from_slice(&["--samples", "1000", "--sizes", "8,64K"]);
    args.extend_from_slice(backend);
    let doc = run_json(&tmpdir(name).join("r.json"), &args);
    assert_eq!(doc["status"], "complete", "{}", doc["error"]);
    for p in doc["points"].as_array().expect("points") {
        let b = &p["buffers"];
        assert!(b["validated_trials"].as_u64().unwrap_or(0) >= 10, "{b}");
        assert_eq!(b["cache_pool"], 2 << 20, "{b}");
        assert_eq!(
            (b["source_alignment"].clone(), b["dest_alignment"].clone()),
            (1.into(), 1.into()),
            "{b}"
        );
    }
}

/// An all-pairs run of 3 local ranks on `backend` (`--backend NAME` and its options), 10
/// trials a cell at 8 B and 4 KiB, no retests: its matrix must be complete.
#[cfg_attr(not(any(feature = "ofi", feature = "ucx")), allow(dead_code))]
fn allpairs_complete(name: &str, backend: &[&str]) {
    let mut args = vec![
        "allpairs", "--ranks", "3", "--sizes", "8,4K", "--trials", "10",
    ];
    args.extend_from_slice(&["--samples", "1000", "--retest-trials", "0"]);
    args.extend_from_slice(backend);
    let doc = run_json(&tmpdir(name).join("r.json"), &args);
    assert_eq!(doc["status"], "complete", "{}", doc["error"]);
    let cells = doc["allpairs"]["cells"].as_array().expect("cells");
    for size in [8, 4096] {
        let mut pairs: Vec<(u64, u64)> = cells
            .iter()
            .filter(|c| c["size"] == size)
            .map(|c| (c["source"].as_u64().unwrap(), c["dest"].as_u64().unwrap()))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        assert_eq!(pairs.len(), 6, "{name} at {size} B: {pairs:?}");
    }
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Rank `rank` of a 2-rank ping-pong started by hand on `backend` (`--backend NAME` and its
/// options), meeting at `rdv` with `token`.
fn spawn_rank(
    backend: &[&str],
    rank: u32,
    rdv: &str,
    token: &str,
    out: Option<&Path>,
) -> std::process::Child {
    let mut c = commbench(&[]);
    c.arg("pingpong")
        .args(backend)
        .args([
            "--trials",
            "30",
            "--samples",
            "1000",
            "--quiet",
            "--timeout",
            "10",
        ])
        .args([
            "--rank",
            &rank.to_string(),
            "--ranks",
            "2",
            "--rendezvous",
            rdv,
        ])
        .env("COMMBENCH_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = out {
        c.arg("--json").arg(p);
    }
    c.spawn().unwrap()
}

const TCP: &[&str] = &["--backend", "tcp"];

/// Two ranks of `backend` started by hand (`--rank/--ranks/--rendezvous` and a shared token)
/// complete a run, and rank 0's result names the manual launch.
pub fn ranks_started_by_hand_complete_a_run(backend: &[&str]) {
    let d = tmpdir(&format!("manual-{}", backend[1]));
    let rdv = format!("127.0.0.1:{}", free_port());
    let j = d.join("r.json");
    let token = "a-shared-token-0123456789";
    let mut r0 = spawn_rank(backend, 0, &rdv, token, Some(&j));
    let mut r1 = spawn_rank(backend, 1, &rdv, token, None);
    let s1 = wait_for(&mut r1, Duration::from_secs(60));
    let s0 = wait_for(&mut r0, Duration::from_secs(60));
    let mut e0 = String::new();
    r0.stderr.take().unwrap().read_to_string(&mut e0).unwrap();
    assert!(
        s0.is_some_and(|s| s.success()),
        "{backend:?}: rank 0 failed: {e0}"
    );
    assert!(
        s1.is_some_and(|s| s.success()),
        "{backend:?}: rank 1 failed"
    );
    let doc = read_json(&j);
    check_contract(&doc, &[8], 30);
    assert_eq!(doc["environment"]["launcher"], "manual");
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

/// Children of a process, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            // pid (comm) state ppid ...
            if let Some(rest) = stat.rsplit_once(')').map(|x| x.1) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                if f.get(1).and_then(|x| x.parse::<u32>().ok()) == Some(pid) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// A peer killed mid-run (`backend`: `--backend NAME` and its options) ends the run with exit 1, an error naming it, and the sizes already
/// measured still written.
pub fn killed_peer_gives_error_and_partial_results(backend: &[&str]) {
    let d = tmpdir(&format!("killed-{}", backend[1].replace(';', "-")));
    let sizes: Vec<String> = (1..=400).map(|s| s.to_string()).collect();
    let mut c = commbench(&[])
        .arg("pingpong")
        .args(backend)
        .args([
            "--trials",
            "200",
            "--samples",
            "1000",
            "--warmup",
            "1",
            "--timeout",
            "3",
            "--quiet",
            "--progress",
            "always",
        ])
        .args(["--sizes", &sizes.join(","), "--output", d.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = c.id();
    // Standard error, read as it comes: the progress lines say when the first size is done,
    // so the kill lands mid-run however fast or loaded the machine is.
    let (tx, rx) = std::sync::mpsc::channel();
    let stream = c.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
        {
            // Size 2 under way: size 1 was kept (its last trial is reported before rank 0
            // has gathered and kept it, and a kill between the two left no point).
            if line.starts_with("progress: size 2/400") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if let Err(e) = rx.recv_timeout(Duration::from_secs(30)) {
        let _ = c.kill();
        let _ = c.wait();
        let said = reader.join().unwrap_or_default();
        panic!("{backend:?}: the first size never completed ({e}); the run said:\n{said}");
    }
    let kids = children_of(pid);
    assert!(!kids.is_empty(), "rank 1 never started");
    for k in &kids {
        let _ = nix_kill(*k);
    }
    let status =
        wait_for(&mut c, Duration::from_secs(20)).expect("rank 0 did not end within the timeout");
    let err = reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("rank 1"), "the error names the peer: {err}");
    let doc = read_json(&d.join("result.json"));
    assert_eq!(doc["status"], "partial");
    let n = doc["points"].as_array().unwrap().len();
    assert!((1..400).contains(&n), "{n} points");
    assert!(doc["error"].as_str().unwrap().contains("rank 1"));
}

#[test]
fn tcp_killed_peer() {
    killed_peer_gives_error_and_partial_results(&["--backend", "tcp"]);
}

#[test]
fn shm_killed_peer() {
    killed_peer_gives_error_and_partial_results(&["--backend", "shm"]);
}

fn nix_kill(pid: u32) -> std::io::Result<()> {
    let s = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()?;
    if s.success() {
        Ok(())
    } else {
        Err(std::io::Error::other("kill failed"))
    }
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

/// The libfabric backend (`--features ofi`): a run on each provider CI tests, its result
/// naming the provider and the sizes injected, a provider that is not there refused with the
/// list of those that are, and a killed peer named within the timeout.
#[cfg(feature = "ofi")]
mod ofi {
    use super::*;

    #[test]
    fn runs_on_shm_and_tcp_recording_the_provider_and_inject() {
        for provider in ["shm", "tcp;ofi_rxm"] {
            let doc = quick_doc(
                &format!("ofi-{}", provider.replace(';', "-")),
                &["--backend", "ofi", "--ofi-provider", provider],
                &[8, 100_000],
                &[],
            );
            let info = &doc["environment"]["backend_info"];
            assert_eq!(info["provider"], provider, "{info}");
            let options = &doc["config"]["backend_options"]["ofi"];
            assert_eq!(options["ofi_provider"], provider, "{options}");
            assert_eq!(options["ofi_provider_given"], provider, "{options}");
            let inject = info["inject_size"].as_u64().unwrap();
            assert!(inject > 8 && inject < 100_000, "{info}");
            let sends = info["sends"].as_array().unwrap();
            let injected = |bytes: u64| {
                sends
                    .iter()
                    .find(|s| s["bytes"] == bytes)
                    .map(|s| s["inject"].as_bool().unwrap())
            };
            assert_eq!(injected(8), Some(true), "{info}");
            assert_eq!(injected(100_000), Some(false), "{info}");
        }
    }

    #[test]
    fn message_buffers_are_checked_cold_single_and_placed_over_tcp_ofi_rxm() {
        buffers_recorded(
            "ofi-buffers",
            &["--backend", "ofi", "--ofi-provider", "tcp;ofi_rxm"],
        );
    }

    #[test]
    fn allpairs_fills_the_matrix_over_tcp_ofi_rxm() {
        allpairs_complete(
            "ofi-allpairs",
            &["--backend", "ofi", "--ofi-provider", "tcp;ofi_rxm"],
        );
    }

    #[test]
    fn an_absent_provider_is_bad_usage_listing_the_available_ones() {
        let out = run(&[
            "pingpong",
            "--backend",
            "ofi",
            "--ofi-provider",
            "no-such-provider",
        ]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no provider `no-such-provider`"), "{err}");
        assert!(err.contains("available:") && err.contains("shm"), "{err}");
    }

    #[test]
    fn seed004_queues_run_on_ofi_within_what_the_provider_holds() {
        let d = tmpdir("ofi-queue");
        let out = run(&[
            "queue",
            "posted",
            "--backend",
            "ofi",
            "--ofi-provider",
            "tcp;ofi_rxm",
            "--lengths",
            "0,100",
            "--traversed",
            "100",
            "--trials",
            "20",
            "--quiet",
            "--output",
            d.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{out:?}");
        let doc = read_json(&d.join("result.json"));
        let lengths: Vec<u64> = doc["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["queue_length"].as_u64())
            .collect();
        assert_eq!(lengths, [0, 100], "{doc}");
        // shm's receive queue holds 1024: a longer posted queue is refused before the run.
        let out = run(&[
            "queue",
            "posted",
            "--backend",
            "ofi",
            "--ofi-provider",
            "shm",
            "--lengths",
            "0,1500",
        ]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("receives posted at once") && err.contains("holds at most"),
            "{err}"
        );
    }

    #[test]
    fn wildcard_benchmarks_are_refused_on_the_shm_provider_before_they_start() {
        if commbench_ofi_defect().is_none() {
            return;
        }
        for args in [
            &["queue", "posted", "--any-source"][..],
            &["interference", "--streams", "1"][..],
        ] {
            let mut all = args.to_vec();
            all.extend_from_slice(&["--backend", "ofi", "--ofi-provider", "shm"]);
            let out = run(&all);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("wildcard receives") && err.contains("tcp;ofi_rxm"),
                "{err}"
            );
            assert!(out.stdout.is_empty(), "{args:?} measured before refusing");
        }
    }

    /// Whether this host's shm provider has the wildcard defect (`commbench backends` would
    /// not say; the provider's version does: libfabric 1.17's is 117.x).
    fn commbench_ofi_defect() -> Option<()> {
        let out = std::process::Command::new("fi_info")
            .args(["-p", "shm", "-t", "FI_EP_RDM", "-v"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.trim_start().starts_with("version:"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok())
            .filter(|&major| major <= 117)
            .map(drop)
    }

    #[test]
    fn ofi_ranks_started_by_hand() {
        ranks_started_by_hand_complete_a_run(&[
            "--backend",
            "ofi",
            "--ofi-provider",
            "tcp;ofi_rxm",
        ]);
    }

    #[test]
    fn ofi_killed_peer() {
        killed_peer_gives_error_and_partial_results(&["--backend", "ofi", "--ofi-provider", "shm"]);
    }
}

/// The UCX backend (`--features ucx`): a run over shared memory and over tcp, its result naming
/// the transports, lanes and the protocol of each size; transports that are not there, or cma
/// alone, refused; seed 001's and seed 004's benchmarks; a killed peer named within the
/// timeout.
#[cfg(feature = "ucx")]
mod ucx {
    use super::*;

    #[test]
    fn message_buffers_are_checked_cold_single_and_placed_over_shared_memory() {
        buffers_recorded(
            "ucx-buffers",
            &["--backend", "ucx", "--ucx-tls", "posix,self"],
        );
    }

    #[test]
    fn allpairs_fills_the_matrix_over_shared_memory() {
        allpairs_complete(
            "ucx-allpairs",
            &["--backend", "ucx", "--ucx-tls", "posix,self"],
        );
    }

    #[test]
    fn runs_on_shared_memory_and_tcp_recording_lanes_and_protocols() {
        for (tls, lane) in [("posix,self", "posix/"), ("tcp", "tcp/")] {
            let doc = quick_doc(
                &format!("ucx-{}", tls.replace(',', "-")),
                &["--backend", "ucx", "--ucx-tls", tls],
                &[8, 1_000_000],
                &[],
            );
            let info = &doc["environment"]["backend_info"];
            assert_eq!(info["tls"], tls, "{info}");
            let options = &doc["config"]["backend_options"]["ucx"];
            assert_eq!(options["ucx_tls"], tls, "{options}");
            assert!(
                info["peers"][0]["lanes"].to_string().contains(lane),
                "{info}"
            );
            let sends = info["sends"].as_array().unwrap();
            let proto = |bytes: u64| {
                sends
                    .iter()
                    .find(|s| s["bytes"] == bytes)
                    .and_then(|s| s["protocol"].as_str())
                    .unwrap_or("")
                    .to_string()
            };
            if info["peers"][0]["tag_send"] == ""
                || info["protocol_source"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("none"))
            {
                // No thresholds, or not the ones UCX sends by: the v2 protocols (UCX_PROTO_ENABLE,
                // the default from 1.16).
                assert_eq!(proto(8), "unknown", "{info}");
            } else {
                assert_eq!(proto(8), "egr/short", "{info}");
                assert!(proto(1_000_000).starts_with("rndv"), "{info}");
            }
        }
    }

    #[test]
    fn absent_transports_and_cma_alone_are_bad_usage() {
        for (tls, says) in [
            ("no-such-tl", "no transport `no-such-tl`"),
            ("cma,self", "needs posix or sysv"),
            ("posix,,self", "empty transport name"),
        ] {
            let out = run(&["pingpong", "--backend", "ucx", "--ucx-tls", tls]);
            assert_eq!(out.status.code(), Some(2), "{tls}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(says) && err.contains("hint:"), "{tls}: {err}");
            assert!(out.stdout.is_empty(), "{tls}: measured before refusing");
        }
    }

    #[test]
    fn seed001_and_seed004_benchmarks_run_on_ucx() {
        let runs: [&[&str]; 4] = [
            &[
                "queue",
                "posted",
                "--lengths",
                "0,50",
                "--traversed",
                "50",
                "--trials",
                "20",
            ],
            &[
                "queue",
                "unexpected",
                "--any-source",
                "--lengths",
                "0,20",
                "--trials",
                "20",
            ],
            &[
                "interference",
                "--streams",
                "1",
                "--repetitions",
                "2",
                "--messages",
                "20",
            ],
            &[
                "echo",
                "--hops",
                "1..1",
                "--repetitions",
                "2",
                "--messages",
                "20",
                "--sizes",
                "0,100",
            ],
        ];
        for args in runs {
            let d = tmpdir(&format!("ucx-{}", args[..2].join("-")));
            let mut all = args.to_vec();
            all.extend_from_slice(&[
                "--backend",
                "ucx",
                "--ucx-tls",
                "posix,self",
                "--quiet",
                "--output",
                d.to_str().unwrap(),
            ]);
            let out = run(&all);
            assert!(out.status.success(), "{args:?}: {out:?}");
            let doc = read_json(&d.join("result.json"));
            assert_eq!(doc["status"], "complete", "{args:?}: {doc}");
            assert!(!doc["points"].as_array().unwrap().is_empty(), "{args:?}");
        }
    }

    #[test]
    fn ucx_ranks_started_by_hand() {
        ranks_started_by_hand_complete_a_run(&["--backend", "ucx", "--ucx-tls", "tcp"]);
    }

    #[test]
    fn ucx_killed_peer() {
        killed_peer_gives_error_and_partial_results(&["--backend", "ucx", "--ucx-tls", "tcp"]);
        killed_peer_gives_error_and_partial_results(&[
            "--backend",
            "ucx",
            "--ucx-tls",
            "posix,self",
        ]);
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
