//! The one place that names the backends (design §3).
//!
//! Each backend is a module here implementing [`Backend`]: how it takes its options from the
//! command line and validates them, how it starts its ranks locally or joins a launcher
//! (mpirun, srun, the tcp rendezvous), how it runs beside MPI, and whose clock `commbench
//! timer` characterises. [`Chosen`] is a backend picked on the command line with its
//! validated options. Adding a backend means: its crate, its Cargo feature, a module here,
//! and one line in each of [`BACKENDS`], [`Chosen`], [`dispatch!`] and [`configure`].

// Defined before the modules so that they can use it.
/// `$body` with `$b` bound to the [`Backend`] inside a [`Chosen`].
macro_rules! dispatch {
    ($chosen:expr, $b:ident => $body:expr) => {
        match $chosen {
            #[cfg(feature = "shm")]
            Chosen::Shm($b) => $body,
            #[cfg(feature = "tcp")]
            Chosen::Tcp($b) => $body,
            #[cfg(feature = "sim")]
            Chosen::Sim($b) => $body,
            #[cfg(feature = "mpi")]
            Chosen::Mpi($b) => $body,
        }
    };
}

mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "shm")]
mod shm;
#[cfg(feature = "sim")]
mod sim;
#[cfg(feature = "tcp")]
mod tcp;

use crate::cli::args::BackendArgs;
use crate::cli::fatal::Fatal;
use commbench::core::launch::RankEnv;
use commbench::core::method::engine::Collected;
use commbench::core::method::limits::Transport;
use commbench::core::method::timer::{self, TimerReport};
use commbench::core::method::transpose::Transpose;
use commbench::core::transport::clock;
use commbench::core::{Error, Program};
use std::time::Duration;

#[cfg(feature = "mpi")]
use mpi::MpiJob;

/// A backend name the command line accepts, whether or not it is compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendName {
    /// Name on the command line.
    pub name: &'static str,
    /// Cargo feature that compiles it in.
    pub feature: &'static str,
    /// Whether this build has it.
    pub compiled: bool,
    /// Whether this version of commbench has an implementation at all.
    pub implemented: bool,
    /// One line on what it is.
    pub about: &'static str,
    /// The backend-specific options it takes.
    pub options: &'static [&'static str],
}

/// Every backend commbench knows by name; the first compiled one is the default.
pub const BACKENDS: &[BackendName] = &[
    BackendName {
        name: "shm",
        feature: "shm",
        compiled: cfg!(feature = "shm"),
        implemented: true,
        about: "shared memory between processes on one host (default)",
        options: &["--wait", "--cpus"],
    },
    BackendName {
        name: "tcp",
        feature: "tcp",
        compiled: cfg!(feature = "tcp"),
        implemented: true,
        about: "raw TCP sockets, on loopback or across hosts",
        options: &["--poll", "--bind", "--cpus"],
    },
    BackendName {
        name: "sim",
        feature: "sim",
        compiled: cfg!(feature = "sim"),
        implemented: true,
        about: "simulated NCUBE-style hypercube on a virtual clock",
        options: &["--sim-config"],
    },
    BackendName {
        name: "mpi",
        feature: "mpi",
        compiled: cfg!(feature = "mpi"),
        implemented: true,
        about: "MPI through rsmpi, under mpirun/srun",
        options: &["--clock"],
    },
    BackendName {
        name: "ofi",
        feature: "ofi",
        compiled: false,
        implemented: false,
        about: "libfabric",
        options: &[],
    },
    BackendName {
        name: "ucx",
        feature: "ucx",
        compiled: false,
        implemented: false,
        about: "UCX",
        options: &[],
    },
];

/// How the ranks of a run are found, from the command line.
#[derive(Debug, Clone)]
pub struct Job {
    /// Ranks to start locally, or the size of a run under a launcher.
    pub ranks: u32,
    /// How long a wait may see no progress before it is an error naming the silent peer.
    pub timeout: Duration,
    /// `--rank R --size N`.
    pub manual: Option<(u32, u32)>,
    /// `--rendezvous HOST:PORT`.
    pub rendezvous: Option<String>,
    /// The transpose measured, if the run is one (MPI also measures its vector variant).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub transpose: Option<Transpose>,
}

impl Job {
    /// This process's identity within the run: from commbench's local launcher, `--rank`, or
    /// the environment of mpirun or srun.
    pub fn rank_env(&self) -> Result<RankEnv, Fatal> {
        RankEnv::detect(self.manual, self.rendezvous.as_deref(), self.ranks).map_err(|e| {
            Fatal::usage(
                e.to_string(),
                "check --rank/--size or the launcher's environment",
            )
        })
    }
}

/// What running a program on this process's ranks gave.
#[derive(Debug)]
pub struct Ran {
    /// Ranks in the run.
    pub ranks: u32,
    /// Who started them.
    pub launcher: String,
    /// This process's rank (0 reports the results).
    pub rank: u32,
    /// The run's outcome on this process.
    pub result: Result<(), Error>,
}

impl Ran {
    /// This rank's part of a run that a launcher (or `--rank`) started.
    pub fn joined(env: &RankEnv, result: Result<(), Error>) -> Self {
        Ran {
            ranks: env.size,
            launcher: launcher_name(env),
            rank: env.rank,
            result,
        }
    }
}

/// One backend's part of a run, as rank 0 saw it.
#[derive(Debug)]
pub struct BackendRun {
    /// Backend name.
    pub backend: &'static str,
    /// What rank 0 collected (also from a failed run).
    pub collected: Collected,
    /// The outcome.
    pub result: Result<(), Error>,
}

/// The seam every backend module implements.
pub trait Backend: Sized {
    /// Its name in [`BACKENDS`].
    const NAME: &'static str;

    /// Its options from the command line, validated (only the options its entry in
    /// [`BACKENDS`] lists are ever set).
    fn configure(a: &BackendArgs, timeout: Duration) -> Result<Self, Fatal>;

    /// The number of ranks the backend itself fixes, with a line saying why (the simulator's
    /// hypercube); `None` when the command line or the launcher decides.
    fn fixed_ranks(&self) -> Option<(u32, String)> {
        None
    }

    /// Run `prog` on the ranks this process hosts: start the others locally, or join the
    /// launcher that started this one.
    fn run<P: Program<Output = ()>>(&self, job: &Job, prog: &P) -> Result<Ran, Fatal>;

    /// Run `prog` on this rank of an MPI job, bootstrapped through MPI.
    #[cfg(feature = "mpi")]
    fn beside_mpi<P: Program<Output = ()>>(&self, job: &MpiJob<'_>, prog: &P) -> Result<(), Error> {
        let _ = (job, prog);
        Err(Error::Config(format!(
            "backend `{}` cannot run beside MPI",
            Self::NAME
        )))
    }

    /// What a run of `ranks` ranks can carry and what each of its processes maps, for the
    /// checks before it starts (any size, nothing mapped, unless the backend says otherwise).
    fn transport(&self, ranks: u32) -> Transport {
        let _ = ranks;
        Transport::unbounded(Self::NAME)
    }

    /// The clock of rank 0 on this backend, characterised (seed 000 §3.1).
    fn timer(&self, samples: u64) -> Result<TimerReport, Fatal> {
        Ok(monotonic_timer(
            format!("CLOCK_MONOTONIC (as {} uses it)", Self::NAME),
            samples,
        ))
    }
}

/// This process's CLOCK_MONOTONIC, characterised.
pub fn monotonic_timer(name: String, samples: u64) -> TimerReport {
    timer::characterize_with(
        clock::monotonic_ns,
        name,
        samples,
        clock::monotonic_claimed_resolution_ns().map(|x| x as f64),
    )
}

/// A backend picked on the command line, with its validated options.
#[derive(Debug)]
pub enum Chosen {
    #[cfg(feature = "shm")]
    Shm(shm::Shm),
    #[cfg(feature = "tcp")]
    Tcp(tcp::Tcp),
    #[cfg(feature = "sim")]
    Sim(sim::Sim),
    #[cfg(feature = "mpi")]
    Mpi(mpi::MpiBackend),
}

/// The options of the compiled-in backend `name`.
fn configure(name: &str, a: &BackendArgs, timeout: Duration) -> Result<Chosen, Fatal> {
    let _ = (a, timeout);
    match name {
        #[cfg(feature = "shm")]
        shm::Shm::NAME => shm::Shm::configure(a, timeout).map(Chosen::Shm),
        #[cfg(feature = "tcp")]
        tcp::Tcp::NAME => tcp::Tcp::configure(a, timeout).map(Chosen::Tcp),
        #[cfg(feature = "sim")]
        sim::Sim::NAME => sim::Sim::configure(a, timeout).map(Chosen::Sim),
        #[cfg(feature = "mpi")]
        mpi::MpiBackend::NAME => mpi::MpiBackend::configure(a, timeout).map(Chosen::Mpi),
        other => Err(Fatal::usage(
            format!("backend `{other}` is not compiled in"),
            "see `commbench backends`",
        )),
    }
}

impl Chosen {
    /// The backend's name.
    pub fn name(&self) -> &'static str {
        fn name_of<B: Backend>(_: &B) -> &'static str {
            B::NAME
        }
        dispatch!(self, b => name_of(b))
    }

    /// Whether this is the mpi backend.
    pub fn is_mpi(&self) -> bool {
        #[cfg(feature = "mpi")]
        if let Chosen::Mpi(_) = self {
            return true;
        }
        false
    }

    /// See [`Backend::fixed_ranks`].
    pub fn fixed_ranks(&self) -> Option<(u32, String)> {
        dispatch!(self, b => b.fixed_ranks())
    }

    /// See [`Backend::run`].
    pub fn run<P: Program<Output = ()>>(&self, job: &Job, prog: &P) -> Result<Ran, Fatal> {
        dispatch!(self, b => b.run(job, prog))
    }

    /// See [`Backend::timer`].
    pub fn timer(&self, samples: u64) -> Result<TimerReport, Fatal> {
        dispatch!(self, b => b.timer(samples))
    }

    /// See [`Backend::transport`].
    pub fn transport(&self, ranks: u32) -> Transport {
        dispatch!(self, b => b.transport(ranks))
    }
}

/// Look a backend up by name.
pub fn lookup(name: &str) -> Option<&'static BackendName> {
    BACKENDS.iter().find(|b| b.name == name)
}

/// Resolve one `--backend` name (or the default) to a compiled-in backend, or a usage error
/// saying how to get it.
pub fn resolve(name: Option<&str>) -> Result<&'static BackendName, Fatal> {
    let b = match name {
        None => BACKENDS
            .iter()
            .take(3)
            .find(|b| b.compiled)
            .ok_or_else(|| {
                Fatal::usage(
                    "this build has no backend compiled in",
                    "rebuild with the default features: cargo build --release",
                )
            })?,
        Some(n) => lookup(n).ok_or_else(|| {
            let names: Vec<&str> = BACKENDS.iter().map(|b| b.name).collect();
            Fatal::usage(
                format!("unknown backend `{n}`"),
                format!("choose one of: {}", names.join(", ")),
            )
        })?,
    };
    match (b.compiled, b.implemented) {
        (true, _) => Ok(b),
        (false, true) => Err(Fatal::usage(
            format!("backend `{}` is not compiled into this commbench", b.name),
            format!(
                "rebuild with `cargo build --release --features {}`",
                b.feature
            ),
        )),
        (false, false) => Err(Fatal::usage(
            format!(
                "backend `{}` ({}) is not available in this version of commbench",
                b.name, b.about
            ),
            "`commbench backends` lists the backends this build has",
        )),
    }
}

/// `--backend`, a name or a comma-separated list of distinct names.
fn names(spec: Option<&str>) -> Result<Vec<&'static BackendName>, Fatal> {
    let Some(spec) = spec else {
        return Ok(vec![resolve(None)?]);
    };
    let mut out: Vec<&'static BackendName> = Vec::new();
    for name in spec.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(Fatal::usage(
                format!("--backend {spec}: empty name in the list"),
                "for example --backend mpi,tcp,shm",
            ));
        }
        let b = resolve(Some(name))?;
        if out.contains(&b) {
            return Err(Fatal::usage(
                format!("--backend {spec}: `{}` is listed twice", b.name),
                "list each backend once",
            ));
        }
        out.push(b);
    }
    if out.len() > 1 && out.iter().any(|b| b.name == "sim") {
        return Err(Fatal::usage(
            "the simulator cannot be measured beside real processes",
            "run --backend sim on its own",
        ));
    }
    Ok(out)
}

/// Every backend-specific option given must belong to one of the chosen backends.
fn check_options(a: &BackendArgs, chosen: &[&BackendName]) -> Result<(), Fatal> {
    for flag in a.given() {
        if chosen.iter().any(|b| b.options.contains(&flag)) {
            continue;
        }
        let owners: Vec<&str> = BACKENDS
            .iter()
            .filter(|b| b.options.contains(&flag))
            .map(|b| b.name)
            .collect();
        let which = match owners.as_slice() {
            [one] => format!("the {one} backend"),
            many => format!("the {} backends", many.join(" and ")),
        };
        return Err(Fatal::usage(
            format!("{flag} applies to {which} only"),
            format!("add --backend {} or drop it", owners.join(" or --backend ")),
        ));
    }
    Ok(())
}

/// The backends of `--backend` with their options, validated.
pub fn choose(a: &BackendArgs, timeout: Duration) -> Result<Vec<Chosen>, Fatal> {
    let chosen = names(a.backend.as_deref())?;
    check_options(a, &chosen)?;
    chosen
        .iter()
        .map(|b| configure(b.name, a, timeout))
        .collect()
}

/// The one backend `commbench timer --backend NAME` characterises, with the options of the
/// command that apply to it (`--sim-config` to the simulator; elsewhere it is ignored).
pub fn for_timer(name: &str, sim_config: Option<String>) -> Result<Chosen, Fatal> {
    let b = resolve(Some(name))?;
    let a = BackendArgs {
        sim_config: sim_config.filter(|_| b.options.contains(&"--sim-config")),
        ..BackendArgs::default()
    };
    configure(b.name, &a, Duration::from_secs(30))
}

/// `--cpus` as a list of CPU numbers (empty: no pinning).
#[cfg(any(feature = "tcp", feature = "shm"))]
fn cpu_list(a: &BackendArgs) -> Result<Vec<usize>, Fatal> {
    let Some(c) = &a.cpus else {
        return Ok(Vec::new());
    };
    let cpus = commbench::spec::parse_cpu_list(c).map_err(|e| {
        Fatal::usage(
            format!("--cpus: {e}"),
            "for example --cpus 0,1 or --cpus 0-3",
        )
    })?;
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(bad) = cpus.iter().find(|&&c| c >= 1024) {
        return Err(Fatal::usage(
            format!("--cpus: CPU {bad} does not exist"),
            format!("this host has {online} CPUs"),
        ));
    }
    Ok(cpus)
}

/// The launcher's name as the result document records it.
pub fn launcher_name(env: &RankEnv) -> String {
    serde_json::to_value(env.launcher)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// What a run gave on this process: every backend's part, as rank 0 saw it.
#[derive(Debug)]
pub struct Outcome {
    /// Ranks in the run.
    pub ranks: u32,
    /// Who started them.
    pub launcher: String,
    /// This process's rank (0 reports the results).
    pub rank: u32,
    /// Each backend's part, in order.
    pub runs: Vec<BackendRun>,
}
