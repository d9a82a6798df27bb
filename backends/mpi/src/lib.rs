//! # commbench-mpi
//!
//! The MPI backend of commbench (opt-in Cargo feature `mpi`), on rsmpi's `mpi` crate. It
//! builds against Debian's Open MPI 4.1 (`libopenmpi-dev`, `libclang-dev`) with no environment
//! variables; MPICH can be chosen with `MPICC=mpicc.mpich` (in a separate target directory).
//!
//! * [`Mpi`] initialises MPI once per process (refusing, with how to start it, when no MPI
//!   launcher started the process), and runs a [`Program`] on an [`MpiEndpoint`] with
//!   [`Mpi::run`].
//! * [`MpiEndpoint`] maps the commbench data plane onto `MPI_Isend`/`MPI_Irecv`/`MPI_Test` on a
//!   duplicate of `MPI_COMM_WORLD`, and the control plane onto MPI's non-blocking collectives on
//!   a second duplicate; every return code is checked (`MPI_ERRORS_RETURN`), every wait is
//!   bounded by the configured timeout.
//! * [`Mpi::rendezvous`] is a [`Rendezvous`] over MPI, so that the raw backends (tcp, shm, ...)
//!   can bootstrap between the very processes `mpirun` started, and [`Mpi::shared_token`] gives
//!   them one run token: `mpirun -np 2 commbench pingpong --backend mpi,tcp,shm` measures every
//!   backend between the same two processes.
//! * [`measure_vector`]: the column transpose of seed 003 with an MPI derived datatype.
//! * The clock ([`MpiClock`]) is `MPI_Wtime` or `CLOCK_MONOTONIC`; the result document records
//!   `MPI_Wtick` beside the resolution the method of seed 000 §3.1 measures, since seed 000
//!   found `MPI_Wtick` unreliable, and the library's identification (`MPI_Get_library_version`).

#![allow(unsafe_code)]

mod endpoint;
mod sys;
mod vector;

pub use endpoint::{MpiClock, MpiEndpoint};
pub use vector::{measure_vector, VectorKernel};

/// The largest message: MPI counts are C ints, and messages go as `MPI_BYTE`s in one piece.
pub const MAX_MESSAGE: u64 = c_int::MAX as u64;

/// What the mpi backend carries, for the checks before a run.
pub fn transport() -> commbench_core::method::limits::Transport {
    commbench_core::method::limits::Transport {
        max_message: MAX_MESSAGE,
        max_message_why: "MPI counts are C ints and messages go as bytes in one piece",
        ..commbench_core::method::limits::Transport::unbounded("mpi")
    }
}

use commbench_core::launch::rendezvous::Rendezvous;
use commbench_core::transport::BackendInfo;
use commbench_core::{Error, Program, Rank, Result};
use mpi::ffi;
use std::net::IpAddr;
use std::os::raw::{c_int, c_void};
use std::time::Duration;

/// What to say when the process was not started by an MPI launcher.
pub const HOW_TO_START: &str = "the mpi backend runs under an MPI launcher: start it with \
     `mpirun -np 2 commbench pingpong --backend mpi` (as root add --allow-run-as-root; above \
     the number of cores add --oversubscribe), or with srun under Slurm";

/// Environment variables by which MPI launchers tell a process it is one of their ranks
/// (Open MPI, PMIx, MPICH's Hydra/PMI, Slurm).
pub const LAUNCHER_VARIABLES: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_SIZE",
    "PMI_RANK",
    "MPI_LOCALNRANKS",
    "SLURM_STEP_NUM_TASKS",
];

/// Whether an MPI launcher (mpirun, mpiexec, srun) started this process.
pub fn launched_by_mpi_launcher() -> bool {
    LAUNCHER_VARIABLES
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// The MPI library's identification: the first line of `MPI_Get_library_version`, trimmed
/// (callable before MPI is initialised).
pub fn library_version() -> String {
    match mpi::environment::library_version() {
        Ok(s) => s
            .trim_matches(char::from(0))
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        Err(_) => "unknown (library version is not UTF-8)".to_string(),
    }
}

/// How the MPI backend runs.
#[derive(Debug, Clone)]
pub struct MpiConfig {
    /// How long a wait (or a collective of the control plane) may last before it is an error.
    pub timeout: Duration,
    /// The clock the endpoint reads.
    pub clock: MpiClock,
}

impl Default for MpiConfig {
    fn default() -> Self {
        MpiConfig {
            timeout: Duration::from_secs(30),
            clock: MpiClock::Wtime,
        }
    }
}

/// The value of an integer attribute of `comm` (`MPI_TAG_UB`, `MPI_WTIME_IS_GLOBAL`), if set.
fn int_attr(comm: ffi::MPI_Comm, key: c_int, what: &str) -> Result<Option<c_int>> {
    let mut p: *mut c_int = std::ptr::null_mut();
    let mut flag: c_int = 0;
    // SAFETY: for predefined attributes MPI stores a pointer to an int in `p`; `flag` says
    // whether it did.
    let rc = unsafe {
        ffi::MPI_Comm_get_attr(
            comm,
            key,
            &mut p as *mut *mut c_int as *mut c_void,
            &mut flag,
        )
    };
    sys::check(rc, what)?;
    if flag == 0 || p.is_null() {
        return Ok(None);
    }
    // SAFETY: MPI said the attribute is set and `p` points to its int, owned by MPI.
    Ok(Some(unsafe { *p }))
}

/// `MPI_TAG_UB` of `comm`.
pub(crate) fn tag_ub(comm: ffi::MPI_Comm) -> Result<u32> {
    let v = int_attr(
        comm,
        ffi::MPI_TAG_UB as c_int,
        "MPI_Comm_get_attr(MPI_TAG_UB)",
    )?;
    // The standard guarantees at least 32767.
    Ok(v.map(|v| v.max(32767) as u32).unwrap_or(32767))
}

/// The thread support asked of MPI at initialisation (`MPI_Init_thread`).
///
/// commbench's own timed code runs on one thread, and its only other thread (the one that
/// waits for SIGINT and SIGTERM to save the results) never calls MPI. [`ThreadLevel::Single`]
/// is the default because that is what the plain loops commbench is compared with get from
/// `MPI_Init` (osu_latency, IMB, NetPIPE), and because a higher level is not free: Open MPI
/// 4.1 turns on its internal locking for any level above single, which added 25-30% to an
/// 8-byte ping-pong over shared memory (docs/overhead.md). Strictly, `MPI_THREAD_SINGLE`
/// promises that one thread executes in the process, which the waiting thread bends;
/// [`ThreadLevel::Funneled`] keeps to the letter for a library that holds a program to it.
/// The other levels measure what a threaded application pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThreadLevel {
    /// `MPI_THREAD_SINGLE` (what `MPI_Init` asks for).
    #[default]
    Single,
    /// `MPI_THREAD_FUNNELED`: only the thread that initialised MPI calls it.
    Funneled,
    /// `MPI_THREAD_SERIALIZED`: any thread, one at a time.
    Serialized,
    /// `MPI_THREAD_MULTIPLE`: any thread, at any time.
    Multiple,
}

impl ThreadLevel {
    /// Name on the command line and in the result document (`single`, `funneled`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ThreadLevel::Single => "single",
            ThreadLevel::Funneled => "funneled",
            ThreadLevel::Serialized => "serialized",
            ThreadLevel::Multiple => "multiple",
        }
    }

    fn threading(self) -> mpi::Threading {
        match self {
            ThreadLevel::Single => mpi::Threading::Single,
            ThreadLevel::Funneled => mpi::Threading::Funneled,
            ThreadLevel::Serialized => mpi::Threading::Serialized,
            ThreadLevel::Multiple => mpi::Threading::Multiple,
        }
    }

    fn of(t: mpi::Threading) -> ThreadLevel {
        match t {
            mpi::Threading::Single => ThreadLevel::Single,
            mpi::Threading::Funneled => ThreadLevel::Funneled,
            mpi::Threading::Serialized => ThreadLevel::Serialized,
            mpi::Threading::Multiple => ThreadLevel::Multiple,
        }
    }
}

impl std::str::FromStr for ThreadLevel {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let l = s.to_ascii_lowercase();
        match l.strip_prefix("mpi_thread_").unwrap_or(&l) {
            "single" => Ok(ThreadLevel::Single),
            "funneled" => Ok(ThreadLevel::Funneled),
            "serialized" => Ok(ThreadLevel::Serialized),
            "multiple" => Ok(ThreadLevel::Multiple),
            _ => Err(Error::Config(format!(
                "unknown MPI thread level {s:?}: expected single, funneled, serialized or multiple"
            ))),
        }
    }
}

/// An initialised MPI library: one per process, finalised when dropped.
pub struct Mpi {
    _universe: mpi::environment::Universe,
    rank: Rank,
    size: u32,
    info: BackendInfo,
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Mpi {
    /// Initialise MPI with [`ThreadLevel::Single`] ([`Mpi::init_with`]).
    pub fn init() -> Result<Mpi> {
        Mpi::init_with(ThreadLevel::Single)
    }

    /// Initialise MPI asking for thread support `level` and set `MPI_ERRORS_RETURN` on
    /// `MPI_COMM_WORLD`; the result document records the level asked for and the one
    /// provided. An error, saying how to start it, when no MPI launcher started this process;
    /// an error when MPI was already initialised.
    pub fn init_with(level: ThreadLevel) -> Result<Mpi> {
        if !launched_by_mpi_launcher() {
            return Err(Error::Config(HOW_TO_START.into()));
        }
        let (universe, provided) =
            mpi::initialize_with_threading(level.threading()).ok_or(Error::Backend {
                backend: "mpi",
                message: "MPI is already initialised in this process".into(),
            })?;
        let world = sys::comm_world();
        sys::errors_return(world)?;
        let (rank, size) = sys::rank_size(world)?;
        let mut info = BackendInfo::new();
        info.insert("library".into(), library_version().into());
        let (v, sv) = mpi::environment::version();
        info.insert("mpi_version".into(), format!("{v}.{sv}").into());
        info.insert("wtick_s".into(), mpi::time_resolution().into());
        if let Ok(Some(g)) = int_attr(
            world,
            ffi::MPI_WTIME_IS_GLOBAL as c_int,
            "MPI_Comm_get_attr(MPI_WTIME_IS_GLOBAL)",
        ) {
            info.insert("wtime_is_global".into(), (g != 0).into());
        }
        if let Ok(p) = mpi::environment::processor_name() {
            info.insert("processor".into(), p.into());
        }
        info.insert("threading".into(), level.name().into());
        info.insert(
            "threading_provided".into(),
            ThreadLevel::of(provided).name().into(),
        );
        info.insert("world_size".into(), size.into());
        Ok(Mpi {
            _universe: universe,
            rank,
            size,
            info,
        })
    }

    /// This process's rank in `MPI_COMM_WORLD`.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The number of ranks in `MPI_COMM_WORLD`.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// What the result document records about the library (library, mpi_version, wtick_s,
    /// wtime_is_global, processor, ...); an endpoint adds its clock and `MPI_TAG_UB`.
    pub fn info(&self) -> BackendInfo {
        self.info.clone()
    }

    /// Run `p` on this rank, on an [`MpiEndpoint`] over fresh duplicates of `MPI_COMM_WORLD`
    /// (freed afterwards). Every rank of the world calls it.
    pub fn run<P: Program>(&self, cfg: &MpiConfig, p: &P) -> Result<P::Output> {
        let mut ep = self.endpoint(cfg)?;
        p.run(&mut ep)
    }

    /// An endpoint over fresh duplicates of `MPI_COMM_WORLD` (collective: every rank calls
    /// it). For kernels that need the endpoint itself, such as [`VectorKernel`].
    pub fn endpoint(&self, cfg: &MpiConfig) -> Result<MpiEndpoint> {
        MpiEndpoint::on(sys::comm_world(), cfg, self.info())
    }

    /// Run `p` on the first `n` ranks only, on a communicator of their own (`MPI_Comm_split`):
    /// `Some(output)` there, `None` on the other ranks, which return at once. Every rank of the
    /// world calls it. Used to run the conformance suite's 2- and 3-rank checks under
    /// `mpirun -np 4`.
    pub fn run_subset<P: Program>(
        &self,
        n: u32,
        cfg: &MpiConfig,
        p: &P,
    ) -> Result<Option<P::Output>> {
        if n == 0 || n > self.size {
            return Err(Error::Invalid(format!(
                "a run of {n} ranks in a world of {}",
                self.size
            )));
        }
        let inside = self.rank < n;
        let color = if inside {
            0
        } else {
            // SAFETY: reading a constant that mpi-sys initialises from the MPI header.
            unsafe { ffi::RSMPI_UNDEFINED }
        };
        let mut comm = sys::comm_null();
        // SAFETY: valid communicator and out-pointer; collective over the world.
        let rc =
            unsafe { ffi::MPI_Comm_split(sys::comm_world(), color, self.rank as c_int, &mut comm) };
        sys::check(rc, "MPI_Comm_split")?;
        if !inside {
            return Ok(None);
        }
        sys::errors_return(comm)?;
        let out = MpiEndpoint::on(comm, cfg, self.info()).and_then(|mut ep| p.run(&mut ep));
        // SAFETY: `comm` came from MPI_Comm_split above and is freed once (the endpoint
        // freed its own duplicates when it was dropped).
        unsafe {
            ffi::MPI_Comm_free(&mut comm);
        }
        out.map(Some)
    }

    /// A [`Rendezvous`] over MPI (its own duplicate of `MPI_COMM_WORLD`), with which raw
    /// backends exchange their addresses between the processes mpirun started. Collective.
    pub fn rendezvous(&self, timeout: Duration) -> Result<MpiRendezvous<'_>> {
        let mut new = sys::comm_null();
        // SAFETY: valid communicator and out-pointer. A plain dup: every rank is here at
        // start-up, and a rank that died makes mpirun end the job.
        let rc = unsafe { ffi::MPI_Comm_dup(sys::comm_world(), &mut new) };
        sys::check(rc, "MPI_Comm_dup")?;
        sys::errors_return(new)?;
        Ok(MpiRendezvous {
            _mpi: self,
            comm: new,
            rank: self.rank,
            size: self.size,
            timeout,
        })
    }

    /// One run token for every rank: rank 0 draws it ([`commbench_core::launch::new_token`])
    /// and broadcasts it. Collective.
    pub fn shared_token(&self, timeout: Duration) -> Result<String> {
        let mut b = if self.rank == 0 {
            commbench_core::launch::new_token()?.into_bytes()
        } else {
            Vec::new()
        };
        b.resize(64, 0);
        let mut req = sys::request_null();
        // SAFETY: `b` holds 64 bytes, kept until the request completes (leaked on timeout).
        let rc = unsafe {
            ffi::MPI_Ibcast(
                b.as_mut_ptr() as *mut c_void,
                64,
                sys::byte_type(),
                0,
                sys::comm_world(),
                &mut req,
            )
        };
        sys::check(rc, "MPI_Ibcast (token)")?;
        let b = sys::wait_keeping(&mut req, self.rank, timeout, "MPI_Ibcast (token)", b)?;
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8(b[..end].to_vec())
            .map_err(|_| Error::Protocol("the run token is not text".into()))
    }

    /// End every rank of the job now (`MPI_Abort`), with exit code `code`: for a rank that
    /// failed while the others may be waiting for it. Never returns.
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI is initialised; MPI_Abort ends the job.
        unsafe {
            ffi::MPI_Abort(sys::comm_world(), code as c_int);
        }
        std::process::exit(code)
    }
}

/// A [`Rendezvous`] over MPI: allgather with `MPI_Iallgather` of the lengths then
/// `MPI_Iallgatherv`, barrier with `MPI_Ibarrier`, each bounded by the timeout.
#[derive(Debug)]
pub struct MpiRendezvous<'a> {
    _mpi: &'a Mpi,
    comm: ffi::MPI_Comm,
    rank: Rank,
    size: u32,
    timeout: Duration,
}

impl Drop for MpiRendezvous<'_> {
    fn drop(&mut self) {
        // SAFETY: `comm` was duplicated for this rendezvous and is freed once.
        unsafe {
            ffi::MPI_Comm_free(&mut self.comm);
        }
    }
}

impl Rendezvous for MpiRendezvous<'_> {
    fn rank(&self) -> Rank {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn local_ip(&self) -> Option<IpAddr> {
        None
    }

    fn allgather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        let n = self.size as usize;
        let mine = (blob.len() as u64).to_le_bytes().to_vec();
        let mut lens = vec![0u8; 8 * n];
        let mut req = sys::request_null();
        // SAFETY: `mine` (8 bytes) and `lens` (8 per rank) are kept until the request
        // completes (leaked on timeout).
        let rc = unsafe {
            ffi::MPI_Iallgather(
                mine.as_ptr() as *const c_void,
                8,
                sys::byte_type(),
                lens.as_mut_ptr() as *mut c_void,
                8,
                sys::byte_type(),
                self.comm,
                &mut req,
            )
        };
        sys::check(rc, "MPI_Iallgather")?;
        let (_, lens) = sys::wait_keeping(
            &mut req,
            self.rank,
            self.timeout,
            "MPI_Iallgather",
            (mine, lens),
        )?;
        let (counts, displs, total) = sys::counts_displs(&lens, "an allgather")?;
        let mut all = sys::heap_zeroes(total);
        let send = sys::heap_bytes(blob);
        // SAFETY: all buffers are kept until the request completes (leaked on timeout); `all`
        // holds the sum of `counts` bytes.
        let rc = unsafe {
            ffi::MPI_Iallgatherv(
                send.as_ptr() as *const c_void,
                sys::count(send.len(), "an allgather part")?,
                sys::byte_type(),
                all.as_mut_ptr() as *mut c_void,
                counts.as_ptr(),
                displs.as_ptr(),
                sys::byte_type(),
                self.comm,
                &mut req,
            )
        };
        sys::check(rc, "MPI_Iallgatherv")?;
        let (_, all, counts, displs) = sys::wait_keeping(
            &mut req,
            self.rank,
            self.timeout,
            "MPI_Iallgatherv",
            (send, all, counts, displs),
        )?;
        Ok(counts
            .iter()
            .zip(&displs)
            .map(|(&c, &d)| all[d as usize..d as usize + c as usize].to_vec())
            .collect())
    }

    fn barrier(&mut self) -> Result<()> {
        let mut req = sys::request_null();
        // SAFETY: valid communicator; the request is waited for below.
        let rc = unsafe { ffi::MPI_Ibarrier(self.comm, &mut req) };
        sys::check(rc, "MPI_Ibarrier")?;
        sys::wait_collective(&mut req, self.rank, self.timeout, "MPI_Ibarrier")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_names_parse() {
        assert_eq!("wtime".parse::<MpiClock>().unwrap(), MpiClock::Wtime);
        assert_eq!(
            "monotonic".parse::<MpiClock>().unwrap(),
            MpiClock::Monotonic
        );
        assert!("tsc".parse::<MpiClock>().is_err());
        assert_eq!(MpiClock::Wtime.name(), "MPI_Wtime");
    }

    #[test]
    fn thread_levels_parse() {
        for l in [
            ThreadLevel::Single,
            ThreadLevel::Funneled,
            ThreadLevel::Serialized,
            ThreadLevel::Multiple,
        ] {
            assert_eq!(l.name().parse::<ThreadLevel>().unwrap(), l);
            assert_eq!(ThreadLevel::of(l.threading()), l);
        }
        assert_eq!(
            "MPI_THREAD_FUNNELED".parse::<ThreadLevel>().unwrap(),
            ThreadLevel::Funneled
        );
        assert!("threaded".parse::<ThreadLevel>().is_err());
        assert_eq!(ThreadLevel::default(), ThreadLevel::Single);
    }

    #[test]
    fn library_is_identified() {
        let v = library_version();
        assert!(!v.is_empty() && !v.contains('\n'), "{v:?}");
    }

    #[test]
    fn init_without_launcher_says_how_to_start() {
        if launched_by_mpi_launcher() {
            return;
        }
        let e = Mpi::init().unwrap_err().to_string();
        assert!(
            e.contains("mpirun -np 2 commbench pingpong --backend mpi"),
            "{e}"
        );
    }
}
