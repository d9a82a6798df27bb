//! `commbench echo`, `overhead` and `interference` as a user runs them: the result document's
//! contract keys (`params`, `interference`), the report, and usage errors.

use crate::common;

use common::*;
use std::time::Duration;

/// Table 3 of seed 001 (the ncube7 preset's times): (name, X0 us, X1 us/byte).
const TABLE3: [(&str, f64, f64); 6] = [
    ("E", 220.0, 1.285),
    ("R", 180.0, 0.04),
    ("S", 150.0, 0.01),
    ("F", 160.0, 0.60),
    ("U", 130.0, 0.61),
    ("A", 120.0, 0.0),
];

#[test]
fn overhead_on_ncube7_writes_params_within_two_percent() {
    let d = tmpdir("seed001-overhead");
    let j = d.join("r.json");
    let doc = run_json(
        &j,
        &[
            "overhead",
            "--backend",
            "sim",
            "--sim-config",
            "ncube7",
            "--samples",
            "2000",
        ],
    );
    assert_eq!(doc["status"], "complete");
    assert!(
        doc["fit"].is_null(),
        "no Hockney fit of seed 001's experiments"
    );
    for (name, x0, x1) in TABLE3 {
        let p = &doc["params"][name];
        let at2000 = x0 + x1 * 2000.0;
        let b = p["intercept_us"].as_f64().unwrap();
        let s = p["slope_us_per_byte"].as_f64().unwrap();
        assert!((b - x0).abs() <= 0.02 * at2000, "{name}: X0 {b}");
        assert!(((s - x1) * 2000.0).abs() <= 0.02 * at2000, "{name}: X1 {s}");
        assert!(p["max_error_us"].as_f64().unwrap() >= 0.0);
        let values = p["values"].as_array().unwrap();
        let sizes: Vec<u64> = values.iter().map(|v| v["size"].as_u64().unwrap()).collect();
        assert_eq!(sizes, vec![16, 500, 1000, 1500, 2000], "Table 1's sizes");
        for v in values {
            let n = v["size"].as_f64().unwrap();
            let want = x0 + x1 * n;
            let got = v["mean_us"].as_f64().unwrap();
            assert!((got - want).abs() <= 0.02 * want, "{name}({n}) = {got}");
            assert!(v["std_dev_us"].as_f64().unwrap() >= 0.0);
        }
    }
    // Every experiment's raw readings are points: the repetitions are the trials.
    let pats: Vec<&str> = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pattern"].as_str().unwrap())
        .collect();
    for want in [
        "q-calibration",
        "echo-d1",
        "echo-idle-d5",
        "q",
        "r",
        "a+u",
        "f+s",
        "r+s",
        "2(f+e+u)",
    ] {
        assert!(pats.contains(&want), "{want} in {pats:?}");
    }
    assert_eq!(doc["config"]["trials"], 5);
    assert_eq!(doc["config"]["sixtimes"]["hops"], serde_json::json!([1, 5]));
    // `report` re-renders Tables 1 and 3 from the document alone.
    let o = run(&["report", j.to_str().unwrap()]);
    assert_ok(&o);
    let text = stdout(&o);
    for want in ["Table 1", "Table 3", "220.0 + 1.2850", "Echo round trip"] {
        assert!(text.contains(want), "{want} in {text}");
    }
}

#[test]
fn interference_on_ncube7_meets_its_prediction() {
    let d = tmpdir("seed001-interference");
    let j = d.join("r.json");
    let doc = run_json(
        &j,
        &[
            "interference",
            "--backend",
            "sim",
            "--sim-config",
            "ncube7",
            "--samples",
            "2000",
        ],
    );
    let rows = doc["interference"].as_array().expect("interference rows");
    assert_eq!(rows.len(), 3);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["neighbours"], i as u64 + 1);
        assert_eq!(r["channels"], 2 * (i as u64 + 1));
        let s = r["slowdown"].as_f64().unwrap();
        let p = r["predicted_slowdown"].as_f64().unwrap();
        assert!((s - p).abs() <= 0.03 * p, "{r}");
        // Each stream moves one message per E(2000) = 2790 us, as §5.2 predicts.
        let us = r["us_per_message"].as_f64().unwrap();
        assert!((us - 2790.0).abs() <= 0.03 * 2790.0, "{r}");
    }
    let two = rows[0]["slowdown"].as_f64().unwrap();
    assert!((two - 1.20).abs() <= 0.03 * 1.20, "2 channels: {two}");
}

#[test]
fn echo_on_tcp_measures_through_a_forwarding_rank() {
    let d = tmpdir("seed001-echo-tcp");
    let j = d.join("r.json");
    let args = [
        "echo",
        "--backend",
        "tcp",
        "--hops",
        "1..2",
        "--sizes",
        "16,2000",
        "--repetitions",
        "3",
        "--messages",
        "20",
        "--samples",
        "10000",
    ];
    let doc = ok_json(
        commbench(&with_json(&args, &j)),
        &j,
        Duration::from_secs(120),
    );
    assert_eq!(doc["config"]["ranks"], 3, "the path 0, 1, 2");
    let (given, flagged) = sizes_given_or_flagged(&doc, "E");
    assert_eq!(given + flagged, 2, "{}", doc["sixtimes"]);
    assert!(doc["params"]["S"].is_null(), "echo measures E alone");
    let echo = &doc["sixtimes"]["echo"];
    assert!(echo["1"]["values"][0]["mean_us"].as_f64().unwrap() > 0.0);
    assert!(echo["2"].is_object());
}

#[test]
fn overhead_on_shm_says_what_is_not_separable() {
    let d = tmpdir("seed001-overhead-shm");
    let j = d.join("r.json");
    let args = [
        "overhead",
        "--backend",
        "shm",
        "--wait",
        "futex",
        "--hops",
        "1",
        "--sizes",
        "16,1000",
        "--repetitions",
        "3",
        "--messages",
        "20",
        "--samples",
        "10000",
    ];
    let doc = ok_json(
        commbench(&with_json(&args, &j)),
        &j,
        Duration::from_secs(120),
    );
    let ns: Vec<&str> = doc["sixtimes"]["not_separable"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["sizes"].is_null())
        .map(|n| n["time"].as_str().unwrap())
        .collect();
    assert_eq!(
        ns,
        vec!["E", "S", "F", "U", "A"],
        "one distance, and nothing forwards"
    );
    // R at each size: a value, or (below zero beyond its noise on a busy host) flagged.
    let (given, flagged) = sizes_given_or_flagged(&doc, "R");
    assert_eq!(given + flagged, 2, "{}", doc["sixtimes"]);
    for k in ["F+S", "A+U", "o_r", "o_s", "2(F+E+U)", "Q"] {
        assert!(measured_or_noted(&doc, k), "{k}: {}", doc["sixtimes"]);
    }
    let o = run(&["report", j.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("Not separable here: E, S, F, U, A"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn bad_seed001_usage_is_refused_before_anything_runs() {
    assert_usage_error(&["echo", "--hops", "0..3"], "--hops 0..3");
    assert_usage_error(&["echo", "--hops", "3..1"], "--hops 3..1");
    assert_usage_error(&["echo", "--hops", "x"], "--hops x");
    assert_usage_error(
        &[
            "echo",
            "--backend",
            "sim",
            "--sim-config",
            "ncube7",
            "--hops",
            "1..7",
        ],
        "farthest node is 6 hops away",
    );
    assert_usage_error(
        &[
            "interference",
            "--backend",
            "sim",
            "--sim-config",
            "generic",
            "--streams",
            "3",
        ],
        "need a cube of 6 dimensions",
    );
    assert_usage_error(&["interference", "--streams", "9"], "--streams 9");
    assert_usage_error(&["overhead", "--repetitions", "0"], "--repetitions 0");
    assert_usage_error(
        &["echo", "--backend", "tcp", "--hops", "1..3", "--ranks", "3"],
        "needs rank 3",
    );
}

#[test]
fn interference_on_tcp_forwards_in_rank_0s_program() {
    let d = tmpdir("seed001-interference-tcp");
    let j = d.join("r.json");
    let args = [
        "interference",
        "--backend",
        "tcp",
        "--streams",
        "2",
        "--repetitions",
        "2",
        "--messages",
        "20",
        "--samples",
        "10000",
    ];
    let doc = ok_json(
        commbench(&with_json(&args, &j)),
        &j,
        Duration::from_secs(120),
    );
    assert_eq!(
        doc["config"]["ranks"], 5,
        "rank 0 and two streams of two ranks"
    );
    let rows = doc["interference"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert!(r["slowdown"].as_f64().unwrap() > 0.5, "{r}");
        assert!(r["us_per_message"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["predicted_slowdown"].is_number() || r["predicted_slowdown"].is_null());
    }
    assert_eq!(doc["sixtimes"]["transport_forwards"], false);
}

/// More busy-polling shm ranks than CPUs measure the scheduler: the user is told, and how to
/// avoid it; with ranks that sleep while they wait there is nothing to say.
#[test]
fn crowded_shm_ranks_get_a_note() {
    let d = tmpdir("crowded");
    let j = d.join("r.json");
    let run_on_one_cpu = |extra: &[&str]| {
        let mut c = std::process::Command::new("taskset");
        c.args(["-c", "0", EXE]);
        c.args(["pingpong", "--trials", "2", "--npp", "1", "--warmup", "0"]);
        c.args(["--samples", "1000"]);
        c.args(extra);
        c.args(["--json", j.to_str().unwrap(), "--quiet"]);
        let (o, in_time) = bounded(c, Duration::from_secs(60));
        assert!(in_time, "hung: {}", stderr(&o));
        assert_ok(&o);
        stderr(&o)
    };
    if std::process::Command::new("taskset")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("taskset is not installed: nothing to check");
        return;
    }
    let e = run_on_one_cpu(&[]);
    assert!(
        e.contains("note: 2 ranks busy-poll on 1 CPU:") && e.contains("--wait futex"),
        "{e}"
    );
    let e = run_on_one_cpu(&["--wait", "futex"]);
    assert!(!e.contains("note:"), "{e}");
}
