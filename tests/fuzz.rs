//! Hostile input to every parser of what a user gives: size and count lists (`--sizes`,
//! `--npp`), single sizes (`--size`, `--breakpoint`), CPU lists (`--cpus`) and result
//! documents and streams (`commbench report`, `plot`, `compare`). Each must answer with a value or a clean
//! error, never a panic, and what it accepts must hold: lists within their bound, sizes that
//! format and parse back, documents that render in every form, fit, compare and write back.

use commbench::analysis::compare;
use commbench::analysis::document::ResultDoc;
use commbench::analysis::fit::{self, Breakpoint};
use commbench::analysis::stream;
use commbench::core::launch::affinity;
use commbench::render;
use commbench::render::svg::PlotKind;
use commbench::render::text::Detail;
use commbench::render::{Csv, Markdown, Plot, Renderer, Text};
use commbench::spec::{
    format_size, parse_counts, parse_cpu_list, parse_size, parse_sizes, SpecError, MAX_VALUES,
};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::HashSet;

use crate::common;
// Each block runs a quarter of its full count unless COMMBENCH_TEST_SCALE=full (or
// PROPTEST_CASES) asks for more, always on the same inputs unless PROPTEST_RNG_SEED asks for
// others.
use common::scale::proptest_config as config;

// ---------------------------------------------------------------------------------------------
// Size, count and CPU lists.

/// An error's message: one line without control characters, even for input with line
/// breaks of its own, never empty.
fn check_message(input: &str, e: &SpecError) -> Result<(), TestCaseError> {
    let msg = e.to_string();
    prop_assert!(!msg.is_empty());
    prop_assert!(
        !msg.contains(char::is_control),
        "control characters in the message for {input:?}: {msg:?}"
    );
    Ok(())
}

fn distinct<T: std::hash::Hash + Eq + Copy>(v: &[T]) -> bool {
    let mut seen = HashSet::new();
    v.iter().all(|x| seen.insert(*x))
}

/// What every list parser must do with `s`: a bounded list of distinct values or a clean
/// error; counts never zero; a size parsed alone formats and parses back.
fn check_all_parsers(s: &str) -> Result<(), TestCaseError> {
    match parse_sizes(s) {
        Ok(v) => {
            prop_assert!(
                !v.is_empty() && v.len() <= MAX_VALUES,
                "{s:?}: {} sizes",
                v.len()
            );
            prop_assert!(distinct(&v), "{s:?}: duplicates in {v:?}");
        }
        Err(e) => check_message(s, &e)?,
    }
    match parse_counts(s) {
        Ok(v) => {
            prop_assert!(!v.is_empty() && v.len() <= MAX_VALUES);
            prop_assert!(distinct(&v) && !v.contains(&0), "{s:?}: {v:?}");
        }
        Err(e) => check_message(s, &e)?,
    }
    match parse_cpu_list(s) {
        Ok(v) => {
            prop_assert!(!v.is_empty() && v.len() <= MAX_VALUES);
            prop_assert!(distinct(&v), "{s:?}: {v:?}");
        }
        Err(e) => check_message(s, &e)?,
    }
    match parse_size(s) {
        Ok(n) => prop_assert_eq!(parse_size(&format_size(n)), Ok(n)),
        Err(e) => check_message(s, &e)?,
    }
    match s.parse::<Breakpoint>() {
        Ok(Breakpoint::At(n)) => prop_assert_eq!(parse_size(s), Ok(n)),
        Ok(_) => prop_assert!(matches!(s.trim(), "none" | "auto")),
        Err(e) => prop_assert!(!e.to_string().is_empty()),
    }
    Ok(())
}

/// Numbers at and past every edge: 0, `u64::MAX`, `2^64`, a hundred digits, suffixed values
/// that overflow only once multiplied.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "7",
    "64",
    "1023",
    "4096",
    "10000",
    "10001",
    "18446744073709551615",
    "18446744073709551616",
    "18446744073709551614",
    "17179869184",
    "17179869183",
    "9223372036854775808",
    "99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000001",
];

const SUFFIXES: &[&str] = &[
    "", "", "", "K", "k", "KiB", "kib", "KB", "M", "MiB", "mb", "G", "GiB", "g", "B", "b", "T",
    "iB", "Ki", " K", "KiBB", "e3", ".5", "\u{212A}", "\u{FF2B}", "\u{0130}",
];

const SEPARATORS: &[&str] = &[
    "..", "..", ":x", ":X", ":*", ":+", ":", ",", ",", "-", "-", " ", ".", "...", "..=", ":x:",
    ":+-", "\t", "\u{00A0}", "\u{2026}", ",,",
];

/// A list built of numbers, suffixes and separators, most of it almost valid.
fn soup() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        3 => prop::sample::select(NUMBERS).prop_map(str::to_string),
        2 => any::<u64>().prop_map(|n| n.to_string()),
        1 => (0u32..64).prop_map(|s| (1u64 << s).to_string()),
    ];
    let token = prop_oneof![
        4 => (number, prop::sample::select(SUFFIXES)).prop_map(|(n, s)| format!("{n}{s}")),
        3 => prop::sample::select(SEPARATORS).prop_map(str::to_string),
    ];
    prop::collection::vec(token, 0..12).prop_map(|v| v.concat())
}

/// One item of a size list and the values it must expand to (`None`: more than
/// [`MAX_VALUES`]), computed independently of the parser.
#[derive(Debug, Clone)]
struct Item {
    text: String,
    values: Option<Vec<u64>>,
}

/// A number as a user may write it: plain digits, or with the largest suffix that divides it
/// (spaced or not, in any case).
fn write_number(n: u64, style: u8) -> String {
    let units: [(u32, [&str; 3]); 3] = [
        (30, ["G", "GiB", "gb"]),
        (20, ["M", "MiB", "mb"]),
        (10, ["K", "KiB", "kib"]),
    ];
    if style % 4 != 0 && n != 0 {
        for (shift, names) in units {
            if n % (1 << shift) == 0 {
                let sep = if style % 2 == 0 { " " } else { "" };
                return format!("{}{sep}{}", n >> shift, names[usize::from(style) % 3]);
            }
        }
    }
    n.to_string()
}

/// The expansion of a range by a direct count, stopping past [`MAX_VALUES`].
fn expand(a: u64, b: u64, step: Result<u64, u64>) -> Option<Vec<u64>> {
    let mut v = Vec::new();
    let mut x = u128::from(a);
    while x <= u128::from(b) {
        if v.len() == MAX_VALUES {
            return None;
        }
        v.push(x as u64);
        x = match step {
            Ok(f) => x * u128::from(f),
            Err(s) => x + u128::from(s),
        };
    }
    Some(v)
}

fn edge() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        (0u32..64).prop_map(|s| 1u64 << s),
        (0u32..64, 0u64..3).prop_map(|(s, d)| (1u64 << s).saturating_sub(d)),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        0u64..20_000,
    ]
}

/// A well-formed item: a single size, a geometric range (factor 2 to `u64::MAX`, written or
/// the default) or a linear one (step 1 to `u64::MAX`), written in any of the accepted ways.
fn item() -> impl Strategy<Value = Item> {
    let single = (edge(), any::<u8>()).prop_map(|(n, st)| Item {
        text: write_number(n, st),
        values: Some(vec![n]),
    });
    let geometric = (
        edge(),
        edge(),
        prop_oneof![Just(None), (2u64..20).prop_map(Some), edge().prop_map(Some)],
        any::<u8>(),
    )
        .prop_map(|(x, y, f, st)| {
            let (a, b) = (x.min(y).max(1), x.max(y).max(1));
            let f = f.map(|f| f.max(2));
            let step = f.map_or(String::new(), |f| {
                format!(":{}{f}", ["x", "X", "*"][usize::from(st) % 3])
            });
            Item {
                text: format!("{}..{}{step}", write_number(a, st), write_number(b, st / 4)),
                values: expand(a, b, Ok(f.unwrap_or(2))),
            }
        });
    let linear = (edge(), edge(), edge(), any::<u8>()).prop_map(|(x, y, s, st)| {
        let (a, b, s) = (x.min(y), x.max(y), s.max(1));
        Item {
            text: format!(
                " {} .. {} :+{} ",
                write_number(a, st),
                write_number(b, st / 4),
                write_number(s, st / 16)
            ),
            values: expand(a, b, Err(s)),
        }
    });
    prop_oneof![single, geometric, linear]
}

proptest! {
    #![proptest_config(config(256, 1024))]

    #[test]
    fn arbitrary_text_in_every_list_parser(s in "\\PC{0,48}") {
        check_all_parsers(&s)?;
    }

    #[test]
    fn near_valid_lists_in_every_list_parser(s in soup()) {
        check_all_parsers(&s)?;
    }

    /// Sizes written as a report writes them (`4 KiB`, `1536 B`), joined by commas, read back
    /// as the same list (duplicates dropped, the first kept).
    #[test]
    fn formatted_sizes_parse_back(sizes in prop::collection::vec(edge(), 1..40)) {
        let text: Vec<String> = sizes.iter().map(|&n| format_size(n)).collect();
        let mut want = sizes.clone();
        let mut seen = HashSet::new();
        want.retain(|v| seen.insert(*v));
        prop_assert_eq!(parse_sizes(&text.join(", ")), Ok(want.clone()));
        prop_assert_eq!(parse_sizes(&text.join(",")), Ok(want.clone()));
        let plain: Vec<String> = sizes.iter().map(u64::to_string).collect();
        let counts = parse_counts(&plain.join(","));
        if sizes.contains(&0) {
            prop_assert!(matches!(counts, Err(SpecError::Zero { .. })), "{:?}", counts);
        } else {
            prop_assert_eq!(counts, Ok(want));
        }
    }

    /// Lists of well-formed items (single sizes and ranges at the edges of `u64`) expand to
    /// exactly what a direct count gives, or are refused for generating more than
    /// [`MAX_VALUES`] values, before allocating them.
    #[test]
    fn size_lists_match_a_direct_expansion(items in prop::collection::vec(item(), 1..5)) {
        let text: Vec<&str> = items.iter().map(|i| i.text.as_str()).collect();
        let spec = text.join(",");
        let mut all = Some(Vec::new());
        for i in &items {
            all = match (all, &i.values) {
                (Some(mut acc), Some(v)) if acc.len() + v.len() <= MAX_VALUES => {
                    acc.extend(v);
                    Some(acc)
                }
                _ => None,
            };
        }
        match all {
            Some(mut want) => {
                let mut seen = HashSet::new();
                want.retain(|v| seen.insert(*v));
                prop_assert_eq!(parse_sizes(&spec), Ok(want), "{}", spec);
            }
            None => {
                let got = parse_sizes(&spec);
                prop_assert!(
                    matches!(got, Err(SpecError::TooMany { .. })),
                    "{spec}: {:?}",
                    got.map(|v| v.len())
                );
            }
        }
    }

    /// CPU lists written with runs as ranges (as the kernel writes them) read back in order;
    /// a range past [`MAX_VALUES`] CPUs or one that repeats a CPU is an error.
    #[test]
    fn cpu_lists_parse_back(
        runs in prop::collection::vec((prop_oneof![0usize..5000, Just(usize::MAX - 3), any::<usize>()], 0usize..20), 1..12),
        spaced in any::<bool>(),
    ) {
        let mut want = Vec::new();
        let mut parts = Vec::new();
        for &(start, len) in &runs {
            let end = start.saturating_add(len);
            parts.push(if start == end {
                start.to_string()
            } else if spaced {
                format!(" {start} - {end} ")
            } else {
                format!("{start}-{end}")
            });
            want.extend(start..=end);
        }
        let spec = parts.join(",");
        match parse_cpu_list(&spec) {
            Ok(got) => {
                prop_assert_eq!(got, want);
            }
            Err(SpecError::DuplicateCpu { cpu, .. }) => {
                prop_assert!(!distinct(&want));
                prop_assert!(want.iter().filter(|&&c| c == cpu).count() > 1);
            }
            Err(SpecError::TooMany { .. }) => prop_assert!(want.len() > MAX_VALUES),
            Err(e) => prop_assert!(false, "{spec}: {e}"),
        }
    }

    /// Every rank of a run maps to a CPU of its list; pinning to a CPU this host cannot have is
    /// an error.
    #[test]
    fn cpu_of_every_rank(
        cpus in prop::collection::vec(any::<usize>(), 0..8),
        rank in any::<u32>(),
        far in (1usize << 20)..usize::MAX,
    ) {
        match affinity::cpu_for(&cpus, rank) {
            None => prop_assert!(cpus.is_empty()),
            Some(c) => prop_assert!(cpus.contains(&c)),
        }
        // On a thread of its own: the harness's threads keep their affinity.
        let pinned = std::thread::spawn(move || affinity::pin(Some(far)).is_err()).join();
        prop_assert!(pinned.unwrap_or(false), "pinning to CPU {far} did not fail cleanly");
    }
}

proptest! {
    #![proptest_config(config(128, 512))]

    /// CPU numbers as the kernel writes a list (ascending, runs as ranges) read back with
    /// `--cpus`'s parser as the same CPUs.
    #[test]
    fn kernel_cpu_lists_read_back(
        cpus in prop::collection::vec(
            prop_oneof![0usize..300, usize::MAX - 300..=usize::MAX, any::<usize>()],
            0..40,
        ),
    ) {
        let text = affinity::format_list(&cpus);
        let mut want = cpus.clone();
        want.sort_unstable();
        want.dedup();
        if want.is_empty() {
            prop_assert_eq!(text, "");
        } else {
            prop_assert_eq!(parse_cpu_list(&text), Ok(want), "{}", text);
        }
    }

    /// A run's CPUs checked against what this process may use: accepted exactly when every one
    /// is allowed, and otherwise a one-line error naming a CPU that is not.
    #[test]
    fn cpus_checked_against_the_affinity(
        cpus in prop::collection::vec(prop_oneof![0usize..16, any::<usize>()], 0..8),
        allowed in prop::collection::vec(0usize..16, 0..16),
        online in prop::option::of(prop::collection::vec(0usize..32, 0..32)),
    ) {
        match affinity::check_cpus(&cpus, &allowed, online.as_deref()) {
            Ok(()) => prop_assert!(cpus.iter().all(|c| allowed.contains(c))),
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(!msg.contains('\n'), "{}", msg);
                let bad = cpus.iter().find(|c| !allowed.contains(c));
                prop_assert!(bad.is_some_and(|b| msg.contains(&format!("CPU {b} "))), "{}", msg);
            }
        }
    }
}

/// A line break or tab inside a list was quoted as it was, breaking the one-line error
/// message: it is escaped.
#[test]
fn messages_quote_control_characters_escaped() {
    let cases = [
        ("4\nQ", parse_sizes("4\nQ").map(drop), "`4\\nQ`"),
        ("1,2\n-x", parse_cpu_list("1,2\n-x").map(drop), "`2\\n-x`"),
        ("\n", parse_sizes("\n").map(drop), "`\\n`"),
        ("0\t,\r1", parse_counts("0\t,\r1").map(drop), "`0\\t,\\r1`"),
        ("8\u{7}K", parse_size("8\u{7}K").map(drop), "`8\\u{7}K`"),
        (
            "1..8:\u{1b}[31m",
            parse_sizes("1..8:\u{1b}[31m").map(drop),
            "\\u{1b}[31m",
        ),
    ];
    for (input, parsed, quoted) in cases {
        let msg = parsed.expect_err(input).to_string();
        assert!(!msg.contains(char::is_control), "{input:?}: {msg:?}");
        assert!(msg.contains(quoted), "{input:?}: {msg:?} lacks {quoted}");
    }
}

/// Bounds refused before anything is allocated, at the edges of `u64` and `usize`.
#[test]
fn enormous_expansions_are_refused() {
    let max = u64::MAX;
    for spec in [
        format!("0..{max}:+1"),
        format!("1..{max}:+1"),
        format!("0..{max}:+1,1"),
        "0..16G:+1".to_string(),
        format!("1..{MAX_VALUES}:+1,0"),
    ] {
        assert!(
            matches!(parse_sizes(&spec), Err(SpecError::TooMany { .. })),
            "{spec}"
        );
    }
    for spec in [
        format!("0-{}", usize::MAX),
        format!("{}-{}", usize::MAX - MAX_VALUES, usize::MAX),
        format!("0-{}", MAX_VALUES),
    ] {
        assert!(
            matches!(parse_cpu_list(&spec), Err(SpecError::TooMany { .. })),
            "{spec}"
        );
    }
    assert_eq!(
        parse_cpu_list(&format!("{}", usize::MAX)),
        Ok(vec![usize::MAX])
    );
    assert_eq!(
        parse_sizes(&format!("{}..{max}:x{max}", max - 1)),
        Ok(vec![max - 1])
    );
    assert_eq!(parse_sizes(&format!("1..{max}:x{max}")), Ok(vec![1, max]));
    assert_eq!(parse_sizes(&format!("{max}..{max}:+{max}")), Ok(vec![max]));
    assert_eq!(parse_sizes("16G..16GiB:+16g"), Ok(vec![16 << 30]));
    assert!(matches!(
        parse_sizes("16777216T"),
        Err(SpecError::UnknownSuffix { .. })
    ));
    assert!(matches!(
        parse_sizes("17179869184G"),
        Err(SpecError::Overflow { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// Result documents.

/// Documents to mutate: the oldest format this version reads (0.1), and fresh runs of the
/// simulator with jitter (ping-pong and a bandwidth window, with the modality of each point).
const DOCS: [&str; 4] = [
    include_str!("../analysis/src/analysis/testdata/v0.1-sweep.json"),
    include_str!("../analysis/src/analysis/testdata/v0.1-fixed-npp.json"),
    include_str!("data/sim-pingpong-jitter.json"),
    include_str!("data/sim-bandwidth-jitter.json"),
];

/// One step of a path into a JSON value.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The number of values in `v`, itself included, containers as well as leaves.
fn count(v: &Value) -> usize {
    1 + match v {
        Value::Object(m) => m.values().map(count).sum(),
        Value::Array(a) => a.iter().map(count).sum(),
        _ => 0,
    }
}

/// The path to the `k`-th value of `v` in depth-first order (the root is the 0-th), built in
/// `here`; `k` is what is left to skip, and `true` when it was found.
fn nth_path(v: &Value, k: &mut usize, here: &mut Vec<Step>) -> bool {
    if *k == 0 {
        return true;
    }
    *k -= 1;
    let mut descend = |step: Step, x: &Value, k: &mut usize| {
        let n = count(x);
        if *k >= n {
            *k -= n;
            return false;
        }
        here.push(step);
        nth_path(x, k, here)
    };
    match v {
        Value::Object(m) => m
            .iter()
            .any(|(key, x)| descend(Step::Key(key.clone()), x, k)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .any(|(i, x)| descend(Step::Index(i), x, k)),
        _ => false,
    }
}

fn get_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match (v, s) {
        (Value::Object(m), Step::Key(k)) => m.get_mut(k),
        (Value::Array(a), Step::Index(i)) => a.get_mut(*i),
        _ => None,
    })
}

/// What a mutation does at its path.
#[derive(Debug, Clone)]
enum Mutation {
    /// Drop the key or element.
    Remove,
    /// Put this value there (the root keeps its schema and version, or nothing is read).
    Set(Value),
    /// Make an array `n` long by repeating its elements (an empty array stays empty).
    Grow(usize),
    /// Reverse an array.
    Reverse,
    /// Change what is there and keep its kind.
    Like(Like),
}

/// A change that keeps the kind of a value, so that the document still reads: an unsigned
/// integer becomes `u`, a negative one `i`, a float or a null (an undefined statistic) `f`, a
/// string `text` (the schema name excepted), an array of more than two elements (not a pair)
/// its first `len`, a boolean its opposite.
#[derive(Debug, Clone)]
struct Like {
    u: u64,
    i: i64,
    f: f64,
    text: &'static str,
    len: usize,
}

fn like() -> impl Strategy<Value = Like> {
    let u = prop_oneof![
        Just(0u64),
        Just(1),
        Just(2),
        Just(u64::MAX),
        Just(u64::MAX / 2),
        Just(i64::MAX as u64 + 1),
        any::<u64>(),
        0u64..100,
    ];
    let i = prop_oneof![Just(i64::MIN), Just(-1i64), any::<i64>()];
    let f = prop_oneof![
        Just(0.0f64),
        Just(-0.0),
        Just(5e-324),
        Just(f64::MIN_POSITIVE),
        Just(1e308),
        Just(-1e308),
        Just(f64::MAX),
        Just(-1.0),
        Just(1.0),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |x| x.is_finite()),
        -10.0f64..10.0,
    ];
    (u, i, f, prop::sample::select(TEXTS), 0usize..3).prop_map(|(u, i, f, text, len)| Like {
        u,
        i,
        f,
        text,
        len,
    })
}

fn hostile_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::from(0)),
        Just(Value::from(-1)),
        Just(Value::from(1)),
        Just(Value::from(2)),
        Just(Value::from(u64::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(i64::MAX)),
        Just(Value::from(18446744073709551616.0f64)),
        Just(Value::from(1e308)),
        Just(Value::from(-1e308)),
        Just(Value::from(5e-324)),
        Just(Value::from(-0.0)),
        Just(Value::from(0.5)),
        Just(Value::from(-2.5)),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |x| x.is_finite())
            .prop_map(Value::from),
    ]
}

/// Text put where a document has text: empty, what other keys hold, control characters.
const TEXTS: &[&str] = &[
    "",
    "NaN",
    "inf",
    "pingpong",
    "exchange",
    "bandwidth",
    "transpose",
    "sim",
    "partial",
    "interrupted",
    "auto",
    "fixed",
    "study",
    "\u{0}\n\u{202e}\t<svg>&amp;\"",
    "x\u{301}\u{1F600}",
];

fn hostile_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        4 => hostile_number(),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::from),
        1 => prop::sample::select(TEXTS).prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn mutation() -> impl Strategy<Value = (prop::sample::Index, Mutation)> {
    (
        any::<prop::sample::Index>(),
        prop_oneof![
            2 => Just(Mutation::Remove),
            5 => hostile_value().prop_map(Mutation::Set),
            1 => prop_oneof![0usize..4, 100usize..400].prop_map(Mutation::Grow),
            1 => Just(Mutation::Reverse),
            8 => like().prop_map(Mutation::Like),
        ],
    )
}

fn apply(doc: &mut Value, at: &prop::sample::Index, m: &Mutation) {
    let mut k = at.index(count(doc));
    let mut path = Vec::new();
    nth_path(doc, &mut k, &mut path);
    if path.is_empty() {
        return;
    }
    match m {
        Mutation::Remove => {
            let (last, parent) = path.split_last().expect("a path below the root");
            match (get_mut(doc, parent), last) {
                (Some(Value::Object(o)), Step::Key(k)) => {
                    o.remove(k);
                }
                (Some(Value::Array(a)), Step::Index(i)) if *i < a.len() => {
                    a.remove(*i);
                }
                _ => {}
            }
        }
        Mutation::Set(v) => {
            if let Some(slot) = get_mut(doc, &path) {
                *slot = v.clone();
            }
        }
        Mutation::Grow(n) => {
            if let Some(Value::Array(a)) = get_mut(doc, &path) {
                if !a.is_empty() {
                    let grown: Vec<Value> = a.iter().cycle().take(*n).cloned().collect();
                    *a = grown;
                }
            }
        }
        Mutation::Reverse => {
            if let Some(Value::Array(a)) = get_mut(doc, &path) {
                a.reverse();
            }
        }
        Mutation::Like(l) => {
            let schema = matches!(path.last(), Some(Step::Key(k)) if k == "schema");
            match get_mut(doc, &path) {
                Some(v @ Value::Number(_)) if v.is_u64() => *v = Value::from(l.u),
                Some(v @ Value::Number(_)) if v.is_i64() => *v = Value::from(l.i),
                Some(v @ (Value::Number(_) | Value::Null)) => *v = Value::from(l.f),
                Some(Value::String(s)) if !schema => *s = l.text.to_string(),
                Some(Value::Array(a)) if a.len() > 2 => a.truncate(l.len),
                Some(Value::Bool(b)) => *b = !*b,
                _ => {}
            }
        }
    }
}

/// Why a document did not read: a one-line reason without control characters (the CLI prints
/// it after the file name), never empty.
fn check_doc_error(e: &commbench::core::Error) -> Result<(), TestCaseError> {
    let msg = e.to_string();
    prop_assert!(!msg.is_empty());
    prop_assert!(!msg.contains(char::is_control), "{:?}", msg);
    Ok(())
}

/// Everything `report`, `plot` and `compare` do with a document that reads, against `other`
/// (a document that reads too): every text detail, Markdown, CSV, each plot, fits at every
/// breakpoint, point warnings, a comparison both ways, and writing it back.
fn exercise(doc: &ResultDoc, other: &ResultDoc) -> Result<(), TestCaseError> {
    let fits = fit::fits_of(doc);
    for detail in [Detail::Table, Detail::Summary, Detail::Full] {
        let _ = Text::new(detail).report(doc, doc.fit.as_slice());
        let _ = Text::new(detail).render(doc, &fits);
    }
    let _ = Markdown.render(doc, &fits);
    let _ = Csv.render(doc, &fits);
    let mut sizes: Vec<Option<u64>> = vec![None, Some(0), Some(u64::MAX)];
    sizes.extend(doc.points.iter().take(3).map(|p| Some(p.size)));
    for kind in [
        PlotKind::Latency,
        PlotKind::Bandwidth,
        PlotKind::Signature,
        PlotKind::Histogram,
    ] {
        let tries = if kind == PlotKind::Histogram {
            &sizes[..]
        } else {
            &sizes[..1]
        };
        for &size in tries {
            if let Ok(svg) = Plot::new(kind, size).render(doc, &fits) {
                prop_assert!(svg.contains("<svg"), "{kind:?}: {svg}");
            }
        }
    }
    let fresh = fit::fit_points(&doc.points, Breakpoint::Auto, None);
    let _ = Plot::new(PlotKind::Latency, None).render(doc, &fresh);
    let mut breakpoints = vec![
        Breakpoint::None,
        Breakpoint::At(0),
        Breakpoint::At(u64::MAX),
    ];
    breakpoints.extend(doc.points.iter().take(3).map(|p| Breakpoint::At(p.size)));
    for b in breakpoints {
        for ips in [None, Some(0.0), Some(-1.0), Some(1e9), Some(f64::NAN)] {
            for f in fit::fit_points(&doc.points, b, ips) {
                let _ = f.warnings();
                let mut out = String::new();
                render::fit::fit_section(&mut out, &f);
            }
        }
    }
    for p in &doc.points {
        let _ = p.warnings();
    }
    for (a, b) in [(doc, other), (other, doc), (doc, doc)] {
        if let Ok(rows) = compare::compare(a, b, 20, 7) {
            let _ = render::compare::table(&rows);
            let _ = render::compare::notes(&rows);
            let _ = render::compare::report("a.json", a, "b.json", b, &rows);
            for r in &rows {
                let _ = r.slower_than(5.0);
            }
        }
    }
    let runs = [doc, other, doc];
    if let Ok(rows) = compare::compare_runs(&runs, &runs, 20, 7) {
        let names = ["1".to_string(), "2".to_string(), "3".to_string()];
        let side = render::compare::Side {
            names: &names,
            runs: &runs,
        };
        let _ = render::compare::report_runs(side, side, &rows);
    }
    // What reads writes back and reads again, to the same points. (Numbers may move in the
    // last digit: serde_json's default float parsing is not correctly rounded.)
    let mut written = Vec::new();
    doc.write_json(&mut written)
        .map_err(|e| TestCaseError::fail(format!("writing back: {e}")))?;
    let text = String::from_utf8(written).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let again = ResultDoc::read_json(&text)
        .map_err(|e| TestCaseError::fail(format!("reading back: {e}\n{text}")))?;
    let key = |d: &ResultDoc| -> Vec<(String, u64, u64, Vec<i64>)> {
        d.points
            .iter()
            .map(|p| (p.pattern.clone(), p.size, p.npp, p.trial_ns.clone()))
            .collect()
    };
    prop_assert_eq!(key(&again), key(doc));
    prop_assert_eq!(&again.status, &doc.status);
    let sizes = |d: &ResultDoc| d.config.as_ref().map(|c| c.method.sizes.clone());
    prop_assert_eq!(sizes(&again), sizes(doc));
    Ok(())
}

proptest! {
    #![proptest_config(config(64, 4000))]

    /// A real document with one to four parts removed, replaced by values of any type (huge,
    /// negative, fractional, null where NaN is meant), repeated into long arrays or reversed:
    /// it reads or is a clean error, and what reads renders, fits, compares and writes back.
    #[test]
    fn mutated_documents_read_or_fail_cleanly(
        which in 0..DOCS.len(),
        other in 0..DOCS.len(),
        muts in prop::collection::vec(mutation(), 1..5),
    ) {
        let mut v: Value = serde_json::from_str(DOCS[which]).unwrap();
        for (at, m) in &muts {
            apply(&mut v, at, m);
        }
        let text = serde_json::to_string(&v).unwrap();
        match ResultDoc::read_json(&text) {
            Ok(doc) => {
                let other = ResultDoc::read_json(DOCS[other]).unwrap();
                exercise(&doc, &other)?;
            }
            Err(e) => check_doc_error(&e)?,
        }
    }

}

/// Streams to mutate: a simulated sweep and an all-pairs run, as `--stream` wrote them.
const STREAMS: [&str; 2] = [
    include_str!("data/sim-pingpong.jsonl"),
    include_str!("data/sim-allpairs.jsonl"),
];

proptest! {
    #![proptest_config(config(64, 4000))]

    /// A real stream with lines mutated as documents are, then a line dropped, repeated or
    /// moved, or the text cut at any character (a kill in the middle of a write): it reads as
    /// a document or is a clean error, and what reads renders, fits, compares and writes back.
    #[test]
    fn mutated_streams_read_or_fail_cleanly(
        which in 0..STREAMS.len(),
        other in 0..DOCS.len(),
        muts in prop::collection::vec((any::<prop::sample::Index>(), mutation()), 0..4),
        (how, at, to) in (0..4u8, any::<prop::sample::Index>(), any::<prop::sample::Index>()),
    ) {
        let mut lines: Vec<Value> = STREAMS[which]
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for (line, (path, m)) in &muts {
            let i = line.index(lines.len());
            apply(&mut lines[i], path, m);
        }
        let (i, j) = (at.index(lines.len()), to.index(lines.len()));
        match how {
            0 => {
                lines.remove(i);
            }
            1 => lines.insert(j, lines[i].clone()),
            2 => lines.swap(i, j),
            _ => {}
        }
        let mut text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        if how == 3 {
            let cut = at.index(text.len() + 1);
            let cut = (0..=cut).rev().find(|&k| text.is_char_boundary(k)).unwrap_or(0);
            text.truncate(cut);
        }
        match stream::read_document(&text) {
            Ok(doc) => {
                let other = ResultDoc::read_json(DOCS[other]).unwrap();
                exercise(&doc, &other)?;
                if let Some(m) = &doc.allpairs {
                    for &size in m.sizes.iter().take(2) {
                        let _ = m.medians(size);
                    }
                    let _ = Plot::new(PlotKind::Matrix, None).render(&doc, &[]);
                }
            }
            Err(e) => check_doc_error(&e)?,
        }
    }
}

#[test]
fn streams_read_as_their_documents() {
    for text in STREAMS {
        let doc = stream::read_document(text).unwrap();
        assert_eq!(doc.status, "complete");
        let other = ResultDoc::read_json(DOCS[2]).unwrap();
        exercise(&doc, &other).unwrap();
    }
    let doc = stream::read_document(STREAMS[1]).unwrap();
    assert_eq!(doc.allpairs.unwrap().cells.len(), 12);
}

proptest! {
    #![proptest_config(config(32, 2000))]

    /// A real document with many numbers, texts and arrays changed at once, each keeping its
    /// kind, so that most of them still read: every statistic of a point may disagree with
    /// the others and with the trials.
    #[test]
    fn documents_with_many_values_changed(
        which in 0..DOCS.len(),
        other in 0..DOCS.len(),
        changes in prop::collection::vec((any::<prop::sample::Index>(), like()), 8..40),
    ) {
        let mut v: Value = serde_json::from_str(DOCS[which]).unwrap();
        for (at, l) in changes {
            apply(&mut v, &at, &Mutation::Like(l));
        }
        if let Ok(doc) = ResultDoc::read_json(&v.to_string()) {
            let other = ResultDoc::read_json(DOCS[other]).unwrap();
            exercise(&doc, &other)?;
        }
    }

    /// Arbitrary text, and a real document cut short or with characters changed.
    #[test]
    fn damaged_text_reads_or_fails_cleanly(
        which in 0..DOCS.len(),
        cut in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), "[\\PC\"{}\\[\\],:0-9.eE+-]"), 0..4),
        junk in "\\PC{0,64}",
    ) {
        if let Err(e) = ResultDoc::read_json(&junk) {
            check_doc_error(&e)?;
        }
        let mut chars: Vec<char> = DOCS[which].chars().collect();
        for (at, c) in &edits {
            let i = at.index(chars.len());
            chars[i] = c.chars().next().unwrap_or(' ');
        }
        let text: String = chars.iter().collect();
        let other = ResultDoc::read_json(DOCS[0]).unwrap();
        if let Ok(doc) = ResultDoc::read_json(&text) {
            exercise(&doc, &other)?;
        }
        // A document cut short (before its closing brace) is an error.
        let whole = DOCS[which].trim_end();
        let end = cut.index(whole.len());
        let prefix: String = whole.chars().take(end).collect();
        prop_assert!(ResultDoc::read_json(&prefix).is_err());
    }
}

proptest! {
    #![proptest_config(config(4, 4))]

    /// Points with tens of thousands of trials and distinct times, where the summary statistics
    /// and the trials disagree: rendering and comparing stay bounded (comparisons subsample).
    #[test]
    fn huge_trial_arrays_render(
        which in 0..DOCS.len(),
        n in 10_000usize..40_000,
        scale in prop_oneof![Just(1i64), Just(-1), Just(i64::MAX / 100_000), Just(0)],
    ) {
        let mut v: Value = serde_json::from_str(DOCS[which]).unwrap();
        if let Some(Value::Array(points)) = v.get_mut("points") {
            for p in points.iter_mut() {
                let trials: Vec<Value> = (0..n as i64).map(|i| Value::from(i * scale + i % 7)).collect();
                p["trial_ns"] = Value::Array(trials);
                p["trials"] = Value::from(n as u64);
                if let Some(o) = p.as_object_mut() {
                    o.remove("modality");
                }
            }
        }
        let doc = ResultDoc::read_json(&v.to_string()).unwrap();
        let other = ResultDoc::read_json(DOCS[(which + 1) % DOCS.len()]).unwrap();
        exercise(&doc, &other)?;
    }
}

/// A JSON pointer into a document and the value to put there.
type Change<'a> = (&'a str, Value);

/// `DOCS[which]` with the value at each JSON pointer replaced.
fn doc_with(which: usize, changes: &[Change]) -> String {
    let mut v: Value = serde_json::from_str(DOCS[which]).unwrap();
    for (at, x) in changes {
        *v.pointer_mut(at).unwrap_or_else(|| panic!("no {at}")) = x.clone();
    }
    v.to_string()
}

/// A median's CI ending at 0 or at the smallest float put a log axis's end at 0, whose decade
/// (`i32::MIN`) overflowed the tick count (`attempt to subtract with overflow` in the SVG
/// canvas; billions of ticks in a release build), and a CI starting at the smallest float gave
/// the bandwidth plot's linear axis a step of 0, whose ticks never ended. Ends at 0, below the
/// smallest normal float or past the largest draw with a bounded number of ticks.
#[test]
fn plots_with_axis_ends_at_zero_denormal_or_huge() {
    let cases = [
        (0, "/points/1/one_way_us/ci95_median/hi", Value::from(0)),
        (
            3,
            "/points/1/one_way_us/ci95_median/hi",
            Value::from(5e-324),
        ),
        (
            0,
            "/points/1/one_way_us/ci95_median/lo",
            Value::from(5e-324),
        ),
        (0, "/points/1/one_way_us/median", Value::from(1e308)),
        (2, "/points/0/one_way_us/median", Value::from(-1e308)),
        (2, "/points/0/rate_mb_s/median", Value::from(5e-324)),
        (3, "/points/0/size", Value::from(0)),
        (3, "/points/1/size", Value::from(u64::MAX)),
    ];
    for (which, at, x) in cases {
        let doc = ResultDoc::read_json(&doc_with(which, &[(at, x.clone())])).unwrap();
        let fits = fit::fits_of(&doc);
        for kind in [
            PlotKind::Latency,
            PlotKind::Bandwidth,
            PlotKind::Signature,
            PlotKind::Histogram,
        ] {
            if let Ok(svg) = Plot::new(kind, None).render(&doc, &fits) {
                assert!(
                    svg.len() < 1 << 20,
                    "{at} = {x}: {kind:?} is {} bytes",
                    svg.len()
                );
            }
        }
        let other = ResultDoc::read_json(DOCS[0]).unwrap();
        exercise(&doc, &other).unwrap_or_else(|e| panic!("{at} = {x}: {e}"));
    }
}

/// serde quotes an unknown name as the document wrote it, so a line break in it broke the
/// one-line reason `commbench report` prints: it is escaped.
#[test]
fn malformed_text_is_quoted_on_one_line() {
    let text = doc_with(
        0,
        &[(
            "/config/pattern/kind",
            Value::from("\u{0}\n\u{202e}\t<svg>&amp;\""),
        )],
    );
    let e = ResultDoc::read_json(&text).unwrap_err().to_string();
    assert!(!e.contains(char::is_control), "{e:?}");
    assert!(
        e.contains("unknown variant `\\u{0}\\n\u{202e}\\t<svg>"),
        "{e}"
    );
}

/// Counts no run writes, on which the analysis overflowed (`attempt to multiply with
/// overflow` dividing a trial by npp times the trips per iteration; `attempt to add with
/// overflow` adding the trials kept and removed): the document is malformed.
#[test]
fn counts_beyond_64_bits_are_malformed() {
    let cases: [(usize, &[Change], &str); 4] = [
        (
            0,
            &[("/points/0/trips_per_iteration", Value::from(i64::MAX))],
            "trips_per_iteration",
        ),
        (2, &[("/points/1/npp", Value::from(u64::MAX))], "npp"),
        (
            3,
            &[
                ("/points/0/npp", Value::from(1u64 << 32)),
                ("/points/0/trips_per_iteration", Value::from(1u64 << 32)),
            ],
            "npp",
        ),
        (
            1,
            &[
                ("/points/0/filtered/kept", Value::from(u64::MAX)),
                ("/points/0/filtered/removed", Value::from(1)),
            ],
            "removed",
        ),
    ];
    for (which, changes, named) in cases {
        let e = ResultDoc::read_json(&doc_with(which, changes))
            .expect_err(named)
            .to_string();
        assert!(
            e.contains("malformed result document") && e.contains(named),
            "{e}"
        );
    }
    // At the edge, the counts read and render.
    let text = doc_with(
        2,
        &[
            ("/points/0/npp", Value::from(u64::MAX / 2)),
            ("/points/0/trips_per_iteration", Value::from(2)),
            ("/points/1/filtered/kept", Value::from(u64::MAX - 1)),
            ("/points/1/filtered/removed", Value::from(1)),
        ],
    );
    let doc = ResultDoc::read_json(&text).unwrap();
    let other = ResultDoc::read_json(DOCS[0]).unwrap();
    exercise(&doc, &other).unwrap();
}
