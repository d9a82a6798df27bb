//! What the ucx backend records about itself in the result document.

use crate::endpoint::UcxEndpoint;
use crate::sys;
use commbench_core::launch::affinity;
use commbench_core::transport::BackendInfo;
use serde_json::{json, Value};

/// The UCX library and API, the transports asked for and found, what UCX says of the
/// endpoint to each other rank (lanes and tag protocol thresholds) and the protocol of each
/// message size sent.
pub(crate) fn describe(ep: &UcxEndpoint) -> BackendInfo {
    let cfg = ep.cfg();
    let mut m = BackendInfo::new();
    m.insert("ucx_version".into(), sys::library_version().into());
    m.insert("ucp_api".into(), sys::api_version().into());
    let tls: Value = match (&cfg.tls, std::env::var("UCX_TLS")) {
        (Some(t), _) => t.clone().into(),
        (None, Ok(t)) => format!("{t} (UCX_TLS in the environment)").into(),
        (None, Err(_)) => "UCX's choice (UCX_TLS unset)".into(),
    };
    m.insert("tls".into(), tls);
    let resources = crate::worker::parse_resources(&ep.worker().context_text());
    m.insert("resources".into(), resources.into());
    let me = commbench_core::Endpoint::rank(ep) as usize;
    let peers: Vec<Value> = ep
        .peers()
        .iter()
        .enumerate()
        .filter(|&(r, _)| r != me)
        .map(|(r, p)| json!({"rank": r, "lanes": p.lanes, "tag_send": p.tag_send}))
        .collect();
    m.insert("peers".into(), peers.into());
    let sent: Vec<Value> = ep
        .sent()
        .iter()
        .map(|(&bytes, &protocol)| json!({"bytes": bytes as u64, "protocol": protocol}))
        .collect();
    m.insert("sends".into(), sent.into());
    m.insert(
        "protocol_source".into(),
        if crate::proto::proto_v2_enabled() {
            "none: UCX_PROTO_ENABLE selects the v2 protocols, which the tag_send thresholds do \
             not describe (UCX_PROTO_INFO=y prints their choice)"
        } else {
            "ucp_ep_print_info: the endpoint's tag_send thresholds (protocols v1; empty where \
             UCX prints none, from 1.16 with the v2 protocols on by default)"
        }
        .into(),
    );
    m.insert(
        "api".into(),
        "UCP tag: ucp_tag_send_nbx / ucp_tag_recv_nbx, no callbacks".into(),
    );
    m.insert(
        "completion".into(),
        "ucp_worker_progress polled; requests checked with ucp_request_check_status / \
         ucp_tag_recv_request_test"
            .into(),
    );
    m.insert(
        "receives".into(),
        if ep.immediate_receives() {
            "may finish in the call (recv_info filled)"
        } else {
            "always with a request (UCP_OP_ATTR_FLAG_NO_IMM_CMPL: before 1.16 UCX leaves \
             recv_info unwritten when a receive finishes in the call)"
        }
        .into(),
    );
    m.insert("wireup_flushed".into(), true.into());
    m.insert("timeout_s".into(), cfg.timeout.as_secs_f64().into());
    let (pinned, actual) = ep.pinning();
    affinity::record(&mut m, pinned, actual);
    m
}
