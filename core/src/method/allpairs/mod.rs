//! All-pairs: every ordered pair of ranks measured with the method of seed 000, in rounds of
//! disjoint pairs ([`schedule`]), so that a slow node, link or switch shows in the matrix.
//!
//! Each cell `i -> j` (i the timing source) is the ping-pong of seed 000 between the two
//! ranks alone, measured by the engine's own [`measure_size`] on a two-rank view of the run
//! ([`pair::PairEp`]): warm-up, npp from the source's timer resolution (§3.3), `trials`
//! trials each after the pair's barrier and the handshake (§3.2), the source's `min_ov`
//! subtracted. Every rank characterises its own clock first (§3.1), since every rank is a
//! source in some cells.
//!
//! A round starts when rank 0 has heard from every rank about the last one and tells them to
//! go on (or to stop: a stop asked for is honoured between rounds); rank 0 records when it
//! started, so interference local in time shows. After the round every source sends its
//! cells to rank 0 as fixed-size summaries ([`cell::CellRecord`]; the raw trials stay where
//! they were measured, [`cell::RawMode`]), and rank 0 keeps everything measured so far
//! ([`AllPairsCollected`]) for a run that fails or is stopped later. The summaries travel up
//! a binomial tree and the word to go on down it, on every backend ([`steps`]): rank 0
//! exchanges `log2(n)` messages a round, not `n - 1`. A rank silent for longer than the
//! round timeout is found at that step, named ([`LostRank`]), and the run goes on without
//! it: its cells are lost, every other is kept.
//!
//! After every size and pass, rank 0 may name pairs to measure again, one pair at a time
//! in the machine and with more trials ([`AllPairs::with_retest`]): the confirmation of a
//! suspect before a verdict, as LinkTest retests its worst connections serially. What to
//! retest is the caller's analysis; this module only measures.

pub mod cell;
pub mod pair;
pub mod schedule;
pub mod steps;

use crate::method::benchmark::Benchmark;
use crate::method::engine::{
    measure_size, Collected, Kernel, KernelSpec, SizeRun, StopFlag, TrialState,
};
use crate::method::kernels::Pattern;
use crate::method::timer::{self, TimerReport};
use crate::method::{MethodConfig, PatternKind};
use crate::transport::error::{Error, Result, ResultExt};
use crate::transport::{BackendInfo, Endpoint, Program, Rank};
pub use cell::{CellRecord, CellStats, RawCell, RawMode, RawSink};
pub use schedule::{rounds, Pair, Schedule};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use steps::Steps;

/// What an all-pairs run does besides the method's own settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllPairsConfig {
    /// The order of the pairs.
    pub schedule: Schedule,
    /// Passes over the schedule (each measures every cell once more).
    pub passes: u32,
    /// Most pairs in one round (0: as the schedule has them).
    pub concurrency: u32,
    /// Seed of the `random` schedule.
    pub seed: u64,
    /// Trials of a cell measured again to confirm a suspect.
    pub retest_trials: u64,
    /// Seconds a rank that has measured its cells waits for a round's other pairs (and for
    /// rank 0's choice of retests); at least the run's own timeout. 0: 100 times it.
    #[serde(default)]
    pub round_timeout_s: f64,
    /// With the method's `until` (cells measured until their interval is narrow enough): a
    /// cell stops once its interval lies wholly on one side of this factor times the median
    /// of the cells of its size measured in earlier rounds (the verdicts' `min_factor`), and
    /// a cell whose interval holds it runs to its bound ([`crate::method::until::decide`]).
    /// `None`: every cell stops on its width alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separate_factor: Option<f64>,
    /// Where the cells' raw trial times go ([`RawMode`]; documents written before it kept
    /// every cell's in the document).
    #[serde(default)]
    pub raw: RawMode,
    /// A time budget, seconds from the run's start on rank 0's clock (the simulator's:
    /// virtual), shared equally by the sizes (what one leaves carries to the next): a round
    /// starts only within its size's share, and a size whose share is spent skips its other
    /// rounds (its retests still run). `None`: every round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_s: Option<f64>,
}

/// Every ordered pair measured with the ping-pong, each cell a point.
impl Benchmark for AllPairsConfig {
    fn command(&self) -> &'static str {
        "allpairs"
    }

    fn trips(&self, size: u64) -> u64 {
        PatternKind::PingPong.trips(size)
    }

    fn buffer_bytes(&self, cfg: &MethodConfig, size: u64) -> Option<u64> {
        PatternKind::PingPong.buffer_bytes(cfg, size)
    }

    /// Every size once per ordered pair (at most a million cells counted: beyond, a run is
    /// refused anyway).
    fn points(&self, cfg: &MethodConfig, ranks: u32) -> Vec<u64> {
        let cells = (u64::from(ranks) * u64::from(ranks.saturating_sub(1))).min(1 << 20);
        (0..cells).flat_map(|_| cfg.sizes.iter().copied()).collect()
    }

    fn places_messages(&self) -> bool {
        true
    }
}

impl Default for AllPairsConfig {
    fn default() -> Self {
        AllPairsConfig {
            schedule: Schedule::Tournament,
            passes: 1,
            concurrency: 0,
            seed: 1,
            retest_trials: 0,
            round_timeout_s: 0.0,
            separate_factor: None,
            raw: RawMode::Suspects,
            max_time_s: None,
        }
    }
}

/// One round as run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRaw {
    /// Message size of its cells, bytes.
    pub size: u64,
    /// Pass over the schedule (0-based).
    pub pass: u32,
    /// Its index within its size and pass, or within the retests.
    pub index: u32,
    /// Whether it measured a suspect again, alone.
    pub retest: bool,
    /// When it started, ns after the run started (rank 0's clock).
    pub start_ns: u64,
    /// When rank 0 had every cell of it, ns after the run started.
    pub end_ns: u64,
    /// Its pairs `(first, second)`; with both cells unless the schedule is `shift`.
    pub pairs: Vec<Pair>,
    /// Its cells `(source, dest)` that rank 0 did not get: a rank of the pair was lost (or
    /// fell silent in the round), or the cell was not measured. Documents written before it
    /// have every cell of every round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_cells: Vec<(Rank, Rank)>,
    /// Ranks found lost when its cells were collected ([`AllPairsCollected::lost`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_ranks: Vec<Rank>,
}

/// A rank the run went on without: silent for longer than the round timeout at a step
/// between rounds (its word never came, nor its answer when rank 0 asked it directly).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LostRank {
    /// The rank.
    pub rank: Rank,
    /// The round whose cells were being collected when it was found lost (its index in
    /// [`AllPairsCollected::rounds`]; it may have fallen silent in that round or before
    /// it); `None`: before the first round's cells.
    pub round: Option<u32>,
    /// When rank 0 gave up on it, ns after the run started.
    pub at_ns: u64,
}

/// The rounds of one pass, shared by the ranks of a process.
type PassRounds = Arc<Vec<Vec<Pair>>>;

/// What rank 0 learned, filled as the run goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllPairsCollected {
    /// Ranks in the run.
    pub ranks: u32,
    /// Host of every rank (the simulator: `node<i>`).
    pub hosts: Vec<String>,
    /// The switches above every rank's host, top first, dot-separated (`root.s1.leaf4`),
    /// `""` where unknown; empty when no rank's is known. From a `--topology` file
    /// ([`AllPairs::with_switches`]), else Slurm's `SLURM_TOPOLOGY_ADDR` on each rank.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<String>,
    /// The clock of every rank, characterised (§3.1).
    pub timers: Vec<TimerReport>,
    /// Rank 0's backend description.
    pub backend_info: Option<BackendInfo>,
    /// The hypercube's dimension when the transport routes over one (the simulator).
    pub hypercube: Option<u32>,
    /// Every round run, in order.
    pub rounds: Vec<RoundRaw>,
    /// Every cell measured, in order, each a fixed-size summary.
    pub cells: Vec<CellRecord>,
    /// Whether [`AllPairsConfig::max_time_s`] ended a size before its last round.
    #[serde(default)]
    pub budget_reached: bool,
    /// Ranks the run went on without, in the order they were found ([`steps`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostRank>,
}

/// Where a run is, given on rank 0 at the start of every round.
#[derive(Debug, Clone, Copy)]
pub struct AllPairsProgress {
    /// Index of the size being measured.
    pub size_index: usize,
    /// Number of sizes.
    pub sizes: usize,
    /// The size of this round, bytes.
    pub size: u64,
    /// Rounds of this size (main passes, or retests) started so far, this one included.
    pub round: u64,
    /// Rounds of this size in the main passes (or retests).
    pub rounds: u64,
    /// Whether this round measures a suspect again.
    pub retest: bool,
    /// The share of the main passes' rounds started, 0 to 1.
    pub run_done: f64,
}

/// The pairs to measure again: called on rank 0 after each size, with what was collected;
/// it returns `(first, second)` pairs, each measured both ways alone.
pub type RetestFn<'a> = dyn Fn(&AllPairsCollected, u64) -> Vec<(Rank, Rank)> + Sync + 'a;

/// Progress callback of an all-pairs run.
pub type AllPairsProgressFn<'a> = dyn Fn(AllPairsProgress) + Sync + 'a;

/// A round whose cells are in, as an observer hears of it ([`AllPairs::with_rounds`]).
#[derive(Debug, Clone)]
pub struct RoundSeen {
    /// Its index in [`AllPairsCollected::rounds`].
    pub index: usize,
    /// The round.
    pub round: RoundRaw,
    /// Its cells, in order.
    pub cells: Vec<CellRecord>,
    /// What was collected of the run besides its rounds and cells (left empty here): the
    /// ranks, hosts, clocks and backend description.
    pub run: AllPairsCollected,
}

/// What hears, on rank 0, of every round once its cells are in ([`AllPairs::with_rounds`]):
/// called before the next round starts, the collection not locked.
pub type RoundFn<'a> = dyn Fn(RoundSeen) + Sync + 'a;

/// The all-pairs program: every rank runs it.
pub struct AllPairs<'a> {
    /// The method's settings (`sizes`, `trials`, `warmup`, `npp`, `timer_samples`).
    pub method: MethodConfig,
    /// The schedule and its settings.
    pub config: AllPairsConfig,
    progress: Option<&'a AllPairsProgressFn<'a>>,
    stop: Option<&'a StopFlag>,
    retest: Option<&'a RetestFn<'a>>,
    rounds_seen: Option<&'a RoundFn<'a>>,
    raw_sink: Option<&'a dyn RawSink>,
    switches: Option<&'a BTreeMap<String, String>>,
    collected: Arc<Mutex<AllPairsCollected>>,
    /// Rank 0's median one-way time (us) of every cell measured, by size: what a cell's
    /// threshold is taken from ([`AllPairsConfig::separate_factor`]).
    medians: Mutex<Vec<(u64, f64)>>,
    /// The rounds of the pass under way, made once per process and shared by the ranks it
    /// runs (the simulator runs every rank in one: a schedule of 1,024 ranks is half a
    /// million pairs, which each rank holding its own copy would make a thousand).
    schedule: Mutex<Option<(u32, PassRounds)>>,
}

impl std::fmt::Debug for AllPairs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllPairs")
            .field("method", &self.method)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Lock the collection (also when poisoned) and change it.
fn with<T>(c: &Mutex<AllPairsCollected>, f: impl FnOnce(&mut AllPairsCollected) -> T) -> T {
    match c.lock() {
        Ok(mut g) => f(&mut g),
        Err(p) => f(&mut p.into_inner()),
    }
}

/// A rank's host and timer, as sent to rank 0.
#[derive(Serialize, Deserialize)]
struct Hello {
    host: String,
    timer: TimerReport,
    #[serde(default)]
    switches: Option<String>,
}

impl<'a> AllPairs<'a> {
    /// An all-pairs run with these settings; `progress` is called on rank 0.
    pub fn new(
        method: MethodConfig,
        config: AllPairsConfig,
        progress: Option<&'a AllPairsProgressFn<'a>>,
    ) -> Self {
        AllPairs {
            method,
            config,
            progress,
            stop: None,
            retest: None,
            rounds_seen: None,
            raw_sink: None,
            switches: None,
            collected: Arc::new(Mutex::new(AllPairsCollected::default())),
            medians: Mutex::new(Vec::new()),
            schedule: Mutex::new(None),
        }
    }

    /// Let `stop` end the run between rounds, what was measured kept.
    pub fn with_stop(mut self, stop: &'a StopFlag) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Measure again, alone and with [`AllPairsConfig::retest_trials`] trials, the pairs
    /// `pick` names after each size.
    pub fn with_retest(mut self, pick: &'a RetestFn<'a>) -> Self {
        self.retest = Some(pick);
        self
    }

    /// Tell `seen` of every round once rank 0 has its cells ([`RoundFn`]).
    pub fn with_rounds(mut self, seen: &'a RoundFn<'a>) -> Self {
        self.rounds_seen = Some(seen);
        self
    }

    /// Write the raw trials of the cells this process's ranks measure to `sink`
    /// ([`RawMode::All`]).
    pub fn with_raw_sink(mut self, sink: &'a dyn RawSink) -> Self {
        self.raw_sink = Some(sink);
        self
    }

    /// The switches above each host (host name to switch path, top first, dot-separated:
    /// a `--topology` file), which rank 0 records for the ranks on those hosts instead of
    /// what the ranks' launcher said ([`crate::launch::switch_path`]).
    pub fn with_switches(mut self, map: &'a BTreeMap<String, String>) -> Self {
        self.switches = Some(map);
        self
    }

    /// What rank 0 collected, shared (a copy may be taken while the run goes on).
    pub fn collected_handle(&self) -> Arc<Mutex<AllPairsCollected>> {
        Arc::clone(&self.collected)
    }

    /// Take what rank 0 collected.
    pub fn take_collected(&self) -> AllPairsCollected {
        with(&self.collected, std::mem::take)
    }

    /// The settings checked for `n` ranks.
    pub fn validate(&self, n: u32) -> Result<()> {
        if n < 2 {
            return Err(Error::Config(format!(
                "all-pairs needs at least 2 ranks, the run has {n}"
            )));
        }
        let cfg = MethodConfig {
            source: 0,
            dest: 1,
            ..self.method.clone()
        };
        cfg.validate(2)?;
        if cfg.npp.fixed_values().len() > 1 {
            return Err(Error::Config(
                "all-pairs measures each cell with one npp: give one value or let §3.3 choose"
                    .into(),
            ));
        }
        if self.config.passes == 0 {
            return Err(Error::Config("all-pairs needs at least one pass".into()));
        }
        if self.config.raw == RawMode::All && self.raw_sink.is_none() {
            return Err(Error::Config(
                "every cell's raw trials were asked for, and no place to write them was given"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The start on every rank: its clock characterised, host and timer gathered on rank 0.
    fn start<E: Endpoint>(&self, ep: &mut E) -> Result<(i64, f64)> {
        ep.barrier().phase("start-up barrier")?;
        let t = timer::characterize_until(ep, self.method.timer_samples, self.stop);
        let own = (t.min_overhead_ns.round() as i64, t.resolution_ns);
        let hello = serde_json::to_vec(&Hello {
            host: crate::launch::host_name(ep),
            timer: t,
            switches: match (ep.switch_path(), ep.hypercube()) {
                (Some(p), _) => Some(p),
                (None, Some(_)) => None,
                (None, None) => crate::launch::switch_path(),
            },
        })
        .map_err(|e| Error::Protocol(format!("encoding the timer report: {e}")))?;
        let all = self
            .between_rounds(ep, |ep| ep.gather(0, &hello))
            .phase("collecting host names and timers")?;
        if let Some(all) = all {
            let mut hosts = Vec::with_capacity(all.len());
            let mut timers = Vec::with_capacity(all.len());
            let mut switches = Vec::with_capacity(all.len());
            for (r, b) in all.iter().enumerate() {
                let h: Hello = serde_json::from_slice(b)
                    .map_err(|e| Error::Protocol(format!("rank {r}'s host and timer: {e}")))?;
                let given = self.switches.and_then(|m| m.get(&h.host)).cloned();
                switches.push(given.or(h.switches).unwrap_or_default());
                hosts.push(h.host);
                timers.push(h.timer);
            }
            if switches.iter().all(String::is_empty) {
                switches.clear();
            }
            let (info, cube, n) = (ep.info(), ep.hypercube(), ep.size());
            with(&self.collected, |c| {
                c.ranks = n;
                c.hosts = hosts;
                c.switches = switches;
                c.timers = timers;
                c.backend_info = Some(info);
                c.hypercube = cube;
            });
        }
        Ok(own)
    }
}

/// What every round of a rank's run shares: when the run started (rank 0's clock), this
/// rank's `(min_ov, res_timing)`, its kernels, the steps between rounds.
struct Ctx {
    t0: u64,
    timer: (i64, f64),
    kernels: Kernels,
    /// Rounds this rank has run: the index of the next in [`AllPairsCollected::rounds`].
    rounds_run: u32,
    /// The steps between rounds, and the ranks the run goes on without.
    steps: Steps,
    /// This rank's cells of the round just run, for the next step.
    mine: Vec<CellRecord>,
    /// Rank 0: the round just run, its cells awaited at the next step (`end_ns` not yet
    /// known).
    open: Option<(u32, RoundRaw)>,
}

impl AllPairs<'_> {
    /// The round timeout: the configured one, but at least the run's (a rank whose pair's
    /// peer fell silent waits that long in its cell, and must not be taken for silent
    /// itself), or 100 times the run's.
    fn round_wait<E: Endpoint>(&self, ep: &E) -> std::time::Duration {
        let given = self.config.round_timeout_s;
        if given.is_finite() && given > 0.0 {
            std::time::Duration::from_secs_f64(given.min(1e9)).max(ep.timeout())
        } else {
            ep.timeout().saturating_mul(100)
        }
    }

    /// `f` on `ep` (a control-plane step before the rounds) with waits of the round timeout
    /// ([`pair::patiently`]).
    fn between_rounds<E: Endpoint, T>(
        &self,
        ep: &mut E,
        f: impl FnOnce(&mut E) -> Result<T>,
    ) -> Result<T> {
        let wait = self.round_wait(ep);
        pair::patiently(ep, wait, f)
    }
}

/// A round to run: its place in the run and its pairs.
struct RoundPlan<'p> {
    size: u64,
    pass: u32,
    index: u32,
    retest: bool,
    pairs: &'p [Pair],
}

/// What a step between rounds precedes, as every rank knows it.
#[derive(Debug, Clone, Copy)]
enum Next {
    /// A round at `size`; a main round under a time budget has its size's `deadline` (rank
    /// 0's clock).
    Round { size: u64, deadline: Option<u64> },
    /// The choice of the pairs of `size` to measure again.
    Retests { size: u64 },
    /// The end of the run.
    End,
}

/// Rank 0's word at a step, as every live rank hears it.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Word {
    /// The signal of a stop asked for (0: go on).
    #[serde(default)]
    stop: i32,
    /// The time budget of the size is spent: its other rounds are skipped.
    #[serde(default)]
    spent: bool,
    /// The threshold of the round's cells ([`AllPairsConfig::separate_factor`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threshold: Option<f64>,
    /// The pairs to measure again, `(first, second)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    retests: Vec<(Rank, Rank)>,
}

impl AllPairs<'_> {
    /// The step before what `next` names ([`steps`]): this rank's cells of the round just
    /// run and whether a stop was asked of it go to rank 0, which keeps the round, names the
    /// ranks found lost, and answers with its word. Returns the word and whether it came
    /// late (the round it starts is to be skipped).
    fn step<E: Endpoint>(&self, ep: &mut E, ctx: &mut Ctx, next: Next) -> Result<(Word, bool)> {
        let asked = self.stop.and_then(StopFlag::requested).unwrap_or(0);
        let mut up = asked.to_le_bytes().to_vec();
        serde_json::to_writer(&mut up, &ctx.mine)
            .map_err(|e| Error::Protocol(format!("encoding cells: {e}")))?;
        ctx.mine.clear();
        let open = ctx.open.take();
        let t0 = ctx.t0;
        let answer = ctx.steps.step(ep, &up, |ep, words, newly_lost| {
            self.decide(ep, (t0, open), words, newly_lost, next)
        })?;
        let word: Word = serde_json::from_slice(&answer.payload)
            .map_err(|e| Error::Protocol(format!("rank 0's word between rounds: {e}")))?;
        Ok((word, answer.late))
    }

    /// Rank 0 at a step: the words of the ranks that answered read (each its stop word and
    /// its cells of the `open` round, checked to be cells it timed there), the round kept
    /// with the cells that did not come and the ranks found lost, and the word for `next`
    /// made.
    fn decide<E: Endpoint>(
        &self,
        ep: &mut E,
        (t0, open): (u64, Option<(u32, RoundRaw)>),
        words: std::collections::BTreeMap<Rank, Vec<u8>>,
        newly_lost: &[Rank],
        next: Next,
    ) -> Result<Vec<u8>> {
        let now = ep.now_ns();
        let mut word = Word::default();
        let mut cells = Vec::new();
        let timed: std::collections::HashSet<(Rank, Rank)> = open
            .iter()
            .flat_map(|(_, round)| round.pairs.iter().flat_map(|p| p.cells()))
            .collect();
        for (r, w) in &words {
            let (stop, body) = w
                .split_at_checked(4)
                .ok_or_else(|| Error::Protocol(format!("rank {r}'s word of {} bytes", w.len())))?;
            if word.stop == 0 {
                word.stop = i32::from_le_bytes([stop[0], stop[1], stop[2], stop[3]]);
            }
            let v: Vec<CellRecord> = serde_json::from_slice(body)
                .map_err(|e| Error::Protocol(format!("rank {r}'s cells: {e}")))?;
            if let Some((index, round)) = &open {
                check_cells(*r, &v, (*index, round.size), &timed)?;
            } else if let Some(c) = v.first() {
                return Err(Error::Protocol(format!(
                    "rank {r} reported cell {} -> {} with no round under way",
                    c.source, c.dest
                )));
            }
            cells.extend(v);
        }
        let end_ns = now.saturating_sub(t0);
        let after = open
            .as_ref()
            .map(|(i, _)| *i)
            .or_else(|| with(&self.collected, |c| c.rounds.len().checked_sub(1)).map(|i| i as u32));
        with(&self.collected, |c| {
            c.lost.extend(newly_lost.iter().map(|&rank| LostRank {
                rank,
                round: after,
                at_ns: end_ns,
            }))
        });
        if let Some((index, mut round)) = open {
            round.end_ns = end_ns;
            if cells.len() < timed.len() {
                let got: std::collections::HashSet<(Rank, Rank)> =
                    cells.iter().map(|c| (c.source, c.dest)).collect();
                round.lost_cells = round
                    .pairs
                    .iter()
                    .flat_map(|p| p.cells())
                    .filter(|c| !got.contains(c))
                    .collect();
            }
            round.lost_ranks = newly_lost.to_vec();
            if !round.retest {
                self.keep_medians(round.size, &cells);
            }
            self.keep_round(index, round, cells)?;
        }
        match next {
            Next::Round { size, deadline } => {
                word.spent = deadline.is_some_and(|d| now >= d);
                if word.spent {
                    with(&self.collected, |c| c.budget_reached = true);
                }
                word.threshold = self.threshold(size);
            }
            Next::Retests { size } => {
                if let Some(pick) = self.retest {
                    let n = with(&self.collected, |c| c.ranks);
                    // Picked under the lock, not from a copy: a copy of a million cells
                    // would double rank 0's memory at the end of each size.
                    word.retests = with(&self.collected, |c| pick(c, size))
                        .into_iter()
                        .filter(|&(a, b)| a < n && b < n && a != b)
                        .collect();
                }
            }
            Next::End => {}
        }
        serde_json::to_vec(&word).map_err(|e| Error::Protocol(format!("encoding a word: {e}")))
    }

    /// The threshold of a round's cells at `size` ([`AllPairsConfig::separate_factor`]),
    /// on rank 0: the factor times the median of the cells of that size measured so far.
    /// `None` without the factor, under a fixed count, and before any cell of the size.
    fn threshold(&self, size: u64) -> Option<f64> {
        let factor = self.config.separate_factor?;
        self.method.until.as_ref()?;
        let m = self.medians.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<f64> = m
            .iter()
            .filter(|(s, x)| *s == size && x.is_finite())
            .map(|&(_, x)| x)
            .collect();
        crate::stats::sort_samples(&mut v);
        let t = crate::stats::median(&v).map_or(f64::NAN, |x| x * factor);
        (t.is_finite() && t > 0.0).then_some(t)
    }

    /// Rank 0 keeps the median of each cell of a round at `size` for later rounds'
    /// thresholds ([`AllPairs::threshold`]), when cells are held against one.
    fn keep_medians(&self, size: u64, cells: &[CellRecord]) {
        if self.config.separate_factor.is_none() || self.method.until.is_none() {
            return;
        }
        let mut m = self.medians.lock().unwrap_or_else(|p| p.into_inner());
        m.extend(cells.iter().map(|c| (size, c.stats.median)));
    }

    /// One round on this rank: the cells of its pair measured (but a pair with a lost rank,
    /// and the rest of a pair whose peer fell silent in it), summarised, their raw trials
    /// kept as [`RawMode`] says; the summaries go to rank 0 at the next step.
    fn round<E: Endpoint>(
        &self,
        ep: &mut E,
        plan: RoundPlan<'_>,
        threshold: Option<f64>,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let (t0, timer) = (ctx.t0, ctx.timer);
        // Every rank runs every round, so each counts them as rank 0 does.
        let index = ctx.rounds_run;
        ctx.rounds_run += 1;
        let me = ep.rank();
        let start_ns = ep.now_ns().saturating_sub(t0);
        let trials = if plan.retest {
            self.config.retest_trials.max(self.method.trials)
        } else {
            self.method.trials
        };
        let (mut mine, mut raw) = (Vec::new(), Vec::new());
        let at = || format!("round {} at {} B", plan.index, plan.size);
        let steps = &ctx.steps;
        let live = |p: &&Pair| !steps.is_lost(p.first) && !steps.is_lost(p.second);
        for p in plan.pairs.iter().filter(|p| p.has(me)).filter(live) {
            for (s, d) in p.cells() {
                let point = match measure_cell(
                    ep,
                    (s, d, plan.size),
                    (&self.method, trials, threshold),
                    timer,
                    &mut ctx.kernels,
                ) {
                    Ok(point) => point,
                    // The peer fell silent or went: the pair's cells are lost, the round
                    // goes on, and the step after it finds out whether the peer is. The
                    // kernels are made again: a buffer may be left with a receive that never
                    // completed.
                    Err(e) if steps::is_silence(&e) => {
                        ctx.kernels = Kernels::default();
                        break;
                    }
                    Err(e) => return Err(e.in_phase(format!("{}: cell {s} -> {d}", at()))),
                };
                if let Some(point) = point {
                    mine.push(self.record((s, d, index), plan.retest, point, &mut raw)?);
                }
            }
        }
        if let (Some(sink), false) = (self.raw_sink, raw.is_empty()) {
            sink.write(me, &raw)
                .phase_with(|| format!("{}: writing the raw trials", at()))?;
        }
        ctx.mine = mine;
        if me == 0 {
            ctx.open = Some((
                index,
                RoundRaw {
                    size: plan.size,
                    pass: plan.pass,
                    index: plan.index,
                    retest: plan.retest,
                    start_ns,
                    end_ns: 0,
                    pairs: plan.pairs.to_vec(),
                    lost_cells: Vec::new(),
                    lost_ranks: Vec::new(),
                },
            ));
        }
        Ok(())
    }

    /// The record of cell `(source, dest)` of round `index` measured as `point`, its trials
    /// kept in it as [`RawMode`] says (a retest's, unless `none`) and added to `raw` for this
    /// process's raw file (`all`).
    fn record(
        &self,
        (source, dest, index): (Rank, Rank, u32),
        retest: bool,
        point: crate::method::engine::RawPoint,
        raw: &mut Vec<RawCell>,
    ) -> Result<CellRecord> {
        let mode = self.config.raw;
        let keep = retest && mode != RawMode::None;
        let to_file = mode == RawMode::All;
        let mut rec = CellRecord::of((source, dest, index), retest, point, keep || to_file)?;
        if to_file {
            let trial_ns = if keep {
                rec.trial_ns.clone()
            } else {
                std::mem::take(&mut rec.trial_ns)
            };
            raw.push(RawCell {
                source,
                dest,
                size: rec.size,
                round: index,
                npp: rec.npp,
                trips_per_iteration: rec.trips_per_iteration,
                trial_ns,
            });
        }
        Ok(rec)
    }

    /// Rank 0 keeps round `index` and its cells, and tells the observer of rounds.
    fn keep_round(&self, index: u32, round: RoundRaw, cells: Vec<CellRecord>) -> Result<()> {
        let seen = with(&self.collected, |c| {
            if c.rounds.len() != index as usize {
                return Err(Error::Protocol(format!(
                    "round {index} came after {} round(s)",
                    c.rounds.len()
                )));
            }
            let seen = self.rounds_seen.map(|_| RoundSeen {
                index: index as usize,
                round: round.clone(),
                cells: cells.clone(),
                run: AllPairsCollected {
                    ranks: c.ranks,
                    hosts: c.hosts.clone(),
                    switches: c.switches.clone(),
                    timers: c.timers.clone(),
                    backend_info: c.backend_info.clone(),
                    hypercube: c.hypercube,
                    rounds: Vec::new(),
                    cells: Vec::new(),
                    budget_reached: false,
                    lost: c.lost.clone(),
                },
            });
            c.rounds.push(round);
            c.cells.extend(cells);
            Ok(seen)
        })?;
        // Told with the collection unlocked: an observer that blocks never holds up a copy
        // taken meanwhile (a signal's save).
        if let (Some(tell), Some(seen)) = (self.rounds_seen, seen) {
            tell(seen);
        }
        Ok(())
    }
}

/// Rank `r`'s cells `v` of round `index` at `size`, checked to be cells it timed there
/// (`timed`, the round's cells).
fn check_cells(
    r: Rank,
    v: &[CellRecord],
    (index, size): (u32, u64),
    timed: &std::collections::HashSet<(Rank, Rank)>,
) -> Result<()> {
    let ours = |c: &CellRecord| {
        c.source == r && c.round == index && c.size == size && timed.contains(&(c.source, c.dest))
    };
    match v.iter().find(|c| !ours(c)) {
        Some(c) => Err(Error::Protocol(format!(
            "rank {r} reported cell {} -> {} at {} B of round {}, not one it timed in round \
             {index}",
            c.source, c.dest, c.size, c.round
        ))),
        None => Ok(()),
    }
}

/// The ping-pong kernels of this rank, one per role in a pair (0: source, 1: dest), their
/// buffers allocated once per size rather than once per cell.
#[derive(Debug, Default)]
struct Kernels {
    size: Option<u64>,
    roles: Vec<Pattern>,
}

impl Kernels {
    /// The kernel of role `me` (0 or 1) for messages of `size` bytes.
    fn get<E: Endpoint>(
        &mut self,
        me: Rank,
        size: u64,
        cfg: &MethodConfig,
    ) -> Result<&mut Pattern> {
        if self.size != Some(size) {
            self.roles.clear();
            self.size = None;
            for r in 0..2 {
                let mut k = PatternKind::PingPong.kernel::<E>(r, cfg)?;
                Kernel::<E>::prepare(&mut k, size)?;
                self.roles.push(k);
            }
            self.size = Some(size);
        }
        self.roles
            .get_mut(me as usize)
            .ok_or_else(|| Error::Invalid(format!("no kernel for pair rank {me}")))
    }
}

/// One cell `source -> dest` at `size` on one of its two ranks: the ping-pong kernel between
/// them, warmed up, npp chosen (§3.3) and `trials` trials (§3.2) by the engine on the pair's
/// own view of the run. Returns the point on the source.
fn measure_cell<E: Endpoint>(
    ep: &mut E,
    (source, dest, size): (Rank, Rank, u64),
    (method, trials, threshold_us): (&MethodConfig, u64, Option<f64>),
    (min_ov, res_timing): (i64, f64),
    kernels: &mut Kernels,
) -> Result<Option<crate::method::engine::RawPoint>> {
    let cfg = MethodConfig {
        sizes: vec![size],
        trials,
        source: 0,
        dest: 1,
        ..method.clone()
    };
    let me = if ep.rank() == source { 0 } else { 1 };
    let kernel = kernels.get::<E>(me, size, &cfg)?;
    let mut pair = pair::PairEp::new(ep, source, dest)?;
    pair.barrier().phase("pair barrier")?;
    if cfg.warmup > 0 {
        kernel.iterations(&mut pair, cfg.warmup).phase("warm-up")?;
    }
    let collected = Mutex::new(Collected::default());
    let label = format!("pingpong {size} B");
    let mut st = TrialState::new(&pair, &cfg)?;
    let run = SizeRun {
        cfg: &cfg,
        pattern: "pingpong",
        label: &label,
        size,
        trips: 2,
        min_ov,
        res_timing,
        collected: &collected,
        progress: &|_, _, _| {},
        queue: None,
        run_start_ns: None,
        threshold_us,
        sweep: None,
    };
    measure_size(&mut pair, kernel, &mut st, run)?;
    // A cell travels to rank 0 with its times only: n (n - 1) cells are kept there.
    Ok(crate::method::engine::take_collected(&collected)
        .points
        .into_iter()
        .next()
        .map(|p| crate::method::engine::RawPoint {
            trial_start_ns: Vec::new(),
            ..p
        }))
}

impl Program for AllPairs<'_> {
    type Output = ();

    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let n = ep.size();
        self.validate(n)?;
        let begun = ep.now_ns();
        let timer = self.start(ep)?;
        let mut ctx = Ctx {
            t0: ep.now_ns(),
            timer,
            kernels: Kernels::default(),
            rounds_run: 0,
            steps: Steps::new(n, self.round_wait(ep)),
            mine: Vec::new(),
            open: None,
        };
        let ctx = &mut ctx;
        // Each pass's rounds are made when it starts (a run of many passes holds one).
        let pass_rounds = |p: u32| self.pass_rounds(n, p);
        let sizes = self.method.sizes.clone();
        let nsizes = sizes.len();
        // Every pass has as many rounds as the first (the progress's unit).
        let per_size = (pass_rounds(0).len() as u64).saturating_mul(u64::from(self.config.passes));
        for (si, &size) in sizes.iter().enumerate() {
            let mut here = 0u64;
            // The budget's share of the sizes up to this one (what an earlier size left over
            // carries on), from the run's start on rank 0's clock.
            let deadline = self.config.max_time_s.map(|t| {
                let share = t * (si + 1) as f64 / nsizes as f64;
                begun.saturating_add((share * 1e9).min(u64::MAX as f64 / 2.0) as u64)
            });
            'size: for pass in 0..self.config.passes {
                for (index, pairs) in pass_rounds(pass).iter().enumerate() {
                    let (word, late) = self.step(ep, ctx, Next::Round { size, deadline })?;
                    stopped(&word, si, nsizes)?;
                    if word.spent {
                        break 'size;
                    }
                    here += 1;
                    self.report(
                        ep,
                        AllPairsProgress {
                            size_index: si,
                            sizes: nsizes,
                            size,
                            round: here,
                            rounds: per_size.max(here),
                            retest: false,
                            run_done: (si as f64 + here as f64 / per_size.max(here).max(1) as f64)
                                / nsizes as f64,
                        },
                    );
                    let plan = RoundPlan {
                        size,
                        pass,
                        index: index as u32,
                        retest: false,
                        pairs,
                    };
                    self.run_round(ep, plan, (word.threshold, late), ctx)?;
                }
            }
            self.retests(ep, size, (si, nsizes), ctx)?;
        }
        match self.step(ep, ctx, Next::End) {
            Ok(_) => Ok(()),
            // Cut off from rank 0's last word (its parent fell silent after passing its own
            // up, which rank 0 would otherwise have asked for): nothing is left to do.
            Err(e) if ep.rank() != 0 && steps::is_silence(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A rank the run went on without (a simulated silent node) returns nothing.
    fn lost(&self, _rank: Rank) -> Result<()> {
        Ok(())
    }

    fn gone(&self) -> Vec<Rank> {
        with(&self.collected, |c| c.lost.iter().map(|l| l.rank).collect())
    }
}

/// The stop a step's `word` says was asked for, after `done` of `sizes` sizes.
fn stopped(word: &Word, done: usize, sizes: usize) -> Result<()> {
    match word.stop {
        0 => Ok(()),
        signal => Err(Error::Interrupted {
            signal,
            done,
            sizes,
        }),
    }
}

impl AllPairs<'_> {
    /// The rounds of pass `pass` over `n` ranks, from the process's copy when it holds this
    /// pass's.
    fn pass_rounds(&self, n: u32, pass: u32) -> PassRounds {
        let mut g = self.schedule.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((p, r)) = g.as_ref() {
            if *p == pass {
                return Arc::clone(r);
            }
        }
        let c = &self.config;
        let r = Arc::new(rounds(c.schedule, n, c.seed, pass, c.concurrency));
        *g = Some((pass, Arc::clone(&r)));
        r
    }

    /// Round `plan` on this rank, or, when the word that started it came `late`, its place
    /// counted and its cells skipped (the peers gave up on this rank's cells meanwhile).
    fn run_round<E: Endpoint>(
        &self,
        ep: &mut E,
        plan: RoundPlan<'_>,
        (threshold, late): (Option<f64>, bool),
        ctx: &mut Ctx,
    ) -> Result<()> {
        if late {
            ctx.rounds_run += 1;
            return Ok(());
        }
        self.round(ep, plan, threshold, ctx)
    }

    fn report<E: Endpoint>(&self, ep: &E, p: AllPairsProgress) {
        if let (0, Some(cb)) = (ep.rank(), self.progress) {
            cb(p);
        }
    }

    /// After a size: rank 0 asks the caller which pairs to measure again and tells every
    /// rank at the step; each is then measured alone, both ways.
    fn retests<E: Endpoint>(
        &self,
        ep: &mut E,
        size: u64,
        (si, nsizes): (usize, usize),
        ctx: &mut Ctx,
    ) -> Result<()> {
        if self.retest.is_none() {
            return Ok(());
        }
        let (word, _) = self.step(ep, ctx, Next::Retests { size })?;
        stopped(&word, si, nsizes)?;
        let pairs: Vec<Pair> = word
            .retests
            .iter()
            .map(|&(first, second)| Pair {
                first,
                second,
                both: true,
            })
            .collect();
        for (index, p) in pairs.iter().enumerate() {
            let (word, late) = self.step(
                ep,
                ctx,
                Next::Round {
                    size,
                    deadline: None,
                },
            )?;
            stopped(&word, si, nsizes)?;
            self.report(
                ep,
                AllPairsProgress {
                    size_index: si,
                    sizes: nsizes,
                    size,
                    round: index as u64 + 1,
                    rounds: pairs.len() as u64,
                    retest: true,
                    run_done: (si + 1) as f64 / nsizes as f64,
                },
            );
            let plan = RoundPlan {
                size,
                pass: 0,
                index: index as u32,
                retest: true,
                pairs: std::slice::from_ref(p),
            };
            self.run_round(ep, plan, (word.threshold, late), ctx)?;
        }
        Ok(())
    }
}
