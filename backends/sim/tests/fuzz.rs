//! Hostile simulator configurations: arbitrary text, mutated presets (each field removed or set
//! to zero, a negative, NaN, an infinity, a huge number, a value of the wrong type) and deeply
//! nested TOML. `SimConfig::from_toml_str` must answer every one with a config or a clean
//! error, never a panic; a config it accepts must validate, write back to the same config,
//! evaluate its times at any size, and run a tiny measured ping-pong to an answer.

use commbench_core::method::engine::Measurement;
use commbench_core::method::{MethodConfig, NppChoice, PatternKind};
use commbench_core::Error;
use commbench_sim::{run, SimConfig};
use proptest::prelude::*;

use crate::common;
// Each block runs a quarter of its full count unless COMMBENCH_TEST_SCALE=full (or
// PROPTEST_CASES) asks for more, always on the same inputs unless PROPTEST_RNG_SEED asks for
// others.
use common::scale::proptest_config as config;

/// One step of a path into a TOML value.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// Every path into `v`, the root (empty path) included, tables and arrays as well as leaves.
fn paths(v: &toml::Value, here: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(here.clone());
    match v {
        toml::Value::Table(t) => {
            for (k, x) in t {
                here.push(Step::Key(k.clone()));
                paths(x, here, out);
                here.pop();
            }
        }
        toml::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                here.push(Step::Index(i));
                paths(x, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(v: &'a mut toml::Value, path: &[Step]) -> Option<&'a mut toml::Value> {
    path.iter().try_fold(v, |v, s| match (v, s) {
        (toml::Value::Table(t), Step::Key(k)) => t.get_mut(k),
        (toml::Value::Array(a), Step::Index(i)) => a.get_mut(*i),
        _ => None,
    })
}

/// What a mutation does at its path.
#[derive(Debug, Clone)]
enum Mutation {
    /// Drop the key or element (the root is left alone).
    Remove,
    /// Put this value there.
    Set(toml::Value),
    /// Add (or replace) a key of a table there.
    Insert(String, toml::Value),
}

fn piece() -> impl Strategy<Value = toml::Value> {
    (
        prop_oneof![
            Just(0i64),
            Just(-1),
            Just(i64::MAX),
            any::<i64>(),
            0i64..100_000
        ],
        hostile_float(),
        hostile_float(),
    )
        .prop_map(|(from, base, per)| {
            let mut t = toml::Table::new();
            t.insert("from".into(), toml::Value::Integer(from));
            t.insert("base_us".into(), toml::Value::Float(base));
            t.insert("per_byte_us".into(), toml::Value::Float(per));
            toml::Value::Table(t)
        })
}

fn hostile_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(-1.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        Just(5e-324),
        Just(1e12),
        Just(1e12 + 1.0),
        Just(1e300),
        Just(f64::MAX),
        0.0f64..10.0,
        any::<f64>(),
    ]
}

fn hostile_value() -> impl Strategy<Value = toml::Value> {
    use toml::Value as V;
    prop_oneof![
        prop_oneof![
            Just(0i64),
            Just(-1),
            Just(1),
            Just(2),
            Just(16),
            Just(17),
            Just(31),
            Just(32),
            Just(63),
            Just(64),
            Just(65),
            Just(1 << 20),
            Just((1 << 20) + 1),
            Just(i64::MAX),
            Just(i64::MIN),
            any::<i64>(),
        ]
        .prop_map(V::Integer),
        hostile_float().prop_map(V::Float),
        prop_oneof![
            Just(""),
            Just("ncube7"),
            Just("generic"),
            Just("x"),
            Just("1e3")
        ]
        .prop_map(|s| V::String(s.into())),
        any::<bool>().prop_map(V::Boolean),
        Just(V::Array(vec![])),
        Just(V::Table(toml::Table::new())),
        prop::collection::vec(piece(), 0..40).prop_map(V::Array),
        piece(),
    ]
}

fn mutation() -> impl Strategy<Value = (prop::sample::Index, Mutation)> {
    let key = prop_oneof![
        Just("preset"),
        Just("name"),
        Just("dimensions"),
        Just("ranks"),
        Just("tick_ns"),
        Just("clock_read_ns"),
        Just("poll_ns"),
        Just("compute_ns_per_iter"),
        Just("recv_buffer_bytes"),
        Just("seed"),
        Just("jitter_ns"),
        Just("spin_limit"),
        Just("stack_kib"),
        Just("times"),
        Just("E"),
        Just("from"),
        Just("base_us"),
        Just("per_byte_us"),
        Just("bogus"),
    ];
    (
        any::<prop::sample::Index>(),
        prop_oneof![
            1 => Just(Mutation::Remove),
            3 => hostile_value().prop_map(Mutation::Set),
            2 => (key, hostile_value()).prop_map(|(k, v)| Mutation::Insert(k.into(), v)),
        ],
    )
}

fn apply(doc: &mut toml::Value, at: &prop::sample::Index, m: &Mutation) {
    let mut all = Vec::new();
    paths(doc, &mut Vec::new(), &mut all);
    let path = at.get(&all).clone();
    match m {
        Mutation::Remove => {
            let Some((last, parent)) = path.split_last() else {
                return;
            };
            match (get_mut(doc, parent), last) {
                (Some(toml::Value::Table(t)), Step::Key(k)) => {
                    t.remove(k);
                }
                (Some(toml::Value::Array(a)), Step::Index(i)) if *i < a.len() => {
                    a.remove(*i);
                }
                _ => {}
            }
        }
        Mutation::Set(v) => {
            // The root stays a table, as a TOML document must be.
            if path.is_empty() && !v.is_table() {
                return;
            }
            if let Some(slot) = get_mut(doc, &path) {
                *slot = v.clone();
            }
        }
        Mutation::Insert(k, v) => {
            if let Some(toml::Value::Table(t)) = get_mut(doc, &path) {
                t.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A preset as the TOML table a file would hold: in full, or as `preset = NAME` and nothing
/// else.
fn base_doc(preset: &str, full: bool) -> toml::Value {
    if full {
        toml::Value::try_from(SimConfig::preset(preset).unwrap()).unwrap()
    } else {
        let mut t = toml::Table::new();
        t.insert("preset".into(), toml::Value::String(preset.into()));
        toml::Value::Table(t)
    }
}

/// Sizes at which every time is evaluated: the edges of `u64` and each section's start.
fn probe_sizes(cfg: &SimConfig) -> Vec<u64> {
    let t = &cfg.times;
    let mut v = vec![0, 1, 8, 4096, 1 << 32, u64::MAX / 2, u64::MAX - 1, u64::MAX];
    for l in [&t.f, &t.s, &t.r, &t.a, &t.u, &t.e] {
        for p in l.pieces() {
            v.extend([p.from.saturating_sub(1), p.from, p.from.saturating_add(1)]);
        }
    }
    v
}

/// A measured ping-pong of one 8-byte size between the first and last rank: 3 trials after
/// a warm-up, npp fixed at 2, a 10-pair timer characterisation. What the CLI checks first
/// ([`commbench_sim::check_run`]) refuses it as a configuration error; every time it
/// reports is finite and non-negative.
fn tiny_pingpong(cfg: &SimConfig) -> commbench_core::Result<()> {
    measured_pingpong(cfg, 3)
}

/// [`tiny_pingpong`] with `trials` trials.
fn measured_pingpong(cfg: &SimConfig, trials: u64) -> commbench_core::Result<()> {
    let method = MethodConfig {
        trials,
        ..tiny_method(cfg)
    };
    commbench_sim::check_run(cfg, &method, &method.sizes, &|_| 2).map_err(Error::Config)?;
    let m = Measurement::new(PatternKind::PingPong, method, None);
    let ran = run(cfg, &m).map(|_| ());
    for p in m.take_collected().points {
        for &t in &p.trial_ns {
            assert!(t >= 0, "a negative trial time {t} ns on {cfg:?}");
        }
        if let Some(m) = p.median_ppt_ns {
            assert!(m.is_finite() && m >= 0.0, "median {m} ns on {cfg:?}");
        }
    }
    ran
}

/// The method of [`tiny_pingpong`].
fn tiny_method(cfg: &SimConfig) -> MethodConfig {
    MethodConfig {
        sizes: vec![8],
        trials: 3,
        warmup: 1,
        npp: NppChoice::Fixed(2),
        timer_samples: 10,
        source: 0,
        dest: cfg.ranks() - 1,
        ..MethodConfig::default()
    }
}

/// A config error: on one line without control characters (the CLI prints it after
/// `commbench: error:`), never empty.
fn check_error(text: &str, e: &Error) -> Result<(), TestCaseError> {
    prop_assert!(matches!(e.root(), Error::Config(_)), "{text}\n{e}");
    let msg = e.to_string();
    prop_assert!(!msg.is_empty());
    prop_assert!(!msg.contains(char::is_control), "{text:?}: {msg:?}");
    Ok(())
}

/// `text` read: a config that survives [`check_accepted`] (without a run) or a clean error.
fn check_read(text: &str) -> Result<(), TestCaseError> {
    match SimConfig::from_toml_str(text) {
        Ok(cfg) => check_accepted(&cfg, false),
        Err(e) => check_error(text, &e),
    }
}

/// Everything a config that `from_toml_str` accepted must survive.
fn check_accepted(cfg: &SimConfig, run_it: bool) -> Result<(), TestCaseError> {
    prop_assert!(cfg.validate().is_ok(), "accepted but invalid: {cfg:?}");
    let text = toml::to_string(cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back = SimConfig::from_toml_str(&text);
    prop_assert_eq!(
        back.as_ref().ok(),
        Some(cfg),
        "written as\n{}\n{:?}",
        text,
        back
    );
    let nodes = cfg.nodes();
    prop_assert!(cfg.ranks() >= 1 && cfg.ranks() <= nodes);
    let _ = commbench_sim::transport(cfg);
    for n in probe_sizes(cfg) {
        let t = &cfg.times;
        for l in [&t.f, &t.s, &t.r, &t.a, &t.u, &t.e] {
            let _ = l.ns(n);
        }
        for d in [0, 1, cfg.dimensions.max(1), 31, 32, u32::MAX] {
            let _ = cfg.pingpong_one_way_ns(n, d);
        }
    }
    // A run is cheap on a small machine; larger ones only cost time, not coverage.
    if run_it && cfg.ranks() >= 2 && nodes <= 16 {
        let mut small = cfg.clone();
        small.stack_kib = small.stack_kib.min(1024);
        if let Err(e) = tiny_pingpong(&small) {
            prop_assert!(!e.to_string().is_empty());
            if at_bounds(cfg) {
                // Beyond what the clock holds is a configuration error, never garbage.
                prop_assert!(
                    matches!(e.root(), Error::Config(_) | Error::Deadlock(_)),
                    "{e}"
                );
            }
        }
    }
    Ok(())
}

/// Whether `cfg` has a value near a documented bound (the costs that can overflow a clock).
fn at_bounds(cfg: &SimConfig) -> bool {
    cfg.tick_ns > 1_000_000_000
        || cfg.jitter_ns > 1_000_000_000
        || cfg.clock_read_ns > 1_000_000_000
}

/// Pieces of TOML and of this format's keys and values, for text that is nearly a config.
const TOKENS: &[&str] = &[
    "preset",
    "dimensions",
    "ranks",
    "tick_ns",
    "stack_kib",
    "jitter_ns",
    "times",
    "E",
    "F",
    "from",
    "base_us",
    "per_byte_us",
    "x",
    " ",
    "=",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    ".",
    "\"",
    "'",
    "\n",
    "-",
    "+",
    "0",
    "1",
    "16",
    "65",
    "9223372036854775807",
    "9223372036854775808",
    "1e12",
    "1e400",
    "0.5",
    "nan",
    "inf",
    "-inf",
    "true",
    "\"ncube7\"",
    "\"generic\"",
    "#",
];

proptest! {
    #![proptest_config(config(128, 8000))]

    #[test]
    fn arbitrary_text_is_a_config_or_an_error(s in "\\PC{0,200}") {
        check_read(&s)?;
    }

    #[test]
    fn toml_shaped_text_is_a_config_or_an_error(
        s in prop::collection::vec(prop::sample::select(TOKENS), 0..40).prop_map(|t| t.concat())
    ) {
        check_read(&s)?;
    }

    /// Characters of a preset file replaced, dropped or added at random places.
    #[test]
    fn edited_preset_text_is_a_config_or_an_error(
        preset in prop_oneof![Just("ncube7"), Just("generic")],
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, "\\PC"), 1..6),
    ) {
        let text = toml::to_string(&SimConfig::preset(preset).unwrap()).unwrap();
        let mut chars: Vec<char> = text.chars().collect();
        for (at, op, c) in &edits {
            let c = c.chars().next().unwrap_or('x');
            let i = at.index(chars.len() + 1);
            match op {
                0 if i < chars.len() => chars[i] = c,
                1 if i < chars.len() => {
                    chars.remove(i);
                }
                _ => chars.insert(i, c),
            }
        }
        let s: String = chars.into_iter().collect();
        check_read(&s)?;
    }
}

proptest! {
    #![proptest_config(config(96, 8000))]

    /// A preset written out whole, or named with `preset = `, then one to four fields
    /// removed or set to hostile values; whatever is accepted also runs a tiny ping-pong.
    #[test]
    fn mutated_presets_are_a_config_or_an_error(
        preset in prop_oneof![Just("ncube7"), Just("generic"), Just("nope")],
        full in any::<bool>(),
        muts in prop::collection::vec(mutation(), 1..5),
    ) {
        let mut doc = base_doc(if full && preset == "nope" { "generic" } else { preset }, full);
        for (at, m) in &muts {
            apply(&mut doc, at, m);
        }
        // Some values (a table in an array of numbers) have no TOML text: nothing to read.
        let Ok(text) = toml::to_string(&doc) else { return Ok(()) };
        match SimConfig::from_toml_str(&text) {
            Ok(cfg) => check_accepted(&cfg, true)?,
            Err(e) => check_error(&text, &e)?,
        }
    }
}

/// A time of one to three sections with coefficients up to 1e6 µs and 10 µs per byte.
fn in_range_time() -> impl Strategy<Value = commbench_sim::Linear> {
    prop::collection::vec((1u64..100_000, 0.0f64..1e6, 0.0f64..10.0), 1..4).prop_map(|v| {
        let mut from = 0;
        let pieces = v
            .into_iter()
            .enumerate()
            .map(|(i, (gap, base_us, per_byte_us))| {
                if i > 0 {
                    from += gap;
                }
                commbench_sim::Piece {
                    from,
                    base_us,
                    per_byte_us,
                }
            })
            .collect();
        commbench_sim::Linear::new(pieces).unwrap()
    })
}

proptest! {
    #![proptest_config(config(12, 48))]

    /// Every field at a random value inside its bounds (TOML integers stop at `i64::MAX`), on a
    /// machine of 2 to 8 nodes (tiny receive buffers, a livelock limit of a few polls and a
    /// huge tick included): the measured ping-pong ends with results or a clean error.
    #[test]
    fn in_range_configs_run_to_an_answer(
        dimensions in 1u32..=3,
        ranks in prop::option::of(2u32..=8),
        tick_ns in prop_oneof![1u64..1_000_000, Just(i64::MAX as u64)],
        clock_read_ns in 1u64..1_000_000,
        poll_ns in 1u64..1_000_000,
        compute_ns_per_iter in 0.0f64..1e6,
        recv_buffer_bytes in prop::option::of(prop_oneof![1u64..16, 1u64..100_000]),
        seed in 0..=i64::MAX as u64,
        jitter_ns in 0u64..1_000_000,
        spin_limit in 1u64..1_000_000,
        stack_kib in 64u64..=512,
        times in prop::collection::vec(in_range_time(), 6),
        tree in prop::option::of((prop::collection::vec(1u32..9, 1..4), 0.25f64..8.0)),
    ) {
        let mut t = times.into_iter();
        let mut next = || t.next().unwrap();
        let mut cfg = SimConfig {
            name: "fuzz".into(),
            dimensions,
            ranks: ranks.map(|r| r.min(1 << dimensions)),
            tick_ns,
            clock_read_ns,
            poll_ns,
            compute_ns_per_iter,
            compute_float_ns_per_iter: None,
            times: commbench_sim::Times {
                f: next(),
                s: next(),
                r: next(),
                a: next(),
                u: next(),
                e: next(),
            },
            match_ns_per_entry: 0.0,
            recv_buffer_bytes,
            seed,
            jitter_ns,
            carry_bytes: None,
            spin_limit,
            stack_kib,
            faults: Vec::new(),
            silent: Vec::new(),
            wait_timeout_us: None,
            tree: None,
        };
        prop_assert!(cfg.validate().is_ok());
        // The same machine under a tree of switches, when the fanout fits its nodes (a
        // level of one switch ends the list).
        if let Some((fanout, uplink_factor)) = tree {
            let treed = SimConfig {
                tree: Some(commbench_sim::SwitchTree { fanout, uplink_factor }),
                ..cfg.clone()
            };
            if treed.validate().is_ok() {
                cfg = treed;
            }
        }
        check_accepted(&cfg, true)?;
    }
}

/// A time whose coefficients reach their bound (1e12 µs) and pass it.
fn bound_time() -> impl Strategy<Value = Vec<commbench_sim::Piece>> {
    let base = prop_oneof![
        3 => 0.0f64..1e3,
        3 => Just(1e12),
        2 => 1e9f64..=1e12,
        1 => 1e12f64..1e13,
    ];
    let per_byte = prop_oneof![
        4 => Just(0.0f64),
        2 => 0.0f64..1e3,
        1 => 1e9f64..=1e12,
    ];
    prop::collection::vec((0u64..100_000, base, per_byte), 1..3).prop_map(|v| {
        let mut from = 0;
        v.into_iter()
            .enumerate()
            .map(|(i, (gap, base_us, per_byte_us))| {
                if i > 0 {
                    from += gap + 1;
                }
                commbench_sim::Piece {
                    from,
                    base_us,
                    per_byte_us,
                }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(config(12, 2000))]

    /// Every cost at, near and beyond its documented bound (times of 1e12 µs, ticks, clock
    /// reads, jitter of 1e15 ns, compute of 1e6 ns and past it, faults of x1e6): the machine is refused, the run
    /// is refused before it starts or ends with a configuration error, or every time it
    /// reports is finite and non-negative; never a time that wrapped.
    #[test]
    fn machines_at_their_bounds_never_report_a_negative_time(
        dimensions in 1u32..=3,
        tick_ns in prop_oneof![1u64..1000, Just(1_000_000_000_000_000), Just(i64::MAX as u64)],
        clock_read_ns in prop_oneof![1u64..100, Just(1_000_000_000_000_000), 1u64..=u64::MAX],
        jitter_ns in prop_oneof![0u64..100, Just(1_000_000_000_000_000)],
        compute_ns_per_iter in prop_oneof![0.0f64..10.0, Just(1e6), Just(1e15)],
        match_ns_per_entry in prop_oneof![Just(0.0f64), Just(1e6)],
        factor in prop_oneof![Just(1.0f64), 1.0f64..=1e6, Just(1e6)],
        times in prop::collection::vec(bound_time(), 6),
    ) {
        let mut t = times.into_iter();
        let mut next = || commbench_sim::Linear::new(t.next().unwrap());
        let linear = [next(), next(), next(), next(), next(), next()];
        let mut cfg = SimConfig::preset("generic").unwrap();
        cfg.name = "bounds".into();
        cfg.dimensions = dimensions;
        cfg.tick_ns = tick_ns;
        cfg.clock_read_ns = clock_read_ns;
        cfg.jitter_ns = jitter_ns;
        cfg.compute_ns_per_iter = compute_ns_per_iter;
        cfg.match_ns_per_entry = match_ns_per_entry;
        cfg.faults = vec![commbench_sim::Fault::SlowNode {
            node: 0,
            factor,
            from_us: None,
            until_us: None,
        }];
        let mut ok = true;
        for (slot, l) in [
            &mut cfg.times.f,
            &mut cfg.times.s,
            &mut cfg.times.r,
            &mut cfg.times.a,
            &mut cfg.times.u,
            &mut cfg.times.e,
        ]
        .into_iter()
        .zip(linear)
        {
            match l {
                Ok(l) => *slot = l,
                Err(e) => {
                    check_error("a time past its bound", &e)?;
                    ok = false;
                }
            }
        }
        if !ok {
            return Ok(());
        }
        match cfg.validate() {
            Err(e) => check_error("a machine past its bounds", &e)?,
            Ok(()) => {
                // Enough trials for costs at their bounds to pass what the clock holds.
                if let Err(e) = measured_pingpong(&cfg, 4000) {
                    prop_assert!(
                        matches!(e.root(), Error::Config(_) | Error::Deadlock(_)),
                        "{e}"
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(16, 64))]

    /// Arrays and inline tables nested thousands deep are an error, not a stack overflow.
    #[test]
    fn deep_nesting_is_an_error(depth in 1usize..5000, inline in any::<bool>()) {
        let (open, close) = if inline { ("{a=", "}") } else { ("[", "]") };
        let s = format!("E = {}1{}\n", open.repeat(depth), close.repeat(depth));
        prop_assert!(SimConfig::from_toml_str(&s).is_err());
    }
}

/// Time and size bounds exactly at their edges, in one file each: what the checks let through
/// evaluates and runs.
#[test]
fn edges_of_every_bound() {
    let ok = [
        "preset = \"generic\"\ndimensions = 1\n",
        "preset = \"generic\"\ndimensions = 16\nranks = 2\n",
        "preset = \"generic\"\nstack_kib = 64\ndimensions = 1\n",
        "preset = \"generic\"\ndimensions = 1\n[times]\nE = { base_us = 1e12, per_byte_us = 1e12 }\n",
        "preset = \"generic\"\ndimensions = 1\ncompute_ns_per_iter = 0.0\n",
        "preset = \"generic\"\ndimensions = 1\ncompute_ns_per_iter = 1e6\n",
        "preset = \"generic\"\ndimensions = 1\nclock_read_ns = 1000000000000000\n",
        "preset = \"generic\"\ndimensions = 1\npoll_ns = 1000000000000000\n",
        "preset = \"generic\"\ndimensions = 1\njitter_ns = 1000000000000000\n",
        "preset = \"generic\"\ndimensions = 1\ntick_ns = 9223372036854775807\n",
    ];
    for s in ok {
        let cfg = SimConfig::from_toml_str(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        check_accepted(&cfg, true).unwrap_or_else(|e| panic!("{s}: {e}"));
    }
}

/// The toml crate's message draws the line with a caret under it, and names (a preset, an
/// unknown key) were quoted as written: either broke the one-line error over several lines.
#[test]
fn errors_are_one_line() {
    let cases = [
        (
            "preset = \"generic\"\ndimensions = = 3\n",
            "line 2, column 14: ",
        ),
        ("preset = \"\"\"a\nb\"\"\"\n", "preset named `a; b`"),
        (
            "preset = \"generic\"\n\"a\\nb\" = 1\n",
            "unknown field `a; b`",
        ),
        (
            "preset = \"generic\"\n\"a\\tb\" = 1\n",
            "unknown field `a\\tb`",
        ),
        ("preset = [\n1,\n2]\n", "must be a string, got [1, 2]"),
        ("dimensions = 3\n", "missing field `tick_ns`"),
    ];
    for (text, want) in cases {
        let e = SimConfig::from_toml_str(text).expect_err(text);
        check_error(text, &e).unwrap_or_else(|f| panic!("{f}"));
        assert!(e.to_string().contains(want), "{text:?}: {e}");
    }
}

/// One operation's cost past 1e12 µs overflowed the virtual clock on the first clock reads or
/// hops (`attempt to add with overflow` in the kernel): it is a config error now.
#[test]
fn costs_past_the_bound_are_config_errors() {
    for extra in [
        "clock_read_ns = 9223372036854775807",
        "jitter_ns = 9223372036854775807",
        "poll_ns = 9223372036854775807",
        "clock_read_ns = 1000000000000001",
        "compute_ns_per_iter = 1e300",
        "compute_ns_per_iter = 1000000.001",
    ] {
        let s = format!("preset = \"generic\"\ndimensions = 1\n{extra}\n");
        let e = SimConfig::from_toml_str(&s).expect_err(extra);
        assert!(matches!(e.root(), Error::Config(_)), "{extra}: {e}");
        let key = extra.split(' ').next().unwrap();
        assert!(e.to_string().contains(key), "{extra}: {e}");
    }
}

/// The closed form saturates where the times are beyond `u64` nanoseconds (it overflowed:
/// `attempt to multiply with overflow`).
#[test]
fn closed_form_saturates() {
    let s = "preset = \"generic\"\n[times]\nE = { base_us = 1e12, per_byte_us = 1e12 }\n\
             F = { base_us = 1e12, per_byte_us = 1e12 }\n";
    let cfg = SimConfig::from_toml_str(s).unwrap();
    assert_eq!(cfg.pingpong_one_way_ns(u64::MAX, 4), u64::MAX);
    assert_eq!(cfg.pingpong_one_way_ns(u64::MAX, 0), u64::MAX);
    assert_eq!(cfg.pingpong_one_way_ns(8, u32::MAX), u64::MAX);
    let generic = SimConfig::preset("generic").unwrap();
    assert_eq!(
        generic.pingpong_one_way_ns(8, 1),
        generic.times.f.ns(8) + generic.times.e.ns(8) + generic.times.u.ns(8)
    );
}

/// A hop whose time is beyond `u64` nanoseconds (a 64 KiB message at the largest per-byte
/// time a config accepts) would overflow the kernel's virtual clock: the message is refused
/// as a configuration error instead.
#[test]
fn hop_beyond_u64_nanoseconds() {
    let s = "preset = \"generic\"\ndimensions = 1\n[times]\nE = { base_us = 1e12, per_byte_us = 1e12 }\n";
    let cfg = SimConfig::from_toml_str(s).unwrap();
    let method = MethodConfig {
        sizes: vec![65536],
        trials: 3,
        warmup: 1,
        npp: NppChoice::Fixed(2),
        timer_samples: 10,
        source: 0,
        dest: 1,
        ..MethodConfig::default()
    };
    let m = Measurement::new(PatternKind::PingPong, method, None);
    // A step beyond what the virtual clock holds is a configuration error naming the time.
    let e = run(&cfg, &m).expect_err("a hop beyond u64 nanoseconds");
    assert!(e.is_configuration(), "{e}");
    assert!(e.to_string().contains("E of a 65536-byte message"), "{e}");
}
