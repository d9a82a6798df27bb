//! The measurements under way on this process, followed so that a signal can save what they
//! have collected so far (docs/methodology.md §7) and the stream gets each point as it is
//! kept (`--stream`).

use commbench::analysis::assemble::BackendRun;
use commbench::core::method::engine::{
    snapshot_collected, Collected, KernelSpec, Measurement, PointObserver,
};
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

/// What makes the observer of a backend's points (the stream's), when the run has one.
type MakeObserver = fn(&'static str) -> Option<PointObserver>;

/// Set once, before the run, by what observes it.
static OBSERVER: OnceLock<MakeObserver> = OnceLock::new();

/// Let `make` give each measurement followed from now on, by its backend's name, an observer
/// of its points (`--stream`).
pub fn observe_with(make: MakeObserver) {
    let _ = OBSERVER.set(make);
}

/// Follow `m`, measured by `backend`: a signal saves what it has collected so far, and the
/// stream, when the run has one, gets each point as it is kept.
pub fn track<S: KernelSpec>(backend: &'static str, m: &Measurement<'_, S>) {
    if let Some(o) = OBSERVER.get().and_then(|make| make(backend)) {
        m.observe(o);
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
