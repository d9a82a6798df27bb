//! The tcp backend at launch: raw TCP sockets between processes started locally (rank 0
//! holds the rendezvous on loopback or `--bind`), across hosts under a launcher or by hand
//! (`--rendezvous` and a shared token), or beside MPI (bootstrapped through MPI).

use super::args::BackendArgs;
#[cfg(feature = "mpi")]
use super::mpi::MpiJob;
use super::{cpu_list, cpus_value, joining, local, options_entry, Backend, Job, Ran};
use crate::cli::fatal::Fatal;
use commbench::analysis::document::RunConfig;
use commbench::core::launch::RankEnv;
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
            joining::check_rendezvous(r, job)?;
        }
        if let Some(host) = &a.bind {
            check_bind(host)?;
        }
        Ok(Tcp(TcpConfig {
            poll: a.poll,
            timeout: job.timeout,
            bind_host: a.bind.clone(),
            cpus: cpu_list(a, job)?,
            ..TcpConfig::default()
        }))
    }

    fn transport(&self, _ranks: u32) -> Transport {
        commbench_tcp::transport()
    }

    fn record(&self, config: &mut RunConfig) {
        config.poll = self.0.poll;
        let bind = self
            .0
            .bind_host
            .clone()
            .map_or(serde_json::Value::Null, Into::into);
        config.backend_options.insert(
            Self::NAME.into(),
            options_entry([
                ("poll", self.0.poll.into()),
                ("bind", bind),
                ("cpus", cpus_value(&self.0.cpus)),
            ]),
        );
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
        joining::check_join(&env)?;
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
        let host = self.0.bind_host.as_deref().unwrap_or("127.0.0.1");
        let (listener, vars) = joining::hold_rendezvous(&mut env, host)?;
        local::run_local(
            job.timeout,
            env.size,
            &vars,
            || commbench_tcp::run_rank_with_listener(listener, &env, &self.0, prog).map(drop),
            || prog.gone(),
        )
    }
}
