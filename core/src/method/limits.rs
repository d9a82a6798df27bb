//! What a run may ask for, and what it will cost, known before anything starts.
//!
//! Two kinds of bound keep a run from starting when it cannot finish:
//!
//! * **counts** ([`MAX_POINTS`], [`MAX_TRIALS`], [`MAX_ITERATIONS`], [`MAX_TIMER_SAMPLES`],
//!   [`MAX_WINDOW`]): fixed limits, each far above what the method of Luecke et al. (2009)
//!   uses, that keep one setting from asking for years or terabytes on its own
//!   ([`super::MethodConfig::check`]);
//! * **time** ([`RunCost`]): a lower bound of the run's duration from its counts, each message
//!   costing at least [`MESSAGE_FLOOR_NS`] plus its bytes at [`BYTES_PER_NS_CEILING`]; a run
//!   whose lower bound is over [`LONGEST_RUN`] is refused, one over [`LONG_RUN`] says so.
//!
//! A backend describes what it carries with a [`Transport`] (the largest message, the receives
//! it keeps posted, what it maps in every process), and a measuring rank's bookkeeping per
//! message is [`PER_MESSAGE_OVERHEAD`]. The plan's checks against a host and a transport (each
//! size against the largest message, the memory a run needs against what this host has
//! available and the address-space limit) live in the command line's plan
//! (`src/cli/plan/limits.rs`).
//!
//! Buffers proportional to a size or a count are allocated fallibly ([`try_zeroed`],
//! [`try_with_capacity`], from [`crate::method::alloc`]): a failure is an error naming what was
//! being allocated and how much, never an abort.

use crate::method::progress::Stage;
use crate::method::{Invalid, MethodConfig, NppChoice, Setting};
use std::time::Duration;

// The allocation helpers and the unit formatters the limits' messages use, reachable here as
// well: backends and the CLI name them through this module.
pub use crate::method::alloc::{cannot_allocate, try_with_capacity, try_zeroed};
pub use crate::method::units::{human_bytes, human_duration};

/// Most points one run measures: sizes times npp values. Each point keeps its trial times and
/// its analysis on rank 0 and costs a warm-up, an npp estimate and its trials; ten thousand
/// already takes hours at the default 10000 trials.
pub const MAX_POINTS: usize = 10_000;

/// Most trials per point (and npp-estimation trials per size). Every trial follows a barrier
/// and a handshake and keeps an 8-byte time; 10^8 trials are 800 MB of times per point and
/// minutes of barriers, far above the 2^25 of Luecke et al. (2009) Appendix B.
pub const MAX_TRIALS: u64 = 100_000_000;

/// Most iterations of one loop: a given npp, `npp_init`, the warm-up. The npp formula caps
/// what it calculates at the same value; 10^9 iterations of a ping-pong take minutes even at
/// the fastest, and a trial of 10^9 iterations per each of thousands of trials takes weeks.
pub const MAX_ITERATIONS: u64 = 1_000_000_000;

/// Most clock-read pairs of the timer characterisation: 2^32, 256 times the default 2^24,
/// a minute or more of reading the clock.
pub const MAX_TIMER_SAMPLES: u64 = 1 << 32;

/// Most sends outstanding in one window. Each holds a buffer, a request and a completion in the
/// transport's tables; osu_bw uses 64.
pub const MAX_WINDOW: u32 = 1 << 16;

/// A run whose lower bound of duration is above this is refused: it cannot be what was meant.
pub const LONGEST_RUN: Duration = Duration::from_secs(7 * 24 * 3600);

/// A run whose lower bound of duration is above this says so before it starts.
pub const LONG_RUN: Duration = Duration::from_secs(3600);

/// The least one message costs, ns: below the one-way time of every transport commbench
/// measures (shared memory included) and of the simulator's own work per message.
pub const MESSAGE_FLOOR_NS: f64 = 100.0;

/// Bytes per ns no message moves faster than (50 GB/s, above one core's copy bandwidth).
pub const BYTES_PER_NS_CEILING: f64 = 50.0;

/// The least one pair of clock reads of the timer characterisation costs, ns.
pub const CLOCK_PAIR_FLOOR_NS: f64 = 10.0;

/// Control messages of every trial besides its kernel: a barrier (at least two) and the
/// handshake.
const CONTROL_MESSAGES_PER_TRIAL: f64 = 3.0;

/// Bytes of bookkeeping a transport holds per outstanding message besides its payload (the
/// vector, the request, the completion).
pub const PER_MESSAGE_OVERHEAD: u64 = 256;

/// The least time one message of `size` bytes takes, ns.
pub fn message_floor_ns(size: u64) -> f64 {
    MESSAGE_FLOOR_NS + size as f64 / BYTES_PER_NS_CEILING
}

/// What a transport carries and where its ranks live, for the checks before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transport {
    /// Its name, as messages give it (`shm`).
    pub name: &'static str,
    /// The largest message it carries, bytes.
    pub max_message: u64,
    /// Why, in a few words (`its records carry a 32-bit length`).
    pub max_message_why: &'static str,
    /// Every rank runs inside this one process (the simulator): it holds every rank's buffers
    /// and the messages in flight.
    pub one_process: bool,
    /// Address space each process of the run maps besides its buffers (a shared segment, the
    /// simulator's coroutine stacks), bytes.
    pub process_bytes: u64,
    /// The most receives one rank can keep posted at once (a provider's receive queue).
    pub max_posted_receives: u64,
    /// Why, in a few words (`the shm provider's receive queue`).
    pub max_posted_why: &'static str,
    /// The bytes of a message it delivers (`u64::MAX`: all of them; a simulated machine may
    /// carry only a message's first bytes), which bounds the sizes whose bytes a run can
    /// check.
    pub payload_bytes: u64,
}

impl Transport {
    /// A transport that carries any size, its ranks separate processes.
    pub fn unbounded(name: &'static str) -> Self {
        Transport {
            name,
            max_message: u64::MAX,
            max_message_why: "",
            one_process: false,
            process_bytes: 0,
            max_posted_receives: u64::MAX,
            max_posted_why: "",
            payload_bytes: u64::MAX,
        }
    }
}

/// A lower bound of a run's duration, stage by stage, from its counts: every message costs at
/// least [`message_floor_ns`], every trial three control messages more (barrier and handshake),
/// and an npp to be calculated is at least 1; once the timer's resolution is known, a timing
/// loop with a calculated npp lasts at least `res_npp x res_timing` (that is what the npp
/// formula of Luecke et al. (2009) §3.3 aims at). It also weighs the stages, so that the share
/// of the run done can be told from a progress report ([`RunCost::fraction`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RunCost {
    /// ns: the timer characterisation.
    timer: f64,
    /// ns per size: (warm-up, npp estimation, trials over every npp value).
    sizes: Vec<(f64, f64, f64)>,
    /// Cumulative ns before each size (after the timer).
    before: Vec<f64>,
    total: f64,
}

impl RunCost {
    /// The cost of measuring every size of `cfg` with `trips(size)` message times per
    /// iteration, on a clock of resolution `res_timing_ns` (0 while unknown).
    pub fn new(
        cfg: &MethodConfig,
        sizes: &[u64],
        trips: &dyn Fn(u64) -> u64,
        res_timing_ns: f64,
    ) -> Self {
        let control = CONTROL_MESSAGES_PER_TRIAL * message_floor_ns(8);
        let trials = cfg.trials as f64;
        let npps: Vec<f64> = match &cfg.npp {
            NppChoice::Auto { .. } => vec![1.0],
            other => other.fixed_values().iter().map(|&n| n as f64).collect(),
        };
        let timer = cfg.timer_samples as f64 * CLOCK_PAIR_FLOOR_NS;
        let mut v = Vec::with_capacity(sizes.len());
        let mut before = Vec::with_capacity(sizes.len());
        let mut total = timer;
        for &s in sizes {
            let it = trips(s).max(1) as f64 * message_floor_ns(s);
            let warm = cfg.warmup as f64 * it;
            let est = match cfg.npp {
                NppChoice::Auto {
                    npp_init, npptrial, ..
                } => npptrial as f64 * (control + npp_init as f64 * it),
                _ => 0.0,
            };
            let timed: f64 = match cfg.npp {
                NppChoice::Auto { res_npp, .. } => {
                    let aim = res_npp as f64 * res_timing_ns.max(0.0);
                    trials * (control + it.max(aim))
                }
                _ => npps.iter().map(|n| trials * (control + n * it)).sum(),
            };
            before.push(total);
            total += warm + est + timed;
            v.push((warm, est, timed));
        }
        RunCost {
            timer,
            sizes: v,
            before,
            total,
        }
    }

    /// The least the whole run takes.
    pub fn floor(&self) -> Duration {
        Duration::from_secs_f64((self.total / 1e9).min(1e15))
    }

    /// The share of the run's cost done at a progress report: `done` of `total` units of
    /// `stage` of size `size_index` (a study of several npp values reports its trials once per
    /// value; the share of each is taken as equal).
    pub fn fraction(&self, size_index: usize, stage: Stage, done: u64, total: u64) -> f64 {
        if self.total <= 0.0 {
            return 0.0;
        }
        let part = if total == 0 {
            0.0
        } else {
            (done as f64 / total as f64).clamp(0.0, 1.0)
        };
        let at = match (stage, self.sizes.get(size_index)) {
            (Stage::Timer, _) | (_, None) => self.timer * part,
            (Stage::Warmup, Some(&(w, _, _))) => self.before[size_index] + w * part,
            (Stage::Npp, Some(&(w, e, _))) => self.before[size_index] + w + e * part,
            (Stage::Trials | Stage::Rounds | Stage::Retests, Some(&(w, e, t))) => {
                self.before[size_index] + w + e + t * part
            }
        };
        (at / self.total).clamp(0.0, 1.0)
    }

    /// Refuse a run whose lower bound is over [`LONGEST_RUN`], naming the setting that makes
    /// up most of it.
    pub fn check(&self, cfg: &MethodConfig) -> std::result::Result<(), Invalid> {
        let floor = self.floor();
        if floor <= LONGEST_RUN {
            return Ok(());
        }
        let (mut warm, mut est, mut timed) = (0.0, 0.0, 0.0);
        for &(w, e, t) in &self.sizes {
            warm += w;
            est += e;
            timed += t;
        }
        let npp_max = cfg.npp.fixed_values().into_iter().max().unwrap_or(1);
        let (setting, what) = if self.timer >= warm.max(est).max(timed) {
            (
                Setting::TimerSamples,
                format!("{} pairs of clock reads", cfg.timer_samples),
            )
        } else if warm >= est.max(timed) {
            (
                Setting::Warmup,
                format!("{} warm-up iterations per size", cfg.warmup),
            )
        } else if est >= timed {
            (
                Setting::NppCalculation,
                "the npp estimation's trials and iterations".to_string(),
            )
        } else if npp_max > cfg.trials {
            (
                Setting::Npp,
                format!("{} trials of npp {npp_max} per size", cfg.trials),
            )
        } else {
            (
                Setting::Trials,
                format!("{} trials of npp {npp_max} per size", cfg.trials),
            )
        };
        Err(Invalid {
            setting,
            reason: format!(
                "{what} over {} size(s) take at least {} (every message at least {} ns), more \
                 than the {} a run may take",
                self.sizes.len(),
                human_duration(floor),
                MESSAGE_FLOOR_NS,
                human_duration(LONGEST_RUN)
            ),
            hint: Some("ask for fewer iterations, trials or sizes".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_cost_floors_and_fractions() {
        let c = MethodConfig {
            sizes: vec![8, 1 << 20],
            trials: 1000,
            warmup: 10,
            npp: NppChoice::Fixed(100),
            timer_samples: 1000,
            ..MethodConfig::default()
        };
        let cost = RunCost::new(&c, &c.sizes, &|_| 2, 0.0);
        let f8 = message_floor_ns(8);
        let f1m = message_floor_ns(1 << 20);
        let want = 1000.0 * CLOCK_PAIR_FLOOR_NS
            + 10.0 * 2.0 * (f8 + f1m)
            + 1000.0 * (2.0 * 3.0 * f8 + 100.0 * 2.0 * (f8 + f1m));
        assert!((cost.total - want).abs() < 1.0, "{} vs {want}", cost.total);
        assert_eq!(cost.fraction(0, Stage::Timer, 0, 1), 0.0);
        let mid = cost.fraction(1, Stage::Trials, 500, 1000);
        assert!(mid > 0.5 && mid < 1.0, "{mid}");
        assert_eq!(cost.fraction(1, Stage::Trials, 1000, 1000), 1.0);
        // Monotonic through the stages.
        let order = [
            cost.fraction(0, Stage::Warmup, 0, 10),
            cost.fraction(0, Stage::Trials, 1000, 1000),
            cost.fraction(1, Stage::Warmup, 5, 10),
            cost.fraction(1, Stage::Trials, 1, 1000),
        ];
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
        assert!(cost.check(&c).is_ok());
        // A calculated npp: each timing loop lasts at least res_npp x res_timing once the
        // resolution is known.
        let auto = MethodConfig {
            npp: MethodConfig::default().npp,
            sizes: vec![8],
            ..c
        };
        let blind = RunCost::new(&auto, &auto.sizes, &|_| 2, 0.0);
        let seen = RunCost::new(&auto, &auto.sizes, &|_| 2, 1000.0);
        let loop_ns = 50.0 * 1000.0;
        let more = 1000.0 * (loop_ns - 2.0 * f8);
        assert!(((seen.total - blind.total) - more).abs() < 1.0);
    }

    #[test]
    fn runs_of_weeks_are_refused_naming_the_setting() {
        let c = MethodConfig {
            npp: NppChoice::Fixed(MAX_ITERATIONS),
            ..MethodConfig::default()
        };
        let e = RunCost::new(&c, &c.sizes, &|_| 2, 0.0)
            .check(&c)
            .unwrap_err();
        assert_eq!(e.setting, Setting::Npp, "{}", e.reason);
        assert!(e.reason.contains("23 days"), "{}", e.reason);
        let c = MethodConfig {
            sizes: (1..=2000).map(|k| k << 20).collect(),
            trials: MAX_TRIALS,
            ..MethodConfig::default()
        };
        let e = RunCost::new(&c, &c.sizes, &|_| 2, 0.0)
            .check(&c)
            .unwrap_err();
        assert_eq!(e.setting, Setting::Trials, "{}", e.reason);
        // The default run is far from it.
        let c = MethodConfig::default();
        let cost = RunCost::new(&c, &c.sizes, &|_| 2, 0.0);
        assert!(cost.floor() < Duration::from_secs(1));
    }
}
