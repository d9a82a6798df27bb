//! What the ofi backend records about itself in the result document.

use crate::endpoint::OfiEndpoint;
use crate::sys::{self, ffi};
use commbench_core::launch::affinity;
use commbench_core::transport::BackendInfo;
use serde_json::{json, Value};

/// The provider and how it is used: name and version, the libfabric library, inject size and
/// whether inject was used per message size, memory-registration mode, address-vector type,
/// queue sizes.
pub(crate) fn describe(ep: &OfiEndpoint) -> BackendInfo {
    let a = ep.attrs();
    let cfg = ep.cfg();
    let mut m = BackendInfo::new();
    m.insert("provider".into(), a.provider.clone().into());
    m.insert("provider_version".into(), a.provider_version.clone().into());
    m.insert("libfabric_version".into(), sys::library_version().into());
    m.insert(
        "libfabric_api".into(),
        sys::version_text(sys::API_VERSION).into(),
    );
    m.insert("fabric".into(), a.fabric.clone().into());
    m.insert("domain".into(), a.domain.clone().into());
    m.insert("endpoint".into(), "FI_EP_RDM, FI_TAGGED".into());
    m.insert(
        "addr_format".into(),
        sys::addr_format_name(a.addr_format).into(),
    );
    m.insert("av_type".into(), sys::av_type_name(a.av_type).into());
    m.insert(
        "mr_mode".into(),
        sys::flag_names(a.mr_mode, sys::MR_MODE_NAMES).into(),
    );
    let mr = if a.needs_mr() {
        "registered (the provider asks for FI_MR_LOCAL), cached per buffer"
    } else if cfg.register {
        "registered although the provider does not ask for it, cached per buffer"
    } else {
        "not registered (the provider does not ask for FI_MR_LOCAL)"
    };
    m.insert("memory_registration".into(), mr.into());
    let mut modes = Vec::new();
    if a.mode & ffi::FI_CONTEXT != 0 {
        modes.push("FI_CONTEXT");
    }
    if a.mode & ffi::FI_CONTEXT2 != 0 {
        modes.push("FI_CONTEXT2");
    }
    m.insert("mode".into(), modes.into());
    m.insert("inject_size".into(), (a.inject_size as u64).into());
    m.insert(
        "inject_below_bytes".into(),
        (ep.inject_below() as u64).into(),
    );
    let sent: Vec<Value> = ep
        .sent()
        .iter()
        .map(|(&bytes, &inject)| json!({"bytes": bytes as u64, "inject": inject}))
        .collect();
    m.insert("sends".into(), sent.into());
    m.insert("tx_size".into(), (a.tx_size as u64).into());
    m.insert("rx_size".into(), (a.rx_size as u64).into());
    m.insert("max_msg_size".into(), a.max_msg_size.into());
    m.insert(
        "completion".into(),
        "one CQ polled with fi_cq_read (FI_CQ_FORMAT_TAGGED, FI_WAIT_NONE)".into(),
    );
    m.insert("timeout_s".into(), cfg.timeout.as_secs_f64().into());
    let (pinned, actual) = ep.pinning();
    affinity::record(&mut m, pinned, actual);
    m
}
