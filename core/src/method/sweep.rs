//! A sweep of streaming windows and pairs (`bandwidth --window 1..128`, OSU's `-V`; `--pairs
//! 1..8:+1`): every size measured once per number of pairs `k` and window `W`, after one timer
//! characterisation, each point recording where it lies ([`SweepAt`]). The windows' profile
//! and the pairs' sweep are what the max-rate model of Gropp, Olson and Samfass is fitted to
//! (in the analysis).
//!
//! The `k` pairs of a step are the first `k` of the run's placement, so that every step's pairs
//! run where the largest step's do; the ranks of the other pairs only join the barriers.

use crate::method::benchmark::Benchmark;
use crate::method::engine::{KernelSpec, Measurement, Steps};
use crate::method::kernels::{Pattern, PatternKind};
use crate::method::pairs::SweepAt;
use crate::method::{Invalid, MethodConfig};
use crate::transport::error::{Error, Result};
use crate::transport::{Endpoint, Rank};

/// Windows and numbers of pairs, every combination measured over the configured sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSweep {
    /// Each pair streams both ways (osu_bibw, IMB Biband).
    pub bidirectional: bool,
    /// Sends outstanding per window, in the order measured.
    pub windows: Vec<u32>,
    /// Pairs streaming at once, in the order measured; each at most the pairs the
    /// configuration places (1 without pairs).
    pub pairs: Vec<u32>,
}

impl StreamSweep {
    /// The pattern of window `w`.
    fn kind(&self, w: u32) -> PatternKind {
        if self.bidirectional {
            PatternKind::BiBandwidth { window: w }
        } else {
            PatternKind::Bandwidth { window: w }
        }
    }

    /// Every step, `(pairs, window)`, the pairs outermost.
    pub fn steps(&self) -> Vec<SweepAt> {
        let mut v = Vec::with_capacity(self.pairs.len() * self.windows.len());
        for &pairs in &self.pairs {
            for &window in &self.windows {
                v.push(SweepAt { window, pairs });
            }
        }
        v
    }

    /// The configuration of step `at`: its first `at.pairs` pairs.
    fn step_cfg(&self, cfg: &MethodConfig, at: SweepAt) -> MethodConfig {
        MethodConfig {
            pairs: cfg.pairs.as_ref().map(|c| c.first(at.pairs as usize)),
            ..cfg.clone()
        }
    }
}

impl Benchmark for StreamSweep {
    fn command(&self) -> &'static str {
        "bandwidth"
    }

    /// The largest window's messages: what a trial's least duration is taken from.
    fn trips(&self, size: u64) -> u64 {
        self.windows
            .iter()
            .map(|&w| self.kind(w).trips_per_iteration(size))
            .max()
            .unwrap_or(1)
    }

    /// The buffers of the largest window.
    fn buffer_bytes(&self, cfg: &MethodConfig, size: u64) -> Option<u64> {
        let mut most = 0;
        for &w in &self.windows {
            most = most.max(self.kind(w).buffer_bytes(cfg, size)?);
        }
        Some(most)
    }

    /// Every window bounded as one window is, at least one window and one number of pairs.
    fn check(&self) -> std::result::Result<(), Invalid> {
        if self.windows.is_empty() || self.pairs.is_empty() {
            return Err(Invalid {
                setting: crate::method::Setting::Window,
                reason: "a sweep needs at least one window and one number of pairs".into(),
                hint: None,
            });
        }
        for &w in &self.windows {
            self.kind(w).check()?;
        }
        Ok(())
    }

    fn points(&self, cfg: &MethodConfig, _ranks: u32) -> Vec<u64> {
        let steps = self.steps().len();
        let mut v = Vec::with_capacity(steps * cfg.sizes.len());
        for _ in 0..steps {
            v.extend_from_slice(&cfg.sizes);
        }
        v
    }

    fn places_messages(&self) -> bool {
        true
    }

    fn streams(&self) -> bool {
        true
    }

    /// The first window's pattern (`config.pattern`); each point records its own window.
    fn recorded_pattern(&self) -> PatternKind {
        self.kind(self.windows.first().copied().unwrap_or(1))
    }
}

impl KernelSpec for StreamSweep {
    type Kernel<E: Endpoint> = Pattern;

    /// The first step's kernel (the program runs every step itself, [`StreamSweep::run`]).
    fn kernel<E: Endpoint>(&self, me: Rank, cfg: &MethodConfig) -> Result<Pattern> {
        let at = self
            .steps()
            .first()
            .copied()
            .ok_or_else(|| Error::Config("an empty sweep".into()))?;
        let step = self.step_cfg(cfg, at);
        Ok(
            <PatternKind as KernelSpec>::kernel::<E>(&self.kind(at.window), me, &step)?
                .in_sweep(at),
        )
    }

    fn steps(&self, cfg: &MethodConfig) -> usize {
        self.steps().len() * cfg.sizes.len()
    }

    fn run<E: Endpoint>(&self, m: &Measurement<'_, Self>, ep: &mut E) -> Result<()> {
        Benchmark::check(self).map_err(|e| Error::Config(e.reason))?;
        let cfg = m.cfg.clone();
        cfg.validate(ep.size())?;
        let most = cfg.pairs.as_ref().map_or(1, |c| c.pairs.len()) as u32;
        if let Some(k) = self.pairs.iter().find(|&&k| k == 0 || k > most) {
            return Err(Error::Config(format!(
                "a step of {k} pairs: the run places {most}"
            )));
        }
        let timer = m.start(ep, &cfg)?;
        let steps = self.steps();
        let n = cfg.sizes.len();
        for (i, &at) in steps.iter().enumerate() {
            let step = self.step_cfg(&cfg, at);
            let kind = self.kind(at.window);
            let mut kernel =
                <PatternKind as KernelSpec>::kernel::<E>(&kind, ep.rank(), &step)?.in_sweep(at);
            let share = Steps {
                first: i * n,
                total: steps.len() * n,
            };
            m.measure_kernel(ep, &mut kernel, &step, timer, share)?;
        }
        ep.barrier().map_err(|e| e.in_phase("final barrier"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::pairs::{Concurrent, Placement, StartSync};

    #[test]
    fn steps_go_pairs_outermost_and_take_the_first_pairs() {
        let s = StreamSweep {
            bidirectional: false,
            windows: vec![1, 8],
            pairs: vec![1, 3],
        };
        let at: Vec<(u32, u32)> = s.steps().iter().map(|a| (a.pairs, a.window)).collect();
        assert_eq!(at, [(1, 1), (1, 8), (3, 1), (3, 8)]);
        let cfg = MethodConfig {
            sizes: vec![8, 64, 512],
            pairs: Some(Concurrent {
                pairs: Placement::Block.pairs(3),
                placement: Placement::Block,
                start: StartSync::Barrier,
            }),
            ..MethodConfig::default()
        };
        let one = s.step_cfg(&cfg, s.steps()[1]);
        assert_eq!(one.pairs.as_ref().map(|c| c.pairs.len()), Some(1));
        assert_eq!(one.pairs.as_ref().map(|c| c.pairs[0].receiver), Some(3));
        assert_eq!(Benchmark::points(&s, &cfg, 6).len(), 12);
        assert_eq!(KernelSpec::steps(&s, &cfg), 12);
        assert_eq!(Benchmark::trips(&s, 1 << 20), 8);
        let bad = StreamSweep {
            windows: vec![4, 0],
            ..s.clone()
        };
        assert!(Benchmark::check(&bad).is_err());
    }
}
