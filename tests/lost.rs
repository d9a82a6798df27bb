//! Nothing measured is lost, however a job ends: every signal that ends a job from outside
//! saves and stops the run as SIGTERM does, all-pairs keeps whole rounds when GNU timeout
//! signals it twice, a signal to a child rank stops the run as one to rank 0, a failed final
//! write leaves the checkpoint whole, paths need not be UTF-8, and `--json` may be a pipe.
#![cfg(all(feature = "sim", feature = "shm"))]

use crate::common;

use common::runs::{rank_lost_mid_run, BRISK};
use common::*;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

/// A long shm sweep (64 sizes, each quick) in a process group of its own, its progress lines
/// on standard error.
fn long_sweep(out: &Path, extra: &[&str]) -> std::process::Command {
    let sizes = (1..=64)
        .map(|i| (i * 8).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut args = vec![
        "pingpong",
        "--sizes",
        &sizes,
        "--trials",
        "400",
        "--warmup",
        "5",
        "--samples",
        "20000",
        "--progress",
        "always",
        "--timeout",
        "20",
    ];
    args.extend_from_slice(extra);
    let mut c = commbench(&args);
    c.arg("--output")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    c
}

/// The rest of standard error and the exit code, within 90 s.
fn finish(c: Child, lines: ErrLines) -> (Option<i32>, String) {
    common::finish(c, lines, Duration::from_secs(90))
}

/// The document in `out` was interrupted by `signal`, with whole sizes in order.
fn assert_interrupted(out: &Path, signal: &str) -> usize {
    let doc = read_json(&out.join("result.json"));
    assert_eq!(doc["status"], "interrupted", "{}", doc["error"]);
    let error = doc["error"].as_str().expect("error");
    assert!(error.contains(signal), "{error}");
    let points = doc["points"].as_array().expect("points");
    assert!(!points.is_empty() && points.len() < 64, "{}", points.len());
    for (i, p) in points.iter().enumerate() {
        assert_eq!(p["size"], (i as u64 + 1) * 8, "sizes in order");
        assert_eq!(p["trials"], 400, "each point is whole");
    }
    points.len()
}

#[test]
fn every_signal_that_ends_a_job_saves_and_stops_the_run() {
    let signals = [
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGXCPU,
        Signal::SIGPWR,
    ];
    for sig in signals {
        let out = tmpdir(&format!("signal-{}", sig as i32)).join("out");
        let mut c = long_sweep(&out, &[]).spawn().expect("starts");
        let lines = wait_for_line(&mut c, "size 2/");
        kill(Pid::from_raw(c.id() as i32), sig).expect("kill");
        let (code, err) = finish(c, lines);
        assert_eq!(code, Some(128 + sig as i32), "{sig}: {err}");
        assert!(err.contains(&format!("{sig} received")), "{err}");
        assert!(err.contains("measured so far are saved in"), "{err}");
        assert_interrupted(&out, sig.as_str());
    }
}

#[test]
fn a_signal_to_a_child_rank_stops_the_run_as_one_to_rank_0() {
    let out = tmpdir("child-signal").join("out");
    let mut c = long_sweep(&out, &["--ranks", "2"]).spawn().expect("starts");
    let lines = wait_for_line(&mut c, "size 2/");
    let children = children_of(c.id());
    assert_eq!(children.len(), 1, "one child rank: {children:?}");
    kill(Pid::from_raw(children[0] as i32), Signal::SIGTERM).expect("kill");
    let (code, err) = finish(c, lines);
    assert_eq!(code, Some(143), "{err}");
    assert_interrupted(&out, "SIGTERM");
    assert!(!err.contains("is gone"), "no rank died of it: {err}");
}

/// The processes `pid` started (from any of its threads).
fn children_of(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks");
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            all.extend(s.split_whitespace().filter_map(|w| w.parse::<u32>().ok()));
        }
    }
    all
}

/// GNU timeout signals its child and then its whole process group: two SIGTERMs at once.
/// The first one's checkpoint (whole rounds) is on disk before the second quits.
#[test]
fn allpairs_keeps_whole_rounds_when_gnu_timeout_signals_it_twice() {
    for backend in ["shm", "sim"] {
        let out = tmpdir(&format!("allpairs-timeout-{backend}")).join("out");
        let mut args = vec![
            "allpairs",
            "--backend",
            backend,
            "--sizes",
            "8,64K",
            "--trials",
            "200",
            "--rounds",
            "50",
            "--progress",
            "always",
        ];
        let cube = tmpdir(&format!("allpairs-cube-{backend}")).join("cube.toml");
        if backend == "shm" {
            args.extend(["--ranks", "3", "--wait", "futex"]);
        } else {
            // 8 nodes: 56 cells a pass.
            machine::Machine::new("eight", 3).write(&cube);
            args.extend(["--sim-config", cube.to_str().unwrap()]);
        }
        let mut c = commbench(&args);
        c.arg("--output")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut c = c.spawn().expect("starts");
        let lines = wait_for_line(&mut c, "rounds ");
        let pid = Pid::from_raw(c.id() as i32);
        kill(pid, Signal::SIGTERM).expect("kill");
        killpg(pid, Signal::SIGTERM).expect("killpg");
        let (code, err) = finish(c, lines);
        assert_eq!(code, Some(143), "{backend}: {err}");
        let doc = read_json(&out.join("result.json"));
        assert_eq!(doc["status"], "interrupted", "{backend}: {err}");
        let cells = doc["allpairs"]["cells"].as_array().expect("cells");
        let rounds = doc["allpairs"]["rounds"].as_array().expect("rounds");
        assert!(!rounds.is_empty(), "{backend}: rounds kept: {err}");
        // Whole rounds: every round kept has all its cells.
        for (i, r) in rounds.iter().enumerate() {
            let pairs = r["pairs"].as_array().map_or(0, Vec::len);
            let here = cells.iter().filter(|c| c["round"] == i).count();
            assert!(
                here >= pairs,
                "{backend}: round {i}: {here} cells, {pairs} pairs"
            );
        }
        assert!(
            std::fs::read_to_string(out.join("commbench.summary.txt")).is_ok(),
            "{backend}"
        );
    }
}

/// A final write that fails (a full disk) leaves the checkpoint whole and says what survived.
#[test]
fn a_failed_final_write_keeps_the_checkpoint() {
    let d = tmpdir("disk-full");
    let Some(mnt) = small_tmpfs(&d) else {
        return;
    };
    let out = mnt.path.join("out");
    let mut c = long_sweep(&out, &[]).spawn().expect("starts");
    let lines = wait_for_line(&mut c, "size 3/");
    kill(Pid::from_raw(c.id() as i32), Signal::SIGINT).expect("kill");
    // The first signal's save, then the disk full before the run writes its final files.
    let lines = read_until(lines, "measured so far are saved in");
    let saved = read_json(&out.join("result.json"));
    assert_eq!(saved["status"], "interrupted");
    fill(&mnt.path.join("filler"));
    let (code, err) = finish(c, lines);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("result.json already there is unchanged"),
        "{err}"
    );
    let kept = read_json(&out.join("result.json"));
    assert_eq!(kept, saved, "the checkpoint is whole");
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.as_bytes().ends_with(b".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no temporary file left: {leftovers:?}"
    );
}

/// Fill the file system of `p` with a file of zeros.
fn fill(p: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(p).expect("filler");
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
}

/// A mounted tmpfs of 512 KiB, unmounted when dropped.
struct Mount {
    path: PathBuf,
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.path)
            .status();
    }
}

/// A small tmpfs under `d`, or `None` (with a message) where this process may not mount one.
fn small_tmpfs(d: &Path) -> Option<Mount> {
    let path = d.join("tmpfs");
    std::fs::create_dir_all(&path).expect("mount point");
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "commbench-test"])
        .arg(&path)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: cannot mount a tmpfs here (needs root) for the full-disk case");
        return None;
    }
    Some(Mount { path })
}

/// Paths that are not UTF-8 are written and recorded; so is a binary started through one.
#[test]
fn paths_need_not_be_utf8() {
    let d = tmpdir("non-utf8");
    let name = |s: &[u8]| d.join(std::ffi::OsStr::from_bytes(s));
    let json = name(b"r\xff.json");
    let dir = name(b"out\xfe");
    let exe = name(b"commbench\xfd");
    std::os::unix::fs::symlink(EXE, &exe).expect("symlink");
    let mut c = std::process::Command::new(&exe);
    c.args(quick(&["pingpong", "--backend", "sim", "--sizes", "8,64"]))
        .arg("--json")
        .arg(&json)
        .arg("--output")
        .arg(&dir);
    let (o, in_time) = bounded(c, Duration::from_secs(120));
    assert!(in_time);
    assert_ok(&o);
    let doc = read_json(&json);
    assert_eq!(doc, read_json(&dir.join("result.json")));
    let command: Vec<&str> = doc["config"]["command"]
        .as_array()
        .or_else(|| doc["command"].as_array())
        .expect("command recorded")
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(command[0].ends_with("commbench\\xfd"), "{command:?}");
    assert!(
        command.iter().any(|w| w.ends_with("r\\xff.json")),
        "{command:?}"
    );
}

/// `--json` to a named pipe: nothing probes it, the reader gets one whole document.
#[test]
fn json_to_a_named_pipe_reaches_its_reader_whole() {
    let d = tmpdir("fifo");
    let fifo = d.join("result.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut s = String::new();
            std::fs::File::open(&fifo)
                .expect("open the pipe")
                .read_to_string(&mut s)
                .expect("read");
            s
        })
    };
    let mut c = commbench(&quick(&["pingpong", "--backend", "sim", "--sizes", "8"]));
    c.arg("--json").arg(&fifo);
    let (o, in_time) = bounded(c, Duration::from_secs(120));
    // A run that never opened the pipe leaves the reader waiting: open it and let go.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&fifo);
    assert!(in_time, "no hang: {}", stderr(&o));
    assert_ok(&o);
    let got = reader.join().expect("reader");
    let doc: serde_json::Value = serde_json::from_str(&got).expect("one whole document");
    assert_eq!(doc["status"], "complete", "{got}");
}

/// A characterisation of billions of clock reads ends at the first signal, not minutes later.
#[test]
fn a_long_clock_characterisation_stops_at_the_first_signal() {
    let out = tmpdir("long-timer").join("out");
    // 2^32 pairs of clock reads: minutes, were they all read.
    let mut c = commbench(&["pingpong", "--samples", "4294967296"]);
    c.arg("--output")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut c = c.spawn().expect("starts");
    let lines = BufReader::new(c.stderr.take().expect("stderr piped")).lines();
    std::thread::sleep(Duration::from_secs(2));
    let t = std::time::Instant::now();
    kill(Pid::from_raw(c.id() as i32), Signal::SIGINT).expect("kill");
    let (code, err) = finish(c, lines);
    assert_eq!(code, Some(130), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "{:?}: {err}",
        t.elapsed()
    );
    let doc = read_json(&out.join("result.json"));
    assert_eq!(doc["status"], "interrupted", "{err}");
}

/// A rank stopped (SIGSTOP) during all-pairs: its partner's cells time out, the step after
/// the round finds it silent for twice the round timeout, and the run goes on without it:
/// it completes (exit 0), names the stopped rank lost, ends the stopped process rather than
/// waiting for it, and keeps no cell of it after it was found.
#[test]
fn a_stopped_rank_is_named_lost_and_the_run_goes_on_without_it() {
    rank_lost_mid_run(
        "allpairs-stopped",
        &["--wait", "futex"],
        Signal::SIGSTOP,
        BRISK,
    );
}

/// A rank's process killed (SIGKILL) during all-pairs on shared memory: the others see its
/// process gone, fail only what they had under way with it, and the run goes on without it
/// as for a stopped rank.
#[test]
fn a_killed_rank_on_shm_is_named_lost_and_the_run_goes_on_without_it() {
    rank_lost_mid_run(
        "allpairs-killed-shm",
        &["--backend", "shm", "--wait", "futex"],
        Signal::SIGKILL,
        BRISK,
    );
}

/// The same over tcp: its connections end without a goodbye, and only they fail.
#[test]
fn a_killed_rank_on_tcp_is_named_lost_and_the_run_goes_on_without_it() {
    rank_lost_mid_run(
        "allpairs-killed-tcp",
        &["--backend", "tcp"],
        Signal::SIGKILL,
        BRISK,
    );
}

/// A message of the steps between rounds that comes in as its sender's process dies (the
/// receive fails with `PeerLost`, on tcp when the connection ends part way through the
/// message) is a word that did not come, not the end of the run: the step posts another
/// receive and finds the missing word as it finds a silent rank's. On simulated cubes of 8
/// and 16 nodes, at a rank and a message drawn at random: the run completes, and as the
/// sender is alive, no rank is lost.
#[test]
fn a_step_message_lost_with_its_sender_does_not_end_the_run() {
    use commbench::analysis::allpairs::Rule;
    use commbench::core::method::allpairs::AllPairsConfig;
    use commbench::core::method::{MethodConfig, NppChoice};
    use commbench::core::stats::Xoshiro256;
    use common::inprocess::sim_matrix_document_losing;
    use common::machine::Machine;

    let mut rng = Xoshiro256::new(0x10_57e9);
    for case in 0..scale::cases(3, 20) {
        let dims = 3 + rng.below(2) as u32;
        let rank = rng.below(1 << dims) as u32;
        let nth = rng.below(12) as u64;
        // Waits bounded (one virtual second), as on a machine with a silent node: a word
        // that does not come is waited for, not a deadlock.
        let machine = Machine::new(&format!("lose-step-{case}"), dims)
            .wait_timeout_us(1e6)
            .config();
        let method = MethodConfig {
            sizes: vec![8],
            trials: 5,
            warmup: 1,
            npp: NppChoice::Fixed(1),
            timer_samples: 100,
            ..MethodConfig::default()
        };
        let doc = sim_matrix_document_losing(
            &machine,
            method,
            AllPairsConfig::default(),
            Rule::default(),
            (rank, nth),
        );
        let what = format!(
            "case {case}: {} nodes, rank {rank}'s message {nth}",
            1 << dims
        );
        assert_eq!(doc.status, "complete", "{what}: {:?}", doc.error);
        let m = doc.allpairs.as_ref().expect("a matrix");
        assert!(m.lost.is_empty(), "{what}: {:?}", m.lost);
        assert!(!m.cells.is_empty(), "{what}");
    }
}
