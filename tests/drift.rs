//! Drift over a point's trials on simulated machines with known ground truth
//! (docs/methodology.md §4a): random machines (every time drawn around a preset's, a random
//! cube, clock tick, hop jitter, pair and message size) are measured three times, without a
//! fault, with a fault throughout, and with the same fault from (a slow-down) or until (a
//! warm-up) a virtual time drawn at random among the trials. The change must be found within
//! one block of the first trial that started at or after that time, and classified; the runs
//! without a change must be steady. `COMMBENCH_TEST_SCALE=full` runs the full count;
//! `benches/drift_sim.sh` runs many sets of it in release and reports the rates.

#![cfg(feature = "sim")]

use commbench::analysis::document::{Point, ResultDoc, RunConfig};
use commbench::analysis::steady::{DropWarmup, SteadyClass, BLOCK_TRIALS, REL_FLOOR};
use commbench::core::method::{MethodConfig, PatternKind};
use commbench_sim::{route, Fault, Linear, Piece, SimConfig, Times};

use crate::common;
use common::inprocess::{sim_document_clocked, trial_clock};
use common::machine::Machine;
use common::scale;

use commbench::core::stats::Xoshiro256 as Rng;

/// `l` with each section's coefficients multiplied by a factor drawn from 0.5 to 2.
fn around(r: &mut Rng, l: &Linear) -> Linear {
    let pieces = l
        .pieces()
        .iter()
        .map(|p| Piece {
            from: p.from,
            base_us: p.base_us * r.log_range(0.5, 2.0),
            per_byte_us: p.per_byte_us * r.log_range(0.5, 2.0),
        })
        .collect();
    Linear::new(pieces).expect("scaled sections stay valid")
}

/// One machine drawn at random and the ping-pong measured on it.
struct Case {
    machine: Machine,
    src: u32,
    dst: u32,
    size: u64,
    trials: u64,
    what: String,
}

/// A cube of 2 to 8 nodes with the six times of `generic` or `ncube7` each scaled by 0.5 to
/// 2, a clock tick of a tenth to twice the preset's, hop jitter up to E (or none), a pair
/// and a size drawn at random.
fn random_case(r: &mut Rng, seed: u64, trials: u64) -> Case {
    let preset = ["generic", "ncube7"][r.below(2)];
    let base = SimConfig::preset(preset).expect("a preset");
    let t = &base.times;
    let times = Times {
        f: around(r, &t.f),
        s: around(r, &t.s),
        r: around(r, &t.r),
        a: around(r, &t.a),
        u: around(r, &t.u),
        e: around(r, &t.e),
    };
    let dims = 1 + r.below(3) as u32;
    let nodes = 1usize << dims;
    let src = r.below(nodes) as u32;
    let dst = (src as usize + 1 + r.below(nodes - 1)) as u32 % nodes as u32;
    let size = [0u64, 8, 1000, 20_000][r.below(4)];
    let tick = ((base.tick_ns as f64 * r.log_range(0.1, 2.0)).round() as u64).max(1);
    let jitter = if r.unit() < 0.3 {
        0
    } else {
        (times.e.ns(size) as f64 * r.range(0.0, 1.0)) as u64
    };
    let machine = Machine::preset(preset)
        .name("drift")
        .dimensions(dims)
        .times(times)
        .tick_ns(tick)
        .jitter(jitter, seed);
    let what = format!(
        "seed {seed}: {preset}-like {dims}-cube, tick {tick} ns, jitter {jitter} ns, \
         {src} -> {dst}, {size} B, {trials} trials"
    );
    Case {
        machine,
        src,
        dst,
        size,
        trials,
        what,
    }
}

/// A fault drawn at random that slows `src <-> dst` by 1.1 to 4: either node, a link of the
/// route, or the dimension of one of its hops; throughout (`window` (None, None)) or in it.
fn drift_fault(r: &mut Rng, c: &Case, window: (Option<f64>, Option<f64>)) -> Fault {
    let factor = r.log_range(1.1, 4.0);
    let path = route(c.src, c.dst);
    let hop = r.below(path.len() - 1);
    let (from_us, until_us) = window;
    match r.below(3) {
        0 => Fault::SlowNode {
            node: [c.src, c.dst][r.below(2)],
            factor,
            from_us,
            until_us,
        },
        1 => Fault::SlowLink {
            from: path[hop],
            to: path[hop + 1],
            factor,
            from_us,
            until_us,
        },
        _ => Fault::SlowDimension {
            dimension: (path[hop] ^ path[hop + 1]).trailing_zeros(),
            factor,
            from_us,
            until_us,
        },
    }
}

/// The ping-pong of `c` on `machine`: its one point, the virtual time its first trial
/// started, and the document.
fn measure(c: &Case, machine: &Machine, drop: DropWarmup) -> (Point, u64, ResultDoc) {
    let method = MethodConfig {
        sizes: vec![c.size],
        trials: c.trials,
        warmup: 10,
        timer_samples: 1000,
        source: c.src,
        dest: c.dst,
        ..MethodConfig::default()
    };
    let config = RunConfig {
        drop_warmup: drop,
        ..RunConfig::default()
    };
    let (doc, reads) = sim_document_clocked(
        &machine.config(),
        PatternKind::PingPong,
        method,
        config,
        c.src,
    );
    assert_eq!(doc.status, "complete", "{}: {:?}", c.what, doc.error);
    let p = doc.points[0].clone();
    // Where its trials are on the virtual time line: the dropped ones first.
    let mut whole = p.clone();
    if let Some(d) = &p.warmup_dropped {
        whole.trial_ns = [d.trial_ns.clone(), p.trial_ns.clone()].concat();
        whole.trial_start_ns = [d.trial_start_ns.clone(), p.trial_start_ns.clone()].concat();
    }
    let t0 = trial_clock(&reads, &whole)
        .unwrap_or_else(|| panic!("{}: the trials are not among the clock readings", c.what));
    (whole, t0, doc)
}

/// The median and interquartile range of a point's trial times, ns.
fn median_iqr(p: &Point) -> (f64, f64) {
    let mut v: Vec<i64> = p.trial_ns.clone();
    v.sort_unstable();
    let q = |f: f64| v[((v.len() - 1) as f64 * f) as usize] as f64;
    (q(0.5), q(0.75) - q(0.25))
}

/// What one case found: whether its change was large enough to be held to the block, and
/// by how many trials it missed.
struct Found {
    checked: bool,
    off: Option<u64>,
    /// The engine measured the point anew after npp was estimated again.
    renewed: bool,
    /// The class found for a change held to the block, and whether its warm-up was dropped.
    class: Option<SteadyClass>,
    dropped: bool,
}

/// One case: steady without the fault and with it throughout; the change found where the
/// windowed fault starts (or ends).
fn one_case(seed: u64, trials: u64) -> Found {
    let mut r = Rng::new(0xd21f7 + seed);
    let c = random_case(&mut r, seed, trials);
    let w = &c.what;
    let slow_down = r.unit() < 0.5;
    let fault = drift_fault(&mut r, &c, (None, None));
    let drop = if !slow_down && r.unit() < 0.5 {
        DropWarmup::Auto
    } else {
        DropWarmup::None
    };
    let (plain, t0_plain, doc) = measure(&c, &c.machine, DropWarmup::None);
    let (slow, t0_slow, _) = measure(
        &c,
        &c.machine.clone().fault(fault.clone()),
        DropWarmup::None,
    );
    for (p, which) in [(&plain, "without the fault"), (&slow, "with it throughout")] {
        let s = p.stationarity.as_ref().expect("tested");
        assert_eq!(s.class, SteadyClass::Steady, "{w}, {which}: {s:?}");
    }
    let (before, t0) = if slow_down {
        (&plain, t0_plain)
    } else {
        (&slow, t0_slow)
    };
    let (k, at_ns) = due_at(&mut r, before, t0);
    let n = c.trials as usize;
    let at_us = Some(at_ns as f64 / 1000.0);
    let window = if slow_down {
        (at_us, None)
    } else {
        (None, at_us)
    };
    let timed = windowed(&fault, window);
    let (p, t0, _) = measure(&c, &c.machine.clone().fault(timed.clone()), drop);
    let w = format!("{w}, {timed}");
    // The expected index: the first trial that started at or after the fault's bound.
    let due = p
        .trial_start_ns
        .iter()
        .position(|&s| t0 + s >= at_ns)
        .unwrap_or(n);
    let s = p.stationarity.as_ref().expect("tested");
    if !p.npp_rejected.is_empty() {
        // The trials after the change contradicted npp (more than twice faster or slower),
        // so the engine estimated it again and measured the point anew (docs/methodology.md
        // §3): every trial kept is after the change, and steady.
        assert_eq!(due, 0, "{w}: npp estimated again");
        assert_eq!(s.class, SteadyClass::Steady, "{w}: {s:?}");
        return Found {
            checked: false,
            off: None,
            renewed: true,
            class: None,
            dropped: false,
        };
    }
    assert_eq!(due, k, "{w}: the run before the bound is the probe's");
    // Held to the block when the shift is a practical change, well above the clock's step,
    // and larger than the spread of the trials either side.
    let ((m0, iqr0), (m1, iqr1)) = (median_iqr(&plain), median_iqr(&slow));
    let clock = doc.timer.as_ref().map_or(0.0, |t| t.resolution_ns);
    let shift = m1 - m0;
    let checked = shift >= 3.0 * REL_FLOOR * m0 && shift > 3.0 * clock && shift >= iqr0 + iqr1;
    let off = s.changes.first().map(|ch| ch.index.abs_diff(k as u64));
    if !checked {
        // A change too small to hold to the block may be missed, never invented elsewhere.
        assert!(s.changes.len() <= 1, "{w}: {s:?}");
        return Found {
            checked,
            off,
            renewed: false,
            class: None,
            dropped: false,
        };
    }
    held_to_the_block(&w, &c, &p, (k, slow_down, drop));
    Found {
        checked,
        off,
        renewed: false,
        class: Some(s.class),
        dropped: p.warmup_dropped.is_some(),
    }
}

/// `fault` applying only from (`window.0`) or until (`window.1`) a virtual time, us.
fn windowed(fault: &Fault, window: (Option<f64>, Option<f64>)) -> Fault {
    let (from_us, until_us) = window;
    match fault.clone() {
        Fault::SlowNode { node, factor, .. } => Fault::SlowNode {
            node,
            factor,
            from_us,
            until_us,
        },
        Fault::SlowLink {
            from, to, factor, ..
        } => Fault::SlowLink {
            from,
            to,
            factor,
            from_us,
            until_us,
        },
        Fault::SlowDimension {
            dimension, factor, ..
        } => Fault::SlowDimension {
            dimension,
            factor,
            from_us,
            until_us,
        },
        Fault::SlowSwitch { switch, factor, .. } => Fault::SlowSwitch {
            switch,
            factor,
            from_us,
            until_us,
        },
        Fault::SlowUplink { switch, factor, .. } => Fault::SlowUplink {
            switch,
            factor,
            from_us,
            until_us,
        },
        Fault::SlowSwitchPair {
            switch,
            other,
            factor,
            ..
        } => Fault::SlowSwitchPair {
            switch,
            other,
            factor,
            from_us,
            until_us,
        },
    }
}

/// The trial `k` a change is due at (a block or more from either end), and a virtual time
/// (ns) before it: after the previous trial started, at or before it starts, on the machine
/// as it is until then (`before`, whose first trial started at `t0`).
fn due_at(r: &mut Rng, before: &Point, t0: u64) -> (usize, u64) {
    let n = before.trial_start_ns.len();
    let k = BLOCK_TRIALS as usize + r.below(n - 2 * BLOCK_TRIALS as usize);
    let (a, b) = (
        t0 + before.trial_start_ns[k - 1] + 1,
        t0 + before.trial_start_ns[k],
    );
    (k, a + r.below((b - a + 1) as usize) as u64)
}

/// A change large enough to hold to the block, due at trial `k` of `p`: found once within a
/// block of it, at its trial's start, classified (a late change as no steady state), its
/// levels in the right order, and a warm-up dropped under `drop`.
fn held_to_the_block(
    w: &str,
    c: &Case,
    p: &Point,
    (k, slow_down, drop): (usize, bool, DropWarmup),
) {
    let n = c.trials as usize;
    let s = p.stationarity.as_ref().expect("tested");
    assert_eq!(s.changes.len(), 1, "{w}: {s:?} (due at {k})");
    let ch = &s.changes[0];
    assert!(
        ch.index.abs_diff(k as u64) <= BLOCK_TRIALS,
        "{w}: found at {}, due at {k}",
        ch.index
    );
    assert_eq!(ch.at_ns, p.trial_start_ns[ch.index as usize], "{w}");
    let late = ((n - ch.index as usize) as f64) < 0.25 * n as f64;
    let want = match (late, slow_down) {
        (true, _) => SteadyClass::NoSteadyState,
        (false, true) => SteadyClass::SlowDown,
        (false, false) => SteadyClass::WarmUp,
    };
    assert_eq!(s.class, want, "{w}: {s:?}");
    let (lo, hi) = if slow_down {
        (ch.before_us, ch.after_us)
    } else {
        (ch.after_us, ch.before_us)
    };
    assert!(hi > lo, "{w}: {s:?}");
    // Under --drop-warmup auto a warm-up's leading trials are out of the statistics.
    let dropped = doc_dropped(c, p, drop, want);
    assert!(dropped, "{w}: {:?}", p.warmup_dropped);
}

/// Whether `p` (its trials joined again) dropped what `drop` says for a point of class
/// `class`.
fn doc_dropped(c: &Case, p: &Point, drop: DropWarmup, class: SteadyClass) -> bool {
    let s = p.stationarity.as_ref().expect("tested");
    match (drop, class, &p.warmup_dropped) {
        (DropWarmup::Auto, SteadyClass::WarmUp, Some(d)) => {
            d.trials == s.warmup_trials
                && d.trials == s.changes[0].index
                && p.trials + d.trials == c.trials
        }
        (_, _, None) => drop == DropWarmup::None || class != SteadyClass::WarmUp,
        _ => false,
    }
}

#[test]
fn drift_on_random_machines_is_found_within_a_block() {
    let cases = scale::cases(20, 200) as u64;
    // `benches/drift_sim.sh` runs other sets of machines: set N draws seeds from N x 10^5.
    let first = std::env::var("COMMBENCH_DRIFT_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(0, |s| s * 100_000);
    let (mut checked, mut small, mut small_found, mut renewed) = (0, 0, 0, 0);
    let mut offs = Vec::new();
    let mut classes = Vec::new();
    let mut dropped = 0;
    for seed in first..first + cases {
        let trials = if scale::full() {
            [1000, 2000, 5000][seed as usize % 3]
        } else {
            400 + 100 * (seed % 4)
        };
        let f = one_case(seed, trials);
        if f.renewed {
            renewed += 1;
        } else if f.checked {
            checked += 1;
            classes.extend(f.class);
            dropped += usize::from(f.dropped);
            offs.push(f.off.unwrap_or(u64::MAX));
        } else {
            small += 1;
            small_found += usize::from(f.off.is_some_and(|o| o <= BLOCK_TRIALS));
        }
    }
    offs.sort_unstable();
    let mean = offs.iter().sum::<u64>() as f64 / offs.len().max(1) as f64;
    println!(
        "drift: {cases} machines, {} runs without a change all steady; {checked} changes large \
         enough to hold to the block all found, {} trials from where they were due at most \
         ({mean:.2} on average, a block is {BLOCK_TRIALS}); of {small} smaller ones \
         {small_found} found within a block, none elsewhere; {renewed} measured anew after npp \
         was estimated again, all after the change and steady",
        2 * cases,
        offs.last().copied().unwrap_or(0),
    );
    assert!(
        2 * checked >= cases,
        "only {checked} of {cases} drawn changes were large enough to check"
    );
    // Both directions were drawn and found, and a warm-up was dropped.
    for c in [SteadyClass::SlowDown, SteadyClass::WarmUp] {
        assert!(classes.contains(&c), "no {} among {classes:?}", c.name());
    }
    assert!(dropped > 0, "no warm-up dropped");
}

#[test]
fn a_warmup_is_named_and_dropped_through_the_command_line() {
    let dir = common::tmpdir("drift-drop-warmup");
    // A generic 2-node machine whose node 0, the source, is 1.6 times slower for its first
    // 9 ms of virtual time: its 2000 trials start after about 3 ms and take some 10 us each.
    let m = Machine::new("warming", 1)
        .jitter(200, 3)
        .fault(Fault::SlowNode {
            node: 0,
            factor: 1.6,
            from_us: None,
            until_us: Some(9000.0),
        })
        .write(&dir.join("warming.toml"));
    let m = m.to_str().expect("UTF-8 path");
    let mut kept = Vec::new();
    for drop in ["none", "auto"] {
        let j = dir.join(format!("{drop}.json"));
        let doc = common::run_json(
            &j,
            &[
                "pingpong",
                "--backend",
                "sim",
                "--sim-config",
                m,
                "--trials",
                "2000",
                "--samples",
                "1000",
                "--drop-warmup",
                drop,
            ],
        );
        assert_eq!(doc["config"]["drop_warmup"], drop);
        let p = &doc["points"][0];
        let s = &p["stationarity"];
        assert_eq!(s["class"], "warm-up", "{s}");
        let k = s["warmup_trials"].as_u64().expect("warmup_trials");
        assert!((100..1500).contains(&k), "{s}");
        assert_eq!(s["changes"][0]["index"], k, "{s}");
        let d = &p["warmup_dropped"];
        let text = common::stdout(&common::run(&["report", j.to_str().unwrap()]));
        assert!(text.contains("nonstationary (warm-up)"), "{text}");
        if drop == "auto" {
            assert_eq!(d["trials"], k);
            assert_eq!(p["trials"].as_u64(), Some(2000 - k));
            assert_eq!(
                p["trial_ns"].as_array().map(Vec::len),
                Some(2000 - k as usize)
            );
            assert_eq!(d["trial_ns"].as_array().map(Vec::len), Some(k as usize));
            assert_eq!(d["until_ns"], p["trial_start_ns"][0]);
            assert!(text.contains(&format!("the first {k} trials")), "{text}");
            assert!(text.contains("were dropped from the statistics"), "{text}");
        } else {
            assert!(d.is_null(), "{d}");
            assert_eq!(p["trials"], 2000);
            assert!(text.contains("the statistics include the first"), "{text}");
        }
        kept.push(p["one_way_us"]["median"].as_f64().expect("median"));
    }
    // Without the warm-up the median is the steady state's: no slower.
    assert!(kept[1] <= kept[0], "{kept:?}");
    // All-pairs keeps no start times to test; a value that is not a choice is clap's error.
    common::assert_usage_error(
        &["allpairs", "--backend", "sim", "--drop-warmup", "auto"],
        "--drop-warmup auto",
    );
    common::assert_usage_error(&["pingpong", "--drop-warmup", "yes"], "--drop-warmup");
}
