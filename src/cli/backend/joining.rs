//! Joining a run across hosts with the tcp rendezvous (the tcp, ofi and ucx backends): the
//! checks of `--rendezvous` and of the run token made before anything connects, and the start
//! of a backend whose ranks meet over the rendezvous ([`over_rendezvous`]).

use super::Job;
use crate::cli::fatal::Fatal;
use commbench::core::launch::rendezvous::{
    self as rdv, Bootstrap, Listener, MAX_TOKEN_LEN, MIN_TOKEN_LEN,
};
use commbench::core::launch::{self as cl, RankEnv};
#[cfg(any(feature = "ofi", feature = "ucx"))]
use {
    super::{local, Ran},
    commbench::core::launch::rendezvous::Rendezvous,
};

/// `--rendezvous HOST:PORT`, before anything starts: a run across hosts (a local run holds
/// its own rendezvous on loopback), a port other ranks can be told, a host that resolves.
pub fn check_rendezvous(addr: &str, job: &Job) -> Result<(), Fatal> {
    const EXAMPLE: &str = "rank 0's host and a free port on it, e.g. --rendezvous node1:7000";
    if job.rank_env()?.is_local_launcher() {
        return Err(Fatal::usage(
            "--rendezvous is not used by a local run: rank 0 holds its rendezvous on loopback",
            "for a run across hosts give each rank --rank R --ranks N (or start them with mpirun or srun); locally, drop --rendezvous",
        ));
    }
    commbench::core::launch::rendezvous::check_address(addr)
        .map_err(|e| Fatal::usage(format!("--rendezvous: {}", e.reason()), EXAMPLE))?;
    let bad = |why: String| Fatal::usage(format!("--rendezvous {addr}: {why}"), EXAMPLE);
    match std::net::ToSocketAddrs::to_socket_addrs(addr) {
        Ok(mut a) => match a.next() {
            Some(_) => Ok(()),
            None => Err(bad("the host resolves to no address".into())),
        },
        Err(e) => Err(bad(format!("cannot resolve the host: {e}"))),
    }
}

/// A rank that joins a run under a launcher or by hand: it has a rendezvous address and a run
/// token that cannot be guessed, before any connection.
pub fn check_join(env: &RankEnv) -> Result<(), Fatal> {
    if env.rendezvous.is_none() {
        return Err(Fatal::usage(
                format!("rank {} of {} has no rendezvous address", env.rank, env.size),
                "give every rank --rendezvous HOST:PORT (rank 0's host and a free port) or set COMMBENCH_RENDEZVOUS",
            ));
    }
    if env.token.is_none() {
        return Err(Fatal::usage(
                "the run has no token",
                "export COMMBENCH_TOKEN=<the same secret on every rank> (e.g. mpirun -x COMMBENCH_TOKEN)",
            ));
    }
    // Before any connection: a token that could be guessed, an address no rank can use.
    if let Some(t) = env
        .token
        .as_deref()
        .filter(|t| rdv::check_token(t).is_err())
    {
        return Err(Fatal::usage(
                format!(
                    "the run token (COMMBENCH_TOKEN) has {} bytes; {MIN_TOKEN_LEN} to {MAX_TOKEN_LEN} are needed",
                    t.len()
                ),
                "make one with `head -c 24 /dev/urandom | base64` and export it as COMMBENCH_TOKEN on every rank",
            ));
    }
    if let Some(Err(e)) = env.rendezvous.as_deref().map(rdv::check_address) {
        return Err(Fatal::usage(
                e.reason(),
                "give every rank --rendezvous HOST:PORT (or COMMBENCH_RENDEZVOUS): rank 0's host and the port it listens on",
            ));
    }
    Ok(())
}

/// This process's rank of a backend whose ranks meet over the tcp rendezvous, exchange their
/// addresses there and run (`rank`, given the rendezvous; the ofi and ucx backends): joined under
/// a launcher or by hand (`--rank/--ranks/--rendezvous` and the shared token), or as rank 0 of a
/// local launch, which holds the rendezvous on loopback with a fresh token and starts the others.
#[cfg(any(feature = "ofi", feature = "ucx"))]
pub fn over_rendezvous(
    job: &Job,
    rank: impl FnOnce(&mut dyn Rendezvous) -> commbench::core::Result<()>,
    gone: impl FnOnce() -> Vec<u32>,
) -> Result<Ran, Fatal> {
    let mut env = job.rank_env()?;
    if !env.is_local_launcher() {
        check_join(&env)?;
        let result = env.checked_token().and_then(|_| {
            let mut boot =
                Bootstrap::from_env(&env, job.timeout).map_err(|e| e.in_phase("bootstrap"))?;
            rank(&mut boot)
        });
        return Ok(Ran::joined(&env, result));
    }
    let (listener, vars) = hold_rendezvous(&mut env, "127.0.0.1")?;
    local::run_local(
        job.timeout,
        env.size,
        &vars,
        || {
            let mut boot = listener.accept_as_rank0(&env, job.timeout)?;
            rank(&mut boot)
        },
        gone,
    )
}

/// Rank 0 of a local launch holds the rendezvous on `host` with a fresh token: the listener,
/// and the variables that tell the ranks it starts where to meet and with what token (`env`
/// gets both too).
pub fn hold_rendezvous(
    env: &mut RankEnv,
    host: &str,
) -> Result<(Listener, Vec<(String, String)>), Fatal> {
    let token = cl::new_token().map_err(|e| Fatal::run(e.to_string(), None))?;
    let listener = Bootstrap::listen(&format!("{host}:0"))
        .map_err(|e| Fatal::run(format!("cannot hold the rendezvous: {e}"), None))?;
    let addr = listener.local_addr().to_string();
    env.rendezvous = Some(addr.clone());
    env.token = Some(token.clone());
    let vars = vec![
        (cl::ENV_RENDEZVOUS.to_string(), addr),
        (cl::ENV_TOKEN.to_string(), token),
    ];
    Ok((listener, vars))
}
