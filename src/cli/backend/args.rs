//! The options of the backends on the command line (`--backend` and what each backend
//! takes), beside the options of a run that not every backend uses (`--ranks`, `--rank`,
//! `--rendezvous`, `--timeout`); [`super::BACKENDS`] says which backend uses which.

use clap::{Args, ValueEnum};

/// The help heading of the options for runs across hosts.
const HOSTS: &str = "Across hosts";

#[derive(Debug, Args, Clone, Default)]
pub struct BackendArgs {
    /// Transport: shm (default), tcp, sim; mpi (with --features mpi, under mpirun or srun), ofi
    /// (--features ofi: libfabric), ucx (--features ucx). Under mpirun a list (mpi,tcp,shm)
    /// measures each between the same processes, side by side. `commbench backends` lists
    /// the ones this build has.
    #[arg(long, value_name = "NAME[,NAME...]")]
    pub backend: Option<String>,

    /// mpi: the clock to read, wtime (MPI_Wtime, default) or monotonic (CLOCK_MONOTONIC).
    #[arg(long, value_name = "CLOCK", help_heading = "mpi", ignore_case = true)]
    pub clock: Option<ClockArg>,

    /// mpi: the thread support to ask MPI_Init_thread for: single (default, what MPI_Init and
    /// the plain loops ask for), funneled, serialized or multiple. A higher level can cost
    /// every message (Open MPI locks above single); measure it to see what a threaded
    /// application pays. The result records the level asked for and the level provided.
    #[arg(long, value_name = "LEVEL", help_heading = "mpi", ignore_case = true)]
    pub mpi_threads: Option<ThreadsArg>,

    /// Ranks in the run (default: as many as the command needs: enough for --source and
    /// --dest, for the echo's path or for the interference streams): started here, or with
    /// --rank the size of a run started by hand. Not with sim (it runs every node of its
    /// machine) nor under MPI (mpirun -np decides).
    #[arg(long, value_name = "N", alias = "nranks", alias = "size")]
    pub ranks: Option<u32>,

    /// Seconds without progress after which a wait is an error naming the silent peer (not
    /// with sim, whose clock is virtual).
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub timeout: f64,

    /// tcp: busy-poll non-blocking sockets instead of blocking in the kernel.
    #[arg(long, help_heading = "tcp")]
    pub poll: bool,

    /// tcp: interface address to listen on for data connections (default: the one that reached
    /// the rendezvous).
    #[arg(long, value_name = "HOST", help_heading = "tcp")]
    pub bind: Option<String>,

    /// shm: how a rank waits: spin (default), spin-yield or futex (for oversubscribed hosts).
    #[arg(long, value_name = "POLICY", help_heading = "shm")]
    pub wait: Option<WaitArg>,

    /// shm, tcp, ofi, ucx: pin rank i to the i-th CPU of this list (e.g. 0,1 or 0-3), one CPU per rank;
    /// a single CPU holds every rank. Each must be one this process may run on.
    #[arg(long, value_name = "LIST", help_heading = "shm")]
    pub cpus: Option<String>,

    /// ofi: the libfabric provider, as fi_info names it: shm, "tcp;ofi_rxm", "udp;ofi_rxd",
    /// ... (default: libfabric's first choice for a tagged RDM endpoint; FI_PROVIDER narrows
    /// it). `commbench backends` lists the providers found here.
    #[arg(long, value_name = "NAME", help_heading = "ofi")]
    pub ofi_provider: Option<String>,

    /// ucx: the UCX transports, passed as UCX_TLS: posix,self, tcp, sm, posix,cma,self, ...
    /// (default: UCX_TLS from the environment, else UCX's choice). cma only beside posix or
    /// sysv. `commbench backends` lists the transports found here.
    #[arg(long, value_name = "LIST", help_heading = "ucx")]
    pub ucx_tls: Option<String>,

    /// sim: a preset (ncube7, generic) or a TOML file describing the simulated machine.
    #[arg(long, value_name = "NAME|FILE", help_heading = "sim")]
    pub sim_config: Option<String>,

    /// shm, tcp, ofi, ucx: join a run started by hand as this rank of --ranks N (otherwise the rank
    /// comes from the launcher's environment).
    #[arg(long, value_name = "R", requires = "ranks", help_heading = HOSTS)]
    pub rank: Option<u32>,

    /// tcp, ofi, ucx: HOST:PORT where rank 0 holds the rendezvous of a run across hosts. Also
    /// COMMBENCH_RENDEZVOUS; the run's token comes from COMMBENCH_TOKEN.
    #[arg(long, value_name = "HOST:PORT", help_heading = HOSTS)]
    pub rendezvous: Option<String>,
}

/// `--wait` (shm).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WaitArg {
    /// Pure busy polling (lowest latency; one core per rank).
    Spin,
    /// Poll a little, then yield the CPU between polls.
    SpinYield,
    /// Poll a little, then sleep on a futex that senders ring.
    Futex,
}

/// `--clock` (mpi).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClockArg {
    /// MPI_Wtime.
    #[value(alias = "mpi_wtime", alias = "mpi")]
    Wtime,
    /// CLOCK_MONOTONIC, as the other backends read.
    #[value(alias = "clock_monotonic")]
    Monotonic,
}

/// `--mpi-threads` (mpi): the thread support asked of `MPI_Init_thread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThreadsArg {
    /// MPI_THREAD_SINGLE (what MPI_Init asks for).
    #[value(alias = "mpi_thread_single")]
    Single,
    /// MPI_THREAD_FUNNELED.
    #[value(alias = "mpi_thread_funneled")]
    Funneled,
    /// MPI_THREAD_SERIALIZED.
    #[value(alias = "mpi_thread_serialized")]
    Serialized,
    /// MPI_THREAD_MULTIPLE.
    #[value(alias = "mpi_thread_multiple")]
    Multiple,
}
