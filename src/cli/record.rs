//! Rank 0's analysis of a run (design §2): what each backend collected becomes the typed
//! result document, with every point analysed from its raw trial times and the fit of the
//! first backend's sweep.

use super::plan::Plan;
use crate::cli::backend::{BackendRun, Outcome};
use commbench::analysis::document::RunConfig;
use commbench::analysis::document::{Environment, Point, ResultDoc, SCHEMA, SCHEMA_VERSION};
use commbench::analysis::fit;
use commbench::analysis::fit::Breakpoint;
use commbench::analysis::{queue, sixtimes};
use commbench::core::method::engine::Collected;
use commbench::core::method::timer::TimerReport;
use commbench::core::transport::BackendInfo;
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
}

/// Analyse every point of every backend's run and keep the first failure.
fn gather(runs: Vec<BackendRun>, cut_coef: f64, several: bool) -> Gathered {
    let mut g = Gathered::default();
    let mut analysis_error = None;
    for run in runs {
        let Collected {
            timer,
            backend_info,
            points,
        } = run.collected;
        g.timer = g.timer.or(timer);
        if let Some(i) = backend_info {
            g.infos
                .insert(run.backend.to_string(), serde_json::Value::Object(i));
        }
        for raw in points {
            match Point::from_raw(raw, run.backend, cut_coef) {
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

/// What the document of a run needs of its plan, owned, so that a document can also be made
/// from another thread (the sizes measured so far, saved when a signal arrives).
#[derive(Debug, Clone)]
pub struct Recipe {
    cut_coef: f64,
    breakpoint: Breakpoint,
    instructions_per_second: Option<f64>,
    config: RunConfig,
    /// Whether the first backend routes over a hypercube itself (seed 001's `r+s`).
    transport_forwards: bool,
}

impl Recipe {
    /// The recipe of `plan`'s documents.
    pub fn of(plan: &Plan) -> Self {
        Recipe {
            cut_coef: plan.method.cut_coef,
            breakpoint: plan.breakpoint,
            instructions_per_second: plan.instructions_per_second,
            config: plan.config.clone(),
            transport_forwards: plan
                .backends
                .first()
                .is_some_and(|b| b.hypercube().is_some()),
        }
    }
}

/// The result document of a run, on rank 0.
pub fn document(plan: &Recipe, outcome: Outcome, started: Started) -> ResultDoc {
    let mut names: Vec<&str> = outcome.runs.iter().map(|r| r.backend).collect();
    names.dedup();
    let several = names.len() > 1;
    let g = gather(outcome.runs, plan.cut_coef, several);
    // One backend: its own record; several: each under its name.
    let backend_info = if several {
        g.infos
    } else {
        match g.infos.into_iter().next() {
            Some((_, serde_json::Value::Object(m))) => m,
            _ => BackendInfo::new(),
        }
    };
    // Fitted models describe one backend's sweep: the first backend's.
    let first: Vec<Point> = g
        .points
        .iter()
        .filter(|p| names.first() == Some(&p.backend.as_str()))
        .cloned()
        .collect();
    // Seed 001's programs are analysed by their own method (the first backend's points);
    // a Hockney line through their experiments would mean nothing.
    let seed001 = plan
        .config
        .sixtimes
        .is_some()
        .then(|| sixtimes::analyse(&first, plan.transport_forwards));
    let fit = match seed001 {
        Some(_) => None,
        None => fit::fit_points(&first, plan.breakpoint, plan.instructions_per_second)
            .into_iter()
            .next(),
    };
    let seed001 = seed001.unwrap_or_default();
    let mut config = plan.config.clone();
    config.ranks = outcome.ranks;
    config.backend = names.join(",");
    ResultDoc {
        fit,
        params: seed001.params,
        interference: seed001.interference,
        sixtimes: seed001.detail,
        queue: queue::analyse(&g.points),
        allpairs: None,
        schema: SCHEMA.into(),
        version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: std::env::args().collect(),
        config: Some(config),
        environment: Environment::probe(
            &names.join(","),
            backend_info,
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
    }
}
