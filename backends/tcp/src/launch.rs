//! Start-up: [`TcpConfig`], and the ways a rank comes to run a [`Program`] over TCP
//! connections made on demand (all ranks as threads of one process, one rank of a multi-process run, or one
//! rank over another rendezvous), each ending with the goodbye exchange.

use crate::TcpEndpoint;
use commbench_core::launch::rendezvous::{self, Bootstrap, Listener, Rendezvous};
use commbench_core::launch::RankEnv;
use commbench_core::transport::Program;
use commbench_core::Result;
use std::time::Duration;

/// How a TCP endpoint runs.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Busy-poll (non-blocking sockets, spin on `recv(MSG_DONTWAIT)`) instead of sleeping in
    /// the kernel while waiting.
    pub poll: bool,
    /// How long a wait (or a bootstrap step) may see no completion before it is an error.
    pub timeout: Duration,
    /// Interface (host name or address) to listen on for data connections; by default the
    /// one this rank reached the rendezvous from (`127.0.0.1` for [`run_threads`]).
    pub bind_host: Option<String>,
    /// CPUs to pin ranks to: rank `i` goes to `cpus[i % len]`; empty: no pinning.
    pub cpus: Vec<usize>,
    /// Most data connections a rank keeps open at once (at least 2); `None`: as many as
    /// `RLIMIT_NOFILE` leaves (the crate documentation).
    pub max_open: Option<usize>,
    /// Ranks of the run in this process, which share its descriptors (1 but for
    /// [`run_threads`], which sets it).
    pub ranks_here: u32,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            poll: false,
            timeout: Duration::from_secs(30),
            bind_host: None,
            cpus: Vec::new(),
            max_open: None,
            ranks_here: 1,
        }
    }
}

/// Build the endpoint, run `p`, and end with the goodbye exchange.
fn rank_main<P: Program>(
    mut boot: Bootstrap,
    token: &str,
    cfg: &TcpConfig,
    p: &P,
) -> Result<P::Output> {
    let ep = TcpEndpoint::connect(&mut boot, token, cfg)?;
    drop(boot);
    run_on(ep, p)
}

/// Run `p` on `ep` and end with the goodbye exchange.
fn run_on<P: Program>(mut ep: TcpEndpoint, p: &P) -> Result<P::Output> {
    let out = p.run(&mut ep)?;
    ep.finish()?;
    Ok(out)
}

/// This process is one rank of a run whose ranks met through another rendezvous (MPI under
/// `mpirun`, so that tcp measures the same processes as the MPI backend): build the mesh over
/// `rdv`, run `p`, close cleanly. Every data connection proves `token` both ways (the
/// handshake of [`commbench_core::launch::rendezvous`]).
pub fn run_rank_over<P: Program>(
    rdv: &mut dyn Rendezvous,
    token: &str,
    cfg: &TcpConfig,
    p: &P,
) -> Result<P::Output> {
    rendezvous::check_token(token)?;
    run_on(TcpEndpoint::connect(rdv, token, cfg)?, p)
}

/// All `n` ranks as threads of this process, connected over loopback (tests, conformance,
/// benches). Every rank's output in rank order, or the error that most likely caused the
/// failure (an error other than a lost peer, when there is one).
pub fn run_threads<P: Program>(n: u32, cfg: &TcpConfig, p: &P) -> Result<Vec<P::Output>> {
    let mut cfg = cfg.clone();
    cfg.ranks_here = n.max(1);
    if cfg.bind_host.is_none() {
        cfg.bind_host = Some("127.0.0.1".into());
    }
    commbench_core::launch::run_threads(n, cfg.timeout, "tcp", |boot, token| {
        rank_main(boot, token, &cfg, p)
    })
}

/// This process is one rank of a multi-process run (a child of the local launcher, or under
/// mpirun/srun): bootstrap through `env.rendezvous` with `env.token` (rank 0 binds it), build
/// the mesh, run `p`, and close cleanly.
pub fn run_rank<P: Program>(env: &RankEnv, cfg: &TcpConfig, p: &P) -> Result<P::Output> {
    let token = env.checked_token()?;
    let boot = Bootstrap::from_env(env, cfg.timeout).map_err(|e| e.in_phase("bootstrap"))?;
    rank_main(boot, token, cfg, p)
}

/// Rank 0 of a local launch: `listener` was bound (with [`Bootstrap::listen`]) before the
/// other ranks were spawned with its address; accept them, build the mesh, run `p`, close.
pub fn run_rank_with_listener<P: Program>(
    listener: Listener,
    env: &RankEnv,
    cfg: &TcpConfig,
    p: &P,
) -> Result<P::Output> {
    let boot = listener.accept_as_rank0(env, cfg.timeout)?;
    rank_main(boot, env.checked_token()?, cfg, p)
}
