//! Benchmark patterns: programs every rank runs, timed with the method of seed 000.
//!
//! Every pattern ([`PatternKind`]) is measured as seed 000 §3.2 prescribes: for each size a
//! barrier and a handshake precede every trial, and the `source` rank times `npp` iterations
//! of the pattern's kernel. For the COMMS1 ping-pong of seed 002:
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
//! The other kernels: COMMS2 exchange (seed 002: both ranks send to each other at once, then
//! return the messages), and windowed streaming as osu_bw does (`window` sends outstanding,
//! then a short acknowledgement), in one direction or both. Each kernel iteration holds
//! [`PatternKind::trips_per_iteration`] message times, and the statistics are of
//! `trial / (trips * npp)`.
//!
//! Ranks other than `source` and `dest` only join the barriers and the control plane.
//! Rank 0 collects the raw trial times ([`RawPoint`]) one size at a time, so the sizes already
//! measured survive a failure later in the run.

use crate::method::timer::{self, TimerReport};
use crate::method::{self, MethodConfig, NppChoice};
use crate::transport::error::{Error, Result, ResultExt};
use crate::transport::{BackendInfo, Completion, Endpoint, Program, ReqId, Src, Tag, TagSel};
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// Tag of the measured messages.
pub const TAG_PINGPONG: Tag = 1;
/// Tag of the handshake before each trial.
pub const TAG_HANDSHAKE: Tag = 2;
/// Tag of the acknowledgement closing a window.
pub const TAG_ACK: Tag = 3;

/// Largest total of message buffers one rank keeps for a window; above it the window shrinks
/// (and the point records the window it used).
pub const WINDOW_BYTES_MAX: u64 = 64 << 20;

/// The kernel timed in each trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PatternKind {
    /// COMMS1: source sends, dest returns it (seed 002, seed 000 §3.2).
    PingPong,
    /// COMMS2: source and dest send to each other at once, then return the messages (seed 002).
    Exchange,
    /// Streaming: `window` sends outstanding, then a short acknowledgement (as osu_bw).
    Bandwidth {
        /// Sends per window.
        window: u32,
    },
    /// Streaming both ways at once: each side has `window` sends and receives outstanding.
    BiBandwidth {
        /// Sends per window and direction.
        window: u32,
    },
}

impl PatternKind {
    /// Name in reports and the result document.
    pub fn name(&self) -> &'static str {
        match self {
            PatternKind::PingPong => "pingpong",
            PatternKind::Exchange => "exchange",
            PatternKind::Bandwidth { .. } => "bandwidth",
            PatternKind::BiBandwidth { .. } => "bibandwidth",
        }
    }

    /// The window actually used for messages of `size` bytes (1 for non-window patterns).
    pub fn effective_window(&self, size: u64) -> u64 {
        match self {
            PatternKind::Bandwidth { window } | PatternKind::BiBandwidth { window } => {
                let cap = (WINDOW_BYTES_MAX / size.max(1)).max(1);
                (*window as u64).clamp(1, cap)
            }
            _ => 1,
        }
    }

    /// Message times in one kernel iteration: a ping-pong and an exchange hold two (there and
    /// back), a window holds `window` (per direction).
    pub fn trips_per_iteration(&self, size: u64) -> u64 {
        match self {
            PatternKind::PingPong | PatternKind::Exchange => 2,
            _ => self.effective_window(size),
        }
    }
}

/// The raw outcome of one size: what the analysis and the result document are built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawPoint {
    /// Pattern name (`pingpong`).
    pub pattern: String,
    /// Message size, bytes.
    pub size: u64,
    /// `npp` used.
    pub npp: u64,
    /// `npp` the §3.3 formula gave (None when fixed with `--npp`).
    pub npp_calculated: Option<u64>,
    /// `median_ppt` of §3.3, ns (None when `npp` was fixed).
    pub median_ppt_ns: Option<f64>,
    /// Message times per loop iteration (2 for a ping-pong, the window for streaming).
    pub trips_per_iteration: u64,
    /// Every trial time, ns, `min_ov` subtracted, in the order measured.
    pub trial_ns: Vec<i64>,
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

/// Where a run is, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Characterising the timer.
    Timer,
    /// Warm-up ping-pongs.
    Warmup,
    /// Estimating npp.
    Npp,
    /// Timed trials.
    Trials,
}

/// A progress report, given on rank 0 only, outside timed regions.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Index of the size being measured.
    pub size_index: usize,
    /// Number of sizes.
    pub sizes: usize,
    /// The size, bytes.
    pub size: u64,
    /// What is being done.
    pub stage: Stage,
    /// Units done in this stage.
    pub done: u64,
    /// Units in this stage.
    pub total: u64,
}

/// Callback receiving progress reports.
pub type ProgressFn<'a> = dyn Fn(Progress) + Sync + 'a;

/// What rank 0 learned during a run. Filled as the run goes, so it holds the partial results
/// of a run that failed.
#[derive(Debug, Default)]
pub struct Collected {
    /// The timer characterisation of the source rank.
    pub timer: Option<TimerReport>,
    /// Rank 0's backend description.
    pub backend_info: Option<BackendInfo>,
    /// One entry per size completed.
    pub points: Vec<RawPoint>,
}

/// A pattern measured under the method of seed 000.
pub struct Benchmark<'a> {
    /// The kernel.
    pub kind: PatternKind,
    /// The method's parameters.
    pub cfg: MethodConfig,
    /// Progress callback (rank 0).
    pub progress: Option<&'a ProgressFn<'a>>,
    /// Results, on rank 0.
    pub collected: Mutex<Collected>,
}

impl std::fmt::Debug for Benchmark<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PingPong")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl<'a> Benchmark<'a> {
    /// A benchmark of `kind` with this configuration.
    pub fn new(kind: PatternKind, cfg: MethodConfig, progress: Option<&'a ProgressFn<'a>>) -> Self {
        Benchmark {
            kind,
            cfg,
            progress,
            collected: Mutex::new(Collected::default()),
        }
    }

    /// Take what rank 0 collected (also after a failed run).
    pub fn take_collected(&self) -> Collected {
        take_collected(&self.collected)
    }

    fn report(&self, p: Progress) {
        if let Some(cb) = self.progress {
            cb(p);
        }
    }
}

/// The state of one rank in a pattern: its role, its buffers, and the kernel.
struct Looper {
    kind: PatternKind,
    src: u32,
    dst: u32,
    me: u32,
    buf: Vec<u8>,
    buf2: Vec<u8>,
    hs: Vec<u8>,
    window: Vec<Vec<u8>>,
    rwindow: Vec<Vec<u8>>,
    reqs: Vec<ReqId>,
    done: Vec<Completion>,
}

impl Looper {
    fn new(kind: PatternKind, src: u32, dst: u32, me: u32, len: usize) -> Self {
        let participant = me == src || me == dst;
        let w = if participant {
            kind.effective_window(len as u64) as usize
        } else {
            0
        };
        let (nwin, nrwin) = match kind {
            PatternKind::Bandwidth { .. } => {
                if me == src {
                    (w, 0)
                } else {
                    (0, w)
                }
            }
            PatternKind::BiBandwidth { .. } => (w, w),
            _ => (0, 0),
        };
        let needs2 = matches!(kind, PatternKind::Exchange) && participant;
        Looper {
            kind,
            src,
            dst,
            me,
            buf: if participant && nwin + nrwin == 0 {
                vec![0u8; len]
            } else {
                Vec::new()
            },
            buf2: if needs2 { vec![0u8; len] } else { Vec::new() },
            hs: vec![0u8; 8],
            window: (0..nwin).map(|_| vec![0u8; len]).collect(),
            rwindow: (0..nrwin).map(|_| vec![0u8; len]).collect(),
            reqs: Vec::with_capacity(2 * w + 2),
            done: Vec::with_capacity(2 * w + 2),
        }
    }

    fn peer(&self) -> u32 {
        if self.me == self.src {
            self.dst
        } else {
            self.src
        }
    }

    /// One iteration of the kernel on this rank (nothing on non-participants).
    #[inline]
    fn iteration<E: Endpoint>(&mut self, ep: &mut E) -> Result<()> {
        let (me, src, dst) = (self.me, self.src, self.dst);
        if me != src && me != dst {
            return Ok(());
        }
        let peer = self.peer();
        match self.kind {
            PatternKind::PingPong => {
                let b = std::mem::take(&mut self.buf);
                self.buf = if me == src {
                    let b = ep.send(dst, TAG_PINGPONG, b)?;
                    ep.recv(Src::Rank(dst), TagSel::Tag(TAG_PINGPONG), b)?.buf
                } else {
                    let b = ep.recv(Src::Rank(src), TagSel::Tag(TAG_PINGPONG), b)?.buf;
                    ep.send(src, TAG_PINGPONG, b)?
                };
            }
            PatternKind::Exchange => {
                // Both send at once, then each returns what it received.
                for _ in 0..2 {
                    let inb = std::mem::take(&mut self.buf2);
                    let outb = std::mem::take(&mut self.buf);
                    let r = ep.irecv(Src::Rank(peer), TagSel::Tag(TAG_PINGPONG), inb)?;
                    let s = ep.isend(peer, TAG_PINGPONG, outb)?;
                    let got = ep.wait(r)?;
                    let sent = ep.wait(s)?;
                    // What arrived goes back out next; the sent buffer receives next.
                    self.buf = got.buf;
                    self.buf2 = sent.buf;
                }
            }
            PatternKind::Bandwidth { .. } => {
                self.reqs.clear();
                if me == src {
                    for b in self.window.drain(..) {
                        self.reqs.push(ep.isend(dst, TAG_PINGPONG, b)?);
                    }
                    ep.wait_all(&self.reqs, &mut self.done)?;
                    self.window.extend(self.done.drain(..).map(|c| c.buf));
                    let hs = std::mem::take(&mut self.hs);
                    self.hs = ep.recv(Src::Rank(dst), TagSel::Tag(TAG_ACK), hs)?.buf;
                } else {
                    for b in self.rwindow.drain(..) {
                        self.reqs
                            .push(ep.irecv(Src::Rank(src), TagSel::Tag(TAG_PINGPONG), b)?);
                    }
                    ep.wait_all(&self.reqs, &mut self.done)?;
                    self.rwindow.extend(self.done.drain(..).map(|c| c.buf));
                    let hs = std::mem::take(&mut self.hs);
                    self.hs = ep.send(src, TAG_ACK, hs)?;
                }
            }
            PatternKind::BiBandwidth { .. } => {
                self.reqs.clear();
                let nr = self.rwindow.len();
                for b in self.rwindow.drain(..) {
                    self.reqs
                        .push(ep.irecv(Src::Rank(peer), TagSel::Tag(TAG_PINGPONG), b)?);
                }
                for b in self.window.drain(..) {
                    self.reqs.push(ep.isend(peer, TAG_PINGPONG, b)?);
                }
                ep.wait_all(&self.reqs, &mut self.done)?;
                for (i, c) in self.done.drain(..).enumerate() {
                    if i < nr {
                        self.rwindow.push(c.buf);
                    } else {
                        self.window.push(c.buf);
                    }
                }
            }
        }
        Ok(())
    }

    /// `n` untimed iterations (warm-up), no barrier, no handshake.
    fn untimed<E: Endpoint>(&mut self, ep: &mut E, n: u64) -> Result<()> {
        for _ in 0..n {
            self.iteration(ep)?;
        }
        Ok(())
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

/// Lock a [`Collected`] (also when poisoned) and change it.
pub fn with_collected(c: &Mutex<Collected>, f: impl FnOnce(&mut Collected)) {
    match c.lock() {
        Ok(mut g) => f(&mut g),
        Err(p) => f(&mut p.into_inner()),
    }
}

/// Seed 000 §3.1 for a run: the `source` rank characterises its clock, every rank learns
/// `(min_ov, res_timing)`, and rank 0 keeps the report and its backend's description.
pub fn characterise_timer<E: Endpoint>(
    ep: &mut E,
    cfg: &MethodConfig,
    collected: &Mutex<Collected>,
) -> Result<(i64, f64)> {
    let me = ep.rank();
    if me == 0 {
        let info = ep.info();
        with_collected(collected, |c| c.backend_info = Some(info));
    }
    ep.barrier().phase("start-up barrier")?;
    let mut tb = Vec::new();
    if me == cfg.source {
        let t = timer::characterize(ep, cfg.timer_samples);
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

/// Seed 000 §3.2: `ntrial` trials of `npp` kernel iterations, each after a barrier and the
/// handshake (dest sends one element, source receives it, then source reads the clock). The
/// barrier is [`Endpoint::barrier_first`] rooted at dest: after its last message of a trial,
/// dest waits rather than reports, so no message of dest's reaches the source while the source
/// is still inside the timed region.
/// Returns the trial times (ns, `min_ov` subtracted) on `source` and an empty vector
/// elsewhere; ranks other than `source` and `dest` only join the barriers. `tick` is called
/// after every trial, outside the timed region. Generic over the iteration so the timed loop
/// has no dynamic dispatch.
#[allow(clippy::too_many_arguments)]
pub fn trials<E: Endpoint, I: FnMut(&mut E) -> Result<()>>(
    ep: &mut E,
    iteration: &mut I,
    cfg: &MethodConfig,
    hs: &mut Vec<u8>,
    npp: u64,
    ntrial: u64,
    min_ov: i64,
    mut tick: impl FnMut(u64),
) -> Result<Vec<i64>> {
    let (me, src, dst) = (ep.rank(), cfg.source, cfg.dest);
    let mut times = Vec::new();
    if me == src {
        times
            .try_reserve_exact(ntrial as usize)
            .map_err(|_| Error::Config(format!("cannot hold {ntrial} trial times in memory")))?;
    }
    for k in 0..ntrial {
        ep.barrier_first(dst)
            .phase_with(|| format!("barrier before trial {k}"))?;
        if me == src {
            let b = std::mem::take(hs);
            *hs = ep
                .recv(Src::Rank(dst), TagSel::Tag(TAG_HANDSHAKE), b)
                .phase_with(|| format!("handshake of trial {k}"))?
                .buf;
            let t1 = ep.now_ns();
            for _ in 0..npp {
                iteration(ep).phase_with(|| format!("trial {k}"))?;
            }
            let t2 = ep.now_ns();
            times.push(t2 as i64 - t1 as i64 - min_ov);
        } else if me == dst {
            let b = std::mem::take(hs);
            *hs = ep
                .send(src, TAG_HANDSHAKE, b)
                .phase_with(|| format!("handshake of trial {k}"))?;
            for _ in 0..npp {
                iteration(ep).phase_with(|| format!("trial {k}"))?;
            }
        }
        tick(k + 1);
    }
    Ok(times)
}

/// One measured size: what [`measure_size`] needs besides the endpoint and the kernel.
#[derive(Clone, Copy)]
pub struct SizeRun<'a> {
    /// The method's parameters.
    pub cfg: &'a MethodConfig,
    /// Pattern name for the points.
    pub pattern: &'a str,
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
}

impl std::fmt::Debug for SizeRun<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SizeRun")
            .field("pattern", &self.pattern)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// npp for one size (seed 000 §3.3: estimated from the timer resolution and the median
/// iteration time, or the values given), then the timed trials (§3.2) for each npp; rank 0
/// collects one [`RawPoint`] per npp, trial times gathered from `source` when it is not rank 0.
pub fn measure_size<E: Endpoint, I: FnMut(&mut E) -> Result<()>>(
    ep: &mut E,
    iteration: &mut I,
    hs: &mut Vec<u8>,
    run: SizeRun<'_>,
) -> Result<()> {
    let SizeRun {
        cfg,
        pattern,
        size,
        trips,
        min_ov,
        res_timing,
        collected,
        progress,
    } = run;
    let (me, src) = (ep.rank(), cfg.source);
    let phase = format!("{pattern} {size} B");
    let runs: Vec<(u64, Option<u64>, Option<f64>)> = match &cfg.npp {
        NppChoice::Auto {
            res_npp,
            npp_init,
            npptrial,
        } => {
            let (res_npp, npp_init, npptrial) = (*res_npp, *npp_init, *npptrial);
            progress(Stage::Npp, 0, npptrial);
            let t = trials(ep, iteration, cfg, hs, npp_init, npptrial, min_ov, |k| {
                if k % 64 == 0 {
                    progress(Stage::Npp, k, npptrial)
                }
            })
            .phase_with(|| format!("{phase}: estimating npp"))?;
            let mut b = Vec::new();
            if me == src {
                let ppt = method::median_ppt(&t, npp_init);
                let n = method::npp_formula(res_npp, res_timing, ppt);
                b.extend_from_slice(&n.to_le_bytes());
                b.extend_from_slice(&ppt.to_le_bytes());
            }
            ep.broadcast(src, &mut b)
                .phase_with(|| format!("{phase}: sharing npp"))?;
            if b.len() != 16 {
                return Err(Error::Protocol(format!("npp message of {} bytes", b.len())));
            }
            let n = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
            let ppt = f64::from_le_bytes(b[8..].try_into().unwrap_or([0; 8]));
            vec![(n, Some(n), Some(ppt))]
        }
        other => other
            .fixed_values()
            .into_iter()
            .map(|n| (n, None, None))
            .collect(),
    };
    for (npp, npp_calculated, median_ppt_ns) in runs {
        progress(Stage::Trials, 0, cfg.trials);
        let every = (cfg.trials / 200).max(1);
        let times = trials(ep, iteration, cfg, hs, npp, cfg.trials, min_ov, |k| {
            if k % every == 0 || k == cfg.trials {
                progress(Stage::Trials, k, cfg.trials)
            }
        })
        .phase_with(|| format!("{phase}, npp {npp}"))?;
        let times = if src == 0 {
            times
        } else {
            let g = ep
                .gather(0, &encode_i64s(&times))
                .phase_with(|| format!("{phase}: collecting trial times"))?;
            match g {
                Some(all) => decode_i64s(&all[src as usize])?,
                None => Vec::new(),
            }
        };
        if me == 0 {
            with_collected(collected, |c| {
                c.points.push(RawPoint {
                    pattern: pattern.into(),
                    size,
                    npp,
                    npp_calculated,
                    median_ppt_ns,
                    trips_per_iteration: trips,
                    trial_ns: times,
                })
            });
        }
    }
    Ok(())
}

impl Program for Benchmark<'_> {
    type Output = ();

    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let cfg = &self.cfg;
        cfg.validate(ep.size())?;
        let me = ep.rank();
        let (src, dst) = (cfg.source, cfg.dest);
        let nsizes = cfg.sizes.len();
        let name = self.kind.name();
        if me == 0 {
            self.report(Progress {
                size_index: 0,
                sizes: nsizes,
                size: cfg.sizes[0],
                stage: Stage::Timer,
                done: 0,
                total: 1,
            });
        }
        let (min_ov, res_timing) = characterise_timer(ep, cfg, &self.collected)?;
        let mut hs = vec![0u8; 8];
        for (i, &size) in cfg.sizes.iter().enumerate() {
            let len = usize::try_from(size)
                .map_err(|_| Error::Config(format!("size {size} does not fit in memory")))?;
            let mut lp = Looper::new(self.kind, src, dst, me, len);
            let progress = |stage: Stage, done: u64, total: u64| {
                if me == 0 {
                    self.report(Progress {
                        size_index: i,
                        sizes: nsizes,
                        size,
                        stage,
                        done,
                        total,
                    });
                }
            };
            ep.barrier()
                .phase_with(|| format!("{name} {size} B: barrier"))?;
            progress(Stage::Warmup, 0, cfg.warmup);
            lp.untimed(ep, cfg.warmup)
                .phase_with(|| format!("{name} {size} B: warm-up"))?;
            let run = SizeRun {
                cfg,
                pattern: name,
                size,
                trips: self.kind.trips_per_iteration(size),
                min_ov,
                res_timing,
                collected: &self.collected,
                progress: &progress,
            };
            measure_size(ep, &mut |ep: &mut E| lp.iteration(ep), &mut hs, run)?;
        }
        ep.barrier().phase("final barrier")
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
    use crate::transport::Rank;

    /// Rank `me` of two ranks whose every operation completes at once; it logs
    /// (send?, peer, tag) of each.
    struct Scripted {
        me: Rank,
        log: Vec<(bool, Rank, Tag)>,
        done: std::collections::HashMap<u64, Completion>,
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
            let mut ep = Scripted {
                me: dest,
                log: Vec::new(),
                done: Default::default(),
            };
            let mut buf = vec![0u8; 8];
            let mut kernel = |ep: &mut Scripted| -> Result<()> {
                let b = std::mem::take(&mut buf);
                let b = ep
                    .recv(Src::Rank(source), TagSel::Tag(TAG_PINGPONG), b)?
                    .buf;
                buf = ep.send(source, TAG_PINGPONG, b)?;
                Ok(())
            };
            let mut hs = vec![0u8; 8];
            trials(&mut ep, &mut kernel, &cfg, &mut hs, 2, 3, 0, |_| {}).unwrap();
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

    #[test]
    fn trial_times_round_trip_through_bytes() {
        let v = vec![0, -5, i64::MAX, 123_456_789];
        assert_eq!(decode_i64s(&encode_i64s(&v)).unwrap(), v);
        assert!(decode_i64s(&[1, 2, 3]).is_err());
    }
}
