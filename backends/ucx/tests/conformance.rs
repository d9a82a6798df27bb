//! The core conformance suite over UCX, all ranks as threads of this process meeting on
//! loopback, over shared memory (`posix`, `sysv`, `sm` with cma) and `tcp`.

use commbench_core::testkit::{run_check, Harness, CHECKS};
use commbench_core::{Endpoint, Program, Result, Role, Src, TagSel};
use commbench_ucx::{run_threads, UcxConfig};
use std::time::Duration;

struct Threads(UcxConfig);

impl Harness for Threads {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        run_threads(n, &self.0, p)
    }
}

fn cfg(tls: &str) -> UcxConfig {
    UcxConfig {
        tls: Some(tls.into()),
        timeout: Duration::from_secs(20),
        ..UcxConfig::default()
    }
}

/// Every check on each rank count of `ranks`.
fn suite(h: &Threads, ranks: std::ops::RangeInclusive<u32>, max: usize) {
    for n in ranks {
        for name in CHECKS {
            if let Err(e) = run_check(h, name, n, max) {
                panic!("{:?}: check `{name}` on {n} ranks: {e}", h.0.tls);
            }
        }
    }
}

#[test]
fn conformance_posix() {
    suite(&Threads(cfg("posix,self")), 2..=4, 8 << 20);
}

#[test]
fn conformance_tcp() {
    suite(&Threads(cfg("tcp")), 2..=4, 8 << 20);
}

#[test]
fn conformance_shared_memory_with_cma_and_sysv() {
    suite(&Threads(cfg("posix,cma,self")), 2..=3, 8 << 20);
    suite(&Threads(cfg("sysv,self")), 2..=2, 1 << 20);
}

/// What the result document says of UCX's choices: the transports of each endpoint's lanes
/// and the protocol of each message size sent.
struct Described;

impl Program for Described {
    type Output = serde_json::Map<String, serde_json::Value>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        let peer = 1 - ep.rank();
        for len in [8usize, 4 << 20] {
            let mut buf = vec![1u8; len];
            let role = if ep.rank() == 0 {
                Role::Initiator
            } else {
                Role::Echo
            };
            ep.pingpong(peer, 5, &mut buf, 2, role)?;
        }
        Ok(ep.info())
    }
}

#[test]
fn the_result_document_names_lanes_and_protocols() {
    for (tls, lane) in [("posix,self", "posix/"), ("tcp", "tcp/")] {
        let outs = run_threads(2, &cfg(tls), &Described).expect("the run");
        let info = &outs[0];
        assert_eq!(info["tls"], tls);
        let peers = info["peers"].as_array().expect("peers");
        assert_eq!(peers.len(), 1, "{info:?}");
        assert_eq!(peers[0]["rank"], 1);
        let lanes = peers[0]["lanes"].to_string();
        assert!(lanes.contains(lane), "{tls}: {lanes}");
        let sends = info["sends"].as_array().expect("sends");
        let proto = |b: u64| {
            sends
                .iter()
                .find(|s| s["bytes"] == b)
                .map(|s| s["protocol"].as_str().unwrap_or("").to_string())
        };
        if peers[0]["tag_send"] == ""
            || info["protocol_source"]
                .as_str()
                .is_some_and(|s| s.starts_with("none"))
        {
            // No thresholds, or not the ones UCX sends by: the v2 protocols (UCX_PROTO_ENABLE,
            // the default from 1.16).
            assert_eq!(proto(8).as_deref(), Some("unknown"), "{tls}: {sends:?}");
        } else {
            assert_eq!(proto(8).as_deref(), Some("egr/short"), "{tls}: {sends:?}");
            assert!(
                proto(4 << 20).is_some_and(|p| p.starts_with("rndv")),
                "{tls}: {sends:?}"
            );
        }
        assert!(info["ucx_version"].as_str().is_some_and(|v| !v.is_empty()));
    }
}

/// Rank 1 never answers (it sleeps past the timeout): rank 0's receive ends with a timeout
/// naming rank 1.
struct Silent;

impl Program for Silent {
    type Output = Option<String>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Option<String>> {
        if ep.rank() == 1 {
            std::thread::sleep(Duration::from_secs(3));
            return Ok(None);
        }
        // Rank 1 sends nothing: only the timeout can end this receive.
        let r = ep.recv(Src::Rank(1), TagSel::Tag(3), vec![0; 8]);
        Ok(Some(format!("{}", r.expect_err("nothing was sent"))))
    }
}

#[test]
fn a_silent_peer_ends_the_wait_within_the_timeout() {
    for tls in ["posix,self", "tcp"] {
        let c = UcxConfig {
            timeout: Duration::from_secs(2),
            ..cfg(tls)
        };
        let outs = run_threads(2, &c, &Silent).expect("the run");
        let said = outs[0].clone().unwrap_or_default();
        assert!(
            said.contains("rank 1") && said.contains("timed out"),
            "{tls}: {said}"
        );
    }
}
