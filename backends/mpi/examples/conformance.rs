//! The conformance suite of commbench-core over MPI, plus every pattern between the last two
//! ranks and both transposes. Run under a launcher:
//!
//! ```text
//! mpirun -np 2 target/debug/examples/conformance
//! mpirun -np 4 --oversubscribe target/debug/examples/conformance
//! ```
//!
//! With `-np N` the checks run on 2..=N ranks (sub-communicators of the first n ranks).
//! Exits non-zero (and aborts the job) on the first failure.

mod common;

use commbench_core::method::engine::Measurement;
use commbench_core::method::transpose::Transpose;
use commbench_core::method::PatternKind;
use commbench_core::method::{MethodConfig, NppChoice};
use commbench_core::testkit::{run_check, Harness, CHECKS};
use commbench_core::{Endpoint, Error, Program, Result, Role, Span, Src, TagSel};
use commbench_mpi::{Mpi, MpiClock, MpiConfig};
use std::time::{Duration, Instant};

struct World<'a> {
    mpi: &'a Mpi,
    cfg: MpiConfig,
}

impl Harness for World<'_> {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        // Only this rank's output exists here; ranks outside the first n return nothing.
        Ok(self.mpi.run_subset(n, &self.cfg, p)?.into_iter().collect())
    }
}

fn quick(source: u32, dest: u32, sizes: Vec<u64>) -> MethodConfig {
    MethodConfig {
        sizes,
        trials: 30,
        warmup: 5,
        npp: NppChoice::Auto {
            res_npp: 50,
            npp_init: 2,
            npptrial: 10,
        },
        timer_samples: 1 << 14,
        source,
        dest,
        ..MethodConfig::default()
    }
}

/// A silent peer inside the ping-pong loop (native on MPI): rank 0's loop must end with a
/// timeout naming rank 1 after about the endpoint's timeout, not hang, while rank 1 sleeps.
struct SilentPeer(Duration);

impl Program for SilentPeer {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        if ep.rank() == 0 {
            let t0 = Instant::now();
            let mut buf = vec![0u8; 8];
            let r = ep.pingpong(1, 21, &mut buf, 5, Role::Initiator);
            let waited = t0.elapsed();
            let ok = match &r {
                Err(e) => {
                    matches!(e.root(), Error::Timeout { .. }) && e.to_string().contains("rank 1")
                }
                Ok(()) => false,
            };
            if !ok || waited < self.0 || waited > 4 * self.0 {
                return Err(Error::Protocol(format!(
                    "silent peer: after {waited:?} the loop gave {r:?}, not a timeout naming rank 1"
                )));
            }
        } else if ep.rank() == 1 {
            std::thread::sleep(self.0 + Duration::from_millis(500));
        }
        ep.barrier()
    }
}

/// A window posted as one span whose middle message is longer than its part of the buffer:
/// the span's completion is that message's truncation, though the span's last message fitted,
/// and the endpoint stays usable: the next message arrives.
struct SpanTruncation;

impl Program for SpanTruncation {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        const TAG: u32 = 23;
        if ep.rank() == 1 {
            for len in [8, 16, 8, 4] {
                ep.send(0, TAG, vec![len as u8; len])?;
            }
        } else if ep.rank() == 0 {
            let span = Span {
                start: 0,
                len: 8,
                count: 3,
            };
            let r = ep.irecv_span(Src::Rank(1), TagSel::Tag(TAG), vec![0; 8], span)?;
            match ep.wait(r) {
                Err(Error::Truncated { len, cap: 8, .. }) if len > 8 => {}
                other => {
                    return Err(Error::Protocol(format!(
                        "a span of 3 receives of 8 bytes, the second sent 16: {other:?}, not a truncation"
                    )))
                }
            }
            let c = ep.recv(Src::Rank(1), TagSel::Tag(TAG), vec![0; 8])?;
            if c.len != 4 || c.buf[..4] != [4; 4] {
                return Err(Error::Protocol(format!(
                    "the message after a truncated span: {} bytes {:?}",
                    c.len,
                    &c.buf[..c.len.min(8)]
                )));
            }
        }
        ep.barrier()
    }
}

fn all(mpi: &Mpi) -> Result<usize> {
    // The control-plane check compares clock readings across ranks, so it needs one clock
    // shared by all: CLOCK_MONOTONIC on one host. MPI_Wtime is per process in Open MPI
    // (MPI_WTIME_IS_GLOBAL is false); the patterns below use it too.
    let cfg = MpiConfig {
        timeout: Duration::from_secs(20),
        clock: MpiClock::Monotonic,
    };
    let h = World {
        mpi,
        cfg: cfg.clone(),
    };
    let mut passed = 0;
    for n in 2..=mpi.size() {
        for name in CHECKS {
            run_check(&h, name, n, 1 << 22)
                .map_err(|e| e.in_phase(format!("conformance check `{name}` on {n} ranks")))?;
            passed += 1;
        }
    }
    let quick_timeout = MpiConfig {
        timeout: Duration::from_secs(1),
        ..cfg.clone()
    };
    mpi.run_subset(2, &quick_timeout, &SilentPeer(quick_timeout.timeout))
        .map_err(|e| e.in_phase("a silent peer in the ping-pong loop"))?;
    passed += 1;
    mpi.run_subset(2, &cfg, &SpanTruncation)
        .map_err(|e| e.in_phase("a truncated message inside a posted span"))?;
    passed += 1;
    // Every pattern between any two ranks (the last two, in reverse order), on both clocks.
    let (s, d) = (mpi.size() - 1, mpi.size() - 2);
    for (kind, clock) in [
        (PatternKind::PingPong, MpiClock::Wtime),
        (PatternKind::Exchange, MpiClock::Monotonic),
        (PatternKind::Bandwidth { window: 8 }, MpiClock::Wtime),
        (PatternKind::BiBandwidth { window: 8 }, MpiClock::Monotonic),
    ] {
        let b = Measurement::new(kind, quick(s, d, vec![0, 8, 70_000]), None);
        mpi.run(
            &MpiConfig {
                clock,
                ..cfg.clone()
            },
            &b,
        )
        .map_err(|e| e.in_phase(kind.name()))?;
        if mpi.rank() == 0 {
            let c = b.take_collected();
            let ok = c.points.len() == 3
                && c.points.iter().all(|p| p.trial_ns.len() == 30)
                && c.timer.as_ref().is_some_and(|t| t.clock == clock.name());
            if !ok {
                return Err(commbench_core::Error::Protocol(format!(
                    "{}: rank 0 collected {} points",
                    kind.name(),
                    c.points.len()
                )));
            }
        }
        passed += 1;
    }
    // Both transposes of seed 003, verified.
    let t = Measurement::new(Transpose { n: 33 }, quick(0, 1, vec![]), None);
    mpi.run(&cfg, &t)
        .map_err(|e| e.in_phase("transpose-pack"))?;
    let v = Measurement::new(Transpose { n: 33 }, quick(0, 1, vec![]), None);
    commbench_mpi::measure_vector(mpi, &cfg, &v).map_err(|e| e.in_phase("transpose-vector"))?;
    if mpi.rank() == 0 {
        let (a, b) = (t.take_collected(), v.take_collected());
        if a.points.len() != 1 || b.points.len() != 1 || b.points[0].pattern != "transpose-vector" {
            return Err(commbench_core::Error::Protocol(
                "transposes collected nothing".into(),
            ));
        }
    }
    passed += 2;
    Ok(passed)
}

fn main() {
    let mpi = common::init("conformance");
    let n = common::or_abort(&mpi, "conformance", all(&mpi));
    if mpi.rank() == 0 {
        println!(
            "conformance over MPI: {n} checks passed on up to {} ranks ({})",
            mpi.size(),
            commbench_mpi::library_version()
        );
    }
}
