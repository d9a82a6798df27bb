//! Start-up: [`OfiConfig`], and the ways a rank comes to run a [`Program`] on a libfabric
//! endpoint. Every way opens the endpoint, exchanges the endpoints' addresses over the
//! control plane that started the ranks (the tcp rendezvous, or MPI under mpirun), runs the
//! program, and ends with a barrier on that control plane so that no rank closes its endpoint
//! while another still runs (over the endpoint, between the ranks still live, when the program
//! went on without some).

use crate::endpoint::OfiEndpoint;
use commbench_core::launch::rendezvous::Rendezvous;
use commbench_core::transport::control::barrier_without;
use commbench_core::transport::Program;
use commbench_core::Result;
use std::time::Duration;

/// How an ofi endpoint runs.
#[derive(Debug, Clone)]
pub struct OfiConfig {
    /// The libfabric provider (`shm`, `tcp;ofi_rxm`, `udp;ofi_rxd`, ...); `None`: libfabric's
    /// first choice for a tagged RDM endpoint (the `FI_PROVIDER` variable narrows it).
    pub provider: Option<String>,
    /// How long a wait (or a bootstrap step) may see no completion before it is an error.
    pub timeout: Duration,
    /// CPUs to pin ranks to: rank `i` goes to `cpus[i % len]`; empty: no pinning.
    pub cpus: Vec<usize>,
    /// Send messages below the provider's inject size with `fi_tinject`, as fi_pingpong does.
    pub inject: bool,
    /// Register buffers even when the provider does not ask for `FI_MR_LOCAL`.
    pub register: bool,
    /// Receive-queue entries to ask the provider for (0: its default): the most receives
    /// that can be posted at once.
    pub rx_size: usize,
}

impl Default for OfiConfig {
    fn default() -> Self {
        OfiConfig {
            provider: None,
            timeout: Duration::from_secs(30),
            cpus: Vec::new(),
            inject: true,
            register: false,
            rx_size: 0,
        }
    }
}

/// Open the endpoint, exchange addresses over `rdv`, run `p`, and meet the others at the end.
fn rank_main<P: Program>(rdv: &mut dyn Rendezvous, cfg: &OfiConfig, p: &P) -> Result<P::Output> {
    let node = rdv.local_ip().map(|ip| ip.to_string());
    let mut ep = OfiEndpoint::open(rdv.rank(), rdv.size(), node, cfg)
        .map_err(|e| e.in_phase("opening the libfabric endpoint"))?;
    let names = rdv
        .allgather(&ep.name()?)
        .map_err(|e| e.in_phase("exchanging endpoint addresses"))?;
    ep.connect(&names)
        .map_err(|e| e.in_phase("inserting the endpoint addresses"))?;
    rdv.barrier().map_err(|e| e.in_phase("bootstrap"))?;
    let out = p.run(&mut ep)?;
    closing_barrier(rdv, &mut ep)?;
    drop(ep);
    Ok(out)
}

/// The barrier before the endpoint closes: on the control plane that started the ranks, or,
/// when the program went on without some ranks ([`commbench_core::Endpoint::forget`]),
/// between the others only, over the endpoint (the control plane's barrier would wait for the
/// ranks gone).
fn closing_barrier(rdv: &mut dyn Rendezvous, ep: &mut OfiEndpoint) -> Result<()> {
    if ep.gone().is_empty() {
        return rdv.barrier().map_err(|e| e.in_phase("the closing barrier"));
    }
    let gone = ep.gone().to_vec();
    barrier_without(ep, &gone).map_err(|e| e.in_phase("the closing barrier"))
}

/// This process is one rank of a run whose ranks met through `rdv`: the tcp rendezvous (a
/// local launch, a launcher, or ranks started by hand, joined by the CLI) or MPI under `mpirun`
/// (so that ofi measures the same processes as the MPI backend).
pub fn run_rank_over<P: Program>(
    rdv: &mut dyn Rendezvous,
    cfg: &OfiConfig,
    p: &P,
) -> Result<P::Output> {
    rank_main(rdv, cfg, p)
}

/// All `n` ranks as threads of this process, meeting over loopback (tests, benches). Every
/// rank's output in rank order, or the error that most likely caused the failure.
pub fn run_threads<P: Program>(n: u32, cfg: &OfiConfig, p: &P) -> Result<Vec<P::Output>> {
    commbench_core::launch::run_threads(n, cfg.timeout, "ofi", |mut boot, _token| {
        rank_main(&mut boot, cfg, p)
    })
}
