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
