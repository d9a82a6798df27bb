//! The mpi backend at launch: under mpirun or srun, MPI starts first, and every backend of
//! `--backend mpi,tcp,shm` is measured in turn between the same processes, the raw ones
//! bootstrapped through MPI. On MPI a transpose is measured twice: packed, as everywhere, and
//! straight from the matrix with a derived vector datatype.

use super::args::{BackendArgs, ClockArg, ThreadsArg};
use super::{launcher_name, options_entry, Backend, Chosen, Job, Ran};
use crate::cli::args::{choice_name, invalid_method};
use crate::cli::fatal::Fatal;
use crate::cli::{live, signals};
use commbench::analysis::assemble::{BackendRun, Outcome};
use commbench::analysis::document::RunConfig;
use commbench::core::launch::RankEnv;
use commbench::core::method::engine::{
    take_collected, Collected, KernelSpec, Measurement, ProgressFn,
};
use commbench::core::method::transpose::Transpose;
use commbench::core::method::MethodConfig;
use commbench::core::{Error, Program};
use commbench_mpi::{Mpi, MpiClock, MpiConfig, ThreadLevel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The mpi backend with its options: the endpoint's, the thread support asked of MPI, and
/// `--clock` and `--mpi-threads` as given (the document's flat keys).
#[derive(Debug)]
pub struct MpiBackend(
    MpiConfig,
    ThreadLevel,
    (Option<ClockArg>, Option<ThreadsArg>),
);

/// This rank of an MPI job, as the backends measured beside MPI meet it.
#[derive(Debug)]
pub struct MpiJob<'a> {
    /// MPI, initialised.
    pub mpi: &'a Mpi,
    /// A token every rank shares (for the tcp bootstrap and shm's segment).
    pub token: String,
    /// The launcher's view of this rank (shm meets its peers by job id and token).
    pub env: Result<RankEnv, String>,
    /// How long a wait may see no progress.
    pub timeout: Duration,
}

const HOW: &str = "for example: mpirun -np 2 commbench pingpong --backend mpi,tcp,shm";

fn init(threads: ThreadLevel) -> Result<Mpi, Fatal> {
    Mpi::init_with(threads).map_err(|e| Fatal::usage(e.reason(), HOW))
}

impl Backend for MpiBackend {
    const NAME: &'static str = "mpi";

    fn configure(a: &BackendArgs, job: &Job) -> Result<Self, Fatal> {
        let clock = match a.clock {
            None | Some(ClockArg::Wtime) => MpiClock::Wtime,
            Some(ClockArg::Monotonic) => MpiClock::Monotonic,
        };
        let threads = match a.mpi_threads {
            None | Some(ThreadsArg::Single) => ThreadLevel::Single,
            Some(ThreadsArg::Funneled) => ThreadLevel::Funneled,
            Some(ThreadsArg::Serialized) => ThreadLevel::Serialized,
            Some(ThreadsArg::Multiple) => ThreadLevel::Multiple,
        };
        Ok(MpiBackend(
            MpiConfig {
                timeout: job.timeout,
                clock,
            },
            threads,
            (a.clock, a.mpi_threads),
        ))
    }

    fn joins_mpi(&self) -> bool {
        true
    }

    fn record(&self, config: &mut RunConfig) {
        let (clock, threads) = self.2;
        config.clock = clock.as_ref().map(choice_name);
        config.mpi_threads = threads.as_ref().map(choice_name);
        let clock = choice_name(&clock.unwrap_or(ClockArg::Wtime));
        let threads = choice_name(&threads.unwrap_or(ThreadsArg::Single));
        config.backend_options.insert(
            Self::NAME.into(),
            options_entry([("clock", clock.into()), ("mpi_threads", threads.into())]),
        );
    }

    fn transport(&self, _ranks: u32) -> commbench::core::method::limits::Transport {
        commbench_mpi::transport()
    }

    fn run<P: Program<Output = ()>>(&self, _job: &Job, prog: &P) -> Result<Ran, Fatal> {
        let mpi = init(self.1)?;
        let result = mpi.run(&self.0, prog);
        Ok(Ran {
            ranks: mpi.size(),
            launcher: "mpi".into(),
            rank: mpi.rank(),
            result,
        })
    }

    fn beside_mpi<P: Program<Output = ()>>(&self, job: &MpiJob<'_>, prog: &P) -> Result<(), Error> {
        job.mpi.run(&self.0, prog)
    }
}

/// Measure `spec` with every backend of `chosen` in turn, between the processes of this MPI
/// job; stops at the first backend that fails.
pub fn run_all<S: KernelSpec + Clone>(
    chosen: &[Chosen],
    job: &Job,
    method: &MethodConfig,
    spec: S,
    progress: &ProgressFn<'_>,
) -> Result<Outcome, Fatal> {
    // MPI starts once for every backend of the list, with the thread support the mpi entry
    // asks for (single when the list has none).
    let threads = chosen
        .iter()
        .find_map(|b| match b {
            Chosen::Mpi(x) => Some(x.1),
            #[allow(unreachable_patterns)]
            _ => None,
        })
        .unwrap_or_default();
    let mpi = init(threads)?;
    let (rank, size) = (mpi.rank(), mpi.size());
    method
        .check(size)
        .map_err(|e| invalid_method(e, format!("mpirun started {size} ranks")))?;
    let token = mpi
        .shared_token(job.timeout)
        .map_err(|e| Fatal::run(e.to_string(), None))?;
    let env = RankEnv::detect(None, None, size)
        .map(|mut e| {
            e.token = Some(token.clone());
            e
        })
        .map_err(|e| e.to_string());
    let mj = MpiJob {
        mpi: &mpi,
        token,
        env,
        timeout: job.timeout,
    };
    // What each backend collected stays where a signal's checkpoint reads it until every
    // backend has run: taken only once no checkpoint can be written any more.
    let mut ran: Vec<Pending> = Vec::new();
    for b in chosen {
        let m = Measurement::new(spec.clone(), method.clone(), Some(progress))
            .with_stop(&signals::STOP);
        live::track(b.name(), &m);
        let result = dispatch!(b, x => x.beside_mpi(&mj, &m));
        let mut failed = result.is_err();
        ran.push((b.name(), m.collected_handle(), result));
        if let (Chosen::Mpi(x), Some(t), false) = (b, job.transpose, failed) {
            let (handle, result) = x.vector_transpose(&mj, t, method, progress);
            failed = result.is_err();
            ran.push((MpiBackend::NAME, handle, result));
        }
        if failed {
            break;
        }
    }
    signals::clear_checkpoint();
    let runs = ran
        .into_iter()
        .map(|(backend, handle, result)| BackendRun {
            backend,
            collected: take_collected(&handle),
            result,
        })
        .collect();
    let launcher = mj
        .env
        .as_ref()
        .ok()
        .map(launcher_name)
        .unwrap_or_else(|| "mpi".into());
    Ok(Outcome {
        ranks: size,
        launcher,
        rank,
        runs,
    })
}

/// A backend's run under MPI: its name, what it collected (still readable by a signal's
/// checkpoint), how it ended.
type Pending = (
    &'static str,
    Arc<Mutex<Collected>>,
    commbench::core::Result<()>,
);

impl MpiBackend {
    /// The transpose straight from the matrix with a derived vector datatype.
    fn vector_transpose(
        &self,
        job: &MpiJob<'_>,
        t: Transpose,
        method: &MethodConfig,
        progress: &ProgressFn<'_>,
    ) -> (Arc<Mutex<Collected>>, commbench::core::Result<()>) {
        let m = Measurement::new(t, method.clone(), Some(progress)).with_stop(&signals::STOP);
        live::track(Self::NAME, &m);
        let result = commbench_mpi::measure_vector(job.mpi, &self.0, &m);
        (m.collected_handle(), result)
    }
}
