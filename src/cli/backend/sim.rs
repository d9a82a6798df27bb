//! The sim backend at launch: every node of the simulated hypercube in this process, on
//! virtual time; its size is the machine's.

use super::{Backend, Job, Ran};
use crate::cli::args::BackendArgs;
use crate::cli::fatal::Fatal;
use commbench::core::method::engine::TimerOnly;
use commbench::core::method::limits::Transport;
use commbench::core::method::timer::TimerReport;
use commbench::core::Program;
use commbench_sim::SimConfig;

/// The sim backend with its machine.
#[derive(Debug)]
pub struct Sim(Box<SimConfig>);

impl Backend for Sim {
    const NAME: &'static str = "sim";

    fn configure(a: &BackendArgs, _job: &Job) -> Result<Self, Fatal> {
        let n = a.sim_config.as_deref().unwrap_or("ncube7");
        SimConfig::load(n).map(|c| Sim(Box::new(c))).map_err(|e| {
            Fatal::usage(
                format!("--sim-config {n}: {e}"),
                format!(
                    "use a preset ({}) or the path of a TOML file; docs/simulator.md describes the format",
                    SimConfig::preset_names().join(", ")
                ),
            )
        })
    }

    fn fixed_ranks(&self) -> Option<(u32, String)> {
        let n = self.0.nodes();
        Some((
            n,
            format!("the simulated machine `{}` has {n} nodes", self.0.name),
        ))
    }

    fn hypercube(&self) -> Option<(u32, u32)> {
        Some((self.0.dimensions, self.0.ranks()))
    }

    fn transport(&self, _ranks: u32) -> Transport {
        commbench_sim::transport(&self.0)
    }

    fn run<P: Program<Output = ()>>(&self, _job: &Job, prog: &P) -> Result<Ran, Fatal> {
        let result = commbench_sim::run(&self.0, prog).map(drop);
        Ok(Ran {
            ranks: self.0.nodes(),
            launcher: "simulator".into(),
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
