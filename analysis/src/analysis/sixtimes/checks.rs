//! The assumptions seed 001's solve rests on, checked from the measurements themselves.
//!
//! §3.5 proceeds "through this list left-to-right", each step finding one new unknown. Every
//! step assumes something about the machine that the NCUBE satisfied and another machine need
//! not:
//!
//! * **The echo grows by 2E per hop** (§3.2: `T_d = 2F + 2dE + 2U + X`). A round trip can
//!   also be bound by a CPU: each end spends `F+S` on its send and `A+U+R` on its receive
//!   every round trip, whatever the distance, so where those pass the path the echo is flat
//!   in the distance. A distance whose round trip is within the noise of that floor
//!   ([`floor`]), or off the line of the farther ones, is left out of E; with fewer than two
//!   distances left, E is not separable at that size.
//! * **One hop of the one-hop round trip costs E**. A message is delivered once the hop has
//!   ended and the receiver's R has run (docs/simulator.md §4: `F + (d-1)E + max(E, R) + U`),
//!   so with R above E, `2(F+E+U)` measures `2(F+R+U)`. R is measured on its own, so U is
//!   still found: `U = 2(F+R+U)/2 - R - F`.
//! * **`2(F+E+U)` is bound by the path**, not by the neighbour's CPU. Where it is within the
//!   noise of the floor, U is found from the echo's line instead (its intercept is `2F + 2U`,
//!   §3.2 with the echo's X = 0), or is not separable when E is not either.
//! * **A time is non-negative.** A solved mean below zero by more than its noise is not
//!   separable at that size, and every time derived from it there neither; within its noise
//!   it is taken as zero.
//! * **A time is a line in the size** (§3.5: "the calculated values generally prove to depend
//!   linearly on n"). A line whose largest residual is beyond the values' noise is kept, with
//!   a note that Table 3's line does not describe that time within its noise.
//!
//! Each finding names the time, the sizes, the assumption that failed and what was measured.

use super::{NotSeparable, SolveNote, Table};
use commbench_core::method::sixtimes::Amounts;
use commbench_core::stats;
use std::collections::BTreeMap;

/// The share of a value that stands for what the method cannot resolve beyond the
/// repetitions' spread (the clock's tick shared among the messages of a reading, Q's own
/// variation): 1%, half of the accuracy the tests ask of a recovered time.
pub const REL: f64 = 0.01;

/// The share of the terms a solved time is computed from that a negative result may be off
/// by and still be zero.
pub const REL_SIGN: f64 = 0.002;

/// The share of the nearest round trip below which a difference per hop is no growth at all:
/// what a clock's tick shared among a reading's messages can leave of a flat echo.
pub const REL_FLAT: f64 = 1e-4;

/// Per distance, size and repetition: an echo's round trips, us.
pub type Echoes = BTreeMap<u32, BTreeMap<u64, Vec<f64>>>;

/// A mean over the repetitions with its standard error, us.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Est {
    /// Mean.
    pub mean: f64,
    /// Standard error of the mean (0 with one repetition).
    pub se: f64,
}

impl Est {
    /// The mean and standard error of `v`; `None` of nothing or of a non-finite mean.
    pub fn of(v: &[f64]) -> Option<Est> {
        let (mean, var) = stats::mean_variance(v)?;
        let se = if v.len() > 1 {
            (var.max(0.0) / v.len() as f64).sqrt()
        } else {
            0.0
        };
        mean.is_finite().then_some(Est { mean, se })
    }
}

/// The share of E by which the echo's differences per hop, and of a round trip by which
/// `2(F+E+U)` and the echo's line at one hop, may differ and still lie on one line: 0.1%. A
/// round trip a little off the path moves E by its share and U, a small difference of large
/// round trips, by many times more.
pub const REL_LINE: f64 = 0.001;

/// What the solve reads besides the experiments' values.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Noise {
    /// The clock's resolution shared among a reading's messages, us: how far a value per
    /// message can be off with every repetition alike.
    pub quantum_us: f64,
}

impl Noise {
    /// How far values built from `parts` may differ and still agree: three standard errors of
    /// their difference, the clock's share of each, and `rel` of `scale`.
    pub fn tolerance(&self, parts: &[Est], scale: f64, rel: f64) -> f64 {
        let var: f64 = parts.iter().map(|e| e.se * e.se).sum();
        3.0 * var.sqrt() + self.quantum_us * parts.len() as f64 + rel * scale.abs()
    }
}

/// How one size is solved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rule {
    /// The distances whose busy echo lies on one line growing with the distance: E is their
    /// mean difference per hop. Empty: E is not separable at this size.
    pub e_dists: Vec<u32>,
    /// R above E: the one-hop round trip is `2(F+R+U)`.
    pub hop_r: bool,
    /// `2(F+E+U)` bound by a CPU: U from the echo's line at these distances instead.
    pub u_echo: Vec<u32>,
    /// Neither gives U at this size.
    pub u_none: bool,
    /// How far U (and A, found from it) can be off beyond the repetitions' spread, us: the
    /// spread of the echo's differences per hop and of `2(F+E+U)` about the echo's line, as
    /// far as the step that finds U carries them.
    pub u_room: f64,
}

/// The share of a value that U and A, found from the echo's line, may be uncertain by and
/// still be given: 3%, the accuracy asked of every recovered time.
pub const ACCURACY: f64 = 0.03;

/// What the checks found: the times not separable (per size) and how others were solved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    /// Times not separable at some sizes, with the assumption that failed.
    pub not_separable: Vec<NotSeparable>,
    /// Times solved another way than §3.5's, or whose line is outside its validity.
    pub notes: Vec<SolveNote>,
}

impl Findings {
    /// `time` is not separable at `size`: `assumption` failed, `why` says what was measured
    /// (the figures of the first size an entry is made for).
    pub fn flag(&mut self, time: &str, size: u64, assumption: &str, why: impl FnOnce() -> String) {
        let entry = |sizes| NotSeparable {
            time: time.into(),
            reason: why(),
            sizes,
            assumption: Some(assumption.into()),
        };
        let same = |n: &NotSeparable| n.time == time && n.assumption.as_deref() == Some(assumption);
        merge_size(&mut self.not_separable, same, |n| &mut n.sizes, size, entry);
    }

    /// `time` at `size` was solved another way, or its line is outside its validity.
    pub fn note(&mut self, time: &str, size: u64, assumption: &str, why: impl FnOnce() -> String) {
        let entry = |sizes| SolveNote {
            time: time.into(),
            sizes,
            assumption: assumption.into(),
            note: why(),
        };
        let same = |n: &SolveNote| n.time == time && n.assumption == assumption;
        merge_size(&mut self.notes, same, |n| &mut n.sizes, size, entry);
    }

    /// Whether `time` is already not separable at `size`.
    pub fn flagged(&self, time: &str, size: u64) -> bool {
        self.not_separable
            .iter()
            .any(|n| n.time == time && (n.sizes.is_empty() || n.sizes.contains(&size)))
    }
}

/// `size` added to the entry of `list` that is `same`, or a new entry made of `[size]`.
fn merge_size<T>(
    list: &mut Vec<T>,
    same: impl Fn(&T) -> bool,
    sizes: impl Fn(&mut T) -> &mut Vec<u64>,
    size: u64,
    entry: impl FnOnce(Vec<u64>) -> T,
) {
    match list.iter_mut().find(|n| same(n)) {
        Some(n) => {
            let v = sizes(n);
            if !v.contains(&size) {
                v.push(size);
            }
        }
        None => list.push(entry(vec![size])),
    }
}

/// The CPU time one end of a round trip spends per round trip whatever the distance, us:
/// `F+S` (its send) + `A+U` (its receive) + `R` (the message coming in), each measured on its
/// own, with their standard errors. `None` where one of them was not measured.
pub fn floor(t: &Table, size: u64) -> Option<(f64, Vec<Est>)> {
    let parts: Option<Vec<Est>> = ["f+s", "a+u", "r"]
        .iter()
        .map(|k| {
            t.get(*k)
                .and_then(|m| m.get(&size))
                .and_then(|v| Est::of(v))
        })
        .collect();
    let parts = parts?;
    Some((parts.iter().map(|e| e.mean).sum(), parts))
}

/// The busy echo's Q after each send at `size`, us: an eighth of the idle round trip at the
/// smallest distance, in whole iterations of Q (as the run chose it, [`Amounts`]).
fn busy_q(idle: &Echoes, size: u64, q_ns: Option<f64>) -> f64 {
    let (Some(q), Some(rt)) = (
        q_ns.filter(|q| *q > 0.0),
        idle.values()
            .next()
            .and_then(|m| m.get(&size))
            .and_then(|v| Est::of(v)),
    ) else {
        return 0.0;
    };
    Amounts::from_round_trip(size, rt.mean * 1000.0, q).busy as f64 * q / 1000.0
}

/// The echo's round trips at `size`, per distance.
fn at_size(echo: &Echoes, size: u64) -> Vec<(u32, Est)> {
    echo.iter()
        .filter_map(|(&d, m)| m.get(&size).and_then(|v| Est::of(v)).map(|e| (d, e)))
        .collect()
}

/// Per-hop difference between two distances' round trips, us.
fn per_hop(lo: (u32, Est), hi: (u32, Est)) -> Est {
    let k = 2.0 * f64::from(hi.0 - lo.0);
    Est {
        mean: (hi.1.mean - lo.1.mean) / k,
        se: (hi.1.se.powi(2) + lo.1.se.powi(2)).sqrt() / k,
    }
}

/// The longest run of the farthest distances whose per-hop differences agree.
fn linear_tail(pts: &[(u32, Est)], noise: Noise) -> Vec<(u32, Est)> {
    let n = pts.len();
    if n < 2 {
        return pts.to_vec();
    }
    let top = per_hop(pts[n - 2], pts[n - 1]);
    let mut from = n - 2;
    while from > 0 {
        let d = per_hop(pts[from - 1], pts[from]);
        if (d.mean - top.mean).abs() > noise.tolerance(&[d, top], top.mean, REL_LINE) {
            break;
        }
        from -= 1;
    }
    pts[from..].to_vec()
}

/// The distances E is found from at `size` (§3.2), after leaving out the round trips bound by
/// a CPU and those off the line of the farther ones; findings for E on the way. `floor_us`:
/// [`floor`] plus the busy echo's Q after each send.
fn e_rule(
    pts: &[(u32, Est)],
    floor_us: Option<(f64, &[Est])>,
    noise: Noise,
    size: u64,
    f: &mut Findings,
) -> Vec<u32> {
    if pts.len() < 2 {
        return Vec::new();
    }
    let bound = |t: &Est| match floor_us {
        Some((l, parts)) => {
            let mut all = parts.to_vec();
            all.push(*t);
            t.mean <= l + noise.tolerance(&all, t.mean, REL)
        }
        None => false,
    };
    let free: Vec<(u32, Est)> = pts.iter().copied().filter(|(_, t)| !bound(t)).collect();
    let tail = linear_tail(&free, noise);
    let shown = || {
        pts.iter()
            .map(|(d, t)| format!("T({d}) = {}", us(t.mean)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let cpu = floor_us.map_or(String::new(), |(l, _)| {
        format!(
            "; one end's CPU per round trip, F+S + A+U + R with the echo's Q: {}",
            us(l)
        )
    });
    if tail.len() < 2 {
        f.flag("E", size, "echo-bound-by-hops", || {
            format!(
                "the echo's round trip does not grow with the distance where a CPU bounds it \
                 (measured at {size} B: {}{cpu}), so no two distances give E",
                shown()
            )
        });
        return Vec::new();
    }
    let e = per_hop(tail[0], tail[tail.len() - 1]);
    // Growth, not its noise: a noisy E stays a value with its spread shown; one that the
    // clock's share and REL_FLAT of the round trip cover is no growth at all.
    let flat = Est { se: 0.0, ..e };
    if e.mean <= noise.tolerance(&[flat], tail[0].1.mean, REL_FLAT) {
        f.flag("E", size, "echo-grows-with-distance", || {
            format!(
                "the echo's round trip does not grow with the distance (measured at {size} B: \
                 {}{cpu}): it is bound by something other than the hops",
                shown()
            )
        });
        return Vec::new();
    }
    if tail.len() < pts.len() {
        let used: Vec<u32> = tail.iter().map(|x| x.0).collect();
        f.note("E", size, "echo-linear-in-distance", || {
            format!(
                "E from the distances {} only: the others are bound by a CPU or off the line of \
                 the farther ones (measured at {size} B: {}{cpu})",
                list(&used),
                shown()
            )
        });
    }
    tail.iter().map(|x| x.0).collect()
}

/// What the checks of one size read: the experiments' values, the echoes, Q's calibration
/// and the clock's share of a value.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    /// Each experiment's values per size and repetition (Q subtracted where it ran).
    pub t: &'a Table,
    /// The busy echo (§3.2).
    pub busy: &'a Echoes,
    /// The idle echo (§5.1).
    pub idle: &'a Echoes,
    /// Q's time per iteration, ns.
    pub q_ns: Option<f64>,
    /// The clock's share of a value.
    pub noise: Noise,
    /// Whether a round trip is bound below by one end's `F+S + A+U + R` ([`floor`]): on the
    /// machine of the model, whose transport forwards (the simulator). Elsewhere the sums
    /// measure a send and a receive with Q running, which overlap a round trip in ways the
    /// model does not describe: a loopback round trip reads below them.
    pub cpu_floor: bool,
}

impl Ctx<'_> {
    /// An experiment's mean at `size`.
    fn get(&self, k: &str, size: u64) -> Option<Est> {
        self.t
            .get(k)
            .and_then(|m| m.get(&size))
            .and_then(|v| Est::of(v))
    }
}

/// The echo's line at one size: its nearest distance on the line, E, and how far the
/// differences per hop on it spread about E.
#[derive(Debug, Clone, Copy)]
struct Line {
    lo: (u32, Est),
    e: Est,
    spread: f64,
}

impl Line {
    /// The line's round trip at one hop, with its standard error.
    fn at_one_hop(&self) -> Est {
        let k = 2.0 * f64::from(self.lo.0.saturating_sub(1));
        Est {
            mean: self.lo.1.mean - k * self.e.mean,
            se: (self.lo.1.se.powi(2) + (k * self.e.se).powi(2)).sqrt(),
        }
    }
}

/// The rule of one size, with its findings: which distances give E, whether one hop costs R,
/// where U comes from.
pub fn rule_at(cx: &Ctx<'_>, size: u64, f: &mut Findings) -> Rule {
    let floor = floor(cx.t, size).filter(|_| cx.cpu_floor);
    let pts = at_size(cx.busy, size);
    let busy_floor = floor
        .as_ref()
        .map(|(l, parts)| (l + busy_q(cx.idle, size, cx.q_ns), parts.as_slice()));
    let e_dists = if cx.busy.len() < 2 {
        Vec::new()
    } else {
        e_rule(&pts, busy_floor, cx.noise, size, f)
    };
    let on: Vec<(u32, Est)> = pts
        .iter()
        .copied()
        .filter(|p| e_dists.contains(&p.0))
        .collect();
    let line = (on.len() >= 2).then(|| {
        let e = per_hop(on[0], on[on.len() - 1]);
        let diffs: Vec<f64> = on.windows(2).map(|w| per_hop(w[0], w[1]).mean).collect();
        let spread = diffs.iter().fold(f64::MIN, |a, &b| a.max(b))
            - diffs.iter().fold(f64::MAX, |a, &b| a.min(b));
        Line {
            lo: on[0],
            e,
            spread,
        }
    });
    let mut rule = Rule {
        e_dists,
        ..Rule::default()
    };
    // Where U is not separable at all (nothing forwards R+S), nothing is found of it here.
    if f.flagged("U", size) {
        return rule;
    }
    if let (Some(l), Some(r)) = (line, cx.get("r", size)) {
        let e = l.e;
        // The model's one hop is max(E, R) (docs/simulator.md §4): R counts where it is
        // above E beyond the noise.
        rule.hop_r = r.mean - e.mean > cx.noise.tolerance(&[r, e], 0.0, 0.0);
        if rule.hop_r {
            f.note("U", size, "hop-bound-by-e", || {
                format!(
                    "R above E (measured at {size} B: R = {}, E = {}): a message is delivered \
                     once its R has run, so 2(F+E+U) measured 2(F+R+U), and U = 2(F+R+U)/2 - R - F",
                    us(r.mean),
                    us(e.mean)
                )
            });
        }
    }
    u_rule(cx, &mut rule, line, floor.as_ref(), size, f);
    rule
}

/// Where U comes from at `size`: `2(F+E+U)` when it is above the CPU floor and on the echo's
/// line at one hop; else the echo's line, when three distances or more show it is one; else
/// nowhere.
fn u_rule(
    cx: &Ctx<'_>,
    rule: &mut Rule,
    line: Option<Line>,
    floor: Option<&(f64, Vec<Est>)>,
    size: u64,
    f: &mut Findings,
) {
    let Some(x) = cx.get("2(f+e+u)", size) else {
        return;
    };
    let bound = floor.filter(|(l, parts)| {
        let mut all = parts.clone();
        all.push(x);
        x.mean <= l + cx.noise.tolerance(&all, x.mean, REL)
    });
    let off = line.map(|l| l.at_one_hop()).filter(|at| {
        let tol = cx.noise.tolerance(&[x, *at], x.mean, REL_LINE);
        (x.mean - at.mean).abs() > tol
    });
    let at_one = line.map(|l| l.at_one_hop());
    let (assumption, measured) = match (bound, off) {
        (None, None) => {
            // E's room, and 2(F+E+U)'s distance from the echo's line at one hop.
            rule.u_room = line.map_or(0.0, |l| {
                l.spread + at_one.map_or(0.0, |a| (x.mean - a.mean).abs() / 2.0)
            });
            return;
        }
        (Some((l, _)), _) => (
            "round-trip-bound-by-path",
            format!(
                "2(F+E+U) is bound by the neighbour's CPU, not the path (measured at {size} B: \
                 2(F+E+U) = {}, one end's CPU per round trip F+S + A+U + R = {})",
                us(x.mean),
                us(*l)
            ),
        ),
        (None, Some(at)) => (
            "round-trip-on-echo-line",
            format!(
                "2(F+E+U) is off the echo's line at one hop (measured at {size} B: 2(F+E+U) = \
                 {}, the echo's line at one hop {}): a round trip bound by something besides \
                 the path",
                us(x.mean),
                us(at.mean)
            ),
        ),
    };
    // With two distances on the echo's line nothing shows whether they lie on it: a round
    // trip a little off the path moves E and, doubled by the distance, 2F + 2U.
    if let Some(l) = line.filter(|_| rule.e_dists.len() >= 3) {
        rule.u_echo = rule.e_dists.clone();
        // 2F + 2U = T(lo) - 2 lo E: a difference per hop off by the spread moves it lo times.
        rule.u_room = f64::from(l.lo.0) * l.spread;
        f.note("U", size, assumption, || {
            format!(
                "{measured}: U from the echo's line instead, 2F + 2U = T(d) - 2dE at the \
                 distances E came from"
            )
        });
    } else {
        rule.u_none = true;
        f.flag("U", size, assumption, || {
            format!(
                "{measured}, and fewer than three of the echo's distances lie on its line to \
                 find 2F + 2U from"
            )
        });
    }
}

/// `v` us, as the report writes a time.
fn us(v: f64) -> String {
    format!("{v:.1} us")
}

/// `1, 2, 3` of a list of distances.
fn list(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// The distances of the idle echo that give E at `size` (§5.1's E idle), by the same checks as
/// the busy one's against the idle floor; nothing recorded.
pub fn idle_dists(cx: &Ctx<'_>, size: u64) -> Vec<u32> {
    let floor = floor(cx.t, size).filter(|_| cx.cpu_floor);
    let mut sink = Findings::default();
    e_rule(
        &at_size(cx.idle, size),
        floor.as_ref().map(|(l, p)| (*l, p.as_slice())),
        cx.noise,
        size,
        &mut sink,
    )
}

/// The times in the order of the solve (§3.5), each with the times it is computed from and the
/// experiments whose values it combines.
const ORDER: [(&str, &[&str], &[&str]); 6] = [
    ("E", &[], &[]),
    ("R", &[], &["r"]),
    ("S", &["R"], &["r+s", "r"]),
    ("F", &["S"], &["f+s", "r+s", "r"]),
    ("U", &["E", "F"], &["2(f+e+u)", "f+s", "r+s", "r"]),
    ("A", &["U"], &["a+u", "2(f+e+u)", "f+s", "r+s", "r"]),
];

/// How far a value computed from `experiments` at `size` may be below zero and still be zero,
/// us, given `se`, its own standard error: three standard errors, with those of Q's mean
/// where an experiment had Q subtracted (the repetitions' spread does not hold it), and
/// [`REL_SIGN`] of the magnitudes of the experiments' values, each with its Q.
fn sign_tolerance(t: &Table, experiments: &[&str], size: u64, se: f64) -> f64 {
    let est = |k: &str| t.get(k).and_then(|m| m.get(&size)).and_then(|v| Est::of(v));
    let q = est("q");
    let (mut scale, mut var) = (0.0, se * se);
    for k in experiments {
        scale += est(k).map_or(0.0, |e| e.mean.abs());
        let sub = commbench_core::method::sixtimes::Experiment::from_name(k)
            .is_some_and(|e| e.subtracts_q());
        if let (true, Some(q)) = (sub, q) {
            scale += q.mean.abs();
            var += q.se * q.se;
        }
    }
    3.0 * var.sqrt() + REL_SIGN * scale
}

/// Every solved time non-negative (§2: each is a duration), in the order of the solve: a mean
/// below zero by more than its noise is removed at that size and flagged, with every time
/// computed from it there; one below zero within its noise is returned, to be taken as zero.
pub fn settle(
    solved: &mut super::SolvedTable,
    t: &Table,
    rules: &BTreeMap<u64, Rule>,
    f: &mut Findings,
) -> Vec<(&'static str, u64)> {
    let mut zero = Vec::new();
    for (time, deps, experiments) in ORDER {
        for &size in rules.keys() {
            let hop_r = rules.get(&size).is_some_and(|r| r.hop_r);
            let extra: &[&str] = if time == "U" && hop_r { &["R"] } else { &[] };
            let lost = deps.iter().chain(extra).find(|d| f.flagged(d, size));
            let values = solved.get_mut(time).and_then(|m| m.remove(&size));
            let measured = experiments
                .iter()
                .all(|k| t.get(*k).is_some_and(|m| m.contains_key(&size)));
            if let (Some(dep), true) = (lost, measured && !f.flagged(time, size)) {
                f.flag(time, size, &format!("derived-from-{dep}"), || {
                    format!("it is computed from {dep}, which is not separable at these sizes")
                });
                continue;
            }
            let Some(values) = values.filter(|_| lost.is_none()) else {
                continue;
            };
            let Some(e) = Est::of(&values) else { continue };
            let room = rules.get(&size).map_or(0.0, |r| r.u_room);
            if matches!(time, "U" | "A") && room > ACCURACY * e.mean.abs() {
                f.flag(time, size, "accuracy", || {
                    format!(
                        "solved as {} at {size} B, but the echo's differences per hop and \
                         2(F+E+U) leave it uncertain by {}, more than {}% of it",
                        us(e.mean),
                        us(room),
                        ACCURACY * 100.0
                    )
                });
                continue;
            }
            let tol = sign_tolerance(t, experiments, size, e.se);
            if e.mean < -tol {
                f.flag(time, size, "non-negative", || {
                    format!(
                        "solved as {} at {size} B, below zero beyond its noise ({}): an \
                         assumption of the solve does not hold on this machine",
                        us(e.mean),
                        us(tol)
                    )
                });
                continue;
            }
            if e.mean < 0.0 {
                zero.push((time, size));
                f.note(time, size, "non-negative", || {
                    format!(
                        "solved as {} at {size} B, zero within its noise ({}): taken as 0",
                        us(e.mean),
                        us(tol)
                    )
                });
            }
            if let Some(m) = solved.get_mut(time) {
                m.insert(size, values);
            }
        }
    }
    zero
}

/// A note where a time's line (Table 3) is off its own values by more than their noise: the
/// time is not a line in the size there (§3.5 found the NCUBE's were).
pub fn linear(name: &str, l: &super::TimeLine, repetitions: usize, sizes: usize, f: &mut Findings) {
    if l.values.len() == 1 && sizes > 1 {
        let size = l.values[0].size;
        f.note(name, size, "line-from-one-size", || {
            format!(
                "given at {size} B alone of the {sizes} sizes measured: its Table 3 line is that \
                 value, flat, not a fit"
            )
        });
    }
    if l.values.len() < 3 {
        return;
    }
    let n = (repetitions.max(1) as f64).sqrt();
    let se = l
        .values
        .iter()
        .map(|v| v.std_dev_us / n)
        .fold(0.0, f64::max);
    let top = l.values.iter().map(|v| v.mean_us.abs()).fold(0.0, f64::max);
    let tol = 3.0 * se + REL * top;
    if l.max_error_us <= tol {
        return;
    }
    for v in &l.values {
        f.note(name, v.size, "linear-in-size", || {
            format!(
                "its values are off Table 3's line by up to {} (noise {}): the line does not \
                 describe this time within its noise; use the values per size",
                us(l.max_error_us),
                us(tol)
            )
        });
    }
}

/// An experiment's value (or a sum of them) made non-negative as [`settle`] makes a solved
/// time: below zero within its noise it is taken as zero, beyond its noise it is not given at
/// that size; either way a note says so. `experiments`: what the value is computed from.
pub fn measured_sign(
    key: &str,
    experiments: &[&str],
    l: super::TimeLine,
    t: &Table,
    repetitions: usize,
    f: &mut Findings,
) -> Option<super::TimeLine> {
    if l.values.iter().all(|v| v.mean_us >= 0.0) {
        return Some(l);
    }
    let n = (repetitions.max(1) as f64).sqrt();
    let mut values = Vec::new();
    for mut v in l.values {
        let tol = sign_tolerance(t, experiments, v.size, v.std_dev_us / n);
        if v.mean_us >= 0.0 {
            values.push(v);
        } else if v.mean_us >= -tol {
            f.note(key, v.size, "non-negative", || {
                format!(
                    "measured as {} at {} B, zero within its noise ({}): taken as 0",
                    us(v.mean_us),
                    v.size,
                    us(tol)
                )
            });
            v.mean_us = 0.0;
            values.push(v);
        } else {
            f.note(key, v.size, "non-negative-measured", || {
                format!(
                    "measured as {} at {} B, below zero beyond its noise ({}): Q ran faster \
                     with the messages than without them, so the experiment does not measure \
                     a time there; no value is given",
                    us(v.mean_us),
                    v.size,
                    us(tol)
                )
            });
        }
    }
    (!values.is_empty()).then(|| super::TimeLine::fit(values))
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: u64 = 1000;

    /// One size's experiments, five equal repetitions each.
    fn table(values: &[(&str, f64)]) -> Table {
        values
            .iter()
            .map(|(k, v)| (k.to_string(), BTreeMap::from([(N, vec![*v; 5])])))
            .collect()
    }

    /// An echo of round trips `t(d)` at distances 1..=4.
    fn echo(t: impl Fn(u32) -> f64) -> Echoes {
        (1..=4u32)
            .map(|d| (d, BTreeMap::from([(N, vec![t(d); 5])])))
            .collect()
    }

    fn ctx<'a>(t: &'a Table, busy: &'a Echoes, idle: &'a Echoes, floor: bool) -> Ctx<'a> {
        Ctx {
            t,
            busy,
            idle,
            q_ns: None,
            noise: Noise { quantum_us: 0.01 },
            cpu_floor: floor,
        }
    }

    /// F, S, R, A, U, E of a machine where everything is path-bound.
    const TIMES: [f64; 6] = [50.0, 10.0, 20.0, 30.0, 40.0, 100.0];

    fn measured(times: [f64; 6]) -> Table {
        let [f, s, r, a, u, e] = times;
        table(&[
            ("r", r),
            ("r+s", r + s),
            ("f+s", f + s),
            ("a+u", a + u),
            ("2(f+e+u)", 2.0 * (f + e.max(r) + u)),
        ])
    }

    #[test]
    fn a_path_bound_machine_is_solved_as_the_paper_does() {
        let t = measured(TIMES);
        let [f, _, _, _, u, e] = TIMES;
        let busy = echo(|d| 2.0 * f + 2.0 * f64::from(d) * e + 2.0 * u);
        let mut found = Findings::default();
        let rule = rule_at(&ctx(&t, &busy, &busy, true), N, &mut found);
        assert_eq!(rule.e_dists, vec![1, 2, 3, 4]);
        assert!(!rule.hop_r && rule.u_echo.is_empty() && !rule.u_none);
        assert_eq!(found, Findings::default());
    }

    #[test]
    fn a_round_trip_bound_by_a_cpu_is_left_out_of_e_and_u_comes_from_the_echo() {
        // S so large that one end's CPU (F+S + A+U + R) passes the one-hop round trip.
        let times = [50.0, 400.0, 20.0, 30.0, 40.0, 100.0];
        let t = measured(times);
        let [f, s, r, a, u, e] = times;
        let cpu = f + s + a + u + r;
        let bound = |d: u32| (2.0 * f + 2.0 * f64::from(d) * e + 2.0 * u).max(cpu);
        let busy = echo(bound);
        let mut t2 = t.clone();
        t2.insert("2(f+e+u)".into(), BTreeMap::from([(N, vec![cpu; 5])]));
        let mut found = Findings::default();
        let rule = rule_at(&ctx(&t2, &busy, &busy, true), N, &mut found);
        assert_eq!(rule.e_dists, vec![2, 3, 4], "{found:#?}");
        assert_eq!(rule.u_echo, vec![2, 3, 4]);
        assert!(found
            .notes
            .iter()
            .any(|n| n.assumption == "round-trip-bound-by-path"));
        // Without the floor (a transport that is not the model's machine) the bound round
        // trip is still off the line of the others.
        let mut plain = Findings::default();
        let rule = rule_at(&ctx(&t2, &busy, &busy, false), N, &mut plain);
        assert_eq!(rule.e_dists, vec![2, 3, 4]);
        assert!(!rule.u_echo.is_empty(), "{plain:#?}");
    }

    #[test]
    fn a_flat_echo_gives_no_e() {
        let t = measured(TIMES);
        let busy = echo(|_| 5000.0);
        let mut found = Findings::default();
        let rule = rule_at(&ctx(&t, &busy, &busy, false), N, &mut found);
        assert!(rule.e_dists.is_empty());
        assert_eq!(found.not_separable[0].time, "E");
        assert_eq!(found.not_separable[0].sizes, vec![N]);
        assert!(found.flagged("E", N) && !found.flagged("E", N + 1));
    }

    #[test]
    fn r_above_e_makes_the_hop_r() {
        let times = [50.0, 10.0, 300.0, 30.0, 40.0, 100.0];
        let t = measured(times);
        let [f, _, r, _, u, e] = times;
        let busy = echo(|d| 2.0 * f + 2.0 * f64::from(d - 1) * e + 2.0 * r + 2.0 * u);
        let mut found = Findings::default();
        let rule = rule_at(&ctx(&t, &busy, &busy, true), N, &mut found);
        assert!(rule.hop_r, "{found:#?}");
        assert!(rule.u_echo.is_empty() && !rule.u_none);
        assert_eq!(found.notes[0].assumption, "hop-bound-by-e");
    }

    #[test]
    fn a_negative_time_is_flagged_with_every_time_derived_from_it() {
        let t = measured(TIMES);
        let rules = BTreeMap::from([(N, Rule::default())]);
        let solved = |s: f64| -> super::super::SolvedTable {
            [
                ("E", 100.0),
                ("R", 20.0),
                ("S", s),
                ("F", 50.0),
                ("U", 40.0),
                ("A", 30.0),
            ]
            .into_iter()
            .map(|(k, v)| (k, BTreeMap::from([(N, vec![v; 5])])))
            .collect()
        };
        // Far below zero: S and the three derived from it go.
        let mut found = Findings::default();
        let mut table = solved(-30.0);
        let zero = settle(&mut table, &t, &rules, &mut found);
        assert!(zero.is_empty());
        let gone: Vec<&str> = found
            .not_separable
            .iter()
            .map(|n| n.time.as_str())
            .collect();
        assert_eq!(gone, ["S", "F", "U", "A"]);
        assert_eq!(
            found.not_separable[1].assumption.as_deref(),
            Some("derived-from-S")
        );
        assert!(table["S"].is_empty() && table["A"].is_empty() && !table["R"].is_empty());
        // Within its noise: taken as zero, the rest kept.
        let mut found = Findings::default();
        let mut table = solved(-0.01);
        let zero = settle(&mut table, &t, &rules, &mut found);
        assert_eq!(zero, vec![("S", N)]);
        assert!(found.not_separable.is_empty());
        assert_eq!(found.notes[0].assumption, "non-negative");
    }

    #[test]
    fn a_line_through_one_size_of_several_is_said_to_be_no_fit() {
        let l = super::super::TimeLine::fit(vec![super::super::SizeValue {
            size: N,
            mean_us: 3.0,
            std_dev_us: 0.0,
        }]);
        let mut found = Findings::default();
        linear("U", &l, 5, 1, &mut found);
        assert!(found.notes.is_empty());
        linear("U", &l, 5, 4, &mut found);
        assert_eq!(found.notes[0].assumption, "line-from-one-size");
    }

    #[test]
    fn a_measured_value_below_zero_is_zero_or_not_given() {
        let t = table(&[("r", -0.01), ("q", 100.0)]);
        let line = |v: f64| {
            super::super::TimeLine::fit(vec![super::super::SizeValue {
                size: N,
                mean_us: v,
                std_dev_us: 0.0,
            }])
        };
        let mut found = Findings::default();
        let l = measured_sign("o_r", &["r"], line(-0.01), &t, 5, &mut found).unwrap();
        assert_eq!(l.values[0].mean_us, 0.0);
        assert!(measured_sign("o_r", &["r"], line(-5.0), &t, 5, &mut found).is_none());
        assert_eq!(found.notes.len(), 2);
    }
}
