//! A request to end a run early, made from outside the measurement (a signal-handling
//! thread) and read by the measurement at its safe points: a leaf, so that the engine, the
//! timer characterisation and all-pairs all read it.

use std::sync::atomic::{AtomicI32, Ordering};

/// A request to end a run early, made from outside the measurement (a signal-handling thread)
/// and honoured at the safe points between sizes: rank 0 reads it and tells every rank, all
/// ranks leave together, and the sizes already measured are kept.
#[derive(Debug, Default)]
pub struct StopFlag(AtomicI32);

impl StopFlag {
    /// No stop requested.
    pub const fn new() -> Self {
        StopFlag(AtomicI32::new(0))
    }

    /// Ask the run to stop because of `signal` (the first request is the one remembered).
    pub fn request(&self, signal: i32) {
        let signal = if signal == 0 { -1 } else { signal };
        let _ = self
            .0
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The signal of the stop requested, if one was.
    pub fn requested(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}
