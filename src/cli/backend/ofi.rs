//! The ofi backend at launch: a libfabric provider's tagged RDM endpoints between processes
//! started locally (rank 0 holds the rendezvous on loopback, where the endpoints' addresses
//! are exchanged), across hosts under a launcher or by hand (`--rendezvous` and a shared
//! token), or beside MPI (addresses exchanged through MPI).

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
use commbench_ofi::{Attrs, OfiConfig};

/// The ofi backend with its options, the provider it found, and `--ofi-provider` as given.
#[derive(Debug)]
pub struct Ofi {
    cfg: OfiConfig,
    attrs: Attrs,
    given: Option<String>,
}

impl Backend for Ofi {
    const NAME: &'static str = "ofi";

    fn configure(a: &BackendArgs, job: &Job) -> Result<Self, Fatal> {
        if let Some(r) = &job.rendezvous {
            joining::check_rendezvous(r, job)?;
        }
        let given = a.ofi_provider.clone();
        let provider = given.clone();
        if provider.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(Fatal::usage(
                "--ofi-provider: an empty provider name",
                "name a provider, e.g. --ofi-provider shm, or drop --ofi-provider for libfabric's first choice",
            ));
        }
        let mut attrs = commbench_ofi::probe(provider.as_deref()).map_err(|e| {
            Fatal::usage(
                format!("--ofi-provider: {}", e.reason()),
                "name one of the available providers, e.g. --ofi-provider shm or --ofi-provider 'tcp;ofi_rxm' (fi_info -l lists them)",
            )
        })?;
        // Seed 004's posted queue: a longer receive queue where the provider offers one (the
        // checks before the run refuse a queue it cannot hold), the same provider kept.
        let mut rx_size = 0;
        let want = job
            .posted_receives
            .saturating_add(commbench_ofi::CONTROL_RECEIVES);
        if job.posted_receives > 0 && want > attrs.rx_size as u64 {
            let longer = commbench_ofi::probe_with_rx(Some(&attrs.provider), want as usize);
            if let Ok(longer) = longer {
                rx_size = want as usize;
                attrs = longer;
            }
        }
        if let (true, Some(why)) = (job.wildcards, attrs.wildcard_defect()) {
            return Err(Fatal::usage(
                format!("this benchmark posts wildcard receives, and {why}"),
                "run it with --ofi-provider 'tcp;ofi_rxm' (or another provider), or on the shm backend",
            ));
        }
        Ok(Ofi {
            cfg: OfiConfig {
                // The provider probed, so every rank opens the same one.
                provider: Some(attrs.provider.clone()),
                timeout: job.timeout,
                cpus: cpu_list(a, job)?,
                rx_size,
                ..OfiConfig::default()
            },
            attrs,
            given,
        })
    }

    fn found_here() -> Option<String> {
        let found = commbench_ofi::providers();
        let found = if found.is_empty() {
            "none".to_string()
        } else {
            found.join(", ")
        };
        Some(format!(
            "libfabric {} providers with a tagged RDM endpoint here: {found}",
            commbench_ofi::library_version()
        ))
    }

    /// The provider every rank opened (the one probed when `--ofi-provider` was not given,
    /// so the document reproduces the run), the name as given, and the receive queue asked for.
    fn record(&self, config: &mut RunConfig) {
        let given = self
            .given
            .clone()
            .map_or(serde_json::Value::Null, Into::into);
        config.backend_options.insert(
            Self::NAME.into(),
            options_entry([
                ("ofi_provider", self.attrs.provider.clone().into()),
                ("ofi_provider_given", given),
                ("rx_size", (self.cfg.rx_size as u64).into()),
                ("cpus", cpus_value(&self.cfg.cpus)),
            ]),
        );
    }

    fn crowding(&self, ranks: u32, cpus: usize) -> Option<String> {
        (cpus > 0 && ranks as usize > cpus).then(|| {
            format!(
                "{ranks} ranks poll their completion queues on {cpus} CPU(s): a rank that waits \
                 for a CPU delays every message it sends by a scheduler time slice"
            )
        })
    }

    fn posted_queue_hint(&self) -> &'static str {
        "shorter queues (--lengths), or a provider with a longer receive queue (--ofi-provider 'tcp;ofi_rxm')"
    }

    fn transport(&self, _ranks: u32) -> Transport {
        commbench_ofi::transport(Some(&self.attrs))
    }

    fn run<P: Program<Output = ()>>(&self, job: &Job, prog: &P) -> Result<Ran, Fatal> {
        joining::over_rendezvous(
            job,
            |rdv| commbench_ofi::run_rank_over(rdv, &self.cfg, prog),
            || prog.gone(),
        )
    }

    #[cfg(feature = "mpi")]
    fn beside_mpi<P: Program<Output = ()>>(&self, job: &MpiJob<'_>, prog: &P) -> Result<(), Error> {
        let mut r = job.mpi.rendezvous(job.timeout)?;
        commbench_ofi::run_rank_over(&mut r, &self.cfg, prog)
    }
}
