//! Integration tests of `commbench report`, `plot` and `compare` on synthetic result documents.

mod common;

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

#[test]
fn compare_and_fail_if_slower() {
    // Few resamples: the bootstrap is slow in debug builds.
    let run = |args: &[&str]| {
        let mut v = args.to_vec();
        v.extend(["--resamples", "200"]);
        run(&v)
    };
    let d = tmpdir("compare");
    let a = write(&d, "a.json", &sweep(1.0, 1));
    let a2 = write(&d, "a2.json", &sweep(1.0, 1));
    let b = write(&d, "b.json", &sweep(1.2, 2));

    let o = run(&["compare", &a, &a2, "--fail-if-slower", "5"]);
    assert_ok(&o);
    let s = stdout(&o);
    assert_eq!(s.matches("no difference").count(), 21, "{s}");

    let o = run(&["compare", &a, &b]);
    assert_ok(&o);
    assert_eq!(stdout(&o).matches("slower (+").count(), 21);

    let o = run(&["compare", &a, &b, "--fail-if-slower", "5"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.starts_with("commbench: error: B is slower than A by more than 5 % at 21 size(s)"),
        "{e}"
    );
    let o = run(&["compare", &a, &b, "--fail-if-slower", "40"]);
    assert_ok(&o);
    // B faster than A never fails.
    let o = run(&["compare", &b, &a, "--fail-if-slower", "0"]);
    assert_ok(&o);

    let o = run(&["compare", &a, &b, "--json", "-"]);
    assert_ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), 21);
    assert_eq!(rows[0]["verdict"], "slower");
    assert!(rows[0]["ci95"]["lo"].as_f64().unwrap() > 1.0);

    assert_usage_output(
        &run(&["compare", &a, &b, "--fail-if-slower=-3"]),
        "--fail-if-slower",
        "compare",
    );
    let missing = d.join("none.json").display().to_string();
    assert_usage_output(&run(&["compare", &a, &missing]), "none.json", "compare");
}
