//! Where a rank comes from: commbench's own local launcher, or a launcher people already have
//! (mpirun, srun). commbench never runs a cluster manager of its own.
//!
//! Local mode: `commbench` (rank 0) re-executes itself once per other rank with the variables
//! [`ENV_RANK`], [`ENV_SIZE`], [`ENV_RENDEZVOUS`] and [`ENV_TOKEN`] set. Under a launcher the rank
//! and size come from Open MPI, PMI or Slurm variables, and the rendezvous address `HOST:PORT`
//! from the caller (or [`ENV_RENDEZVOUS`]), held by rank 0.

pub mod affinity;
pub mod rendezvous;

use crate::transport::error::{Error, Result};
use crate::transport::Rank;

/// Rank of this process (set by commbench's local launcher, or by hand).
pub const ENV_RANK: &str = "COMMBENCH_RANK";
/// Number of ranks.
pub const ENV_SIZE: &str = "COMMBENCH_SIZE";
/// `HOST:PORT` where rank 0 holds the rendezvous.
pub const ENV_RENDEZVOUS: &str = "COMMBENCH_RENDEZVOUS";
/// The run's token: a connection that does not present it is refused.
pub const ENV_TOKEN: &str = "COMMBENCH_TOKEN";
/// A job identifier shared by every rank of a run (names shared-memory segments and the like).
pub const ENV_JOB: &str = "COMMBENCH_JOB";

/// The host a rank runs on: the transport's own ([`crate::transport::Endpoint::host`]: the
/// simulator's node), Slurm's node name, or the kernel's host name (its UTS namespace's).
pub fn host_name<E: crate::transport::Endpoint>(ep: &E) -> String {
    if let Some(h) = ep.host() {
        return h;
    }
    if let Ok(h) = std::env::var("SLURMD_NODENAME") {
        if !h.trim().is_empty() {
            return h.trim().to_string();
        }
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The switches above this rank's host, top first and dot-separated (`root.s1.leaf4`), from
/// Slurm's topology/tree plugin, which gives every task `SLURM_TOPOLOGY_ADDR`
/// (`root.s1.leaf4.node386`) and `SLURM_TOPOLOGY_ADDR_PATTERN` (`switch.switch.switch.node`,
/// saying which parts are switches); `None` outside Slurm or without that plugin.
pub fn switch_path() -> Option<String> {
    let addr = std::env::var("SLURM_TOPOLOGY_ADDR").ok()?;
    let pattern = std::env::var("SLURM_TOPOLOGY_ADDR_PATTERN").ok();
    switch_path_of(&addr, pattern.as_deref())
}

/// [`switch_path`] from the two variables' values: the parts the pattern calls `switch`
/// (without a pattern, every part but the last, the host); `None` when the two do not
/// agree or no switch is named.
pub fn switch_path_of(addr: &str, pattern: Option<&str>) -> Option<String> {
    let parts: Vec<&str> = addr.trim().split('.').collect();
    let switches: Vec<&str> = match pattern {
        Some(p) => {
            let kinds: Vec<&str> = p.trim().split('.').collect();
            if kinds.len() != parts.len() {
                return None;
            }
            parts
                .iter()
                .zip(&kinds)
                .filter(|(_, k)| **k == "switch")
                .map(|(p, _)| *p)
                .collect()
        }
        None => parts[..parts.len().saturating_sub(1)].to_vec(),
    };
    (!switches.is_empty() && switches.iter().all(|s| !s.is_empty())).then(|| switches.join("."))
}

/// Who started this rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Launcher {
    /// Not yet started: this process is the local launcher (and rank 0).
    Local,
    /// A child of commbench's local launcher.
    LocalChild,
    /// Rank and size given by hand.
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

/// The launchers that name a rank and a size in variables, with those variables, in the order
/// they are looked for.
const LAUNCHER_VARS: [(Launcher, &str, &str); 4] = [
    (Launcher::LocalChild, ENV_RANK, ENV_SIZE),
    (
        Launcher::OpenMpi,
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
    ),
    (Launcher::Pmi, "PMI_RANK", "PMI_SIZE"),
    (Launcher::Slurm, "SLURM_PROCID", "SLURM_NTASKS"),
];

/// Rank, size and launcher from the first launcher in [`LAUNCHER_VARS`] whose two variables are
/// both set; `None` when no launcher's are.
fn from_launcher_vars() -> Result<Option<(Rank, u32, Launcher)>> {
    for (launcher, rank_var, size_var) in LAUNCHER_VARS {
        if let (Some(r), Some(s)) = (var(rank_var), var(size_var)) {
            return Ok(Some((
                parse_num(rank_var, &r)?,
                parse_num(size_var, &s)?,
                launcher,
            )));
        }
    }
    Ok(None)
}

impl Launcher {
    /// The job identifier of a rank this launcher started: [`ENV_JOB`] where set, else the
    /// launcher's own job variables. The local launcher has none yet (it makes one up).
    fn job(self) -> Option<String> {
        if self == Launcher::Local {
            return None;
        }
        var(ENV_JOB).or_else(|| match self {
            Launcher::OpenMpi => var("OMPI_MCA_ess_base_jobid").or_else(|| var("PMIX_NAMESPACE")),
            Launcher::Pmi => var("PMI_JOBID").or_else(|| var("PMI_KVSNAME")),
            Launcher::Slurm => var("SLURM_JOB_ID")
                .map(|j| format!("{j}.{}", var("SLURM_STEP_ID").unwrap_or_default())),
            Launcher::Local | Launcher::LocalChild | Launcher::Manual => None,
        })
    }
}

impl RankEnv {
    /// Work out this rank's identity. `manual` is the rank and size given by hand, which win;
    /// then commbench's own variables; then Open MPI, PMI and Slurm. With none of them the
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
        let (rank, size, launcher) = match manual {
            Some((r, s)) => (r, s, Launcher::Manual),
            None => from_launcher_vars()?.unwrap_or((0, default_size, Launcher::Local)),
        };
        let job = launcher.job();
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

    /// The run's token, refused when missing or too short to keep from being guessed.
    pub fn checked_token(&self) -> Result<&str> {
        let token = self.token.as_deref().ok_or_else(|| {
            Error::Config(format!(
                "no run token: set {ENV_TOKEN} to the same secret on every rank ({})",
                rendezvous::TOKEN_HINT
            ))
        })?;
        rendezvous::check_token(token)?;
        Ok(token)
    }
}

/// `n` ranks as threads of this process that meet at a rendezvous on loopback with a fresh
/// token (tests, conformance, benches): `rank` runs on each with its [`Bootstrap`] and the
/// token. Every rank's output in rank order, or the error that most likely caused the failure
/// ([`outputs_or_cause`]); `backend` names the threads and a panic.
///
/// [`Bootstrap`]: rendezvous::Bootstrap
pub fn run_threads<T: Send>(
    n: u32,
    timeout: std::time::Duration,
    backend: &'static str,
    rank: impl Fn(rendezvous::Bootstrap, &str) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    use rendezvous::Bootstrap;
    if n == 0 {
        return Err(Error::Invalid("a run of 0 ranks".into()));
    }
    let token = new_token()?;
    let listener = Bootstrap::listen("127.0.0.1:0")?;
    let addr = listener.local_addr().to_string();
    let results: Vec<Result<T>> = std::thread::scope(|sc| {
        let (token, addr, rank) = (&token, &addr, &rank);
        let handles: Vec<_> = (1..n)
            .map(|r| {
                std::thread::Builder::new()
                    .name(format!("{backend}-rank-{r}"))
                    .spawn_scoped(sc, move || {
                        rank(Bootstrap::connect(addr, r, n, token, timeout)?, token)
                    })
            })
            .collect();
        let mut out = Vec::with_capacity(n as usize);
        out.push(
            listener
                .accept_all(n, token, timeout)
                .and_then(|b| rank(b, token)),
        );
        for (i, h) in handles.into_iter().enumerate() {
            out.push(match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(Error::Backend {
                        backend,
                        message: format!("rank {} panicked", i + 1),
                    })
                }),
                Err(e) => Err(Error::io("starting a rank thread", e)),
            });
        }
        out
    });
    outputs_or_cause(results)
}

/// Every rank's output of a run whose ranks are threads of this process, in rank order; or,
/// when some failed, the error that most likely caused the failure: the first that is not a
/// lost peer (a rank that lost its peer only saw the failure of another), else the first.
pub fn outputs_or_cause<T>(results: Vec<Result<T>>) -> Result<Vec<T>> {
    if results.iter().all(Result::is_ok) {
        return Ok(results.into_iter().flatten().collect());
    }
    let mut errs: Vec<Error> = results.into_iter().filter_map(Result::err).collect();
    let i = errs
        .iter()
        .position(|e| !matches!(e.root(), Error::PeerLost { .. }))
        .unwrap_or(0);
    Err(errs.swap_remove(i))
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

/// The soft limit on this process's open descriptors (`RLIMIT_NOFILE`) and how many it has
/// open now: what a rank that opens connections as it goes has to stay within.
pub fn descriptors() -> (u64, u64) {
    use nix::sys::resource::{getrlimit, Resource};
    let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(s, _)| s);
    // The directory's own descriptor is among those listed.
    let open = std::fs::read_dir("/proc/self/fd").map_or(16, |d| d.count().saturating_sub(1));
    (soft, open as u64)
}

#[cfg(test)]
mod tests {
    use super::switch_path_of;

    #[test]
    fn slurm_topology_addresses_give_the_switches_above_the_host() {
        let of = |a: &str, p: Option<&str>| switch_path_of(a, p);
        assert_eq!(
            of("root.s1.leaf4.node386", Some("switch.switch.switch.node")).as_deref(),
            Some("root.s1.leaf4")
        );
        assert_eq!(
            of("root.leaf4.node386", None).as_deref(),
            Some("root.leaf4")
        );
        assert_eq!(
            of("leaf4.node1", Some("switch.node")).as_deref(),
            Some("leaf4")
        );
        // A pattern that does not match the address, no switch, an empty part: nothing.
        assert_eq!(of("root.leaf4.node1", Some("switch.node")), None);
        assert_eq!(of("node1", Some("node")), None);
        assert_eq!(of("node1", None), None);
        assert_eq!(of("root..node1", None), None);
    }
}
