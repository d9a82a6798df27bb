//! Where a rank comes from: commbench's own local launcher, or a launcher people already have
//! (mpirun, srun). commbench never runs a cluster manager of its own.
//!
//! Local mode: `commbench` (rank 0) re-executes itself once per other rank with the variables
//! [`ENV_RANK`], [`ENV_SIZE`], [`ENV_RENDEZVOUS`] and [`ENV_TOKEN`] set. Under a launcher the rank
//! and size come from Open MPI, PMI or Slurm variables, and the rendezvous from
//! `--rendezvous HOST:PORT` (or [`ENV_RENDEZVOUS`]), held by rank 0.

pub mod affinity;
pub mod rendezvous;

use crate::transport::error::{Error, Result};
use crate::transport::Rank;

/// Rank of this process (set by commbench's local launcher, or by hand with `--rank`).
pub const ENV_RANK: &str = "COMMBENCH_RANK";
/// Number of ranks.
pub const ENV_SIZE: &str = "COMMBENCH_SIZE";
/// `HOST:PORT` where rank 0 holds the rendezvous.
pub const ENV_RENDEZVOUS: &str = "COMMBENCH_RENDEZVOUS";
/// The run's token: a connection that does not present it is refused.
pub const ENV_TOKEN: &str = "COMMBENCH_TOKEN";
/// A job identifier shared by every rank of a run (names shared-memory segments and the like).
pub const ENV_JOB: &str = "COMMBENCH_JOB";

/// Who started this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Launcher {
    /// Not yet started: this process is the local launcher (and rank 0).
    Local,
    /// A child of commbench's local launcher.
    LocalChild,
    /// Given by hand with `--rank/--size`.
    Manual,
    /// Open MPI's mpirun (`OMPI_COMM_WORLD_*`).
    OpenMpi,
    /// A PMI launcher (MPICH Hydra, `PMI_RANK`/`PMI_SIZE`).
    Pmi,
    /// Slurm's srun (`SLURM_PROCID`/`SLURM_NTASKS`).
    Slurm,
}

/// The identity of this rank within the run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RankEnv {
    /// This rank.
    pub rank: Rank,
    /// Number of ranks.
    pub size: u32,
    /// Rendezvous address `HOST:PORT` (rank 0 listens there), when known.
    pub rendezvous: Option<String>,
    /// The run's token, when known. Never written to the result document.
    #[serde(skip)]
    pub token: Option<String>,
    /// A job identifier shared by every rank, when known.
    pub job: Option<String>,
    /// Who started the rank.
    pub launcher: Launcher,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn parse_num(name: &str, v: &str) -> Result<u32> {
    v.trim()
        .parse::<u32>()
        .map_err(|_| Error::Config(format!("{name}={v:?} is not a rank number")))
}

impl RankEnv {
    /// Work out this rank's identity. `manual` is `--rank/--size` from the command line, which
    /// wins; then commbench's own variables; then Open MPI, PMI and Slurm. With none of them the
    /// process is the local launcher: rank 0 of `default_size`.
    pub fn detect(
        manual: Option<(Rank, u32)>,
        rendezvous: Option<&str>,
        default_size: u32,
    ) -> Result<Self> {
        let rendezvous = rendezvous
            .map(str::to_string)
            .or_else(|| var(ENV_RENDEZVOUS));
        let token = var(ENV_TOKEN);
        let (rank, size, launcher, job) = if let Some((r, s)) = manual {
            (r, s, Launcher::Manual, var(ENV_JOB))
        } else if let (Some(r), Some(s)) = (var(ENV_RANK), var(ENV_SIZE)) {
            (
                parse_num(ENV_RANK, &r)?,
                parse_num(ENV_SIZE, &s)?,
                Launcher::LocalChild,
                var(ENV_JOB),
            )
        } else if let (Some(r), Some(s)) =
            (var("OMPI_COMM_WORLD_RANK"), var("OMPI_COMM_WORLD_SIZE"))
        {
            let job = var(ENV_JOB)
                .or_else(|| var("OMPI_MCA_ess_base_jobid"))
                .or_else(|| var("PMIX_NAMESPACE"));
            (
                parse_num("OMPI_COMM_WORLD_RANK", &r)?,
                parse_num("OMPI_COMM_WORLD_SIZE", &s)?,
                Launcher::OpenMpi,
                job,
            )
        } else if let (Some(r), Some(s)) = (var("PMI_RANK"), var("PMI_SIZE")) {
            let job = var(ENV_JOB)
                .or_else(|| var("PMI_JOBID"))
                .or_else(|| var("PMI_KVSNAME"));
            (
                parse_num("PMI_RANK", &r)?,
                parse_num("PMI_SIZE", &s)?,
                Launcher::Pmi,
                job,
            )
        } else if let (Some(r), Some(s)) = (var("SLURM_PROCID"), var("SLURM_NTASKS")) {
            let job = var(ENV_JOB).or_else(|| {
                var("SLURM_JOB_ID")
                    .map(|j| format!("{j}.{}", var("SLURM_STEP_ID").unwrap_or_default()))
            });
            (
                parse_num("SLURM_PROCID", &r)?,
                parse_num("SLURM_NTASKS", &s)?,
                Launcher::Slurm,
                job,
            )
        } else {
            (0, default_size, Launcher::Local, None)
        };
        if size == 0 {
            return Err(Error::Config("the run has 0 ranks".into()));
        }
        if rank >= size {
            return Err(Error::Config(format!(
                "rank {rank} is out of range for {size} ranks"
            )));
        }
        Ok(RankEnv {
            rank,
            size,
            rendezvous,
            token,
            job,
            launcher,
        })
    }

    /// Whether this process must start the other ranks itself.
    pub fn is_local_launcher(&self) -> bool {
        self.launcher == Launcher::Local
    }
}

/// A fresh random token (128 bits from the OS) as hex, for local runs.
pub fn new_token() -> Result<String> {
    let mut b = [0u8; 16];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| Error::io("reading /dev/urandom for the run token", e))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}
