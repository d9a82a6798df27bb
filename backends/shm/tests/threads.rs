//! The shm backend with every rank a thread of the test process: the core conformance suite,
//! every wait policy, streaming through small rings, and failures that must not hang.

use commbench_core::testkit::{run_check, run_suite, Harness, CHECKS};
use commbench_core::{Endpoint, Error, Program, Result, Src, TagSel};
use commbench_shm::{run_threads, ShmConfig, WaitPolicy};
use std::time::{Duration, Instant};

mod common;
use common::{ManyInFlight, BROKEN_IN_CORE};

struct Threads(ShmConfig);

impl Harness for Threads {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        run_threads(n, &self.0, p)
    }
}

fn cfg(wait: WaitPolicy, ring_bytes: usize) -> ShmConfig {
    ShmConfig {
        wait,
        ring_bytes,
        timeout: Duration::from_secs(20),
        ..ShmConfig::default()
    }
}

/// The whole suite on 2, 3 and 4 ranks with messages up to 4 MiB, then the `sizes` check with
/// 64 MiB messages on 2 ranks. (The full suite at 64 MiB runs the core's unoptimised pattern
/// generator over 3 GiB in a debug build, which takes minutes on a shared 2-core machine; the
/// message size, not the rank count, is what exercises the streaming path.)
#[test]
fn conformance_suite_and_64_mib_messages() {
    let h = Threads(cfg(WaitPolicy::SpinYield, 256 << 10));
    if BROKEN_IN_CORE.is_empty() {
        run_suite(&h, 4 << 20).unwrap();
    } else {
        for n in 2..=4 {
            for name in CHECKS.iter().filter(|c| !BROKEN_IN_CORE.contains(c)) {
                run_check(&h, name, n, 4 << 20).unwrap_or_else(|e| panic!("{name} on {n}: {e}"));
            }
            run_threads(n, &h.0, &ManyInFlight).unwrap();
        }
    }
    let big = Threads(ShmConfig {
        timeout: Duration::from_secs(60),
        ..h.0.clone()
    });
    run_check(&big, "sizes", 2, 64 << 20).unwrap();
}

#[test]
fn every_wait_policy_and_a_tiny_ring_pass_the_checks() {
    // A 4 KiB ring makes 64 KiB..1 MiB messages stream through it in many pieces and wrap often.
    for (wait, ring) in [
        (WaitPolicy::SpinYield, 4096),
        (WaitPolicy::Futex, 4096),
        (WaitPolicy::Futex, 64 << 10),
    ] {
        let h = Threads(cfg(wait, ring));
        for n in [2, 3] {
            for check in ["ordering", "sizes", "tags_and_wildcards", "control_plane"] {
                run_check(&h, check, n, 1 << 20)
                    .unwrap_or_else(|e| panic!("{wait} ring {ring}: {check} on {n}: {e}"));
            }
            run_threads(n, &h.0, &ManyInFlight).unwrap();
        }
    }
}

/// Both ranks send a message far larger than the ring to each other before receiving: the
/// blocking send must drain the incoming ring while it waits for space.
struct CrossSend(usize);

impl Program for CrossSend {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let peer = 1 - ep.rank();
        let data: Vec<u8> = (0..self.0)
            .map(|i| (i % 251) as u8 ^ ep.rank() as u8)
            .collect();
        ep.send(peer, 1, data)?;
        let c = ep.recv(Src::Rank(peer), TagSel::Tag(1), vec![0; self.0])?;
        let ok = c.len == self.0
            && c.buf
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i % 251) as u8 ^ peer as u8);
        if ok {
            Ok(())
        } else {
            Err(Error::Invalid("cross-sent payload differs".into()))
        }
    }
}

#[test]
fn simultaneous_large_sends_do_not_deadlock() {
    for wait in [WaitPolicy::Spin, WaitPolicy::Futex] {
        run_threads(2, &cfg(wait, 4096), &CrossSend(3 << 20)).unwrap();
    }
}

/// Rank 1 fails at once; rank 0 waits for a message from it that never comes.
struct OneFails;

impl Program for OneFails {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        if ep.rank() == 1 {
            return Err(Error::Invalid("rank 1 gives up".into()));
        }
        ep.recv(Src::Rank(1), TagSel::Any, vec![0; 8]).map(drop)
    }
}

#[test]
fn a_failing_peer_ends_the_wait_with_its_error_not_a_timeout() {
    let t0 = Instant::now();
    let c = ShmConfig {
        timeout: Duration::from_secs(30),
        ..ShmConfig::default()
    };
    let e = run_threads(2, &c, &OneFails).unwrap_err();
    assert!(
        matches!(e.root(), Error::Invalid(m) if m.contains("gives up")),
        "{e}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
}

/// Rank 1 finishes without sending; rank 0 waits for it.
struct OneLeaves;

impl Program for OneLeaves {
    type Output = bool;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<bool> {
        if ep.rank() == 1 {
            return Ok(true);
        }
        match ep.recv(Src::Rank(1), TagSel::Any, vec![0; 8]) {
            Err(Error::PeerLost { peer: 1, .. }) => Ok(true),
            other => Err(Error::Invalid(format!(
                "expected PeerLost from rank 1, got {other:?}"
            ))),
        }
    }
}

#[test]
fn waiting_on_a_finished_peer_is_peer_lost() {
    for wait in [WaitPolicy::Spin, WaitPolicy::Futex] {
        let c = ShmConfig {
            wait,
            timeout: Duration::from_secs(30),
            ..ShmConfig::default()
        };
        let t0 = Instant::now();
        assert_eq!(run_threads(2, &c, &OneLeaves).unwrap(), vec![true, true]);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}

/// Rank 0 waits for a message nobody sends while rank 1 stays alive (asleep).
struct Silent;

impl Program for Silent {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        if ep.rank() == 0 {
            return ep.recv(Src::Rank(1), TagSel::Tag(5), vec![0; 8]).map(drop);
        }
        std::thread::sleep(ep.timeout() * 3);
        Ok(())
    }
}

#[test]
fn a_silent_peer_is_a_timeout_naming_it() {
    let c = ShmConfig {
        timeout: Duration::from_millis(300),
        ..ShmConfig::default()
    };
    let e = run_threads(2, &c, &Silent).unwrap_err();
    match e.root() {
        Error::Timeout { rank: 0, what, .. } => assert!(what.contains("from rank 1"), "{what}"),
        other => panic!("expected a timeout on rank 0, got {other}"),
    }
}

/// info() records the policy and the affinity in effect.
struct Info;

impl Program for Info {
    type Output = commbench_core::transport::BackendInfo;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Self::Output> {
        assert_eq!(ep.backend(), "shm");
        Ok(ep.info())
    }
}

#[test]
fn info_records_wait_policy_and_pinning() {
    let c = ShmConfig {
        wait: WaitPolicy::SpinYield,
        cpus: vec![0],
        ..ShmConfig::default()
    };
    let infos = run_threads(2, &c, &Info).unwrap();
    for i in &infos {
        assert_eq!(i["wait"], "spin-yield");
        assert_eq!(i["mode"], "threads");
        assert_eq!(i["pinned_cpu"], 0);
        assert_eq!(i["cpu_affinity"], serde_json::json!([0]));
    }
    let c = ShmConfig {
        cpus: vec![100_000],
        ..ShmConfig::default()
    };
    assert!(matches!(
        run_threads(2, &c, &Info).unwrap_err().root(),
        Error::Config(_)
    ));
}
