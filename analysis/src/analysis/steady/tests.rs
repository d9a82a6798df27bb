//! The detector on synthetic sequences drawn at random: trials without a change of every
//! shape real transports give (heavy tails, two modes, rare large outliers, a coarse clock,
//! bursts) are called steady at a bounded rate; steps of random size, direction and place are
//! found within one block and classified.

use super::*;

use crate::analysis::testkit::scale;

use commbench_core::stats::Xoshiro256 as Rng;

/// The shapes of noise drawn.
const SHAPES: usize = 7;

/// A noise of shape `shape` around 1 with relative spread about `s` (its interquartile range
/// over its median is of the order of `s`), as a factor: lognormal, two modes (a second one
/// `1 + 3 s` times slower holding `weight` of the trials), a tight peak with 1 % of
/// trials 10 to 100 times slower, a shifted exponential, a shifted Pareto (tail index 1.5),
/// uniform, or none at all (a constant sequence).
struct Noise {
    shape: usize,
    s: f64,
    weight: f64,
}

impl Noise {
    /// A shape at random; two modes with the slower holding up to `weight` of the trials.
    fn draw(r: &mut Rng, s: f64, weight: f64) -> Self {
        Noise {
            shape: r.below(SHAPES),
            s,
            weight: r.range(0.05, weight),
        }
    }

    fn sample(&self, r: &mut Rng) -> f64 {
        let s = self.s;
        match self.shape {
            0 => (s * r.normal()).exp(),
            1 => {
                let base = 1.0 + 0.3 * s * r.normal();
                if r.unit() < self.weight {
                    base * (1.0 + 3.0 * s)
                } else {
                    base
                }
            }
            2 => {
                if r.unit() < 0.01 {
                    r.log_range(10.0, 100.0)
                } else {
                    1.0 + s * r.exponential()
                }
            }
            3 => 1.0 + s * r.exponential(),
            4 => 1.0 + s * (r.unit().powf(-1.0 / 1.5) - 1.0),
            5 => 1.0 + s * r.range(-1.0, 1.0),
            _ => 1.0,
        }
    }
}

/// A trial time of `level` ns times `factor`, on a clock of step `q` ns (1: exact ns).
fn tick(level: f64, factor: f64, q: i64) -> i64 {
    let t = (level * factor).round() as i64;
    (t / q).max(1) * q
}

/// `n` trials of `noise` around `base` ns whose level is multiplied by `steps[i].1` from
/// trial `steps[i].0` on, on a clock of step `q`.
fn sequence(
    r: &mut Rng,
    n: usize,
    base: f64,
    noise: &Noise,
    steps: &[(usize, f64)],
    q: i64,
) -> Vec<i64> {
    let mut level = base;
    let mut next = 0;
    (0..n)
        .map(|i| {
            while next < steps.len() && steps[next].0 == i {
                level *= steps[next].1;
                next += 1;
            }
            tick(level, noise.sample(r), q)
        })
        .collect()
}

/// Start times of `x`: each trial starts when the one before ended, plus 100 ns.
fn starts(x: &[i64]) -> Vec<u64> {
    let mut t = 0u64;
    x.iter()
        .map(|&d| {
            let s = t;
            t += d.max(0) as u64 + 100;
            s
        })
        .collect()
}

#[test]
fn too_few_or_unmatched_trials_are_not_judged() {
    assert_eq!(segments(&[5; 19], 1.0), None);
    assert!(stationarity(&[5; 30], &[0; 29], 2, 1.0).is_none());
    let s = stationarity(&[5; 30], &[0; 30], 2, 0.0).unwrap();
    assert_eq!(s.class, SteadyClass::Steady);
    assert!(s.changes.is_empty());
    // 5 ns a trial over 2 trips: 2.5 ns one way, 1 % of it the floor (no clock step here).
    assert!((s.floor_us - 2.5e-5).abs() < 1e-12, "{}", s.floor_us);
    assert_eq!(stationarity_warning(&s, None), None);
}

#[test]
fn a_step_by_hand() {
    // 100 trials at 1000 ns then 100 at 1500 ns, a few ns of noise.
    let x: Vec<i64> = (0..200)
        .map(|i| if i < 100 { 1000 } else { 1500 } + (i * 7 % 5))
        .collect();
    let t = starts(&x);
    let s = stationarity(&x, &t, 2, 1.0).unwrap();
    assert_eq!(s.changes.len(), 1, "{s:?}");
    let c = &s.changes[0];
    assert_eq!(c.index, 100);
    assert_eq!(c.at_ns, t[100]);
    assert!((c.before_us - 0.501).abs() < 0.002, "{c:?}");
    assert!((c.after_us - 0.751).abs() < 0.002, "{c:?}");
    assert!(c.z > 5.0, "{c:?}");
    assert_eq!(s.class, SteadyClass::SlowDown);
    let w = stationarity_warning(&s, None).unwrap();
    assert!(
        w.starts_with("nonstationary (slow-down): the one-way time changed at trial 100 (")
            && w.contains("from 0.501 us to 0.751 us (+50%)"),
        "{w}"
    );
    // The same the other way round is a warm-up; in the last quarter, no steady state.
    let y: Vec<i64> = x.iter().rev().copied().collect();
    let s = stationarity(&y, &starts(&y), 2, 1.0).unwrap();
    assert_eq!(s.class, SteadyClass::WarmUp);
    assert_eq!(warmup_to_drop(Some(&s), DropWarmup::Auto), 100);
    assert_eq!(warmup_to_drop(Some(&s), DropWarmup::None), 0);
    let mut late = vec![1000i64; 170];
    late.extend([3000; 30]);
    let s = stationarity(&late, &starts(&late), 1, 1.0).unwrap();
    assert_eq!(s.class, SteadyClass::NoSteadyState);
    assert_eq!(s.changes[0].index, 170);
    assert_eq!(warmup_to_drop(Some(&s), DropWarmup::Auto), 0);
    assert!(stationarity_warning(&s, None)
        .unwrap()
        .contains("no steady state was reached"));
}

#[test]
fn classes_of_several_changes() {
    let seg = |starts: Vec<usize>, levels: Vec<f64>| Segments {
        z: vec![9.0; starts.len() - 1],
        starts,
        levels,
        quantum: 1.0,
        n: 1000,
    };
    // Slower, then faster, then as fast as the first: a warm-up (nothing before is faster),
    // with no leading trials slower than the steady state to drop.
    let s = seg(vec![0, 100, 300], vec![1000.0, 2000.0, 1005.0]);
    assert_eq!(s.class(), SteadyClass::WarmUp);
    assert_eq!(s.warmup_trials(), 0);
    // Two slower segments, then the steady state: both are the warm-up.
    let s = seg(vec![0, 100, 300], vec![3000.0, 2000.0, 1000.0]);
    assert_eq!((s.class(), s.warmup_trials()), (SteadyClass::WarmUp, 300));
    // Slower, as fast, slower, as fast: only the first is.
    let s = seg(vec![0, 100, 300, 400], vec![3000.0, 1002.0, 2000.0, 1000.0]);
    assert_eq!((s.class(), s.warmup_trials()), (SteadyClass::WarmUp, 100));
    // The last is slower than the first by more than the floor: a slow-down.
    let s = seg(vec![0, 100, 300], vec![1000.0, 2000.0, 1100.0]);
    assert_eq!(s.class(), SteadyClass::SlowDown);
    assert_eq!(s.warmup_trials(), 0);
    // A last segment of less than a quarter: no steady state, whatever came before.
    let s = seg(vec![0, 100, 800], vec![2000.0, 1500.0, 1000.0]);
    assert_eq!(s.class(), SteadyClass::NoSteadyState);
    assert_eq!(
        seg(vec![0], vec![1000.0]).class(),
        SteadyClass::Steady,
        "no change"
    );
}

/// Whether the sequences drawn at random without a change are called steady: the share
/// flagged, and the first one flagged.
fn false_positives(seeds: u64, max_n: usize, burst: bool) -> (usize, Option<String>) {
    let mut flagged = 0;
    let mut first = None;
    for seed in 0..seeds {
        let mut r = Rng::new(0xd1f7 + seed);
        let n = r.log_range(MIN_TRIALS as f64, max_n as f64) as usize;
        let s = r.log_range(1e-3, 1.0);
        let noise = Noise::draw(&mut r, s, 0.6);
        let base = r.log_range(100.0, 1e7);
        let q = if r.unit() < 0.3 {
            (base * r.log_range(1e-3, 0.05)).max(1.0) as i64
        } else {
            1
        };
        let mut x = sequence(&mut r, n, base, &noise, &[], q);
        if burst {
            // Slow trials in runs: each trial repeats the one before with probability rho.
            let rho = r.range(0.0, 0.5);
            for i in 1..n {
                if r.unit() < rho {
                    x[i] = x[i - 1];
                }
            }
        }
        let s = stationarity(&x, &starts(&x), 2, q as f64).unwrap();
        if s.nonstationary() {
            flagged += 1;
            first.get_or_insert(format!(
                "seed {seed}: n {n}, shape {}, s {:.4}, q {q}: {s:?}",
                noise.shape, noise.s
            ));
        }
    }
    (flagged, first)
}

#[test]
fn sequences_without_a_change_are_steady() {
    let seeds = scale::cases(300, 3000) as u64;
    let max_n = if scale::full() { 100_000 } else { 4000 };
    let (flagged, first) = false_positives(seeds, max_n, false);
    println!(
        "steady: {flagged} of {seeds} sequences without a change ({MIN_TRIALS} to {max_n} \
         trials, seven shapes of noise) flagged"
    );
    // ALPHA is 1e-3 a point, and the test is conservative: at most one in 300.
    assert!(
        flagged as f64 <= (seeds as f64 / 300.0).max(1.0),
        "{flagged} of {seeds} flagged; first {first:?}"
    );
}

#[test]
fn bursts_without_a_change_are_rarely_flagged() {
    // Runs of equal trials (a lag-1 autocorrelation up to 0.5): the correction for
    // dependence keeps these at the level of independent trials, within a few per cent.
    let seeds = scale::cases(200, 2000) as u64;
    let max_n = if scale::full() { 50_000 } else { 4000 };
    let (flagged, first) = false_positives(seeds, max_n, true);
    println!(
        "bursts: {flagged} of {seeds} sequences without a change but with runs of equal \
         trials flagged"
    );
    assert!(
        flagged as f64 <= 0.02 * seeds as f64,
        "{flagged} of {seeds} flagged; first {first:?}"
    );
}

/// One step drawn at random: the trials, where it is, by what factor.
struct Step {
    x: Vec<i64>,
    q: i64,
    at: usize,
    factor: f64,
    what: String,
}

/// A step of `factor` (1.2 to 3 times the floor up to a factor 3, either way) at a random
/// trial at least `margin` from either end, in noise whose spread is at most half the
/// shift (and at most half its excess over the floor, so that the medians either side stay
/// a change), on an exact or a coarse clock (the shift at least four clock steps). Of two
/// modes the slower holds at most a quarter of the trials, so that the medians stay in the
/// faster one.
fn draw_step(seed: u64, max_n: usize, margin: usize) -> Step {
    let mut r = Rng::new(0x57e9 + seed);
    let n = r.log_range((4 * margin) as f64, max_n as f64) as usize;
    let at = margin + r.below(n - 2 * margin + 1);
    let size = if r.unit() < 0.3 {
        REL_FLOOR * r.range(1.2, 3.0)
    } else {
        r.log_range(REL_FLOOR * 1.2, 2.0)
    };
    let factor = if r.unit() < 0.5 {
        1.0 + size
    } else {
        1.0 / (1.0 + size)
    };
    let spread = (size * r.log_range(0.01, 0.5)).min(0.5 * (size - REL_FLOOR));
    let noise = Noise::draw(&mut r, spread, 0.25);
    let base = r.log_range(1000.0, 1e7);
    // A clock step at most a quarter of the shift and 3 % of the faster level (npp makes a
    // trial last 50 steps or more).
    let (shift, low) = ((base * factor - base).abs(), base * factor.min(1.0));
    let q = if r.unit() < 0.3 {
        ((shift / 4.0).min(0.03 * low) * r.range(0.1, 1.0)).max(1.0) as i64
    } else {
        1
    };
    let x = sequence(&mut r, n, base, &noise, &[(at, factor)], q);
    Step {
        x,
        q,
        at,
        factor,
        what: format!(
            "seed {seed}: n {n}, step x{factor:.4} at {at}, shape {}, s {:.5}, q {q}",
            noise.shape, noise.s
        ),
    }
}

#[test]
fn steps_are_found_within_a_block_and_classified() {
    let seeds = scale::cases(300, 3000) as u64;
    let max_n = if scale::full() { 100_000 } else { 4000 };
    let mut offs = Vec::new();
    for seed in 0..seeds {
        let st = draw_step(seed, max_n, BLOCK_TRIALS as usize);
        let n = st.x.len();
        let s = stationarity(&st.x, &starts(&st.x), 1, st.q as f64).unwrap();
        let w = &st.what;
        assert_eq!(s.changes.len(), 1, "{w}: {s:?}");
        let c = &s.changes[0];
        assert!(
            c.index.abs_diff(st.at as u64) <= BLOCK_TRIALS,
            "{w}: found at {}",
            c.index
        );
        offs.push(c.index.abs_diff(st.at as u64));
        let late = ((n - c.index as usize) as f64) < STEADY_MIN_SHARE * n as f64;
        let want = match (late, st.factor > 1.0) {
            (true, _) => SteadyClass::NoSteadyState,
            (false, true) => SteadyClass::SlowDown,
            (false, false) => SteadyClass::WarmUp,
        };
        assert_eq!(s.class, want, "{w}: {s:?}");
        // The levels are the medians either side, to within the noise.
        let ratio = c.after_us / c.before_us;
        assert!(
            (ratio / st.factor - 1.0).abs() < 0.6 * (st.factor - 1.0).abs(),
            "{w}: levels {} -> {}",
            c.before_us,
            c.after_us
        );
    }
    offs.sort_unstable();
    println!(
        "steps: {seeds} steps of 1.2 % to a factor 3 found, {} trials from the true one at most, \
         {} at the 99th percentile, {:.2} on average (a block is {BLOCK_TRIALS})",
        offs[offs.len() - 1],
        offs[offs.len() * 99 / 100],
        offs.iter().sum::<u64>() as f64 / offs.len() as f64
    );
}

#[test]
fn short_separated_warmups_are_found() {
    // 15 to 60 trials at least twice as slow, then steady: found as a warm-up and dropped
    // under auto, at the right trial but for the first fast trials being outliers as slow
    // as the warm-up's median (1 % of the trials are 1.8 times slower in one shape).
    for seed in 0..scale::cases(100, 1000) as u64 {
        let mut r = Rng::new(0xa11 + seed);
        let k = 15 + r.below(46);
        let n = 4 * k + r.below(5000);
        let s = r.log_range(0.001, 0.2);
        let noise = Noise::draw(&mut r, s, 0.6);
        let slow = r.range(2.2, 10.0);
        let x: Vec<i64> = (0..n)
            .map(|i| {
                let f = if i < k { slow } else { 1.0 };
                tick(5000.0 * f, noise.sample(&mut r).clamp(0.9, 1.8), 1)
            })
            .collect();
        let s = stationarity(&x, &starts(&x), 2, 1.0).unwrap();
        assert_eq!(
            s.class,
            SteadyClass::WarmUp,
            "seed {seed}: k {k}, n {n}: {s:?}"
        );
        let at = warmup_to_drop(Some(&s), DropWarmup::Auto);
        assert!(
            at.abs_diff(k) <= 5,
            "seed {seed}: {s:?} {:?}",
            &x[k - 3..k + 5]
        );
        assert_eq!(at as u64, s.changes[0].index);
    }
}

#[test]
fn shifts_below_the_floor_are_not_changes() {
    // Half a per cent, in tight noise over many trials: significant, but not a change.
    let mut r = Rng::new(5);
    let n = 20_000;
    let x: Vec<i64> = (0..n)
        .map(|i| {
            let level = if i < n / 2 { 100_000.0 } else { 100_500.0 };
            (level * (1.0 + 0.001 * r.normal())) as i64
        })
        .collect();
    let s = stationarity(&x, &starts(&x), 2, 1.0).unwrap();
    assert_eq!(s.class, SteadyClass::Steady, "{s:?}");
    assert!((s.floor_us - 0.5).abs() < 0.01, "{}", s.floor_us);
    // A shift of one clock step, whatever its share, is not one either.
    let x: Vec<i64> = (0..400)
        .map(|i| if i < 200 { 1000 } else { 1100 } + 100 * (r.below(3) as i64))
        .collect();
    let s = stationarity(&x, &starts(&x), 1, 100.0).unwrap();
    assert_eq!(s.class, SteadyClass::Steady, "{s:?}");
}

#[test]
fn several_changes_are_all_found() {
    // Warm-up, steady, then a slow-down before the last quarter; and a staircase that
    // keeps changing to the end.
    for seed in 0..scale::cases(40, 400) as u64 {
        let mut r = Rng::new(0x5ca1 + seed);
        let n = 2000 + r.below(8000);
        let a = 100 + r.below(n / 8);
        let b = n / 3 + r.below(n / 3);
        let s = r.log_range(0.001, 0.05);
        let noise = Noise::draw(&mut r, s, 0.25);
        let x = sequence(&mut r, n, 20_000.0, &noise, &[(a, 0.5), (b, 1.3)], 1);
        let s = stationarity(&x, &starts(&x), 2, 1.0).unwrap();
        let found: Vec<u64> = s.changes.iter().map(|c| c.index).collect();
        assert_eq!(found.len(), 2, "seed {seed}: {a}, {b}: {s:?}");
        assert!(found[0].abs_diff(a as u64) <= BLOCK_TRIALS, "{found:?} {a}");
        assert!(found[1].abs_diff(b as u64) <= BLOCK_TRIALS, "{found:?} {b}");
        assert_eq!(s.class, SteadyClass::SlowDown, "seed {seed}");
        let w = stationarity_warning(&s, None).unwrap();
        assert!(w.contains("changed 2 times: at trial"), "{w}");
        // Six steps, the last in the last tenth: no steady state.
        let steps: Vec<(usize, f64)> = (1..=6).map(|i| (i * n / 7 + n / 14, 1.2)).collect();
        let x = sequence(&mut r, n, 20_000.0, &noise, &steps, 1);
        let s = stationarity(&x, &starts(&x), 2, 1.0).unwrap();
        assert_eq!(s.changes.len(), 6, "seed {seed}: {s:?}");
        assert_eq!(s.class, SteadyClass::NoSteadyState, "seed {seed}");
        let w = stationarity_warning(&s, None).unwrap();
        assert!(
            w.contains("changed 6 times") && w.contains("and 3 more"),
            "{w}"
        );
    }
}

#[test]
fn documents_round_trip_and_read_nan_as_null() {
    let s = Stationarity {
        class: SteadyClass::NoSteadyState,
        changes: vec![Change {
            index: 9000,
            at_ns: 123_456,
            before_us: 1.5,
            after_us: f64::NAN,
            z: 12.0,
        }],
        floor_us: 0.015,
        warmup_trials: 0,
    };
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["class"], "no-steady-state");
    assert!(v["changes"][0]["after_us"].is_null());
    let back: Stationarity = serde_json::from_value(v).unwrap();
    assert!(back.changes[0].after_us.is_nan());
    for (c, name) in [
        (SteadyClass::Steady, "steady"),
        (SteadyClass::WarmUp, "warm-up"),
        (SteadyClass::SlowDown, "slow-down"),
    ] {
        assert_eq!(serde_json::to_value(c).unwrap(), name);
        assert_eq!(c.name(), name);
    }
    assert_eq!(serde_json::to_value(DropWarmup::Auto).unwrap(), "auto");
    assert_eq!(time_words(850), "850 ns");
    assert_eq!(time_words(12_345), "12.3 us");
    assert_eq!(time_words(4_560_000), "4.56 ms");
    assert_eq!(time_words(7_890_000_000), "7.89 s");
}

#[test]
fn autocorrelated_noise_without_a_change_is_rarely_flagged() {
    // A first-order autoregression of the log time, lag-1 autocorrelation up to 0.9 (a slow
    // wander of the level as on a busy host), its spread 1 % to 50 %.
    let seeds = scale::cases(100, 1000) as u64;
    let max_n = if scale::full() { 20_000 } else { 4000 };
    let mut flagged = 0;
    for seed in 0..seeds {
        let mut r = Rng::new(0xa4 + seed);
        let n = r.log_range(MIN_TRIALS as f64, max_n as f64) as usize;
        let (rho, s) = (r.range(0.0, 0.9), r.log_range(0.01, 0.5));
        let mut e = 0.0;
        let x: Vec<i64> = (0..n)
            .map(|_| {
                e = rho * e + (1.0 - rho * rho).sqrt() * r.normal();
                (10_000.0 * (s * e).exp()) as i64
            })
            .collect();
        let st = stationarity(&x, &starts(&x), 2, 1.0).unwrap();
        flagged += usize::from(st.nonstationary());
    }
    println!("autoregressive: {flagged} of {seeds} sequences without a change flagged");
    assert!(
        flagged as f64 <= 0.01 * seeds as f64,
        "{flagged} of {seeds}"
    );
}
