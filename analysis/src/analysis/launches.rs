//! A set of launches of one measurement (`--launches L`, or `commbench launches` over documents
//! a launcher's loop wrote): each launch in fresh processes, so with fresh rank placement and
//! fresh connections. For each point measured by the launches, how much of the spread of their
//! medians is the launches' own (between-launch variance) and how much the trials' noise
//! within each launch, and what one more launch is worth against more trials (Kalibera & Jones
//! 2013, "Rigorous benchmarking in reasonable time", §3: a random-effects model with one level
//! per kind of repetition, its variance components estimated from the sample variances at each
//! level, and the optimal count of repetitions at the lower level). docs/methodology.md §3b.
//!
//! The statistic of a launch is its median one-way time, on a log scale (as `compare` takes
//! it): its variance within the launch comes from the distribution-free 95 % interval of the
//! median the point reports, `((ln hi - ln lo) / (2 x 1.96))^2`.

use crate::analysis::document::ResultDoc;
use commbench_core::stats::{t_975, Interval};
use serde::{Deserialize, Serialize};

/// `schema` of a launch set's summary.
pub const SCHEMA: &str = "commbench-launches";

/// `version` of the summary this build writes.
pub const VERSION: u32 = 1;

/// The summary of a set of launches (`launches.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchSet {
    /// [`SCHEMA`].
    pub schema: String,
    /// [`VERSION`].
    pub version: u32,
    /// The commbench that wrote it.
    pub tool_version: String,
    /// The command line of the set (each launch ran it in fresh processes).
    pub command: Vec<String>,
    /// `complete` (every launch asked for ran to its end), `partial` (a launch failed or did
    /// not run) or `interrupted` (a signal stopped the set).
    pub status: String,
    /// Why the set is not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Launches asked for.
    pub asked: u32,
    /// Every launch, in order.
    pub launches: Vec<Launch>,
    /// Every point measured by the launches, with its statistics over them.
    pub points: Vec<LaunchPoint>,
}

/// One launch of a set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// From 1.
    pub index: u32,
    /// Its result document, relative to the summary's directory when below it.
    pub document: String,
    /// The document's status (`complete`, `partial`, `interrupted`), or `missing` when the
    /// launch wrote none.
    pub status: String,
    /// Its wall time, s (0 when missing).
    pub wall_s: f64,
    /// When it started, s since the Unix epoch (0 when missing).
    pub started_unix_s: u64,
    /// Its exit status, when the set started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
}

/// One point over the launches that measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchPoint {
    /// Pattern.
    pub pattern: String,
    /// Backend.
    pub backend: String,
    /// Message size, bytes.
    pub size: u64,
    /// Each launch's median one-way time, us, in launch order (the launches that measured it).
    pub medians_us: Vec<f64>,
    /// The indices of those launches.
    pub launches: Vec<u32>,
    /// Mean trials a launch took at this size.
    pub trials_mean: f64,
    /// Geometric mean of the launches' medians, us: the set's statistic (`compare`'s).
    pub geomean_us: f64,
    /// 95 % interval of the set's statistic over the launches (Student's t at n - 1 degrees
    /// of freedom on the log medians); absent with one launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_us: Option<Interval>,
    /// Variance components, on the log scale (so relative): see [`Components`]; absent with
    /// one launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Components>,
}

/// The variance components of a point over its launches (Kalibera & Jones §3, two levels:
/// trials within a launch, launches), on the log of the median one-way time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Components {
    /// `S2^2`: the sample variance of the launches' log medians.
    pub launch_medians_var: f64,
    /// The mean variance of a launch's log median from its own trials (its interval).
    pub within_var: f64,
    /// `T2^2 = max(0, S2^2 - within_var)`: the variance the launches add.
    pub between_var: f64,
    /// `T1^2`: the variance of the log median per trial (`within_var` x trials), what one
    /// trial contributes.
    pub per_trial_var: f64,
    /// `between_var / (between_var + within_var)`: the share of a launch median's variance
    /// that is the launch's, not its trials'.
    pub between_share: f64,
    /// How many more trials, spread over the launches, lower the variance of the set's
    /// statistic as much as one more launch of `trials_mean` trials; absent where no number of
    /// trials does (the launches' own variance alone is above what one more launch leaves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_worth_trials: Option<f64>,
    /// Kalibera & Jones's optimal trials per launch, `ceil(sqrt(c2/c1 x T1^2/T2^2))`, with
    /// `c1` the mean time of a trial and `c2` the rest of a launch's wall time; absent when
    /// the launches add no variance (`T2^2 = 0`: more trials per launch always pay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trials_optimal: Option<f64>,
    /// `c1`, the mean time of one trial at this size, s.
    pub trial_s: f64,
    /// `c2`, a launch's wall time less this size's trials, s.
    pub launch_s: f64,
}

/// Why a set cannot be summarised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetError(pub String);

impl std::fmt::Display for SetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetError {}

/// One launch as the summary reads it: its document (absent when it wrote none), where it is
/// recorded, and its exit status when the set started it.
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    /// The document.
    pub doc: Option<&'a ResultDoc>,
    /// Its path as the summary records it.
    pub path: &'a str,
    /// The launch's exit status.
    pub exit: Option<i32>,
}

/// The summary of `members`, launch `i` being `members[i]`, `asked` launches asked for.
pub fn summarise(members: &[Member<'_>], asked: u32) -> Result<LaunchSet, SetError> {
    let docs: Vec<(u32, &ResultDoc)> = members
        .iter()
        .zip(1u32..)
        .filter_map(|(m, i)| m.doc.map(|d| (i, d)))
        .collect();
    let first = docs
        .first()
        .ok_or_else(|| SetError("no launch wrote a result document".into()))?
        .1;
    if let Some((i, _)) = docs.iter().find(|(_, d)| d.allpairs.is_some()) {
        return Err(SetError(format!(
            "launch {i} is an all-pairs document: a set of launches summarises points, and \
             all-pairs matrices compare one a side"
        )));
    }
    let mut launches = Vec::new();
    for (m, index) in members.iter().zip(1u32..) {
        launches.push(Launch {
            index,
            document: m.path.to_string(),
            status: m.doc.map_or("missing".into(), |d| d.status.clone()),
            wall_s: m.doc.map_or(0.0, |d| d.wall_s),
            started_unix_s: m.doc.map_or(0, |d| d.started_unix_s),
            exit: m.exit,
        });
    }
    let points = keys(&docs)
        .into_iter()
        .map(|key| point_over(&key, &docs))
        .collect();
    let (status, error) = set_status(&launches, asked);
    Ok(LaunchSet {
        schema: SCHEMA.into(),
        version: VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: first.command.clone(),
        status,
        error,
        asked,
        launches,
        points,
    })
}

/// The set's status from its launches: interrupted when the last one was, partial when one
/// is missing, failed or cut short, or fewer ran than were asked.
fn set_status(launches: &[Launch], asked: u32) -> (String, Option<String>) {
    if launches.last().is_some_and(|l| l.status == "interrupted") {
        let done = launches.iter().filter(|l| l.status == "complete").count();
        return (
            "interrupted".into(),
            Some(format!(
                "stopped by a signal after {done} complete launch(es) of {asked}"
            )),
        );
    }
    if let Some(l) = launches.iter().find(|l| l.status != "complete") {
        return (
            "partial".into(),
            Some(format!("launch {} is {}", l.index, l.status)),
        );
    }
    if (launches.len() as u32) < asked {
        return (
            "partial".into(),
            Some(format!("{} launch(es) of {asked} ran", launches.len())),
        );
    }
    ("complete".into(), None)
}

/// A point's identity across launches.
type Key = (String, String, u64);

/// Every point of the launches, in the order first seen (a point measured twice in one
/// document counts by its first measurement, as `compare` takes it).
fn keys(docs: &[(u32, &ResultDoc)]) -> Vec<Key> {
    let mut out: Vec<Key> = Vec::new();
    for (_, d) in docs {
        for p in &d.points {
            let k = (p.pattern.clone(), p.backend.clone(), p.size);
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// What one launch gives for a point: its index, median (us), the variance of its log median
/// from its own interval, its trials, the time of one trial (s), and its wall time (s).
struct Seen {
    index: u32,
    median_us: f64,
    within_var: f64,
    trials: f64,
    trial_s: f64,
    wall_s: f64,
}

/// z of a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

fn seen_in(key: &Key, (index, d): (u32, &ResultDoc)) -> Option<Seen> {
    let p = d
        .points
        .iter()
        .find(|p| (&p.pattern, &p.backend, p.size) == (&key.0, &key.1, key.2))?;
    let s = &p.one_way_us;
    let (lo, hi) = (s.ci95_median.lo, s.ci95_median.hi);
    if !(s.median > 0.0 && lo > 0.0 && hi >= lo) {
        return None;
    }
    let se = (hi.ln() - lo.ln()) / (2.0 * Z95);
    let trials = p.trial_ns.len().max(1) as f64;
    let trial_s = if p.trial_ns.is_empty() {
        // A document without its trials: a trial is npp trips of the median one-way time.
        s.median * 1e-6 * (p.trips_per_iteration * p.npp) as f64
    } else {
        p.trial_ns.iter().map(|&t| t.max(0) as f64).sum::<f64>() * 1e-9 / trials
    };
    Some(Seen {
        index,
        median_us: s.median,
        within_var: se * se,
        trials,
        trial_s,
        wall_s: d.wall_s,
    })
}

/// `key` over the launches that measured it.
fn point_over(key: &Key, docs: &[(u32, &ResultDoc)]) -> LaunchPoint {
    let seen: Vec<Seen> = docs.iter().filter_map(|&m| seen_in(key, m)).collect();
    let n = seen.len() as f64;
    let logs: Vec<f64> = seen.iter().map(|s| s.median_us.ln()).collect();
    let mean_log = logs.iter().sum::<f64>() / n.max(1.0);
    let trials_mean = seen.iter().map(|s| s.trials).sum::<f64>() / n.max(1.0);
    let mut point = LaunchPoint {
        pattern: key.0.clone(),
        backend: key.1.clone(),
        size: key.2,
        medians_us: seen.iter().map(|s| s.median_us).collect(),
        launches: seen.iter().map(|s| s.index).collect(),
        trials_mean,
        geomean_us: if seen.is_empty() {
            f64::NAN
        } else {
            mean_log.exp()
        },
        ci95_us: None,
        components: None,
    };
    if seen.len() < 2 {
        return point;
    }
    let s2 = logs.iter().map(|l| (l - mean_log).powi(2)).sum::<f64>() / (n - 1.0);
    let half = t_975((n - 1.0) as u64).unwrap_or(f64::NAN) * (s2 / n).sqrt();
    point.ci95_us = Some(Interval {
        lo: (mean_log - half).exp(),
        hi: (mean_log + half).exp(),
    });
    point.components = Some(components(&seen, s2, trials_mean));
    point
}

/// The variance components of `seen` (at least two launches), `s2` the sample variance of
/// their log medians, `r` their mean trials.
fn components(seen: &[Seen], s2: f64, r: f64) -> Components {
    let n = seen.len() as f64;
    let within = seen.iter().map(|s| s.within_var).sum::<f64>() / n;
    let per_trial = seen.iter().map(|s| s.within_var * s.trials).sum::<f64>() / n;
    let between = (s2 - within).max(0.0);
    let share = if between + within > 0.0 {
        between / (between + within)
    } else {
        0.0
    };
    let trial_s = seen.iter().map(|s| s.trial_s).sum::<f64>() / n;
    let wall_s = seen.iter().map(|s| s.wall_s).sum::<f64>() / n;
    let launch_s = (wall_s - r * trial_s).max(0.0);
    Components {
        launch_medians_var: s2,
        within_var: within,
        between_var: between,
        per_trial_var: per_trial,
        between_share: share,
        launch_worth_trials: worth_in_trials(n, r, between, per_trial),
        trials_optimal: (between > 0.0 && trial_s > 0.0).then(|| {
            (launch_s / trial_s * per_trial / between)
                .sqrt()
                .ceil()
                .max(1.0)
        }),
        trial_s,
        launch_s,
    }
}

/// The trials, spread over `n` launches of `r` trials each, that lower the variance of the
/// mean of the launches' statistics, `T2^2/n + T1^2/(n r)`, as much as one more launch of `r`
/// trials does; `None` where no number of trials does (`T2^2/n` alone is above what `n + 1`
/// launches leave).
pub fn worth_in_trials(n: f64, r: f64, t2_sq: f64, t1_sq: f64) -> Option<f64> {
    if !(n >= 1.0 && r > 0.0) {
        return None;
    }
    let one_more = t2_sq / (n + 1.0) + t1_sq / ((n + 1.0) * r);
    let room = one_more - t2_sq / n;
    if room <= 0.0 || t1_sq <= 0.0 {
        return None;
    }
    // T2^2/n + T1^2/(n r') = one_more, so r' = T1^2 / (n room).
    let r_needed = t1_sq / (n * room);
    Some(n * (r_needed - r))
}

#[cfg(test)]
mod tests;
