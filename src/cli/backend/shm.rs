//! The shm backend at launch: shared memory between processes of one host, started locally
//! (rank 0 creates the segment and hands it to the children), under a launcher (the ranks meet
//! by job id and token), or beside MPI.

use super::args::{BackendArgs, WaitArg};
#[cfg(feature = "mpi")]
use super::mpi::MpiJob;
use super::{cpu_list, cpus_value, local, options_entry, Backend, Job, Ran};
use crate::cli::args::choice_name;
use crate::cli::fatal::Fatal;
use commbench::analysis::document::RunConfig;
use commbench::core::method::limits::Transport;
#[cfg(feature = "mpi")]
use commbench::core::Error;
use commbench::core::Program;
use commbench_shm::{ShmConfig, WaitPolicy};

/// The shm backend with its options, and `--wait` as given (the document's flat key).
#[derive(Debug)]
pub struct Shm(ShmConfig, Option<WaitArg>);

impl Backend for Shm {
    const NAME: &'static str = "shm";

    fn configure(a: &BackendArgs, job: &Job) -> Result<Self, Fatal> {
        let policy = match a.wait {
            None | Some(WaitArg::Spin) => WaitPolicy::Spin,
            Some(WaitArg::SpinYield) => WaitPolicy::SpinYield,
            Some(WaitArg::Futex) => WaitPolicy::Futex,
        };
        Ok(Shm(
            ShmConfig {
                timeout: job.timeout,
                wait: policy,
                cpus: cpu_list(a, job)?,
                ..Default::default()
            },
            a.wait,
        ))
    }

    fn record(&self, config: &mut RunConfig) {
        config.wait = self.1.as_ref().map(choice_name);
        let wait = choice_name(&self.1.unwrap_or(WaitArg::Spin));
        config.backend_options.insert(
            Self::NAME.into(),
            options_entry([("wait", wait.into()), ("cpus", cpus_value(&self.0.cpus))]),
        );
    }

    fn crowding(&self, ranks: u32, cpus: usize) -> Option<String> {
        let spin = self.0.wait == WaitPolicy::Spin;
        (spin && cpus > 0 && ranks as usize > cpus).then(|| {
            let s = if cpus == 1 { "" } else { "s" };
            format!(
                "{ranks} ranks busy-poll on {cpus} CPU{s}: a rank that waits for a CPU delays \
                 every message it sends or relays by a scheduler time slice; --wait futex lets \
                 waiting ranks sleep"
            )
        })
    }

    fn transport(&self, ranks: u32) -> Transport {
        // An impossible rank count is refused with its own message; any size is then moot.
        commbench_shm::transport(ranks, &self.0).unwrap_or_else(|_| Transport {
            max_message: commbench_shm::MAX_MESSAGE,
            ..Transport::unbounded("shm")
        })
    }

    fn run<P: Program<Output = ()>>(&self, job: &Job, prog: &P) -> Result<Ran, Fatal> {
        let env = job.rank_env()?;
        if !env.is_local_launcher() {
            let result = commbench_shm::run_rank(&env, None, &self.0, prog).map(drop);
            return Ok(Ran::joined(&env, result));
        }
        let (segment, vars) = commbench_shm::prepare_local(env.size, &self.0).map_err(|e| {
            Fatal::run(
                format!("cannot create the shared-memory segment: {e}"),
                None,
            )
        })?;
        local::run_local(
            job.timeout,
            env.size,
            &vars,
            || commbench_shm::run_rank(&env, Some(segment), &self.0, prog).map(drop),
            || prog.gone(),
        )
    }

    #[cfg(feature = "mpi")]
    fn beside_mpi<P: Program<Output = ()>>(&self, job: &MpiJob<'_>, prog: &P) -> Result<(), Error> {
        match &job.env {
            Ok(env) => commbench_shm::run_rank(env, None, &self.0, prog),
            Err(e) => Err(Error::Config(e.clone())),
        }
    }
}
