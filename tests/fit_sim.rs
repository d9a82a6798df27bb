//! Fitted models against the simulator, whose one-way time is an exact closed form of the
//! configured per-message times: on two neighbouring nodes t(n) = F(n) + E(n) + U(n).

mod common;

use common::{run_json, tmpdir};
use serde_json::Value;

/// A 1..1M ping-pong sweep (npp 1) on a one-dimensional simulated machine with `times`.
fn sweep(name: &str, times: &str) -> Value {
    let dir = tmpdir(name);
    let cfg = dir.join("machine.toml");
    std::fs::write(
        &cfg,
        format!("name = \"{name}\"\npreset = \"generic\"\ndimensions = 1\ntick_ns = 1\nclock_read_ns = 1\n\n[times]\n{times}"),
    )
    .unwrap();
    let args = [
        "pingpong",
        "--backend",
        "sim",
        "--sim-config",
        cfg.to_str().unwrap(),
        "--sizes",
        "1..1M:x2",
        "--npp",
        "1",
        "--trials",
        "5",
        "--warmup",
        "1",
        "--samples",
        "100",
    ];
    run_json(&dir.join("r.json"), &args)
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
    let doc = sweep(
        "one-regime",
        "F = { base_us = 2.0, per_byte_us = 0.0002 }\nE = { base_us = 5.0, per_byte_us = 0.001 }\nU = { base_us = 1.0, per_byte_us = 0.0003 }\n",
    );
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
    let doc = sweep(
        "two-regimes",
        "F = { base_us = 2.0, per_byte_us = 0.0002 }\nU = { base_us = 1.0, per_byte_us = 0.0003 }\nE = [{ from = 0, base_us = 5.0, per_byte_us = 0.002 }, { from = 4096, base_us = 25.0, per_byte_us = 0.0005 }]\n",
    );
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
