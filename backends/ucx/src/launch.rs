//! Start-up: [`UcxConfig`], and the ways a rank comes to run a [`Program`] on a UCX worker.
//! Every way opens the worker, exchanges the workers' addresses over the control plane that
//! started the ranks (the tcp rendezvous, or MPI under mpirun, as ucx_perftest's RTE does),
//! connects and flushes, runs the program, and ends with a barrier on that control plane so
//! that no rank closes its endpoints while another still runs (over the endpoints, between the
//! ranks still live, when the program went on without some).

use crate::endpoint::UcxEndpoint;
use commbench_core::launch::rendezvous::Rendezvous;
use commbench_core::transport::control::barrier_without;
use commbench_core::transport::Program;
use commbench_core::Result;
use std::time::Duration;

/// How a ucx endpoint runs.
#[derive(Debug, Clone)]
pub struct UcxConfig {
    /// The UCX transports (`UCX_TLS`: `posix,self`, `tcp`, `sm`, ...); `None`: UCX's choice
    /// (the environment's `UCX_TLS`, else every transport it finds).
    pub tls: Option<String>,
    /// How long a wait (or a bootstrap step) may see no completion before it is an error.
    pub timeout: Duration,
    /// CPUs to pin ranks to: rank `i` goes to `cpus[i % len]`; empty: no pinning.
    pub cpus: Vec<usize>,
}

impl Default for UcxConfig {
    fn default() -> Self {
        UcxConfig {
            tls: None,
            timeout: Duration::from_secs(30),
            cpus: Vec::new(),
        }
    }
}

/// Open the worker, exchange addresses over `rdv`, connect and flush, run `p`, and meet the others at the end.
fn rank_main<P: Program>(rdv: &mut dyn Rendezvous, cfg: &UcxConfig, p: &P) -> Result<P::Output> {
    let mut ep = UcxEndpoint::open(rdv.rank(), rdv.size(), cfg)
        .map_err(|e| e.in_phase("opening the UCX worker"))?;
    let names = rdv
        .allgather(&ep.address()?)
        .map_err(|e| e.in_phase("exchanging worker addresses"))?;
    ep.connect(&names)
        .map_err(|e| e.in_phase("connecting to the other ranks' workers"))?;
    // Not a barrier on the control plane: a rank blocked there would not progress its worker,
    // and a peer still waiting for its connection to be accepted would stall.
    ep.handshake()
        .map_err(|e| e.in_phase("the wire-up handshake with the other ranks"))?;
    let out = p.run(&mut ep)?;
    let gone = ep.gone().to_vec();
    let closed = if gone.is_empty() {
        rdv.barrier()
            .map_err(|e| e.in_phase("the closing barrier"))?;
        // Every rank closes its endpoints while the others do (flush mode), and none destroys
        // its worker before all have closed, as ucx_perftest ends.
        let closed = ep.close_endpoints();
        rdv.barrier()
            .map_err(|e| e.in_phase("the barrier after closing the endpoints"))?;
        closed
    } else {
        // The program went on without some ranks, which the control plane's barriers would
        // wait for: the others meet over their endpoints, then close them (those to the ranks
        // gone without a flush). Nothing is in flight between them after that barrier but its
        // own last messages, which the flush of each endpoint sends.
        barrier_without(&mut ep, &gone).map_err(|e| e.in_phase("the closing barrier"))?;
        ep.close_endpoints()
    };
    drop(ep);
    if !closed {
        return Err(commbench_core::Error::Backend {
            backend: "ucx",
            message: format!(
                "rank {}: the endpoints did not close within {:?}",
                rdv.rank(),
                cfg.timeout
            ),
        });
    }
    Ok(out)
}

/// This process is one rank of a run whose ranks met through `rdv`: the tcp rendezvous (a
/// local launch, a launcher, or ranks started by hand, joined by the CLI) or MPI under `mpirun`
/// (so that ucx measures the same processes as the MPI backend).
pub fn run_rank_over<P: Program>(
    rdv: &mut dyn Rendezvous,
    cfg: &UcxConfig,
    p: &P,
) -> Result<P::Output> {
    rank_main(rdv, cfg, p)
}

/// All `n` ranks as threads of this process, meeting over loopback (tests, benches). Every
/// rank's output in rank order, or the error that most likely caused the failure.
pub fn run_threads<P: Program>(n: u32, cfg: &UcxConfig, p: &P) -> Result<Vec<P::Output>> {
    commbench_core::launch::run_threads(n, cfg.timeout, "ucx", |mut boot, _token| {
        rank_main(&mut boot, cfg, p)
    })
}
