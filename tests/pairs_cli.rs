//! `commbench bandwidth --pairs K` as a user runs it: every pair's samples and the three
//! aggregates in the result document, the placement and the hosts in its `pairs` section, the
//! text report, and the usage errors. On the simulator, pairs that share nothing add up to
//! exactly K times one pair, every aggregate alike; on tcp only the structure is checked (no
//! timing: the machine is noisy).

use crate::common;

use commbench_core::stats::Xoshiro256;
use common::machine::{six, Machine};
use common::*;
use serde_json::Value;

/// The numbers of a JSON array.
fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("an array: {v}"))
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// The aggregate `name` of a point: its median MB/s and message rate.
fn aggregate(point: &Value, name: &str) -> (f64, f64) {
    let a = point["pairs"]["aggregates"]
        .as_array()
        .expect("aggregates")
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {}", point["pairs"]));
    (
        a["mb_s"]["median"].as_f64().expect("MB/s"),
        a["messages_per_s"]["median"].as_f64().expect("msg/s"),
    )
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Pairs `2i -> 2i + 1` on a machine of our own share no node, so each measures what one
/// pair alone does, and all three aggregates are exactly K times its rate.
#[test]
fn pairs_that_share_nothing_add_up_to_k_times_one() {
    let dir = tmpdir("pairs-apart");
    let mut rng = Xoshiro256::new(0xc7c11c);
    let mut line = |lo: f64, hi: f64, pb: f64| (rng.range(lo, hi), rng.range(0.0, pb));
    let machine = Machine::new("pairs-apart", 3)
        .tick_ns(1)
        .times(six([
            line(0.2, 2.0, 0.001),
            line(0.0, 0.3, 0.0),
            line(0.0, 0.3, 0.0),
            line(0.0, 0.4, 0.0),
            line(0.3, 1.0, 0.0005),
            line(1.0, 3.0, 0.002),
        ]))
        .write(&dir.join("m.toml"));
    let m = machine.to_str().expect("UTF-8 path");
    let k = 2 + rng.below(3);
    let window = (1 + rng.below(20)).to_string();
    let size = (1 + rng.below(5000)).to_string();
    let ks = k.to_string();
    let run_k = |pairs: &str, j: &str| {
        let args = quick(&[
            "bandwidth",
            "--backend",
            "sim",
            "--sim-config",
            m,
            "--pairs",
            pairs,
            "--placement",
            "cyclic",
            "--window",
            &window,
            "--sizes",
            &size,
            "--npp",
            "2",
        ]);
        run_json(&dir.join(j), &args)
    };
    let one = run_k("1", "one.json");
    let many = run_k(&ks, "many.json");
    let (p1, pk) = (&one["points"][0], &many["points"][0]);
    let alone = f64s(&p1["pair_trial_ns"][0]);
    let every = pk["pair_trial_ns"]
        .as_array()
        .expect("every pair's samples");
    assert_eq!(every.len(), k);
    assert!(
        every.iter().all(|v| f64s(v) == alone),
        "{every:?} vs {alone:?}"
    );
    let (r1, m1) = aggregate(p1, "makespan");
    for name in ["makespan", "mean_time", "sum"] {
        let (r, m) = aggregate(pk, name);
        assert!(
            close(r, k as f64 * r1) && close(m, k as f64 * m1),
            "{name}: {r} vs {r1}"
        );
    }
    assert_eq!(many["config"]["pairs"]["placement"]["kind"], "cyclic");
    let places = many["pairs"]["pairs"]
        .as_array()
        .expect("the pairs' places");
    assert_eq!(places.len(), k);
    for (i, p) in places.iter().enumerate() {
        assert_eq!(
            (p["sender"].as_u64(), p["receiver"].as_u64()),
            (Some(2 * i as u64), Some(2 * i as u64 + 1))
        );
        assert_eq!(p["crosses_hosts"], true, "each simulated node is a host");
    }
    assert_eq!(pk["pairs"]["acknowledgements_counted"], false);
    let report = run(&["report", dir.join("many.json").to_str().expect("UTF-8")]);
    assert_ok(&report);
    let text = stdout(&report);
    assert!(
        text.contains(&format!("{k} pairs streaming at once (cyclic placement")),
        "{text}"
    );
    assert!(text.contains("makespan = K x B / max_p t_p"), "{text}");
}

/// Two pairs over tcp: every pair's samples, the aggregates in their order (makespan <= mean
/// time <= sum on every sample, so on the medians too), the hosts recorded.
#[test]
fn two_pairs_over_tcp_keep_every_pair() {
    let dir = tmpdir("pairs-tcp");
    let j = dir.join("r.json");
    let doc = run_json(
        &j,
        &[
            "bandwidth",
            "--backend",
            "tcp",
            "--pairs",
            "2",
            "--sizes",
            "4K",
            "--window",
            "8",
            "--trials",
            "12",
            "--warmup",
            "2",
            "--samples",
            "1000",
            "--npp",
            "2",
        ],
    );
    let p = &doc["points"][0];
    assert_eq!(p["pair_trial_ns"].as_array().map(Vec::len), Some(2));
    assert_eq!(f64s(&p["pair_trial_ns"][1]).len(), 12);
    let (a, b, c) = (
        aggregate(p, "makespan").0,
        aggregate(p, "mean_time").0,
        aggregate(p, "sum").0,
    );
    assert!(
        a > 0.0 && a <= b * (1.0 + 1e-12) && b <= c * (1.0 + 1e-12),
        "{a} {b} {c}"
    );
    assert_eq!(doc["config"]["ranks"], 4);
    for pl in doc["pairs"]["pairs"].as_array().expect("places") {
        assert_eq!(pl["crosses_hosts"], false, "one host: {pl}");
    }
}

#[test]
fn bad_pairs_are_usage_errors() {
    let dir = tmpdir("pairs-usage");
    let twice = dir.join("twice.txt");
    std::fs::write(&twice, "0 1\n2 1\n").expect("file");
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "0 1 2\n").expect("file");
    let t = twice.to_str().expect("UTF-8");
    let b = bad.to_str().expect("UTF-8");
    for (args, needle) in [
        (vec!["bandwidth", "--pairs", "0"], "--pairs 0"),
        (vec!["bandwidth", "--pairs", "5000"], "--pairs 5000"),
        (
            vec!["bandwidth", "--pairs", "2", "--source", "1"],
            "--source and --dest do not apply",
        ),
        (vec!["bandwidth", "--placement", "cyclic"], "how many pairs"),
        (
            vec!["bandwidth", "--placement", t],
            "rank 1 is in pair 0 and pair 1",
        ),
        (vec!["bandwidth", "--placement", b], "line 1"),
        (
            vec!["bandwidth", "--placement", "/nonexistent/pairs"],
            "--placement /nonexistent/pairs",
        ),
        (
            vec!["bandwidth", "--pairs", "3", "--ranks", "4"],
            "out of range",
        ),
        (
            vec!["bandwidth", "--pairs", "2", "--until-ci", "5%"],
            "fixed count of trials",
        ),
        (
            vec![
                "bandwidth",
                "--backend",
                "sim",
                "--sim-config",
                "generic",
                "--pairs",
                "5000",
            ],
            "--pairs 5000",
        ),
    ] {
        assert_usage_error(&args, needle);
    }
}

/// With --bidirectional every pair streams both ways (IMB Biband): a sample counts both
/// directions' messages.
#[test]
fn bidirectional_pairs_count_both_ways() {
    let dir = tmpdir("pairs-bidir");
    let doc = run_json(
        &dir.join("r.json"),
        &quick(&[
            "bandwidth",
            "--backend",
            "sim",
            "--sim-config",
            "generic",
            "--pairs",
            "2",
            "--bidirectional",
            "--window",
            "4",
            "--sizes",
            "100",
            "--npp",
            "2",
        ]),
    );
    let p = &doc["points"][0];
    assert_eq!(p["pattern"], "bibandwidth");
    assert_eq!(p["pairs"]["messages_per_sample"], 2 * 2 * 4);
    assert_eq!(p["pairs"]["bytes_per_sample"], 2 * 2 * 4 * 100);
}

/// The max-rate model's ground truth on machines of our own (docs/simulator.md §4b): senders
/// one hop from node 0 (`2^a`, `a < 4`) paced by a send overhead `F = f n` stream through the
/// one channel `0 -> 16` (`E = e n`, `e < f`) to receivers `16 + 32 m`. Alone a pair reaches
/// `R_b = 1 / f`; together the pairs share the channel's `R_N = 1 / e`. A sweep of k = 1..4
/// pairs must give both back.
#[test]
fn a_sweep_of_pairs_recovers_the_max_rate_model() {
    let dir = tmpdir("pairs-maxrate");
    let mut rng = Xoshiro256::new(0x0006_a05a);
    for case in 0..2 {
        let e = rng.range(0.0005, 0.002);
        let f = e * rng.range(1.3, 2.2);
        let machine = Machine::new(&format!("maxrate{case}"), 7)
            .tick_ns(1)
            .stack_kib(128)
            .times(six([
                (0.001, f),
                (0.0, 0.0),
                (0.0, 0.0),
                (0.0, 0.0),
                (0.05, f / 4.0),
                (0.0, e),
            ]))
            .write(&dir.join(format!("m{case}.toml")));
        let place = dir.join(format!("pairs{case}.txt"));
        let mut senders = [1, 2, 4, 8];
        for i in (1..4).rev() {
            senders.swap(i, rng.below(i + 1));
        }
        let lines: Vec<String> = (0..4)
            .map(|m| format!("{} {}", senders[m], 16 + 32 * m))
            .collect();
        std::fs::write(&place, lines.join("\n")).expect("placement file");
        let doc = run_json(
            &dir.join(format!("r{case}.json")),
            &[
                "bandwidth",
                "--backend",
                "sim",
                "--sim-config",
                machine.to_str().expect("UTF-8"),
                "--placement",
                place.to_str().expect("UTF-8"),
                "--pairs",
                "1..4:+1",
                "--window",
                "256",
                "--sizes",
                "4K,16K,64K",
                "--npp",
                "1",
                "--trials",
                "3",
                "--warmup",
                "1",
                "--samples",
                "1000",
            ],
        );
        assert_eq!(doc["points"].as_array().map(Vec::len), Some(12));
        let fit = &doc["max_rate"][0];
        let rb = fit["r_b_mb_s"].as_f64().expect("R_b");
        let rn = fit["r_n_mb_s"].as_f64().expect("R_N");
        let (want_b, want_n) = (1.0 / f, 1.0 / e);
        assert!(
            (rb / want_b - 1.0).abs() < 0.03,
            "case {case}: R_b {rb} vs {want_b}"
        );
        assert!(
            (rn / want_n - 1.0).abs() < 0.03,
            "case {case}: R_N {rn} vs {want_n}"
        );
        let k_star = fit["k_star"].as_f64().expect("k*");
        assert!(
            (k_star / (f / e) - 1.0).abs() < 0.05,
            "case {case}: k* {k_star}"
        );
        assert_eq!(doc["points"][11]["sweep"]["pairs"], 4);
    }
}

/// A sweep of windows and pairs: a point per size, window and number of pairs, each recording
/// where it lies; the report's window profile; the three plots of pairs.
#[test]
fn a_sweep_of_windows_and_pairs_keeps_every_step() {
    let dir = tmpdir("pairs-sweep");
    let j = dir.join("r.json");
    let doc = run_json(
        &j,
        &quick(&[
            "bandwidth",
            "--backend",
            "sim",
            "--sim-config",
            "generic",
            "--window",
            "1..8",
            "--pairs",
            "1,2",
            "--sizes",
            "256",
            "--npp",
            "2",
        ]),
    );
    let points = doc["points"].as_array().expect("points");
    let at: Vec<(u64, u64)> = points
        .iter()
        .map(|p| {
            let s = &p["sweep"];
            (
                s["pairs"].as_u64().unwrap_or(0),
                s["window"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let want: Vec<(u64, u64)> = [1, 2]
        .iter()
        .flat_map(|&k| [1, 2, 4, 8].map(|w| (k, w)))
        .collect();
    assert_eq!(at, want);
    for p in points {
        let k = p["sweep"]["pairs"].as_u64().expect("pairs");
        assert_eq!(
            p["pair_trial_ns"].as_array().map(|v| v.len() as u64),
            Some(k)
        );
        assert_eq!(p["trips_per_iteration"], p["sweep"]["window"]);
    }
    let path = j.to_str().expect("UTF-8");
    let report = run(&["report", path]);
    assert_ok(&report);
    assert!(
        stdout(&report).contains("window profile over sim, 2 pairs"),
        "{}",
        stdout(&report)
    );
    for kind in ["aggregate", "message-rate", "window"] {
        let svg = dir.join(format!("{kind}.svg"));
        let o = run(&[
            "plot",
            path,
            "--kind",
            kind,
            "-o",
            svg.to_str().expect("UTF-8"),
        ]);
        assert_ok(&o);
        let text = std::fs::read_to_string(&svg).expect("the plot");
        assert!(
            text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"),
            "{kind}"
        );
        assert!(text.matches("class=\"marker\"").count() >= 4, "{kind}");
    }
    for (args, needle) in [
        (vec!["bandwidth", "--window", "0,4"], "--window 0,4"),
        (vec!["bandwidth", "--window", "1,70000"], "--window 70000"),
        (vec!["bandwidth", "--pairs", "2,0"], "--pairs 2,0"),
    ] {
        assert_usage_error(&args, needle);
    }
}
