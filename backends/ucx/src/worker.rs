//! [`Worker`]: a UCP context and its worker, the endpoints to every rank, and their set-up and
//! teardown in ucx_perftest's order (libperf.c): context with the tag feature, one worker in
//! single-thread mode, worker addresses exchanged, one endpoint per remote address, the worker
//! flushed to finish wire-up before anything is timed; at the end every endpoint closed in
//! flush mode, the worker destroyed, the context cleaned up.

use crate::sys::{self, backend_error, check, decode, ffi, Posted};
use commbench_core::{Error, Result};
use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr;
use std::time::{Duration, Instant};

/// Transport names UCX accepts in `UCX_TLS` besides those of single transports: its aliases.
pub const TLS_ALIASES: &[&str] = &[
    "all", "sm", "shm", "mm", "ib", "rc", "rc_v", "rc_x", "ud", "ud_v", "ud_x", "dc", "dc_x",
    "cuda", "rocm", "ugni",
];

/// One rank's UCP context and worker, and its endpoints.
pub(crate) struct Worker {
    pub(crate) worker: ffi::ucp_worker_h,
    ctx: ffi::ucp_context_h,
    /// The endpoint to each rank, in rank order (null until [`Worker::connect`]).
    pub(crate) eps: Vec<ffi::ucp_ep_h>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("endpoints", &self.eps.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.close(Duration::from_secs(5));
    }
}

/// A `ucp_config_t` read from the environment (`UCX_*`), released when dropped.
struct Config(*mut ffi::ucp_config_t);

impl Config {
    /// The environment's configuration, with `UCX_TLS` replaced by `tls` when given.
    fn read(tls: Option<&str>) -> Result<Config> {
        let mut cfg: *mut ffi::ucp_config_t = ptr::null_mut();
        // SAFETY: null prefix and file name read the UCX_ variables; `cfg` is written.
        let s = unsafe { ffi::ucp_config_read(ptr::null(), ptr::null(), &mut cfg) };
        check(s, "ucp_config_read")?;
        let cfg = Config(cfg);
        if let Some(tls) = tls {
            let v = CString::new(tls)
                .map_err(|_| commbench_core::Error::Config("a NUL in the UCX transports".into()))?;
            // SAFETY: `cfg` is a live configuration; both strings are NUL-terminated and
            // copied by UCX.
            let s = unsafe { ffi::ucp_config_modify(cfg.0, c"TLS".as_ptr(), v.as_ptr()) };
            check(s, &format!("setting UCX_TLS={tls}"))?;
        }
        Ok(cfg)
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: read by ucp_config_read, released once.
        unsafe { ffi::ucp_config_release(self.0) }
    }
}

impl Worker {
    /// A context with the tag feature over transports `tls` (UCX's choice when `None`) and its
    /// worker.
    pub(crate) fn open(tls: Option<&str>) -> Result<Worker> {
        let cfg = Config::read(tls)?;
        let params = ffi::ucp_params_t {
            field_mask: (ffi::UCP_PARAM_FIELD_FEATURES | ffi::UCP_PARAM_FIELD_MT_WORKERS_SHARED)
                as u64,
            features: ffi::UCP_FEATURE_TAG as u64,
            mt_workers_shared: 0,
            ..Default::default()
        };
        let mut ctx: ffi::ucp_context_h = ptr::null_mut();
        // SAFETY: `params` and `cfg` are valid for the call; `ctx` is written.
        check(unsafe { sys::init(&params, cfg.0, &mut ctx) }, "ucp_init")?;
        let mut w = Worker {
            worker: ptr::null_mut(),
            ctx,
            eps: Vec::new(),
        };
        let wp = ffi::ucp_worker_params_t {
            field_mask: ffi::UCP_WORKER_PARAM_FIELD_THREAD_MODE as u64,
            thread_mode: ffi::UCS_THREAD_MODE_SINGLE,
            ..Default::default()
        };
        // SAFETY: the context is live; `wp` is valid for the call; `w.worker` is written.
        let s = unsafe { ffi::ucp_worker_create(w.ctx, &wp, &mut w.worker) };
        check(s, "ucp_worker_create")?;
        Ok(w)
    }

    /// This worker's address, to give the other ranks: [`ADDRESS_MAGIC`], the length of UCX's
    /// address (8 bytes, little-endian), then the address, so that [`Worker::connect`] can
    /// check what it hands to UCX, which reads an address without a length.
    pub(crate) fn address(&self) -> Result<Vec<u8>> {
        let mut a: *mut ffi::ucp_address_t = ptr::null_mut();
        let mut len: usize = 0;
        // SAFETY: the worker is live; `a` and `len` are written.
        let s = unsafe { ffi::ucp_worker_get_address(self.worker, &mut a, &mut len) };
        check(s, "ucp_worker_get_address")?;
        let mut v = ADDRESS_MAGIC.to_vec();
        v.extend_from_slice(&(len as u64).to_le_bytes());
        // SAFETY: UCX gave `len` readable bytes at `a`, released once after the copy.
        v.extend_from_slice(unsafe { std::slice::from_raw_parts(a as *const u8, len) });
        // SAFETY: `a` came from ucp_worker_get_address of this worker.
        unsafe { ffi::ucp_worker_release_address(self.worker, a) };
        Ok(v)
    }

    /// An endpoint to each rank's address (in rank order), each checked first.
    pub(crate) fn connect(&mut self, names: &[Vec<u8>]) -> Result<()> {
        for (r, name) in names.iter().enumerate() {
            let addr = unframe(name).ok_or_else(|| {
                Error::Protocol(format!(
                    "rank {r} sent {} bytes that are not a commbench ucx worker address \
                     (another build or version on that rank?)",
                    name.len()
                ))
            })?;
            let p = ffi::ucp_ep_params_t {
                field_mask: ffi::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS as u64,
                address: addr.as_ptr() as *const ffi::ucp_address_t,
                ..Default::default()
            };
            let mut ep: ffi::ucp_ep_h = ptr::null_mut();
            // SAFETY: the worker is live; `p.address` points at rank r's worker address, as
            // long as UCX's own (checked by `unframe`), which UCX reads during the call; `ep`
            // is written.
            let s = unsafe { ffi::ucp_ep_create(self.worker, &p, &mut ep) };
            check(s, &format!("ucp_ep_create to rank {r}"))?;
            self.eps.push(ep);
        }
        Ok(())
    }

    /// Flush the worker: every endpoint's wire-up finished, as ucx_perftest does before it
    /// times anything ("force wireup completion"), at most `timeout`.
    pub(crate) fn flush(&self, timeout: Duration) -> Result<()> {
        let p = ffi::ucp_request_param_t::default();
        // SAFETY: the worker is live; `p` asks for nothing (no callback).
        let r = unsafe { ffi::ucp_worker_flush_nbx(self.worker, &p) };
        match decode(r) {
            Posted::Done => Ok(()),
            Posted::Failed(s) => check(s, "ucp_worker_flush_nbx"),
            Posted::Pending(req) => match self.progress_until_done(req, timeout) {
                Some(s) => check(s, "flushing the worker"),
                None => Err(backend_error(format!(
                    "the worker's flush (endpoint wire-up) did not finish within {timeout:?}"
                ))),
            },
        }
    }

    /// Progress until request `req` finishes, at most `timeout`: its status (the request
    /// freed), or `None` on timeout (then the request is freed too, and UCX releases it
    /// when it finishes).
    fn progress_until_done(&self, req: *mut c_void, timeout: Duration) -> Option<i8> {
        let start = Instant::now();
        loop {
            // SAFETY: the worker is live; `req` is a request of it, not yet freed.
            let s = unsafe {
                ffi::ucp_worker_progress(self.worker);
                ffi::ucp_request_check_status(req)
            };
            if s != ffi::UCS_INPROGRESS || start.elapsed() > timeout {
                // SAFETY: freed once; UCX keeps an unfinished request until it finishes.
                unsafe { ffi::ucp_request_free(req) };
                return (s != ffi::UCS_INPROGRESS).then_some(s);
            }
        }
    }

    /// What UCX says about the endpoint to `rank`: its lanes (transport and device of each)
    /// and the message sizes of each tag protocol (`ucp_ep_print_info`).
    pub(crate) fn ep_text(&self, rank: usize) -> String {
        let Some(&ep) = self.eps.get(rank) else {
            return String::new();
        };
        // SAFETY: `ep` is a live endpoint of this worker; `f` is an open stream.
        sys::print_to_string(|f| unsafe { ffi::ucp_ep_print_info(ep, f as *mut ffi::FILE) })
    }

    /// What UCX says about the context: its resources (`ucp_context_print_info`).
    pub(crate) fn context_text(&self) -> String {
        let ctx = self.ctx;
        // SAFETY: the context is live; `f` is an open stream.
        sys::print_to_string(|f| unsafe { ffi::ucp_context_print_info(ctx, f as *mut ffi::FILE) })
    }

    /// Close every endpoint, progressing them together, at most `timeout` in all: whether all
    /// closed in time. The peers close theirs at the same time (after a barrier), as
    /// ucx_perftest does before it destroys its worker. Those to the ranks in `force` (gone:
    /// nothing sent to them is awaited any more) close at once, without a flush.
    pub(crate) fn close_endpoints(&mut self, timeout: Duration, force: &[u32]) -> bool {
        let start = Instant::now();
        let flush = ffi::ucp_request_param_t::default();
        let forced = ffi::ucp_request_param_t {
            op_attr_mask: ffi::UCP_OP_ATTR_FIELD_FLAGS,
            flags: ffi::UCP_EP_CLOSE_FLAG_FORCE,
            ..Default::default()
        };
        let mut pending = Vec::new();
        for (rank, ep) in std::mem::take(&mut self.eps).into_iter().enumerate() {
            if ep.is_null() {
                continue;
            }
            let p = if force.contains(&(rank as u32)) {
                &forced
            } else {
                &flush
            };
            // SAFETY: `ep` is a live endpoint of this worker, closed once.
            let r = unsafe { ffi::ucp_ep_close_nbx(ep, p) };
            if let Posted::Pending(req) = decode(r) {
                pending.push(req);
            }
        }
        while !pending.is_empty() {
            // SAFETY: the worker is live.
            unsafe { ffi::ucp_worker_progress(self.worker) };
            pending.retain(|&req| {
                // SAFETY: `req` is a live request of this worker, freed once when it is done.
                unsafe {
                    if ffi::ucp_request_check_status(req) == ffi::UCS_INPROGRESS {
                        return true;
                    }
                    ffi::ucp_request_free(req);
                }
                false
            });
            if start.elapsed() > timeout {
                for req in pending {
                    // SAFETY: freed once; UCX releases it when it finishes.
                    unsafe { ffi::ucp_request_free(req) };
                }
                return false;
            }
        }
        true
    }

    /// Close the endpoints still open ([`Worker::close_endpoints`]), destroy the worker, clean
    /// up the context. Once it has returned UCX holds no buffer of this rank's. Idempotent.
    pub(crate) fn close(&mut self, timeout: Duration) {
        if !self.worker.is_null() {
            self.close_endpoints(timeout, &[]);
            // SAFETY: the worker is live and destroyed once; its endpoints are closed.
            unsafe { ffi::ucp_worker_destroy(self.worker) };
            self.worker = ptr::null_mut();
        }
        if !self.ctx.is_null() {
            // SAFETY: the context is live and cleaned up once, after its worker.
            unsafe { ffi::ucp_cleanup(self.ctx) };
            self.ctx = ptr::null_mut();
        }
    }
}

/// What starts a worker address from [`Worker::address`].
const ADDRESS_MAGIC: &[u8; 8] = b"cbucx1\0\0";

/// UCX's address inside a framed one, if the frame is whole.
fn unframe(name: &[u8]) -> Option<&[u8]> {
    let rest = name.strip_prefix(ADDRESS_MAGIC)?;
    let (len, addr) = rest.split_at_checked(8)?;
    let len = u64::from_le_bytes(len.try_into().ok()?);
    (len > 0 && addr.len() as u64 == len).then_some(addr)
}

/// The transports (`tl/device`) a context over `tls` has here, from `ucp_context_print_info`:
/// what `--ucx-tls` may name. Only a context is made (no worker, no interface opened).
pub fn resources(tls: Option<&str>) -> Result<Vec<String>> {
    let cfg = Config::read(tls)?;
    let params = ffi::ucp_params_t {
        field_mask: ffi::UCP_PARAM_FIELD_FEATURES as u64,
        features: ffi::UCP_FEATURE_TAG as u64,
        ..Default::default()
    };
    let mut ctx: ffi::ucp_context_h = ptr::null_mut();
    // SAFETY: `params` and `cfg` are valid for the call; `ctx` is written.
    let s = unsafe { sys::init(&params, cfg.0, &mut ctx) };
    check(s, "ucp_init")?;
    // SAFETY: the context is live; `f` is an open stream.
    let text =
        sys::print_to_string(|f| unsafe { ffi::ucp_context_print_info(ctx, f as *mut ffi::FILE) });
    // SAFETY: the context made above, cleaned up once.
    unsafe { ffi::ucp_cleanup(ctx) };
    Ok(parse_resources(&text))
}

/// The `tl/device` of each `# resource N : md M dev D flags -- tl/device` line.
pub(crate) fn parse_resources(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .lines()
        .filter(|l| l.contains("resource") && l.contains("--"))
        .filter_map(|l| l.rsplit("--").next())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked_before_ucx_reads_them() {
        let mut framed = ADDRESS_MAGIC.to_vec();
        framed.extend_from_slice(&3u64.to_le_bytes());
        framed.extend_from_slice(&[7, 8, 9]);
        assert_eq!(unframe(&framed), Some(&[7u8, 8, 9][..]));
        assert_eq!(unframe(&framed[..framed.len() - 1]), None);
        let mut longer = framed.clone();
        longer.push(0);
        assert_eq!(unframe(&longer), None);
        assert_eq!(unframe(&framed[..16]), None);
        assert_eq!(unframe(b""), None);
        assert_eq!(unframe(b"cbucx1"), None);
        let mut other = framed.clone();
        other[0] = b'x';
        assert_eq!(unframe(&other), None);
    }

    #[test]
    fn resources_are_read_from_the_context_text() {
        let t = "#\n# UCP context\n#\n#     md 0  :  self\n#\n#   resource 0  :  md 0  dev 0  \
                 flags -- self/memory\n#   resource 1  :  md 1  dev 1  flags -- tcp/lo\n";
        assert_eq!(parse_resources(t), vec!["self/memory", "tcp/lo"]);
    }
}
