//! Time sources. The method of seed 000 §3.1 characterises whichever clock an endpoint reads;
//! real backends read `CLOCK_MONOTONIC` (the simulator supplies virtual time instead).

use nix::time::{clock_gettime, ClockId};

/// Nanoseconds of `CLOCK_MONOTONIC` (vDSO, no system call on Linux).
#[inline]
pub fn monotonic_ns() -> u64 {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => (ts.tv_sec() as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(ts.tv_nsec() as u64),
        // CLOCK_MONOTONIC cannot fail on Linux; fall back to the portable clock anyway.
        Err(_) => fallback_ns(),
    }
}

fn fallback_ns() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The resolution the kernel claims for `CLOCK_MONOTONIC` (`clock_getres`), in ns, for the record.
/// The method measures the resolution it actually sees; this is only what the OS reports.
pub fn monotonic_claimed_resolution_ns() -> Option<u64> {
    nix::time::clock_getres(ClockId::CLOCK_MONOTONIC)
        .ok()
        .map(|ts| ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
}

/// Name of the kernel's current clock source (`tsc`, `hpet`, `kvm-clock`, ...), when readable.
pub fn kernel_clocksource() -> Option<String> {
    std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        .ok()
        .map(|s| s.trim().to_string())
}

/// The timeout of a polling wait that must not read the clock on every spin: counts the
/// spins and reads the clock every [`SpinTimer::SPINS_PER_READ`]th, so that a short wait (one
/// inside a timed region) reads it never, and a long one notices its timeout within a few
/// thousand spins of it.
#[derive(Debug, Default)]
pub struct SpinTimer {
    start: Option<std::time::Instant>,
    spins: u32,
}

impl SpinTimer {
    /// Spins between two readings of the clock.
    pub const SPINS_PER_READ: u32 = 1024;

    /// A wait that has not spun yet.
    pub fn new() -> Self {
        SpinTimer::default()
    }

    /// Count one more unsuccessful spin: whether the wait has now lasted longer than
    /// `timeout` (counted from the first reading, after the first 1024 spins).
    #[inline(always)]
    pub fn expired(&mut self, timeout: std::time::Duration) -> bool {
        self.spins = self.spins.wrapping_add(1);
        if self.spins % Self::SPINS_PER_READ != 0 {
            return false;
        }
        match self.start {
            None => {
                self.start = Some(std::time::Instant::now());
                false
            }
            Some(t) => t.elapsed() > timeout,
        }
    }
}

#[cfg(test)]
mod spin_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_clock_is_read_only_every_1024_spins() {
        let mut t = SpinTimer::new();
        // A zero timeout: expired at the second reading (the first only starts the clock).
        for _ in 0..2 * SpinTimer::SPINS_PER_READ - 1 {
            assert!(!t.expired(Duration::ZERO));
        }
        std::thread::sleep(Duration::from_millis(1));
        assert!(t.expired(Duration::ZERO));
        let mut t = SpinTimer::new();
        for _ in 0..10 * SpinTimer::SPINS_PER_READ {
            assert!(!t.expired(Duration::from_secs(3600)));
        }
    }
}
