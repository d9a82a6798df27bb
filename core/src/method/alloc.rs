//! Fallible allocation: buffers proportional to a size or a count are allocated with
//! [`try_zeroed`] or [`try_with_capacity`], so that a failure is an error naming what was being
//! allocated and how much ([`cannot_allocate`]), never an abort.

use crate::method::units::human_bytes;
use crate::transport::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};

/// The error of an allocation of `bytes` for `what` that failed: `cannot allocate 64 GiB for
/// <what>: out of memory`.
pub fn cannot_allocate(bytes: u64, what: impl std::fmt::Display) -> Error {
    Error::io(
        format!("cannot allocate {} for {what}", human_bytes(bytes)),
        std::io::Error::from(std::io::ErrorKind::OutOfMemory),
    )
}

/// `len` zero bytes, or an out-of-memory error naming `what` was being allocated (called only
/// on failure), `len` and the reason. Never aborts.
///
/// The zeros are written, so every page of the buffer is in memory before a trial touches
/// it (no page fault in a timed region), unless a transport that reads buffers only in part
/// asked for untouched pages ([`UntouchedPages`]).
pub fn try_zeroed(len: u64, what: impl FnOnce() -> String) -> Result<Vec<u8>> {
    let mut v = try_with_capacity::<u8>(len, what)?;
    let len = v.capacity().min(len as usize);
    if UNTOUCHED.load(Ordering::Relaxed) {
        // Room for it was had: the zeroed buffer is allocated in its place, on fresh pages
        // that take no memory until written.
        drop(v);
        return Ok(vec![0u8; len]);
    }
    // The capacity is there: resizing only writes the zeros.
    v.resize(len, 0);
    Ok(v)
}

/// Whether [`try_zeroed`] leaves the pages of its buffers untouched.
static UNTOUCHED: AtomicBool = AtomicBool::new(false);

/// While held, [`try_zeroed`] leaves the pages of its buffers untouched: for the simulator,
/// whose virtual clock models no memory and which copies only the first bytes of each message,
/// so that a thousand simulated ranks with megabyte buffers hold only what they touch.
/// Dropped, buffers are written again.
#[derive(Debug)]
pub struct UntouchedPages(bool);

impl UntouchedPages {
    /// Leave buffers' pages untouched until this is dropped.
    pub fn hold() -> Self {
        UntouchedPages(UNTOUCHED.swap(true, Ordering::Relaxed))
    }
}

impl Drop for UntouchedPages {
    fn drop(&mut self) {
        UNTOUCHED.store(self.0, Ordering::Relaxed);
    }
}

/// An empty vector with room for `n` elements, or an out-of-memory error naming `what` and the
/// bytes it needed. Never aborts.
pub fn try_with_capacity<T>(n: u64, what: impl FnOnce() -> String) -> Result<Vec<T>> {
    let elem = std::mem::size_of::<T>() as u64;
    let fail = |what: String| match n.checked_mul(elem) {
        Some(bytes) => cannot_allocate(bytes, what),
        None => cannot_allocate(u64::MAX, format!("{what} ({n} x {elem} bytes)")),
    };
    let Ok(count) = usize::try_from(n) else {
        return Err(fail(what()));
    };
    let mut v = Vec::new();
    match v.try_reserve_exact(count) {
        Ok(()) => Ok(v),
        Err(_) => Err(fail(what())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallible_allocation_names_what_and_how_much() {
        let v = try_zeroed(1000, || "a test buffer".into()).unwrap();
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|&b| b == 0));
        // Far beyond any address space: an error, not an abort.
        let e = try_zeroed(1 << 62, || "2 message buffers of size 4 EiB".into())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot allocate 4 EiB for 2 message buffers of size 4 EiB"),
            "{e}"
        );
        assert!(e.contains("out of memory"), "{e}");
        let e = try_with_capacity::<i64>(u64::MAX, || "trial times".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("trial times"), "{e}");
        assert!(
            try_with_capacity::<i64>(3, || unreachable!())
                .unwrap()
                .capacity()
                >= 3
        );
    }
}
