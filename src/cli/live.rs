//! The measurements under way on this process, followed so that a signal can save what they
//! have collected so far (docs/methodology.md §7) and the stream gets each point as it is
//! kept (`--stream`); each point is analysed once, as it is kept, for the stream, a
//! signal's save and the document at the end.

use commbench::analysis::assemble::{Analysed, BackendRun, Recipe};
use commbench::analysis::document::Point;
use commbench::core::method::engine::{
    snapshot_collected, Collected, Kept, KernelSpec, Measurement, PointObserver,
};
use commbench::core::method::timer::TimerReport;
use commbench::core::transport::BackendInfo;
use commbench::core::Error;
use std::sync::{Arc, Mutex, OnceLock};

/// A measurement under way on this rank.
struct Live {
    backend: &'static str,
    sizes: usize,
    collected: Arc<Mutex<Collected>>,
}

/// The measurements of this run so far, in order.
static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());

/// What a point's run had heard when the point was kept: its timer characterisation and its
/// backend's description.
pub type Heard = (Option<TimerReport>, Option<BackendInfo>);

/// What hears of each point analysed, with what its run had heard (the stream's line).
type Tell = fn(&'static str, Heard, Point);

/// Set once, before the run, by what hears of the points.
static TELL: OnceLock<Tell> = OnceLock::new();

/// How the points are analysed, set once before the run on the rank that reports.
static RECIPE: OnceLock<Recipe> = OnceLock::new();

/// The points analysed so far.
static ANALYSED: Mutex<Analysed> = Mutex::new(Analysed::new());

/// Analyse each point of the measurements followed from now on as `recipe` says, as it is
/// kept (on the rank that reports).
pub fn analyse_with(recipe: Recipe) {
    let _ = RECIPE.set(recipe);
}

/// The points analysed so far (the document takes them as they are).
pub fn analysed() -> Analysed {
    ANALYSED.lock().map(|a| a.clone()).unwrap_or_default()
}

/// The points analysed so far, taken (for the document at the end).
pub fn take_analysed() -> Analysed {
    ANALYSED
        .lock()
        .map(|mut a| std::mem::take(&mut *a))
        .unwrap_or_default()
}

/// Let `tell` hear of each point analysed from now on (`--stream`).
pub fn tell_with(tell: Tell) {
    let _ = TELL.set(tell);
}

/// Follow `m`, measured by `backend`: a signal saves what it has collected so far, and the
/// stream, when the run has one, gets each point as it is kept.
pub fn track<S: KernelSpec>(backend: &'static str, m: &Measurement<'_, S>) {
    if let Some(recipe) = RECIPE.get() {
        m.observe(PointObserver::new(move |k: Kept| {
            let clock_ns = k.timer.as_ref().map_or(0.0, |t| t.resolution_ns);
            // Analysed once, outside the lock a signal's save takes.
            let mut done = Analysed::new();
            let point = done.add((backend, k.index), k.point, recipe, clock_ns);
            if let (Some(tell), Some(p)) = (TELL.get(), point) {
                tell(backend, (k.timer, k.backend_info), p);
            }
            if let Ok(mut a) = ANALYSED.lock() {
                a.extend(done);
            }
        }));
    }
    if let Ok(mut live) = LIVE.lock() {
        live.push(Live {
            backend,
            sizes: m.spec.steps(&m.cfg),
            collected: m.collected_handle(),
        });
    }
}

/// The runs followed so far as a stop by `signal` leaves them: the last one interrupted
/// (`None` if the list cannot be read).
pub fn so_far(signal: i32) -> Option<Vec<BackendRun>> {
    let live = LIVE.lock().ok()?;
    let n = live.len();
    let runs = live
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let collected = snapshot_collected(&l.collected);
            let done = collected.points.len();
            BackendRun {
                backend: l.backend,
                collected,
                result: if i + 1 == n {
                    Err(Error::Interrupted {
                        signal,
                        done,
                        sizes: l.sizes.max(done + 1),
                    })
                } else {
                    Ok(())
                },
            }
        })
        .collect();
    Some(runs)
}
