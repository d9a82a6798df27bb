//! The raw UCX API: the bindings bindgen generates from the system headers at build time
//! (`build.rs`), the headers' macros and static-inline calls that bindgen cannot carry, written
//! again here, and UCX's error text.

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    unused_imports,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub(crate) mod ffi {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

use commbench_core::{Error, Result};
use std::ffi::CStr;
use std::os::raw::c_void;

/// `ucp_dt_make_contig(elem_size)`: the datatype of contiguous elements of `elem_size` bytes
/// (a macro in `ucp.h`).
pub(crate) const fn dt_make_contig(elem_size: u64) -> ffi::ucp_datatype_t {
    (elem_size << ffi::UCP_DATATYPE_SHIFT) | ffi::UCP_DATATYPE_CONTIG as u64
}

/// Bytes as UCX's datatype: what every send and receive of this crate uses.
pub(crate) const DT_BYTES: ffi::ucp_datatype_t = dt_make_contig(1);

/// What a `ucs_status_ptr_t` returned by a non-blocking call says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Posted {
    /// Finished in the call (a null pointer, `UCS_OK`).
    Done,
    /// A request still in progress: poll it, then free it with `ucp_request_free`.
    Pending(*mut c_void),
    /// Failed in the call.
    Failed(ffi::ucs_status_t),
}

/// `UCS_PTR_IS_ERR(ptr)`: the pointer encodes an error status (from `UCS_ERR_LAST` up, as an
/// unsigned number).
#[inline(always)]
pub(crate) fn ptr_is_err(p: ffi::ucs_status_ptr_t) -> bool {
    (p as usize) >= (ffi::UCS_ERR_LAST as isize as usize)
}

/// `UCS_PTR_IS_PTR(ptr)`: a real request pointer (neither null nor an encoded error).
#[inline(always)]
pub(crate) fn ptr_is_ptr(p: ffi::ucs_status_ptr_t) -> bool {
    (p as usize).wrapping_sub(1) < (ffi::UCS_ERR_LAST as isize as usize).wrapping_sub(1)
}

/// `UCS_PTR_RAW_STATUS(ptr)`: the pointer's value read as a status. In older UCX headers this
/// was what `UCS_PTR_STATUS` meant; newer ones (1.13 among them) have `UCS_PTR_STATUS` say
/// `UCS_INPROGRESS` for a real request pointer ([`ptr_status`]). This crate decodes pointers
/// with [`decode`], which means the same under either header.
#[inline(always)]
pub(crate) fn ptr_raw_status(p: ffi::ucs_status_ptr_t) -> ffi::ucs_status_t {
    p as isize as ffi::ucs_status_t
}

/// `UCS_PTR_STATUS(ptr)` of the newer headers: `UCS_INPROGRESS` for a request pointer, the
/// encoded status otherwise.
#[inline(always)]
pub(crate) fn ptr_status(p: ffi::ucs_status_ptr_t) -> ffi::ucs_status_t {
    if ptr_is_ptr(p) {
        ffi::UCS_INPROGRESS
    } else {
        ptr_raw_status(p)
    }
}

/// What a non-blocking call's return value says.
#[inline(always)]
pub(crate) fn decode(p: ffi::ucs_status_ptr_t) -> Posted {
    if p.is_null() {
        Posted::Done
    } else if ptr_is_ptr(p) {
        Posted::Pending(p)
    } else {
        debug_assert!(ptr_is_err(p));
        match ptr_status(p) {
            ffi::UCS_OK => Posted::Done,
            s => Posted::Failed(s),
        }
    }
}

/// `ucp_init(params, config, context)`: static inline in `ucp.h`, over `ucp_init_version`
/// with the API version of the headers the bindings came from.
///
/// # Safety
/// `params` and `config` valid for the call; `context` writable.
pub(crate) unsafe fn init(
    params: *const ffi::ucp_params_t,
    config: *const ffi::ucp_config_t,
    context: *mut ffi::ucp_context_h,
) -> ffi::ucs_status_t {
    // SAFETY: the caller's pointers, passed on unchanged, as the header's ucp_init does.
    unsafe {
        ffi::ucp_init_version(
            ffi::UCP_API_MAJOR,
            ffi::UCP_API_MINOR,
            params,
            config,
            context,
        )
    }
}

/// The UCP API version these bindings were generated from.
pub fn api_version() -> String {
    format!("{}.{}", ffi::UCP_API_MAJOR, ffi::UCP_API_MINOR)
}

/// The version of the UCX library this process runs with (`ucp_get_version_string`), which
/// may be newer than the headers the crate was built with.
pub fn library_version() -> String {
    // SAFETY: takes nothing; returns null or a static NUL-terminated string.
    text(unsafe { ffi::ucp_get_version_string() })
}

/// The UCX library's `(major, minor, release)` (`ucp_get_version`).
pub fn library_release() -> (u32, u32, u32) {
    let (mut major, mut minor, mut release) = (0, 0, 0);
    // SAFETY: writes three numbers into the locals.
    unsafe { ffi::ucp_get_version(&mut major, &mut minor, &mut release) };
    (major, minor, release)
}

/// Whether `ucp_tag_recv_nbx` fills `recv_info.tag_info` when a receive finishes in the call.
/// UCX before 1.16 does not (it completes the receive and leaves the sender and length
/// unwritten; fixed by UCX commit df0798c "UCP/TAG: Populate tag_info on immediate
/// completion"): there receives that need them ask for a request with
/// `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`.
pub fn immediate_recv_info() -> bool {
    let (major, minor, _) = library_release();
    (major, minor) >= (1, 16)
}

/// UCX's text for a status (`ucs_status_string`).
pub fn status_text(s: ffi::ucs_status_t) -> String {
    // SAFETY: ucs_status_string returns a static NUL-terminated string for any status.
    let t = text(unsafe { ffi::ucs_status_string(s) });
    if t.is_empty() {
        format!("status {s}")
    } else {
        t
    }
}

/// A C string owned by UCX, copied; empty for null.
pub(crate) fn text(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: not null, and every string this crate reads from UCX is NUL-terminated.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// An error of the ucx backend.
pub(crate) fn backend_error(message: String) -> Error {
    Error::Backend {
        backend: "ucx",
        message,
    }
}

/// `Ok` for `UCS_OK`, else an error naming the call and UCX's text.
pub(crate) fn check(s: ffi::ucs_status_t, what: &str) -> Result<()> {
    if s == ffi::UCS_OK {
        return Ok(());
    }
    Err(backend_error(format!(
        "{what} failed: {} ({s})",
        status_text(s)
    )))
}

/// Whether a status says the peer or the link to it is gone.
pub(crate) fn is_peer_failure(s: ffi::ucs_status_t) -> bool {
    matches!(
        s,
        ffi::UCS_ERR_ENDPOINT_TIMEOUT
            | ffi::UCS_ERR_CONNECTION_RESET
            | ffi::UCS_ERR_UNREACHABLE
            | ffi::UCS_ERR_REJECTED
            | ffi::UCS_ERR_NOT_CONNECTED
    ) || (ffi::UCS_ERR_LAST_ENDPOINT_FAILURE..=ffi::UCS_ERR_FIRST_ENDPOINT_FAILURE).contains(&s)
        || (ffi::UCS_ERR_LAST_LINK_FAILURE..=ffi::UCS_ERR_FIRST_LINK_FAILURE).contains(&s)
}

/// What UCX prints about an object into a `FILE*` (`ucp_ep_print_info`,
/// `ucp_context_print_info`), as text.
pub(crate) fn print_to_string(print: impl FnOnce(*mut libc::FILE)) -> String {
    let mut buf: *mut libc::c_char = std::ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream writes the buffer pointer and length into the two locals, which
    // outlive the stream; both are valid after fclose.
    let f = unsafe { libc::open_memstream(&mut buf, &mut len) };
    if f.is_null() {
        return String::new();
    }
    print(f);
    // SAFETY: `f` is the open stream from above, closed once; after fclose `buf` holds `len`
    // bytes and a NUL, malloc'ed, freed once here.
    unsafe {
        libc::fclose(f);
        let s = if buf.is_null() {
            String::new()
        } else {
            let b = std::slice::from_raw_parts(buf as *const u8, len);
            String::from_utf8_lossy(b).into_owned()
        };
        libc::free(buf as *mut c_void);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_macros_mean_what_the_headers_say() {
        let null = std::ptr::null_mut::<c_void>();
        assert_eq!(decode(null), Posted::Done);
        let err = ffi::UCS_ERR_MESSAGE_TRUNCATED as isize as ffi::ucs_status_ptr_t;
        assert!(ptr_is_err(err) && !ptr_is_ptr(err));
        assert_eq!(ptr_status(err), ffi::UCS_ERR_MESSAGE_TRUNCATED);
        assert_eq!(decode(err), Posted::Failed(ffi::UCS_ERR_MESSAGE_TRUNCATED));
        let mut x = 0u64;
        let p = &mut x as *mut u64 as ffi::ucs_status_ptr_t;
        assert!(ptr_is_ptr(p) && !ptr_is_err(p));
        assert_eq!(ptr_status(p), ffi::UCS_INPROGRESS);
        assert_eq!(decode(p), Posted::Pending(p));
        let last = ffi::UCS_ERR_LAST as isize as ffi::ucs_status_ptr_t;
        assert!(ptr_is_err(last) && !ptr_is_ptr(last));
        assert_eq!(dt_make_contig(1), 8);
        assert_eq!(dt_make_contig(4), 32);
    }

    #[test]
    fn statuses_have_text() {
        assert_eq!(status_text(ffi::UCS_OK), "Success");
        assert!(status_text(ffi::UCS_ERR_MESSAGE_TRUNCATED).contains("truncated"));
        assert!(is_peer_failure(ffi::UCS_ERR_CONNECTION_RESET));
        assert!(!is_peer_failure(ffi::UCS_ERR_MESSAGE_TRUNCATED));
    }
}
