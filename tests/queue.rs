//! Underwood & Brightwell's queue benchmarks (seed 004 §3) on the simulator, whose matcher
//! walks its queues in order at `match_ns_per_entry` a step: the pre-posted queue's slope
//! against the receives traversed is that cost, and the unexpected queue follows the model of
//! docs/seed004.md, on machines drawn at random besides hand-written ones.

use commbench::analysis::document::{Point, RunConfig};
use commbench::analysis::queue::{Against, QueueLine};
use commbench::core::method::queue::{QueueBench, QueueKind};
use commbench::core::method::{MethodConfig, NppChoice};
use commbench_sim::SimConfig;

use crate::common;
use common::inprocess::sim_document;
use common::machine::{six, Machine};

/// A small deterministic generator (splitmix64) for the machines drawn at random.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A machine of `dims` dimensions with the given per-message times (us) and matcher (ns).
fn machine(dims: u32, t: [f64; 6], c_ns: f64) -> SimConfig {
    let [f, s, r, a, u, e] = t;
    Machine::new("drawn", dims)
        .tick_ns(1)
        .clock_read_ns(25)
        .poll_ns(30)
        .stack_kib(128)
        .match_ns_per_entry(c_ns)
        .times(six([
            (f, 0.0004),
            (s, 0.0),
            (r, 0.0),
            (a, 0.0),
            (u, 0.0005),
            (e, 0.002),
        ]))
        .config()
}

/// A machine drawn at random: 1 to 4 dimensions, times from 0.1 to 4 us, a matcher from 20 to
/// 800 ns an entry.
fn drawn(rng: &mut Rng) -> SimConfig {
    let dims = 1 + (rng.next() % 4) as u32;
    let t = [(); 6].map(|_| (rng.range(0.1, 4.0) * 1000.0).round() / 1000.0);
    let c = (rng.range(20.0, 800.0) * 10.0).round() / 10.0;
    machine(dims, t, c)
}

/// Run `bench` on `m` with `npp` round trips per trial: its document's points and queue lines.
fn measure(
    m: &SimConfig,
    bench: QueueBench,
    sizes: &[u64],
    npp: u64,
) -> (Vec<Point>, Vec<QueueLine>) {
    let cfg = MethodConfig {
        sizes: sizes.to_vec(),
        trials: 3,
        warmup: 2,
        npp: NppChoice::Fixed(npp),
        timer_samples: 1000,
        ..MethodConfig::default()
    };
    let config = RunConfig {
        queue: Some(bench.clone()),
        ..RunConfig::default()
    };
    let doc = sim_document(m, bench, cfg, config);
    assert_eq!(doc.status, "complete", "{:?}", doc.error);
    let lines = doc.queue.expect("queue lines");
    (doc.points, lines)
}

fn posted(lengths: &[u64], pcts: &[u32], any_source: bool) -> QueueBench {
    QueueBench {
        kind: QueueKind::Posted,
        lengths: lengths.to_vec(),
        traversed_pct: pcts.to_vec(),
        any_source,
    }
}

/// The slope of every traversed line is c within 2 %, the untraversed line is flat, and every
/// point carries its queue.
fn check_posted(m: &SimConfig, any_source: bool) {
    let c = m.match_ns_per_entry;
    let (points, lines) = measure(
        m,
        posted(&[0, 40, 120, 300], &[0, 50, 100], any_source),
        &[8, 600],
        4,
    );
    assert_eq!(points.len(), 4 * 3 * 2);
    for p in &points {
        assert_eq!(p.pattern, "queue_posted");
        let (l, pct) = (p.queue_length.unwrap(), p.traversed_pct.unwrap());
        assert_eq!(p.traversed, Some(l * u64::from(pct) / 100));
    }
    for l in &lines {
        let all = l.all.as_ref().expect("a line");
        match l.against {
            Against::Traversed => assert!(
                (all.slope_ns_per_entry - c).abs() <= 0.02 * c,
                "{} B, {:?} %: {} ns per entry against c = {c} on {:?}",
                l.size,
                l.traversed_pct,
                all.slope_ns_per_entry,
                m
            ),
            Against::Length => assert!(
                all.slope_ns_per_entry.abs() <= 0.02 * c,
                "untraversed entries cost {} ns each on {:?}",
                all.slope_ns_per_entry,
                m
            ),
        }
    }
}

#[test]
fn posted_queue_slope_is_the_configured_cost_per_entry() {
    // Quadrics Elan3's 0.49 us per traversed entry (§5.1) on a fast machine, and a slow
    // matcher on a slow one.
    check_posted(&machine(2, [0.3, 0.2, 0.25, 0.1, 0.35, 1.1], 490.0), false);
    check_posted(&machine(4, [2.0, 1.5, 3.0, 0.5, 1.2, 2.0], 137.5), true);
    let mut rng = Rng(0x5eed_0004);
    for _ in 0..4 {
        let m = drawn(&mut rng);
        check_posted(&m, rng.next() % 2 == 0);
    }
}

#[test]
fn no_matching_cost_no_queue_effect() {
    let m = machine(3, [0.4, 0.3, 0.2, 0.15, 0.5, 0.9], 0.0);
    let (_, lines) = measure(&m, posted(&[0, 100, 400], &[0, 100], false), &[8], 4);
    for l in &lines {
        assert!(l.all.as_ref().unwrap().slope_ns_per_entry.abs() < 1e-6);
    }
}

/// docs/seed004.md §3: with `L` unexpected messages at each rank, the one-way time is
/// `max(T0, (F + S + A + R + U + c + L c) / 2)`: each rank's receive post walks the whole
/// queue, the two walks overlap each other and the transfer, so half of one walk shows per
/// message, and nothing while it hides behind the round trip.
fn unexpected_model(m: &SimConfig, n: u64, l: u64, t0_us: f64) -> f64 {
    let t = &m.times;
    let c = m.match_ns_per_entry;
    let k = (t.f.ns(n) + t.s.ns(n) + t.a.ns(n) + t.r.ns(n) + t.u.ns(n)) as f64 + c;
    t0_us.max((k + l as f64 * c) / 2000.0)
}

fn check_unexpected(m: &SimConfig) {
    let lengths = [0u64, 5, 20, 60, 150, 300, 500];
    let bench = QueueBench {
        kind: QueueKind::Unexpected,
        lengths: lengths.to_vec(),
        traversed_pct: Vec::new(),
        any_source: false,
    };
    let (points, lines) = measure(m, bench, &[8], 64);
    let t0 = points[0].one_way_us.median;
    for p in &points {
        let l = p.queue_length.unwrap();
        let want = unexpected_model(m, 8, l, t0);
        let got = p.one_way_us.median;
        assert!(
            (got - want).abs() <= 0.02 * want,
            "L = {l}: {got} us, model {want} us on {m:?}"
        );
    }
    let tail = lines[0].tail.as_ref().expect("a tail line");
    let half = m.match_ns_per_entry / 2.0;
    assert!(
        (tail.slope_ns_per_entry - half).abs() <= 0.02 * half,
        "tail slope {} ns against c / 2 = {half} on {m:?}",
        tail.slope_ns_per_entry
    );
}

#[test]
fn unexpected_queue_follows_the_model() {
    check_unexpected(&machine(2, [0.3, 0.2, 0.25, 0.1, 0.35, 1.1], 490.0));
    check_unexpected(&machine(1, [2.0, 1.5, 3.0, 0.5, 1.2, 2.0], 137.5));
    let mut rng = Rng(0x0004_0004);
    for _ in 0..3 {
        let mut m = drawn(&mut rng);
        // Long enough queues to climb: at least 60 ns an entry.
        m.match_ns_per_entry = m.match_ns_per_entry.max(60.0);
        check_unexpected(&m);
    }
}
