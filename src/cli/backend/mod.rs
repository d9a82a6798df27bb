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
            #[cfg(feature = "ofi")]
            Chosen::Ofi($b) => $body,
            #[cfg(feature = "ucx")]
            Chosen::Ucx($b) => $body,
        }
    };
}

pub mod args;
#[cfg(any(feature = "tcp", feature = "ofi", feature = "ucx"))]
mod joining;
mod local;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "ofi")]
mod ofi;
#[cfg(feature = "shm")]
mod shm;
#[cfg(feature = "sim")]
mod sim;
#[cfg(feature = "tcp")]
mod tcp;
#[cfg(feature = "ucx")]
mod ucx;

use crate::cli::args::Given;
use crate::cli::fatal::Fatal;
use crate::cli::{live, signals};
use args::BackendArgs;
use commbench::analysis::assemble::{BackendRun, Outcome};
use commbench::analysis::document::RunConfig;
use commbench::core::launch::{Launcher, RankEnv};
use commbench::core::method::engine::{KernelSpec, Measurement, ProgressFn};
use commbench::core::method::limits::Transport;
use commbench::core::method::timer::{self, TimerReport};
use commbench::core::method::transpose::Transpose;
use commbench::core::method::MethodConfig;
use commbench::core::transport::{clock, BackendInfo};
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
    /// The options of the run (see [`RUN_OPTIONS`]) it uses when it runs on its own.
    pub run_options: &'static [&'static str],
}

/// The options of a run that not every backend uses: how many ranks, how they are found, how
/// long a wait may last. Beside MPI only `--timeout` is used: the launcher starts the ranks and
/// MPI connects them.
pub const RUN_OPTIONS: &[&str] = &["--ranks", "--rank", "--rendezvous", "--timeout"];

/// The options of a run that the backends measured beside MPI use.
const BESIDE_MPI: &[&str] = &["--timeout"];

/// Every backend commbench knows by name; the first compiled one is the default.
pub const BACKENDS: &[BackendName] = &[
    BackendName {
        name: "shm",
        feature: "shm",
        compiled: cfg!(feature = "shm"),
        implemented: true,
        about: "shared memory between processes on one host (default)",
        options: &["--wait", "--cpus"],
        run_options: &["--ranks", "--rank", "--timeout"],
    },
    BackendName {
        name: "tcp",
        feature: "tcp",
        compiled: cfg!(feature = "tcp"),
        implemented: true,
        about: "raw TCP sockets, on loopback or across hosts",
        options: &["--poll", "--bind", "--cpus"],
        run_options: &["--ranks", "--rank", "--rendezvous", "--timeout"],
    },
    BackendName {
        name: "sim",
        feature: "sim",
        compiled: cfg!(feature = "sim"),
        implemented: true,
        about: "simulated NCUBE-style hypercube on a virtual clock",
        options: &["--sim-config"],
        run_options: &[],
    },
    BackendName {
        name: "mpi",
        feature: "mpi",
        compiled: cfg!(feature = "mpi"),
        implemented: true,
        about: "MPI through rsmpi, under mpirun/srun",
        options: &["--clock", "--mpi-threads"],
        run_options: &["--timeout"],
    },
    BackendName {
        name: "ofi",
        feature: "ofi",
        compiled: cfg!(feature = "ofi"),
        implemented: true,
        about: "libfabric, a provider's tagged RDM endpoint",
        options: &["--ofi-provider", "--cpus"],
        run_options: &["--ranks", "--rank", "--rendezvous", "--timeout"],
    },
    BackendName {
        name: "ucx",
        feature: "ucx",
        compiled: cfg!(feature = "ucx"),
        implemented: true,
        about: "UCX, UCP workers on the tag API",
        options: &["--ucx-tls", "--cpus"],
        run_options: &["--ranks", "--rank", "--rendezvous", "--timeout"],
    },
];

/// How the ranks of a run are found, from the command line.
#[derive(Debug, Clone)]
pub struct Job {
    /// Ranks to start locally, or the size of a run under a launcher.
    pub ranks: u32,
    /// How long a wait may see no progress before it is an error naming the silent peer.
    pub timeout: Duration,
    /// `--rank R --ranks N`.
    pub manual: Option<(u32, u32)>,
    /// `--rendezvous HOST:PORT`.
    pub rendezvous: Option<String>,
    /// The transpose measured, if the run is one (MPI also measures its vector variant).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub transpose: Option<Transpose>,
    /// The receives a rank keeps posted at once, at least (seed 004's posted queue); 0 when
    /// only a few.
    #[cfg_attr(not(feature = "ofi"), allow(dead_code))]
    pub posted_receives: u64,
    /// Whether the run posts receives of any source or any tag.
    #[cfg_attr(not(feature = "ofi"), allow(dead_code))]
    pub wildcards: bool,
}

impl Job {
    /// This process's identity within the run: from commbench's local launcher, `--rank`, or
    /// the environment of mpirun or srun.
    pub fn rank_env(&self) -> Result<RankEnv, Fatal> {
        RankEnv::detect(self.manual, self.rendezvous.as_deref(), self.ranks).map_err(|e| {
            Fatal::usage(
                e.reason(),
                "check --rank/--ranks or the launcher's environment",
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

/// The seam every backend module implements.
pub trait Backend: Sized {
    /// Its name in [`BACKENDS`].
    const NAME: &'static str;

    /// Its options from the command line, validated against this host and the run's `job`
    /// (only the options its entry in [`BACKENDS`] lists are ever set).
    fn configure(a: &BackendArgs, job: &Job) -> Result<Self, Fatal>;

    /// The number of ranks the backend itself fixes, with a line saying why (the simulator's
    /// hypercube); `None` when the command line or the launcher decides.
    fn fixed_ranks(&self) -> Option<(u32, String)> {
        None
    }

    /// Who starts the ranks, as the document names it, when the backend starts them itself
    /// (the simulator); `None` when commbench's local launcher or an external one does.
    fn own_launcher(&self) -> Option<&'static str> {
        None
    }

    /// A note for the user when `ranks` local ranks on `cpus` CPUs will measure the host's
    /// scheduler rather than the transport (ranks that busy-wait, more of them than CPUs).
    fn crowding(&self, ranks: u32, cpus: usize) -> Option<String> {
        let _ = (ranks, cpus);
        None
    }

    /// The hypercube the transport routes over itself, forwarding through intermediate nodes
    /// (the simulator); `None` when every rank reaches every other directly
    /// (`Endpoint::hypercube`).
    fn hypercube(&self) -> Option<Cube> {
        None
    }

    /// How to make room for a longer posted receive queue than this backend holds (seed
    /// 004's posted queue), for the hint of the check that refuses one.
    fn posted_queue_hint(&self) -> &'static str {
        "shorter queues (--lengths)"
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

    /// What a run of `method` over `points` (a size per point, `trips(size)` messages an
    /// iteration) asks of this backend beyond the checks every backend gets: a simulated
    /// machine's clock must hold it (nothing to check elsewhere).
    fn check_run(
        &self,
        method: &MethodConfig,
        points: &[u64],
        trips: &dyn Fn(u64) -> u64,
    ) -> Result<(), Fatal> {
        let _ = (method, points, trips);
        Ok(())
    }

    /// Whether this backend's endpoints have caches a cold-cache run can empty (see core's
    /// `Endpoint::models_caches`, which its endpoints answer alike); a backend that models no
    /// memory has none, and a cold-cache run writes no pool there.
    fn models_caches(&self) -> bool {
        true
    }

    /// Whether the backend runs only under an MPI launcher, MPI started first (the mpi
    /// backend); every other backend can also be measured beside it.
    fn joins_mpi(&self) -> bool {
        false
    }

    /// What `commbench backends` says this backend finds on this host (its library's
    /// providers or transports), when it has something to say.
    fn found_here() -> Option<String> {
        None
    }

    /// Record the options this backend runs with in the result document's configuration:
    /// its entry of `backend_options` (the values it runs with, whether given or defaulted),
    /// and the flat keys earlier documents already carried for it.
    fn record(&self, config: &mut RunConfig);

    /// The clock of rank 0 on this backend, characterised (seed 000 §3.1).
    fn timer(&self, samples: u64) -> Result<TimerReport, Fatal> {
        Ok(monotonic_timer(
            format!("CLOCK_MONOTONIC (as {} uses it)", Self::NAME),
            samples,
        ))
    }
}

/// A hypercube a transport routes over itself ([`Backend::hypercube`]).
#[derive(Debug, Clone, Copy)]
pub struct Cube {
    /// Its dimension.
    pub dimensions: u32,
    /// The ranks that run a program there.
    pub ranks: u32,
    /// How to get a larger one, for a hint.
    pub larger: &'static str,
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
    #[cfg(feature = "ofi")]
    Ofi(ofi::Ofi),
    #[cfg(feature = "ucx")]
    Ucx(ucx::Ucx),
}

/// The options of the compiled-in backend `name`.
fn configure(name: &str, a: &BackendArgs, job: &Job) -> Result<Chosen, Fatal> {
    let _ = (a, job);
    match name {
        #[cfg(feature = "shm")]
        shm::Shm::NAME => shm::Shm::configure(a, job).map(Chosen::Shm),
        #[cfg(feature = "tcp")]
        tcp::Tcp::NAME => tcp::Tcp::configure(a, job).map(Chosen::Tcp),
        #[cfg(feature = "sim")]
        sim::Sim::NAME => sim::Sim::configure(a, job).map(Chosen::Sim),
        #[cfg(feature = "mpi")]
        mpi::MpiBackend::NAME => mpi::MpiBackend::configure(a, job).map(Chosen::Mpi),
        #[cfg(feature = "ofi")]
        ofi::Ofi::NAME => ofi::Ofi::configure(a, job).map(Chosen::Ofi),
        #[cfg(feature = "ucx")]
        ucx::Ucx::NAME => ucx::Ucx::configure(a, job).map(Chosen::Ucx),
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

    /// See [`Backend::fixed_ranks`].
    pub fn fixed_ranks(&self) -> Option<(u32, String)> {
        dispatch!(self, b => b.fixed_ranks())
    }

    /// See [`Backend::own_launcher`].
    pub fn own_launcher(&self) -> Option<&'static str> {
        dispatch!(self, b => b.own_launcher())
    }

    /// See [`Backend::crowding`].
    pub fn crowding(&self, ranks: u32, cpus: usize) -> Option<String> {
        dispatch!(self, b => b.crowding(ranks, cpus))
    }

    /// See [`Backend::hypercube`].
    pub fn hypercube(&self) -> Option<Cube> {
        dispatch!(self, b => b.hypercube())
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

    /// See [`Backend::posted_queue_hint`].
    pub fn posted_queue_hint(&self) -> &'static str {
        dispatch!(self, b => b.posted_queue_hint())
    }

    /// See [`Backend::check_run`].
    pub fn check_run(
        &self,
        method: &MethodConfig,
        points: &[u64],
        trips: &dyn Fn(u64) -> u64,
    ) -> Result<(), Fatal> {
        dispatch!(self, b => b.check_run(method, points, trips))
    }

    /// See [`Backend::models_caches`].
    pub fn models_caches(&self) -> bool {
        dispatch!(self, b => b.models_caches())
    }

    /// See [`Backend::record`].
    pub fn record(&self, config: &mut RunConfig) {
        dispatch!(self, b => b.record(config))
    }
}

/// Whether the backends of a run need an MPI launcher: one of them runs only under MPI, or
/// several are measured side by side (between the processes MPI started).
pub fn under_mpi(chosen: &[Chosen]) -> bool {
    chosen.len() > 1 || chosen.iter().any(|c| dispatch!(c, b => b.joins_mpi()))
}

/// What the compiled-in backend `name` finds on this host (see [`Backend::found_here`]).
pub fn found_here(name: &str) -> Option<String> {
    match name {
        #[cfg(feature = "shm")]
        shm::Shm::NAME => shm::Shm::found_here(),
        #[cfg(feature = "tcp")]
        tcp::Tcp::NAME => tcp::Tcp::found_here(),
        #[cfg(feature = "sim")]
        sim::Sim::NAME => sim::Sim::found_here(),
        #[cfg(feature = "mpi")]
        mpi::MpiBackend::NAME => mpi::MpiBackend::found_here(),
        #[cfg(feature = "ofi")]
        ofi::Ofi::NAME => ofi::Ofi::found_here(),
        #[cfg(feature = "ucx")]
        ucx::Ucx::NAME => ucx::Ucx::found_here(),
        _ => None,
    }
}

/// A backend's entry of the document's `backend_options`: `pairs` as JSON values.
fn options_entry<const N: usize>(pairs: [(&str, serde_json::Value); N]) -> BackendInfo {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `--cpus` as the document records it: the CPU list, or null for no pinning.
#[cfg(any(feature = "tcp", feature = "shm", feature = "ofi", feature = "ucx"))]
fn cpus_value(cpus: &[usize]) -> serde_json::Value {
    if cpus.is_empty() {
        serde_json::Value::Null
    } else {
        cpus.into()
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

/// Whether a run of the backends `chosen` uses `flag`: a backend option of one of them, or an
/// option of the run one of them uses (beside MPI only [`BESIDE_MPI`]).
fn uses(chosen: &[&BackendName], flag: &str) -> bool {
    let beside_mpi = chosen.len() > 1 || chosen.iter().any(|b| b.name == "mpi");
    chosen.iter().any(|b| {
        b.options.contains(&flag)
            || (b.run_options.contains(&flag) && (!beside_mpi || BESIDE_MPI.contains(&flag)))
    })
}

/// Every option given that only some backends use must be used by the chosen ones: one that
/// would be ignored is refused, saying why.
fn check_options(given: &Given, chosen: &[&BackendName]) -> Result<(), Fatal> {
    for flag in given.flags() {
        let governed =
            RUN_OPTIONS.contains(&flag) || BACKENDS.iter().any(|b| b.options.contains(&flag));
        if !governed || uses(chosen, flag) {
            continue;
        }
        let names: Vec<&str> = chosen.iter().map(|b| b.name).collect();
        let who = match names.as_slice() {
            [one] => format!("the {one} backend"),
            many => format!("--backend {}", many.join(",")),
        };
        let owners: Vec<&str> = BACKENDS
            .iter()
            .filter(|b| b.options.contains(&flag))
            .map(|b| b.name)
            .collect();
        let (reason, hint) = if !owners.is_empty() {
            (
                format!(
                    "{flag} is not used by {who}: it is an option of {}",
                    owners.join(" and ")
                ),
                format!(
                    "add --backend {} or drop {flag}",
                    owners.join(" or --backend ")
                ),
            )
        } else if names == ["sim"] && flag == "--timeout" {
            (
                format!("{flag} is not used by {who}"),
                "the simulator's clock is virtual and no wait can stall: drop --timeout".into(),
            )
        } else if names == ["sim"] {
            (
                format!("{flag} is not used by {who}"),
                format!(
                    "the simulator runs every node of its machine in this process (pick the pair \
                     with --source and --dest): drop {flag}"
                ),
            )
        } else if names.len() > 1 || names == ["mpi"] {
            (
                format!("{flag} is not used under MPI ({who})"),
                format!("mpirun or srun starts the ranks (mpirun -np N) and MPI connects them: drop {flag}"),
            )
        } else {
            let users: Vec<&str> = BACKENDS
                .iter()
                .filter(|b| b.run_options.contains(&flag))
                .map(|b| b.name)
                .collect();
            let why = if names == ["shm"] && flag == "--rendezvous" {
                " (shm ranks share one host and find each other by job id and token)"
            } else {
                ""
            };
            (
                format!("{flag} is not used by {who}{why}"),
                format!(
                    "add --backend {} or drop {flag}",
                    users.join(" or --backend ")
                ),
            )
        };
        return Err(Fatal::usage(reason, hint));
    }
    Ok(())
}

/// The backends of `--backend` with their options, validated before anything starts: no option
/// given that they would not use, `--ranks` agreeing with a launcher's, every backend's options
/// against this host.
pub fn choose(a: &BackendArgs, given: &Given, job: &Job) -> Result<Vec<Chosen>, Fatal> {
    let chosen = names(a.backend.as_deref())?;
    check_options(given, &chosen)?;
    if uses(&chosen, "--ranks") {
        let env = job.rank_env()?;
        let external = !matches!(
            env.launcher,
            Launcher::Local | Launcher::LocalChild | Launcher::Manual
        );
        if external && given.has("--ranks") && env.size != job.ranks {
            return Err(Fatal::usage(
                format!(
                    "--ranks {}: the launcher ({}) started {} ranks",
                    job.ranks,
                    launcher_name(&env),
                    env.size
                ),
                "under mpirun or srun the launcher decides the ranks: drop --ranks",
            ));
        }
    }
    chosen.iter().map(|b| configure(b.name, a, job)).collect()
}

/// The one backend `commbench timer --backend NAME` characterises, with the options of the
/// command that apply to it (`--sim-config`, to the simulator only); `None` without
/// `--backend`: this process's clock.
pub fn for_timer(name: Option<&str>, sim_config: Option<String>) -> Result<Option<Chosen>, Fatal> {
    let Some(name) = name else {
        if sim_config.is_some() {
            return Err(Fatal::usage(
                "--sim-config is not used by timer without --backend sim",
                "add --backend sim to characterise the simulated machine's clock, or drop --sim-config",
            ));
        }
        return Ok(None);
    };
    let b = resolve(Some(name))?;
    if sim_config.is_some() && !b.options.contains(&"--sim-config") {
        return Err(Fatal::usage(
            format!("--sim-config is not used by the {} backend", b.name),
            "--sim-config describes the simulated machine: use --backend sim, or drop --sim-config",
        ));
    }
    let a = BackendArgs {
        sim_config,
        ..BackendArgs::default()
    };
    let job = Job {
        ranks: 1,
        timeout: Duration::from_secs(30),
        manual: None,
        rendezvous: None,
        transpose: None,
        posted_receives: 0,
        wildcards: false,
    };
    configure(b.name, &a, &job).map(Some)
}

/// `--cpus` as a list of CPU numbers (empty: no pinning), checked before any rank starts: CPUs
/// this process may run on, and one per rank of the run or one for all.
#[cfg(any(feature = "tcp", feature = "shm", feature = "ofi", feature = "ucx"))]
fn cpu_list(a: &BackendArgs, job: &Job) -> Result<Vec<usize>, Fatal> {
    use commbench::core::launch::affinity;
    let Some(c) = &a.cpus else {
        return Ok(Vec::new());
    };
    let cpus = commbench::spec::parse_cpu_list(c).map_err(|e| {
        Fatal::usage(
            format!("--cpus: {e}"),
            "for example --cpus 0,1 or --cpus 0-3",
        )
    })?;
    let allowed = affinity::allowed().map_err(|e| Fatal::run(format!("--cpus {c}: {e}"), None))?;
    affinity::check_cpus(&cpus, &allowed, affinity::online().as_deref()).map_err(|e| {
        let example: Vec<String> = allowed.iter().take(2).map(|x| x.to_string()).collect();
        Fatal::usage(
            format!("--cpus {c}: {}", e.reason()),
            format!(
                "pick CPUs among {} (for example --cpus {})",
                affinity::format_list(&allowed),
                example.join(",")
            ),
        )
    })?;
    let size = job.rank_env()?.size;
    if cpus.len() != 1 && cpus.len() != size as usize {
        return Err(Fatal::usage(
            format!("--cpus {c}: {} CPUs for {size} ranks", cpus.len()),
            format!(
                "give one CPU per rank (rank i on the i-th), or a single CPU for every rank, \
                 e.g. --cpus {}",
                cpus.first().copied().unwrap_or(0)
            ),
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

/// Measure `spec` on the run's backends: the one backend on its own, or every backend in turn
/// between the processes an MPI launcher started ([`under_mpi`]).
pub fn measure<S: KernelSpec + Clone>(
    backends: &[Chosen],
    job: &Job,
    method: &MethodConfig,
    spec: S,
    progress: &ProgressFn<'_>,
) -> Result<Outcome, Fatal> {
    if under_mpi(backends) {
        #[cfg(feature = "mpi")]
        return mpi::run_all(backends, job, method, spec, progress);
        #[cfg(not(feature = "mpi"))]
        return Err(Fatal::usage(
            "measuring several backends in one run, or the mpi backend, needs MPI",
            "rebuild with `cargo build --release --features mpi` and start it under mpirun",
        ));
    }
    let b = &backends[0];
    let m = Measurement::new(spec, method.clone(), Some(progress)).with_stop(&signals::STOP);
    live::track(b.name(), &m);
    let ran = b.run(job, &m)?;
    // No checkpoint from here on: one written after the take would hold nothing.
    signals::clear_checkpoint();
    let collected = m.take_collected();
    // A stop that cut a size short (the simulator's, after its grace) counts what was kept.
    let result = ran.result.map_err(|e| match e.interrupted() {
        Some(signal) if !matches!(e, Error::Interrupted { sizes, .. } if sizes > 0) => {
            // The size cut short is one more than those done, whatever the plan counted.
            let done = collected.points.len();
            Error::Interrupted {
                signal,
                done,
                sizes: m.spec.steps(&m.cfg).max(done + 1),
            }
        }
        _ => e,
    });
    Ok(Outcome {
        ranks: ran.ranks,
        launcher: ran.launcher,
        rank: ran.rank,
        runs: vec![BackendRun {
            backend: b.name(),
            collected,
            result,
        }],
    })
}
