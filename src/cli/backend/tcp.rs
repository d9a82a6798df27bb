//! The tcp backend at launch: raw TCP sockets between processes started locally (rank 0
//! holds the rendezvous on loopback or `--bind`), across hosts under a launcher or by hand
//! (`--rendezvous` and a shared token), or beside MPI (bootstrapped through MPI).

#[cfg(feature = "mpi")]
use super::mpi::MpiJob;
use super::{cpu_list, local, Backend, Job, Ran};
use crate::cli::args::BackendArgs;
use crate::cli::fatal::Fatal;
use commbench::core::launch::rendezvous::Bootstrap;
use commbench::core::launch::{self as cl, RankEnv};
#[cfg(feature = "mpi")]
use commbench::core::Error;
use commbench::core::Program;
use commbench_tcp::TcpConfig;
use std::time::Duration;

/// The tcp backend with its options.
#[derive(Debug)]
pub struct Tcp(TcpConfig);

impl Backend for Tcp {
    const NAME: &'static str = "tcp";

    fn configure(a: &BackendArgs, timeout: Duration) -> Result<Self, Fatal> {
        Ok(Tcp(TcpConfig {
            poll: a.poll,
            timeout,
            bind_host: a.bind.clone(),
            cpus: cpu_list(a)?,
        }))
    }

    fn run<P: Program<Output = ()>>(&self, job: &Job, prog: &P) -> Result<Ran, Fatal> {
        let env = job.rank_env()?;
        if env.is_local_launcher() {
            self.run_local(job, env, prog)
        } else {
            self.join(env, prog)
        }
    }

    #[cfg(feature = "mpi")]
    fn beside_mpi<P: Program<Output = ()>>(&self, job: &MpiJob<'_>, prog: &P) -> Result<(), Error> {
        let mut r = job.mpi.rendezvous(job.timeout)?;
        commbench_tcp::run_rank_over(&mut r, &job.token, &self.0, prog)
    }
}

impl Tcp {
    /// Under a launcher or by hand: meet the others at the rendezvous with the shared token.
    fn join<P: Program<Output = ()>>(&self, env: RankEnv, prog: &P) -> Result<Ran, Fatal> {
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
        let result = commbench_tcp::run_rank(&env, &self.0, prog).map(drop);
        Ok(Ran::joined(&env, result))
    }

    /// Locally: hold the rendezvous here, start the other ranks with its address and a fresh
    /// token, run rank 0.
    fn run_local<P: Program<Output = ()>>(
        &self,
        job: &Job,
        mut env: RankEnv,
        prog: &P,
    ) -> Result<Ran, Fatal> {
        let token = cl::new_token().map_err(|e| Fatal::run(e.to_string(), None))?;
        let host = self.0.bind_host.as_deref().unwrap_or("127.0.0.1");
        let listener = Bootstrap::listen(&format!("{host}:0"))
            .map_err(|e| Fatal::run(format!("cannot hold the rendezvous: {e}"), None))?;
        let addr = listener.local_addr().to_string();
        env.rendezvous = Some(addr.clone());
        env.token = Some(token.clone());
        let vars = vec![
            (cl::ENV_RENDEZVOUS.to_string(), addr),
            (cl::ENV_TOKEN.to_string(), token),
        ];
        local::run_local(job.timeout, env.size, &vars, || {
            commbench_tcp::run_rank_with_listener(listener, &env, &self.0, prog).map(drop)
        })
    }
}
