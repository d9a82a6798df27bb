//! Thin checked wrappers over `mpi::ffi`: every return code becomes an [`Error`].
//!
//! rsmpi's safe calls ignore MPI's return codes, so this crate calls the C functions through
//! `mpi::ffi` with `MPI_ERRORS_RETURN` set on every communicator it uses, and checks each code.

use commbench_core::{Error, Result};
use mpi::ffi;
use std::os::raw::{c_char, c_int, c_void};
use std::time::{Duration, Instant};

/// `MPI_SUCCESS`.
pub(crate) const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;
/// `MPI_ERR_TRUNCATE`.
pub(crate) const ERR_TRUNCATE: c_int = ffi::MPI_ERR_TRUNCATE as c_int;
/// `MPI_ERR_IN_STATUS`.
pub(crate) const ERR_IN_STATUS: c_int = ffi::MPI_ERR_IN_STATUS as c_int;

/// MPI's text for an error code, with the code.
pub(crate) fn error_string(code: c_int) -> String {
    let mut buf = [0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_ERROR_STRING characters as MPI_Error_string requires, and
    // `len` is a valid place for the length.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    if rc != SUCCESS {
        return format!("MPI error code {code}");
    }
    let len = (len.max(0) as usize).min(buf.len());
    let bytes: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
    format!(
        "{} (MPI error code {code})",
        String::from_utf8_lossy(&bytes).trim()
    )
}

/// The error of a failed MPI call.
#[cold]
pub(crate) fn mpi_error(what: &str, rc: c_int) -> Error {
    Error::Backend {
        backend: "mpi",
        message: format!("{what}: {}", error_string(rc)),
    }
}

/// `Ok` for `MPI_SUCCESS`, else the error of `what`.
#[inline]
pub(crate) fn check(rc: c_int, what: &str) -> Result<()> {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(mpi_error(what, rc))
    }
}

/// An empty status to be filled by MPI.
#[inline]
pub(crate) fn empty_status() -> ffi::MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers, for which all zeroes is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Functions that read MPI's predefined handles and constants.
macro_rules! predefined {
    ($($(#[$doc:meta])* $name:ident: $ty:ty = $constant:ident;)*) => {$(
        $(#[$doc])*
        #[inline]
        pub(crate) fn $name() -> $ty {
            // SAFETY: reading a constant that mpi-sys initialises from the MPI header.
            unsafe { ffi::$constant }
        }
    )*};
}

predefined! {
    /// `MPI_REQUEST_NULL`.
    request_null: ffi::MPI_Request = RSMPI_REQUEST_NULL;
    /// `MPI_COMM_WORLD`.
    comm_world: ffi::MPI_Comm = RSMPI_COMM_WORLD;
    /// `MPI_COMM_NULL`.
    comm_null: ffi::MPI_Comm = RSMPI_COMM_NULL;
    /// The datatype of one byte (`MPI_UINT8_T`).
    byte_type: ffi::MPI_Datatype = RSMPI_UINT8_T;
    /// `MPI_DOUBLE`.
    double_type: ffi::MPI_Datatype = RSMPI_DOUBLE;
    /// `MPI_ANY_SOURCE`.
    any_source: c_int = RSMPI_ANY_SOURCE;
    /// `MPI_ANY_TAG`.
    any_tag: c_int = RSMPI_ANY_TAG;
    /// `MPI_STATUS_IGNORE`: for a test whose status nobody reads (a send's).
    status_ignore: *mut ffi::MPI_Status = RSMPI_STATUS_IGNORE;
}

/// Start a non-blocking MPI operation: `call` fills in the request and returns MPI's code, an
/// error naming `what` unless it is `MPI_SUCCESS`.
#[inline]
pub(crate) fn start(
    what: &str,
    call: impl FnOnce(&mut ffi::MPI_Request) -> c_int,
) -> Result<ffi::MPI_Request> {
    let mut req = request_null();
    check(call(&mut req), what)?;
    Ok(req)
}

/// Set `MPI_ERRORS_RETURN` on `comm`, so that failures come back as codes instead of aborting.
pub(crate) fn errors_return(comm: ffi::MPI_Comm) -> Result<()> {
    // SAFETY: `comm` is a valid communicator and MPI_ERRORS_RETURN a predefined handler.
    let rc = unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)")
}

/// This process's rank in `comm` and the size of `comm`.
pub(crate) fn rank_size(comm: ffi::MPI_Comm) -> Result<(u32, u32)> {
    let (mut r, mut s): (c_int, c_int) = (0, 0);
    // SAFETY: valid communicator and out-pointers.
    check(unsafe { ffi::MPI_Comm_rank(comm, &mut r) }, "MPI_Comm_rank")?;
    // SAFETY: as above.
    check(unsafe { ffi::MPI_Comm_size(comm, &mut s) }, "MPI_Comm_size")?;
    Ok((r as u32, s as u32))
}

/// Outcome of spinning on a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spin {
    /// `MPI_Test` said the request finished (with this return code: the request is released).
    Done(c_int),
    /// `MPI_Test` failed without completing the request: it may still be active.
    Failed(c_int),
    /// The timeout ran out: the request is still active.
    TimedOut,
}

/// Spin on `MPI_Test` until `req` completes or `timeout` passes without completion. The clock
/// is read only every 1024 tests, so that a message that is already there costs one test.
/// `status` may be `MPI_STATUS_IGNORE` ([`status_ignore`]) where the caller needs none.
#[inline]
pub(crate) fn spin(
    req: &mut ffi::MPI_Request,
    status: *mut ffi::MPI_Status,
    timeout: Duration,
) -> Spin {
    let mut flag: c_int = 0;
    let mut spins: u32 = 0;
    let mut start: Option<Instant> = None;
    loop {
        // SAFETY: `req` is a request this crate started (or MPI_REQUEST_NULL) and the
        // buffers it refers to are kept alive by the caller until it completes; `status` is
        // a live status or MPI_STATUS_IGNORE.
        let rc = unsafe { ffi::MPI_Test(req, &mut flag, status) };
        if flag != 0 {
            return Spin::Done(rc);
        }
        if rc != SUCCESS {
            return Spin::Failed(rc);
        }
        spins = spins.wrapping_add(1);
        if spins % 1024 == 0 {
            match start {
                None => start = Some(Instant::now()),
                Some(s) if s.elapsed() > timeout => return Spin::TimedOut,
                Some(_) => {}
            }
        }
    }
}

/// Wait for a non-blocking collective (or other request without a buffer owned here): an
/// error for a failure, [`Error::Timeout`] naming `what` after `timeout`.
pub(crate) fn wait_collective(
    req: &mut ffi::MPI_Request,
    rank: u32,
    timeout: Duration,
    what: &str,
) -> Result<()> {
    let mut st = empty_status();
    match spin(req, &mut st, timeout) {
        Spin::Done(rc) => {
            check(rc, what)?;
            if st.MPI_ERROR != SUCCESS && rc == ERR_IN_STATUS {
                return Err(mpi_error(what, st.MPI_ERROR));
            }
            Ok(())
        }
        Spin::Failed(rc) => Err(mpi_error(what, rc)),
        Spin::TimedOut => Err(Error::Timeout {
            rank,
            what: format!("{what} (the other ranks)"),
            timeout,
        }),
    }
}

/// Leak `v` on purpose: MPI may still write into it (a request that timed out is still
/// active and may not be freed), so its memory must stay valid for the rest of the process.
pub(crate) fn leak<T>(v: T) {
    std::mem::forget(v);
}

/// [`wait_collective`] for a request that uses the buffers in `keep`: they come back once the
/// request completed, and are leaked if it timed out (MPI may still use them). Moving `keep`
/// in and out moves no heap memory, so the pointers MPI holds stay valid.
pub(crate) fn wait_keeping<K>(
    req: &mut ffi::MPI_Request,
    rank: u32,
    timeout: Duration,
    what: &str,
    keep: K,
) -> Result<K> {
    match wait_collective(req, rank, timeout, what) {
        Ok(()) => Ok(keep),
        Err(e @ Error::Timeout { .. }) => {
            leak(keep);
            Err(e)
        }
        Err(e) => Err(e),
    }
}

/// Counts and displacements for a v-collective from the 8-byte little-endian lengths each
/// rank contributed, and the total; errors name `what` when a count exceeds MPI's range.
pub(crate) fn counts_displs(lens: &[u8], what: &str) -> Result<(Vec<c_int>, Vec<c_int>, usize)> {
    let mut counts = Vec::with_capacity(lens.len() / 8);
    let mut displs = Vec::with_capacity(lens.len() / 8);
    let mut off: usize = 0;
    for c in lens.chunks_exact(8) {
        let l = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let l =
            usize::try_from(l).map_err(|_| Error::Protocol(format!("{what} part of {l} bytes")))?;
        counts.push(count(l, what)?);
        displs.push(count(off, what)?);
        off = off
            .checked_add(l)
            .ok_or_else(|| Error::Protocol(format!("{what} larger than memory")))?;
    }
    count(off, what)?;
    Ok((counts, displs, off))
}

/// A usize as an MPI count, or an error naming what was too large.
#[inline]
pub(crate) fn count(n: usize, what: &str) -> Result<c_int> {
    match c_int::try_from(n) {
        Ok(c) => Ok(c),
        Err(_) => Err(count_too_large(n, what)),
    }
}

#[cold]
#[inline(never)]
fn count_too_large(n: usize, what: &str) -> Error {
    Error::Invalid(format!(
        "{what} of {n} elements: MPI counts stop at {}",
        c_int::MAX
    ))
}

/// A copy of `data` in a heap allocation of at least one byte. An empty `Vec<u8>` points at
/// address 1, which is `MPI_IN_PLACE` in Open MPI: a collective given it would read it as
/// "in place" (or refuse it), so collectives never see an empty vector's pointer.
pub(crate) fn heap_bytes(data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(data.len().max(1));
    v.extend_from_slice(data);
    v
}

/// `len` zero bytes in a heap allocation of at least one byte (see [`heap_bytes`]).
pub(crate) fn heap_zeroes(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(1));
    v.resize(len, 0);
    v
}

/// The MPI calls and the words in errors of a byte collective: to one root (`MPI_Igather(v)`)
/// or to every rank (`MPI_Iallgather(v)`).
struct CollectNames {
    lens_call: &'static str,
    lens_wait: &'static str,
    bytes_call: &'static str,
    what: &'static str,
    part: &'static str,
}

impl CollectNames {
    fn of(root: Option<u32>) -> CollectNames {
        match root {
            Some(_) => CollectNames {
                lens_call: "MPI_Igather",
                lens_wait: "MPI_Igather (lengths)",
                bytes_call: "MPI_Igatherv",
                what: "a gather",
                part: "a gather part",
            },
            None => CollectNames {
                lens_call: "MPI_Iallgather",
                lens_wait: "MPI_Iallgather",
                bytes_call: "MPI_Iallgatherv",
                what: "an allgather",
                part: "an allgather part",
            },
        }
    }
}

/// Every rank's `data` (any length) through `comm`: the 8-byte lengths first, then the bytes,
/// each step waited for with `timeout`. With `root` the parts go to that rank
/// (`MPI_Igather(v)`), without to every rank (`MPI_Iallgather(v)`). The parts come back in rank
/// order where this rank receives them, `None` on the other ranks of a gather.
pub(crate) fn collect_bytes(
    comm: ffi::MPI_Comm,
    rank: u32,
    size: u32,
    timeout: Duration,
    root: Option<u32>,
    data: &[u8],
) -> Result<Option<Vec<Vec<u8>>>> {
    let names = CollectNames::of(root);
    let receives = root.map_or(true, |r| r == rank);
    let lens = collect_lengths(comm, rank, size, timeout, root, data.len(), &names)?;
    let (counts, displs, total) = if receives {
        counts_displs(&lens, names.what)?
    } else {
        (Vec::new(), Vec::new(), 0)
    };
    let mut all: Vec<u8> = heap_zeroes(total);
    let sc = count(data.len(), names.part)?;
    let send = heap_bytes(data);
    let byte = byte_type();
    let mut req = start(names.bytes_call, |req| {
        let (s, a) = (
            send.as_ptr() as *const c_void,
            all.as_mut_ptr() as *mut c_void,
        );
        let (c, d) = (counts.as_ptr(), displs.as_ptr());
        // SAFETY: `send`, `all`, `counts` and `displs` are heap buffers kept until the request
        // completes (leaked on timeout); where this rank receives, `all` holds the sum of
        // `counts` bytes; `comm` is valid.
        unsafe {
            match root {
                Some(r) => ffi::MPI_Igatherv(s, sc, byte, a, c, d, byte, r as c_int, comm, req),
                None => ffi::MPI_Iallgatherv(s, sc, byte, a, c, d, byte, comm, req),
            }
        }
    })?;
    let (_, all, counts, displs) = wait_keeping(
        &mut req,
        rank,
        timeout,
        names.bytes_call,
        (send, all, counts, displs),
    )?;
    Ok(receives.then(|| {
        counts
            .iter()
            .zip(&displs)
            .map(|(&c, &d)| all[d as usize..d as usize + c as usize].to_vec())
            .collect()
    }))
}

/// Step 1 of [`collect_bytes`]: every rank's length as 8 little-endian bytes, in rank order
/// where this rank receives them (8 bytes of nothing on the other ranks of a gather).
fn collect_lengths(
    comm: ffi::MPI_Comm,
    rank: u32,
    size: u32,
    timeout: Duration,
    root: Option<u32>,
    len: usize,
    names: &CollectNames,
) -> Result<Vec<u8>> {
    let receives = root.map_or(true, |r| r == rank);
    let mine = (len as u64).to_le_bytes().to_vec();
    let mut lens = vec![0u8; if receives { 8 * size as usize } else { 8 }];
    let byte = byte_type();
    let mut req = start(names.lens_call, |req| {
        let (s, l) = (
            mine.as_ptr() as *const c_void,
            lens.as_mut_ptr() as *mut c_void,
        );
        // SAFETY: `mine` (8 bytes) and `lens` (8 per rank where this rank receives) are heap
        // buffers kept until the request completes (leaked on timeout); `comm` is valid.
        unsafe {
            match root {
                Some(r) => ffi::MPI_Igather(s, 8, byte, l, 8, byte, r as c_int, comm, req),
                None => ffi::MPI_Iallgather(s, 8, byte, l, 8, byte, comm, req),
            }
        }
    })?;
    let (_, lens) = wait_keeping(&mut req, rank, timeout, names.lens_wait, (mine, lens))?;
    Ok(lens)
}
