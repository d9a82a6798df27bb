//! The one trial engine (design §3): [`Measurement`] runs any [`Kernel`] with the method of
//! seed 000.
//!
//! Every benchmark is measured as seed 000 §3.2 prescribes: for each size a barrier and a
//! handshake precede every trial, and the `source` rank times `npp` iterations of the
//! kernel ([`trials`]); npp comes from §3.3 or is given ([`measure_size`]); the timer is
//! characterised first (§3.1, [`characterise_timer`]). For the COMMS1 ping-pong of seed 002:
//!
//! ```text
//! do ktrial = 1, ntrial
//!   barrier, rooted at dest (dest's first act after a trial is to wait, so nothing it
//!           sends overlaps the source's last receive)
//!   source: recv(1 element from dest)      dest: send(1 element to source)   <- handshake
//!   source: t1 = now; npp x (send, recv); t2 = now; time(ktrial) = t2 - t1 - min_ov
//!   dest:             npp x (recv, send)
//! enddo
//! ```
//!
//! The kernels are in [`crate::method::kernels`] (ping-pong, exchange, bandwidth) and
//! [`crate::method::transpose`]; each iteration holds [`Kernel::trips`] message times, and
//! the statistics are of `trial / (trips * npp)`.
//!
//! Ranks other than `source` and `dest` only join the barriers and the control plane. With
//! pairs streaming at once ([`MethodConfig::pairs`], [`crate::method::pairs`]) every pair's
//! sender times as `source` does and its receiver answers as `dest` does; rank 0 gathers
//! every sender's trials.
//! Rank 0 collects the raw trial times ([`RawPoint`]) one size at a time, so the sizes already
//! measured survive a failure later in the run.

pub use super::stop::StopFlag;
use crate::method::buffers::{self, CacheState, Evictor, Mismatch};
use crate::method::limits;
use crate::method::npp_check::{self, NppCheck, NppEstimate};
use crate::method::pairs::{SweepAt, TrialRole};
use crate::method::timer::{self, TimerReport};
use crate::method::until::{self, Stopping};
use crate::method::{self, MethodConfig, NppChoice};
use crate::transport::error::{Error, Result, ResultExt};
use crate::transport::{BackendInfo, Endpoint, Program, Rank, Src, Tag, TagSel};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

// Where a run is: reachable here too, beside the engine that reports it.
pub use crate::method::progress::{Progress, ProgressFn, Stage};

/// Tag of the handshake before each trial.
pub const TAG_HANDSHAKE: Tag = 2;

/// The raw outcome of one size: what the analysis and the result document are built from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RawPoint {
    /// Pattern name (`pingpong`).
    pub pattern: String,
    /// Message size, bytes.
    pub size: u64,
    /// `npp` used.
    pub npp: u64,
    /// `npp` the §3.3 formula gave (None when npp was given).
    pub npp_calculated: Option<u64>,
    /// `median_ppt` of §3.3, ns (None when `npp` was fixed).
    pub median_ppt_ns: Option<f64>,
    /// Message times per loop iteration (2 for a ping-pong, the window for streaming).
    pub trips_per_iteration: u64,
    /// Every trial time, ns, `min_ov` subtracted, in the order measured.
    pub trial_ns: Vec<i64>,
    /// When each trial of `trial_ns` started (its first clock read on `source`), ns after
    /// the first one's start: the time axis of the sequence, for tests of drift over a
    /// point's trials. Empty where the engine did not time the trials (seed 001's
    /// calibration and rates, all-pairs cells) and in documents written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trial_start_ns: Vec<u64>,
    /// The queue the point was measured in (seed 004's benchmarks, [`Kernel::queue`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<PointQueue>,
    /// What the point's message buffers were: checked, cold, aligned ([`PointBuffers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<PointBuffers>,
    /// A calculated npp checked against its trials: the estimates they rejected and the one
    /// kept ([`crate::method::npp_check`]); `None` when npp was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub npp_check: Option<NppCheck>,
    /// How the size stopped when it was measured until its interval was narrow enough
    /// ([`crate::method::until`]); `None` for a fixed count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ci: Option<Stopping>,
    /// With pairs streaming at once ([`MethodConfig::pairs`]): every pair's trial times (ns,
    /// `min_ov` subtracted, each timed by its sender), in the order of the pairs; trial `k`
    /// of every pair started after the same barrier. `trial_ns` then holds each trial's
    /// slowest pair (IMB's makespan). Empty without [`MethodConfig::pairs`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pair_trial_ns: Vec<Vec<i64>>,
    /// Where the point lies in a sweep of windows and pairs ([`Kernel::sweep_at`]); `None`
    /// outside a sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepAt>,
}

/// The queue a point was measured in: its length and, for a pre-posted queue, the fraction
/// traversed. Plain data a kernel gives the engine ([`Kernel::queue`]; seed 004's benchmarks,
/// [`crate::method::queue`]) and the engine records with each point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointQueue {
    /// Entries that are not the measured message's (receives or unexpected messages).
    pub length: u64,
    /// Per cent of the posted queue in front of the latency receive (`None`: unexpected).
    pub traversed_pct: Option<u32>,
}

impl PointQueue {
    /// Receives in front of the latency receive: `floor(length * pct / 100)`.
    pub fn traversed(&self) -> u64 {
        self.length * u64::from(self.traversed_pct.unwrap_or(0).min(100)) / 100
    }
}

/// What one point's message buffers were ([`crate::method::buffers`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointBuffers {
    /// Trials (warm-up and npp estimate included) after which every receiver checked every
    /// byte it held; 0 when the run did not validate.
    pub validated_trials: u64,
    /// Bytes of the pool `source` wrote through before each trial (a cold cache); `None`
    /// when the trials started warm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_pool: Option<u64>,
    /// The least alignment of the addresses `source`'s messages started at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_alignment: Option<u64>,
    /// The same on `dest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest_alignment: Option<u64>,
}

impl RawPoint {
    /// The one-way time of every trial, us, sorted: `trial / (trips * npp)` (seed 000 §3.4).
    pub fn one_way_us_sorted(&self) -> Vec<f64> {
        one_way_us_sorted(&self.trial_ns, self.npp, self.trips_per_iteration)
    }

    /// The median one-way time, us (0 without trials).
    pub fn median_one_way_us(&self) -> f64 {
        crate::stats::median(&self.one_way_us_sorted()).unwrap_or(0.0)
    }
}

/// Trial times (ns) of `npp` iterations of `trips` message times each as sorted one-way
/// times in us.
pub fn one_way_us_sorted(trial_ns: &[i64], npp: u64, trips: u64) -> Vec<f64> {
    let per = 1000.0 * (npp.max(1) * trips.max(1)) as f64;
    let mut v: Vec<f64> = trial_ns.iter().map(|&t| t as f64 / per).collect();
    crate::stats::sort_samples(&mut v);
    v
}

/// What rank 0 learned during a run. Filled as the run goes, so it holds the partial results
/// of a run that failed.
#[derive(Debug, Default, Clone)]
pub struct Collected {
    /// The timer characterisation of the source rank.
    pub timer: Option<TimerReport>,
    /// Rank 0's backend description.
    pub backend_info: Option<BackendInfo>,
    /// One entry per size completed.
    pub points: Vec<RawPoint>,
    /// With pairs streaming at once: the host of every rank, in rank order
    /// ([`crate::launch::host_name`]), for which pairs cross hosts. Empty otherwise.
    pub hosts: Vec<String>,
    /// Who hears of each point once it is kept for good ([`Collected::observe`]).
    observer: Option<PointObserver>,
    /// How many of `points` the observer has heard of.
    told: usize,
}

/// A point kept for good, as an observer hears of it ([`settle`]).
#[derive(Debug, Clone)]
pub struct Kept {
    /// Its index in [`Collected::points`].
    pub index: usize,
    /// The point.
    pub point: RawPoint,
    /// The timer characterisation collected.
    pub timer: Option<TimerReport>,
    /// Rank 0's backend description, as it was when the point was kept.
    pub backend_info: Option<BackendInfo>,
}

/// What hears, on rank 0, of every point once it is kept for good: its data checks passed
/// ([`settle`]). Called before the run goes on, the collection not locked.
pub type PointFn = dyn Fn(Kept) + Send + Sync;

/// A [`PointFn`] a [`Collected`] holds.
#[derive(Clone)]
pub struct PointObserver(Arc<PointFn>);

impl PointObserver {
    /// `f` as an observer.
    pub fn new(f: impl Fn(Kept) + Send + Sync + 'static) -> Self {
        PointObserver(Arc::new(f))
    }
}

impl std::fmt::Debug for PointObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PointObserver")
    }
}

impl Collected {
    /// What rank 0 learned, without an observer.
    pub fn of(
        timer: Option<TimerReport>,
        backend_info: Option<BackendInfo>,
        points: Vec<RawPoint>,
    ) -> Self {
        Collected {
            timer,
            backend_info,
            points,
            ..Collected::default()
        }
    }

    /// Let `o` hear of every point kept for good from now on (and of those kept before,
    /// at the next [`settle`]).
    pub fn observe(&mut self, o: PointObserver) {
        self.observer = Some(o);
    }
}

/// Every rank's host ([`crate::launch::host_name`]) on rank 0, in rank order (empty
/// elsewhere): which pairs cross hosts.
pub fn gather_hosts<E: Endpoint>(ep: &mut E) -> Result<Vec<String>> {
    let name = crate::launch::host_name(ep);
    let all = ep
        .gather(0, name.as_bytes())
        .phase("collecting the ranks' hosts")?;
    Ok(all
        .unwrap_or_default()
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect())
}

/// Tell the observer, if there is one, of every point kept since it last heard: what keeps
/// a point calls it on rank 0 once the point is final (after the ranks' data checks, which
/// may take a corrupted point back). The observer is called with the collection unlocked, so
/// one that blocks (a reader that stopped reading) never holds up a copy taken meanwhile
/// (a signal's save).
pub fn settle(c: &Mutex<Collected>) {
    let mut told = None;
    with_collected(c, |c| {
        let Some(o) = c.observer.clone() else {
            return;
        };
        let kept: Vec<Kept> = (c.told..c.points.len())
            .map(|index| Kept {
                index,
                point: c.points[index].clone(),
                timer: c.timer.clone(),
                backend_info: c.backend_info.clone(),
            })
            .collect();
        c.told = c.points.len();
        told = Some((o, kept));
    });
    if let Some((o, kept)) = told {
        for k in kept {
            (o.0)(k);
        }
    }
}

/// Trial times as bytes (little-endian), for the control plane.
pub fn encode_i64s(v: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The inverse of [`encode_i64s`].
pub fn decode_i64s(b: &[u8]) -> Result<Vec<i64>> {
    if b.len() % 8 != 0 {
        return Err(Error::Protocol(format!("{} bytes of trial times", b.len())));
    }
    Ok(b.chunks_exact(8)
        .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

/// Take what a [`Collected`] behind a mutex holds (also when the mutex is poisoned, so a run
/// that panicked on one rank still reports what rank 0 collected).
pub fn take_collected(c: &Mutex<Collected>) -> Collected {
    let mut out = Collected::default();
    with_collected(c, |g| out = std::mem::take(g));
    out
}

/// A copy of what was collected so far, the run going on.
pub fn snapshot_collected(c: &Mutex<Collected>) -> Collected {
    match c.lock() {
        Ok(g) => g.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// Lock a [`Collected`] (also when poisoned) and change it.
pub fn with_collected(c: &Mutex<Collected>, f: impl FnOnce(&mut Collected)) {
    match c.lock() {
        Ok(mut g) => f(&mut g),
        Err(p) => f(&mut p.into_inner()),
    }
}

/// Seed 000 §3.1 for a run: the `source` rank characterises its clock (cut short by a stop
/// asked of it), every rank learns `(min_ov, res_timing)`, and rank 0 keeps the report and
/// its backend's description.
pub fn characterise_timer<E: Endpoint>(
    ep: &mut E,
    cfg: &MethodConfig,
    collected: &Mutex<Collected>,
    stop: Option<&StopFlag>,
) -> Result<(i64, f64)> {
    let me = ep.rank();
    if me == 0 {
        let info = ep.info();
        with_collected(collected, |c| c.backend_info = Some(info));
    }
    ep.barrier().phase("start-up barrier")?;
    let mut tb = Vec::new();
    if me == cfg.source {
        let t = timer::characterize_until(ep, cfg.timer_samples, stop);
        tb = serde_json::to_vec(&t)
            .map_err(|e| Error::Protocol(format!("encoding the timer report: {e}")))?;
    }
    ep.broadcast(cfg.source, &mut tb)
        .phase("sharing the timer characterisation")?;
    let timer: TimerReport = serde_json::from_slice(&tb)
        .map_err(|e| Error::Protocol(format!("decoding the timer report: {e}")))?;
    let out = (timer.min_overhead_ns.round() as i64, timer.resolution_ns);
    if me == 0 {
        with_collected(collected, |c| c.timer = Some(timer));
    }
    Ok(out)
}

/// What the trials of a run carry besides the kernel: the handshake's buffer, the pool a cold
/// cache writes through, and what validated trials found ([`crate::method::buffers`]).
#[derive(Debug)]
pub struct TrialState {
    hs: Vec<u8>,
    evictor: Option<Evictor>,
    validate: bool,
    participant: bool,
    base: u64,
    phase: u8,
    validated: u64,
    mismatch: Option<Mismatch>,
}

impl TrialState {
    /// For `cfg` on this rank: `source` and `dest` get the cold cache's pool (where the
    /// endpoint models caches, [`Endpoint::models_caches`]).
    pub fn new<E: Endpoint>(ep: &E, cfg: &MethodConfig) -> Result<TrialState> {
        let participant = cfg.role(ep.rank()).participates();
        let opts = &cfg.buffers;
        let evictor = if opts.cache == CacheState::Cold && participant && ep.models_caches() {
            let bytes = opts.cache_pool.unwrap_or_else(Evictor::pool_for_host);
            Some(Evictor::new(bytes)?)
        } else {
            None
        };
        Ok(TrialState {
            hs: vec![0u8; 8],
            evictor,
            validate: opts.validate,
            participant,
            base: 0,
            phase: 0,
            validated: 0,
            mismatch: None,
        })
    }

    /// The trials that follow are of `phase` ([`buffers::PHASE_TRIALS`], ...) at `size`: their
    /// messages' patterns are this size's and phase's.
    fn begin(&mut self, size: u64, phase: u8) {
        self.phase = phase;
        self.base = buffers::seed(size, u32::from(phase), 0x5eed);
    }

    /// Before trial `k`, outside the timed region: the messages filled (validation), then the
    /// pool written through (a cold cache), so the filled buffers leave the caches too.
    #[inline]
    fn before_trial<E: Endpoint, K: Kernel<E>>(&mut self, kernel: &mut K, k: u64) {
        if !self.participant {
            return;
        }
        if self.validate {
            kernel.fill_messages(buffers::seed(self.base, 0, k));
        }
        if let Some(e) = &mut self.evictor {
            e.sweep();
        }
    }

    /// After trial `k`: what arrived checked, the first mismatch kept.
    #[inline]
    fn after_trial<E: Endpoint, K: Kernel<E>>(&mut self, kernel: &mut K, k: u64) {
        if !(self.validate && self.participant) {
            return;
        }
        self.validated += 1;
        if self.mismatch.is_none() {
            if let Some(m) = kernel.check_messages(buffers::seed(self.base, 0, k)) {
                self.mismatch = Some(Mismatch {
                    trial: k,
                    phase: self.phase,
                    ..m
                });
            }
        }
    }

    /// Every rank's findings to rank 0, which gives the first mismatch back to every rank: an
    /// [`Error::Corrupt`] on all of them, so that the run ends together. Rank 0 gets what the
    /// point's buffers were.
    fn share<E: Endpoint, K: Kernel<E>>(
        &mut self,
        ep: &mut E,
        kernel: &K,
        cfg: &MethodConfig,
    ) -> Result<Option<PointBuffers>> {
        let mut mine = Vec::with_capacity(59);
        let align = kernel.message_alignment().unwrap_or(0);
        let pool = self.evictor.as_ref().map_or(0, |e| e.bytes());
        for x in [align, pool, self.validated] {
            mine.extend_from_slice(&x.to_le_bytes());
        }
        if let Some(m) = self.mismatch.take() {
            mine.extend_from_slice(&m.encode());
        }
        let all = ep.gather(0, &mine).phase("sharing the data checks")?;
        let mut verdict = Vec::new();
        let mut facts = None;
        if let Some(all) = all {
            let word = |r: usize, i: usize| -> u64 {
                let b = all.get(r).and_then(|b| b.get(8 * i..8 * i + 8));
                b.and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_le_bytes)
            };
            let (src, dst) = (cfg.source as usize, cfg.dest as usize);
            let some = |x: u64| (x > 0).then_some(x);
            facts = Some(PointBuffers {
                validated_trials: word(src, 2),
                cache_pool: some(word(src, 1)),
                source_alignment: some(word(src, 0)),
                dest_alignment: some(word(dst, 0)),
            });
            if let Some(b) = all.iter().find(|b| b.len() > 24) {
                verdict = b[24..].to_vec();
            }
        }
        ep.broadcast(0, &mut verdict)
            .phase("sharing the data checks")?;
        self.validated = 0;
        match Mismatch::decode(&verdict) {
            Some(m) => Err(Error::Corrupt {
                rank: m.rank,
                from: m.from,
                which: m.which(),
                offset: m.offset,
                expected: m.expected,
                got: m.got,
            }),
            None if verdict.is_empty() => Ok(facts),
            None => Err(Error::Protocol(format!(
                "a data-check verdict of {} bytes",
                verdict.len()
            ))),
        }
    }
}

/// Seed 000 §3.2: `ntrial` trials of `npp` kernel iterations, each after a barrier and the
/// handshake (dest sends one element, source receives it, then source reads the clock). The
/// barrier is [`Endpoint::barrier_first`] rooted at dest: after its last message of a trial,
/// dest waits rather than reports, so no message of dest's reaches the source while the source
/// is still inside the timed region.
/// Returns the trial times (ns, `min_ov` subtracted) on `source` and an empty vector
/// elsewhere; ranks other than `source` and `dest` join the barriers and the kernel's hooks
/// ([`Kernel::before_handshake`] after the barrier, [`Kernel::after_timing`] after the timed
/// loop, both on every rank and outside the timed region). `tick` is called after every
/// trial, outside the timed region. The timed loop runs [`Kernel::iterations`]; generic, so
/// it has no dynamic dispatch.
#[allow(clippy::too_many_arguments)]
pub fn trials<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    cfg: &MethodConfig,
    st: &mut TrialState,
    npp: u64,
    ntrial: u64,
    min_ov: i64,
    tick: impl FnMut(u64),
) -> Result<Vec<i64>> {
    let mut seq = Sequence::default();
    trials_into(
        ep,
        kernel,
        cfg,
        st,
        (npp, 0, ntrial),
        min_ov,
        tick,
        &mut seq,
    )?;
    Ok(seq.ns)
}

/// A point's trials as `source` measured them, in order: each time (ns, `min_ov` subtracted)
/// and the clock when it started (ns, as the endpoint's clock reads). Empty elsewhere.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sequence {
    /// Trial times, ns.
    pub ns: Vec<i64>,
    /// The clock at each trial's start, ns.
    pub start_ns: Vec<u64>,
}

impl Sequence {
    /// Room for `n` more trials (on `source` only: elsewhere nothing is kept), or an
    /// out-of-memory error naming them, never an abort. The first call takes exactly `n`
    /// (a fixed count); later blocks grow the room as a vector grows, so a size measured in
    /// many blocks is not copied at each.
    fn reserve(&mut self, n: u64) -> Result<()> {
        let more = self.ns.len() as u64 + n;
        let room = usize::try_from(n).ok();
        let fail = |what| crate::method::alloc::cannot_allocate(more.saturating_mul(8), what);
        let ok = |r: std::result::Result<(), std::collections::TryReserveError>| r.is_ok();
        if !room.is_some_and(|n| ok(self.ns.try_reserve(n))) {
            return Err(fail(format!("{more} trial times")));
        }
        if !room.is_some_and(|n| ok(self.start_ns.try_reserve(n))) {
            return Err(fail(format!("{more} trial starts")));
        }
        Ok(())
    }

    /// The starts as offsets from the first trial's start (what a point records).
    pub fn offsets(&self) -> Vec<u64> {
        let t0 = self.start_ns.first().copied().unwrap_or(0);
        self.start_ns
            .iter()
            .map(|&t| t.saturating_sub(t0))
            .collect()
    }
}

/// [`trials`] numbered from `first`, appending `n` trials to `seq` on `source`: `(npp, first,
/// n)`. A point measured in blocks (stopping on its confidence interval) is one numbering, so
/// every trial's messages and errors are named by the trial's place in the point.
#[allow(clippy::too_many_arguments)]
pub fn trials_into<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    cfg: &MethodConfig,
    st: &mut TrialState,
    (npp, first, n): (u64, u64, u64),
    min_ov: i64,
    mut tick: impl FnMut(u64),
    seq: &mut Sequence,
) -> Result<()> {
    let role = cfg.role(ep.rank());
    if let TrialRole::Timer { .. } = role {
        seq.reserve(n)?;
    }
    for k in first..first.saturating_add(n) {
        ep.barrier_first(cfg.dest)
            .phase_with(|| format!("barrier before trial {k}"))?;
        kernel
            .before_handshake(ep, npp)
            .phase_with(|| format!("before the handshake of trial {k}"))?;
        st.before_trial(kernel, k);
        match role {
            TrialRole::Timer { peer } => {
                let b = std::mem::take(&mut st.hs);
                st.hs = ep
                    .recv(Src::Rank(peer), TagSel::Tag(TAG_HANDSHAKE), b)
                    .phase_with(|| format!("handshake of trial {k}"))?
                    .buf;
                let t1 = ep.now_ns();
                timed_loop(ep, kernel, npp, k)?;
                let t2 = ep.now_ns();
                seq.ns.push(elapsed(t1, t2, k)?.saturating_sub(min_ov));
                seq.start_ns.push(t1);
            }
            TrialRole::Partner { peer } => {
                let b = std::mem::take(&mut st.hs);
                st.hs = ep
                    .send(peer, TAG_HANDSHAKE, b)
                    .phase_with(|| format!("handshake of trial {k}"))?;
                timed_loop(ep, kernel, npp, k)?;
            }
            TrialRole::Idle => {}
        }
        kernel
            .after_timing(ep, npp)
            .phase_with(|| format!("after trial {k}"))?;
        st.after_trial(kernel, k);
        tick(k + 1);
    }
    Ok(())
}

/// The `npp` iterations of trial `k`: the only code between the two clock reads (the error,
/// cold, is named out of line).
#[inline(always)]
fn timed_loop<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    npp: u64,
    k: u64,
) -> Result<()> {
    match kernel.iterations(ep, npp) {
        Ok(()) => Ok(()),
        Err(e) => Err(in_trial(e, k)),
    }
}

/// The error of an iteration of trial `k`, named by its trial.
#[cold]
#[inline(never)]
fn in_trial(e: Error, k: u64) -> Error {
    e.in_phase(format!("trial {k}"))
}

/// One measured size: what [`measure_size`] needs besides the endpoint and the kernel.
#[derive(Clone, Copy)]
pub struct SizeRun<'a> {
    /// The method's parameters.
    pub cfg: &'a MethodConfig,
    /// Pattern name for the points.
    pub pattern: &'a str,
    /// How errors name this size (`pingpong 8 B`, `transpose-pack 32 x 32`).
    pub label: &'a str,
    /// Message (or matrix) size, bytes.
    pub size: u64,
    /// Message times per kernel iteration.
    pub trips: u64,
    /// `min_ov` of the timer, ns.
    pub min_ov: i64,
    /// `res_timing` of the timer, ns.
    pub res_timing: f64,
    /// Where rank 0 keeps the points.
    pub collected: &'a Mutex<Collected>,
    /// Progress of this size (rank 0 only).
    pub progress: &'a dyn Fn(Stage, u64, u64),
    /// The queue the size is measured in ([`Kernel::queue`]).
    pub queue: Option<PointQueue>,
    /// When the run started on `source`'s clock, for a bound on the run's time
    /// ([`crate::method::until::UntilCi::run_ns`]); `None`: no such bound applies.
    pub run_start_ns: Option<u64>,
    /// The one-way time (us) an all-pairs cell measured until its interval is narrow enough
    /// is held against ([`until::decide`]); `None` for a sweep's sizes.
    pub threshold_us: Option<f64>,
    /// Where the size lies in a sweep of windows and pairs ([`Kernel::sweep_at`]).
    pub sweep: Option<SweepAt>,
}

impl std::fmt::Debug for SizeRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SizeRun")
            .field("label", &self.label)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// §3.3's estimate on every rank: `npptrial` trials of `npp_init` iterations on `source` give
/// the median iteration time, the formula gives npp, and `source` broadcasts both:
/// `(npp, median_ppt_ns)`.
fn estimate_npp<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    st: &mut TrialState,
    run: &SizeRun<'_>,
    (res_npp, npp_init, npptrial): (u64, u64, u64),
) -> Result<(u64, f64)> {
    let (cfg, label) = (run.cfg, run.label);
    (run.progress)(Stage::Npp, 0, npptrial);
    st.begin(run.size, buffers::PHASE_NPP);
    let t = trials(ep, kernel, cfg, st, npp_init, npptrial, run.min_ov, |k| {
        if k % 64 == 0 {
            (run.progress)(Stage::Npp, k, npptrial)
        }
    })
    .phase_with(|| format!("{label}: estimating npp"))?;
    let mut b = Vec::new();
    if ep.rank() == cfg.source {
        let ppt = method::median_ppt(&t, npp_init);
        let n = method::npp_formula(res_npp, run.res_timing, ppt);
        b.extend_from_slice(&n.to_le_bytes());
        b.extend_from_slice(&ppt.to_le_bytes());
    }
    ep.broadcast(cfg.source, &mut b)
        .phase_with(|| format!("{label}: sharing npp"))?;
    decode_pair(&b, "npp")
}

/// A u64 and an f64 as `source` broadcast them.
fn decode_pair(b: &[u8], what: &str) -> Result<(u64, f64)> {
    if b.len() != 16 {
        return Err(Error::Protocol(format!(
            "{what} message of {} bytes",
            b.len()
        )));
    }
    let n = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
    let x = f64::from_le_bytes(b[8..].try_into().unwrap_or([0; 8]));
    Ok((n, x))
}

/// The estimate that gave `npp` from `ppt`, checked on `source` against the trial times
/// `times` it measured with it ([`NppEstimate::check`]), and shared with every rank, so that
/// all of them take the same decision.
fn check_estimate<E: Endpoint>(
    ep: &mut E,
    run: &SizeRun<'_>,
    res_npp: u64,
    (npp, ppt): (u64, f64),
    times: &[i64],
) -> Result<NppEstimate> {
    let src = run.cfg.source;
    let mut b = Vec::new();
    if ep.rank() == src {
        let e = NppEstimate::check(res_npp, run.res_timing, ppt, npp, times);
        b.extend_from_slice(&e.npp_from_trials.to_le_bytes());
        b.extend_from_slice(&e.trials_ppt_ns.to_le_bytes());
    }
    ep.broadcast(src, &mut b)
        .phase_with(|| format!("{}: checking npp against the trials", run.label))?;
    let (npp_from_trials, trials_ppt_ns) = decode_pair(&b, "npp check")?;
    Ok(NppEstimate {
        median_ppt_ns: ppt,
        npp,
        trials_ppt_ns,
        npp_from_trials,
    })
}

/// The timed trials (§3.2) of one size with `npp`: the sequence on `source`, empty
/// elsewhere, and how the size stopped when it runs until its interval is narrow enough.
/// A fixed count runs its `ntrial` trials in one go; with [`MethodConfig::until`] the trials
/// run in blocks, and after each `source` decides whether to go on and tells every rank
/// ([`until_blocks`]).
fn timed_trials<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    st: &mut TrialState,
    run: &SizeRun<'_>,
    npp: u64,
) -> Result<(Sequence, Option<Stopping>)> {
    let cfg = run.cfg;
    (run.progress)(Stage::Trials, 0, cfg.trials);
    let every = (cfg.trials / 200).max(1);
    st.begin(run.size, buffers::PHASE_TRIALS);
    let mut seq = Sequence::default();
    let tick = |k| {
        if k % every == 0 || k == cfg.trials {
            (run.progress)(Stage::Trials, k, cfg.trials)
        }
    };
    let named = |e: Error| e.in_phase(format!("{}, npp {npp}", run.label));
    let Some(rule) = &cfg.until else {
        trials_into(
            ep,
            kernel,
            cfg,
            st,
            (npp, 0, cfg.trials),
            run.min_ov,
            tick,
            &mut seq,
        )
        .map_err(named)?;
        return Ok((seq, None));
    };
    let stopping = until_blocks(ep, kernel, st, run, (npp, rule), tick, &mut seq).map_err(named)?;
    Ok((seq, Some(stopping)))
}

/// A size's trials in blocks ([`crate::method::until`]): after each block `source` computes
/// the median's interval of the trials so far and broadcasts its decision (nothing: go on;
/// else how the size stopped), outside any timed region, so every rank runs the same
/// trials and all learn how the size ended.
fn until_blocks<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    st: &mut TrialState,
    run: &SizeRun<'_>,
    (npp, rule): (u64, &until::UntilCi),
    mut tick: impl FnMut(u64),
    seq: &mut Sequence,
) -> Result<Stopping> {
    let cfg = run.cfg;
    let src = cfg.source;
    let started = if ep.rank() == src { ep.now_ns() } else { 0 };
    let mut scratch = Vec::new();
    let (mut done, mut checks) = (0u64, 0u64);
    loop {
        let n = rule.next_block(done, cfg.trials);
        trials_into(
            ep,
            kernel,
            cfg,
            st,
            (npp, done, n),
            run.min_ov,
            &mut tick,
            seq,
        )?;
        done += n;
        checks += 1;
        let mut word = Vec::new();
        if ep.rank() == src {
            let now = ep.now_ns();
            let took = (
                now.saturating_sub(started),
                run.run_start_ns.map(|t| now.saturating_sub(t)),
            );
            // With the most trials reached, `decide` always stops the size.
            let threshold = run.threshold_us.map(|us| until::Threshold {
                trial_ns: us * 1000.0 * (run.trips.max(1) * npp.max(1)) as f64,
                one_way_us: us,
            });
            let d = until::decide(
                rule,
                &seq.ns,
                (checks, threshold),
                took,
                cfg.trials,
                &mut scratch,
            );
            if let Some(d) = d {
                word = serde_json::to_vec(&d)
                    .map_err(|e| Error::Protocol(format!("encoding a stop: {e}")))?;
            }
        }
        ep.broadcast(src, &mut word)
            .phase_with(|| format!("the interval after trial {done}"))?;
        if !word.is_empty() {
            return serde_json::from_slice(&word)
                .map_err(|e| Error::Protocol(format!("decoding a stop: {e}")));
        }
    }
}

/// npp for one size (§3.3: calculated or given), then the timed trials (§3.2) for each npp; rank 0
/// collects one [`RawPoint`] per npp, trial times gathered from `source` when it is not rank 0.
///
/// A calculated npp is checked against its trials ([`crate::method::npp_check`]): an
/// estimate they contradict is made again, its trials discarded, at most
/// [`npp_check::REESTIMATES`] times; the point records the rejected estimates and the kept one.
pub fn measure_size<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    st: &mut TrialState,
    run: SizeRun<'_>,
) -> Result<()> {
    let NppChoice::Auto {
        res_npp,
        npp_init,
        npptrial,
    } = run.cfg.npp
    else {
        for npp in run.cfg.npp.fixed_values() {
            let (times, stop) = timed_trials(ep, kernel, st, &run, npp)?;
            keep_point(ep, kernel, st, &run, (npp, times, stop), None)?;
        }
        return Ok(());
    };
    let mut rejected = Vec::new();
    loop {
        let (npp, ppt) = estimate_npp(ep, kernel, st, &run, (res_npp, npp_init, npptrial))?;
        let (times, stop) = timed_trials(ep, kernel, st, &run, npp)?;
        let kept = check_estimate(ep, &run, res_npp, (npp, ppt), &times.ns)?;
        if npp_check::estimate_again(&kept, rejected.len()) {
            rejected.push(kept);
            continue;
        }
        let check = NppCheck { rejected, kept };
        return keep_point(ep, kernel, st, &run, (npp, times, stop), Some(check));
    }
}

/// Trial times and their start offsets as [`keep_point`] sends them from `source`: two
/// halves of equal length.
fn split_sequence(b: &[u8]) -> Result<(Vec<i64>, Vec<u64>)> {
    let all = decode_i64s(b)?;
    if all.len() % 2 != 0 {
        return Err(Error::Protocol(format!(
            "a trial sequence of {} words: times and starts differ in number",
            all.len()
        )));
    }
    let (ns, start) = all.split_at(all.len() / 2);
    Ok((ns.to_vec(), start.iter().map(|&t| t as u64).collect()))
}

/// A sequence as a timing rank sends it to rank 0: its times, then its start offsets, two
/// halves of one message ([`split_sequence`]).
fn encode_sequence(seq: &Sequence) -> Vec<u8> {
    let mut b = encode_i64s(&seq.ns);
    b.extend(seq.offsets().iter().flat_map(|t| t.to_le_bytes()));
    b
}

/// Every pair's trial times from what each rank sent (its sender's sequence), and the point's
/// own: each trial's slowest pair, with pair 0's start offsets. `(times, starts, per pair)`.
#[allow(clippy::type_complexity)]
fn pairs_sequences(
    c: &crate::method::pairs::Concurrent,
    all: &[Vec<u8>],
) -> Result<(Vec<i64>, Vec<u64>, Vec<Vec<i64>>)> {
    let mut each = Vec::with_capacity(c.pairs.len());
    let mut starts = Vec::new();
    for (i, p) in c.pairs.iter().enumerate() {
        let b = all.get(p.sender as usize).ok_or_else(|| {
            Error::Protocol(format!("no trial times from rank {} (pair {i})", p.sender))
        })?;
        let (ns, st) = split_sequence(b)?;
        if i == 0 {
            starts = st;
        }
        each.push(ns);
    }
    let n = each.first().map_or(0, Vec::len);
    if let Some((i, v)) = each.iter().enumerate().find(|(_, v)| v.len() != n) {
        return Err(Error::Protocol(format!(
            "pair {i} sent {} trial times, pair 0 sent {n}",
            v.len()
        )));
    }
    let slowest = (0..n)
        .map(|k| each.iter().map(|v| v[k]).max().unwrap_or(0))
        .collect();
    Ok((slowest, starts, each))
}

/// The point of `npp` measured in `times` (on `source`), gathered to rank 0 and kept there
/// with the data checks every rank shares.
fn keep_point<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    st: &mut TrialState,
    run: &SizeRun<'_>,
    (npp, seq, until): (u64, Sequence, Option<Stopping>),
    npp_check: Option<NppCheck>,
) -> Result<()> {
    let (cfg, label) = (run.cfg, run.label);
    let (me, src) = (ep.rank(), cfg.source);
    let mut per_pair = Vec::new();
    let (times, starts) = if let Some(c) = &cfg.pairs {
        let g = ep
            .gather(0, &encode_sequence(&seq))
            .phase_with(|| format!("{label}: collecting every pair's trial times"))?;
        match g {
            Some(all) => {
                let (times, starts, each) = pairs_sequences(c, &all)?;
                per_pair = each;
                (times, starts)
            }
            None => (Vec::new(), Vec::new()),
        }
    } else if src == 0 {
        let starts = seq.offsets();
        (seq.ns, starts)
    } else {
        let g = ep
            .gather(0, &encode_sequence(&seq))
            .phase_with(|| format!("{label}: collecting trial times"))?;
        match g {
            Some(all) => split_sequence(&all[src as usize])?,
            None => (Vec::new(), Vec::new()),
        }
    };
    // The point is kept before the ranks share their checks, so that a rank lost now
    // does not lose the trials measured; a check that failed takes it back.
    if me == 0 {
        with_collected(run.collected, |c| {
            c.points.push(RawPoint {
                pattern: run.pattern.into(),
                size: run.size,
                npp,
                npp_calculated: npp_check.as_ref().map(|c| c.kept.npp),
                median_ppt_ns: npp_check.as_ref().map(|c| c.kept.median_ppt_ns),
                trips_per_iteration: run.trips,
                trial_ns: times,
                trial_start_ns: starts,
                queue: run.queue,
                buffers: None,
                npp_check,
                until_ci: until,
                pair_trial_ns: per_pair,
                sweep: run.sweep,
            })
        });
    }
    let shared = st.share(ep, kernel, cfg);
    if me == 0 {
        with_collected(run.collected, |c| match &shared {
            Ok(facts) => {
                if let Some(p) = c.points.last_mut() {
                    p.buffers = facts.clone();
                }
            }
            Err(e) if matches!(e.root(), Error::Corrupt { .. }) => {
                c.points.pop();
            }
            Err(_) => {}
        });
        settle(run.collected);
    }
    shared.phase_with(|| format!("{label}, npp {npp}"))?;
    Ok(())
}

/// The per-iteration work of one benchmark on one rank (design §3): what the engine times.
///
/// [`Measurement`] owns the method of seed 000 (timer, warm-up, npp, a barrier and the
/// handshake before every trial, the trial times gathered to rank 0, an optional
/// verification); a kernel only says what one iteration does on this rank, how many message
/// times it holds, and how to check what arrived.
pub trait Kernel<E: Endpoint> {
    /// Pattern name of the points (`pingpong`, `transpose-pack`).
    fn name(&self) -> &'static str;

    /// How errors and phases name one measured size.
    fn label(&self, size: u64) -> String {
        format!("{} {size} B", self.name())
    }

    /// Get ready for messages of `size` bytes; called on every rank before each size.
    fn prepare(&mut self, size: u64) -> Result<()> {
        let _ = size;
        Ok(())
    }

    /// Message times in one iteration at `size`: the statistics are of
    /// `trial / (trips * npp)`.
    fn trips(&self, size: u64) -> u64;

    /// The queue this kernel's points are measured in (seed 004's benchmarks); `None` for
    /// every other kernel.
    fn queue(&self) -> Option<PointQueue> {
        None
    }

    /// Where this kernel's points lie in a sweep of windows and pairs; `None` outside one.
    fn sweep_at(&self) -> Option<SweepAt> {
        None
    }

    /// One iteration on this rank; called on the ranks that time and answer only (`source`
    /// and `dest`, or every pair's two).
    fn iteration(&mut self, ep: &mut E) -> Result<()>;

    /// `n` iterations in a row, as the timed loop and the warm-up run them: [`Kernel::iteration`]
    /// `n` times, unless the kernel hands the whole loop to a native path of the endpoint (the
    /// ping-pong runs [`Endpoint::pingpong`]). Only the result's discriminant is read per
    /// iteration, so no result is copied around the loop (docs/overhead.md).
    #[inline]
    fn iterations(&mut self, ep: &mut E, n: u64) -> Result<()> {
        for _ in 0..n {
            self.iteration(ep)?;
        }
        Ok(())
    }

    /// Untimed work of every rank before each trial's handshake (after its barrier), given
    /// the trial's `npp`: seed 001's read experiment has its dest send the messages the
    /// source will read here, so that they have arrived before the source's clock starts.
    fn before_handshake(&mut self, ep: &mut E, npp: u64) -> Result<()> {
        let _ = (ep, npp);
        Ok(())
    }

    /// Untimed work of every rank after its part of each trial's timed loop (on `source`
    /// after the second clock read; on ranks other than `source` and `dest` right after the
    /// barrier and [`Kernel::before_handshake`], so that they may take part while the others
    /// are timed: forward messages along a path, receive a stream, collect what arrived).
    fn after_timing(&mut self, ep: &mut E, npp: u64) -> Result<()> {
        let _ = (ep, npp);
        Ok(())
    }

    /// Whether the kernel fills and checks its messages ([`Kernel::fill_messages`],
    /// [`Kernel::check_messages`]): what a validated run needs of it.
    fn validates_messages(&self) -> bool {
        false
    }

    /// Before a validated trial, on `source` and `dest`, outside the timed region: fill what
    /// this rank sends with the pattern of `base`, its rank and the message's place
    /// ([`crate::method::buffers::seed`]), and what it receives into with a pattern no message
    /// carries.
    fn fill_messages(&mut self, base: u64) {
        let _ = base;
    }

    /// After a validated trial, on `source` and `dest`: the first byte this rank holds that
    /// differs from what should have arrived (its `trial` left 0 for the engine to set).
    fn check_messages(&mut self, base: u64) -> Option<Mismatch> {
        let _ = base;
        None
    }

    /// The least alignment of the addresses this rank's messages start at (`None`: no message
    /// buffers, or a kernel that does not say).
    fn message_alignment(&self) -> Option<u64> {
        None
    }

    /// Whether each size ends with a verified iteration ([`Kernel::scramble`], one more
    /// iteration, [`Kernel::check`]).
    fn verifies(&self) -> bool {
        false
    }

    /// On `dest`: forget what arrived, so that the verified iteration must deliver it again.
    fn scramble(&mut self) {}

    /// On `dest`, after the verified iteration: check what arrived.
    fn check(&self) -> Result<()> {
        Ok(())
    }
}

/// What to measure, independent of the endpoint: it makes each rank's [`Kernel`].
pub trait KernelSpec: Sync {
    /// The kernel, on any endpoint.
    type Kernel<E: Endpoint>: Kernel<E>;

    /// The kernel of rank `me`.
    fn kernel<E: Endpoint>(&self, me: Rank, cfg: &MethodConfig) -> Result<Self::Kernel<E>>;

    /// The sizes measured: the configured ones, unless the benchmark fixes its own (a
    /// transpose measures its matrix).
    fn sizes(&self, cfg: &MethodConfig) -> Vec<u64> {
        cfg.sizes.clone()
    }

    /// The points a run measures (its progress steps): one per size, unless the benchmark
    /// measures every size more than once (a queue benchmark: once per queue).
    fn steps(&self, cfg: &MethodConfig) -> usize {
        self.sizes(cfg).len()
    }

    /// What every rank runs: this rank's kernel over every size
    /// ([`Measurement::run_kernel`]). A benchmark made of several kernels in a row (seed 001's
    /// experiments) runs them itself with [`Measurement::start`] and
    /// [`Measurement::measure_kernel`].
    fn run<E: Endpoint>(&self, m: &Measurement<'_, Self>, ep: &mut E) -> Result<()>
    where
        Self: Sized,
    {
        let mut kernel = self.kernel::<E>(ep.rank(), &m.cfg)?;
        m.run_kernel(ep, &mut kernel)
    }
}

/// The time between two readings of a clock, ns: an error, never a wrapped or negative time,
/// when the second is before the first or past what a signed time holds (a clock that went
/// backwards, a simulated clock beyond its range).
fn elapsed(t1: u64, t2: u64, trial: u64) -> Result<i64> {
    t2.checked_sub(t1)
        .and_then(|d| i64::try_from(d).ok())
        .ok_or_else(|| {
            Error::Protocol(format!(
                "trial {trial}: the clock read {t2} ns after {t1} ns: it went backwards or \
                 past 2^63 ns"
            ))
        })
}

/// A safe point on every rank: each says whether a stop was asked of it (a signal to that
/// rank's process), rank 0 gathers the requests and tells every rank the one that counts
/// (its own first, else the lowest rank's), so a stop asked of any rank ends the run on all
/// of them together. `None`: go on.
pub fn agree_stop<E: Endpoint>(ep: &mut E, stop: Option<&StopFlag>) -> Result<Option<i32>> {
    let mine = stop.and_then(StopFlag::requested).unwrap_or(0);
    let all = ep.gather(0, &mine.to_le_bytes())?;
    let mut word = match all {
        Some(all) => {
            let mut asked = 0i32;
            for (r, b) in all.iter().enumerate() {
                let b: [u8; 4] = b.as_slice().try_into().map_err(|_| {
                    Error::Protocol(format!(
                        "rank {r}'s stop word: {} bytes instead of 4",
                        b.len()
                    ))
                })?;
                if asked == 0 {
                    asked = i32::from_le_bytes(b);
                }
            }
            asked.to_le_bytes().to_vec()
        }
        None => vec![0; 4],
    };
    ep.broadcast(0, &mut word)?;
    let bytes: [u8; 4] = word.as_slice().try_into().map_err(|_| {
        Error::Protocol(format!("the stop word: {} bytes instead of 4", word.len()))
    })?;
    Ok(match i32::from_le_bytes(bytes) {
        0 => None,
        s => Some(s),
    })
}

/// The one measurement program: any [`Kernel`] under the method of seed 000, every size of
/// the configuration, rank 0 collecting the raw trial times as the run goes (so a run that
/// fails keeps the sizes already measured).
pub struct Measurement<'a, S> {
    /// What is measured.
    pub spec: S,
    /// The method's parameters.
    pub cfg: MethodConfig,
    progress: Option<&'a ProgressFn<'a>>,
    stop: Option<&'a StopFlag>,
    collected: Arc<Mutex<Collected>>,
    /// When the run started ([`Measurement::start`]), on the clock of the ranks of this
    /// process: what a bound on the run's time counts from.
    started_ns: std::sync::OnceLock<u64>,
}

impl<S> std::fmt::Debug for Measurement<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Measurement")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl<'a, S: KernelSpec> Measurement<'a, S> {
    /// A measurement of `spec` with this configuration; `progress` is called on rank 0.
    pub fn new(spec: S, cfg: MethodConfig, progress: Option<&'a ProgressFn<'a>>) -> Self {
        Measurement {
            spec,
            cfg,
            progress,
            stop: None,
            collected: Arc::new(Mutex::new(Collected::default())),
            started_ns: std::sync::OnceLock::new(),
        }
    }

    /// Let `stop` end the run early: on rank 0 it is read before every size, and a stop asked
    /// for ends the run on every rank with [`Error::Interrupted`], the sizes measured kept.
    pub fn with_stop(mut self, stop: &'a StopFlag) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The safe point before each size: every rank says whether a stop was asked of it, and
    /// all hear the same answer ([`agree_stop`]).
    fn stop_here<E: Endpoint>(&self, ep: &mut E) -> Result<Option<i32>> {
        agree_stop(ep, self.stop).phase("stop check between sizes")
    }

    /// Take what rank 0 collected (also after a failed run).
    pub fn take_collected(&self) -> Collected {
        take_collected(&self.collected)
    }

    /// What rank 0 collects, shared: another thread can copy what was measured so far while
    /// the run goes on ([`snapshot_collected`]), to save it before the process is killed.
    pub fn collected_handle(&self) -> Arc<Mutex<Collected>> {
        Arc::clone(&self.collected)
    }

    /// Measure `kernel` on `ep`: what [`Program::run`] does with the spec's own kernel, open
    /// to kernels that need a particular endpoint (MPI's derived-datatype transpose). Every
    /// rank of the run calls it; ranks other than `source` and `dest` only join the control
    /// plane.
    pub fn run_kernel<E: Endpoint, K: Kernel<E>>(&self, ep: &mut E, kernel: &mut K) -> Result<()> {
        let cfg = MethodConfig {
            sizes: self.spec.sizes(&self.cfg),
            ..self.cfg.clone()
        };
        cfg.validate(ep.size())?;
        let timer = self.start(ep, &cfg)?;
        let steps = Steps {
            first: 0,
            total: cfg.sizes.len(),
        };
        self.measure_kernel(ep, kernel, &cfg, timer, steps)?;
        ep.barrier().phase("final barrier")
    }

    /// The start of every run, on every rank: the clock of `cfg.source` characterised (seed
    /// 000 §3.1, [`characterise_timer`]); returns `(min_ov, res_timing)`.
    pub fn start<E: Endpoint>(&self, ep: &mut E, cfg: &MethodConfig) -> Result<(i64, f64)> {
        // Only a bound on the run's time reads the clock here: a read costs time on the
        // simulator, and a run without the bound is measured as it always was. Read outside
        // `get_or_init`: a clock read may yield to another rank of this process (the
        // simulator's coroutines), which would wait on the initialisation under way.
        if cfg.until.as_ref().is_some_and(|u| u.run_ns.is_some()) && ep.rank() == cfg.source {
            let now = ep.now_ns();
            self.started_ns.get_or_init(|| now);
        }
        if let (0, Some(cb)) = (ep.rank(), self.progress) {
            cb(Progress {
                size_index: 0,
                sizes: cfg.sizes.len().max(1),
                size: cfg.sizes.first().copied().unwrap_or(0),
                stage: Stage::Timer,
                done: 0,
                total: 1,
                run_done: 0.0,
                run_floor: std::time::Duration::ZERO,
            });
        }
        let timer = characterise_timer(ep, cfg, &self.collected, self.stop)?;
        if cfg.pairs.is_some() {
            let hosts = gather_hosts(ep)?;
            if ep.rank() == 0 {
                with_collected(&self.collected, |c| c.hosts = hosts);
            }
        }
        Ok(timer)
    }

    /// Every size of `cfg` measured with `kernel` (warm-up, npp, trials, verification), a stop
    /// honoured before each size, rank 0 collecting the points: the body of
    /// [`Measurement::run_kernel`], open to a program that runs several kernels in a row after
    /// one [`Measurement::start`] (seed 001's experiments), each a share `steps` of its
    /// progress. It ends without a final barrier.
    pub fn measure_kernel<E: Endpoint, K: Kernel<E>>(
        &self,
        ep: &mut E,
        kernel: &mut K,
        cfg: &MethodConfig,
        timer: (i64, f64),
        steps: Steps,
    ) -> Result<()> {
        let me = ep.rank();
        let nsizes = cfg.sizes.len();
        let total = steps.total.max(steps.first + nsizes);
        let cost = limits::RunCost::new(cfg, &cfg.sizes, &|s| kernel.trips(s), timer.1);
        let report = |i: usize, stage: Stage, done: u64, of: u64| {
            if let (0, Some(cb)) = (me, self.progress) {
                let here = cost.fraction(i, stage, done, of) * nsizes as f64;
                cb(Progress {
                    size_index: steps.first + i,
                    sizes: total,
                    size: cfg.sizes[i],
                    stage,
                    done,
                    total: of,
                    run_done: (steps.first as f64 + here) / total as f64,
                    run_floor: cost.floor(),
                });
            }
        };
        let mut st = TrialState::new(ep, cfg)?;
        for (i, &size) in cfg.sizes.iter().enumerate() {
            if let Some(signal) = self.stop_here(ep)? {
                ep.barrier().phase("final barrier")?;
                return Err(Error::Interrupted {
                    signal,
                    done: steps.first + i,
                    sizes: total,
                });
            }
            let progress = |stage: Stage, done: u64, of: u64| report(i, stage, done, of);
            self.one_size(ep, kernel, cfg, size, timer, &mut st, &progress)?;
            // What the backend records may grow with what it sent (ofi: which sizes were
            // injected): rank 0's description is taken again after each size.
            if me == 0 {
                let info = ep.info();
                with_collected(&self.collected, |c| c.backend_info = Some(info));
            }
        }
        Ok(())
    }

    /// Where the collected points go, shared with a program that adds points of its own
    /// (which [`settle`]s each once it is final).
    pub fn collected(&self) -> &Mutex<Collected> {
        &self.collected
    }

    /// From now on `o` hears, on rank 0, of every point once it is kept for good
    /// ([`PointFn`]).
    pub fn observe(&self, o: PointObserver) {
        with_collected(&self.collected, |c| c.observe(o));
    }

    /// One size: barrier, warm-up, npp and trials ([`measure_size`]), then the verification
    /// when the kernel has one. The warm-up runs the kernel's hooks on every rank around the
    /// iterations of `source` and `dest`, as a trial does.
    #[allow(clippy::too_many_arguments)]
    fn one_size<E: Endpoint, K: Kernel<E>>(
        &self,
        ep: &mut E,
        kernel: &mut K,
        cfg: &MethodConfig,
        size: u64,
        (min_ov, res_timing): (i64, f64),
        st: &mut TrialState,
        progress: &dyn Fn(Stage, u64, u64),
    ) -> Result<()> {
        let participant = cfg.role(ep.rank()).participates();
        kernel.prepare(size)?;
        let label = kernel.label(size);
        if cfg.buffers.validate && participant && !kernel.validates_messages() {
            return Err(Error::Config(format!(
                "{label}: this benchmark cannot check the bytes of its messages"
            )));
        }
        ep.barrier().phase_with(|| format!("{label}: barrier"))?;
        progress(Stage::Warmup, 0, cfg.warmup);
        if cfg.warmup > 0 {
            let warm = |e: Error| e.in_phase(format!("{label}: warm-up"));
            kernel.before_handshake(ep, cfg.warmup).map_err(warm)?;
            st.begin(size, buffers::PHASE_WARMUP);
            st.before_trial(kernel, 0);
            if participant {
                kernel.iterations(ep, cfg.warmup).map_err(warm)?;
            }
            kernel.after_timing(ep, cfg.warmup).map_err(warm)?;
            st.after_trial(kernel, 0);
        }
        let run = SizeRun {
            cfg,
            pattern: kernel.name(),
            label: &label,
            size,
            trips: kernel.trips(size),
            min_ov,
            res_timing,
            collected: &self.collected,
            progress,
            queue: kernel.queue(),
            run_start_ns: self.started_ns.get().copied(),
            threshold_us: None,
            sweep: kernel.sweep_at(),
        };
        measure_size(ep, kernel, st, run)?;
        if kernel.verifies() {
            verify(ep, kernel, cfg, &label)?;
        }
        Ok(())
    }
}

/// Which share of a run's progress one kernel's sizes are ([`Measurement::measure_kernel`]):
/// its first size is step `first` of `total`.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    /// Steps before this kernel's first size.
    pub first: usize,
    /// Steps in the whole run.
    pub total: usize,
}

/// The verification after a size's trials: `dest` forgets what arrived, one more iteration
/// delivers it again, `dest` checks it and broadcasts its verdict, so that a failure is an
/// error of the run on every rank.
fn verify<E: Endpoint, K: Kernel<E>>(
    ep: &mut E,
    kernel: &mut K,
    cfg: &MethodConfig,
    label: &str,
) -> Result<()> {
    let (me, src, dst) = (ep.rank(), cfg.source, cfg.dest);
    ep.barrier()
        .phase_with(|| format!("{label}: barrier before verification"))?;
    if me == dst {
        kernel.scramble();
    }
    if me == src || me == dst {
        kernel
            .iteration(ep)
            .phase_with(|| format!("{label}: verified iteration"))?;
    }
    let mut verdict = Vec::new();
    if me == dst {
        if let Err(e) = kernel.check() {
            verdict = e.to_string().into_bytes();
        }
    }
    ep.broadcast(dst, &mut verdict)
        .phase_with(|| format!("{label}: sharing the verification"))?;
    if !verdict.is_empty() {
        return Err(Error::Protocol(format!(
            "rank {dst}: {}",
            String::from_utf8_lossy(&verdict)
        )));
    }
    Ok(())
}

impl<S: KernelSpec> Program for Measurement<'_, S> {
    type Output = ();

    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        self.spec.run(self, ep)
    }
}

/// Characterise the clock of the source rank only (`commbench timer` on a backend).
#[derive(Debug)]
pub struct TimerOnly {
    /// Clock-read pairs.
    pub samples: u64,
    /// The rank whose clock is characterised.
    pub rank: u32,
}

impl Program for TimerOnly {
    type Output = Option<TimerReport>;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Option<TimerReport>> {
        let r = if ep.rank() == self.rank {
            Some(timer::characterize(ep, self.samples))
        } else {
            None
        };
        ep.barrier()?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::kernels::TAG_PINGPONG;
    use crate::transport::{Completion, ReqId};

    /// Rank `me` of two ranks whose every operation completes at once; it logs
    /// (send?, peer, tag) of each. Its clock advances only with the kernel's messages: the
    /// `k`-th message of a ping-pong takes `cost(k)` ns.
    struct Scripted {
        me: Rank,
        log: Vec<(bool, Rank, Tag)>,
        done: std::collections::HashMap<u64, Completion>,
        clock: u64,
        messages: u64,
        cost: fn(u64) -> u64,
    }

    impl Scripted {
        fn new(me: Rank, cost: fn(u64) -> u64) -> Scripted {
            Scripted {
                me,
                log: Vec::new(),
                done: Default::default(),
                clock: 0,
                messages: 0,
                cost,
            }
        }
    }

    impl Scripted {
        fn complete(
            &mut self,
            kind: crate::transport::OpKind,
            peer: Rank,
            tag: Tag,
            buf: Vec<u8>,
        ) -> ReqId {
            self.log
                .push((kind == crate::transport::OpKind::Send, peer, tag));
            if tag == TAG_PINGPONG {
                self.clock += (self.cost)(self.messages);
                self.messages += 1;
            }
            let id = self.log.len() as u64;
            let len = buf.len();
            let c = Completion {
                kind,
                buf,
                peer,
                tag,
                len,
            };
            self.done.insert(id, c);
            ReqId(id)
        }
    }

    impl Endpoint for Scripted {
        fn rank(&self) -> Rank {
            self.me
        }
        fn size(&self) -> u32 {
            2
        }
        fn backend(&self) -> &'static str {
            "scripted"
        }
        fn timeout(&self) -> std::time::Duration {
            std::time::Duration::from_secs(1)
        }
        fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
            Ok(self.complete(crate::transport::OpKind::Send, dest, tag, buf))
        }
        fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
            let (Src::Rank(peer), TagSel::Tag(tag)) = (src, tag) else {
                return Err(Error::Invalid("scripted: wildcard".into()));
            };
            Ok(self.complete(crate::transport::OpKind::Recv, peer, tag, buf))
        }
        fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
            Ok(self.done.remove(&req.0))
        }
        fn now_ns(&mut self) -> u64 {
            self.clock
        }
        /// The peer is not modelled: at the root its part is empty, as the scripted receives
        /// that would carry it deliver nothing.
        fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
            if self.me != root {
                let tag = crate::transport::TAG_GATHER;
                self.send(root, tag, (data.len() as u64).to_le_bytes().to_vec())?;
                self.send(root, tag, data.to_vec())?;
                return Ok(None);
            }
            let part = |r: Rank| if r == root { data.to_vec() } else { Vec::new() };
            Ok(Some((0..2).map(part).collect()))
        }
    }

    /// Dest's side of a ping-pong with `source`.
    struct EchoKernel {
        source: Rank,
        buf: Vec<u8>,
    }

    impl Kernel<Scripted> for EchoKernel {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn trips(&self, _: u64) -> u64 {
            2
        }
        fn iteration(&mut self, ep: &mut Scripted) -> Result<()> {
            let b = std::mem::take(&mut self.buf);
            let b = ep
                .recv(Src::Rank(self.source), TagSel::Tag(TAG_PINGPONG), b)?
                .buf;
            self.buf = ep.send(self.source, TAG_PINGPONG, b)?;
            Ok(())
        }
    }

    /// After dest's last message of a trial, its next operation is a receive: nothing dest
    /// sends can reach the source while the source still times its last receive.
    #[test]
    fn dest_waits_after_each_trial() {
        for (source, dest) in [(0, 1), (1, 0)] {
            let cfg = MethodConfig {
                source,
                dest,
                ..MethodConfig::default()
            };
            let mut ep = Scripted::new(dest, |_| 0);
            let mut kernel = EchoKernel {
                source,
                buf: vec![0u8; 8],
            };
            let mut st = TrialState::new(&ep, &cfg).unwrap();
            trials(&mut ep, &mut kernel, &cfg, &mut st, 2, 3, 0, |_| {}).unwrap();
            let log = &ep.log;
            let ends: Vec<usize> = (0..log.len() - 1)
                .filter(|&i| log[i].2 == TAG_PINGPONG && log[i + 1].2 != TAG_PINGPONG)
                .collect();
            assert_eq!(ends.len(), 2, "{log:?}");
            for i in ends {
                assert!(!log[i + 1].0, "dest sends right after a trial: {log:?}");
            }
            // Each trial still has a barrier and the handshake before its kernel.
            let hs_sends = log.iter().filter(|o| o.0 && o.2 == TAG_HANDSHAKE).count();
            assert_eq!(hs_sends, 3);
        }
    }

    /// Source's side of a ping-pong with `dest`.
    struct PingKernel {
        dest: Rank,
        buf: Vec<u8>,
    }

    impl Kernel<Scripted> for PingKernel {
        fn name(&self) -> &'static str {
            "pingpong"
        }
        fn trips(&self, _: u64) -> u64 {
            2
        }
        fn iteration(&mut self, ep: &mut Scripted) -> Result<()> {
            let b = std::mem::take(&mut self.buf);
            let b = ep.send(self.dest, TAG_PINGPONG, b)?;
            self.buf = ep
                .recv(Src::Rank(self.dest), TagSel::Tag(TAG_PINGPONG), b)?
                .buf;
            Ok(())
        }
    }

    /// One size measured with a calculated npp (res_npp 50, npp_init 4, 20 estimating loops,
    /// 20 trials) on source 0 of the scripted clock, with a 25 ns resolution: 50 x 25 ns
    /// wants 1250 ns a loop.
    fn measure_auto(cost: fn(u64) -> u64) -> RawPoint {
        let cfg = MethodConfig {
            trials: 20,
            npp: NppChoice::Auto {
                res_npp: 50,
                npp_init: 4,
                npptrial: 20,
            },
            ..MethodConfig::default()
        };
        measure_one(&cfg, cost)
    }

    /// One 8-byte size measured under `cfg` on source 0 of the scripted clock (25 ns
    /// resolution): its one point.
    fn measure_one(cfg: &MethodConfig, cost: fn(u64) -> u64) -> RawPoint {
        let mut ep = Scripted::new(0, cost);
        let mut kernel = PingKernel {
            dest: 1,
            buf: vec![0u8; 8],
        };
        let mut st = TrialState::new(&ep, cfg).unwrap();
        let collected = Mutex::new(Collected::default());
        let run = SizeRun {
            cfg,
            pattern: "pingpong",
            label: "pingpong 8 B",
            size: 8,
            trips: 2,
            min_ov: 0,
            res_timing: 25.0,
            collected: &collected,
            progress: &|_, _, _| {},
            queue: None,
            run_start_ns: Some(0),
            threshold_us: None,
            sweep: None,
        };
        measure_size(&mut ep, &mut kernel, &mut st, run).unwrap();
        let mut c = collected.into_inner().unwrap();
        assert_eq!(c.points.len(), 1);
        c.points.remove(0)
    }

    /// Messages of a ping-pong: an estimate is 20 loops of 4, 160 messages.
    const ESTIMATE: u64 = 160;

    /// A steady 250 ns ping-pong: npp 5 at once, nothing rejected.
    #[test]
    fn an_estimate_the_trials_confirm_is_kept() {
        let p = measure_auto(|_| 125);
        assert_eq!((p.npp, p.npp_calculated), (5, Some(5)));
        let c = p.npp_check.unwrap();
        assert!(c.rejected.is_empty() && c.warning().is_none(), "{c:?}");
        assert_eq!(c.kept.trials_ppt_ns, 250.0);
        assert_eq!(p.trial_ns, vec![1250; 20]);
    }

    /// The host is busy while npp is first estimated (12 ms a ping-pong): npp 1, which its
    /// trials (250 ns a ping-pong, npp 5 due) contradict, so npp is estimated again and the
    /// trials measured with npp 5 are kept.
    #[test]
    fn an_estimate_disturbed_once_is_made_again() {
        let p = measure_auto(|k| if k < ESTIMATE { 6_000_000 } else { 125 });
        assert_eq!((p.npp, p.median_ppt_ns), (5, Some(250.0)));
        assert_eq!(p.trial_ns, vec![1250; 20]);
        let c = p.npp_check.unwrap();
        assert_eq!(c.rejected.len(), 1);
        let r = c.rejected[0];
        assert_eq!((r.median_ppt_ns, r.npp), (12e6, 1));
        assert_eq!((r.trials_ppt_ns, r.npp_from_trials), (250.0, 5));
        assert!(c.warning().is_none());
    }

    /// Every estimate disturbed (each estimate and its 20 trials of npp 1 are 200 messages):
    /// after the last re-estimate the trials are kept, with the warning.
    #[test]
    fn an_estimate_disturbed_every_time_is_kept_with_a_warning() {
        let p = measure_auto(|k| {
            if k % (ESTIMATE + 40) < ESTIMATE {
                6_000_000
            } else {
                125
            }
        });
        assert_eq!(p.npp, 1);
        assert_eq!(p.trial_ns, vec![250; 20]);
        let c = p.npp_check.unwrap();
        assert_eq!(c.rejected.len(), npp_check::REESTIMATES);
        assert!(c.kept.disagrees());
        let w = c.warning().unwrap();
        assert!(w.contains("estimated 3 times"), "{w}");
    }

    /// A given npp is measured as given, with nothing to check.
    #[test]
    fn a_given_npp_is_not_checked() {
        let cfg = MethodConfig {
            trials: 5,
            npp: NppChoice::Fixed(3),
            ..MethodConfig::default()
        };
        let p = &measure_one(&cfg, |_| 100);
        assert_eq!((p.npp, p.npp_calculated, &p.npp_check), (3, None, &None));
        assert_eq!(p.trial_ns, vec![600; 5]);
    }

    /// Until the interval is narrow enough: a steady ping-pong converges at its first block,
    /// each trial's start recorded; one whose every other message is slow does not, and
    /// stops at the bound on the size's time, at the end of a block, saying so.
    #[test]
    fn a_size_runs_until_its_interval_is_narrow_or_a_bound_stops_it() {
        let rule = until::UntilCi {
            min_trials: 12,
            block: 7,
            size_ns: Some(300_000),
            ..until::UntilCi::new(0.01, 0.95)
        };
        let cfg = MethodConfig {
            trials: 10_000,
            npp: NppChoice::Fixed(1),
            until: Some(rule.clone()),
            ..MethodConfig::default()
        };
        let p = measure_one(&cfg, |_| 100);
        assert_eq!(p.trial_ns, vec![200; 12]);
        let u = p.until_ci.unwrap();
        assert_eq!(
            (u.outcome, u.bound, u.checks),
            (until::Outcome::Converged, None, 1)
        );
        assert_eq!(u.half_width_rel, 0.0);
        assert_eq!(p.trial_start_ns.len(), 12);
        assert_eq!(p.trial_start_ns[0], 0);
        assert!(p.trial_start_ns.windows(2).all(|w| w[1] >= w[0] + 200));
        // Trials of 200 ns and 20 us alternate: the median's interval spans both forever.
        let p = measure_one(&cfg, |k| if (k / 2) % 2 == 0 { 100 } else { 10_000 });
        let u = p.until_ci.unwrap();
        assert_eq!(u.outcome, until::Outcome::DidNotConverge);
        assert_eq!(u.bound, Some(until::Bound::SizeTime));
        assert!(u.half_width_rel > 0.5, "{u:?}");
        let mut ends = vec![];
        let mut done = 0;
        while done < 10_000 {
            done += rule.next_block(done, 10_000);
            ends.push(done);
        }
        let n = p.trial_ns.len() as u64;
        assert!(ends.contains(&n) && n < 10_000, "{n} trials");
        assert_eq!(
            ends.iter().position(|&e| e == n).unwrap() as u64 + 1,
            u.checks
        );
    }

    #[test]
    fn trial_times_round_trip_through_bytes() {
        let v = vec![0, -5, i64::MAX, 123_456_789];
        assert_eq!(decode_i64s(&encode_i64s(&v)).unwrap(), v);
        assert!(decode_i64s(&[1, 2, 3]).is_err());
    }
}
