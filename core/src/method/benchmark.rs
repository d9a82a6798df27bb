//! What a plan asks of a benchmark before any rank starts (design §3, §8): its name, the
//! messages one iteration times, the memory a rank holds for it, the receives it keeps posted,
//! whether it takes wildcards, its own checks, the points it measures and what the result
//! document records of it. Each benchmark family answers for itself, next to its kernels
//! (`kernels`, `transpose`, `sixtimes`, `queue`, `allpairs`), so that the command line asks
//! rather than knowing each one.

use crate::method::{Invalid, MethodConfig, NppChoice, PatternKind};
use crate::transport::error::Result;

/// The questions a plan asks of a benchmark. Object safe: the command line holds any
/// benchmark as `&dyn Benchmark`.
pub trait Benchmark {
    /// The command that measures it, as messages about it name it (`pingpong`, `queue
    /// posted`, `overhead`, ...).
    fn command(&self) -> &'static str;

    /// Messages one iteration times for messages of `size` bytes: what a trial's time is
    /// divided by, and a trial's least duration multiplied by (core `limits::RunCost`).
    fn trips(&self, size: u64) -> u64;

    /// Bytes one measuring rank holds for messages of `size` bytes under `cfg` (its buffers
    /// and their bookkeeping; `None`: more than 64 bits count), for the memory check.
    fn buffer_bytes(&self, cfg: &MethodConfig, size: u64) -> Option<u64>;

    /// The receives a rank keeps posted at once, at least; 0 for the benchmarks that post a
    /// handful (the check against a transport's receive queue).
    fn posted_receives(&self, cfg: &MethodConfig) -> u64 {
        let _ = cfg;
        0
    }

    /// Whether it posts receives of any source or any tag (a transport may not match them).
    fn wildcards(&self) -> bool {
        false
    }

    /// Its own settings, checked (a streaming window's bound).
    fn check(&self) -> std::result::Result<(), Invalid> {
        Ok(())
    }

    /// The ranks it needs where every rank reaches every other directly.
    fn ranks_needed(&self) -> u32 {
        2
    }

    /// Its ranks, checked where the run places them: on a hypercube of dimension `hypercube`
    /// the transport routes over, or among `size` ranks that all reach each other.
    fn check_placement(&self, hypercube: Option<u32>, size: u32, sizes: &[u64]) -> Result<()> {
        let _ = (hypercube, size, sizes);
        Ok(())
    }

    /// The sizes of the messages it sends, for a transport's largest message: the sizes
    /// measured, unless a point is made of smaller messages (a transpose sends columns).
    fn message_sizes(&self, cfg: &MethodConfig) -> Vec<u64> {
        cfg.sizes.clone()
    }

    /// The size of every point it measures in a run of `ranks` ranks, in order, for the run's
    /// least duration and the room its trial times take: each size once, unless the
    /// benchmark measures a size more than once (once per queue, once per ordered pair).
    fn points(&self, cfg: &MethodConfig, ranks: u32) -> Vec<u64> {
        let _ = ranks;
        cfg.sizes.clone()
    }

    /// Whether it fills and places its messages itself, so that they can be checked
    /// (`--validate`) and placed at an alignment (`--align`, `--offset`).
    fn places_messages(&self) -> bool {
        false
    }

    /// Whether it streams a window of messages, whose buffers can be one (`--buffers single`).
    fn streams(&self) -> bool {
        false
    }

    /// The result document's `config.pattern`: a pattern kernel's own; the other benchmarks
    /// record a ping-pong, as documents always have (their own keys say what they are).
    fn recorded_pattern(&self) -> PatternKind {
        PatternKind::PingPong
    }
}

/// The most round trips one trial times under `npp`: the npp given, or, when it is
/// calculated, the estimation's `npp_init` and a generous guess for the npp calculated from
/// the timer (seed 000 §3.3 asks a loop of 50 resolutions).
pub fn npp_bound(npp: &NppChoice) -> u64 {
    match npp {
        NppChoice::Auto { npp_init, .. } => (*npp_init).max(64),
        other => other.fixed_values().into_iter().max().unwrap_or(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::allpairs::AllPairsConfig;
    use crate::method::limits::PER_MESSAGE_OVERHEAD;
    use crate::method::queue::{QueueBench, QueueKind};
    use crate::method::sixtimes::{SixTimes, Suite};
    use crate::method::transpose::Transpose;
    use crate::stats::Xoshiro256;
    use crate::transport::work::QKind;

    /// Each family's answers against their closed forms, on settings drawn at random.
    #[test]
    fn every_family_answers_for_itself() {
        let mut rng = Xoshiro256::new(0x5eed_be7c);
        let mut below = |n: u64| rng.below(n as usize) as u64;
        for _ in 0..200 {
            let warmup = below(500);
            let npp = 1 + below(300);
            let sizes: Vec<u64> = (0..1 + below(5)).map(|_| below(1 << 20)).collect();
            let cfg = MethodConfig {
                sizes: sizes.clone(),
                warmup,
                npp: NppChoice::Fixed(npp),
                ..MethodConfig::default()
            };
            let lengths: Vec<u64> = (0..1 + below(4)).map(|_| below(2000)).collect();
            let longest = *lengths.iter().max().unwrap_or(&0);
            let rounds = warmup.max(npp) + 2;
            let posted = QueueBench {
                kind: QueueKind::Posted,
                lengths: lengths.clone(),
                traversed_pct: vec![0, 50, 100],
                any_source: below(2) == 1,
            };
            assert_eq!(posted.posted_receives(&cfg), longest + rounds);
            assert_eq!(
                posted.points(&cfg, 2).len(),
                3 * lengths.len() * sizes.len()
            );
            assert_eq!(posted.wildcards(), posted.any_source);
            let s = sizes[0];
            assert_eq!(
                posted.buffer_bytes(&cfg, s),
                Some(rounds * (s + PER_MESSAGE_OVERHEAD) + longest * PER_MESSAGE_OVERHEAD)
            );
            let unexpected = QueueBench {
                kind: QueueKind::Unexpected,
                traversed_pct: Vec::new(),
                ..posted.clone()
            };
            assert_eq!(unexpected.posted_receives(&cfg), rounds);
            let ranks = 2 + below(30) as u32;
            let all = AllPairsConfig::default();
            let cells = (ranks * (ranks - 1)) as usize;
            assert_eq!(all.points(&cfg, ranks).len(), cells * sizes.len());
            assert_eq!(all.buffer_bytes(&cfg, s), Some(s + PER_MESSAGE_OVERHEAD));
            assert!(all.places_messages() && !all.streams() && all.trips(s) == 2);
            let n = 1 + below(4096) as usize;
            let t = Transpose { n };
            assert_eq!(t.message_sizes(&cfg), [8 * n as u64]);
            assert_eq!((t.trips(s), t.places_messages()), (1, false));
            let streams = 1 + below(3) as u32;
            let x = SixTimes {
                suite: Suite::Interference { streams },
                hops: (1, 1),
                q: QKind::Int,
                messages: 1 + below(100),
            };
            assert!(x.wildcards() && x.command() == "interference");
            assert_eq!(
                x.buffer_bytes(&cfg, s),
                Some((1 + 2 * u64::from(streams) + x.messages) * (s + PER_MESSAGE_OVERHEAD))
            );
            assert_eq!(x.ranks_needed(), 2 * streams + 1);
        }
        for k in [PatternKind::PingPong, PatternKind::Bandwidth { window: 8 }] {
            assert_eq!(k.recorded_pattern(), k);
            assert_eq!(
                k.points(&MethodConfig::default(), 4),
                MethodConfig::default().sizes
            );
        }
        assert_eq!(Transpose { n: 4 }.recorded_pattern(), PatternKind::PingPong);
    }

    #[test]
    fn npp_is_bounded_by_what_a_trial_times() {
        assert_eq!(npp_bound(&NppChoice::Fixed(7)), 7);
        assert_eq!(npp_bound(&NppChoice::Study(vec![1, 900, 9])), 900);
        let auto = NppChoice::Auto {
            res_npp: 50,
            npp_init: 4,
            npptrial: 200,
        };
        assert_eq!(npp_bound(&auto), 64);
    }
}
