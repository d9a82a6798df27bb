//! `commbench bandwidth --pairs K` as a user runs it: every pair's samples and the three
//! aggregates in the result document, the placement and the hosts in its `pairs` section, the
//! text report, and the usage errors. On the simulator, pairs that share nothing add up to
//! exactly K times one pair, every aggregate alike; on tcp only the structure is checked (no
//! timing: the machine is noisy).

mod common;

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
