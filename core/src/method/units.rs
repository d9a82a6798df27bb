//! How core's messages write amounts: bytes in binary units ([`human_bytes`]) and durations in
//! their two largest units ([`human_duration`]).

use std::time::Duration;

/// Bytes in binary units with up to three significant digits (`64 GiB`, `1.5 MiB`, `100 B`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        return format!("{n} B");
    }
    let text = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text} {}", UNITS[u])
}

/// A duration in the two largest units that matter (`3 h 20 min`, `45 s`, `12 days 4 h`,
/// `63 years`).
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    const MIN: u64 = 60;
    const HOUR: u64 = 3600;
    const DAY: u64 = 86_400;
    const YEAR: u64 = 365 * DAY;
    let two = |big: u64, bu: &str, small: u64, su: &str| {
        if small == 0 {
            format!("{big} {bu}")
        } else {
            format!("{big} {bu} {small} {su}")
        }
    };
    match s {
        0 => format!("{:.1} s", d.as_secs_f64()),
        1..MIN => format!("{s} s"),
        MIN..HOUR => two(s / MIN, "min", s % MIN, "s"),
        HOUR..DAY => two(s / HOUR, "h", s % HOUR / MIN, "min"),
        DAY..YEAR => two(s / DAY, "days", s % DAY / HOUR, "h"),
        _ => format!("{} years", s / YEAR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(64 << 30), "64 GiB");
        assert_eq!(human_bytes(u64::MAX), "16 EiB");
        assert_eq!(human_bytes((1 << 32) - 1), "4 GiB");
        assert_eq!(human_duration(Duration::from_secs(45)), "45 s");
        assert_eq!(human_duration(Duration::from_secs(12_000)), "3 h 20 min");
        assert_eq!(human_duration(Duration::from_secs(7 * 86_400)), "7 days");
        assert_eq!(human_duration(Duration::from_millis(300)), "0.3 s");
        assert_eq!(
            human_duration(Duration::from_secs(3 * 86_400 + 7200)),
            "3 days 2 h"
        );
        assert_eq!(human_duration(Duration::from_secs(2 << 30)), "68 years");
    }
}
