//! The ucx backend at launch: UCP workers on the tag API between processes started locally
//! (rank 0 holds the rendezvous on loopback, where the worker addresses are exchanged),
//! across hosts under a launcher or by hand (`--rendezvous` and a shared token), or beside MPI
//! (addresses exchanged through MPI).

use super::args::BackendArgs;
#[cfg(feature = "mpi")]
use super::mpi::MpiJob;
use super::{cpu_list, cpus_value, joining, options_entry, Backend, Job, Ran};
use crate::cli::fatal::Fatal;
use commbench::analysis::document::RunConfig;
use commbench::core::method::limits::Transport;
#[cfg(feature = "mpi")]
use commbench::core::Error;
use commbench::core::Program;
use commbench_ucx::UcxConfig;

/// The ucx backend with its options.
#[derive(Debug)]
pub struct Ucx {
    cfg: UcxConfig,
}

impl Backend for Ucx {
    const NAME: &'static str = "ucx";

    fn configure(a: &BackendArgs, job: &Job) -> Result<Self, Fatal> {
        if let Some(r) = &job.rendezvous {
            joining::check_rendezvous(r, job)?;
        }
        let tls = match &a.ucx_tls {
            Some(t) => Some(check_tls(t)?),
            None => None,
        };
        Ok(Ucx {
            cfg: UcxConfig {
                tls,
                timeout: job.timeout,
                cpus: cpu_list(a, job)?,
            },
        })
    }

    fn crowding(&self, ranks: u32, cpus: usize) -> Option<String> {
        (cpus > 0 && ranks as usize > cpus).then(|| {
            format!(
                "{ranks} ranks poll their UCX workers on {cpus} CPU(s): a rank that waits for a \
                 CPU delays every message it sends by a scheduler time slice"
            )
        })
    }

    fn transport(&self, _ranks: u32) -> Transport {
        commbench_ucx::transport()
    }

    fn found_here() -> Option<String> {
        let found = match commbench_ucx::resources(Some("all")) {
            Ok(r) if !r.is_empty() => r.join(", "),
            Ok(_) => "none".to_string(),
            Err(e) => format!("none ({})", e.reason()),
        };
        Some(format!(
            "UCX {} transports here: {found}",
            commbench_ucx::library_version()
        ))
    }

    /// `--ucx-tls` as checked (null: `UCX_TLS` from the environment, recorded beside it, else
    /// UCX's choice; the environment's `backend` record names the transports UCX opened).
    fn record(&self, config: &mut RunConfig) {
        let tls = self
            .cfg
            .tls
            .clone()
            .map_or(serde_json::Value::Null, Into::into);
        let env = std::env::var("UCX_TLS").map_or(serde_json::Value::Null, Into::into);
        config.backend_options.insert(
            Self::NAME.into(),
            options_entry([
                ("ucx_tls", tls),
                ("ucx_tls_environment", env),
                ("cpus", cpus_value(&self.cfg.cpus)),
            ]),
        );
    }

    fn run<P: Program<Output = ()>>(&self, job: &Job, prog: &P) -> Result<Ran, Fatal> {
        joining::over_rendezvous(
            job,
            |rdv| commbench_ucx::run_rank_over(rdv, &self.cfg, prog),
            || prog.gone(),
        )
    }

    #[cfg(feature = "mpi")]
    fn beside_mpi<P: Program<Output = ()>>(&self, job: &MpiJob<'_>, prog: &P) -> Result<(), Error> {
        let mut r = job.mpi.rendezvous(job.timeout)?;
        commbench_ucx::run_rank_over(&mut r, &self.cfg, prog)
    }
}

/// `--ucx-tls`, checked before any rank starts: a list of UCX transports or aliases each
/// found here, `cma` only beside `posix` or `sysv` (it moves bulk data only).
fn check_tls(tls: &str) -> Result<String, Fatal> {
    let hint = "for example --ucx-tls posix,self, --ucx-tls tcp or --ucx-tls sm (ucx_info -d lists the transports)";
    let names: Vec<&str> = tls.split(',').map(str::trim).collect();
    if names.iter().any(|n| n.is_empty()) {
        return Err(Fatal::usage(
            format!("--ucx-tls {tls:?}: an empty transport name"),
            hint,
        ));
    }
    let found = commbench_ucx::resources(Some("all")).map_err(|e| {
        Fatal::run(
            format!("UCX cannot open a context here: {}", e.reason()),
            None,
        )
    })?;
    let tl_names: Vec<&str> = found.iter().filter_map(|r| r.split('/').next()).collect();
    let exclude = names[0].starts_with('^');
    for n in &names {
        let n = n.trim_start_matches('^');
        if !tl_names.contains(&n) && !commbench_ucx::TLS_ALIASES.contains(&n) {
            let mut have: Vec<&str> = tl_names.clone();
            have.dedup();
            return Err(Fatal::usage(
                format!(
                    "--ucx-tls: UCX has no transport `{n}` here (found: {}; aliases: sm, shm, all, ...)",
                    have.join(", ")
                ),
                hint,
            ));
        }
    }
    let with = |x: &str| names.contains(&x);
    if !exclude
        && with("cma")
        && !["posix", "sysv", "sm", "shm", "mm", "all"]
            .iter()
            .any(|x| with(x))
    {
        return Err(Fatal::usage(
            format!("--ucx-tls {tls}: cma moves only bulk data (zero-copy) and needs posix or sysv beside it"),
            "for example --ucx-tls posix,cma,self",
        ));
    }
    Ok(names.join(","))
}
