//! The message buffer options (`--validate`, `--cache`, `--cache-pool`, `--buffers`, `--align`,
//! `--offset`; docs/buffers.md) as a user runs them: usage errors, and what a run records of
//! its messages on every local backend.

use crate::common;

use common::*;
use serde_json::Value;

/// The options of the runs here: a quick run's ([`QUICK`]), two sizes and a fixed npp, so that
/// the trials checked are exactly the timed ones and the warm-up.
fn options() -> Vec<&'static str> {
    let mut o = QUICK.to_vec();
    o.extend_from_slice(&["--npp", "1", "--sizes", "8,1K"]);
    o
}

/// Trials each point of a run with [`options`] checks: the [`QUICK_TRIALS`] timed, and the
/// warm-up (checked once, after its iterations).
const QUICK_CHECKED: u64 = QUICK_TRIALS + 1;

/// `commbench <cmd> <extra> options --backend <backend>`'s document.
fn quick(name: &str, cmd: &[&str], backend: &str, extra: &[&str]) -> Value {
    let d = tmpdir(name);
    let j = d.join("r.json");
    let mut args = cmd.to_vec();
    args.extend_from_slice(&["--backend", backend]);
    args.extend(options());
    args.extend_from_slice(extra);
    run_json(&j, &args)
}

/// Every point's `buffers` object.
fn point_buffers(doc: &Value) -> Vec<&Value> {
    let points = doc["points"].as_array().expect("points");
    assert!(!points.is_empty(), "no points: {doc}");
    points
        .iter()
        .map(|p| {
            let b = &p["buffers"];
            assert!(b.is_object(), "a point without buffers: {p}");
            b
        })
        .collect()
}

#[test]
fn bad_buffer_options_are_usage_errors_naming_their_flag() {
    for (args, needle) in [
        (&["pingpong", "--align", "48"][..], "--align"),
        (&["pingpong", "--align", "0"][..], "--align"),
        (&["pingpong", "--align", "4M"][..], "--align"),
        (
            &["pingpong", "--align", "64", "--offset", "64"][..],
            "--offset",
        ),
        // An offset alone is from a page.
        (&["pingpong", "--offset", "4096"][..], "--offset"),
        (&["pingpong", "--cache-pool", "64M"][..], "--cache-pool"),
        (
            &["pingpong", "--cache", "warm", "--cache-pool", "64M"][..],
            "--cache-pool",
        ),
        (
            &["pingpong", "--cache", "cold", "--cache-pool", "1K"][..],
            "--cache-pool",
        ),
        (&["transpose", "--n", "8", "--validate"][..], "--validate"),
        (&["queue", "posted", "--validate"][..], "--validate"),
        (&["queue", "unexpected", "--validate"][..], "--validate"),
        (&["echo", "--validate"][..], "--validate"),
        (&["overhead", "--validate"][..], "--validate"),
        (&["interference", "--validate"][..], "--validate"),
        (&["transpose", "--n", "8", "--align", "64"][..], "--align"),
        (&["queue", "posted", "--offset", "3"][..], "--offset"),
        (&["pingpong", "--buffers", "single"][..], "--buffers single"),
        (&["exchange", "--buffers", "single"][..], "--buffers single"),
        (&["allpairs", "--buffers", "single"][..], "--buffers single"),
        (
            &["transpose", "--n", "8", "--buffers", "single"][..],
            "--buffers single",
        ),
        (&["pingpong", "--cache", "lukewarm"][..], "lukewarm"),
        (&["bandwidth", "--buffers", "double"][..], "double"),
    ] {
        assert_usage_error(args, needle);
    }
}

#[test]
fn help_explains_each_option_with_the_peer_flag_it_matches() {
    let o = run(&["bandwidth", "--help"]);
    assert_ok(&o);
    // Words wrapped across lines read as one line.
    let h = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
    for needle in [
        "--validate",
        "OSU -c",
        "NetPIPE -i/--integrity",
        "fi_pingpong -c",
        "--cache <STATE>",
        "IMB -off_cache",
        "--cache-pool <SIZE>",
        "--buffers <REUSE>",
        "osu_bw's default",
        "earlier results stay comparable",
        "--align <N>",
        "--offset <N>",
        "--soffset",
    ] {
        assert!(h.contains(needle), "{needle:?} not in --help:\n{h}");
    }
    // A benchmark that neither checks nor places its messages offers only the cache state.
    for sub in [&["transpose"][..], &["queue", "posted"], &["echo"]] {
        let mut args = sub.to_vec();
        args.push("--help");
        let o = run(&args);
        assert_ok(&o);
        let h = stdout(&o);
        assert!(h.contains("--cache <STATE>"), "{sub:?}: {h}");
        for flag in ["--validate", "--buffers", "--align", "--offset"] {
            assert!(!h.contains(flag), "{sub:?} --help offers {flag}");
        }
    }
}

#[test]
fn validated_runs_check_every_trial_on_every_local_backend() {
    for backend in ["shm", "tcp", "sim"] {
        for cmd in [
            &["pingpong"][..],
            &["exchange"],
            &["bandwidth", "--window", "8"],
        ] {
            let name = format!("validate-{backend}-{}", cmd[0]);
            let doc = quick(&name, cmd, backend, &["--validate"]);
            assert_eq!(doc["status"], "complete", "{name}");
            assert_eq!(doc["config"]["buffers"]["validate"], true, "{name}");
            for b in point_buffers(&doc) {
                assert_eq!(b["validated_trials"], QUICK_CHECKED, "{name}: {b}");
                assert!(b.get("cache_pool").is_none(), "{name}: warm: {b}");
            }
        }
    }
}

#[test]
fn a_default_run_checks_nothing_and_says_nothing_about_its_messages() {
    let d = tmpdir("buffers-default");
    let j = d.join("r.json");
    let mut args = vec!["pingpong"];
    args.extend(options());
    let doc = run_json(&j, &args);
    let c = &doc["config"]["buffers"];
    assert_eq!(c["validate"], false);
    assert_eq!(c["cache"], "warm");
    assert_eq!(c["buffers"], "multiple");
    assert_eq!(c["offset"], 0);
    assert!(
        c.get("align").is_none() && c.get("cache_pool").is_none(),
        "{c}"
    );
    for b in point_buffers(&doc) {
        assert_eq!(b["validated_trials"], 0, "{b}");
    }
    let r = run(&["report", j.to_str().unwrap()]);
    assert_ok(&r);
    assert!(!stdout(&r).contains("messages:"), "{}", stdout(&r));
}

/// A message placed `offset` bytes past a multiple of `align` starts at an address whose
/// largest power-of-two divisor is that of `offset` (of `align` for offset 0).
fn expected_alignment(align: u64, offset: u64) -> u64 {
    if offset == 0 {
        align
    } else {
        1 << offset.trailing_zeros()
    }
}

#[test]
fn placed_messages_record_the_alignment_their_addresses_had() {
    for (align, offset) in [
        (Some(4096u64), 3u64),
        (Some(4096), 8),
        (None, 12),
        (Some(64), 0),
    ] {
        let want = expected_alignment(align.unwrap_or(4096), offset);
        let (a, o) = (align.map(|a| a.to_string()), offset.to_string());
        let mut extra = vec!["--offset", o.as_str()];
        if let Some(a) = &a {
            extra.extend_from_slice(&["--align", a.as_str()]);
        }
        for backend in ["shm", "sim"] {
            for cmd in [&["pingpong"][..], &["bandwidth", "--window", "4"]] {
                let name = format!(
                    "align-{backend}-{}-{}-{offset}",
                    cmd[0],
                    a.as_deref().unwrap_or("page")
                );
                let mut extra = extra.clone();
                extra.push("--validate");
                let doc = quick(&name, cmd, backend, &extra);
                let c = &doc["config"]["buffers"];
                assert_eq!(c["offset"], offset, "{name}: {c}");
                match align {
                    Some(a) => assert_eq!(c["align"], a, "{name}: {c}"),
                    None => assert!(c.get("align").is_none(), "{name}: {c}"),
                }
                for b in point_buffers(&doc) {
                    for side in ["source_alignment", "dest_alignment"] {
                        let got = b[side].as_u64().unwrap_or_else(|| panic!("{name}: {b}"));
                        if offset == 0 {
                            // Aligned to at least what was asked (an address may happen to
                            // sit on a larger boundary).
                            assert!(got >= want && got.is_power_of_two(), "{name}: {side} {got}");
                        } else {
                            assert_eq!(got, want, "{name}: {side}");
                        }
                    }
                    assert_eq!(b["validated_trials"], QUICK_CHECKED, "{name}");
                }
            }
        }
    }
}

#[test]
fn the_report_says_what_the_messages_were() {
    let d = tmpdir("buffers-report");
    let j = d.join("r.json");
    let mut args = vec!["pingpong", "--validate", "--align", "4096", "--offset", "3"];
    args.extend(options());
    run_json(&j, &args);
    for full in [false, true] {
        let mut a = vec!["report", j.to_str().unwrap()];
        if full {
            a.push("--full");
        }
        let r = run(&a);
        assert_ok(&r);
        let out = stdout(&r);
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with("messages: "))
            .unwrap_or_else(|| panic!("no messages line:\n{out}"));
        // Two sizes of QUICK_CHECKED checked trials each.
        let checked = format!(
            "validated: {} trials checked byte for byte",
            2 * QUICK_CHECKED
        );
        assert!(line.contains(&checked), "{line}");
        assert!(
            line.contains("3 B past a multiple of 4096 B")
                && line.contains("aligned to 1 B on the source and 1 B on the dest"),
            "{line}"
        );
    }
}

#[test]
fn a_cold_cache_writes_its_pool_where_there_are_caches() {
    for backend in ["shm", "tcp"] {
        let name = format!("cold-{backend}");
        let doc = quick(
            &name,
            &["pingpong"],
            backend,
            &["--cache", "cold", "--cache-pool", "2M"],
        );
        let c = &doc["config"]["buffers"];
        assert_eq!(
            (c["cache"].as_str(), c["cache_pool"].as_u64()),
            (Some("cold"), Some(2 << 20))
        );
        for b in point_buffers(&doc) {
            assert_eq!(b["cache_pool"], 2u64 << 20, "{name}: {b}");
            assert_eq!(b["validated_trials"], 0, "{name}: {b}");
        }
    }
}

#[test]
fn a_cold_cache_on_the_simulator_is_noted_and_writes_no_pool() {
    let d = tmpdir("cold-sim");
    let j = d.join("r.json");
    let mut args = vec!["pingpong", "--backend", "sim", "--cache", "cold"];
    args.extend(options());
    let o = run(&with_json(&args, &j));
    assert_ok(&o);
    let e = stderr(&o);
    let notes: Vec<&str> = e.lines().filter(|l| l.contains("--cache cold")).collect();
    assert_eq!(notes.len(), 1, "{e}");
    assert!(
        notes[0].starts_with("commbench: note: ") && notes[0].contains("models no caches"),
        "{e}"
    );
    let doc = read_json(&j);
    assert_eq!(doc["config"]["buffers"]["cache"], "cold");
    for b in point_buffers(&doc) {
        assert!(
            b.get("cache_pool").is_none(),
            "the simulator wrote a pool: {b}"
        );
    }
    let r = run(&["report", j.to_str().unwrap()]);
    assert_ok(&r);
    assert!(
        stdout(&r).contains("cache cold asked, but no pool written"),
        "{}",
        stdout(&r)
    );
    // No note where there are caches.
    let o = run(&with_json(
        &[
            "pingpong",
            "--cache",
            "cold",
            "--npp",
            "1",
            "--trials",
            "5",
            "--samples",
            "1000",
        ],
        &j,
    ));
    assert_ok(&o);
    assert!(!stderr(&o).contains("note: --cache cold"), "{}", stderr(&o));
}

#[test]
fn single_buffers_stream_on_every_local_backend() {
    for backend in ["shm", "tcp", "sim"] {
        for cmd in [
            &["bandwidth", "--window", "16"][..],
            &["bandwidth", "--window", "16", "--bidirectional"],
        ] {
            let name = format!("single-{backend}-{}", cmd.len());
            let doc = quick(&name, cmd, backend, &["--buffers", "single", "--validate"]);
            assert_eq!(doc["status"], "complete", "{name}");
            assert_eq!(doc["config"]["buffers"]["buffers"], "single", "{name}");
            for b in point_buffers(&doc) {
                assert_eq!(b["validated_trials"], QUICK_CHECKED, "{name}: {b}");
            }
        }
    }
}

#[test]
fn compare_warns_when_the_messages_differ() {
    let d = tmpdir("buffers-compare");
    let (a, b) = (d.join("a.json"), d.join("b.json"));
    let mut warm = vec!["pingpong"];
    warm.extend(options());
    run_json(&a, &warm);
    let mut aligned = warm.clone();
    aligned.extend_from_slice(&["--align", "64", "--offset", "1"]);
    run_json(&b, &aligned);
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let o = run(&["compare", sa, sb]);
    assert_ok(&o);
    let warn: Vec<String> = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("commbench: warning: "))
        .map(String::from)
        .collect();
    assert_eq!(warn.len(), 1, "{}", stderr(&o));
    assert!(
        warn[0].contains("message buffers differ")
            && warn[0].contains(&format!("{sa}: default"))
            && warn[0].contains(&format!("{sb}: messages 1 B past 64 B")),
        "{}",
        warn[0]
    );
    // The same messages: no warning.
    let c = d.join("c.json");
    run_json(&c, &warm);
    let o = run(&["compare", sa, c.to_str().unwrap()]);
    assert_ok(&o);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}
