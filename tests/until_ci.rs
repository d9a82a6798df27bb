//! `--until-ci`: a size's trials run in blocks until the distribution-free interval of its
//! median is narrow enough, or until a bound, which the document and the report say. The
//! randomized check replays the stopping rule from the trials the document holds: every size
//! stopped at the first block whose interval was within the asked width, or at its bound with
//! a wider one, on simulated machines with hop jitter drawn at random (so widths differ from
//! size to size and machine to machine), at random widths and coverages.

use commbench::analysis::document::{ResultDoc, RunConfig};
use commbench::core::method::allpairs::RawMode;
use commbench::core::method::until::{Bound, Outcome, UntilCi};
use commbench::core::method::{MethodConfig, NppChoice, PatternKind};
use commbench::core::stats::{self, Xoshiro256};
use commbench_sim::SimConfig;

use crate::common;
use common::inprocess::sim_document;
use common::machine::{line, Machine};
use common::*;

/// The document of a ping-pong on `machine` at `sizes` with a fixed `npp`, measured under
/// `rule` with at most `max` trials a size (one warm-up round, a short clock
/// characterisation).
fn pingpong_until(
    machine: &SimConfig,
    (sizes, npp): (Vec<u64>, u64),
    max: u64,
    rule: UntilCi,
) -> ResultDoc {
    let method = MethodConfig {
        sizes,
        trials: max,
        warmup: 1,
        npp: NppChoice::Fixed(npp),
        timer_samples: 1000,
        until: Some(rule),
        ..MethodConfig::default()
    };
    sim_document(machine, PatternKind::PingPong, method, RunConfig::default())
}

/// The interval's half-width over the median, as the point's own statistics give it.
fn width(trial_ns: &[i64], level: f64) -> f64 {
    let mut v: Vec<f64> = trial_ns.iter().map(|&t| t as f64).collect();
    stats::sort_samples(&mut v);
    let (lo, hi) = stats::median_ci_ranks_at(v.len() as u64, level).unwrap();
    let m = stats::median(&v).unwrap();
    (m - v[lo as usize]).max(v[hi as usize] - m) / m
}

/// The trial counts after each block of `rule` with at most `max` trials.
fn block_ends(rule: &UntilCi, max: u64) -> Vec<u64> {
    let (mut done, mut ends) = (0, Vec::new());
    while done < max {
        done += rule.next_block(done, max);
        ends.push(done);
    }
    ends
}

/// Every point of `doc` stopped where `rule` says: at the first block end whose trials'
/// interval is within `rule.rel`, or at `max` trials with every block end wider.
fn stopped_where_the_rule_says(doc: &ResultDoc, rule: &UntilCi, max: u64, what: &str) {
    assert_eq!(doc.status, "complete", "{what}: {:?}", doc.error);
    assert!(!doc.points.is_empty(), "{what}");
    for p in &doc.points {
        let u = p
            .until_ci
            .as_ref()
            .unwrap_or_else(|| panic!("{what}: no until_ci"));
        let ends = block_ends(rule, max);
        let first_narrow = ends.iter().position(|&n| {
            n <= p.trials && width(&p.trial_ns[..n as usize], rule.level) <= rule.rel
        });
        let at = format!("{what}, {} B: {} trials, {u:?}", p.size, p.trials);
        match first_narrow {
            Some(i) => {
                assert_eq!(
                    p.trials, ends[i],
                    "{at}: the first narrow block was {}",
                    ends[i]
                );
                assert_eq!((u.outcome, u.bound), (Outcome::Converged, None), "{at}");
                assert!(
                    p.warnings().iter().all(|w| !w.contains("did_not_converge")),
                    "{at}"
                );
            }
            None => {
                assert_eq!(p.trials, max, "{at}");
                assert_eq!(u.outcome, Outcome::DidNotConverge, "{at}");
                assert_eq!(u.bound, Some(Bound::MaxTrials), "{at}");
                assert!(u.half_width_rel > rule.rel, "{at}");
                let w = p.warnings().join(" ");
                assert!(
                    w.contains("did_not_converge") && w.contains("most trials"),
                    "{at}: {w}"
                );
            }
        }
        assert_eq!(
            u.checks as usize,
            ends.iter().take_while(|&&n| n <= p.trials).count(),
            "{at}"
        );
        let w = width(&p.trial_ns, rule.level);
        assert!(
            (w - u.half_width_rel).abs() <= 1e-9 * w.max(1.0),
            "{at}: width {w}"
        );
        assert_eq!(p.trial_start_ns.len(), p.trial_ns.len(), "{at}");
    }
}

#[test]
fn sizes_stop_at_the_first_block_narrow_enough_or_at_their_bound() {
    let mut rng = Xoshiro256::new(0x0c1_5709);
    let cases = scale::cases(8, 200);
    let (mut converged, mut not) = (0, 0);
    for case in 0..cases {
        let u = |rng: &mut Xoshiro256, lo: f64, hi: f64| rng.range(lo, hi);
        // Hop times of 1 to 20 us with a jitter of up to three hops' worth: from nearly
        // exact to wide and flat distributions.
        let e = u(&mut rng, 1.0, 20.0);
        let jitter = (u(&mut rng, 0.0, 3.0) * e * 1000.0) as u64;
        let machine = Machine::new(&format!("until-{case}"), 1)
            .set_times(|t| {
                t.e = line(e, u(&mut rng, 0.0, 0.01));
                t.f = line(u(&mut rng, 0.1, 3.0), 0.0);
            })
            .jitter(jitter, rng.next_u64())
            .config();
        let level = [0.9, 0.95, 0.99][rng.below(3)];
        let rule = UntilCi {
            min_trials: 8 + rng.below(60) as u64,
            ..UntilCi::new(u(&mut rng, 0.002, 0.05), level)
        };
        let max = rule.min_trials + rng.below(600) as u64;
        let sizes = vec![8, 1 + rng.below(4096) as u64];
        let npp = 1 + rng.below(3) as u64;
        let doc = pingpong_until(&machine, (sizes, npp), max, rule.clone());
        let what = format!("case {case}: jitter {jitter} ns, E {e:.2} us, {rule:?}, max {max}");
        stopped_where_the_rule_says(&doc, &rule, max, &what);
        for p in &doc.points {
            match p.until_ci.as_ref().map(|u| u.outcome) {
                Some(Outcome::Converged) => converged += 1,
                _ => not += 1,
            }
        }
    }
    // Both endings were drawn: the check saw sizes converge and sizes run out.
    assert!(converged > 0 && not > 0, "{converged} converged, {not} not");
}

#[test]
fn the_run_s_time_leaves_later_sizes_their_first_block_marked_as_such() {
    // A bound of 1 ns on the run's time is spent before the first check: with jitter no
    // size is narrow enough after its first block, so each stops there, marked.
    let machine = Machine::new("until-run", 1).jitter(40_000, 7).config();
    let rule = UntilCi {
        min_trials: 10,
        run_ns: Some(1),
        ..UntilCi::new(0.0001, 0.95)
    };
    let doc = pingpong_until(&machine, (vec![8, 64, 512], 1), 1000, rule);
    assert_eq!(doc.status, "complete", "{:?}", doc.error);
    for p in &doc.points {
        let u = p.until_ci.as_ref().unwrap();
        assert_eq!(p.trials, 10, "{} B", p.size);
        assert_eq!(
            (u.outcome, u.bound),
            (Outcome::DidNotConverge, Some(Bound::RunTime))
        );
        assert!(p.warnings().join(" ").contains("the run's most time"));
    }
}

#[test]
fn the_command_line_reports_each_size_s_trials_and_marks_those_that_did_not_converge() {
    let dir = tmpdir("until-cli");
    let m = Machine::new("until-cli", 1)
        .jitter(30_000, 3)
        .write(&dir.join("m.toml"));
    let j = dir.join("r.json");
    let o = run(&[
        "pingpong",
        "--backend",
        "sim",
        "--sim-config",
        m.to_str().unwrap(),
        "--sizes",
        "8,1K",
        "--until-ci",
        "0.01%,99%",
        "--min-trials",
        "20",
        "--max-trials",
        "60",
        "--warmup",
        "1",
        "--samples",
        "1000",
        "--json",
        j.to_str().unwrap(),
    ]);
    assert_ok(&o);
    let text = stdout(&o);
    assert!(text.contains("trials"), "{text}");
    assert!(
        text.contains("did_not_converge: the 99% interval of the median is"),
        "{text}"
    );
    let doc = read_json(&j);
    let rel = doc["config"]["until"]["rel"].as_f64().unwrap();
    assert!((rel - 1e-4).abs() < 1e-12, "{rel}");
    assert_eq!(doc["config"]["until"]["level"], 0.99);
    assert_eq!(doc["config"]["trials"], 60);
    for p in doc["points"].as_array().unwrap() {
        assert_eq!(p["until_ci"]["outcome"], "did_not_converge", "{p}");
        assert_eq!(p["until_ci"]["bound"], "max_trials");
        assert_eq!(p["trials"], 60);
    }
}

#[test]
fn bounds_without_the_rule_and_rules_that_cannot_work_are_usage_errors() {
    let sim = ["pingpong", "--backend", "sim"];
    let with = |extra: &[&'static str]| [&sim[..], extra].concat();
    for (extra, needle) in [
        (
            &["--min-trials", "10"][..],
            "--min-trials bounds --until-ci",
        ),
        (&["--max-time", "10s"], "--max-time bounds --until-ci"),
        (
            &["--until-ci", "1%", "--trials", "50"],
            "--trials fixes the count",
        ),
        (&["--until-ci", "0%"], "must be above 0"),
        (&["--until-ci", "1"], "below 1"),
        (&["--until-ci", "1%,100%"], "coverage"),
        (&["--until-ci", "1%,99%,3"], "at most two values"),
        (&["--until-ci", "1%", "--min-trials", "5"], "below 6"),
        (&["--until-ci", "1%,99%", "--min-trials", "7"], "below 8"),
        (
            &[
                "--until-ci",
                "1%",
                "--min-trials",
                "50",
                "--max-trials",
                "20",
            ],
            "at most 20",
        ),
        (&["--until-ci", "1%", "--max-time", "3d"], "unknown unit"),
        (&["--until-ci", "1%", "--max-time", ","], "no time given"),
        (&["--until-ci", "1%", "--max-trials", "0"], "--max-trials 0"),
    ] {
        assert_usage_error(&with(extra), needle);
    }
    // Seed 001's commands count repetitions.
    assert_usage_error(
        &[
            "overhead",
            "--backend",
            "sim",
            "--until-ci",
            "1%",
            "--repetitions",
            "9",
        ],
        "--repetitions fixes the count",
    );
}

/// The interval `(lo, hi)` at `level` of the median of `trial_ns`, as the rule computes it.
fn interval(trial_ns: &[i64], level: f64) -> (i64, i64) {
    let mut v = trial_ns.to_vec();
    v.sort_unstable();
    let (lo, hi) = stats::median_ci_ranks_at(v.len() as u64, level).unwrap();
    (v[lo as usize], v[hi as usize])
}

#[test]
fn all_pairs_cells_stop_once_their_interval_leaves_the_threshold_and_borderline_ones_run_on() {
    use commbench::analysis::allpairs::Rule;
    use commbench::core::method::allpairs::AllPairsConfig;
    use commbench_sim::Fault;
    let mut rng = Xoshiro256::new(0xa11_9a125);
    let (mut kinds, mut with_threshold) = (std::collections::BTreeSet::new(), 0);
    for case in 0..scale::cases(3, 40) {
        let u = |rng: &mut Xoshiro256, lo: f64, hi: f64| rng.range(lo, hi);
        let dims = 2 + rng.below(2) as u32;
        let machine = Machine::new(&format!("until-ap-{case}"), dims)
            .jitter((u(&mut rng, 0.0, 2.0) * 1000.0) as u64, rng.next_u64())
            .fault(Fault::SlowNode {
                node: rng.below(1 << dims) as u32,
                factor: u(&mut rng, 1.0, 2.5),
                from_us: None,
                until_us: None,
            })
            .config();
        let rule = UntilCi {
            min_trials: 8 + rng.below(30) as u64,
            ..UntilCi::new(u(&mut rng, 0.002, 0.05), [0.9, 0.95, 0.99][rng.below(3)])
        };
        let max = rule.min_trials + rng.below(300) as u64;
        let factor = u(&mut rng, 1.05, 2.0);
        let method = MethodConfig {
            sizes: vec![8],
            trials: max,
            warmup: 1,
            npp: NppChoice::Fixed(1),
            timer_samples: 1000,
            until: Some(rule.clone()),
            ..MethodConfig::default()
        };
        // Every cell's trials, to check where each stopped.
        let config = AllPairsConfig {
            retest_trials: max,
            separate_factor: Some(factor),
            raw: RawMode::All,
            ..AllPairsConfig::default()
        };
        let rule_ap = Rule {
            min_factor: factor,
            ..Rule::default()
        };
        let doc = common::inprocess::sim_matrix_document(&machine, method, config, rule_ap);
        assert_eq!(doc.status, "complete", "{:?}", doc.error);
        let m = doc.allpairs.as_ref().unwrap();
        let ends = block_ends(&rule, max);
        for c in &m.cells {
            let s = c.until_ci.as_ref().expect("a cell's stopping");
            let what = format!("case {case}, cell {} -> {}: {s:?}", c.source, c.dest);
            let n = c.trial_ns.len() as u64;
            let per = 1000.0 * (c.npp * c.trips_per_iteration) as f64;
            let Some(t_us) = s.threshold_us else {
                kinds.insert("width");
                continue;
            };
            with_threshold += 1;
            let t = t_us * per;
            let apart = |k: u64| {
                let (lo, hi) = interval(&c.trial_ns[..k as usize], rule.level);
                (hi as f64) < t || (lo as f64) > t
            };
            let first = ends
                .iter()
                .position(|&k| k <= n && k >= rule.min_trials && apart(k));
            match first {
                Some(i) => {
                    assert_eq!(n, ends[i], "{what}");
                    assert_eq!(s.outcome, Outcome::Separated, "{what}");
                    kinds.insert("separated");
                }
                None => {
                    assert_eq!(n, max, "{what}");
                    let narrow = width(&c.trial_ns, rule.level) <= rule.rel;
                    let want = if narrow {
                        Outcome::Borderline
                    } else {
                        Outcome::DidNotConverge
                    };
                    assert_eq!(s.outcome, want, "{what}");
                    kinds.insert("borderline or wide");
                }
            }
        }
    }
    assert!(
        with_threshold > 0 && kinds.contains("separated"),
        "{kinds:?}"
    );
}

#[test]
fn the_all_pairs_report_says_how_its_cells_stopped() {
    let dir = tmpdir("until-ap-cli");
    let m = Machine::new("until-ap-cli", 2)
        .jitter(300, 9)
        .write(&dir.join("m.toml"));
    let o = run(&[
        "allpairs",
        "--backend",
        "sim",
        "--sim-config",
        m.to_str().unwrap(),
        "--sizes",
        "8",
        "--until-ci",
        "1%",
        "--min-trials",
        "20",
        "--max-trials",
        "200",
        "--warmup",
        "1",
        "--samples",
        "1000",
    ]);
    assert_ok(&o);
    let text = stdout(&o);
    let line = text
        .lines()
        .position(|l| l.contains("cells measured until their 95% interval decided them"))
        .unwrap_or_else(|| panic!("{text}"));
    let next = text.lines().nth(line + 1).unwrap();
    assert!(
        next.contains("within 1%") && next.contains("trials a cell"),
        "{text}"
    );
}
