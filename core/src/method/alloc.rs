//! Fallible allocation: buffers proportional to a size or a count are allocated with
//! [`try_zeroed`] or [`try_with_capacity`], so that a failure is an error naming what was being
//! allocated and how much ([`cannot_allocate`]), never an abort.

use crate::method::units::human_bytes;
use crate::transport::error::{Error, Result};

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
pub fn try_zeroed(len: u64, what: impl FnOnce() -> String) -> Result<Vec<u8>> {
    let mut v = try_with_capacity::<u8>(len, what)?;
    // The capacity is there: resizing only writes the zeros.
    v.resize(v.capacity().min(len as usize), 0);
    Ok(v)
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
