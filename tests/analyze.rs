//! Integration tests of `commbench report`, `plot` and `compare` on synthetic result documents.

use crate::common;

use commbench::analysis::document::{Point, ResultDoc, SCHEMA, SCHEMA_VERSION};
use commbench::core::method::engine::RawPoint;
use common::{assert_ok, assert_usage_error, assert_usage_output, run, stderr, stdout, tmpdir};
use std::path::Path;

/// Deterministic uniform numbers in [0, 1).
fn unit(i: u64) -> f64 {
    (i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64
}

/// A ping-pong point whose one-way times are `t_us (1 + 0.1 u)`.
fn point(size: u64, t_us: f64, seed: u64) -> Point {
    let trial_ns: Vec<i64> = (0..301u64)
        .map(|i| (2000.0 * t_us * (1.0 + 0.1 * unit(i ^ (seed << 20) ^ size))).round() as i64)
        .collect();
    // As the engine writes it: one ping-pong (two trips) per timed iteration, npp fixed.
    let raw: RawPoint = serde_json::from_value(serde_json::json!({
        "pattern": "pingpong", "size": size, "npp": 1, "trips_per_iteration": 2,
        "trial_ns": trial_ns,
    }))
    .expect("raw point");
    Point::from_raw(raw, "sim", 2.0).expect("analysable")
}

/// The one-way time (us) of two regimes: 1 us + n/500 below 1 KiB, 6 us + n/4000 from 1 KiB.
fn two_regimes_us(n: u64) -> f64 {
    let (t0_us, bytes_per_us) = if n < 1024 {
        (1.0, 500.0)
    } else {
        (6.0, 4000.0)
    };
    t0_us + n as f64 / bytes_per_us
}

/// [`two_regimes_us`] at 1 B .. 1 MiB, times scaled by `scale`.
fn sweep(scale: f64, seed: u64) -> ResultDoc {
    let points: Vec<Point> = (0..=20)
        .map(|k| point(1 << k, two_regimes_us(1 << k) * scale, seed))
        .collect();
    let v = serde_json::json!({
        "schema": SCHEMA, "version": SCHEMA_VERSION, "tool_version": "0.1.0",
        "command": ["commbench", "pingpong", "--sizes", "1..1M:x2"], "config": {},
        "environment": {
            "hostname": "testhost", "cpu_model": null, "cpus": 2, "kernel": null,
            "clocksource": null, "affinity": null, "target": "x86_64-linux",
            "backend": "sim", "backend_info": {}, "ranks": 2, "launcher": "local"
        },
        "timer": null, "points": points, "status": "complete", "error": null,
        "started_unix_s": 0, "wall_s": 1.0
    });
    serde_json::from_value(v).expect("document")
}

fn write(dir: &Path, name: &str, doc: &ResultDoc) -> String {
    let p = dir.join(name);
    doc.write_json(std::fs::File::create(&p).expect("create"))
        .expect("write");
    p.display().to_string()
}

#[test]
fn report_formats() {
    let d = tmpdir("report");
    let f = write(&d, "a.json", &sweep(1.0, 1));
    let o = run(&["report", &f]);
    assert_ok(&o);
    let s = stdout(&o);
    assert!(
        s.contains("kept/removed") && s.contains("breakpoint 1 KiB"),
        "{s}"
    );
    let o = run(&["report", &f, "--full"]);
    assert_ok(&o);
    let s = stdout(&o);
    assert!(s.contains("TIMING RESULTS AND STATISTICS"), "{s}");
    assert!(
        s.contains("FITTED MODELS") && s.contains("breakpoint = 1024 bytes"),
        "{s}"
    );
    assert!(s.contains("LATENCY AND BANDWIDTH"));

    let o = run(&["report", &f, "--format", "csv"]);
    assert_ok(&o);
    let s = stdout(&o);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 22, "{s}");
    assert!(lines[0].starts_with("pattern,backend,size_bytes,"));
    let cols = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == cols));
    assert!(lines[1].starts_with("pingpong,sim,1,"));

    let o = run(&["report", &f, "--format", "markdown"]);
    assert_ok(&o);
    let s = stdout(&o);
    assert!(s.starts_with("# commbench"));
    assert_eq!(
        s.lines().filter(|l| l.starts_with("| pingpong |")).count(),
        21
    );
    assert!(
        s.contains("## Fitted models") && s.contains("Hockney, below 1024 B"),
        "{s}"
    );
}

#[test]
fn report_usage_errors() {
    let d = tmpdir("report-errors");
    let missing = d.join("missing.json").display().to_string();
    assert_usage_error(&["report", &missing], "missing.json");
    let bad = d.join("bad.json");
    std::fs::write(&bad, "{ not json").expect("write");
    assert_usage_error(&["report", &bad.display().to_string()], "bad.json");
    let other = d.join("other.json");
    std::fs::write(&other, r#"{"schema": "something-else"}"#).expect("write");
    assert_usage_error(
        &["report", &other.display().to_string()],
        "not a commbench result",
    );
    let f = write(&d, "a.json", &sweep(1.0, 1));
    assert_usage_error(
        &["report", &f, "--format", "xml"],
        "invalid value 'xml' for '--format",
    );
}

/// Balanced tags and a single `<svg>` root.
fn well_formed(s: &str) -> bool {
    let mut depth: i64 = 0;
    let mut rest = s;
    while let Some(i) = rest.find('<') {
        rest = &rest[i..];
        let Some(end) = rest.find('>') else {
            return false;
        };
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/') {
            continue;
        }
        depth += if tag.starts_with('/') { -1 } else { 1 };
        if depth < 0 {
            return false;
        }
    }
    depth == 0 && s.contains("<svg") && s.trim_end().ends_with("</svg>")
}

#[test]
fn plot_every_kind() {
    let d = tmpdir("plot");
    let f = write(&d, "a.json", &sweep(1.0, 1));
    for (kind, needle, markers) in [
        ("latency", "median one-way time (us)", 21),
        ("bandwidth", "MB/s", 21),
        ("signature", "transfer time", 21),
        ("histogram", "one-way time (us)", 0),
    ] {
        let out = d.join(format!("{kind}.svg"));
        let o = run(&["plot", &f, "-o", &out.display().to_string(), "--kind", kind]);
        assert_eq!(o.status.code(), Some(0), "{kind}: {}", stderr(&o));
        let s = std::fs::read_to_string(&out).expect("svg written");
        assert!(well_formed(&s), "{kind}");
        assert!(s.contains(needle), "{kind}");
        assert!(s.contains(r#"class="tick-label""#), "{kind}");
        assert_eq!(s.matches(r#"class="marker""#).count(), markers, "{kind}");
    }
    let out = d.join("h.svg").display().to_string();
    let o = run(&[
        "plot",
        &f,
        "-o",
        &out,
        "--kind",
        "histogram",
        "--size",
        "4K",
    ]);
    assert_ok(&o);
    let s = std::fs::read_to_string(&out).expect("svg");
    assert!(s.contains("4 KiB") && s.contains(r#"class="cut-line""#));
    assert_usage_error(
        &["plot", &f, "-o", &out, "--kind", "pie"],
        "invalid value 'pie' for '--kind",
    );
    assert_usage_error(
        &["plot", &f, "-o", &out, "--kind", "histogram", "--size", "3"],
        "no point of size 3",
    );
}

/// `commbench compare` with few resamples (the bootstrap is slow in debug builds).
fn compare(args: &[&str]) -> std::process::Output {
    let mut v = vec!["compare"];
    v.extend_from_slice(args);
    v.extend(["--resamples", "200"]);
    run(&v)
}

/// Runs of one side: [`sweep`] with each run's times scaled by its factor (the run-to-run
/// variation), written as `{prefix}1.json`, `{prefix}2.json`, ... in `dir`.
fn runs(dir: &Path, prefix: &str, factors: &[f64], seed: u64) -> Vec<String> {
    factors
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let name = format!("{prefix}{}.json", i + 1);
            write(dir, &name, &sweep(*f, seed + i as u64))
        })
        .collect()
}

#[test]
fn compare_one_run_per_side_claims_nothing() {
    let d = tmpdir("compare-one");
    let a = write(&d, "a.json", &sweep(1.0, 1));
    let b = write(&d, "b.json", &sweep(1.2, 2));
    // The two-file form still works: the table, and plainly that the variation between runs
    // is unknown, however far apart the two runs are.
    let o = compare(&[&a, &b]);
    assert_ok(&o);
    let s = stdout(&o);
    assert_eq!(s.matches("unknown (1 run per side)").count(), 21, "{s}");
    assert!(!s.contains("slower (+"), "{s}");
    assert!(
        s.contains("One run per side: the run-to-run variance is unknown.")
            && s.contains("The CIs describe the variation within one run only"),
        "{s}"
    );
    // --fail-if-slower refuses to judge from one run a side.
    let o = compare(&[&a, &b, "--fail-if-slower", "5"]);
    assert_usage_output(
        &o,
        "--fail-if-slower needs 3 or more runs a side",
        "one run",
    );
    assert!(stderr(&o).contains("--against"), "{}", stderr(&o));
    // JSON: the rows as before, with the scope and runs added.
    let o = compare(&[&a, &b, "--json", "-"]);
    assert_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), 21);
    for key in [
        "pattern",
        "size",
        "median_a_us",
        "median_b_us",
        "ratio",
        "ci95",
        "p_value",
        "verdict",
        "trials_a",
        "trials_b",
    ] {
        assert!(rows[0].get(key).is_some(), "{key}");
    }
    assert_eq!(rows[0]["verdict"], "unknown");
    assert_eq!(rows[0]["scope"], "within_run");
    assert_eq!(rows[0]["runs_a"], 1);
    assert!(rows[0]["ci95"]["lo"].as_f64().unwrap() > 1.1);
    assert!(stderr(&o).contains("run-to-run variance is unknown"));
}

#[test]
fn compare_several_runs_and_fail_if_slower() {
    let d = tmpdir("compare-runs");
    let a = runs(&d, "a", &[1.0, 1.03, 0.98], 1);
    let same = runs(&d, "same", &[1.01, 0.97, 1.02], 11);
    let slow = runs(&d, "slow", &[1.5, 1.545, 1.47], 21);
    let args = |b: &[String], extra: &[&str]| {
        let mut v: Vec<String> = a.clone();
        v.push("--against".into());
        v.extend(b.iter().cloned());
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let call = |v: Vec<String>| compare(&v.iter().map(String::as_str).collect::<Vec<_>>());

    let o = call(args(&same, &["--fail-if-slower", "5"]));
    assert_ok(&o);
    let s = stdout(&o);
    assert!(
        s.starts_with("A: 3 runs (backend sim, host testhost, 21 points each): "),
        "{s}"
    );
    assert!(
        s.contains("Run-to-run variation: the medians of runs of one side differed by up to 1.0"),
        "{s}"
    );
    assert!(!s.contains("slower") && !s.contains("unknown"), "{s}");

    let o = call(args(&slow, &["--fail-if-slower", "5"]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.starts_with("commbench: error: B is slower than A by more than 5 % at 21 size(s)"),
        "{e}"
    );
    assert!(e.contains("over 3 runs of A and 3 of B"), "{e}");
    assert_eq!(stdout(&o).matches("slower (+").count(), 21);
    assert_ok(&call(args(&slow, &["--fail-if-slower", "80"])));
    // B faster than A never fails.
    let mut back = slow.clone();
    back.push("--against".into());
    back.extend(a.iter().cloned());
    back.extend(["--fail-if-slower".into(), "0".into()]);
    assert_ok(&call(back));

    let o = call(args(&slow, &["--json", "-"]));
    assert_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let r = &v.as_array().expect("array")[0];
    assert_eq!(
        (r["verdict"].as_str(), r["scope"].as_str()),
        (Some("slower"), Some("runs"))
    );
    assert_eq!(
        (r["runs_a"].as_u64(), r["runs_b"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(r["run_medians_b_us"].as_array().map(Vec::len), Some(3));
    let spread = r["run_spread_a"].as_f64().unwrap();
    assert!((spread - 1.03 / 0.98).abs() < 0.02, "{r}");
    assert!(r["ci95_simultaneous"]["lo"].as_f64().unwrap() > 1.05, "{r}");

    // Patterns, expanded by commbench (no shell here): the same as the files listed.
    let pat = |p: &str| d.join(p).display().to_string();
    let o = compare(&[
        &pat("a?.json"),
        "--against",
        &pat("slow*.json"),
        "--json",
        "-",
    ]);
    assert_ok(&o);
    assert_eq!(o.stdout, call(args(&slow, &["--json", "-"])).stdout);
}

#[test]
fn compare_bad_input() {
    let d = tmpdir("compare-bad");
    let a = runs(&d, "a", &[1.0, 1.0, 1.0], 1);
    let b = write(&d, "b.json", &sweep(1.0, 5));
    let pat = |p: &str| d.join(p).display().to_string();
    let (a1, a2) = (a[0].as_str(), a[1].as_str());
    assert_usage_output(&compare(&[a1]), "two sides and got one file", "one file");
    assert_usage_output(
        &compare(&[a1, a2, &b]),
        "3 files and no --against",
        "three files",
    );
    assert_usage_output(
        &compare(&[&pat("none*.json"), "--against", &b]),
        "no file matches",
        "no match",
    );
    assert_usage_output(
        &compare(&[a1, "--against", &pat("missing.json")]),
        "missing.json",
        "missing",
    );
    // A directory in place of a document: unreadable.
    let dir = d.display().to_string();
    assert_usage_output(
        &compare(&[a1, "--against", &dir]),
        "cannot read",
        "directory",
    );
    assert_usage_output(
        &compare(&[a1, a1, "--against", &b]),
        "is given twice in A",
        "twice",
    );
    assert_usage_output(
        &compare(&[&pat("*/a1.json"), "--against", &b]),
        "in the file name only",
        "wildcard directory",
    );
    // Runs of one side that measured different sizes.
    let mut short = sweep(1.0, 9);
    short.points.pop();
    let short = write(&d, "short.json", &short);
    assert_usage_output(
        &compare(&[a1, a2, &short, "--against", &b]),
        "the runs of A measured different points",
        "mismatch",
    );
    assert!(stderr(&compare(&[a1, a2, &short, "--against", &b])).contains("short.json does not"));
    assert_usage_output(
        &compare(&[a1, &b, "--fail-if-slower=-3"]),
        "--fail-if-slower",
        "negative",
    );
    assert_usage_output(
        &compare(&[a1, &b, "--resamples", "0"]),
        "--resamples",
        "zero",
    );
}
