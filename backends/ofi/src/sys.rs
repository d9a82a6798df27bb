//! The raw libfabric API: the bindings bindgen generates from the system headers at build time
//! (`build.rs`), the macros of the headers that bindgen cannot carry, and the error text.

#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
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

/// `FI_ADDR_UNSPEC` (`((uint64_t) -1)` in the headers).
pub(crate) const FI_ADDR_UNSPEC: u64 = u64::MAX;

/// `-FI_EAGAIN`, as the calls return it.
pub(crate) const EAGAIN: isize = -(ffi::FI_EAGAIN as isize);
/// `-FI_EAVAIL`: a completion queue holds an error entry.
pub(crate) const EAVAIL: isize = -(ffi::FI_EAVAIL as isize);

/// `FI_VERSION(major, minor)`.
pub(crate) const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}

/// The API version these bindings were generated from (`FI_MAJOR_VERSION.FI_MINOR_VERSION`).
pub(crate) const API_VERSION: u32 = fi_version(ffi::FI_MAJOR_VERSION, ffi::FI_MINOR_VERSION);

/// `major.minor` of a version made with `FI_VERSION`.
pub fn version_text(v: u32) -> String {
    format!("{}.{}", v >> 16, v & 0xFFFF)
}

/// The version of the libfabric library this process runs with (`fi_version()`), which may be
/// newer than the headers the crate was built with.
pub fn library_version() -> String {
    // SAFETY: fi_version takes nothing and returns a number.
    version_text(unsafe { ffi::fi_version() })
}

/// libfabric's text for an error number (`fi_strerror`), either sign.
pub fn strerror(code: i64) -> String {
    let code = code.unsigned_abs().min(i32::MAX as u64) as i32;
    // SAFETY: fi_strerror returns a pointer to a static NUL-terminated string for any number.
    let p = unsafe { ffi::fi_strerror(code) };
    if p.is_null() {
        return format!("error {code}");
    }
    // SAFETY: not null, and libfabric's strings are NUL-terminated and static.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// An error of the ofi backend.
pub(crate) fn backend_error(message: String) -> Error {
    Error::Backend {
        backend: "ofi",
        message,
    }
}

/// `Ok` for a non-negative return code, else an error naming the call and libfabric's text.
pub(crate) fn check(rc: i64, what: &str) -> Result<()> {
    if rc >= 0 {
        return Ok(());
    }
    Err(backend_error(format!(
        "{what} failed: {} ({rc})",
        strerror(rc)
    )))
}

/// The names of the flags set in `bits`, by `table`, then any bits the table does not name.
pub(crate) fn flag_names(bits: u64, table: &[(u64, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = bits;
    for &(bit, name) in table {
        if bits & bit != 0 {
            out.push(name.to_string());
            rest &= !bit;
        }
    }
    if rest != 0 {
        out.push(format!("{rest:#x}"));
    }
    out
}

/// The `mr_mode` bits of `fi_domain_attr`, named.
pub(crate) const MR_MODE_NAMES: &[(u64, &str)] = &[
    (ffi::FI_MR_LOCAL as u64, "FI_MR_LOCAL"),
    (ffi::FI_MR_RAW as u64, "FI_MR_RAW"),
    (ffi::FI_MR_VIRT_ADDR as u64, "FI_MR_VIRT_ADDR"),
    (ffi::FI_MR_ALLOCATED as u64, "FI_MR_ALLOCATED"),
    (ffi::FI_MR_PROV_KEY as u64, "FI_MR_PROV_KEY"),
    (ffi::FI_MR_MMU_NOTIFY as u64, "FI_MR_MMU_NOTIFY"),
    (ffi::FI_MR_RMA_EVENT as u64, "FI_MR_RMA_EVENT"),
    (ffi::FI_MR_ENDPOINT as u64, "FI_MR_ENDPOINT"),
    (ffi::FI_MR_HMEM as u64, "FI_MR_HMEM"),
    (ffi::FI_MR_COLLECTIVE as u64, "FI_MR_COLLECTIVE"),
];

/// The name of an address-vector type.
pub(crate) fn av_type_name(t: ffi::fi_av_type) -> &'static str {
    match t {
        ffi::FI_AV_MAP => "FI_AV_MAP",
        ffi::FI_AV_TABLE => "FI_AV_TABLE",
        _ => "FI_AV_UNSPEC",
    }
}

/// The name of an address format.
pub(crate) fn addr_format_name(f: u32) -> String {
    match f {
        ffi::FI_SOCKADDR => "FI_SOCKADDR".into(),
        ffi::FI_SOCKADDR_IN => "FI_SOCKADDR_IN".into(),
        ffi::FI_SOCKADDR_IN6 => "FI_SOCKADDR_IN6".into(),
        ffi::FI_ADDR_STR => "FI_ADDR_STR".into(),
        other => format!("format {other}"),
    }
}

/// Whether endpoints of this address format are bound to an IP interface.
pub(crate) fn is_ip_format(f: u32) -> bool {
    matches!(
        f,
        ffi::FI_SOCKADDR | ffi::FI_SOCKADDR_IN | ffi::FI_SOCKADDR_IN6
    )
}

/// A C string from a libfabric attribute, or "" for a null pointer.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that lives while the result is built.
pub(crate) unsafe fn text(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller promises a live NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `-FI_ENOSYS`, for an operation a provider's ops table leaves out.
const ENOSYS: isize = -(ffi::FI_ENOSYS as isize);

// The four calls of the timed loops, dispatched through the object's ops table exactly as the
// headers' static-inline fi_tinject, fi_tsend, fi_trecv and fi_cq_read do, so that they cost
// no extra call (the other static-inline calls go through the C shims of csrc/shim.c).

/// `fi_tinject`.
///
/// # Safety
/// `ep` is an open endpoint and `len` bytes at `buf` are readable for the call.
#[inline(always)]
pub(crate) unsafe fn tinject(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
    tag: u64,
) -> isize {
    // SAFETY: an open endpoint's `tagged` points to its provider's ops table, and the call's
    // arguments are the caller's promise.
    unsafe {
        match (*(*ep).tagged).inject {
            Some(f) => f(ep, buf, len, dest, tag),
            None => ENOSYS,
        }
    }
}

/// `fi_tsend`.
///
/// # Safety
/// `ep` is an open endpoint; `len` bytes at `buf` and the context stay valid until the send's
/// completion is read.
#[inline(always)]
pub(crate) unsafe fn tsend(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: u64,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: as in tinject; the buffer's and context's lifetimes are the caller's promise.
    unsafe {
        match (*(*ep).tagged).send {
            Some(f) => f(ep, buf, len, desc, dest, tag, ctx),
            None => ENOSYS,
        }
    }
}

/// `fi_trecv`.
///
/// # Safety
/// `ep` is an open endpoint; `len` writable bytes at `buf` and the context stay valid until
/// the receive's completion is read.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn trecv(
    ep: *mut ffi::fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: u64,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: as in tsend.
    unsafe {
        match (*(*ep).tagged).recv {
            Some(f) => f(ep, buf, len, desc, src, tag, ignore, ctx),
            None => ENOSYS,
        }
    }
}

/// `fi_cq_read`.
///
/// # Safety
/// `cq` is an open completion queue and `buf` has room for `count` entries of its format.
#[inline(always)]
pub(crate) unsafe fn cq_read(cq: *mut ffi::fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: an open queue's `ops` points to its provider's table; the buffer is the caller's
    // promise.
    unsafe {
        match (*(*cq).ops).read {
            Some(f) => f(cq, buf, count),
            None => ENOSYS,
        }
    }
}
