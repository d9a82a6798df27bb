//! `commbench queue posted` and `queue unexpected` (Underwood & Brightwell's queue benchmarks)
//! as a user runs them: the result document (points per queue length, fraction traversed and
//! size; `config.queue`; the `queue` lines), the text report, `report` and `plot --kind queue`
//! from the document, and usage errors. On the simulator, whose matcher walks its queues at a
//! known cost per entry, the lines must recover that cost; on shm and tcp only the structure is
//! checked (no timing: the machine is noisy).

use crate::common;

use common::machine::{six, Machine};
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The simulator's matching cost per queue entry, ns.
const MATCH_NS: f64 = 300.0;

/// A 2-node machine of our own whose matcher costs [`MATCH_NS`] per entry inspected
/// (docs/simulator.md §4a, §6), written to `dir`: its path.
fn machine(dir: &Path) -> PathBuf {
    Machine::new("queue-cli", 1)
        .tick_ns(1)
        .clock_read_ns(40)
        .poll_ns(100)
        .match_ns_per_entry(MATCH_NS)
        .times(six([
            (1.5, 0.001),
            (0.2, 0.0),
            (0.3, 0.0),
            (0.4, 0.0),
            (0.7, 0.0005),
            (2.0, 0.002),
        ]))
        .write(&dir.join("machine.toml"))
}

/// `args` as a quick run (see [`QUICK`]) with a fixed npp: each run takes a second or two.
fn quick<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = common::quick(args);
    all.extend_from_slice(&["--npp", "2"]);
    all
}

/// Numbers of a JSON array.
fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("an array: {v}"))
        .iter()
        .map(|x| x.as_u64().expect("a whole number"))
        .collect()
}

/// A complete document whose points are exactly one per (length, pct, size), in any order,
/// each with the queue keys of its kind (`pcts` empty: the unexpected queue), and whose
/// `config.queue` records the run. The points.
fn check_doc<'a>(
    doc: &'a Value,
    kind: &str,
    lengths: &[u64],
    pcts: &[u64],
    sizes: &[u64],
    any_source: bool,
) -> &'a [Value] {
    assert_eq!(doc["status"], "complete", "{}", doc["error"]);
    let q = &doc["config"]["queue"];
    assert_eq!(q["kind"], kind, "{q}");
    assert_eq!(u64s(&q["lengths"]), lengths, "{q}");
    assert_eq!(u64s(&q["traversed_pct"]), pcts, "{q}");
    assert_eq!(q["any_source"], any_source, "{q}");
    let pattern = format!("queue_{kind}");
    let points = doc["points"].as_array().expect("points");
    let mut seen: Vec<(u64, Option<u64>, u64)> = Vec::new();
    for p in points {
        assert_eq!(p["pattern"], pattern.as_str(), "{p}");
        assert_eq!(p["trials"], QUICK_TRIALS, "{p}");
        let l = p["queue_length"].as_u64().expect("queue_length");
        let pct = p["traversed_pct"].as_u64();
        if pcts.is_empty() {
            assert!(p.get("traversed_pct").is_none(), "{p}");
            assert!(p.get("traversed").is_none(), "{p}");
        } else {
            let pct = pct.expect("traversed_pct");
            assert_eq!(p["traversed"], l * pct / 100, "floor(L p / 100): {p}");
        }
        assert!(p["one_way_us"]["median"].as_f64().unwrap() > 0.0, "{p}");
        seen.push((l, pct, p["size"].as_u64().unwrap()));
    }
    let mut want = Vec::new();
    for &l in lengths {
        for &s in sizes {
            if pcts.is_empty() {
                want.push((l, None, s));
            }
            for &c in pcts {
                want.push((l, Some(c), s));
            }
        }
    }
    seen.sort_unstable();
    want.sort_unstable();
    assert_eq!(seen, want, "one point per (length, pct, size)");
    points
}

/// The `queue` lines of a document: one per (size, pct) (one per size for the unexpected
/// queue), each of `pattern` and `backend`.
fn check_lines<'a>(doc: &'a Value, backend: &str, pcts: &[u64], sizes: &[u64]) -> &'a [Value] {
    let lines = doc["queue"].as_array().expect("queue lines");
    let kind = doc["config"]["queue"]["kind"].as_str().unwrap();
    let mut seen: Vec<(u64, Option<u64>)> = Vec::new();
    for l in lines {
        assert_eq!(l["pattern"], format!("queue_{kind}").as_str(), "{l}");
        assert_eq!(l["backend"], backend, "{l}");
        let pct = l["traversed_pct"].as_u64();
        let against = if pct.unwrap_or(0) > 0 {
            "traversed"
        } else {
            "length"
        };
        assert_eq!(l["against"], against, "{l}");
        assert!(l["all"]["slope_ns_per_entry"].is_number(), "{l}");
        seen.push((l["size"].as_u64().unwrap(), pct));
    }
    let mut want: Vec<(u64, Option<u64>)> = sizes
        .iter()
        .flat_map(|&s| {
            let per: Vec<Option<u64>> = if pcts.is_empty() {
                vec![None]
            } else {
                pcts.iter().map(|&c| Some(c)).collect()
            };
            per.into_iter().map(move |c| (s, c))
        })
        .collect();
    seen.sort_unstable();
    want.sort_unstable();
    assert_eq!(seen, want, "one line per series");
    lines
}

/// The line of size `size` and fraction `pct`.
fn line(lines: &[Value], size: u64, pct: Option<u64>) -> &Value {
    lines
        .iter()
        .find(|l| l["size"] == size && l["traversed_pct"].as_u64() == pct)
        .unwrap_or_else(|| panic!("no line for {size} B at {pct:?}"))
}

fn slope(l: &Value, which: &str) -> f64 {
    l[which]["slope_ns_per_entry"]
        .as_f64()
        .unwrap_or_else(|| panic!("{which} slope of {l}"))
}

/// `commbench plot J --kind queue -o SVG`.
fn plot_queue(j: &Path, svg: &Path) -> std::process::Output {
    run(&[
        "plot",
        j.to_str().unwrap(),
        "--kind",
        "queue",
        "-o",
        svg.to_str().unwrap(),
    ])
}

/// The grid of a text report: the header row of `columns` and one row per length.
fn assert_grid(text: &str, columns: &[&str], lengths: &[u64]) {
    let head = text
        .lines()
        .find(|l| l.trim_start().starts_with("length"))
        .unwrap_or_else(|| panic!("no grid in\n{text}"));
    let cols: Vec<&str> = head.split_whitespace().collect();
    let mut want = vec!["length"];
    for c in columns {
        want.extend(c.split_whitespace());
    }
    assert_eq!(cols, want, "{text}");
    let after: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("length"))
        .skip(1)
        .take(lengths.len())
        .collect();
    for (row, l) in after.iter().zip(lengths) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], l.to_string(), "{text}");
        assert_eq!(cells.len(), 1 + columns.len(), "{row}");
        for c in &cells[1..] {
            let v: f64 = c.trim_end_matches('!').parse().expect("a time");
            assert!(v > 0.0, "{row}");
        }
    }
}

#[test]
fn posted_on_sim_recovers_the_matching_cost_per_traversed_entry() {
    let d = tmpdir("queue-posted-sim");
    let m = machine(&d);
    let j = d.join("r.json");
    let lengths = [0, 64, 128, 256];
    let doc = run_json(
        &j,
        &quick(&[
            "queue",
            "posted",
            "--backend",
            "sim",
            "--sim-config",
            m.to_str().unwrap(),
            "--lengths",
            "0,64..256",
            "--traversed",
            "0,50,100",
            "--sizes",
            "8,64",
        ]),
    );
    check_doc(&doc, "posted", &lengths, &[0, 50, 100], &[8, 64], false);
    let lines = check_lines(&doc, "sim", &[0, 50, 100], &[8, 64]);
    for size in [8, 64] {
        // Every traversed receive costs the matcher one entry (docs/simulator.md §4a).
        for pct in [50, 100] {
            let s = slope(line(lines, size, Some(pct)), "all");
            assert!(
                (s - MATCH_NS).abs() <= 0.02 * MATCH_NS,
                "{size} B, {pct} %: {s} ns per entry"
            );
        }
        // Nothing traversed: the receives behind the match are never walked.
        let zero = line(lines, size, Some(0));
        assert!(slope(zero, "all").abs() < 1.0, "{zero}");
        // All three start from the plain ping-pong.
        let base = zero["base_us"].as_f64().unwrap();
        for pct in [50, 100] {
            let b = line(lines, size, Some(pct))["base_us"].as_f64().unwrap();
            assert!((b - base).abs() < 1e-9, "{b} vs {base}");
        }
    }
    // `report` renders the grid and the per-entry lines from the document alone.
    let o = run(&["report", j.to_str().unwrap()]);
    assert_ok(&o);
    let text = stdout(&o);
    assert_grid(&text, &["0 %", "50 %", "100 %"], &lengths);
    assert!(text.contains("pre-posted receive queue"), "{text}");
    assert!(
        text.contains("receives from the peer (exact source)"),
        "{text}"
    );
    for want in [
        "0 % traversed, per receive queued: 0.00 ns per entry",
        "50 % traversed, per receive traversed: 300.00 ns per entry",
        "100 % traversed, per receive traversed: 300.00 ns per entry",
    ] {
        assert_eq!(text.matches(want).count(), 2, "{want} per size in\n{text}");
    }
    // The plot: one marker per point, named by its length.
    let svg = d.join("out.svg");
    let o = plot_queue(&j, &svg);
    assert_ok(&o);
    let s = std::fs::read_to_string(&svg).expect("the SVG");
    assert!(
        s.starts_with("<svg") || s.starts_with("<?xml"),
        "{}",
        &s[..80]
    );
    assert!(s.contains("pre-posted receive"), "axis title");
    for l in lengths {
        assert!(s.contains(&format!("data-length=\"{l}\"")), "length {l}");
        assert!(s.contains(&format!("length {l}: median")), "length {l}");
    }
    for pct in ["0 % traversed", "50 % traversed", "100 % traversed"] {
        assert!(s.contains(pct), "{pct} in the legend");
    }
}

#[test]
fn unexpected_on_sim_any_source_climbs_by_half_the_cost_once_no_longer_hidden() {
    let d = tmpdir("queue-unexpected-sim");
    let m = machine(&d);
    let j = d.join("r.json");
    let args = quick(&[
        "queue",
        "unexpected",
        "--backend",
        "sim",
        "--sim-config",
        m.to_str().unwrap(),
        "--lengths",
        "0,64,128,256",
        "--any-source",
        "--json",
        j.to_str().unwrap(),
    ]);
    let o = run(&args);
    assert_ok(&o);
    let doc = read_json(&j);
    check_doc(&doc, "unexpected", &[0, 64, 128, 256], &[], &[8], true);
    let lines = check_lines(&doc, "sim", &[], &[8]);
    // Past the lengths whose walk hides behind the transfer, each unexpected message adds the
    // walk at the answering node to the round trip: c / 2 to the one-way time
    // (docs/simulator.md §4a).
    let l = line(lines, 8, None);
    let tail = slope(l, "tail");
    assert!(
        (tail - MATCH_NS / 2.0).abs() <= 0.02 * MATCH_NS / 2.0,
        "tail: {tail} ns per entry: {l}"
    );
    assert_eq!(l["tail"]["from"], 64, "{l}");
    let all = slope(l, "all");
    assert!(
        all > 0.0 && all < tail,
        "the hidden part flattens the line: {all}"
    );
    // The text report on standard output (no --quiet).
    let text = stdout(&o);
    assert_grid(&text, &["median"], &[0, 64, 128, 256]);
    assert!(text.contains("unexpected message queue"), "{text}");
    assert!(text.contains("receives from any source"), "{text}");
    assert!(text.contains("per unexpected message queued: "), "{text}");
    assert!(text.contains("longer queues only"), "{text}");
    // The slope is half the matcher's cost: the report gives the cost per entry walked.
    let walked = format!(
        "per entry walked by one rank's matcher: {:.2} ns",
        2.0 * tail
    );
    assert!(text.contains(&walked), "{walked}: {text}");
    assert!((2.0 * tail - MATCH_NS).abs() <= 0.02 * MATCH_NS, "{tail}");
    // `report` renders it again, and the plot of the unexpected queue.
    let o = run(&["report", j.to_str().unwrap()]);
    assert_ok(&o);
    let again = stdout(&o);
    assert_grid(&again, &["median"], &[0, 64, 128, 256]);
    assert!(again.contains("receives from any source"), "{again}");
    assert!(again.contains(&walked), "{again}");
    let svg = d.join("u.svg");
    let o = plot_queue(&j, &svg);
    assert_ok(&o);
    let s = std::fs::read_to_string(&svg).expect("the SVG");
    for l in [0, 64, 128, 256] {
        assert!(s.contains(&format!("length {l}: median")), "length {l}");
    }
    assert!(s.contains("unexpected"), "the unexpected queue named");
}

#[test]
fn posted_on_shm_and_tcp_and_unexpected_on_shm_write_their_points_and_lines() {
    let d = tmpdir("queue-real");
    for (backend, kind, pcts, any) in [
        ("shm", "posted", &[0u64, 100][..], false),
        ("tcp", "posted", &[0, 50, 100][..], true),
        ("shm", "unexpected", &[][..], false),
    ] {
        let j = d.join(format!("{backend}-{kind}.json"));
        let pct_list = pcts
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mut args = vec![
            "queue",
            kind,
            "--backend",
            backend,
            "--lengths",
            "0,16,64",
            "--json",
            j.to_str().unwrap(),
        ];
        if !pcts.is_empty() {
            args.extend_from_slice(&["--traversed", &pct_list]);
        }
        if any {
            args.push("--any-source");
        }
        let o = run(&quick(&args));
        assert_ok(&o);
        let doc = read_json(&j);
        check_doc(&doc, kind, &[0, 16, 64], pcts, &[8], any);
        let lines = check_lines(&doc, backend, pcts, &[8]);
        for l in lines {
            assert_eq!(l["all"]["points"], 3, "{l}");
            assert_eq!(l["all"]["from"], 0, "{l}");
        }
        // The report on standard output: the grid, then a line per column.
        let text = stdout(&o);
        let cols: Vec<String> = if pcts.is_empty() {
            vec!["median".into()]
        } else {
            pcts.iter().map(|p| format!("{p} %")).collect()
        };
        let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
        assert_grid(&text, &cols, &[0, 16, 64]);
        assert!(text.contains("per queue entry (least squares"), "{text}");
        for p in pcts.iter().filter(|&&p| p > 0) {
            let want = format!("{p} % traversed, per receive traversed: ");
            assert!(text.contains(&want), "{want} in\n{text}");
        }
        let source = if any {
            "receives from any source"
        } else {
            "receives from the peer (exact source)"
        };
        assert!(text.contains(source), "{text}");
        assert!(text.contains(&format!("{backend}, 8 B messages")), "{text}");
        // And again from the document.
        let o = run(&["report", j.to_str().unwrap()]);
        assert_ok(&o);
        assert_grid(&stdout(&o), &cols, &[0, 16, 64]);
    }
}

#[test]
fn queue_plot_of_a_pingpong_document_is_a_usage_error() {
    let d = tmpdir("queue-plot-pingpong");
    let j = d.join("pp.json");
    let doc = run_json(
        &j,
        &[
            "pingpong",
            "--backend",
            "sim",
            "--sim-config",
            "generic",
            "--trials",
            "20",
            "--samples",
            "1000",
        ],
    );
    assert!(
        doc.get("queue").map_or(true, Value::is_null),
        "{}",
        doc["queue"]
    );
    let svg = d.join("q.svg");
    let o = plot_queue(&j, &svg);
    assert_usage_output(&o, "queue", "plot --kind queue of a pingpong");
    assert_eq!(
        stderr(&o)
            .lines()
            .filter(|l| l.starts_with("commbench: error: "))
            .count(),
        1
    );
    assert!(!svg.exists(), "no plot written");
}

#[test]
fn bad_queue_options_are_usage_errors_naming_the_flag() {
    for (args, needle) in [
        (
            &["queue", "posted", "--traversed", "101"][..],
            "--traversed",
        ),
        (&["queue", "posted", "--traversed", "x"], "--traversed"),
        (&["queue", "posted", "--traversed", ""], "--traversed"),
        (&["queue", "posted", "--traversed", "0,,50"], "--traversed"),
        (&["queue", "posted", "--lengths", "20000"], "--lengths"),
        (
            &["queue", "unexpected", "--lengths", "0,16385"],
            "--lengths",
        ),
        (&["queue", "posted", "--lengths", "bad"], "--lengths"),
        (&["queue", "unexpected", "--lengths", ""], "--lengths"),
        (&["queue", "posted", "--sizes", "bad"], "--sizes"),
        (&["queue", "unexpected", "--sizes", "bad"], "--sizes"),
        // One npp per queue set up: no npp study.
        (&["queue", "posted", "--npp", "1,9"], "--npp"),
        // The fraction traversed is the posted queue's alone.
        (
            &["queue", "unexpected", "--traversed", "50"],
            "unexpected argument '--traversed'",
        ),
        (&["queue", "bogus"], "bogus"),
    ] {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--backend", "sim"]);
        if args[1] == "bogus" {
            all.truncate(2);
        }
        assert_usage_error(&all, needle);
    }
    // The reason gives the limit.
    let o = run(&["queue", "posted", "--lengths", "16385", "--backend", "sim"]);
    assert_usage_output(&o, "at most 16384", "--lengths 16385");
}

#[test]
fn queue_without_a_subcommand_shows_both_and_exits_2() {
    for args in [&["queue"][..], &["queue", "--lengths", "0"]] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("commbench queue <COMMAND>"), "{args:?}: {e}");
        if args.len() == 1 {
            assert!(e.contains("posted") && e.contains("unexpected"), "{e}");
        }
        assert!(stdout(&o).is_empty(), "{args:?}");
    }
}

/// Two lengths give each line two points, whose slope has no standard error (written as
/// null): the document still reads back for `report` and `plot`.
#[test]
fn two_lengths_read_back_for_report_and_plot() {
    let d = tmpdir("queue-two-lengths");
    let m = machine(&d);
    let j = d.join("r.json");
    let doc = run_json(
        &j,
        &quick(&[
            "queue",
            "posted",
            "--backend",
            "sim",
            "--sim-config",
            m.to_str().unwrap(),
            "--lengths",
            "0,100",
            "--traversed",
            "100",
        ]),
    );
    let lines = check_lines(&doc, "sim", &[100], &[8]);
    let l = line(lines, 8, Some(100));
    assert_eq!(l["all"]["points"], 2, "{l}");
    let s = slope(l, "all");
    assert!((s - MATCH_NS).abs() <= 0.02 * MATCH_NS, "{s}");
    let o = run(&["report", j.to_str().unwrap()]);
    assert_ok(&o);
    let text = stdout(&o);
    assert_grid(&text, &["100 %"], &[0, 100]);
    assert!(text.contains("300.00 ns per entry (± undefined)"), "{text}");
    let svg = d.join("two.svg");
    let o = plot_queue(&j, &svg);
    assert_ok(&o);
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("length 100: median"));
}

/// `compare` matches a queue benchmark's points by their queue as well as their size, and
/// `report --format csv` gives each point's queue; no Hockney line is fitted through queues.
#[test]
fn compare_and_csv_know_each_points_queue() {
    let d = tmpdir("queue-compare");
    let m = machine(&d);
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    for j in [&a, &b] {
        let doc = run_json(
            j,
            &quick(&[
                "queue",
                "posted",
                "--backend",
                "sim",
                "--sim-config",
                m.to_str().unwrap(),
                "--lengths",
                "0,64",
                "--traversed",
                "0,100",
                "--sizes",
                "8,64",
            ]),
        );
        assert!(doc["fit"].is_null(), "no Hockney line through queues");
    }
    let o = run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_ok(&o);
    let text = stdout(&o);
    for name in [
        "queue_posted (length 0, 0 % traversed)",
        "queue_posted (length 64, 0 % traversed)",
        "queue_posted (length 0, 100 % traversed)",
        "queue_posted (length 64, 100 % traversed)",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    let o = run(&["report", a.to_str().unwrap(), "--format", "csv"]);
    assert_ok(&o);
    let csv = stdout(&o);
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .ends_with(",queue_length,traversed_pct,traversed"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().any(|r| r.ends_with(",64,100,64")), "{csv}");
    assert!(rows.iter().any(|r| r.ends_with(",64,0,0")), "{csv}");
}
