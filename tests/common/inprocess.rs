//! Result documents of runs measured in-process on the simulator, made by the same library
//! step as the command line's (`analysis::assemble`): the tests check what a run's document
//! says, not a copy of how it is made. A run may also keep the clock readings of one rank,
//! to place a point's trials on the machine's virtual time line (where a fault with a window
//! starts).

use commbench::analysis::allpairs::Rule;
use commbench::analysis::assemble::{self, BackendRun, Outcome, Recipe, Started};
use commbench::analysis::document::{ResultDoc, RunConfig};
use commbench::analysis::fit::Breakpoint;
use commbench::analysis::point::Point;
use commbench::core::method::allpairs::steps::TAG_STEP;
use commbench::core::method::allpairs::{
    AllPairs, AllPairsCollected, AllPairsConfig, RawCell, RawMode, RawSink,
};
use commbench::core::method::engine::{Collected, KernelSpec, Measurement};
use commbench::core::method::MethodConfig;
use commbench::core::transport::work::Work;
use commbench::core::transport::{BackendInfo, Role, Span};
use commbench::core::{Completion, Endpoint, Program, Rank, ReqId, Result, Src, Tag, TagSel};
use commbench_sim::SimConfig;
use std::sync::Mutex;
use std::time::Duration;

/// What a document of `config` on the simulator is made with: no fit for seed 001's and
/// seed 004's runs (as their plans ask), the transport routing over its cube.
fn recipe(method: &MethodConfig, config: RunConfig) -> Recipe {
    Recipe {
        cut_coef: method.cut_coef,
        breakpoint: Breakpoint::None,
        instructions_per_second: None,
        config: RunConfig {
            method: method.clone(),
            ..config
        },
        transport_forwards: true,
        command: vec!["commbench".into(), "(in process)".into()],
    }
}

/// The document of `collected` and `result` of a run on `machine`.
fn document(
    machine: &SimConfig,
    recipe: &Recipe,
    collected: Collected,
    result: Result<(), commbench::core::Error>,
) -> ResultDoc {
    let outcome = Outcome {
        ranks: machine.nodes(),
        launcher: "simulator".into(),
        rank: 0,
        runs: vec![BackendRun {
            backend: "sim",
            collected,
            result,
        }],
    };
    assemble::document(recipe, outcome, Started::now())
}

/// `spec` measured under `method` on `machine`, and its document (`config` says what the run
/// was: `sixtimes`, `queue`, ...).
pub fn sim_document<S: KernelSpec>(
    machine: &SimConfig,
    spec: S,
    method: MethodConfig,
    config: RunConfig,
) -> ResultDoc {
    let recipe = recipe(&method, config);
    let m = Measurement::new(spec, method, None);
    let result = commbench_sim::run(machine, &m).map(drop);
    document(machine, &recipe, m.take_collected(), result)
}

/// An all-pairs run's document: `method` and `config` on `machine`, the suspects measured
/// again alone, the matrix attributed under `rule`.
pub fn sim_matrix_document(
    machine: &SimConfig,
    method: MethodConfig,
    config: AllPairsConfig,
    rule: Rule,
) -> ResultDoc {
    matrix_document(machine, method, config, rule, None)
}

/// [`sim_matrix_document`] of a run in which rank `rank`'s `nth` message of the steps
/// between rounds (from 0) comes in and is then lost with its sender, as when a process dies
/// while its message is part way in: the receive fails with `PeerLost` naming the sender.
pub fn sim_matrix_document_losing(
    machine: &SimConfig,
    method: MethodConfig,
    config: AllPairsConfig,
    rule: Rule,
    (rank, nth): (Rank, u64),
) -> ResultDoc {
    matrix_document(machine, method, config, rule, Some((rank, nth)))
}

fn matrix_document(
    machine: &SimConfig,
    method: MethodConfig,
    config: AllPairsConfig,
    rule: Rule,
    lose: Option<(Rank, u64)>,
) -> ResultDoc {
    let recipe = recipe(&method, RunConfig::default());
    let pick = |c: &AllPairsCollected, size: u64| {
        commbench::analysis::matrix::pick_retests(c, size, &rule)
    };
    let sink = MemorySink::default();
    let mut prog = AllPairs::new(method, config.clone(), None).with_retest(&pick);
    if config.raw == RawMode::All {
        prog = prog.with_raw_sink(&sink);
    }
    let result = match lose {
        None => commbench_sim::run(machine, &prog).map(drop),
        Some((rank, nth)) => {
            let losing = Losing {
                program: &prog,
                rank,
                nth,
            };
            commbench_sim::run(machine, &losing).map(drop)
        }
    };
    let collected = prog.take_collected();
    let timers = Collected::of(
        collected.timers.first().cloned(),
        collected.backend_info.clone(),
        Vec::new(),
    );
    let doc = document(machine, &recipe, timers, result);
    let mut doc = assemble::with_matrix(doc, collected, config, rule);
    // The raw files' lines, read back as `compare` reads them.
    if let Some(m) = doc.allpairs.as_mut() {
        let lines = std::mem::take(&mut *sink.0.lock().unwrap());
        m.attach_raw(lines);
    }
    doc
}

/// Raw trials kept in memory, as a run's raw files would hold them (`--raw all`).
#[derive(Default)]
struct MemorySink(Mutex<Vec<RawCell>>);

impl RawSink for MemorySink {
    fn write(&self, _rank: Rank, cells: &[RawCell]) -> Result<()> {
        self.0.lock().unwrap().extend_from_slice(cells);
        Ok(())
    }
}

/// `spec` measured under `method` on `machine` as [`sim_document`] does, with every reading
/// of `rank`'s clock in the order taken (virtual ns since the run started): where a point's
/// trials are on the machine's time line ([`trial_clock`]).
pub fn sim_document_clocked<S: KernelSpec>(
    machine: &SimConfig,
    spec: S,
    method: MethodConfig,
    config: RunConfig,
    rank: Rank,
) -> (ResultDoc, Vec<u64>) {
    let recipe = recipe(&method, config);
    let m = Measurement::new(spec, method, None);
    let clocked = Clocked {
        program: &m,
        rank,
        reads: Mutex::new(Vec::new()),
    };
    let result = commbench_sim::run(machine, &clocked).map(drop);
    let doc = document(machine, &recipe, m.take_collected(), result);
    let reads = clocked
        .reads
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    (doc, reads)
}

/// The virtual time at which the first trial of `point` started, found among `reads`, the
/// clock readings of the rank that timed it ([`sim_document_clocked`]): each trial reads the
/// clock when it starts and when it ends, so its starts are every other reading of a run of
/// `2 x trials` readings whose differences are the point's `trial_start_ns` and whose pairs
/// are its `trial_ns` (plus `min_ov`, the same for every trial). `None` when no run of
/// readings is the point's.
pub fn trial_clock(reads: &[u64], point: &Point) -> Option<u64> {
    let n = point.trial_start_ns.len();
    if n == 0 || reads.len() < 2 * n {
        return None;
    }
    (0..=reads.len() - 2 * n).rev().find_map(|i| {
        let run = &reads[i..i + 2 * n];
        let t0 = run[0];
        let ov = (run[1] - run[0]) as i64 - point.trial_ns[0];
        let fits = (0..n).all(|j| {
            run[2 * j] - t0 == point.trial_start_ns[j]
                && (run[2 * j + 1] - run[2 * j]) as i64 - ov == point.trial_ns[j]
        });
        fits.then_some(t0)
    })
}

/// A program run with `rank`'s clock readings recorded.
struct Clocked<'a, P> {
    program: &'a P,
    rank: Rank,
    reads: Mutex<Vec<u64>>,
}

impl<P: Program> Program for Clocked<'_, P> {
    type Output = P::Output;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<P::Output> {
        if ep.rank() != self.rank {
            return self.program.run(ep);
        }
        let mut rec = Recording::new(ep);
        let out = self.program.run(&mut rec);
        if let Ok(mut r) = self.reads.lock() {
            r.append(&mut rec.reads);
        }
        out
    }
}

/// A program run with `rank`'s `nth` message of the steps lost as it arrives ([`Recording`]).
struct Losing<'a, P> {
    program: &'a P,
    rank: Rank,
    nth: u64,
}

impl<P: Program> Program for Losing<'_, P> {
    type Output = P::Output;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<P::Output> {
        if ep.rank() != self.rank {
            return self.program.run(ep);
        }
        let mut rec = Recording::new(ep);
        rec.lose_step = Some(self.nth);
        self.program.run(&mut rec)
    }
    fn lost(&self, rank: Rank) -> Result<P::Output> {
        self.program.lost(rank)
    }
    fn gone(&self) -> Vec<Rank> {
        self.program.gone()
    }
}

/// An endpoint that keeps every clock reading of the one it wraps, and otherwise is it:
/// every call goes to it unchanged, so a run's messages and times are the same. But with
/// `lose_step`: the receive of that message of the steps between rounds (counted from 0)
/// fails with `PeerLost` once its message is in, as if its sender died meanwhile.
struct Recording<'a, E> {
    ep: &'a mut E,
    reads: Vec<u64>,
    lose_step: Option<u64>,
    steps_posted: u64,
    armed: Option<ReqId>,
}

impl<'a, E> Recording<'a, E> {
    fn new(ep: &'a mut E) -> Self {
        Recording {
            ep,
            reads: Vec::new(),
            lose_step: None,
            steps_posted: 0,
            armed: None,
        }
    }
}

impl<E: Endpoint> Endpoint for Recording<'_, E> {
    fn rank(&self) -> Rank {
        self.ep.rank()
    }
    fn size(&self) -> u32 {
        self.ep.size()
    }
    fn backend(&self) -> &'static str {
        self.ep.backend()
    }
    fn timeout(&self) -> Duration {
        self.ep.timeout()
    }
    fn set_timeout(&mut self, timeout: Duration) {
        self.ep.set_timeout(timeout)
    }
    fn forget(&mut self, peer: Rank) {
        self.ep.forget(peer)
    }
    fn isend(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<ReqId> {
        self.ep.isend(dest, tag, buf)
    }
    fn irecv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<ReqId> {
        let req = self.ep.irecv(src, tag, buf)?;
        if src == Src::Any && tag == TagSel::Tag(TAG_STEP) {
            if self.lose_step == Some(self.steps_posted) {
                self.armed = Some(req);
            }
            self.steps_posted += 1;
        }
        Ok(req)
    }
    fn test(&mut self, req: ReqId) -> Result<Option<Completion>> {
        self.ep.test(req)
    }
    fn wait(&mut self, req: ReqId) -> Result<Completion> {
        let c = self.ep.wait(req)?;
        if self.armed == Some(req) {
            self.armed = None;
            return Err(commbench::core::Error::PeerLost {
                peer: c.peer,
                detail: "its process went while its message came in (a test's fault)".into(),
            });
        }
        Ok(c)
    }
    fn wait_all(&mut self, reqs: &[ReqId], out: &mut Vec<Completion>) -> Result<()> {
        self.ep.wait_all(reqs, out)
    }
    fn send(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>) -> Result<Vec<u8>> {
        self.ep.send(dest, tag, buf)
    }
    fn recv(&mut self, src: Src, tag: TagSel, buf: Vec<u8>) -> Result<Completion> {
        self.ep.recv(src, tag, buf)
    }
    fn pingpong(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        n: u64,
        role: Role,
    ) -> Result<()> {
        self.ep.pingpong(peer, tag, buf, n, role)
    }
    fn isend_span(&mut self, dest: Rank, tag: Tag, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        self.ep.isend_span(dest, tag, buf, span)
    }
    fn irecv_span(&mut self, src: Src, tag: TagSel, buf: Vec<u8>, span: Span) -> Result<ReqId> {
        self.ep.irecv_span(src, tag, buf, span)
    }
    fn pingpong_span(
        &mut self,
        peer: Rank,
        tag: Tag,
        buf: &mut Vec<u8>,
        span: Span,
        n: u64,
        role: Role,
    ) -> Result<()> {
        self.ep.pingpong_span(peer, tag, buf, span, n, role)
    }
    fn models_caches(&self) -> bool {
        self.ep.models_caches()
    }
    fn now_ns(&mut self) -> u64 {
        let t = self.ep.now_ns();
        self.reads.push(t);
        t
    }
    fn clock_name(&self) -> String {
        self.ep.clock_name()
    }
    fn claimed_resolution_ns(&self) -> Option<f64> {
        self.ep.claimed_resolution_ns()
    }
    fn compute(&mut self, work: Work) {
        self.ep.compute(work)
    }
    fn hypercube(&self) -> Option<u32> {
        self.ep.hypercube()
    }
    fn host(&self) -> Option<String> {
        self.ep.host()
    }
    fn switch_path(&self) -> Option<String> {
        self.ep.switch_path()
    }
    fn info(&self) -> BackendInfo {
        self.ep.info()
    }
    fn barrier(&mut self) -> Result<()> {
        self.ep.barrier()
    }
    fn barrier_first(&mut self, first: Rank) -> Result<()> {
        self.ep.barrier_first(first)
    }
    fn broadcast(&mut self, root: Rank, data: &mut Vec<u8>) -> Result<()> {
        self.ep.broadcast(root, data)
    }
    fn gather(&mut self, root: Rank, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        self.ep.gather(root, data)
    }
}
