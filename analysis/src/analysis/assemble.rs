//! Rank 0's step from runs to a result document (design §2, §8): what each backend's run
//! collected becomes the typed [`ResultDoc`], every point analysed from its raw trial times,
//! seed 001's or seed 004's analysis where the run was theirs, and the fit of the first
//! backend's sweep; an all-pairs run adds its matrix section ([`with_matrix`]). The command
//! line, the tests and anything else that measures in process build documents through here.

use crate::analysis::allpairs::Rule;
use crate::analysis::document::ReportCard;
use crate::analysis::document::{Environment, Point, ResultDoc, RunConfig, SCHEMA, SCHEMA_VERSION};
use crate::analysis::fit::{self, Breakpoint};
use crate::analysis::matrix::MatrixSection;
use crate::analysis::pairs::PairsSection;
use crate::analysis::steady::DropWarmup;
use crate::analysis::{maxrate, queue, sixtimes};
use commbench_core::method::allpairs::{AllPairsCollected, AllPairsConfig};
use commbench_core::method::engine::{Collected, RawPoint};
use commbench_core::method::timer::TimerReport;
use commbench_core::transport::error::Error;
use commbench_core::transport::BackendInfo;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// When a run started, for the document.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    /// Monotonic start, for the wall time.
    pub at: Instant,
    /// Seconds since the Unix epoch.
    pub unix_s: u64,
}

impl Started {
    /// Now.
    pub fn now() -> Self {
        Started {
            at: Instant::now(),
            unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }
}

/// One backend's part of a run, as rank 0 saw it.
#[derive(Debug)]
pub struct BackendRun {
    /// Backend name.
    pub backend: &'static str,
    /// What rank 0 collected (also from a failed run).
    pub collected: Collected,
    /// The outcome.
    pub result: Result<(), Error>,
}

/// What a run gave on this process: every backend's part, as rank 0 saw it.
#[derive(Debug)]
pub struct Outcome {
    /// Ranks in the run.
    pub ranks: u32,
    /// Who started them.
    pub launcher: String,
    /// This process's rank (0 reports the results).
    pub rank: u32,
    /// Each backend's part, in order.
    pub runs: Vec<BackendRun>,
}

/// What the document of a run needs besides its runs, owned, so that a document can also be
/// made from another thread (the sizes measured so far, saved when a signal arrives).
#[derive(Debug, Clone)]
pub struct Recipe {
    /// The filter's cut (seed 000 §3.4), for each point's analysis.
    pub cut_coef: f64,
    /// The Hockney fit's breakpoint.
    pub breakpoint: Breakpoint,
    /// `--instructions-per-second`, for the fit's instruction counts.
    pub instructions_per_second: Option<f64>,
    /// The run configuration as the command asked for it; the backends that ran and the
    /// ranks they had are filled in from the runs.
    pub config: RunConfig,
    /// Whether the first backend routes over a hypercube itself (seed 001's `r+s`).
    pub transport_forwards: bool,
    /// The command line, as the document records it.
    pub command: Vec<String>,
}

impl Recipe {
    /// What the document's analyses take besides the points.
    pub fn analyses(&self) -> Analyses {
        Analyses {
            breakpoint: self.breakpoint,
            instructions_per_second: self.instructions_per_second,
            transport_forwards: self.transport_forwards,
        }
    }
}

/// What the analyses of a document take besides its points and configuration ([`analyse`]):
/// a stream records them in its first line (`analysis`), so that its document is analysed
/// as the run's own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Analyses {
    /// The Hockney fit's breakpoint.
    pub breakpoint: Breakpoint,
    /// `--instructions-per-second`, for the fit's instruction counts.
    pub instructions_per_second: Option<f64>,
    /// Whether the first backend routes over a hypercube itself (seed 001's `r+s`).
    pub transport_forwards: bool,
}

/// Points analysed as they were kept, before the document: a signal's save then reads them
/// instead of analysing every point again in the second a launcher leaves before its kill,
/// and the document at the end takes them as they are. Each is found by its backend, its
/// index and the raw point it was made from, so a point kept differently is analysed anew.
#[derive(Debug, Default, Clone)]
pub struct Analysed(Vec<(&'static str, usize, RawPoint, Point)>);

impl Analysed {
    /// None yet.
    pub const fn new() -> Self {
        Analysed(Vec::new())
    }

    /// Those of `other` too.
    pub fn extend(&mut self, other: Analysed) {
        self.0.extend(other.0);
    }

    /// Analyse `raw`, point `index` of `backend`'s run on a clock of `clock_ns`, as the
    /// document will, and keep it: the point, or `None` when the analysis refuses it (the
    /// document then says why).
    pub fn add(
        &mut self,
        (backend, index): (&'static str, usize),
        raw: RawPoint,
        recipe: &Recipe,
        clock_ns: f64,
    ) -> Option<Point> {
        let (cut, drop) = (recipe.cut_coef, recipe.config.drop_warmup);
        let p = Point::from_raw_dropping(raw.clone(), backend, cut, drop, clock_ns).ok()?;
        self.0.push((backend, index, raw, p.clone()));
        Some(p)
    }

    /// Point `index` of `backend`'s run, if it was analysed from `raw`.
    fn find(&self, backend: &str, index: usize, raw: &RawPoint) -> Option<Point> {
        self.0
            .iter()
            .rev()
            .find(|(b, i, r, _)| *b == backend && *i == index && r == raw)
            .map(|(.., p)| p.clone())
    }
}

/// What the backends' runs hold, analysed.
#[derive(Default)]
struct Gathered {
    /// Every point, analysed.
    points: Vec<Point>,
    /// The first timer characterisation.
    timer: Option<TimerReport>,
    /// Each backend's description, by name.
    infos: BackendInfo,
    /// The first failure (a run's, else an analysis's).
    error: Option<String>,
    /// Whether a signal stopped the run between sizes.
    interrupted: bool,
    /// Every rank's host, where the run gathered them (pairs streaming at once).
    hosts: Vec<String>,
}

/// Analyse every point of every backend's run (its trials tested for a change on the
/// clock its run characterised, a warm-up dropped under `drop`; those in `done` taken as
/// they are) and keep the first failure.
fn gather(
    runs: Vec<BackendRun>,
    (cut_coef, drop): (f64, DropWarmup),
    several: bool,
    done: &Analysed,
) -> Gathered {
    let mut g = Gathered::default();
    let mut analysis_error = None;
    for run in runs {
        let Collected {
            timer,
            backend_info,
            points,
            hosts,
            ..
        } = run.collected;
        if g.hosts.is_empty() {
            g.hosts = hosts;
        }
        let clock_ns = timer.as_ref().map_or(0.0, |t| t.resolution_ns);
        g.timer = g.timer.or(timer);
        if let Some(i) = backend_info {
            g.infos
                .insert(run.backend.to_string(), serde_json::Value::Object(i));
        }
        for (index, raw) in points.into_iter().enumerate() {
            if let Some(p) = done.find(run.backend, index, &raw) {
                g.points.push(p);
                continue;
            }
            match Point::from_raw_dropping(raw, run.backend, cut_coef, drop, clock_ns) {
                Ok(p) => g.points.push(p),
                Err(e) => analysis_error = Some(e.to_string()),
            }
        }
        if let Err(e) = &run.result {
            g.interrupted |= e.interrupted().is_some();
        }
        if let (Err(e), None) = (run.result, &g.error) {
            g.error = Some(if several {
                format!("{}: {e}", run.backend)
            } else {
                e.to_string()
            });
        }
    }
    g.error = g.error.or(analysis_error);
    g
}

/// The result document of a run, on rank 0.
pub fn document(recipe: &Recipe, outcome: Outcome, started: Started) -> ResultDoc {
    document_with(recipe, outcome, started, &Analysed::default())
}

/// The result document of a run, on rank 0, the points in `done` not analysed again.
pub fn document_with(
    recipe: &Recipe,
    outcome: Outcome,
    started: Started,
    done: &Analysed,
) -> ResultDoc {
    let mut names: Vec<&str> = outcome.runs.iter().map(|r| r.backend).collect();
    names.dedup();
    let several = names.len() > 1;
    let drop = recipe.config.drop_warmup;
    let g = gather(outcome.runs, (recipe.cut_coef, drop), several, done);
    let mut config = recipe.config.clone();
    config.ranks = outcome.ranks;
    config.backend = names.join(",");
    let pairs = config
        .method
        .pairs
        .as_ref()
        .map(|c| PairsSection::of(c, &g.hosts));
    let mut doc = ResultDoc {
        pairs,
        max_rate: None,
        fit: None,
        params: None,
        interference: None,
        sixtimes: None,
        queue: None,
        allpairs: None,
        report_card: None,
        schema: SCHEMA.into(),
        version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: recipe.command.clone(),
        config: Some(config),
        environment: Environment::probe(
            &names.join(","),
            described(g.infos, several),
            outcome.ranks,
            &outcome.launcher,
        ),
        timer: g.timer.map(Into::into),
        status: match (g.interrupted, &g.error) {
            (true, _) => "interrupted".into(),
            (false, Some(_)) => "partial".into(),
            (false, None) => "complete".into(),
        },
        error: g.error,
        points: g.points,
        started_unix_s: started.unix_s,
        wall_s: started.at.elapsed().as_secs_f64(),
    };
    analyse(&mut doc, &recipe.analyses());
    doc
}

/// The document's `environment.backend_info` of the backends' descriptions by name: one
/// backend's own record, or several each under its name.
pub fn described(infos: BackendInfo, several: bool) -> BackendInfo {
    if several {
        return infos;
    }
    match infos.into_iter().next() {
        Some((_, serde_json::Value::Object(m))) => m,
        _ => BackendInfo::new(),
    }
}

/// The sections a document's analyses add to its points, made from the points and the
/// configuration alone (a run's document and a stream's are analysed alike): seed 001's
/// analysis of the first backend's points where the run was seed 001's, else the fitted
/// model of the first backend's sweep; seed 004's queue lines; the report card of rules 5-11
/// of Hoefler & Belli ([`ReportCard::of`]).
pub fn analyse(doc: &mut ResultDoc, how: &Analyses) {
    let config = doc.config.as_ref();
    let first_backend = config
        .and_then(|c| c.backend.split(',').next())
        .unwrap_or_default();
    // Fitted models describe one backend's sweep: the first backend's.
    let first: Vec<Point> = doc
        .points
        .iter()
        .filter(|p| p.backend == first_backend)
        .cloned()
        .collect();
    // Seed 001's programs are analysed by their own method (the first backend's points);
    // a Hockney line through their experiments would mean nothing.
    let seed001 = config.is_some_and(|c| c.sixtimes.is_some()).then(|| {
        let res = doc.timer.as_ref().map(|t| t.resolution_ns);
        sixtimes::analyse(&first, how.transport_forwards, res)
    });
    doc.fit = match seed001 {
        Some(_) => None,
        None => fit::fit_points(&first, how.breakpoint, how.instructions_per_second)
            .into_iter()
            .next(),
    };
    let seed001 = seed001.unwrap_or_default();
    doc.params = seed001.params;
    doc.interference = seed001.interference;
    doc.sixtimes = seed001.detail;
    doc.queue = queue::analyse(&doc.points);
    let max_rate = maxrate::fit_all(&doc.points);
    doc.max_rate = (!max_rate.is_empty()).then_some(max_rate);
    doc.report_card = ReportCard::of(doc);
}

/// `doc` with the matrix section of the all-pairs run that `collected` holds, attributed
/// under `rule`; a section that cannot be built leaves the document partial, saying why.
pub fn with_matrix(
    mut doc: ResultDoc,
    collected: AllPairsCollected,
    config: AllPairsConfig,
    rule: Rule,
) -> ResultDoc {
    if collected.ranks == 0 {
        return doc;
    }
    match MatrixSection::build(collected, config, rule) {
        Ok(section) => doc.allpairs = Some(section),
        Err(e) => {
            doc.error.get_or_insert_with(|| e.to_string());
            doc.status = "partial".into();
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::steady::DropWarmup;
    use commbench_core::stats::Xoshiro256;

    fn recipe(drop: DropWarmup) -> Recipe {
        Recipe {
            cut_coef: 2.0,
            breakpoint: Breakpoint::Auto,
            instructions_per_second: None,
            config: RunConfig {
                drop_warmup: drop,
                ..RunConfig::default()
            },
            transport_forwards: false,
            command: vec!["commbench".into()],
        }
    }

    /// A ping-pong point of `n` trials around `base` ns, its level shifted by `step` from
    /// trial `at` on (a warm-up or a slow-down, for the analysis to find).
    fn raw(
        rng: &mut Xoshiro256,
        size: u64,
        n: usize,
        (base, step, at): (f64, f64, usize),
    ) -> RawPoint {
        let trial_ns: Vec<i64> = (0..n)
            .map(|i| {
                let level = if i >= at { base + step } else { base };
                (level * rng.range(1.0, 1.05)) as i64
            })
            .collect();
        let trial_start_ns = trial_ns
            .iter()
            .scan(0u64, |t, x| {
                let s = *t;
                *t += *x as u64;
                Some(s)
            })
            .collect();
        RawPoint {
            pattern: "pingpong".into(),
            size,
            npp: 1,
            trips_per_iteration: 2,
            trial_ns,
            trial_start_ns,
            ..RawPoint::default()
        }
    }

    use crate::analysis::testkit::shm_outcome as outcome;

    /// A document made from points analysed as they were kept is the document made from
    /// the raw points, on random sweeps (steady, with warm-ups and with slow-downs, the
    /// warm-up dropped or kept); a point kept differently from the one analysed (its trials
    /// changed) is analysed anew, never taken from the cache.
    #[test]
    fn points_analysed_as_kept_make_the_same_document() {
        let mut rng = Xoshiro256::new(0x5eed_a55e);
        for case in 0..12 {
            let drop = if case % 2 == 0 {
                DropWarmup::None
            } else {
                DropWarmup::Auto
            };
            let r = recipe(drop);
            let n_points = 1 + (rng.next_u64() % 5) as usize;
            let points: Vec<RawPoint> = (0..n_points)
                .map(|i| {
                    let n = 50 + (rng.next_u64() % 400) as usize;
                    let base = rng.range(500.0, 20_000.0);
                    let step = base * rng.range(-0.5, 2.0) * f64::from(u8::from(case % 3 != 0));
                    let at = (rng.next_u64() as usize) % n;
                    raw(&mut rng, 8 << i, n, (base, step, at))
                })
                .collect();
            let mut done = Analysed::new();
            for (i, p) in points.iter().enumerate() {
                // The last point's cached analysis is of other trials than those kept.
                let mut seen = p.clone();
                if i + 1 == n_points && case % 4 == 1 {
                    seen.trial_ns[0] += 1000;
                }
                done.add(("shm", i), seen, &r, 1.0);
            }
            for (i, p) in points.iter().enumerate() {
                let altered = i + 1 == n_points && case % 4 == 1;
                assert_eq!(done.find("shm", i, p).is_some(), !altered, "case {case}");
                assert!(done.find("tcp", i, p).is_none());
            }
            let started = Started::now();
            let fresh = document(&r, outcome(points.clone()), started);
            let cached = document_with(&r, outcome(points), started, &done);
            // As the document writes them (a fit's NaN standard errors compare unequal).
            let json = |d: &ResultDoc| serde_json::to_string(&(&d.points, &d.fit)).expect("JSON");
            assert_eq!(json(&fresh), json(&cached), "case {case}");
            assert_eq!(fresh.status, cached.status, "case {case}");
        }
    }
}
