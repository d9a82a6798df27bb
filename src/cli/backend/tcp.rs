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
use commbench::core::method::limits::Transport;
#[cfg(feature = "mpi")]
use commbench::core::Error;
use commbench::core::Program;
use commbench_tcp::TcpConfig;

/// The tcp backend with its options.
#[derive(Debug)]
pub struct Tcp(TcpConfig);

impl Backend for Tcp {
    const NAME: &'static str = "tcp";

    fn configure(a: &BackendArgs, job: &Job) -> Result<Self, Fatal> {
        if let Some(r) = &job.rendezvous {
            check_rendezvous(r, job)?;
        }
        if let Some(host) = &a.bind {
            check_bind(host)?;
        }
        Ok(Tcp(TcpConfig {
            poll: a.poll,
            timeout: job.timeout,
            bind_host: a.bind.clone(),
            cpus: cpu_list(a, job)?,
        }))
    }

    fn transport(&self, _ranks: u32) -> Transport {
        commbench_tcp::transport()
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

/// `--rendezvous HOST:PORT`, before anything starts: a run across hosts (a local run holds
/// its own rendezvous on loopback), a port other ranks can be told, a host that resolves.
fn check_rendezvous(addr: &str, job: &Job) -> Result<(), Fatal> {
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

/// `--bind HOST`, before anything starts: an address of this host that can be listened on.
fn check_bind(host: &str) -> Result<(), Fatal> {
    std::net::TcpListener::bind((host, 0)).map(drop).map_err(|e| {
        Fatal::usage(
            format!("--bind {host}: cannot listen there: {e}"),
            "give the address of one of this host's interfaces (e.g. --bind 127.0.0.1), or drop --bind",
        )
    })
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
        // Before any connection: a token that could be guessed, an address no rank can use.
        use commbench::core::launch::rendezvous::{self as rdv, MAX_TOKEN_LEN, MIN_TOKEN_LEN};
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
