//! `--stream FILE|-`: the JSON lines a run writes as it goes (docs/result-format.md). Every
//! line parses on its own; the points (an all-pairs run's rounds) agree with the document
//! written beside them, and `commbench report` renders the stream as it renders the document;
//! with `--stream -` standard output holds the lines alone; a run killed with SIGKILL in the
//! middle of a sweep leaves every size it completed as a whole line, which `report` renders.

#![cfg(all(feature = "sim", feature = "shm"))]

use crate::common;

use common::*;
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The lines of the stream text `text`, each parsed: every one whole, none but the last
/// without its newline when `cut` allows a last line cut short (which is then left out).
fn parsed(text: &str, cut: bool) -> Vec<Value> {
    let mut pieces: Vec<&str> = text.split('\n').collect();
    let last = pieces.pop().unwrap_or_default();
    assert!(
        last.is_empty() || cut,
        "the stream ends inside a line: {last:.200}"
    );
    pieces
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("line {} does not parse: {e}: {l:.200}", i + 1));
            assert!(
                v["line"].is_string(),
                "line {} has no kind: {l:.200}",
                i + 1
            );
            v
        })
        .collect()
}

/// The lines of kind `kind`.
fn of_kind<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["line"] == kind).collect()
}

/// `commbench report --full` of `p`, which must succeed.
fn report(p: &Path) -> String {
    let o = run(&["report", "--full", p.to_str().expect("UTF-8 path")]);
    assert_ok(&o);
    stdout(&o)
}

/// Run `commbench args --stream S --json D --quiet` (S holding something else before, which
/// the stream replaces): the stream's lines, the document, and both paths.
fn streamed(dir: &Path, name: &str, args: &[&str]) -> (Vec<Value>, Value, PathBuf, PathBuf) {
    let s = dir.join(format!("{name}.jsonl"));
    let d = dir.join(format!("{name}.json"));
    std::fs::write(&s, "what was here before\n").expect("an earlier file");
    let mut all = args.to_vec();
    all.extend(["--stream", s.to_str().expect("UTF-8 path")]);
    let doc = run_json(&d, &all);
    let text = std::fs::read_to_string(&s).expect("the stream");
    (parsed(&text, false), doc, s, d)
}

/// The first line names the run as its document does; the last says how it ended.
fn check_start_and_end(lines: &[Value], doc: &Value, d: &Path) {
    let start = &lines[0];
    assert_eq!(start["line"], "start");
    assert_eq!(start["stream"], "commbench-stream");
    assert_eq!(start["version"], 1);
    for key in ["tool_version", "command", "config"] {
        assert_eq!(start[key], doc[key], "{key}");
    }
    let mut env = start["environment"].clone();
    env["backend_info"] = doc["environment"]["backend_info"].clone();
    assert_eq!(env, doc["environment"]);
    assert_eq!(of_kind(lines, "start").len(), 1);
    let end = lines.last().expect("lines");
    assert_eq!(end["line"], "end");
    assert_eq!(end["status"], doc["status"]);
    assert_eq!(end["error"], doc["error"]);
    assert_eq!(end["wall_s"], doc["wall_s"]);
    assert_eq!(end["documents"], serde_json::json!([d.to_str()]));
    assert_eq!(of_kind(lines, "end").len(), 1);
}

#[test]
fn streams_agree_with_their_documents_point_for_point() {
    let dir = tmpdir("stream-agree");
    let seed001 = ["--backend", "sim", "--warmup", "1", "--samples", "1000"];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "pingpong",
            quick(&["pingpong", "--backend", "sim", "--sizes", "8,64,512,4K"]),
        ),
        (
            "queue",
            quick(&["queue", "posted", "--backend", "sim", "--lengths", "0,4"]),
        ),
        (
            "transpose",
            quick(&["transpose", "--backend", "sim", "--n", "16"]),
        ),
        // Seed 001's programs keep points of their own: Q's calibration, the streams' rates.
        (
            "echo",
            [
                &["echo", "--sizes", "16,500", "--hops", "1..2"][..],
                &seed001,
            ]
            .concat(),
        ),
        (
            "interference",
            [&["interference", "--streams", "1"][..], &seed001].concat(),
        ),
    ];
    for (name, args) in cases {
        let (lines, doc, s, d) = streamed(&dir, name, &args);
        check_start_and_end(&lines, &doc, &d);
        let backend = of_kind(&lines, "backend");
        assert_eq!(backend.len(), 1, "{name}");
        assert_eq!(backend[0]["timer"], doc["timer"], "{name}");
        assert_eq!(
            backend[0]["backend_info"], doc["environment"]["backend_info"],
            "{name}"
        );
        let points = of_kind(&lines, "point");
        let want = doc["points"].as_array().expect("points");
        assert_eq!(points.len(), want.len(), "{name}: one line per point");
        let mut before = 0.0;
        for (i, (line, p)) in points.iter().zip(want).enumerate() {
            assert_eq!(line["index"], i, "{name}");
            assert_eq!(&line["point"], p, "{name}: point {i}");
            assert!(p["trial_ns"].as_array().is_some_and(|t| !t.is_empty()));
            let at = line["elapsed_s"].as_f64().expect("elapsed_s");
            assert!(
                at >= before && line["unix_s"].as_f64() > Some(1e9),
                "{name}"
            );
            before = at;
        }
        assert_eq!(lines.last().expect("end")["points"], want.len(), "{name}");
        // Read back, the stream is the document: the same report, word for word.
        assert_eq!(report(&s), report(&d), "{name}");
    }
    // And a side of a comparison.
    let o = run(&[
        "compare",
        dir.join("pingpong.jsonl").to_str().unwrap(),
        dir.join("pingpong.json").to_str().unwrap(),
    ]);
    assert_ok(&o);
}

#[test]
fn an_allpairs_stream_has_a_line_per_round_with_its_cells() {
    let dir = tmpdir("stream-allpairs");
    let args = quick(&[
        "allpairs",
        "--backend",
        "sim",
        "--sim-config",
        "generic",
        "--sizes",
        "8,64",
    ]);
    let (lines, doc, s, d) = streamed(&dir, "allpairs", &args);
    check_start_and_end(&lines, &doc, &d);
    let m = &doc["allpairs"];
    assert_eq!(lines[0]["allpairs"]["config"], m["config"]);
    assert_eq!(lines[0]["allpairs"]["rule"], m["rule"]);
    let ranks = of_kind(&lines, "ranks");
    assert_eq!(ranks.len(), 1);
    assert_eq!(ranks[0]["ranks"], m["ranks"]);
    assert_eq!(ranks[0]["hosts"], m["hosts"]);
    let rounds = of_kind(&lines, "round");
    let want = m["rounds"].as_array().expect("rounds");
    assert!(want.len() >= 2, "{}", want.len());
    assert_eq!(rounds.len(), want.len());
    let cells = m["cells"].as_array().expect("cells");
    for (i, (line, r)) in rounds.iter().zip(want).enumerate() {
        assert_eq!(line["index"], i);
        assert_eq!(&line["round"], r);
        let mine: Vec<&Value> = cells.iter().filter(|c| c["round"] == i).collect();
        let got: Vec<&Value> = line["cells"].as_array().expect("cells").iter().collect();
        assert!(!got.is_empty());
        assert_eq!(got, mine, "round {i}");
    }
    assert_eq!(lines.last().expect("end")["rounds"], want.len());
    assert_eq!(report(&s), report(&d));
    let svg = dir.join("m.svg");
    let o = run(&[
        "plot",
        "--kind",
        "matrix",
        s.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert_ok(&o);
}

#[test]
fn with_stream_dash_standard_output_holds_the_lines_alone() {
    let o = run(&quick(&[
        "pingpong",
        "--backend",
        "sim",
        "--sizes",
        "8,64",
        "--stream",
        "-",
    ]));
    assert_ok(&o);
    let lines = parsed(&stdout(&o), false);
    let kinds: Vec<&str> = lines.iter().filter_map(|l| l["line"].as_str()).collect();
    assert_eq!(kinds, ["start", "backend", "point", "point", "end"]);
    assert_eq!(lines[4]["status"], "complete");
    assert_eq!(lines[4]["documents"], serde_json::json!([]));
    // Everything for people went to standard error.
    let err = stderr(&o);
    assert!(err.contains("one-way time"), "{err}");
}

#[test]
fn a_stream_path_that_cannot_be_written_is_refused_before_anything_runs() {
    let dir = tmpdir("stream-bad");
    let missing = dir.join("no-such-dir").join("s.jsonl");
    let o = run(&quick(&[
        "pingpong",
        "--backend",
        "sim",
        "--stream",
        missing.to_str().unwrap(),
    ]));
    assert_usage_output(&o, "--stream", "a missing directory");
    assert!(
        stderr(&o).contains("nothing was measured"),
        "{}",
        stderr(&o)
    );
    for (args, needle) in [
        (&["--stream", "-", "--json", "-"][..], "standard output"),
        (&["--stream", "r.json", "--json", "r.json"][..], "--json"),
        (&["--stream", ""][..], "--stream"),
    ] {
        let mut all = quick(&["pingpong", "--backend", "sim"]);
        all.extend_from_slice(args);
        assert_usage_error(&all, needle);
    }
}

#[test]
fn a_run_killed_with_sigkill_mid_sweep_leaves_every_completed_size_in_its_stream() {
    let dir = tmpdir("stream-sigkill");
    let s = dir.join("s.jsonl");
    let sizes: Vec<String> = (1..=64).map(|i| (i * 8).to_string()).collect();
    let mut c = commbench(&[
        "pingpong",
        "--backend",
        "shm",
        "--sizes",
        &sizes.join(","),
        "--trials",
        "400",
        "--warmup",
        "5",
        "--samples",
        "20000",
        "--timeout",
        "20",
        "--quiet",
        "--stream",
        s.to_str().unwrap(),
    ]);
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("starts");
    let t = Instant::now();
    let points = |text: &str| text.matches(r#"{"line":"point""#).count();
    loop {
        let text = std::fs::read_to_string(&s).unwrap_or_default();
        if points(&text) >= 2 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no two points in a minute"
        );
        assert!(child.try_wait().expect("wait").is_none(), "the run ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    // As a batch system's kill: rank 0 and its ranks, no warning.
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL).expect("killpg");
    let status = wait_for(&mut child, Duration::from_secs(20)).expect("killed");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    // A kill in the middle of a write may cut the last line only.
    let lines = parsed(&std::fs::read_to_string(&s).expect("the stream"), true);
    assert_eq!(lines[0]["line"], "start");
    assert!(
        of_kind(&lines, "end").is_empty(),
        "a killed run ends nothing"
    );
    let kept = of_kind(&lines, "point");
    assert!((2..64).contains(&kept.len()), "{} points", kept.len());
    for (i, l) in kept.iter().enumerate() {
        assert_eq!(l["index"], i);
        assert_eq!(l["point"]["size"], (i as u64 + 1) * 8, "sizes in order");
        assert_eq!(l["point"]["trials"], 400, "each point is whole");
        assert_eq!(l["point"]["trial_ns"].as_array().map(Vec::len), Some(400));
    }
    // Read back: a partial document of the sizes completed, one row each.
    let o = run(&["report", s.to_str().unwrap()]);
    assert_ok(&o);
    let text = stdout(&o);
    assert!(text.contains("no end line"), "{text}");
    for i in 1..=kept.len() {
        let row = format!("{} B ", i * 8);
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(&row)),
            "size {} is reported: {text}",
            i * 8
        );
    }
}
