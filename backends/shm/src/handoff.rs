//! The cache-line hand-off between ranks 0 and 1, measured once at set-up through the shared
//! segment: an upper bound on how fast any message can go from one rank to the other here,
//! since every message needs at least one cache line to move between their cores.
//!
//! Rank 0 writes an odd number to a line of its own in the segment and spins until rank 1,
//! spinning on the same line, answers with the next even number: one round trip is two
//! hand-offs of the line. Rank 0 times every round trip, [`ROUND_TRIPS`] in all or as many as
//! fit in [`BUDGET_NS`], less the least cost of reading the clock (so the bound errs low), and
//! records the one-way time (half a round trip): the smallest and the median. The smallest is
//! the bound: ranks crowded on one core at set-up make most round trips slow, but any moment
//! both ran at once gives the hand-off itself.

use commbench_core::transport::clock::monotonic_ns;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The line the two ranks bounce, alone on its 128-byte block (adjacent-line prefetch
/// included).
#[repr(C, align(128))]
pub(crate) struct HandoffLine {
    /// The count: odd when rank 0 has written, even when rank 1 answered; [`DONE`] at the end.
    pub flag: AtomicU64,
    _pad: [u8; 120],
}

const _: () = assert!(std::mem::size_of::<HandoffLine>() == 128);

/// The key of the record in the backend's info.
pub(crate) use commbench_core::transport::CACHE_HANDOFF_KEY as KEY;

/// Round trips measured.
pub(crate) const ROUND_TRIPS: u64 = 2000;
/// The most time rank 0 spends on it, ns (ranks crowded on one core answer slowly).
pub(crate) const BUDGET_NS: u64 = 200_000_000;
/// Rank 0 is done: rank 1 stops answering.
const DONE: u64 = u64::MAX;

/// What rank 0 measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Handoff {
    /// Round trips timed.
    pub round_trips: u64,
    /// The fastest round trip's one-way time, ns.
    pub one_way_ns_min: f64,
    /// The median round trip's one-way time, ns.
    pub one_way_ns_median: f64,
}

impl Handoff {
    /// The record in the backend's info (`cache_handoff`).
    pub fn to_json(self) -> serde_json::Value {
        json!({
            "ranks": [0, 1],
            "round_trips": self.round_trips,
            "one_way_ns_min": self.one_way_ns_min,
            "one_way_ns_median": self.one_way_ns_median,
        })
    }
}

/// Wait until `line` holds something `ready` accepts, or `deadline` (ns of the monotonic
/// clock) passes; spins, and yields the core once a wait grows long (a peer on the same core
/// needs it). The value seen, or `None` at the deadline.
fn wait_for(line: &AtomicU64, deadline: u64, ready: impl Fn(u64) -> bool) -> Option<u64> {
    let mut spins = 0u32;
    loop {
        let v = line.load(Ordering::Acquire);
        if ready(v) {
            return Some(v);
        }
        spins = spins.wrapping_add(1);
        if spins % 256 == 0 {
            if monotonic_ns() > deadline {
                return None;
            }
            if spins >= 4096 {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
}

/// The least time between two consecutive reads of the clock, ns: what a timed round trip
/// holds besides the round trip.
fn clock_cost_ns() -> u64 {
    (0..100)
        .map(|_| {
            let a = monotonic_ns();
            monotonic_ns().saturating_sub(a)
        })
        .min()
        .unwrap_or(0)
}

/// Rank 0's side: the round trips, each timed, then [`DONE`]. `None` when none finished in
/// time.
pub(crate) fn lead(line: &AtomicU64) -> Option<Handoff> {
    let clock = clock_cost_ns();
    let deadline = monotonic_ns().saturating_add(BUDGET_NS);
    let mut one_way = Vec::with_capacity(ROUND_TRIPS as usize);
    for k in 0..ROUND_TRIPS {
        let ask = 2 * k + 1;
        let t0 = monotonic_ns();
        line.store(ask, Ordering::Release);
        if wait_for(line, deadline, |v| v == ask + 1).is_none() {
            break;
        }
        let t1 = monotonic_ns();
        one_way.push(t1.saturating_sub(t0).saturating_sub(clock) as f64 / 2.0);
    }
    line.store(DONE, Ordering::Release);
    one_way.sort_by(f64::total_cmp);
    let n = one_way.len();
    let min = *one_way.first()?;
    let median = if n % 2 == 0 {
        0.5 * (one_way[n / 2 - 1] + one_way[n / 2])
    } else {
        one_way[n / 2]
    };
    Some(Handoff {
        round_trips: n as u64,
        one_way_ns_min: min,
        one_way_ns_median: median,
    })
}

/// Rank 1's side: answer every odd count with the next until [`DONE`], or give up after
/// `timeout`.
pub(crate) fn follow(line: &AtomicU64, timeout: Duration) {
    let deadline = monotonic_ns().saturating_add(timeout.as_nanos().min(u64::MAX as u128) as u64);
    while let Some(v) = wait_for(line, deadline, |v| v == DONE || v % 2 == 1) {
        if v == DONE {
            return;
        }
        line.store(v + 1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads bounce the line: round trips are timed, the one-way times are not negative
    /// and the median is not below the minimum.
    #[test]
    fn two_threads_bounce_the_line() {
        let line = HandoffLine {
            flag: AtomicU64::new(0),
            _pad: [0; 120],
        };
        let h = std::thread::scope(|s| {
            s.spawn(|| follow(&line.flag, Duration::from_secs(30)));
            lead(&line.flag)
        })
        .expect("a round trip finished");
        assert!(h.round_trips >= 1 && h.round_trips <= ROUND_TRIPS, "{h:?}");
        assert!(
            h.one_way_ns_min >= 0.0 && h.one_way_ns_median >= h.one_way_ns_min,
            "{h:?}"
        );
        assert_eq!(line.flag.load(Ordering::Acquire), DONE);
        let v = h.to_json();
        assert_eq!(v["ranks"], json!([0, 1]));
        assert_eq!(v["round_trips"], json!(h.round_trips));
    }
}
