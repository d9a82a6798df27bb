//! Parsing of list arguments: message sizes, counts and CPU lists.
//!
//! Seed 003 runs ping pongs "with message sizes ranging from 1B to 4MB increasing by
//! powers of 2" and "1B to 4KB increasing linearly" (its runs use 1, 512, 1024, ...,
//! 4096). Both are one-liners here: `1..4M:x2` (23 sizes) and `1,512..4K:+512`.
//! Seed 000 §3.3 computes the number of ping pongs per timing loop (`npp`) but lets the
//! user fix it "to explore the effects of trying different values of npp" (its §4 tables
//! compare several); [`parse_counts`] reads such a list (`--npp 1,9,18,36`).
//!
//! Nothing here panics; every malformed input is a [`SpecError`] whose message is one line,
//! quotes the offending text and lists the accepted forms.

use std::collections::HashSet;

/// Most values one spec may generate (before duplicates are removed): a run measures at most
/// this many points (sizes times npp values, [`commbench_core::method::limits::MAX_POINTS`]).
pub const MAX_VALUES: usize = commbench_core::method::limits::MAX_POINTS;

/// Accepted forms of a size list, quoted in error messages.
pub const SIZE_FORMS: &str = "comma-separated sizes N, NK, NKiB, NM, NMiB, NG, NGiB \
(1024-based, case-insensitive, optional trailing B) or ranges A..B (doubling), A..B:xF \
(multiply by F >= 2), A..B:+S (add S >= 1), e.g. `1,8,64` or `1..4M:x2` or `1..4096:+512`";

/// Accepted forms of a count list, quoted in error messages.
pub const COUNT_FORMS: &str = "comma-separated positive integers N or ranges A..B \
(doubling), A..B:xF (multiply by F >= 2), A..B:+S (add S >= 1), e.g. `1,9,18,36` or `1..64`";

/// Accepted forms of a CPU list, quoted in error messages.
pub const CPU_FORMS: &str =
    "comma-separated CPU numbers N or ranges A-B (A <= B), each CPU once, e.g. `0,2,4-7`";

/// Why a size, count or CPU list was rejected.
///
/// Every message is a single line that names the offending text and the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The whole list is empty or blank.
    #[error("empty list `{spec}`; expected {forms}")]
    Empty {
        /// The list as given.
        spec: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// An item between commas is empty (`1,,2`, a leading or trailing comma).
    #[error("empty item in `{spec}` (stray comma?); expected {forms}")]
    EmptyItem {
        /// The whole list.
        spec: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A number has no digits or contains something other than ASCII digits.
    #[error("cannot read a number in `{text}`; expected {forms}")]
    BadNumber {
        /// The offending item or part of it.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A number has a suffix other than K, M, G (optionally with `iB`/`B`) or B.
    #[error("unknown suffix `{suffix}` in `{text}`; expected {forms}")]
    UnknownSuffix {
        /// The offending number with its suffix.
        text: String,
        /// The suffix as written.
        suffix: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// The part after `:` in a range is neither `xF` nor `+S`.
    #[error("cannot read the step of range `{text}` (use :xF or :+S); expected {forms}")]
    BadStep {
        /// The offending range.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A range starts above its end.
    #[error("range `{text}` starts above its end; expected {forms}")]
    ReversedRange {
        /// The offending range.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A geometric range has a factor below 2.
    #[error("range `{text}` has a factor below 2; expected {forms}")]
    BadFactor {
        /// The offending range.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A linear range has step 0.
    #[error("range `{text}` has step 0; expected {forms}")]
    ZeroStep {
        /// The offending range.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A geometric range starts at 0, which no factor ever leaves.
    #[error(
        "geometric range `{text}` starts at 0 (list 0 separately, e.g. `0,1..B`); expected {forms}"
    )]
    ZeroGeometricStart {
        /// The offending range.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A number does not fit in 64 bits.
    #[error("`{text}` does not fit in 64 bits; expected {forms}")]
    Overflow {
        /// The offending number.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// The list would generate more than [`MAX_VALUES`] values.
    #[error(
        "`{text}` generates more than {limit} values, the most one run measures; use a coarser \
         step or a smaller range"
    )]
    TooMany {
        /// The item that crossed the limit.
        text: String,
        /// The limit, [`MAX_VALUES`].
        limit: usize,
    },
    /// Zero where only positive values are allowed.
    #[error("zero is not allowed in `{text}`; expected {forms}")]
    Zero {
        /// The offending item.
        text: String,
        /// The accepted forms.
        forms: &'static str,
    },
    /// A CPU appears twice in a CPU list.
    #[error("CPU {cpu} appears more than once in `{spec}`; expected {forms}")]
    DuplicateCpu {
        /// The repeated CPU number.
        cpu: usize,
        /// The whole list.
        spec: String,
        /// The accepted forms.
        forms: &'static str,
    },
}

impl SpecError {
    /// The same error with the control characters of the text it quotes escaped (`\n`,
    /// `\t`), so that its message stays on one line whatever the list held.
    fn one_line(mut self) -> Self {
        let escape = |s: &mut String| {
            if s.contains(char::is_control) {
                *s = commbench_core::transport::error::escape_controls(s);
            }
        };
        match &mut self {
            SpecError::Empty { spec, .. }
            | SpecError::EmptyItem { spec, .. }
            | SpecError::DuplicateCpu { spec, .. } => escape(spec),
            SpecError::UnknownSuffix { text, suffix, .. } => {
                escape(text);
                escape(suffix);
            }
            SpecError::BadNumber { text, .. }
            | SpecError::BadStep { text, .. }
            | SpecError::ReversedRange { text, .. }
            | SpecError::BadFactor { text, .. }
            | SpecError::ZeroStep { text, .. }
            | SpecError::ZeroGeometricStart { text, .. }
            | SpecError::Overflow { text, .. }
            | SpecError::TooMany { text, .. }
            | SpecError::Zero { text, .. } => escape(text),
        }
        self
    }
}

/// Parse a run of ASCII digits (surrounding whitespace ignored) as `u64`.
fn parse_digits(digits: &str, text: &str, forms: &'static str) -> Result<u64, SpecError> {
    let d = digits.trim();
    if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
        return Err(SpecError::BadNumber {
            text: text.to_string(),
            forms,
        });
    }
    d.parse::<u64>().map_err(|_| SpecError::Overflow {
        text: text.to_string(),
        forms,
    })
}

/// Parse one number; with `suffixes`, K/M/G (1024-based, optional `iB`/`B`) and a bare
/// `B` are accepted, case-insensitively, with optional whitespace before the suffix.
fn parse_number(text: &str, suffixes: bool, forms: &'static str) -> Result<u64, SpecError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let value = parse_digits(digits, t, forms)?;
    let suffix = suffix.trim();
    if suffix.is_empty() {
        return Ok(value);
    }
    if digits.is_empty() {
        return Err(SpecError::BadNumber {
            text: t.to_string(),
            forms,
        });
    }
    let unknown = || SpecError::UnknownSuffix {
        text: t.to_string(),
        suffix: suffix.to_string(),
        forms,
    };
    if !suffixes {
        return Err(unknown());
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(unknown()),
    };
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| SpecError::Overflow {
            text: t.to_string(),
            forms,
        })
}

/// Parse one parameter: the item to the right of `..`/`:`, whose errors quote `item`.
fn parse_part(
    part: &str,
    item: &str,
    suffixes: bool,
    forms: &'static str,
) -> Result<u64, SpecError> {
    parse_number(part, suffixes, forms).map_err(|e| match e {
        SpecError::BadNumber { .. } => SpecError::BadNumber {
            text: item.to_string(),
            forms,
        },
        other => other,
    })
}

/// The step of a range: `:xF` (geometric, also the default) or `:+S` (linear).
enum Step {
    Mul(u64),
    Add(u64),
}

/// Read the step after `:` (`None`: no step given, doubling).
fn parse_step(
    step: Option<&str>,
    item: &str,
    suffixes: bool,
    forms: &'static str,
) -> Result<Step, SpecError> {
    let Some(s) = step else {
        return Ok(Step::Mul(2));
    };
    if let Some(f) = s.strip_prefix(['x', 'X', '*']) {
        Ok(Step::Mul(parse_part(f, item, false, forms)?))
    } else if let Some(d) = s.strip_prefix('+') {
        Ok(Step::Add(parse_part(d, item, suffixes, forms)?))
    } else {
        Err(SpecError::BadStep {
            text: item.to_string(),
            forms,
        })
    }
}

/// `item` would take the list past [`MAX_VALUES`].
fn too_many(item: &str) -> SpecError {
    SpecError::TooMany {
        text: item.to_string(),
        limit: MAX_VALUES,
    }
}

/// Push `a, a f, a f^2, ...` up to `b` (`a >= 1`, `f >= 2`) of range `item` onto `out`.
fn push_geometric(a: u64, b: u64, f: u64, item: &str, out: &mut Vec<u64>) -> Result<(), SpecError> {
    let mut v = a;
    while v <= b {
        if out.len() >= MAX_VALUES {
            return Err(too_many(item));
        }
        out.push(v);
        match v.checked_mul(f) {
            Some(next) => v = next,
            None => break,
        }
    }
    Ok(())
}

/// Push `a, a + s, a + 2 s, ...` up to `b` (`s >= 1`) of range `item` onto `out`.
fn push_linear(a: u64, b: u64, s: u64, item: &str, out: &mut Vec<u64>) -> Result<(), SpecError> {
    let count = ((b - a) / s).saturating_add(1);
    if count > (MAX_VALUES - out.len().min(MAX_VALUES)) as u64 {
        return Err(too_many(item));
    }
    let mut v = a;
    while v <= b {
        out.push(v);
        match v.checked_add(s) {
            Some(next) => v = next,
            None => break,
        }
    }
    Ok(())
}

/// Expand one item (`N` or a range) into `out`, keeping the total within [`MAX_VALUES`].
fn expand_item(
    item: &str,
    suffixes: bool,
    forms: &'static str,
    out: &mut Vec<u64>,
) -> Result<(), SpecError> {
    let Some((a_text, rest)) = item.split_once("..") else {
        if out.len() >= MAX_VALUES {
            return Err(too_many(item));
        }
        out.push(parse_number(item, suffixes, forms)?);
        return Ok(());
    };
    let (b_text, step) = match rest.split_once(':') {
        Some((b, s)) => (b, Some(s.trim())),
        None => (rest, None),
    };
    let a = parse_part(a_text, item, suffixes, forms)?;
    let b = parse_part(b_text, item, suffixes, forms)?;
    let step = parse_step(step, item, suffixes, forms)?;
    let err = |make: fn(String, &'static str) -> SpecError| Err(make(item.to_string(), forms));
    if a > b {
        return err(|text, forms| SpecError::ReversedRange { text, forms });
    }
    match step {
        Step::Mul(f) if f < 2 => err(|text, forms| SpecError::BadFactor { text, forms }),
        Step::Mul(_) if a == 0 => err(|text, forms| SpecError::ZeroGeometricStart { text, forms }),
        Step::Mul(f) => push_geometric(a, b, f, item, out),
        Step::Add(0) => err(|text, forms| SpecError::ZeroStep { text, forms }),
        Step::Add(s) => push_linear(a, b, s, item, out),
    }
}

/// The trimmed items between the commas of `spec`, each an error when empty; an empty list
/// is an error at once.
fn items<'a>(
    spec: &'a str,
    forms: &'static str,
) -> Result<impl Iterator<Item = Result<&'a str, SpecError>> + 'a, SpecError> {
    if spec.trim().is_empty() {
        return Err(SpecError::Empty {
            spec: spec.to_string(),
            forms,
        });
    }
    Ok(spec.split(',').map(move |item| match item.trim() {
        "" => Err(SpecError::EmptyItem {
            spec: spec.to_string(),
            forms,
        }),
        item => Ok(item),
    }))
}

/// Parse a whole list: split on commas, expand every item, drop duplicates (first kept).
fn parse_list(spec: &str, suffixes: bool, forms: &'static str) -> Result<Vec<u64>, SpecError> {
    let mut raw = Vec::new();
    for item in items(spec, forms)? {
        expand_item(item?, suffixes, forms, &mut raw)?;
    }
    let mut seen = HashSet::with_capacity(raw.len());
    raw.retain(|v| seen.insert(*v));
    Ok(raw)
}

/// Parse a message-size list such as `1..4M:x2` or `1,512..4K:+512` (seed 003's two
/// sweeps).
///
/// The list is comma-separated; every item is either
/// * a size: digits with an optional suffix `K`, `M`, `G` (1024-based, so `4K` = 4096),
///   written also `KiB`/`KB` etc., case-insensitive, or a bare `B` (`8`, `8B`, `4KiB`,
///   `1M`, `2g`); or
/// * a range `A..B:xF` (geometric: A, A·F, A·F², … with integer `F >= 2`, `A >= 1`),
///   `A..B:+S` (linear: A, A+S, … with `S >= 1`, which may carry a suffix), or `A..B`
///   meaning `A..B:x2`. A range includes `B` when it is hit exactly and never exceeds it.
///
/// Whitespace around items and parts is ignored. The sizes come back in order of
/// appearance with duplicates removed (the first occurrence kept). Zero is accepted (see
/// [`reject_zero`]). Errors: empty list or item, unreadable number, unknown suffix,
/// `A > B`, factor below 2, step 0, a geometric range starting at 0, a value beyond
/// `u64`, or more than [`MAX_VALUES`] generated values.
pub fn parse_sizes(spec: &str) -> Result<Vec<u64>, SpecError> {
    parse_list(spec, true, SIZE_FORMS).map_err(SpecError::one_line)
}

/// Parse a single size (`4096`, `4K`, `4KiB`, ...) with the suffixes of [`parse_sizes`].
pub fn parse_size(text: &str) -> Result<u64, SpecError> {
    if text.trim().is_empty() {
        return Err(SpecError::Empty {
            spec: text.to_string(),
            forms: SIZE_FORMS,
        }
        .one_line());
    }
    parse_number(text, true, SIZE_FORMS).map_err(SpecError::one_line)
}

/// Reject zero-byte sizes, for callers whose transport cannot send empty messages.
pub fn reject_zero(sizes: &[u64]) -> Result<(), SpecError> {
    if sizes.contains(&0) {
        return Err(SpecError::Zero {
            text: "0".to_string(),
            forms: "sizes of at least 1 byte",
        });
    }
    Ok(())
}

/// Parse a list of positive counts such as `--npp 1,9,18,36` (seed 000 §3.3) with the range
/// forms of [`parse_sizes`] (`1..64` doubles, `1..64:x4`, `10..100:+10`) but no unit
/// suffixes. Zero anywhere is an error.
pub fn parse_counts(spec: &str) -> Result<Vec<u64>, SpecError> {
    let values = parse_list(spec, false, COUNT_FORMS).map_err(SpecError::one_line)?;
    if values.contains(&0) {
        return Err(SpecError::Zero {
            text: spec.trim().to_string(),
            forms: COUNT_FORMS,
        }
        .one_line());
    }
    Ok(values)
}

/// Parse a CPU list in the style of `taskset -c`: `0,2,4-7` gives `[0, 2, 4, 5, 6, 7]`
/// in order of appearance.
///
/// Errors on an empty list or item, an unreadable number, a reversed range (`7-4`), a CPU
/// listed twice, or more than [`MAX_VALUES`] CPUs.
pub fn parse_cpu_list(spec: &str) -> Result<Vec<usize>, SpecError> {
    cpu_list(spec).map_err(SpecError::one_line)
}

fn cpu_list(spec: &str) -> Result<Vec<usize>, SpecError> {
    let forms = CPU_FORMS;
    let number = |t: &str, item: &str| -> Result<usize, SpecError> {
        let v = parse_part(t, item, false, forms)?;
        usize::try_from(v).map_err(|_| SpecError::Overflow {
            text: item.to_string(),
            forms,
        })
    };
    let mut out: Vec<usize> = Vec::new();
    let mut seen = HashSet::new();
    for item in items(spec, forms)? {
        let item = item?;
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => (number(a, item)?, number(b, item)?),
            None => {
                let v = number(item, item)?;
                (v, v)
            }
        };
        if a > b {
            return Err(SpecError::ReversedRange {
                text: item.to_string(),
                forms,
            });
        }
        if b - a >= MAX_VALUES - out.len().min(MAX_VALUES) {
            return Err(SpecError::TooMany {
                text: item.to_string(),
                limit: MAX_VALUES,
            });
        }
        for cpu in a..=b {
            if !seen.insert(cpu) {
                return Err(SpecError::DuplicateCpu {
                    cpu,
                    spec: spec.to_string(),
                    forms,
                });
            }
            out.push(cpu);
        }
    }
    Ok(out)
}

/// Human-readable size for reports: exact multiples of 1 GiB, 1 MiB or 1 KiB get that
/// unit, anything else is in bytes (`1 -> "1 B"`, `1024 -> "1 KiB"`, `1536 -> "1536 B"`,
/// `4194304 -> "4 MiB"`). The output parses back with [`parse_size`].
pub fn format_size(n: u64) -> String {
    const UNITS: [(u32, &str); 3] = [(30, "GiB"), (20, "MiB"), (10, "KiB")];
    if n != 0 {
        for (shift, unit) in UNITS {
            if n % (1u64 << shift) == 0 {
                return format!("{} {unit}", n >> shift);
            }
        }
    }
    format!("{n} B")
}

/// A fraction as `--until-ci` takes it: `1%` (per cent) or `0.01` (a fraction), finite and
/// above 0. The reason of an error names the text and the forms.
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (num, scale) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (t, 1.0),
    };
    match num.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x / scale),
        Ok(_) => Err(format!("`{t}`: must be above 0")),
        Err(_) => Err(format!(
            "`{t}` is not a fraction; write a per cent such as 1% or a fraction such as 0.01"
        )),
    }
}

/// A duration as `--max-time` takes it: a number of seconds, or a number with `ns`, `us`,
/// `ms`, `s`, `m` or `h` (`500ms`, `30s`, `2m`, `1.5h`), above 0 and at most 10^9 s; in ns.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let per_s = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        u => {
            return Err(format!(
                "`{t}`: unknown unit `{u}`; use ns, us, ms, s, m or h (30s, 500ms, 2m)"
            ))
        }
    };
    let secs = num
        .parse::<f64>()
        .map_err(|_| format!("`{t}` is not a duration; for example 30s, 500ms, 2m or 1h"))?
        * per_s;
    if !(secs.is_finite() && secs > 0.0) {
        return Err(format!("`{t}`: must be above 0"));
    }
    if secs > 1e9 {
        return Err(format!("`{t}`: at most 10^9 s"));
    }
    Ok(((secs * 1e9).round() as u64).max(1))
}

/// A rate as `--expect-rate` takes it, in MB/s (10^6 bytes per second): a number, then a unit
/// of bits (`bit`, `b`) or bytes (`B`) with an optional prefix (`k`, `M`, `G`, `T`, decimal,
/// any case; `Ki`, `Mi`, `Gi`, `Ti`, binary) and an optional `/s` or `ps`: `1gbit`,
/// `10Gbit/s`, `1.25GB/s`, `800MB/s`, `100Mbps`. Finite, above 0 and at most 10^12 MB/s. The
/// reason of an error names the text and the forms.
pub fn parse_rate_mb_s(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let forms = "write a number and a unit of bits or bytes per second, such as 10Gbit/s, \
                 1gbit, 1.25GB/s or 800MB/s";
    // The unit is what follows the last digit (so that `2e3MB` keeps its exponent).
    let split = t
        .rfind(|c: char| c.is_ascii_digit() || c == '.')
        .map_or(0, |i| i + 1);
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    if unit.is_empty() {
        return Err(format!("`{t}` has no unit; {forms}"));
    }
    let x: f64 = num
        .parse()
        .map_err(|_| format!("`{t}`: `{num}` is not a number; {forms}"))?;
    let unit = unit
        .strip_suffix("/s")
        .or_else(|| unit.strip_suffix("ps"))
        .unwrap_or(unit);
    let (prefix, per_unit) = if let Some(p) = unit.strip_suffix("bit") {
        (p, 0.125)
    } else if let Some(p) = unit.strip_suffix('b') {
        (p, 0.125)
    } else if let Some(p) = unit.strip_suffix('B') {
        (p, 1.0)
    } else {
        return Err(format!("`{t}`: unknown unit `{unit}`; {forms}"));
    };
    let scale = match prefix.to_ascii_lowercase().as_str() {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        "ki" => 1024.0,
        "mi" => 1024.0 * 1024.0,
        "gi" => 1024.0 * 1024.0 * 1024.0,
        "ti" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("`{t}`: unknown prefix `{prefix}`; {forms}")),
    };
    let mb_s = x * scale * per_unit / 1e6;
    if !(mb_s.is_finite() && mb_s > 0.0) {
        return Err(format!("`{t}`: must be above 0"));
    }
    if mb_s > 1e12 {
        return Err(format!("`{t}`: at most 10^12 MB/s"));
    }
    Ok(mb_s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_list() {
        assert_eq!(parse_sizes("1,8,64").unwrap(), vec![1, 8, 64]);
        assert_eq!(parse_sizes(" 64 , 8,1 ").unwrap(), vec![64, 8, 1]);
        assert_eq!(parse_sizes("8,1,8,64,1").unwrap(), vec![8, 1, 64]);
        assert_eq!(parse_sizes("0").unwrap(), vec![0]);
    }

    #[test]
    fn suffixes() {
        for (s, v) in [
            ("8", 8),
            ("8B", 8),
            ("8b", 8),
            ("4K", 4096),
            ("4k", 4096),
            ("4KB", 4096),
            ("4KiB", 4096),
            ("4kib", 4096),
            ("1M", 1 << 20),
            ("1MiB", 1 << 20),
            ("1mb", 1 << 20),
            ("2G", 2 << 30),
            ("2GiB", 2 << 30),
            ("4 MiB", 4 << 20),
        ] {
            assert_eq!(parse_sizes(s).unwrap(), vec![v], "{s}");
            assert_eq!(parse_size(s).unwrap(), v, "{s}");
        }
    }

    #[test]
    fn seed_003_power_of_two_sweep() {
        let v = parse_sizes("1..4M:x2").unwrap();
        assert_eq!(v.len(), 23);
        assert_eq!(v.first(), Some(&1));
        assert_eq!(v.last(), Some(&4_194_304));
        assert!(v.windows(2).all(|w| w[1] == 2 * w[0]));
        assert_eq!(parse_sizes("1..4MiB").unwrap(), v);
    }

    #[test]
    fn linear_ranges() {
        assert_eq!(
            parse_sizes("1..4096:+512").unwrap(),
            vec![1, 513, 1025, 1537, 2049, 2561, 3073, 3585]
        );
        assert_eq!(parse_sizes("0..16:+4").unwrap(), vec![0, 4, 8, 12, 16]);
        // Seed 003's small-message list.
        assert_eq!(
            parse_sizes("1,512..4K:+512").unwrap(),
            vec![1, 512, 1024, 1536, 2048, 2560, 3072, 3584, 4096]
        );
        assert_eq!(parse_sizes("0..2K:+1K").unwrap(), vec![0, 1024, 2048]);
        assert_eq!(parse_sizes("5..5:+3").unwrap(), vec![5]);
    }

    #[test]
    fn geometric_ranges() {
        assert_eq!(parse_sizes("1..100:x3").unwrap(), vec![1, 3, 9, 27, 81]);
        assert_eq!(parse_sizes("1..81:X3").unwrap(), vec![1, 3, 9, 27, 81]);
        assert_eq!(parse_sizes("3..20").unwrap(), vec![3, 6, 12]);
        // Multiplying past u64 simply ends the range.
        let v = parse_sizes(&format!("1..{}:x2", u64::MAX)).unwrap();
        assert_eq!(v.len(), 64);
        let v = parse_sizes(&format!("{}..{}:+1", u64::MAX - 1, u64::MAX)).unwrap();
        assert_eq!(v, vec![u64::MAX - 1, u64::MAX]);
        // Ranges and items mix, duplicates dropped.
        assert_eq!(parse_sizes("4,1..8").unwrap(), vec![4, 1, 2, 8]);
    }

    fn is<T: std::fmt::Debug>(r: Result<T, SpecError>, f: fn(&SpecError) -> bool) -> bool {
        match r {
            Err(e) => {
                let msg = e.to_string();
                assert!(!msg.contains('\n'), "multi-line message: {msg}");
                f(&e)
            }
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    /// `parse(spec)` is rejected with the error variant `kind`, in a one-line message.
    macro_rules! rejects {
        ($parse:ident, $spec:expr, $kind:ident) => {
            assert!(
                is($parse($spec), |e| matches!(e, SpecError::$kind { .. })),
                "{:?} should be rejected as {}",
                $spec,
                stringify!($kind)
            )
        };
    }

    #[test]
    fn every_error_case() {
        rejects!(parse_sizes, "", Empty);
        rejects!(parse_sizes, "  ", Empty);
        rejects!(parse_sizes, "1,,2", EmptyItem);
        rejects!(parse_sizes, "1,", EmptyItem);
        rejects!(parse_sizes, ",1", EmptyItem);
        rejects!(parse_sizes, "abc", BadNumber);
        rejects!(parse_sizes, "K", BadNumber);
        rejects!(parse_sizes, "-4", BadNumber);
        rejects!(parse_sizes, "1..x", BadNumber);
        rejects!(parse_sizes, "..8", BadNumber);
        rejects!(parse_sizes, "4T", UnknownSuffix);
        rejects!(parse_sizes, "4KiBB", UnknownSuffix);
        rejects!(parse_sizes, "1.5K", UnknownSuffix);
        rejects!(parse_sizes, "8..1", ReversedRange);
        rejects!(parse_sizes, "1..8:x1", BadFactor);
        rejects!(parse_sizes, "1..8:x0", BadFactor);
        rejects!(parse_sizes, "1..8:x2K", UnknownSuffix);
        rejects!(parse_sizes, "1..8:+0", ZeroStep);
        rejects!(parse_sizes, "1..8:/2", BadStep);
        rejects!(parse_sizes, "1..8:", BadStep);
        rejects!(parse_sizes, "0..8:x2", ZeroGeometricStart);
        rejects!(parse_sizes, "0..8", ZeroGeometricStart);
        rejects!(parse_sizes, "99999999999999999999", Overflow);
        rejects!(parse_sizes, "20000000000G", Overflow);
        rejects!(parse_sizes, "0..10000:+1", TooMany);
        rejects!(parse_sizes, "1..1000000:+1", TooMany);
        rejects!(parse_sizes, &format!("0..{}:+1", u64::MAX), TooMany);
        assert_eq!(parse_sizes("1..10000:+1").unwrap().len(), MAX_VALUES);
        // Messages name the offending text and the accepted forms.
        let msg = parse_sizes("1,4Q").unwrap_err().to_string();
        assert!(msg.contains("`4Q`") && msg.contains("A..B:xF"), "{msg}");
    }

    #[test]
    fn zero_handling() {
        assert!(reject_zero(&[1, 2, 3]).is_ok());
        assert!(reject_zero(&[]).is_ok());
        assert!(matches!(reject_zero(&[1, 0]), Err(SpecError::Zero { .. })));
    }

    #[test]
    fn counts() {
        assert_eq!(parse_counts("1,9,18,36").unwrap(), vec![1, 9, 18, 36]);
        assert_eq!(parse_counts("1..64").unwrap(), vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(parse_counts("10..30:+10").unwrap(), vec![10, 20, 30]);
        rejects!(parse_counts, "0,1", Zero);
        rejects!(parse_counts, "0..8:+4", Zero);
        rejects!(parse_counts, "4K", UnknownSuffix);
        rejects!(parse_counts, "", Empty);
        let msg = parse_counts("x").unwrap_err().to_string();
        assert!(msg.contains("positive integers"), "{msg}");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2,4-7").unwrap(), vec![0, 2, 4, 5, 6, 7]);
        assert_eq!(parse_cpu_list("3").unwrap(), vec![3]);
        assert_eq!(parse_cpu_list(" 5 - 5 , 1").unwrap(), vec![5, 1]);
        rejects!(parse_cpu_list, "", Empty);
        rejects!(parse_cpu_list, "1,,2", EmptyItem);
        rejects!(parse_cpu_list, "7-4", ReversedRange);
        assert!(matches!(
            parse_cpu_list("0-3,2"),
            Err(SpecError::DuplicateCpu { cpu: 2, .. })
        ));
        rejects!(parse_cpu_list, "0-3:2", UnknownSuffix);
        rejects!(parse_cpu_list, "a", BadNumber);
        rejects!(parse_cpu_list, "-1", BadNumber);
        rejects!(parse_cpu_list, "1K", UnknownSuffix);
        rejects!(parse_cpu_list, &format!("0-{}", u64::MAX), TooMany);
        rejects!(parse_cpu_list, "99999999999999999999999", Overflow);
    }

    #[test]
    fn rates() {
        for (s, v) in [
            ("1gbit", 125.0),
            ("10Gbit/s", 1250.0),
            ("1.25GB/s", 1250.0),
            ("800MB/s", 800.0),
            ("100Mbps", 12.5),
            ("8 kb", 0.001),
            ("1GiB/s", 1073.741824),
            ("2e3 MB", 2000.0),
        ] {
            let r = parse_rate_mb_s(s).unwrap();
            assert!((r - v).abs() < 1e-9 * v, "{s}: {r}");
        }
        for (s, why) in [
            ("10", "no unit"),
            ("fast", "not a number"),
            ("10Gfoo", "unknown unit"),
            ("10XB/s", "unknown prefix"),
            ("0MB/s", "above 0"),
            ("-1GB/s", "above 0"),
            ("1e30GB", "at most"),
        ] {
            let e = parse_rate_mb_s(s).unwrap_err();
            assert!(e.contains(why) && !e.contains('\n'), "{s}: {e}");
        }
    }

    #[test]
    fn format_sizes() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1), "1 B");
        assert_eq!(format_size(1024), "1 KiB");
        assert_eq!(format_size(1536), "1536 B");
        assert_eq!(format_size(3072), "3 KiB");
        assert_eq!(format_size(4_194_304), "4 MiB");
        assert_eq!(format_size(1 << 30), "1 GiB");
        assert_eq!(format_size(u64::MAX), format!("{} B", u64::MAX));
        assert!(parse_size("").is_err());
    }

    proptest! {
        #[test]
        fn parse_sizes_never_panics(s in "\\PC{0,40}") {
            let _ = parse_sizes(&s);
            let _ = parse_counts(&s);
            let _ = parse_cpu_list(&s);
            let _ = parse_rate_mb_s(&s);
        }

        #[test]
        fn near_valid_specs_never_panic(s in "[0-9kKmMgGiIbB.:xX+, -]{0,24}") {
            if let Ok(v) = parse_sizes(&s) {
                prop_assert!(v.len() <= MAX_VALUES);
                let mut seen = HashSet::new();
                prop_assert!(v.iter().all(|x| seen.insert(*x)));
            }
            let _ = parse_counts(&s);
            let _ = parse_cpu_list(&s);
        }

        #[test]
        fn format_size_round_trips(n in any::<u64>(), shift in 0u32..40) {
            let n = n >> shift;
            prop_assert_eq!(parse_size(&format_size(n)).unwrap(), n);
        }

        #[test]
        fn ranges_stay_within_bounds(a in 1u64..10_000, len in 0u64..100_000, step in 1u64..5_000) {
            let b = a + len;
            prop_assume!(len / step < MAX_VALUES as u64);
            let lin = parse_sizes(&format!("{a}..{b}:+{step}")).unwrap();
            prop_assert_eq!(lin.first(), Some(&a));
            prop_assert!(lin.iter().all(|&v| v <= b));
            prop_assert!(lin.last().map_or(0, |&l| l) + step > b);
            let geo = parse_sizes(&format!("{a}..{b}")).unwrap();
            prop_assert!(geo.iter().all(|&v| v <= b));
            prop_assert!(geo.last().map_or(0, |&l| l) * 2 > b);
        }
    }

    #[test]
    fn fractions_and_durations_read_as_written_and_refuse_the_rest() {
        assert_eq!(parse_fraction("1%"), Ok(0.01));
        assert_eq!(parse_fraction(" 0.5 % "), Ok(0.005));
        assert_eq!(parse_fraction("0.02"), Ok(0.02));
        for bad in ["", "%", "0%", "-1%", "nan", "inf%", "1x"] {
            assert!(parse_fraction(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_duration_ns("30"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_duration_ns("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration_ns("10 us"), Ok(10_000));
        for bad in ["", "s", "0s", "-1s", "1d", "1e10", "nan", "2 m s"] {
            assert!(parse_duration_ns(bad).is_err(), "{bad}");
        }
    }
}
