//! The libfabric objects of one rank: the provider's `fi_info`, the fabric, the domain, one
//! completion queue for sends and receives, the address vector and the FI_EP_RDM endpoint,
//! opened in the order fi_pingpong opens them and closed in reverse by [`Fabric`]'s `Drop`.

use crate::sys::{self, backend_error, check, ffi};
use commbench_core::{Error, Result};
use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr;

/// What a run asks of a provider.
#[derive(Debug, Clone, Default)]
pub(crate) struct Want {
    /// The provider by name (`shm`, `tcp;ofi_rxm`, ...); `None`: libfabric's first choice.
    pub provider: Option<String>,
    /// The IP address to bind the endpoint to when the provider's addresses are IP ones (the
    /// interface this rank reached the rendezvous from).
    pub node: Option<String>,
    /// Receive queue entries to ask the provider for (at least its default).
    pub rx_size: usize,
}

/// The provider's attributes as chosen, for the endpoint and the result document.
#[derive(Debug, Clone, Default)]
pub struct Attrs {
    /// Provider name (`shm`, `tcp;ofi_rxm`).
    pub provider: String,
    /// Provider version, `major.minor`.
    pub provider_version: String,
    /// Provider version as `FI_VERSION` encodes it.
    pub provider_version_code: u32,
    /// Fabric name.
    pub fabric: String,
    /// Domain name.
    pub domain: String,
    /// Largest message `fi_tinject` takes, bytes.
    pub inject_size: usize,
    /// `mr_mode` bits of the domain.
    pub mr_mode: u64,
    /// Address-vector type the provider asked for (`FI_AV_UNSPEC` when it left the choice).
    pub av_type: ffi::fi_av_type,
    /// Address format.
    pub addr_format: u32,
    /// Transmit and receive queue sizes.
    pub tx_size: usize,
    /// Receive queue size: the most receives posted at once.
    pub rx_size: usize,
    /// Largest message, bytes.
    pub max_msg_size: u64,
    /// Mode bits the provider requires (`FI_CONTEXT`, `FI_CONTEXT2`).
    pub mode: u64,
    /// The tag bits the provider matches (`ep_attr.mem_tag_format`).
    pub mem_tag_format: u64,
}

impl Attrs {
    /// Why wildcard receives cannot be trusted on this provider, when they cannot.
    ///
    /// The shm provider of libfabric 1.17 (provider version 117.x) matches a receive posted with
    /// an ignore mask against messages that arrived before it as if the mask were not there:
    /// a wildcard receive (any source or any tag) misses every earlier message whose ignored
    /// tag bits are not those of the receive, and takes the next one to arrive instead, so
    /// messages are skipped and a run waits for them forever. Receives of one source and one
    /// tag are matched correctly. (Found with the conformance suite's ordering check; a later
    /// shm provider rewrote its receive queues.)
    pub fn wildcard_defect(&self) -> Option<String> {
        (self.provider == "shm" && self.provider_version_code >> 16 <= 117).then(|| {
            format!(
                "the shm provider {} of libfabric matches a wildcard receive (any source or any \
                 tag) against messages that arrived before it without its ignore mask and skips \
                 them, so commbench refuses wildcard receives on it: use --ofi-provider \
                 'tcp;ofi_rxm', or the shm backend",
                self.provider_version
            )
        })
    }

    /// Whether the provider needs local buffers registered (`FI_MR_LOCAL`).
    pub fn needs_mr(&self) -> bool {
        self.mr_mode & ffi::FI_MR_LOCAL as u64 != 0
    }
}

/// `fi_getinfo` with hints for a tagged RDM endpoint, optionally of one provider bound to
/// `node`; the list libfabric returns (to be freed with `fi_freeinfo`), or the return code.
fn getinfo(
    provider: Option<&str>,
    node: Option<&str>,
    rx_size: usize,
) -> Result<*mut ffi::fi_info, i32> {
    // SAFETY: fi_allocinfo returns a zeroed fi_info with its attribute structs allocated, or
    // null.
    let hints = unsafe { ffi::cb_fi_allocinfo() };
    if hints.is_null() {
        return Err(-(ffi::FI_ENOMEM as i32));
    }
    let prov = provider.and_then(|p| CString::new(p).ok());
    let node = node.and_then(|n| CString::new(n).ok());
    // SAFETY: `hints` and its attribute structs are valid (fi_allocinfo); prov_name must be
    // malloc'ed since fi_freeinfo frees it, hence strdup.
    unsafe {
        let h = &mut *hints;
        h.caps = ffi::FI_TAGGED as u64;
        h.mode = ffi::FI_CONTEXT | ffi::FI_CONTEXT2;
        (*h.ep_attr).type_ = ffi::FI_EP_RDM;
        (*h.domain_attr).mr_mode =
            (ffi::FI_MR_LOCAL | ffi::FI_MR_ALLOCATED | ffi::FI_MR_PROV_KEY | ffi::FI_MR_VIRT_ADDR)
                as i32;
        (*h.domain_attr).threading = ffi::FI_THREAD_DOMAIN;
        if rx_size > 0 {
            (*h.rx_attr).size = rx_size;
        }
        if let Some(p) = &prov {
            (*h.fabric_attr).prov_name = libc::strdup(p.as_ptr());
        }
    }
    let mut info: *mut ffi::fi_info = ptr::null_mut();
    let flags = if node.is_some() { ffi::FI_SOURCE } else { 0 };
    // SAFETY: hints is a valid fi_info, node is null or a NUL-terminated string that outlives
    // the call, and `info` receives a list libfabric allocates.
    let rc = unsafe {
        ffi::fi_getinfo(
            sys::API_VERSION,
            node.as_ref().map_or(ptr::null(), |n| n.as_ptr()),
            ptr::null(),
            flags,
            hints,
            &mut info,
        )
    };
    // SAFETY: hints came from fi_allocinfo and is freed once.
    unsafe { ffi::fi_freeinfo(hints) };
    if rc != 0 || info.is_null() {
        return Err(if rc != 0 {
            rc
        } else {
            -(ffi::FI_ENODATA as i32)
        });
    }
    Ok(info)
}

/// The providers that offer a tagged FI_EP_RDM endpoint here, by name, each once, in
/// libfabric's order of preference.
pub fn providers() -> Vec<String> {
    let Ok(info) = getinfo(None, None, 0) else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    let mut p = info;
    while !p.is_null() {
        // SAFETY: `p` walks the list fi_getinfo returned, freed only below.
        let name = unsafe { sys::text((*(*p).fabric_attr).prov_name) };
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
        // SAFETY: as above.
        p = unsafe { (*p).next };
    }
    // SAFETY: the list came from fi_getinfo and is freed once.
    unsafe { ffi::fi_freeinfo(info) };
    out
}

/// Whether libfabric knows a provider by this name at all (any endpoint type or capability).
fn provider_exists(name: &str) -> bool {
    let Ok(p) = CString::new(name) else {
        return false;
    };
    // SAFETY: as in getinfo: a zeroed fi_info from fi_allocinfo, a strdup'ed name.
    let hints = unsafe { ffi::cb_fi_allocinfo() };
    if hints.is_null() {
        return false;
    }
    // SAFETY: hints is valid; the name is malloc'ed for fi_freeinfo.
    unsafe { (*(*hints).fabric_attr).prov_name = libc::strdup(p.as_ptr()) };
    let mut info: *mut ffi::fi_info = ptr::null_mut();
    // SAFETY: valid hints; `info` receives a list or stays null.
    let rc = unsafe {
        ffi::fi_getinfo(
            sys::API_VERSION,
            ptr::null(),
            ptr::null(),
            0,
            hints,
            &mut info,
        )
    };
    // SAFETY: each list is freed once.
    unsafe {
        ffi::fi_freeinfo(hints);
        if !info.is_null() {
            ffi::fi_freeinfo(info);
        }
    }
    rc == 0
}

/// The error for a provider that cannot give a tagged RDM endpoint, listing those that can.
pub fn no_provider(name: Option<&str>, rc: i32) -> Error {
    let have = providers();
    let list = if have.is_empty() {
        "none here offers FI_EP_RDM with FI_TAGGED".to_string()
    } else {
        format!("available: {}", have.join(", "))
    };
    let why = match name {
        Some(n) if provider_exists(n) => format!(
            "libfabric provider `{n}` offers no FI_EP_RDM endpoint with FI_TAGGED and the \
             modes commbench supports ({})",
            sys::strerror(rc as i64)
        ),
        Some(n) => format!("libfabric has no provider `{n}`"),
        None => format!(
            "libfabric offers no FI_EP_RDM endpoint with FI_TAGGED ({})",
            sys::strerror(rc as i64)
        ),
    };
    Error::Config(format!("{why}; {list}"))
}

/// The provider named (or libfabric's first choice), checked to offer a tagged RDM
/// endpoint: its attributes, or the error listing the available providers.
pub fn probe(provider: Option<&str>) -> Result<Attrs> {
    probe_with_rx(provider, 0)
}

/// [`probe`] asking for a receive queue of at least `rx_size` entries (0: the provider's
/// default); an error when the provider offers no queue that long.
pub fn probe_with_rx(provider: Option<&str>, rx_size: usize) -> Result<Attrs> {
    let info = getinfo(provider, None, rx_size).map_err(|rc| no_provider(provider, rc))?;
    // SAFETY: the list is valid and non-empty; its first entry is read, then freed once.
    let attrs = unsafe { attrs_of(&*info) };
    // SAFETY: as above.
    unsafe { ffi::fi_freeinfo(info) };
    check_tag_bits(&attrs)?;
    Ok(attrs)
}

/// The tag carries a rank and a commbench tag in 64 bits: a provider that matches fewer (its
/// `mem_tag_format` leaves the top bits out) would confuse messages, and is refused.
fn check_tag_bits(a: &Attrs) -> Result<()> {
    if a.mem_tag_format != 0 && a.mem_tag_format.leading_zeros() > 1 {
        return Err(Error::Config(format!(
            "libfabric provider `{}` matches fewer than the 64 tag bits commbench uses \
             (mem_tag_format {:#x})",
            a.provider, a.mem_tag_format
        )));
    }
    Ok(())
}

/// The attributes of one `fi_info`.
///
/// # Safety
/// `i` comes from fi_getinfo: its attribute pointers are valid.
unsafe fn attrs_of(i: &ffi::fi_info) -> Attrs {
    // SAFETY: the caller promises valid attribute structs.
    unsafe {
        let fa = &*i.fabric_attr;
        let da = &*i.domain_attr;
        let tx = &*i.tx_attr;
        let rx = &*i.rx_attr;
        Attrs {
            provider: sys::text(fa.prov_name),
            provider_version: sys::version_text(fa.prov_version),
            provider_version_code: fa.prov_version,
            fabric: sys::text(fa.name),
            domain: sys::text(da.name),
            inject_size: tx.inject_size,
            mr_mode: da.mr_mode as u32 as u64,
            av_type: da.av_type,
            addr_format: i.addr_format,
            tx_size: tx.size,
            rx_size: rx.size,
            max_msg_size: (*i.ep_attr).max_msg_size as u64,
            mode: i.mode,
            mem_tag_format: (*i.ep_attr).mem_tag_format,
        }
    }
}

/// One rank's open libfabric objects. Not `Send`: they stay on the thread that opened them
/// (`FI_THREAD_DOMAIN`).
#[derive(Debug)]
pub(crate) struct Fabric {
    info: *mut ffi::fi_info,
    fabric: *mut ffi::fid_fabric,
    domain: *mut ffi::fid_domain,
    pub cq: *mut ffi::fid_cq,
    av: *mut ffi::fid_av,
    pub ep: *mut ffi::fid_ep,
    pub attrs: Attrs,
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.close_ep();
        // SAFETY: each pointer is null or an object this Fabric opened and closes once, after
        // the endpoint bound to it; fi_close's return code has nowhere to go.
        unsafe {
            for fid in [
                self.av as *mut ffi::fid,
                self.cq as *mut ffi::fid,
                self.domain as *mut ffi::fid,
                self.fabric as *mut ffi::fid,
            ] {
                if !fid.is_null() {
                    ffi::cb_fi_close(fid);
                }
            }
            if !self.info.is_null() {
                ffi::fi_freeinfo(self.info);
            }
        }
    }
}

impl Fabric {
    /// Close the endpoint (once; later calls do nothing): no operation is outstanding after
    /// it. Whether it closed (or was never opened).
    pub fn close_ep(&mut self) -> bool {
        if self.ep.is_null() {
            return true;
        }
        // SAFETY: the endpoint was opened by this Fabric and is closed once; the pointer is
        // cleared below.
        let rc = unsafe { ffi::cb_fi_close(self.ep as *mut ffi::fid) };
        self.ep = ptr::null_mut();
        rc == 0
    }

    /// Open the provider `want` asks for, its endpoint bound to `want.node` when its addresses
    /// are IP ones, with an address vector for `ranks` peers.
    pub fn open(want: &Want, ranks: u32) -> Result<Fabric> {
        let p = want.provider.as_deref();
        let mut info = getinfo(p, None, want.rx_size).map_err(|rc| no_provider(p, rc))?;
        // SAFETY: a non-empty list from fi_getinfo.
        let format = unsafe { (*info).addr_format };
        if let (Some(node), true) = (&want.node, sys::is_ip_format(format)) {
            if let Ok(bound) = getinfo(p, Some(node), want.rx_size) {
                // SAFETY: the first list is replaced and freed once.
                unsafe { ffi::fi_freeinfo(info) };
                info = bound;
            }
        }
        let mut f = Fabric {
            info,
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
            cq: ptr::null_mut(),
            av: ptr::null_mut(),
            ep: ptr::null_mut(),
            // SAFETY: a valid fi_info from fi_getinfo.
            attrs: unsafe { attrs_of(&*info) },
        };
        check_tag_bits(&f.attrs)?;
        f.open_objects(ranks)?;
        Ok(f)
    }

    /// fi_fabric, fi_domain, fi_cq_open, fi_av_open, fi_endpoint, the bindings, fi_enable.
    fn open_objects(&mut self, ranks: u32) -> Result<()> {
        // SAFETY: `self.info` is the valid fi_info chosen; every out-pointer is a field of
        // self, stored before the next call so that Drop closes whatever was opened.
        unsafe {
            let i = &*self.info;
            check(
                ffi::fi_fabric(i.fabric_attr, &mut self.fabric, ptr::null_mut()) as i64,
                "fi_fabric",
            )?;
            check(
                ffi::cb_fi_domain(self.fabric, self.info, &mut self.domain, ptr::null_mut()) as i64,
                "fi_domain",
            )?;
            let mut cq_attr = ffi::fi_cq_attr {
                size: (*i.tx_attr).size.max((*i.rx_attr).size).max(1024) * 2,
                format: ffi::FI_CQ_FORMAT_TAGGED,
                wait_obj: ffi::FI_WAIT_NONE,
                ..Default::default()
            };
            check(
                ffi::cb_fi_cq_open(self.domain, &mut cq_attr, &mut self.cq, ptr::null_mut()) as i64,
                "fi_cq_open",
            )?;
            let av_type = match (*i.domain_attr).av_type {
                ffi::FI_AV_UNSPEC => ffi::FI_AV_TABLE,
                t => t,
            };
            let mut av_attr = ffi::fi_av_attr {
                type_: av_type,
                count: ranks as usize,
                ..Default::default()
            };
            check(
                ffi::cb_fi_av_open(self.domain, &mut av_attr, &mut self.av, ptr::null_mut()) as i64,
                "fi_av_open",
            )?;
            self.attrs.av_type = av_type;
            check(
                ffi::cb_fi_endpoint(self.domain, self.info, &mut self.ep, ptr::null_mut()) as i64,
                "fi_endpoint",
            )?;
            check(
                ffi::cb_fi_ep_bind(self.ep, self.av as *mut ffi::fid, 0) as i64,
                "fi_ep_bind(av)",
            )?;
            check(
                ffi::cb_fi_ep_bind(
                    self.ep,
                    self.cq as *mut ffi::fid,
                    (ffi::FI_TRANSMIT | ffi::FI_RECV) as u64,
                ) as i64,
                "fi_ep_bind(cq)",
            )?;
            check(ffi::cb_fi_enable(self.ep) as i64, "fi_enable")?;
        }
        Ok(())
    }

    /// This endpoint's address (`fi_getname`), for the other ranks.
    pub fn name(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; 256];
        loop {
            let mut len = buf.len();
            // SAFETY: the endpoint is open; `buf` has `len` writable bytes and libfabric
            // writes at most that many, setting `len` to the size it needs.
            let rc = unsafe {
                ffi::cb_fi_getname(
                    self.ep as *mut ffi::fid,
                    buf.as_mut_ptr() as *mut c_void,
                    &mut len,
                )
            };
            if rc == -(ffi::FI_ETOOSMALL as i32) && len > buf.len() && len <= 1 << 16 {
                buf.resize(len, 0);
                continue;
            }
            check(rc as i64, "fi_getname")?;
            buf.truncate(len);
            return Ok(buf);
        }
    }

    /// Insert every rank's address, in rank order; the `fi_addr_t` of each.
    pub fn insert(&mut self, names: &[Vec<u8>]) -> Result<Vec<u64>> {
        let mut out = Vec::with_capacity(names.len());
        for (r, name) in names.iter().enumerate() {
            // A string address must end in NUL; a binary one is passed as it came.
            let mut a = name.clone();
            if self.attrs.addr_format == ffi::FI_ADDR_STR && a.last() != Some(&0) {
                a.push(0);
            }
            let mut fi_addr: u64 = sys::FI_ADDR_UNSPEC;
            // SAFETY: the AV is open; `a` holds one address of this provider's format and
            // `fi_addr` receives one handle.
            let n = unsafe {
                ffi::cb_fi_av_insert(
                    self.av,
                    a.as_ptr() as *const c_void,
                    1,
                    &mut fi_addr,
                    0,
                    ptr::null_mut(),
                )
            };
            if n != 1 {
                return Err(backend_error(format!(
                    "fi_av_insert of rank {r}'s address ({} bytes) inserted {n}: {}",
                    name.len(),
                    if n < 0 {
                        sys::strerror(n as i64)
                    } else {
                        "the address was refused".into()
                    }
                )));
            }
            out.push(fi_addr);
        }
        Ok(out)
    }

    /// Register `len` bytes at `buf` for sends and receives under `key` (unique per domain,
    /// for providers without `FI_MR_PROV_KEY`); the region and its descriptor.
    pub fn register(
        &self,
        buf: *const u8,
        len: usize,
        key: u64,
    ) -> Result<(*mut ffi::fid_mr, *mut c_void)> {
        let mut mr: *mut ffi::fid_mr = ptr::null_mut();
        // SAFETY: the domain is open; the caller keeps [buf, buf+len) alive while the
        // registration is used and closes it (fi_close) before the memory goes away.
        let rc = unsafe {
            ffi::cb_fi_mr_reg(
                self.domain,
                buf as *const c_void,
                len,
                (ffi::FI_SEND | ffi::FI_RECV) as u64,
                0,
                key,
                0,
                &mut mr,
                ptr::null_mut(),
            )
        };
        check(rc as i64, "fi_mr_reg")?;
        // SAFETY: `mr` was just registered.
        let desc = unsafe { ffi::cb_fi_mr_desc(mr) };
        Ok((mr, desc))
    }
}

/// Close a memory registration.
pub(crate) fn close_mr(mr: *mut ffi::fid_mr) {
    if !mr.is_null() {
        // SAFETY: a registration from Fabric::register, closed once.
        unsafe { ffi::cb_fi_close(mr as *mut ffi::fid) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_provider_is_a_configuration_error_listing_the_others() {
        let e = probe(Some("no-such-provider")).unwrap_err();
        let text = e.to_string();
        assert!(e.is_configuration(), "{text}");
        assert!(text.contains("no provider `no-such-provider`"), "{text}");
        assert!(text.contains("available:"), "{text}");
    }

    #[test]
    fn shm_and_tcp_are_probed_with_their_attributes() {
        for p in ["shm", "tcp;ofi_rxm"] {
            let a = probe(Some(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(a.provider, p);
            assert!(a.inject_size > 0 && a.rx_size > 0, "{a:?}");
        }
        assert!(providers().iter().any(|p| p == "shm"));
    }
}
