//! What a run asks of a simulated machine, checked before it starts (docs/simulator.md §6):
//! that its virtual time fits the clock ([`CLOCK_LIMIT_NS`]), that the clock's tick can time
//! its timing loops, and that the messages it simulates can be simulated within the week a
//! run may take. The estimates are from the machine's own times: a message of `n` bytes to a
//! neighbour takes at least `T_1(n) = F(n) + max(E(n), R(n)) + U(n)` (§4) and at most every
//! time it has, scaled by the worst product of faults on one channel or node (every fault in
//! effect at once, whatever its window), across every dimension.
//!
//! What the estimates do not cover (matching costs of long queues, compute loops) the kernel
//! still guards at run time: a run that would pass the clock's limit ends with an error
//! naming the machine, never with a time that wrapped.

use crate::config::{SimConfig, CLOCK_LIMIT_NS};
use commbench_core::method::limits::{LONGEST_RUN, MAX_ITERATIONS, MESSAGE_FLOOR_NS};
use commbench_core::method::units::human_duration;
use commbench_core::method::{MethodConfig, NppChoice};
use std::time::Duration;

/// The least and the most one message of `n` bytes takes on `cfg`, ns.
fn message_ns(cfg: &SimConfig, n: u64) -> (f64, f64) {
    let t = &cfg.times;
    let ns = |l: &crate::config::Linear| l.ns(n) as f64;
    let (f, s, r, a, u, e) = (ns(&t.f), ns(&t.s), ns(&t.r), ns(&t.a), ns(&t.u), ns(&t.e));
    let least = (f + e.max(r) + u).max(1.0);
    // Every fault in effect at once, windows ignored: faults on one channel or node multiply.
    let worst = crate::config::worst_factor(cfg);
    let hops = f64::from(cfg.max_hops().max(1));
    let most = worst * (f + s + a + u + hops * (e + r))
        + hops * cfg.jitter_ns as f64
        + cfg.poll_ns as f64
        + least;
    (least, most)
}

/// Check that a run of `method` over `points` (one size per point, `trips(size)` messages
/// per iteration) fits `cfg`'s clock and a week of simulation; the reason when it does not.
pub fn check_run(
    cfg: &SimConfig,
    method: &MethodConfig,
    points: &[u64],
    trips: &dyn Fn(u64) -> u64,
) -> Result<(), String> {
    let tick = cfg.tick_ns as f64;
    let read = cfg.clock_read_ns as f64;
    let mut virtual_ns = method.timer_samples as f64 * 2.0 * read;
    let mut messages = 0.0f64;
    let trials = method.trials as f64;
    for &size in points {
        let k = trips(size).max(1) as f64;
        let (least, most) = message_ns(cfg, size);
        let (trip_least, trip_most) = (k * least, k * most);
        // The npp of each timing loop, and the iterations that estimate it.
        let (npps, estimate): (Vec<f64>, f64) = match &method.npp {
            NppChoice::Auto {
                res_npp,
                npp_init,
                npptrial,
            } => {
                let aim = *res_npp as f64 * tick;
                if aim > MAX_ITERATIONS as f64 * trip_most {
                    return Err(format!(
                        "tick_ns = {}: a timing loop must last res_npp = {res_npp} ticks ({}), \
                         and {MAX_ITERATIONS} iterations at {size} B last at most {}: the clock \
                         is too coarse to time them",
                        cfg.tick_ns,
                        virtual_time(aim),
                        virtual_time(MAX_ITERATIONS as f64 * trip_most)
                    ));
                }
                let npp = (aim / trip_most).clamp(1.0, MAX_ITERATIONS as f64);
                (vec![npp], *npptrial as f64 * *npp_init as f64)
            }
            other => {
                let v: Vec<f64> = other.fixed_values().iter().map(|&n| n as f64).collect();
                if let Some(&n) = v.iter().find(|&&n| n * trip_most < tick) {
                    return Err(format!(
                        "tick_ns = {}: a timing loop of npp {n} at {size} B lasts at most {}, \
                         under one tick: every trial would read the same time",
                        cfg.tick_ns,
                        virtual_time(n * trip_most)
                    ));
                }
                (v, 0.0)
            }
        };
        let loops: f64 = npps.iter().sum();
        let iterations = method.warmup as f64 + estimate + trials * loops;
        virtual_ns += iterations * trip_least + trials * npps.len() as f64 * 2.0 * read;
        messages += iterations * k;
    }
    if virtual_ns > CLOCK_LIMIT_NS as f64 {
        return Err(format!(
            "this run takes at least {} of virtual time on this machine, and its clock holds \
             {} ({CLOCK_LIMIT_NS} ns): give smaller times or fewer trials, sizes or iterations",
            virtual_time(virtual_ns),
            virtual_time(CLOCK_LIMIT_NS as f64)
        ));
    }
    let real = Duration::from_secs_f64((messages * MESSAGE_FLOOR_NS / 1e9).min(1e15));
    if real > LONGEST_RUN {
        return Err(format!(
            "this run simulates at least {messages:.3e} messages, which take at least {} to \
             simulate (every message at least {MESSAGE_FLOOR_NS} ns), more than the {} a run \
             may take{}",
            human_duration(real),
            human_duration(LONGEST_RUN),
            if matches!(method.npp, NppChoice::Auto { .. }) {
                format!(
                    ": a coarse tick_ns ({} ns) makes every timing loop long",
                    cfg.tick_ns
                )
            } else {
                String::new()
            }
        ));
    }
    Ok(())
}

/// A virtual time in words: ns up to a second, then seconds, days or years.
fn virtual_time(ns: f64) -> String {
    let s = ns / 1e9;
    if s < 1.0 {
        format!("{ns:.0} ns")
    } else if s < 86_400.0 {
        format!("{s:.1} s")
    } else if s < 3.156e7 * 10.0 {
        format!("{:.1} days", s / 86_400.0)
    } else {
        format!("{:.3e} years", s / 3.156e7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(npp: NppChoice) -> MethodConfig {
        MethodConfig {
            sizes: vec![8],
            trials: 1000,
            warmup: 10,
            npp,
            ..MethodConfig::default()
        }
    }

    fn auto() -> NppChoice {
        MethodConfig::default().npp
    }

    #[test]
    fn the_presets_fit_their_clock() {
        for name in SimConfig::preset_names() {
            let cfg = SimConfig::preset(name).unwrap();
            let m = method(auto());
            check_run(&cfg, &m, &[8, 1 << 20], &|_| 2).unwrap();
        }
    }

    #[test]
    fn times_beyond_the_clock_are_refused() {
        let mut cfg = SimConfig::preset("generic").unwrap();
        let huge = crate::config::Linear::new(vec![crate::config::Piece {
            from: 0,
            base_us: 1e12,
            per_byte_us: 0.0,
        }])
        .unwrap();
        cfg.times.f = huge.clone();
        cfg.times.u = huge.clone();
        cfg.times.e = huge;
        let e = check_run(&cfg, &method(NppChoice::Fixed(1)), &[8], &|_| 2).unwrap_err();
        assert!(e.contains("virtual time"), "{e}");
    }

    #[test]
    fn a_tick_too_coarse_to_time_a_loop_is_refused() {
        let mut cfg = SimConfig::preset("generic").unwrap();
        cfg.tick_ns = 1_000_000_000_000_000;
        let e = check_run(&cfg, &method(auto()), &[8], &|_| 2).unwrap_err();
        assert!(e.contains("tick_ns = 1000000000000000"), "{e}");
        let e = check_run(&cfg, &method(NppChoice::Fixed(1)), &[8], &|_| 2).unwrap_err();
        assert!(e.contains("under one tick"), "{e}");
    }
}
