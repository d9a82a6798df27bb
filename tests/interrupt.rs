//! SIGTERM and SIGINT in the middle of a sweep: the run stops after the size being measured,
//! writes the sizes measured with status "interrupted" and exits 128 + the signal; a second
//! signal quits at once, leaving what the first one saved. Output paths are checked before
//! anything is measured.

use crate::common;

use common::*;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A long shm sweep (64 sizes, each quick) whose progress lines come on standard error.
fn long_sweep(out: &std::path::Path, trials: &str) -> std::process::Command {
    let sizes = (1..=64).map(|i| (i * 8).to_string()).collect::<Vec<_>>();
    let mut c = commbench(&[
        "pingpong",
        "--sizes",
        &sizes.join(","),
        "--trials",
        trials,
        "--warmup",
        "5",
        "--samples",
        "20000",
        "--progress",
        "always",
        "--timeout",
        "20",
        "--stream",
    ]);
    c.arg(stream_of(out))
        .arg("--output")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    c
}

/// Where [`long_sweep`] streams, beside its output directory.
fn stream_of(out: &std::path::Path) -> std::path::PathBuf {
    out.with_file_name("stream.jsonl")
}

/// Read the child's progress lines until it reports size `n` (1-based) of the sweep.
fn wait_for_size(c: &mut Child, n: usize) -> ErrLines {
    wait_for_line(c, &format!("size {n}/"))
}

/// The rest of standard error and the exit code, within a minute.
fn finish(c: Child, lines: ErrLines) -> (Option<i32>, String) {
    common::finish(c, lines, Duration::from_secs(60))
}

fn check_interrupted(out: &std::path::Path, signal: &str) -> usize {
    let doc = read_json(&out.join("result.json"));
    assert_eq!(doc["status"], "interrupted", "{}", doc["error"]);
    let error = doc["error"].as_str().expect("error");
    assert!(error.contains(signal), "{error}");
    let points = doc["points"].as_array().expect("points");
    assert!(
        (2..64).contains(&points.len()),
        "the sizes measured before the stop: {}",
        points.len()
    );
    for (i, p) in points.iter().enumerate() {
        assert_eq!(
            p["size"],
            (i as u64 + 1) * 8,
            "sizes in order, none skipped"
        );
        assert_eq!(p["trials"], 400, "each point is whole");
    }
    let text = std::fs::read_to_string(out.join("commbench.output.txt")).expect("output");
    assert!(text.contains("RUN STOPPED: interrupted by"), "{text}");
    // The stream holds the same sizes and ends as the document does.
    let stream = std::fs::read_to_string(stream_of(out)).expect("the stream");
    let lines: Vec<serde_json::Value> = stream
        .lines()
        .map(|l| serde_json::from_str(l).expect("a whole line"))
        .collect();
    let streamed: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["line"] == "point")
        .map(|l| &l["point"])
        .collect();
    assert_eq!(streamed, points.iter().collect::<Vec<_>>());
    let end = lines.last().expect("lines");
    assert_eq!(
        (&end["line"], &end["status"]),
        (&"end".into(), &doc["status"])
    );
    assert_eq!(end["error"], doc["error"]);
    points.len()
}

#[test]
fn sigterm_mid_sweep_writes_the_sizes_measured_and_exits_143() {
    let out = tmpdir("sigterm").join("out");
    let mut c = long_sweep(&out, "400").spawn().expect("starts");
    let lines = wait_for_size(&mut c, 3);
    // Only rank 0 is told, as a batch system's walltime or `kill` does: it tells the others.
    kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM).expect("kill");
    let (code, err) = finish(c, lines);
    assert_eq!(code, Some(143), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(err.contains("SIGTERM received"), "{err}");
    let n = check_interrupted(&out, "SIGTERM");
    assert!(n >= 3, "size 3 was under way and is finished: {n}");
}

#[test]
fn ctrl_c_stops_every_rank_together_and_exits_130() {
    let out = tmpdir("sigint").join("out");
    let mut c = long_sweep(&out, "400").spawn().expect("starts");
    let lines = wait_for_size(&mut c, 2);
    // Ctrl-C reaches the whole foreground process group: rank 0 and its child ranks.
    killpg(Pid::from_raw(c.id() as i32), Signal::SIGINT).expect("killpg");
    let (code, err) = finish(c, lines);
    assert_eq!(code, Some(130), "{err}");
    assert!(
        !err.contains("is gone"),
        "no rank died of the signal: {err}"
    );
    check_interrupted(&out, "SIGINT");
}

#[test]
fn a_second_signal_quits_at_once() {
    let out = tmpdir("twice").join("out");
    let mut c = long_sweep(&out, "200000").spawn().expect("starts");
    let lines = wait_for_size(&mut c, 2);
    let pid = Pid::from_raw(c.id() as i32);
    kill(pid, Signal::SIGTERM).expect("kill");
    // A size of 200000 trials lasts well over this pause: the second signal comes while the
    // first still waits for the safe point.
    std::thread::sleep(Duration::from_millis(50));
    kill(pid, Signal::SIGTERM).expect("kill");
    let t = Instant::now();
    let (code, err) = finish(c, lines);
    assert_eq!(code, Some(143), "{err}");
    assert!(err.contains("quitting at once"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(30));
    // What the first signal saved at once is what there is: whole sizes only.
    let doc = read_json(&out.join("result.json"));
    assert_eq!(doc["status"], "interrupted");
    for (i, p) in doc["points"].as_array().expect("points").iter().enumerate() {
        assert_eq!(p["size"], (i as u64 + 1) * 8);
        assert_eq!(p["trials"], 200000);
    }
}

/// Output paths that cannot be written are refused before anything is measured.
#[test]
fn output_paths_are_checked_before_measuring() {
    let d = tmpdir("outputs");
    let file = d.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = d.join("no-such-dir").join("r.json");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--output".into(), file.display().to_string()],
            "is not a directory",
        ),
        (
            vec!["--json".into(), missing.display().to_string()],
            "cannot write it",
        ),
        (
            vec!["--output".into(), file.join("sub").display().to_string()],
            "cannot create the directory",
        ),
        (
            vec!["--json".into(), d.display().to_string()],
            "is a directory",
        ),
    ];
    for (extra, needle) in cases {
        // A sweep long enough that measuring first would show in the time taken.
        let mut args = vec!["pingpong", "--sizes", "1..4M:x2"];
        args.extend(extra.iter().map(String::as_str));
        let t = Instant::now();
        let o = run(&args);
        assert_usage_output(&o, needle, &args);
        assert!(
            stderr(&o).contains("nothing was measured"),
            "{}",
            stderr(&o)
        );
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "refused before measuring: {args:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "x",
        "left untouched"
    );
}
