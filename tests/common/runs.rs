//! Runs every backend's command-line tests share: a quick ping-pong checked against the
//! result contract, buffer controls recorded, a complete all-pairs matrix, two ranks started
//! by hand, and a peer killed mid-run. The default backends' tests (`tests/cli.rs`) and the
//! opt-in ones' (`tests/ofi_ucx.rs`) call them with their `--backend` options.

use super::{
    commbench, finish, quick, read_json, run_json, tmpdir, wait_for, wait_for_line, QUICK_TRIALS,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A directory name's part for `backend` (`--backend NAME` and its options): every option's
/// value, so that one backend run with two sets of options gets two directories.
fn tag(backend: &[&str]) -> String {
    let words: Vec<&str> = backend
        .iter()
        .copied()
        .filter(|w| !w.starts_with("--"))
        .collect();
    words
        .join("-")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

pub fn check_contract(doc: &serde_json::Value, sizes: &[u64], trials: u64) {
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

/// A quick ping-pong of `sizes` on `backend` (`--backend NAME` and its options) with `extra`
/// arguments; its result document, checked against the contract.
pub fn quick_doc(name: &str, backend: &[&str], sizes: &[u64], extra: &[&str]) -> serde_json::Value {
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
pub fn buffers_recorded(name: &str, backend: &[&str]) {
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
pub fn allpairs_complete(name: &str, backend: &[&str]) {
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

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Rank `rank` of a 2-rank ping-pong started by hand on `backend` (`--backend NAME` and its
/// options), meeting at `rdv` with `token`.
pub fn spawn_rank(
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

pub const TCP: &[&str] = &["--backend", "tcp"];

/// Two ranks of `backend` started by hand (`--rank/--ranks/--rendezvous` and a shared token)
/// complete a run, and rank 0's result names the manual launch.
pub fn ranks_started_by_hand_complete_a_run(backend: &[&str]) {
    let d = tmpdir(&format!("manual-{}", tag(backend)));
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

/// Children of a process, from /proc.
pub fn children_of(pid: u32) -> Vec<u32> {
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
    let d = tmpdir(&format!("killed-{}", tag(backend)));
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

pub fn nix_kill(pid: u32) -> std::io::Result<()> {
    let s = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()?;
    if s.success() {
        Ok(())
    } else {
        Err(std::io::Error::other("kill failed"))
    }
}

/// How long an all-pairs run of [`rank_lost_mid_run`] is: `--trials` a cell, `--rounds`
/// (passes), and `--round-timeout`, which must hold a cell's trials on a loaded machine.
pub struct Pace {
    pub trials: &'static str,
    pub passes: &'static str,
    pub round_timeout: &'static str,
}

/// The pace of the default backends' runs: 200 trials a cell, 30 passes, rounds of at most
/// 3 s.
pub const BRISK: Pace = Pace {
    trials: "200",
    passes: "30",
    round_timeout: "3",
};

/// The pace of backends whose ranks poll without sleeping (libfabric, UCX): with 4 ranks on
/// 2 CPUs a message may wait a scheduler time slice, so fewer trials a cell (a round must
/// still end within its timeout) and fewer passes.
pub const POLLING: Pace = Pace {
    trials: "20",
    passes: "8",
    round_timeout: "3",
};

/// An all-pairs run of 4 local ranks on `backend`, one of ranks 1 to 3 (drawn at random)
/// sent `signal` a quarter of the way in: the run completes (exit 0), names that rank lost,
/// keeps no cell of it after it was found, and says so in the report.
pub fn rank_lost_mid_run(name: &str, backend: &[&str], signal: Signal, pace: Pace) {
    let out = tmpdir(name).join("out");
    // The first progress line comes after a quarter of the rounds (about a second at 200
    // trials a cell), with three quarters of the run still to go when the rank is stopped.
    let mut args = vec!["allpairs", "--ranks", "4"];
    args.extend_from_slice(backend);
    args.extend_from_slice(&["--sizes", "8", "--trials", pace.trials]);
    args.extend_from_slice(&["--rounds", pace.passes]);
    args.extend_from_slice(&["--timeout", "2", "--round-timeout", pace.round_timeout]);
    args.extend_from_slice(&["--progress", "always"]);
    let mut c = commbench(&args);
    c.arg("--output")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut c = c.spawn().expect("starts");
    let lines = wait_for_line(&mut c, "rounds ");
    // A child rank (its number from the launcher's variable) drawn at random.
    let mut kids: Vec<(u32, u32)> = children_of(c.id())
        .into_iter()
        .filter_map(|p| {
            let env = std::fs::read(format!("/proc/{p}/environ")).ok()?;
            let rank = env
                .split(|&b| b == 0)
                .find_map(|v| v.strip_prefix(b"COMMBENCH_RANK="))
                .and_then(|r| std::str::from_utf8(r).ok()?.parse::<u32>().ok())?;
            Some((p, rank))
        })
        .collect();
    assert!(!kids.is_empty(), "no child rank");
    kids.sort_unstable_by_key(|&(_, r)| r);
    let draw = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as usize);
    let (pid, rank) = kids[draw % kids.len()];
    kill(Pid::from_raw(pid as i32), signal).expect("signal");
    let (code, err) = finish(c, lines, Duration::from_secs(90));
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    assert_eq!(code, Some(0), "rank {rank} sent {signal}: {err}");
    let doc = read_json(&out.join("result.json"));
    assert_eq!(doc["status"], "complete", "{err}");
    let ap = &doc["allpairs"];
    let lost = ap["lost"].as_array().expect("a lost rank");
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(
        lost[0]["rank"], rank,
        "rank {rank} was sent {signal}: {lost:?}"
    );
    let found = lost[0]["round"].as_u64().expect("found after a round");
    for c in ap["cells"].as_array().expect("cells") {
        let its = c["source"] == rank || c["dest"] == rank;
        assert!(
            !its || c["round"].as_u64().expect("round") <= found,
            "a cell of the lost rank after it was found: {c}"
        );
    }
    let report = std::fs::read_to_string(out.join("commbench.output.txt")).expect("the report");
    assert!(report.contains(&format!("lost: rank {rank} ")), "{report}");
}
