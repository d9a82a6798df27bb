//! Seed 001's analysis (Krumme & Greenfield 1988, §3.2-§3.5, §5.2 and Appendix B): the raw
//! points of `commbench echo`, `overhead` and `interference` become the six per-message times
//! F, S, R, A, U and E, each a least-squares line in the message size with its maximum error.
//!
//! * Each experiment's value of a repetition (a trial) is its trial time per iteration, less
//!   Q's time at that size where the experiment ran Q ([`Experiment::subtracts_q`]).
//! * E (§3.2, Appendix B): the mean over consecutive distances of `(T(d+1) - T(d)) / 2` (per
//!   hop when the distances are not consecutive), from the busy echo.
//! * The solve (§3.5): "we simply proceed through this list left-to-right and at each step we
//!   find just one new unknown": E, R, then S = (R+S) - R, F = (F+S) - S,
//!   U = 2(F+E+U)/2 - E - F, A = (A+U) - U ([`solve`]), per repetition; then mean and standard
//!   deviation over the repetitions per size (Table 1) and a line per time through the means
//!   (Table 3, Appendix B `fit`).
//! * Where the transport forwards nothing, `r+s` was not measured: S, F, U and A are not
//!   separable and are listed as such; the measured sums (F+S = LogP's o_s, A+U+R = o_r)
//!   are reported instead.
//! * Interference (§5.2): the slowdown of Q with `k` streams, against the prediction with no
//!   interaction, `1 / (1 - k L / P)`, where `P` is the streams' time per message and `L` the
//!   CPU time each forwarded message costs the source: R+S where the transport forwards, the
//!   receive and the send of its own program (A+U+R + F+S) elsewhere.

pub mod checks;

use crate::analysis::inference::fit_line;
use crate::analysis::point::Point;
use checks::{Echoes, Findings, Rule};
use commbench_core::method::sixtimes::{rate_streams, Experiment, CALIBRATION};
use commbench_core::stats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One size's value of a time: mean and standard deviation over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeValue {
    /// Message size, bytes.
    pub size: u64,
    /// Mean over the repetitions, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub mean_us: f64,
    /// Sample standard deviation over the repetitions, us (0 with one repetition).
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub std_dev_us: f64,
}

/// A time as a line in the message size (Appendix B `fit`), with the values it was fitted to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeLine {
    /// `X0`, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub intercept_us: f64,
    /// `X1`, us per byte.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub slope_us_per_byte: f64,
    /// Largest `|X0 + X1 n - mean(n)|` over the sizes, us (Appendix B's "max. error").
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub max_error_us: f64,
    /// Per size: mean and standard deviation over the repetitions.
    pub values: Vec<SizeValue>,
}

impl TimeLine {
    /// The line through `values`' means (one size: a flat line through it).
    pub fn fit(values: Vec<SizeValue>) -> TimeLine {
        let x: Vec<f64> = values.iter().map(|v| v.size as f64).collect();
        let y: Vec<f64> = values.iter().map(|v| v.mean_us).collect();
        let (intercept_us, slope_us_per_byte, max_error_us) = match fit_line(&x, &y) {
            Some(l) => (l.intercept, l.slope, l.max_abs_err),
            None => (mean(&y).unwrap_or(f64::NAN), 0.0, 0.0),
        };
        TimeLine {
            intercept_us,
            slope_us_per_byte,
            max_error_us,
            values,
        }
    }

    /// The line's value at `size` bytes, us.
    pub fn at(&self, size: u64) -> f64 {
        self.intercept_us + self.slope_us_per_byte * size as f64
    }
}

/// The six times of seed 001 §2 (the contract key `params`): each solved time's line; a time
/// that is not separable on the transport measured is absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// Elapsed time of one hop.
    #[serde(rename = "E", default, skip_serializing_if = "Option::is_none")]
    pub e: Option<TimeLine>,
    /// CPU lost on the receiver while a message comes in.
    #[serde(rename = "R", default, skip_serializing_if = "Option::is_none")]
    pub r: Option<TimeLine>,
    /// CPU lost on the sender while a message goes out.
    #[serde(rename = "S", default, skip_serializing_if = "Option::is_none")]
    pub s: Option<TimeLine>,
    /// The send call up to the copy into a system buffer.
    #[serde(rename = "F", default, skip_serializing_if = "Option::is_none")]
    pub f: Option<TimeLine>,
    /// The rest of the receive call: the copy out.
    #[serde(rename = "U", default, skip_serializing_if = "Option::is_none")]
    pub u: Option<TimeLine>,
    /// The part of the receive call made before the message is there.
    #[serde(rename = "A", default, skip_serializing_if = "Option::is_none")]
    pub a: Option<TimeLine>,
}

impl Params {
    /// `(name, line)` in the paper's order E, R, S, F, U, A.
    pub fn lines(&self) -> Vec<(&'static str, Option<&TimeLine>)> {
        vec![
            ("E", self.e.as_ref()),
            ("R", self.r.as_ref()),
            ("S", self.s.as_ref()),
            ("F", self.f.as_ref()),
            ("U", self.u.as_ref()),
            ("A", self.a.as_ref()),
        ]
    }
}

/// A time the experiments cannot tell apart on this transport, or at some sizes, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotSeparable {
    /// `E`, `R`, `S`, `F`, `U` or `A`.
    pub time: String,
    /// Why, with what was measured instead.
    pub reason: String,
    /// The sizes at which it is not separable; empty: at every size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<u64>,
    /// The assumption of the solve that failed there ([`checks`]); absent where the
    /// experiment that separates it was not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumption: Option<String>,
}

/// A time solved another way than §3.5's list, or whose line is outside its validity, at some
/// sizes ([`checks`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolveNote {
    /// `E`, `R`, `S`, `F`, `U` or `A`.
    pub time: String,
    /// The sizes it concerns.
    pub sizes: Vec<u64>,
    /// The assumption of the solve that did not hold there.
    pub assumption: String,
    /// What was measured and what was done.
    pub note: String,
}

/// One row of §5.2's interference experiment (the contract key `interference`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterferenceRow {
    /// Neighbours streaming through the source.
    pub neighbours: u32,
    /// Channels active at the source: two per neighbour (in and out).
    pub channels: u32,
    /// The streams' mean time per message, us.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub us_per_message: f64,
    /// Q's time with the streams over its time without I/O.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub slowdown: f64,
    /// The slowdown with no interaction: `1 / (1 - neighbours L / us_per_message)`.
    #[serde(deserialize_with = "stats::f64_or_nan")]
    pub predicted_slowdown: f64,
}

/// What the seed 001 experiments measured besides the six times (`sixtimes` in the document).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Detail {
    /// The time of one iteration of Q, ns (§3.1's calibration).
    #[serde(default)]
    pub q_ns_per_iter: Option<f64>,
    /// Repetitions per experiment (the trials).
    pub repetitions: usize,
    /// Messages per clock reading (npp).
    pub messages_per_reading: u64,
    /// The busy echo's round trip `T(d)` per distance (§3.2).
    pub echo: BTreeMap<u32, TimeLine>,
    /// The idle echo's round trip per distance (§5.1).
    pub echo_idle: BTreeMap<u32, TimeLine>,
    /// E from the idle echo (§5.1), to set beside the busy one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_idle: Option<TimeLine>,
    /// Each experiment's value (Q subtracted where it ran Q): `Q`, `R`, `A+U`, `F+S`,
    /// `R+S`, `2(F+E+U)`, and the sums `o_s` = F+S and `o_r` = A+U+R.
    pub measured: BTreeMap<String, TimeLine>,
    /// The times that could not be separated here.
    pub not_separable: Vec<NotSeparable>,
    /// The times solved another way, or whose line does not hold within its noise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<SolveNote>,
    /// Whether the transport forwarded `r+s` and the streams itself (the simulator).
    pub transport_forwards: bool,
}

/// Everything seed 001's analysis makes of a document's points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysis {
    /// The six times.
    pub params: Option<Params>,
    /// §5.2's rows.
    pub interference: Option<Vec<InterferenceRow>>,
    /// The rest.
    pub detail: Option<Detail>,
}

/// The known values of one repetition at one size, us.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measured {
    /// E from the echo.
    pub e: Option<f64>,
    /// R.
    pub r: Option<f64>,
    /// R + S.
    pub rs: Option<f64>,
    /// F + S.
    pub fs: Option<f64>,
    /// 2(F + E + U).
    pub feu2: Option<f64>,
    /// A + U.
    pub au: Option<f64>,
    /// R above E: the one-hop round trip is `2(F+R+U)` ([`checks::Rule::hop_r`]).
    pub hop_r: bool,
    /// `2F + 2U` from the echo's line (`T(d) - 2dE`), where `2(F+E+U)` is bound by a CPU
    /// ([`checks::Rule::u_echo`]).
    pub fu2_echo: Option<f64>,
}

/// The six times of one repetition: each `None` when what it needs was not measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Solved {
    /// E.
    pub e: Option<f64>,
    /// R.
    pub r: Option<f64>,
    /// S.
    pub s: Option<f64>,
    /// F.
    pub f: Option<f64>,
    /// U.
    pub u: Option<f64>,
    /// A.
    pub a: Option<f64>,
}

/// §3.5: E and R as measured, then S = (R+S) - R, F = (F+S) - S, U = 2(F+E+U)/2 - E - F,
/// A = (A+U) - U, each step finding one new unknown from the ones before. Where R is above E
/// the one-hop round trip is `2(F+R+U)` and U subtracts R; where `2(F+E+U)` is bound by a CPU,
/// U comes from the echo's `2F + 2U` ([`checks`]).
pub fn solve(m: Measured) -> Solved {
    let s = m.rs.zip(m.r).map(|(rs, r)| rs - r);
    let f = m.fs.zip(s).map(|(fs, s)| fs - s);
    let hop = if m.hop_r { m.r } else { m.e };
    let u = match (m.fu2_echo, m.feu2, m.e, hop, f) {
        (Some(fu2), _, Some(e), Some(hop), Some(f)) => Some(fu2 / 2.0 - (hop - e) - f),
        (None, Some(x), Some(_), Some(hop), Some(f)) => Some(x / 2.0 - hop - f),
        _ => None,
    };
    let a = m.au.zip(u).map(|(au, u)| au - u);
    Solved {
        e: m.e,
        r: m.r,
        s,
        f,
        u,
        a,
    }
}

/// E from round trips at several distances (§3.2, Appendix B): the mean over consecutive
/// distances of `(T(d') - T(d)) / (2 (d' - d))`. `None` with fewer than two distances.
pub fn e_from_echo(round_trips: &[(u32, f64)]) -> Option<f64> {
    let mut v = round_trips.to_vec();
    v.sort_by_key(|x| x.0);
    let diffs: Vec<f64> = v
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| (w[1].1 - w[0].1) / (2.0 * f64::from(w[1].0 - w[0].0)))
        .collect();
    mean(&diffs)
}

/// The per-repetition values (us per iteration) of one point.
fn per_repetition(p: &Point) -> Vec<f64> {
    let per = 1000.0 * (p.npp.max(1) * p.trips_per_iteration.max(1)) as f64;
    p.trial_ns.iter().map(|&t| t as f64 / per).collect()
}

/// The mean (`None` of nothing).
fn mean(v: &[f64]) -> Option<f64> {
    stats::mean_variance(v).map(|(m, _)| m)
}

/// Mean and sample standard deviation (0 of one value).
fn mean_sd(v: &[f64]) -> (f64, f64) {
    match stats::mean_variance(v) {
        Some((m, var)) if v.len() > 1 => (m, var.max(0.0).sqrt()),
        Some((m, _)) => (m, 0.0),
        None => (f64::NAN, 0.0),
    }
}

/// Per experiment and size, the repetitions' values (us), Q subtracted where it ran.
type Table = BTreeMap<String, BTreeMap<u64, Vec<f64>>>;

fn table(points: &[Point]) -> (Table, BTreeMap<u64, f64>) {
    let mut raw: Table = BTreeMap::new();
    for p in points {
        if Experiment::from_name(&p.pattern).is_some() || rate_streams(&p.pattern).is_some() {
            raw.entry(p.pattern.clone())
                .or_default()
                .insert(p.size, per_repetition(p));
        }
    }
    let q0: BTreeMap<u64, f64> = raw
        .get("q")
        .map(|m| {
            m.iter()
                .map(|(&s, v)| (s, mean(v).unwrap_or(f64::NAN)))
                .collect()
        })
        .unwrap_or_default();
    for (name, by_size) in raw.iter_mut() {
        let subtract = Experiment::from_name(name).is_some_and(|e| e.subtracts_q());
        if !subtract {
            continue;
        }
        for (size, v) in by_size.iter_mut() {
            let q = q0.get(size).copied().unwrap_or(f64::NAN);
            v.iter_mut().for_each(|x| *x -= q);
        }
    }
    (raw, q0)
}

/// A line per size from per-size repetitions.
fn line_of(by_size: &BTreeMap<u64, Vec<f64>>) -> TimeLine {
    TimeLine::fit(
        by_size
            .iter()
            .map(|(&size, v)| {
                let (mean_us, std_dev_us) = mean_sd(v);
                SizeValue {
                    size,
                    mean_us,
                    std_dev_us,
                }
            })
            .collect(),
    )
}

/// The echo's round trips per distance: `hops -> size -> repetitions`.
fn echoes(t: &Table, busy: bool) -> Echoes {
    let mut out = BTreeMap::new();
    for (name, by_size) in t {
        if let Some(Experiment::Echo { hops, busy: b }) = Experiment::from_name(name) {
            if b == busy {
                out.insert(hops, by_size.clone());
            }
        }
    }
    out
}

/// E per size and repetition from the echoes, at the distances `dists` gives for each size
/// (those that passed [`checks`]).
fn e_values(e: &Echoes, dists: impl Fn(u64) -> Vec<u32>) -> BTreeMap<u64, Vec<f64>> {
    let mut out = BTreeMap::new();
    let sizes: std::collections::BTreeSet<u64> =
        e.values().flat_map(|m| m.keys().copied()).collect();
    for size in sizes {
        let use_: Vec<(u32, &Vec<f64>)> = dists(size)
            .into_iter()
            .filter_map(|d| e.get(&d)?.get(&size).map(|v| (d, v)))
            .collect();
        if use_.len() < 2 {
            continue;
        }
        let reps = use_.iter().map(|(_, v)| v.len()).min().unwrap_or(0);
        let v: Vec<f64> = (0..reps)
            .filter_map(|k| {
                let rts: Vec<(u32, f64)> = use_.iter().map(|(d, v)| (*d, v[k])).collect();
                e_from_echo(&rts)
            })
            .collect();
        if !v.is_empty() {
            out.insert(size, v);
        }
    }
    out
}

/// Per time (`E` .. `A`, and `o_r` = A+U+R) and size, the solved values of each repetition.
type SolvedTable = BTreeMap<&'static str, BTreeMap<u64, Vec<f64>>>;

/// Every size measured by any experiment.
fn sizes_of(t: &Table) -> Vec<u64> {
    let set: std::collections::BTreeSet<u64> = t.values().flat_map(|m| m.keys().copied()).collect();
    set.into_iter().collect()
}

/// The known values of repetition `k` at `size`.
fn measured_at(inp: &Inputs<'_>, size: u64, k: usize) -> Measured {
    let get = |name: &str| inp.t.get(name).and_then(|m| m.get(&size)?.get(k).copied());
    let e = inp.e.get(&size).and_then(|v| v.get(k).copied());
    let rule = inp.rules.get(&size).cloned().unwrap_or_default();
    // 2F + 2U = T(d) - 2dE, the mean over the distances the rule names.
    let fu2_echo = e.filter(|_| !rule.u_echo.is_empty()).and_then(|e| {
        let v: Option<Vec<f64>> = rule
            .u_echo
            .iter()
            .map(|&d| {
                let t = inp.busy.get(&d)?.get(&size)?.get(k)?;
                Some(t - 2.0 * f64::from(d) * e)
            })
            .collect();
        v.and_then(|v| mean(&v))
    });
    Measured {
        e,
        r: get("r"),
        rs: get("r+s"),
        fs: get("f+s"),
        feu2: get("2(f+e+u)").filter(|_| !rule.u_none),
        au: get("a+u"),
        hop_r: rule.hop_r,
        fu2_echo,
    }
}

/// What the solve of every size reads: the experiments' values, E per size and repetition,
/// the busy echo, and each size's [`Rule`].
struct Inputs<'a> {
    t: &'a Table,
    e: &'a BTreeMap<u64, Vec<f64>>,
    busy: &'a Echoes,
    rules: &'a BTreeMap<u64, Rule>,
}

/// §3.5 for every size and repetition (the most repetitions any experiment has there).
fn solve_table(inp: &Inputs<'_>) -> SolvedTable {
    let mut solved = SolvedTable::new();
    for size in sizes_of(inp.t) {
        let reps = inp
            .t
            .iter()
            .filter(|(n, _)| rate_streams(n).is_none())
            .filter_map(|(_, m)| m.get(&size).map(Vec::len))
            .max()
            .unwrap_or(0);
        for k in 0..reps {
            let m = measured_at(inp, size, k);
            let s = solve(m);
            let o_r = m.au.zip(m.r).map(|(au, r)| au + r);
            let values = [
                ("E", s.e),
                ("R", s.r),
                ("S", s.s),
                ("F", s.f),
                ("U", s.u),
                ("A", s.a),
                ("o_r", o_r),
            ];
            for (name, v) in values {
                if let Some(v) = v {
                    let at = solved.entry(name).or_default().entry(size).or_default();
                    at.push(v);
                }
            }
        }
    }
    solved
}

/// The line of a solved time, when it was solved at any size; the sizes in `zero` (a mean
/// below zero within its noise, [`checks::settle`]) taken as 0.
fn solved_line(solved: &SolvedTable, name: &str, zero: &[(&str, u64)]) -> Option<TimeLine> {
    let l = solved.get(name).filter(|m| !m.is_empty()).map(line_of)?;
    if !zero.iter().any(|z| z.0 == name) {
        return Some(l);
    }
    let mut values = l.values;
    for v in values.iter_mut() {
        if zero.contains(&(name, v.size)) {
            v.mean_us = 0.0;
        }
    }
    Some(TimeLine::fit(values))
}

/// Each experiment's own value as a line (Q subtracted where it ran Q), and the sums o_s and
/// o_r.
fn measured_lines(
    t: &Table,
    solved: &SolvedTable,
    zero: &[(&str, u64)],
    repetitions: usize,
    f: &mut Findings,
) -> BTreeMap<String, TimeLine> {
    let mut measured = BTreeMap::new();
    // R is the solved R, made non-negative with the other times ([`checks::settle`]); o_s
    // is F+S under LogP's name, checked once as F+S.
    let experiments: [(&str, &[&str]); 5] = [
        ("Q", &["q"]),
        ("A+U", &["a+u"]),
        ("F+S", &["f+s"]),
        ("R+S", &["r+s"]),
        ("2(F+E+U)", &["2(f+e+u)"]),
    ];
    for (key, names) in experiments {
        if let Some(m) = t.get(names[0]) {
            measured.insert(key.to_string(), (names, line_of(m)));
        }
    }
    if let Some(l) = solved_line(solved, "o_r", &[]) {
        measured.insert("o_r".into(), (&["a+u", "r"], l));
    }
    let r = solved_line(solved, "R", zero);
    let mut out: BTreeMap<String, TimeLine> = measured
        .into_iter()
        .filter_map(|(key, (names, l))| {
            checks::measured_sign(&key, names, l, t, repetitions, f).map(|l| (key, l))
        })
        .chain(r.map(|r| ("R".to_string(), r)))
        .collect();
    if let Some(fs) = out.get("F+S").cloned() {
        out.insert("o_s".into(), fs);
    }
    out
}

/// Q's calibration: the median time of one iteration, ns.
fn q_ns_per_iter(points: &[Point]) -> Option<f64> {
    let p = points.iter().find(|p| p.pattern == CALIBRATION)?;
    let mut v = per_repetition(p);
    stats::sort_samples(&mut v);
    stats::median(&v).map(|us| us * 1000.0)
}

/// Seed 001's analysis of `points` (one backend's); `None` parts where the points hold no
/// seed 001 experiment. `transport_forwards`: whether the backend forwards messages through
/// node 0 itself (the simulator), so that `r+s` was measured or would have been.
/// `resolution_ns`: the clock's (seed 000 §3.1), which bounds how closely two readings can
/// agree.
pub fn analyse(points: &[Point], transport_forwards: bool, resolution_ns: Option<f64>) -> Analysis {
    let (t, q0) = table(points);
    if t.is_empty() {
        return Analysis::default();
    }
    let busy = echoes(&t, true);
    let idle = echoes(&t, false);
    let q_ns = q_ns_per_iter(points);
    let overhead = ["r", "a+u", "f+s"].iter().any(|k| t.contains_key(*k));
    let no_rs = overhead && !t.contains_key("r+s");
    let mut found = Findings {
        not_separable: not_separable(transport_forwards, no_rs, busy.len()),
        ..Findings::default()
    };
    let messages = points
        .iter()
        .find(|p| Experiment::from_name(&p.pattern).is_some())
        .map_or(0, |p| p.npp);
    let cx = checks::Ctx {
        t: &t,
        busy: &busy,
        idle: &idle,
        q_ns,
        noise: checks::Noise {
            quantum_us: resolution_ns.unwrap_or(0.0).max(0.0) / 1000.0 / messages.max(1) as f64,
        },
        cpu_floor: transport_forwards,
    };
    let rules: BTreeMap<u64, Rule> = sizes_of(&t)
        .into_iter()
        .map(|s| (s, checks::rule_at(&cx, s, &mut found)))
        .collect();
    let e = e_values(&busy, |s| {
        rules.get(&s).map_or(Vec::new(), |r| r.e_dists.clone())
    });
    let inputs = Inputs {
        t: &t,
        e: &e,
        busy: &busy,
        rules: &rules,
    };
    let mut solved = solve_table(&inputs);
    let zero = checks::settle(&mut solved, &t, &rules, &mut found);
    let repetitions = t
        .values()
        .flat_map(|m| m.values().map(Vec::len))
        .max()
        .unwrap_or(0);
    let sizes = rules.len();
    let line = |name: &'static str, found: &mut Findings| {
        let l = solved_line(&solved, name, &zero)?;
        checks::linear(name, &l, repetitions, sizes, found);
        Some(l)
    };
    let params = Params {
        e: line("E", &mut found),
        r: line("R", &mut found),
        s: line("S", &mut found),
        f: line("F", &mut found),
        u: line("U", &mut found),
        a: line("A", &mut found),
    };
    let e_idle = e_values(&idle, |s| checks::idle_dists(&cx, s));
    let detail = Detail {
        q_ns_per_iter: q_ns,
        repetitions,
        messages_per_reading: messages,
        echo: busy.iter().map(|(&d, m)| (d, line_of(m))).collect(),
        echo_idle: idle.iter().map(|(&d, m)| (d, line_of(m))).collect(),
        e_idle: (!e_idle.is_empty()).then(|| line_of(&e_idle)),
        measured: measured_lines(&t, &solved, &zero, repetitions, &mut found),
        not_separable: found.not_separable,
        notes: found.notes,
        transport_forwards,
    };
    let interference = interference(&t, &q0, &detail);
    let any_param = params.lines().iter().any(|(_, l)| l.is_some());
    Analysis {
        params: any_param.then_some(params),
        interference,
        detail: Some(detail),
    }
}

/// The times the experiments run could not separate, and why: `no_rs` when the overhead
/// experiments ran without `r+s` (the transport forwards nothing, or the run ended first).
fn not_separable(forwards: bool, no_rs: bool, distances: usize) -> Vec<NotSeparable> {
    let mut v = Vec::new();
    let mut add = |time: &str, reason: &str| {
        v.push(NotSeparable {
            time: time.into(),
            reason: reason.into(),
            sizes: Vec::new(),
            assumption: None,
        })
    };
    if distances < 2 {
        add(
            "E",
            "the echo was measured at one distance: E is the difference between distances",
        );
    }
    if no_rs {
        let why = if forwards {
            "the run ended before R+S was measured; S, and F, U and A which the solve derives \
             from it, are not known"
        } else {
            "nothing below the program forwards messages on this transport, so R+S cannot be \
             measured; S, and F, U and A which the solve derives from it, are not separable \
             (the sums F+S = o_s and A+U+R = o_r are measured)"
        };
        for t in ["S", "F", "U", "A"] {
            add(t, why);
        }
    }
    v
}

/// §5.2's rows from the interference points.
fn interference(t: &Table, q0: &BTreeMap<u64, f64>, d: &Detail) -> Option<Vec<InterferenceRow>> {
    let size = commbench_core::method::sixtimes::INTERFERENCE_BYTES;
    let q = q0.get(&size).copied()?;
    let at = |key: &str| {
        d.measured
            .get(key)
            .and_then(|l| l.values.iter().find(|v| v.size == size))
            .map(|v| v.mean_us)
    };
    // CPU time one forwarded message costs the source.
    let load = if d.transport_forwards {
        at("R+S")
    } else {
        at("o_r").zip(at("F+S")).map(|(a, b)| a + b)
    };
    let mut rows = Vec::new();
    for (name, by_size) in t {
        let Some(Experiment::Interference { streams }) = Experiment::from_name(name) else {
            continue;
        };
        let Some(v) = by_size.get(&size) else {
            continue;
        };
        let rate = t
            .get(commbench_core::method::sixtimes::rate_name(streams))
            .and_then(|m| m.get(&size))
            .and_then(|v| mean(v));
        let us_per_message = rate.filter(|r| *r > 0.0).unwrap_or(f64::NAN);
        let slowdown = mean(v).unwrap_or(f64::NAN) / q;
        let predicted_slowdown = match load {
            Some(l) => 1.0 / (1.0 - f64::from(streams) * l / us_per_message),
            None => f64::NAN,
        };
        rows.push(InterferenceRow {
            neighbours: streams,
            channels: 2 * streams,
            us_per_message,
            slowdown,
            predicted_slowdown,
        });
    }
    rows.sort_by_key(|r| r.neighbours);
    (!rows.is_empty()).then_some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 3's lines.
    fn table3(n: f64) -> [f64; 6] {
        [
            220.0 + 1.285 * n,
            180.0 + 0.04 * n,
            150.0 + 0.01 * n,
            160.0 + 0.60 * n,
            130.0 + 0.61 * n,
            120.0,
        ]
    }

    #[test]
    fn solve_recovers_known_times() {
        for n in [16.0, 500.0, 1000.0, 1500.0, 2000.0] {
            let [e, r, s, f, u, a] = table3(n);
            let m = Measured {
                e: Some(e),
                r: Some(r),
                rs: Some(r + s),
                fs: Some(f + s),
                feu2: Some(2.0 * (f + e + u)),
                au: Some(a + u),
                ..Measured::default()
            };
            let got = solve(m);
            for (want, got) in [e, r, s, f, u, a]
                .into_iter()
                .zip([got.e, got.r, got.s, got.f, got.u, got.a])
            {
                assert!((want - got.unwrap()).abs() < 1e-9, "{want} {got:?}");
            }
        }
    }

    proptest::proptest! {
        /// Any six times, measured as the experiments combine them, are solved back.
        #[test]
        fn solve_inverts_the_experiments(
            e in 0.0f64..1e4, r in 0.0f64..1e4, s in 0.0f64..1e4,
            f in 0.0f64..1e4, u in 0.0f64..1e4, a in 0.0f64..1e4,
        ) {
            let got = solve(Measured {
                e: Some(e),
                r: Some(r),
                rs: Some(r + s),
                fs: Some(f + s),
                feu2: Some(2.0 * (f + e + u)),
                au: Some(a + u),
                ..Measured::default()
            });
            for (want, got) in [e, r, s, f, u, a].into_iter().zip([
                got.e, got.r, got.s, got.f, got.u, got.a,
            ]) {
                proptest::prop_assert!((want - got.unwrap()).abs() < 1e-8);
            }
        }

        /// E from round trips `2F + 2dE + 2U` over any set of two or more distances.
        #[test]
        fn e_from_any_distances(
            e in 0.1f64..1e4, fu in 0.0f64..1e4,
            ds in proptest::collection::btree_set(1u32..=16, 2..6),
        ) {
            let rt: Vec<(u32, f64)> =
                ds.iter().map(|&d| (d, 2.0 * fu + 2.0 * f64::from(d) * e)).collect();
            let got = e_from_echo(&rt).unwrap();
            proptest::prop_assert!((got - e).abs() < 1e-9 * e.max(1.0) * 16.0);
        }
    }

    #[test]
    fn solve_stops_where_a_measurement_is_missing() {
        let m = Measured {
            e: Some(3.0),
            r: Some(1.0),
            rs: None,
            fs: Some(4.0),
            feu2: Some(20.0),
            au: Some(2.0),
            ..Measured::default()
        };
        let s = solve(m);
        assert_eq!((s.e, s.r), (Some(3.0), Some(1.0)));
        assert_eq!((s.s, s.f, s.u, s.a), (None, None, None, None));
    }

    #[test]
    fn errors_accumulate_as_the_paper_warns() {
        // An error of x in R becomes -x in S, +x in F, -x in U and +x in A.
        let [e, r, s, f, u, a] = table3(500.0);
        let x = 3.0;
        let got = solve(Measured {
            e: Some(e),
            r: Some(r + x),
            rs: Some(r + s),
            fs: Some(f + s),
            feu2: Some(2.0 * (f + e + u)),
            au: Some(a + u),
            ..Measured::default()
        });
        assert!((got.s.unwrap() - (s - x)).abs() < 1e-9);
        assert!((got.f.unwrap() - (f + x)).abs() < 1e-9);
        assert!((got.u.unwrap() - (u - x)).abs() < 1e-9);
        assert!((got.a.unwrap() - (a + x)).abs() < 1e-9);
    }

    #[test]
    fn e_is_the_mean_difference_per_hop() {
        // T(d) = 2F + 2dE + 2U: E = 2.5.
        let rt: Vec<(u32, f64)> = (1..=5).map(|d| (d, 10.0 + 5.0 * f64::from(d))).collect();
        assert_eq!(e_from_echo(&rt), Some(2.5));
        // Appendix B's average is (T5 - T1) / 8 for consecutive distances.
        let noisy = [(1, 10.0), (2, 16.0), (3, 19.0), (4, 26.0), (5, 30.0)];
        assert!((e_from_echo(&noisy).unwrap() - (30.0 - 10.0) / 8.0).abs() < 1e-12);
        // Distances 1 and 3: per hop.
        assert_eq!(e_from_echo(&[(3, 20.0), (1, 10.0)]), Some(2.5));
        assert_eq!(e_from_echo(&[(1, 10.0)]), None);
    }

    #[test]
    fn line_fit_is_appendix_b() {
        let values: Vec<SizeValue> = [16u64, 500, 1000, 1500, 2000]
            .iter()
            .map(|&n| SizeValue {
                size: n,
                mean_us: 220.0 + 1.285 * n as f64 + if n == 1000 { 2.0 } else { 0.0 },
                std_dev_us: 0.0,
            })
            .collect();
        let l = TimeLine::fit(values);
        assert!((l.slope_us_per_byte - 1.285).abs() < 1e-3);
        assert!(
            l.max_error_us > 1.0 && l.max_error_us < 2.0,
            "{}",
            l.max_error_us
        );
        assert!((l.at(0) - l.intercept_us).abs() < 1e-12);
    }
}
