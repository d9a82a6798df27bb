//! Fitted models against the simulator, whose one-way time is an exact closed form of the
//! configured per-message times: on two neighbouring nodes t(n) = F(n) + E(n) + U(n).

use crate::common;

use commbench_sim::Times;
use common::machine::{line, pieces, Machine};
use common::{assert_ok, run, run_json, stdout, tmpdir};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A 1..1M ping-pong sweep (npp 1) on a one-dimensional simulated machine whose times `times`
/// sets.
fn sweep(name: &str, times: impl FnOnce(&mut Times)) -> Value {
    sweep_with(name, times, "1..1M:x2", &[]).0
}

/// A ping-pong sweep over `sizes` (npp 1, `extra` arguments) on a one-dimensional simulated
/// machine (the generic preset's, 1 ns clock reads) whose times `times` sets: the document and
/// where it was written.
fn sweep_with(
    name: &str,
    times: impl FnOnce(&mut Times),
    sizes: &str,
    extra: &[&str],
) -> (Value, PathBuf) {
    let dir = tmpdir(name);
    let cfg = Machine::new(name, 1)
        .tick_ns(1)
        .clock_read_ns(1)
        .set_times(times)
        .write(&dir.join("machine.toml"));
    let args = [
        "pingpong",
        "--backend",
        "sim",
        "--sim-config",
        cfg.to_str().unwrap(),
        "--sizes",
        sizes,
        "--npp",
        "1",
        "--trials",
        "5",
        "--warmup",
        "1",
        "--samples",
        "100",
    ];
    let args: Vec<&str> = args.iter().chain(extra).copied().collect();
    let json = dir.join("r.json");
    (run_json(&json, &args), json)
}

/// `commbench report --full` of the document at `json`.
fn full_report(json: &Path) -> String {
    let o = run(&["report", "--full", json.to_str().unwrap()]);
    assert_ok(&o);
    stdout(&o)
}

/// One regime: t0 = 8 us, 1/r_inf = 0.0015 us/B.
fn one_regime(t: &mut Times) {
    t.f = line(2.0, 0.0002);
    t.e = line(5.0, 0.001);
    t.u = line(1.0, 0.0003);
}

#[test]
fn a_negative_start_up_time_is_not_identifiable() {
    // From 4 KiB the transfer has no start-up cost, and from 128 KiB it costs four times as
    // much per byte: the line over 4 KiB..1 MiB (split at the given 4 KiB) crosses zero time
    // at a positive size.
    let (doc, json) = sweep_with(
        "negative-t0",
        |t| {
            t.f = line(2.0, 0.0002);
            t.u = line(1.0, 0.0003);
            t.e = pieces(&[(0, 5.0, 0.002), (4096, 0.0, 0.001), (131072, 0.0, 0.004)]);
        },
        "1..1M:x2",
        &["--breakpoint", "4K"],
    );
    let upper = &doc["fit"]["hockney"]["segments"][1];
    // The numbers stay as fitted; the flags say which are not physical, and why.
    assert!(upper["t0_us"].as_f64().unwrap() < 0.0, "{upper}");
    let flagged: Vec<&str> = upper["not_identifiable"]
        .as_array()
        .unwrap_or_else(|| panic!("no flags: {upper}"))
        .iter()
        .map(|u| u["parameter"].as_str().unwrap())
        .collect();
    assert_eq!(flagged, ["t0_us", "n_half_bytes", "pi0_per_s"]);
    assert!(upper["not_identifiable"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("is negative"));
    // The lower regime is physical and says nothing.
    let lower = &doc["fit"]["hockney"]["segments"][0];
    assert!(lower.get("not_identifiable").is_none(), "{lower}");
    assert_regime(lower, 400.0, 8.0);
    let text = full_report(&json);
    assert!(text.contains("t0   = not identifiable (fitted -"), "{text}");
    assert!(text.contains("pi0  = not identifiable"), "{text}");
    assert!(
        text.contains("not identifiable: the fitted t0 = -"),
        "{text}"
    );
}

#[test]
fn two_sizes_give_an_exact_line_without_uncertainty() {
    let (doc, json) = sweep_with("two-sizes", one_regime, "1K,1M", &[]);
    let h = &doc["fit"]["hockney"];
    assert_eq!(h["exact"], true, "{h}");
    for k in ["se_t0_us", "se_r_inf_mb_s", "se_n_half_bytes"] {
        assert!(h[k].is_null(), "{k}: {h}");
    }
    // t = 8 us + n x 0.0015 us/B, exactly.
    assert_regime(h, 1.0 / 0.0015, 8.0);
    let l = &doc["fit"]["linear"];
    assert!(
        l["ci95_latency_us"]["lo"].is_null() && l["se_latency_us"].is_null(),
        "{l}"
    );
    let text = full_report(&json);
    let fit = &text[text.find("FITTED MODELS").expect("a fit section")..];
    assert!(
        fit.contains("exact through two points (no r2, no standard errors)"),
        "{fit}"
    );
    assert!(fit.contains("exact through two points (no CI)"), "{fit}");
    assert!(
        !fit.contains("undefined") && !fit.contains("+-") && !fit.contains("r2 ="),
        "{fit}"
    );
}

fn close(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

/// A Hockney regime `h` has `r_inf` (MB/s) and `t0` (us) within 1 %.
fn assert_regime(h: &Value, r_inf: f64, t0: f64) {
    assert!(close(h["r_inf_mb_s"].as_f64().unwrap(), r_inf, 0.01), "{h}");
    assert!(close(h["t0_us"].as_f64().unwrap(), t0, 0.01), "{h}");
}

#[test]
fn hockney_parameters_are_recovered_within_one_percent() {
    // t0 = 2 + 5 + 1 = 8 us; 1/r_inf = 0.0002 + 0.001 + 0.0003 = 0.0015 us/B.
    let (t0, r_inf) = (8.0, 1.0 / 0.0015);
    let doc = sweep("one-regime", one_regime);
    let h = &doc["fit"]["hockney"];
    assert_regime(h, r_inf, t0);
    assert!(
        close(h["n_half_bytes"].as_f64().unwrap(), r_inf * t0, 0.01),
        "{h}"
    );
    assert!(
        close(h["pi0_per_s"].as_f64().unwrap(), 1e6 / t0, 0.01),
        "{h}"
    );
    assert!(
        h["breakpoint_bytes"].is_null(),
        "one regime has no breakpoint: {h}"
    );
    let l = &doc["fit"]["linear"];
    assert!(close(l["latency_us"].as_f64().unwrap(), t0, 0.01), "{l}");
    assert!(
        close(l["bandwidth_mb_s"].as_f64().unwrap(), r_inf, 0.01),
        "{l}"
    );
}

#[test]
fn the_breakpoint_of_two_regimes_is_found() {
    // A protocol switch at 4 KiB: a rendezvous costs 20 us more, the transfer gets faster.
    let doc = sweep("two-regimes", |t| {
        t.f = line(2.0, 0.0002);
        t.u = line(1.0, 0.0003);
        t.e = pieces(&[(0, 5.0, 0.002), (4096, 25.0, 0.0005)]);
    });
    let h = &doc["fit"]["hockney"];
    let bp = h["breakpoint_bytes"]
        .as_u64()
        .unwrap_or_else(|| panic!("no breakpoint found: {h}"));
    assert!((2048..=4096).contains(&bp), "breakpoint at {bp}: {h}");
    let segs = h["segments"].as_array().unwrap();
    assert_eq!(segs.len(), 2, "{h}");
    // The upper regime: 1/r_inf = 0.0002 + 0.0005 + 0.0003 = 0.001 us/B, t0 = 28 us.
    assert_regime(&segs[1], 1000.0, 28.0);
    // The lower regime: 1/r_inf = 0.0025 us/B, t0 = 8 us.
    assert_regime(&segs[0], 400.0, 8.0);
}
