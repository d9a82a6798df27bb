//! The sim backend at launch: every node of the simulated machine (a hypercube, or hosts
//! under a tree of switches) in this process, on virtual time; its size is the machine's.

use super::args::BackendArgs;
use super::{options_entry, Backend, Cube, Job, Ran};
use crate::cli::fatal::Fatal;
use crate::cli::signals;
use commbench::analysis::document::RunConfig;
use commbench::core::method::engine::TimerOnly;
use commbench::core::method::limits::Transport;
use commbench::core::method::timer::TimerReport;
use commbench::core::method::MethodConfig;
use commbench::core::Program;
use commbench_sim::SimConfig;

/// The sim backend with its machine, and `--sim-config` as given.
#[derive(Debug)]
pub struct Sim(Box<SimConfig>, Option<String>);

/// The machine simulated when `--sim-config` is not given.
const DEFAULT_MACHINE: &str = "ncube7";

/// Who starts a simulated run's ranks, as the document names it.
const LAUNCHER: &str = "simulator";

impl Backend for Sim {
    const NAME: &'static str = "sim";

    fn configure(a: &BackendArgs, _job: &Job) -> Result<Self, Fatal> {
        let n = a.sim_config.as_deref().unwrap_or(DEFAULT_MACHINE);
        let given = a.sim_config.clone();
        let c = SimConfig::load(n).map_err(|e| {
            Fatal::usage(
                format!("--sim-config {n}: {e}"),
                format!(
                    "use a preset ({}) or the path of a TOML file; docs/simulator.md describes the format",
                    SimConfig::preset_names().join(", ")
                ),
            )
        })?;
        commbench_sim::check_mappings(&c).map_err(|e| {
            Fatal::usage(
                format!("--sim-config {n}: {e}"),
                "a machine of at most 2^14 ranks fits the default limit",
            )
        })?;
        Ok(Sim(Box::new(c), given))
    }

    fn fixed_ranks(&self) -> Option<(u32, String)> {
        let n = self.0.nodes();
        Some((
            n,
            format!("the simulated machine `{}` has {n} nodes", self.0.name),
        ))
    }

    fn own_launcher(&self) -> Option<&'static str> {
        Some(LAUNCHER)
    }

    /// The cube the machine routes over; `None` on a tree of switches, whose ranks the
    /// benchmarks place as on any transport that reaches every rank.
    fn hypercube(&self) -> Option<Cube> {
        if self.0.tree.is_some() {
            return None;
        }
        Some(Cube {
            dimensions: self.0.dimensions,
            ranks: self.0.ranks(),
            larger: "a larger cube (--sim-config with more dimensions)",
        })
    }

    fn transport(&self, _ranks: u32) -> Transport {
        commbench_sim::transport(&self.0)
    }

    fn check_run(
        &self,
        method: &MethodConfig,
        points: &[u64],
        trips: &dyn Fn(u64) -> u64,
    ) -> Result<(), Fatal> {
        commbench_sim::check_run(&self.0, method, points, trips).map_err(|e| {
            let given = self.1.as_deref().unwrap_or(DEFAULT_MACHINE);
            Fatal::usage(
                format!("--sim-config {given}: {e}"),
                "docs/simulator.md §6 gives the bounds of a machine's values",
            )
        })
    }

    fn models_caches(&self) -> bool {
        commbench_sim::MODELS_CACHES
    }

    fn record(&self, config: &mut RunConfig) {
        config.sim_config = self.1.clone();
        let given = self.1.as_deref().unwrap_or(DEFAULT_MACHINE);
        config.backend_options.insert(
            Self::NAME.into(),
            options_entry([
                ("sim_config", given.into()),
                ("machine", self.0.name.clone().into()),
            ]),
        );
    }

    fn run<P: Program<Output = ()>>(&self, _job: &Job, prog: &P) -> Result<Ran, Fatal> {
        let result = commbench_sim::run_until(&self.0, prog, &signals::STOP).map(drop);
        Ok(Ran {
            ranks: self.0.nodes(),
            launcher: LAUNCHER.into(),
            rank: 0,
            result,
        })
    }

    fn timer(&self, samples: u64) -> Result<TimerReport, Fatal> {
        let p = TimerOnly { samples, rank: 0 };
        let out = commbench_sim::run(&self.0, &p).map_err(|e| Fatal::run(e.to_string(), None))?;
        out.into_iter()
            .flatten()
            .next()
            .ok_or_else(|| Fatal::run("rank 0 returned no timer report", None))
    }
}
