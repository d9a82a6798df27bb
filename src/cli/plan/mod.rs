//! From parsed arguments to a typed, fully validated [`Plan`] (design §2): every bad value is
//! found here, before anything starts, and is a usage error (exit 2) with one line and a hint.

use super::args::{
    invalid_method, AllpairsArgs, BackendArgs, BandwidthArgs, BuffersArg, CacheArg, CacheArgs,
    DropWarmupArg, FitArgs, Given, MessageArgs, OutputArgs, PatternArgs, PingpongArgs,
    ProgressWhen, QArg, QueueArgs, RawArg, ScheduleArg, SeedArgs, SizeArgs, StopArgs,
};
use super::fatal::Fatal;
use crate::cli::backend::{self, Chosen, Job};
use commbench::analysis::allpairs::Rule;
use commbench::analysis::assemble::Recipe;
use commbench::analysis::document::RunConfig;
use commbench::analysis::fit::{self, Breakpoint};
use commbench::core::method::allpairs::{AllPairsConfig, RawMode, Schedule};
use commbench::core::method::benchmark::Benchmark;
use commbench::core::method::buffers::{BufferOptions, BufferReuse, CacheState};
use commbench::core::method::limits::MAX_TRIALS;
use commbench::core::method::pairs::Concurrent;
use commbench::core::method::queue::{self, QueueBench, QueueKind};
use commbench::core::method::sixtimes::{self, SixTimes, Suite};
use commbench::core::method::sweep::StreamSweep;
use commbench::core::method::transpose::Transpose;
use commbench::core::method::until::{self, UntilCi};
use commbench::core::method::{MethodConfig, NppChoice, PatternKind};
use commbench::core::transport::work::QKind;
use commbench::spec;
use limits::check_limits;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod launches;
mod limits;
mod pairs;

/// What a run measures.
#[derive(Debug, Clone)]
pub enum Work {
    /// Ping-pong, exchange or bandwidth.
    Pattern(PatternKind),
    /// Streaming windows and pairs swept (`bandwidth --window W,W.. --pairs K,K..`).
    Sweep(StreamSweep),
    /// Seed 003's column transpose.
    Transpose(Transpose),
    /// Seed 001's experiments.
    SixTimes(SixTimes),
    /// Seed 004's queue benchmarks.
    Queue(QueueBench),
    /// Every ordered pair of ranks.
    AllPairs(AllPairsWork),
}

impl Work {
    /// The benchmark, as the plan asks it what it needs (core `method::benchmark`).
    pub fn benchmark(&self) -> &dyn Benchmark {
        match self {
            Work::Pattern(k) => k,
            Work::Sweep(s) => s,
            Work::Transpose(t) => t,
            Work::SixTimes(x) => x,
            Work::Queue(q) => q,
            Work::AllPairs(w) => &w.config,
        }
    }
}

/// What an all-pairs run does besides the method.
#[derive(Debug, Clone)]
pub struct AllPairsWork {
    /// The schedule and its settings.
    pub config: AllPairsConfig,
    /// The robust z-score above which a cell, node or link is a suspect.
    pub z: f64,
    /// The least slowdown a suspect must show.
    pub min_factor: f64,
    /// `--fail-on-suspect`.
    pub fail_on_suspect: bool,
    /// Where every process writes its cells' raw trials (`--raw all`).
    pub raw_dir: Option<PathBuf>,
    /// The switches above each host, from `--topology FILE` (host name to switch path).
    pub switches: Option<std::collections::BTreeMap<String, String>>,
}

impl AllPairsWork {
    /// The rule suspects are flagged by.
    pub fn rule(&self) -> Rule {
        Rule {
            z: self.z,
            min_factor: self.min_factor,
        }
    }
}

/// Where the results go.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// `--output DIR`.
    pub dir: Option<PathBuf>,
    /// `--json FILE` (`-`: standard output).
    pub json: Option<PathBuf>,
    /// `--stream FILE` (`-`: standard output).
    pub stream: Option<PathBuf>,
    /// `--full`.
    pub full: bool,
    /// `--quiet`.
    pub quiet: bool,
    /// `--progress`.
    pub progress: ProgressWhen,
    /// `--launches L`: this process runs the set, each launch a process of its own.
    pub launches: Option<u32>,
}

impl Outputs {
    /// Whether the JSON document goes to standard output (and the report does not).
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_ref().is_some_and(|p| p.as_os_str() == "-")
    }

    /// Whether the stream goes to standard output (and everything for people to standard
    /// error).
    pub fn stream_to_stdout(&self) -> bool {
        self.stream.as_ref().is_some_and(|p| p.as_os_str() == "-")
    }
}

/// The validated plan of a measuring run.
#[derive(Debug)]
pub struct Plan {
    /// What is measured.
    pub work: Work,
    /// Every backend to measure with its options, in order (more than one only under an MPI
    /// launcher).
    pub backends: Vec<Chosen>,
    /// The method's parameters.
    pub method: MethodConfig,
    /// How the ranks are found.
    pub job: Job,
    /// The Hockney fit's breakpoint.
    pub breakpoint: Breakpoint,
    /// `--instructions-per-second`.
    pub instructions_per_second: Option<f64>,
    /// The run configuration the result document records (without the ranks, known once
    /// the run has started).
    pub config: RunConfig,
    /// Where the results go.
    pub outputs: Outputs,
}

impl Plan {
    /// Whether the run needs an MPI launcher: the mpi backend, or several backends side by side.
    pub fn under_mpi(&self) -> bool {
        backend::under_mpi(&self.backends)
    }

    /// What rank 0 needs besides the runs to make this plan's result document.
    pub fn recipe(&self) -> Recipe {
        Recipe {
            cut_coef: self.method.cut_coef,
            breakpoint: self.breakpoint,
            instructions_per_second: self.instructions_per_second,
            config: self.config.clone(),
            transport_forwards: self
                .backends
                .first()
                .is_some_and(|b| b.hypercube().is_some()),
            // As given, but never a reason to lose a run: a word that is not UTF-8 is
            // recorded with its bad bytes escaped.
            command: std::env::args_os().map(|a| escaped(&a)).collect(),
        }
    }
}

/// `word` as text: its UTF-8 as is, every byte that is not UTF-8 as `\xNN` (a path need
/// not be UTF-8; the document records the command line as text).
pub fn escaped(word: &std::ffi::OsStr) -> String {
    use std::fmt::Write as _;
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::new();
    for chunk in word.as_bytes().utf8_chunks() {
        s.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// The default sizes of a pattern: 8 bytes, or the whole sweep for streaming.
fn sizes_spec(a: &SizeArgs, streaming: bool) -> String {
    match (&a.sizes, a.sweep || streaming) {
        (Some(s), _) => s.clone(),
        (None, true) => "1..4M:x2".to_string(),
        (None, false) => "8".to_string(),
    }
}

/// `--npp`: calculated (seed 000 §3.3), one value, or the npp study. The options of the
/// calculation are refused beside `--npp`, which would ignore them.
fn npp_choice(a: &PingpongArgs, given: &Given) -> Result<NppChoice, Fatal> {
    if a.npp.is_some() {
        let calc = ["--res-npp", "--npp-init", "--npp-trials"];
        if let Some(flag) = calc.into_iter().find(|f| given.has(f)) {
            return Err(Fatal::usage(
                format!("{flag} is not used with --npp: npp is fixed, not calculated"),
                format!("drop {flag}, or drop --npp to calculate npp from the timer resolution"),
            ));
        }
    }
    let Some(list) = a.npp.as_deref() else {
        return Ok(NppChoice::Auto {
            res_npp: a.res_npp,
            npp_init: a.npp_init,
            npptrial: a.npp_trials,
        });
    };
    let v = spec::parse_counts(list).map_err(|e| {
        Fatal::usage(
            format!("--npp: {e}"),
            "npp must be at least 1; leave --npp out to calculate it from the timer resolution",
        )
    })?;
    Ok(if v.len() == 1 {
        NppChoice::Fixed(v[0])
    } else {
        NppChoice::Study(v)
    })
}

/// `--until-ci` and its bounds as a rule, and the trials of a size: `count` (what `flag`,
/// `--trials` or `--repetitions`, says) without the rule, the most with it. The bounds are
/// refused without `--until-ci`, and `flag` beside it, since the interval then decides the
/// count.
fn until_rule(
    stop: &StopArgs,
    (flag, count): (&str, u64),
    given: &Given,
) -> Result<(Option<UntilCi>, u64), Fatal> {
    let Some(text) = stop.until_ci.as_deref() else {
        let bounds = ["--min-trials", "--max-trials", "--max-time"];
        if let Some(b) = bounds.into_iter().find(|f| given.has(f)) {
            return Err(Fatal::usage(
                format!("{b} bounds --until-ci, which was not given"),
                format!("add --until-ci 1% to measure each size until its interval is within 1%, or drop {b}"),
            ));
        }
        return Ok((None, count));
    };
    if given.has(flag) {
        return Err(Fatal::usage(
            format!("{flag} fixes the count, but with --until-ci the interval decides it"),
            format!("give the most with --max-trials N, or drop --until-ci to run {flag} each"),
        ));
    }
    let usage = |why: String| {
        Fatal::usage(
            format!("--until-ci {text}: {why}"),
            "for example --until-ci 1% (a half-width within 1% of the median, 95% coverage) \
             or --until-ci 1%,99%",
        )
    };
    let mut parts = text.split(',');
    let rel = spec::parse_fraction(parts.next().unwrap_or("")).map_err(usage)?;
    let level = match parts.next() {
        Some(l) => spec::parse_fraction(l).map_err(usage)?,
        None => until::DEFAULT_LEVEL,
    };
    if parts.next().is_some() {
        return Err(usage("at most two values, REL and LEVEL".into()));
    }
    let max = stop.max_trials.unwrap_or(count);
    if max == 0 || max > MAX_TRIALS {
        return Err(Fatal::usage(
            format!("--max-trials {max}: 1 to {MAX_TRIALS} trials per size"),
            "every trial time is kept; docs/methodology.md (Limits) gives the reason",
        ));
    }
    let (size_ns, run_ns) = match stop.max_time.as_deref() {
        None => (None, None),
        Some(t) => max_time(t)?,
    };
    let rule = UntilCi {
        rel,
        level,
        min_trials: stop
            .min_trials
            .unwrap_or(until::DEFAULT_MIN_TRIALS.min(max)),
        block: until::DEFAULT_BLOCK,
        size_ns,
        run_ns,
    };
    rule.validate(max).map_err(|e| {
        Fatal::usage(
            format!(
                "--until-ci/--min-trials/--max-trials/--max-time: {}",
                e.reason()
            ),
            "docs/methodology.md (Measuring until the answer is known) gives each bound",
        )
    })?;
    Ok((Some(rule), max))
}

/// `--max-time SIZE[,RUN]`: either part may be left out (`10s`, `,5m`), not both.
fn max_time(text: &str) -> Result<(Option<u64>, Option<u64>), Fatal> {
    let usage = |why: String| {
        Fatal::usage(
            format!("--max-time {text}: {why}"),
            "for example --max-time 10s (each size), --max-time 10s,5m (and the run) or \
             --max-time ,5m (the run only)",
        )
    };
    let part = |p: &str| -> Result<Option<u64>, Fatal> {
        if p.trim().is_empty() {
            return Ok(None);
        }
        spec::parse_duration_ns(p).map(Some).map_err(usage)
    };
    let (size, run) = match text.split_once(',') {
        Some((a, b)) => (part(a)?, part(b)?),
        None => (part(text)?, None),
    };
    if size.is_none() && run.is_none() {
        return Err(usage("no time given".into()));
    }
    Ok((size, run))
}

/// The method's parameters of a pattern run (sizes, trials, npp, ...).
fn method(a: &PingpongArgs, sizes: Vec<u64>, given: &Given) -> Result<MethodConfig, Fatal> {
    let (until, trials) = until_rule(&a.stop, ("--trials", a.trials), given)?;
    Ok(MethodConfig {
        sizes,
        trials,
        until,
        warmup: a.warmup,
        npp: npp_choice(a, given)?,
        cut_coef: a.cut_coef,
        timer_samples: a.clock.samples,
        source: a.source,
        dest: a.dest,
        // Checked against the work in [`build`], which sets them.
        buffers: BufferOptions::default(),
        // A bandwidth run of several pairs sets them ([`pattern`]).
        pairs: None,
    })
}

/// The fit's options: a line needs two sizes or more, `--breakpoint SIZE` two measured sizes
/// on each side; `--instructions-per-second` must be positive.
fn check_fit(a: &FitArgs, sizes: &[u64], given: &Given) -> Result<(), Fatal> {
    let mut distinct = sizes.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 2 {
        let flag = ["--breakpoint", "--instructions-per-second"]
            .into_iter()
            .find(|f| given.has(f));
        if let Some(flag) = flag {
            return Err(Fatal::usage(
                format!("{flag} is not used with one message size: there is no line to fit"),
                format!("measure a sweep (--sweep or --sizes 1..4M:x2) or drop {flag}"),
            ));
        }
    }
    if let Breakpoint::At(at) = a.breakpoint {
        fit::validate_breakpoint(sizes, at).map_err(|e| {
            Fatal::usage(
                format!("--breakpoint {at}: {}", e.reason()),
                "a breakpoint needs at least two measured sizes on each side",
            )
        })?;
    }
    match a.instructions_per_second {
        Some(ips) if !(ips.is_finite() && ips > 0.0) => Err(Fatal::usage(
            format!("--instructions-per-second {ips}: must be positive"),
            "for example --instructions-per-second 2.4e9",
        )),
        _ => Ok(()),
    }
}

/// `commbench timer --backend B`: what B maps in its process against the address-space
/// limit, as a measuring run's plan checks it (the simulator maps a stack per rank).
pub fn check_timer_backend(b: &Chosen) -> Result<(), Fatal> {
    let t = b.transport(1);
    limits::check_transport_space(&t, &limits::HostMemory::of_this_process()).map_err(|e| {
        Fatal::usage(
            format!("timer --backend {}: {e}", b.name()),
            "raise the limit with `ulimit -v`, or a smaller machine",
        )
    })
}

/// A number of seconds as given, short: `1e-9`, not `0.000000001`.
fn seconds(t: f64) -> String {
    if t != 0.0 && t.is_finite() && !(1e-3..1e7).contains(&t.abs()) {
        format!("{t:e}")
    } else {
        format!("{t}")
    }
}

/// The shortest `--timeout` and `--round-timeout`, in seconds: a wait shorter than a
/// millisecond is over before a process is scheduled, and would fail every run.
const MIN_TIMEOUT_S: f64 = 1e-3;

/// Most passes of `allpairs --rounds`.
const MAX_PASSES: u32 = 1_000_000;

/// Most pairs in one round of `allpairs --concurrency` (a round of n ranks has n / 2).
const MAX_CONCURRENCY: u32 = 1 << 20;

/// `--timeout` as a duration.
fn timeout(b: &BackendArgs) -> Result<Duration, Fatal> {
    if !(b.timeout.is_finite() && b.timeout >= MIN_TIMEOUT_S && b.timeout < 1e7) {
        return Err(Fatal::usage(
            format!(
                "--timeout {} s: {MIN_TIMEOUT_S} s (1 ms) to 1e7 s",
                seconds(b.timeout)
            ),
            "for example --timeout 30",
        ));
    }
    Ok(Duration::from_secs_f64(b.timeout))
}

/// Ranks of the run: `--ranks`, or enough for `--source` and `--dest` (for the pairs
/// streaming at once).
fn ranks(a: &PingpongArgs, method: &MethodConfig) -> Result<u32, Fatal> {
    let b = &a.backend;
    let needed = match &method.pairs {
        Some(c) => c.ranks_needed(),
        None => a.source.max(a.dest).saturating_add(1),
    };
    let ranks = b.ranks.unwrap_or(needed.max(2));
    if ranks < 2 {
        return Err(Fatal::usage(
            format!("--ranks {ranks}: a ping-pong needs at least 2 ranks"),
            "use --ranks 2 or more",
        ));
    }
    Ok(ranks)
}

/// The plan of a bandwidth run: one pair (`--source`, `--dest`), or `--pairs K` streaming at
/// once as `--placement` pairs them; a list of windows or of pairs sweeps them.
pub fn bandwidth(b: BandwidthArgs, given: &Given) -> Result<Plan, Fatal> {
    let windows = pairs::windows(&b.window)?;
    let ks = b.pairs.as_deref().map(pairs::counts).transpose()?;
    let most = ks.as_ref().and_then(|v| v.iter().max().copied());
    let placed = pairs::concurrent(most, b.placement.as_deref(), given)?;
    let ks = ks.unwrap_or_else(|| vec![placed.as_ref().map_or(1, |c| c.pairs.len() as u32)]);
    let kind = |window| {
        if b.bidirectional {
            PatternKind::BiBandwidth { window }
        } else {
            PatternKind::Bandwidth { window }
        }
    };
    if windows.len() == 1 && ks.len() == 1 {
        return pattern_with(kind(windows[0]), b.common, placed, given);
    }
    let sweep = StreamSweep {
        bidirectional: b.bidirectional,
        windows,
        pairs: ks,
    };
    sweep_with(sweep, b.common, placed, given)
}

/// The plan of a pattern run (ping-pong, exchange, bandwidth).
pub fn pattern(kind: PatternKind, p: PatternArgs, given: &Given) -> Result<Plan, Fatal> {
    pattern_with(kind, p, None, given)
}

/// [`pattern`], with pairs streaming at once when `pairs` is given: pair 0 is the run's
/// `source` and `dest`.
fn pattern_with(
    kind: PatternKind,
    p: PatternArgs,
    pairs: Option<Concurrent>,
    given: &Given,
) -> Result<Plan, Fatal> {
    let streaming = matches!(
        kind,
        PatternKind::Bandwidth { .. } | PatternKind::BiBandwidth { .. }
    );
    streams_with(Work::Pattern(kind), streaming, p, pairs, given)
}

/// The plan of a sweep of windows and pairs (`bandwidth --window 1..128`, `--pairs 1..8:+1`).
fn sweep_with(
    sweep: StreamSweep,
    p: PatternArgs,
    pairs: Option<Concurrent>,
    given: &Given,
) -> Result<Plan, Fatal> {
    streams_with(Work::Sweep(sweep), true, p, pairs, given)
}

/// The plan of a pattern or a sweep of streams: its sizes, the fit's options, the pairs.
fn streams_with(
    work: Work,
    streaming: bool,
    p: PatternArgs,
    pairs: Option<Concurrent>,
    given: &Given,
) -> Result<Plan, Fatal> {
    let (a, fit) = (p.common, p.fit);
    let spec_text = sizes_spec(&p.sizes, streaming);
    let sizes = spec::parse_sizes(&spec_text).map_err(|e| {
        Fatal::usage(
            format!("--sizes: {e}"),
            "examples: --sizes 8, --sizes 1,8,64, --sizes 1..4M:x2, --sizes 1..4096:+512",
        )
    })?;
    if streaming && sizes.contains(&0) {
        return Err(Fatal::usage(
            "size 0 has no bandwidth",
            "start the sweep at 1 byte, e.g. --sizes 1..4M:x2",
        ));
    }
    check_fit(&fit, &sizes, given)?;
    let mut method = method(&a, sizes, given)?;
    if let Some(c) = pairs {
        (method.source, method.dest) = (c.pairs[0].sender, c.pairs[0].receiver);
        method.pairs = Some(c);
    }
    build(work, a, fit, method, spec_text, given, p.messages)
}

/// The plan of seed 003's transpose of an `n x n` matrix (one size: nothing to fit).
pub fn transpose(
    n: usize,
    a: PingpongArgs,
    refused: MessageArgs,
    given: &Given,
) -> Result<Plan, Fatal> {
    if n == 0 || n > 16384 {
        return Err(Fatal::usage(
            format!("--n {n}: the matrix order must be 1..=16384"),
            "for example --n 256",
        ));
    }
    let bytes = (n * n * 8) as u64;
    let method = method(&a, vec![bytes], given)?;
    let fit = FitArgs {
        breakpoint: Breakpoint::Auto,
        instructions_per_second: None,
    };
    build(
        Work::Transpose(Transpose { n }),
        a,
        fit,
        method,
        format!("{n}x{n} doubles"),
        given,
        refused,
    )
}

/// The checks and the plan every measuring command shares: backends and their options,
/// ranks, timeout, the method against the run's size.
fn build(
    work: Work,
    a: PingpongArgs,
    fit: FitArgs,
    mut method: MethodConfig,
    spec_text: String,
    given: &Given,
    messages: MessageArgs,
) -> Result<Plan, Fatal> {
    method.buffers = buffer_options(&a.cache, &messages, work.benchmark())?;
    let b = &a.backend;
    let timeout = timeout(b)?;
    let ranks = ranks(&a, &method)?;
    let outputs = outputs(&a.out, b)?;
    let transpose = match work {
        Work::Transpose(t) => Some(t),
        _ => None,
    };
    let job = Job {
        ranks,
        timeout,
        manual: b.rank.zip(b.ranks),
        rendezvous: b.rendezvous.clone(),
        transpose,
        posted_receives: work.benchmark().posted_receives(&method),
        wildcards: work.benchmark().wildcards(),
    };
    let backends = backend::choose(b, given, &job)?;
    let fixed = backends.iter().find_map(Chosen::fixed_ranks);
    if ranks > 1024 && fixed.is_none() {
        return Err(Fatal::usage(
            format!("--ranks {ranks}: at most 1024 local ranks"),
            "start large runs under mpirun or srun",
        ));
    }
    // A backend that fixes its size (the simulator's hypercube) is checked against it; under
    // MPI the size is known once MPI has started.
    let sized_by_backend = fixed.is_some();
    let (size, why) = fixed.unwrap_or((ranks, String::new()));
    method.check(size).map_err(|e| {
        let hint = if why.is_empty() {
            "see `commbench pingpong --help`".to_string()
        } else {
            why
        };
        invalid_method(e, hint)
    })?;
    check_placement(work.benchmark(), &method.sizes, &backends, size)?;
    let all_here = job.rank_env().is_ok_and(|e| e.is_local_launcher());
    check_limits(&work, &method, &backends, all_here, size)?;
    // The plan is good: only now is a note about it worth reading.
    if method.buffers.cache == CacheState::Cold {
        for b in backends.iter().filter(|b| !b.models_caches()) {
            say!(
                "commbench: note: --cache cold changes nothing on {}: it models no caches, so \
                 no pool is written (the result records none)",
                b.name()
            );
        }
    }
    if all_here && !sized_by_backend {
        let cpus = commbench::core::launch::affinity::allowed().map_or(0, |c| c.len());
        for note in backends.iter().filter_map(|b| b.crowding(ranks, cpus)) {
            say!("commbench: note: {note}");
        }
    }
    let mut config = record(&a, &method, &work, spec_text, timeout);
    config.expect_rate_mb_s = expect_rate(a.expect_rate.as_deref())?;
    for b in &backends {
        b.record(&mut config);
    }
    Ok(Plan {
        work,
        backends,
        method,
        job,
        breakpoint: fit.breakpoint,
        instructions_per_second: fit.instructions_per_second,
        config,
        outputs,
    })
}

/// The name a usage error gives a benchmark whose kernel neither checks nor places its
/// messages.
/// The message buffer options (docs/buffers.md) against the work: only the pattern kernels
/// (ping-pong, exchange, the streaming windows, and all-pairs' ping-pong) check and place
/// their messages, only a streaming window has several buffers to make one, and a pool is a
/// cold cache's. Their own bounds (an alignment, an offset within it, a pool's size) are
/// checked with the method ([`MethodConfig::check`]).
fn buffer_options(
    c: &CacheArgs,
    b: &MessageArgs,
    bench: &dyn Benchmark,
) -> Result<BufferOptions, Fatal> {
    if c.cache_pool.is_some() && c.cache != CacheArg::Cold {
        return Err(Fatal::usage(
            "--cache-pool is the pool a cold cache writes through: it is used only with --cache cold",
            "add --cache cold, or drop --cache-pool",
        ));
    }
    let name = bench.command();
    let places = bench.places_messages();
    if b.validate && !places {
        return Err(Fatal::usage(
            format!("--validate: {name} cannot check the bytes of its messages"),
            "validate a pingpong, exchange, bandwidth or allpairs run (e.g. commbench pingpong \
             --validate), or drop --validate",
        ));
    }
    if !places {
        // Options, not flags: `queue posted`'s own flags are a level below `Given`'s.
        let flag = match (b.align, b.offset) {
            (Some(_), _) => Some("--align"),
            (None, Some(_)) => Some("--offset"),
            (None, None) => None,
        };
        if let Some(flag) = flag {
            return Err(Fatal::usage(
                format!("{flag}: {name} does not place its messages at an alignment"),
                format!(
                    "only pingpong, exchange, bandwidth and allpairs place their messages; drop \
                     {flag}"
                ),
            ));
        }
    }
    if b.buffers == BuffersArg::Single && !bench.streams() {
        return Err(Fatal::usage(
            format!(
                "--buffers single: {name} has one message a direction in flight, so it already \
                 reuses one buffer; the option changes only a streaming window"
            ),
            "drop --buffers, or measure a window: commbench bandwidth --buffers single",
        ));
    }
    Ok(BufferOptions {
        validate: b.validate,
        cache: match c.cache {
            CacheArg::Warm => CacheState::Warm,
            CacheArg::Cold => CacheState::Cold,
        },
        cache_pool: c.cache_pool,
        buffers: match b.buffers {
            BuffersArg::Multiple => BufferReuse::Multiple,
            BuffersArg::Single => BufferReuse::Single,
        },
        align: b.align,
        offset: b.offset.unwrap_or(0),
    })
}

/// `--expect-rate`, in MB/s.
fn expect_rate(text: Option<&str>) -> Result<Option<f64>, Fatal> {
    text.map(|t| {
        spec::parse_rate_mb_s(t).map_err(|why| {
            Fatal::usage(
                format!("--expect-rate {why}"),
                "give the link's rate, for example --expect-rate 10Gbit/s or --expect-rate 800MB/s",
            )
        })
    })
    .transpose()
}

/// The run configuration as the result document records it: the options as given.
fn record(
    a: &PingpongArgs,
    method: &MethodConfig,
    work: &Work,
    sizes_spec: String,
    timeout: Duration,
) -> RunConfig {
    let b = &a.backend;
    let (transpose_n, sixtimes, queue) = match work {
        Work::Transpose(t) => (Some(t.n), None, None),
        Work::SixTimes(x) => (None, Some(*x), None),
        Work::Queue(q) => (None, None, Some(q.clone())),
        Work::Pattern(_) | Work::Sweep(_) | Work::AllPairs(_) => (None, None, None),
    };
    RunConfig {
        method: method.clone(),
        // The backends that ran and the ranks they had are known once the run is over.
        backend: String::new(),
        ranks: 0,
        timeout_s: timeout.as_secs_f64(),
        cpus: b.cpus.clone(),
        // Each backend records its own options (`Backend::record`).
        sizes_spec,
        pattern: work.benchmark().recorded_pattern(),
        transpose_n,
        sixtimes,
        queue,
        drop_warmup: a.drift.drop_warmup.into(),
        launch: launches::of_this_process(),
        ..RunConfig::default()
    }
}

/// Where the results go. `--output -` is refused (standard output cannot hold a directory),
/// and so is `--quiet` with nowhere to write the results, on the rank that reports them.
fn outputs(o: &OutputArgs, b: &BackendArgs) -> Result<Outputs, Fatal> {
    if o.output.as_ref().is_some_and(|d| d.as_os_str() == "-") {
        return Err(Fatal::usage(
            "--output -: --output names a directory for three files; standard output cannot hold them",
            "use --json - for the result document on standard output, or --output DIR",
        ));
    }
    // Rank 0 reports; a rank started by hand as another one prints nothing either way.
    let reporting = b.rank.unwrap_or(0) == 0;
    if o.quiet && o.output.is_none() && o.json.is_none() && o.stream.is_none() && reporting {
        return Err(Fatal::usage(
            "--quiet without --output, --json or --stream would measure and keep nothing",
            "add --json FILE or --output DIR, or drop --quiet to see the report",
        ));
    }
    if let Some(s) = &o.stream {
        stream_alone(s, o)?;
    }
    let json_stdout = o.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if o.full && (o.quiet || json_stdout) {
        let why = if o.quiet { "--quiet" } else { "--json -" };
        return Err(Fatal::usage(
            format!("--full with {why}: the report it would lengthen is not printed"),
            "drop one of them; the files of --output DIR always hold the full output",
        ));
    }
    let (launches, launch_of) = launches::of(o, b)?;
    Ok(Outputs {
        dir: match (&o.output, launch_of) {
            (Some(d), Some(l)) => Some(d.join(launches::launch_dir(l.index))),
            (d, _) => d.clone(),
        },
        json: o.json.clone(),
        stream: o.stream.clone(),
        full: o.full,
        quiet: o.quiet,
        progress: o.progress,
        launches,
    })
}

/// `--stream s` names a path of its own: not empty, and neither where the document goes nor
/// one of the files of `--output` (the later write would replace the stream).
fn stream_alone(s: &Path, o: &OutputArgs) -> Result<(), Fatal> {
    if s.as_os_str().is_empty() {
        return Err(Fatal::usage(
            "--stream needs a file name, or - for standard output",
            "for example --stream run.jsonl",
        ));
    }
    if s.as_os_str() == "-" {
        if o.json.as_ref().is_some_and(|j| j.as_os_str() == "-") {
            return Err(Fatal::usage(
                "--stream - with --json -: both would go to standard output",
                "send one of them to a file, for example --json result.json --stream -",
            ));
        }
        return Ok(());
    }
    let mut taken: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(j) = &o.json {
        taken.push((j.clone(), "--json"));
    }
    if let Some(d) = &o.output {
        for f in OUTPUT_FILES {
            taken.push((d.join(f), "--output"));
        }
    }
    let s_at = resolved(s);
    if let Some((_, flag)) = taken.iter().find(|(p, _)| resolved(p) == s_at) {
        return Err(Fatal::usage(
            format!("--stream {} is a file {flag} writes too", s.display()),
            "give the stream a file of its own, for example --stream run.jsonl",
        ));
    }
    Ok(())
}

/// The files `--output DIR` holds: the document, the full output and the summary
/// (`cli::files::write_dir`).
pub const OUTPUT_FILES: [&str; 3] = [
    "result.json",
    "commbench.output.txt",
    "commbench.summary.txt",
];

/// Where `p` is, for telling two paths to one file apart: its directory resolved when it
/// exists (nothing is created or opened).
fn resolved(p: &Path) -> PathBuf {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(dir), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => p.to_path_buf(),
    }
}

/// The default sizes of seed 001's experiments: Table 1's.
const SEED001_SIZES: &str = "16,500,1000,1500,2000";

/// `--hops LO..HI` or `--hops D`.
fn hops(text: &str) -> Result<(u32, u32), Fatal> {
    let bad = || {
        Fatal::usage(
            format!(
                "--hops {text}: a distance or a range LO..HI within 1..{}",
                sixtimes::MAX_HOPS
            ),
            "for example --hops 1..5 (E needs two distances or more)",
        )
    };
    let num = |t: &str| t.trim().parse::<u32>().map_err(|_| bad());
    let (lo, hi) = match text.split_once("..") {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let d = num(text)?;
            (d, d)
        }
    };
    if lo == 0 || lo > hi || hi > sixtimes::MAX_HOPS {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// Seed 001's counts within their bounds: the interference streams, the repetitions of each
/// experiment and the messages of each repetition.
fn check_seed001_counts(suite: Suite, a: &SeedArgs) -> Result<(), Fatal> {
    if let Suite::Interference { streams } = suite {
        if streams == 0 || streams > sixtimes::MAX_STREAMS {
            return Err(Fatal::usage(
                format!("--streams {streams}: 1 to {}", sixtimes::MAX_STREAMS),
                "the paper measured 1, 2 and 3 streams: --streams 3",
            ));
        }
    }
    for (flag, v, max, unit) in [
        (
            "--repetitions",
            a.repetitions,
            1_000_000,
            "repetitions of each experiment",
        ),
        (
            "--messages",
            a.messages,
            1_000_000_000,
            "messages per repetition",
        ),
    ] {
        if v == 0 || v > max {
            return Err(Fatal::usage(
                format!("{flag} {v}: 1 to {max} {unit}"),
                "the paper used 5 repetitions of 100 messages",
            ));
        }
    }
    Ok(())
}

/// The plan of `echo`, `overhead` (with `--hops`) or `interference` (`streams`).
pub fn seed001(
    suite: Suite,
    sizes: Option<String>,
    hops_text: Option<&str>,
    a: SeedArgs,
    given: &Given,
) -> Result<Plan, Fatal> {
    let hops = match hops_text {
        Some(t) => hops(t)?,
        None => (1, 1),
    };
    check_seed001_counts(suite, &a)?;
    let spec_text = sizes.unwrap_or_else(|| match suite {
        Suite::Interference { .. } => sixtimes::INTERFERENCE_BYTES.to_string(),
        _ => SEED001_SIZES.to_string(),
    });
    let sizes = spec::parse_sizes(&spec_text).map_err(|e| {
        Fatal::usage(
            format!("--sizes: {e}"),
            "examples: --sizes 16,500,1000,1500,2000, --sizes 0..4096:+512",
        )
    })?;
    let x = SixTimes {
        suite,
        hops,
        q: match a.q {
            QArg::Int => QKind::Int,
            QArg::Float => QKind::Float,
        },
        messages: a.messages,
    };
    let needed = x.ranks_needed();
    let p = PingpongArgs {
        backend: a.backend,
        trials: a.repetitions,
        warmup: a.warmup,
        npp: None,
        res_npp: 50,
        npp_init: 4,
        npp_trials: 200,
        cut_coef: 2.0,
        expect_rate: None,
        drift: a.drift,
        clock: a.clock,
        source: 0,
        dest: needed - 1,
        cache: a.cache,
        stop: a.stop.clone(),
        out: a.out,
    };
    let (until, trials) = until_rule(&a.stop, ("--repetitions", a.repetitions), given)?;
    let method = MethodConfig {
        sizes,
        trials,
        until,
        warmup: a.warmup,
        npp: NppChoice::Fixed(a.messages),
        cut_coef: 2.0,
        timer_samples: p.clock.samples,
        source: 0,
        dest: 1,
        buffers: BufferOptions::default(),
        pairs: None,
    };
    let fit = FitArgs {
        breakpoint: Breakpoint::None,
        instructions_per_second: None,
    };
    let refused = a.refused.into();
    build(Work::SixTimes(x), p, fit, method, spec_text, given, refused)
}

/// The benchmark's ranks exist where each backend places them (seed 001's experiments): on a
/// cube the transport routes over (its dimension and the nodes that
/// run a program), or among the run's ranks.
fn check_placement(
    bench: &dyn Benchmark,
    sizes: &[u64],
    backends: &[Chosen],
    size: u32,
) -> Result<(), Fatal> {
    for b in backends {
        let cube = b.hypercube();
        let (dimensions, ranks) = (cube.map(|c| c.dimensions), cube.map_or(size, |c| c.ranks));
        bench
            .check_placement(dimensions, ranks, sizes)
            .map_err(|e| {
                // Only seed 001's experiments place ranks on paths and streams.
                let hint = match cube {
                    Some(c) => format!("fewer --hops or --streams, or {}", c.larger),
                    None => format!(
                        "give --ranks {} or more, or fewer --hops / --streams",
                        bench.ranks_needed()
                    ),
                };
                let reason = match e {
                    commbench::core::Error::Config(r) => r,
                    other => other.to_string(),
                };
                Fatal::usage(format!("{}: {reason}", b.name()), hint)
            })?;
    }
    Ok(())
}

/// `--traversed`: a list of per cents, each 0 to 100.
fn percentages(text: &str) -> Result<Vec<u32>, Fatal> {
    let bad = |why: String| {
        Fatal::usage(
            format!("--traversed {text}: {why}"),
            "a list of per cents 0..100, for example --traversed 0,25,50,75,100",
        )
    };
    let mut v = Vec::new();
    for part in text.split(',') {
        let p: u32 = part
            .trim()
            .parse()
            .map_err(|_| bad(format!("`{}` is not a whole per cent", part.trim())))?;
        if p > 100 {
            return Err(bad(format!("{p} % is more than the whole queue")));
        }
        v.push(p);
    }
    Ok(v)
}

/// The plan of `queue posted` (with `traversed`) or `queue unexpected`.
pub fn queue(
    kind: QueueKind,
    traversed: Option<&str>,
    q: QueueArgs,
    given: &Given,
) -> Result<Plan, Fatal> {
    let lengths = spec::parse_sizes(&q.lengths).map_err(|e| {
        Fatal::usage(
            format!("--lengths: {e}"),
            format!(
                "examples: --lengths {}, --lengths 0,10,100,1000",
                queue::DEFAULT_LENGTHS
            ),
        )
    })?;
    if let Some(&l) = lengths.iter().find(|&&l| l > queue::MAX_QUEUE_LENGTH) {
        return Err(Fatal::usage(
            format!(
                "--lengths: a queue of {l} entries; at most {}",
                queue::MAX_QUEUE_LENGTH
            ),
            "every entry has its own tag below 32767, the least tag bound MPI guarantees",
        ));
    }
    let traversed_pct = match traversed {
        Some(t) => percentages(t)?,
        None => Vec::new(),
    };
    let sizes = spec::parse_sizes(&q.sizes).map_err(|e| {
        Fatal::usage(
            format!("--sizes: {e}"),
            "examples: --sizes 8, --sizes 0,8,1K",
        )
    })?;
    let bench = QueueBench {
        kind,
        lengths,
        traversed_pct,
        any_source: q.any_source,
    };
    let a = q.common;
    let method = method(&a, sizes, given)?;
    if let NppChoice::Study(_) = method.npp {
        return Err(Fatal::usage(
            "--npp: a queue benchmark takes one npp, not a list",
            "give one value (--npp 1 is the paper's one round trip per queue set up), or leave \
             --npp out to calculate it",
        ));
    }
    let fit = FitArgs {
        breakpoint: Breakpoint::None,
        instructions_per_second: None,
    };
    let refused = q.refused.into();
    build(Work::Queue(bench), a, fit, method, q.sizes, given, refused)
}

/// The plan of `allpairs`: every ordered pair of at least two ranks (4 local ranks unless
/// `--ranks` says otherwise), with defaults sized for n (n - 1) cells.
pub fn allpairs(mut a: AllpairsArgs, given: &Given) -> Result<Plan, Fatal> {
    check_allpairs(&a, given)?;
    let sizes = spec::parse_sizes(&a.sizes).map_err(|e| {
        Fatal::usage(
            format!("--sizes: {e}"),
            "examples: --sizes 8, --sizes 8,1M, --sizes 1..4M:x4",
        )
    })?;
    let c = &mut a.common;
    c.backend.ranks = c.backend.ranks.or(Some(4));
    // allpairs reads --max-time as the run's time budget, not as a bound of --until-ci.
    let budget = allpairs_budget(c.stop.max_time.take())?;
    let method = method(c, sizes, &given.without("--max-time"))?;
    // Under a time budget the rounds are random bisections unless a schedule was chosen:
    // the tournament's first rounds pair near ranks only.
    let schedule = if budget.is_some() && !given.has("--schedule") {
        ScheduleArg::Random
    } else {
        a.schedule
    };
    let config = AllPairsConfig {
        schedule: match schedule {
            ScheduleArg::Tournament => Schedule::Tournament,
            ScheduleArg::Shift => Schedule::Shift,
            ScheduleArg::Random => Schedule::Random,
            ScheduleArg::Serial => Schedule::Serial,
        },
        passes: a.rounds,
        concurrency: a.concurrency,
        seed: a.seed,
        retest_trials: a
            .retest_trials
            .unwrap_or(method.trials.saturating_mul(4).min(MAX_TRIALS)),
        round_timeout_s: a.round_timeout.unwrap_or(0.0),
        // Cells measured until their interval is narrow enough stop once it lies wholly on
        // one side of the verdicts' factor over the earlier cells' median.
        separate_factor: method.until.as_ref().map(|_| a.min_factor),
        max_time_s: budget,
        raw: match a.raw {
            RawArg::All => RawMode::All,
            RawArg::Suspects => RawMode::Suspects,
            RawArg::None => RawMode::None,
        },
    };
    let raw_dir = raw_dir(&a)?;
    let switches = match &a.topology {
        Some(f) => Some(topology_file(f)?),
        None => None,
    };
    let work = Work::AllPairs(AllPairsWork {
        config,
        z: a.z,
        min_factor: a.min_factor,
        fail_on_suspect: a.fail_on_suspect,
        raw_dir,
        switches,
    });
    let fit = FitArgs {
        breakpoint: Breakpoint::Auto,
        instructions_per_second: None,
    };
    let plan = build(work, a.common, fit, method, a.sizes, given, a.messages)?;
    if plan.backends.len() > 1 {
        return Err(Fatal::usage(
            "allpairs measures one backend at a time",
            "give one --backend, and run allpairs again for another",
        ));
    }
    if a.topology.is_some() && plan.backends.iter().any(|b| b.hypercube().is_some()) {
        return Err(Fatal::usage(
            "--topology: this backend's machine is a hypercube whose routes are known",
            "drop --topology; it gives the switches of real hosts",
        ));
    }
    Ok(plan)
}

/// `allpairs --max-time T`: the run's time budget, seconds (one time: `10m`, or `,10m`).
fn allpairs_budget(text: Option<String>) -> Result<Option<f64>, Fatal> {
    let Some(text) = text else {
        return Ok(None);
    };
    match max_time(&text)? {
        (Some(t), None) | (None, Some(t)) if t > 0 => Ok(Some(t as f64 / 1e9)),
        _ => Err(Fatal::usage(
            format!("--max-time {text}: allpairs takes one time, the run's budget"),
            "for example --max-time 10m; each cell's trials are bounded by --max-trials",
        )),
    }
}

/// The directory of `--raw all`'s files: `--raw-dir`, else beside the `--json` document
/// (`FILE.raw`), else `raw` in `--output`; `None` for the other modes.
/// `--topology FILE` read: host name to switch path.
fn topology_file(f: &Path) -> Result<std::collections::BTreeMap<String, String>, Fatal> {
    let text = std::fs::read_to_string(f).map_err(|e| {
        Fatal::usage(
            format!("--topology {}: {e}", f.display()),
            "give a readable file: Slurm's topology.conf or lines of `HOST SWITCH.PATH`",
        )
    })?;
    commbench::analysis::allpairs::parse_topology(&text).map_err(|e| {
        Fatal::usage(
            format!("--topology {}: {e}", f.display()),
            "docs/allpairs.md (Switches) shows both forms",
        )
    })
}

fn raw_dir(a: &AllpairsArgs) -> Result<Option<PathBuf>, Fatal> {
    if a.raw != RawArg::All {
        if a.raw_dir.is_some() {
            return Err(Fatal::usage(
                "--raw-dir: only --raw all writes raw files",
                "add --raw all, or drop --raw-dir",
            ));
        }
        return Ok(None);
    }
    let out = &a.common.out;
    let beside = |j: &PathBuf| {
        let mut s = j.clone().into_os_string();
        s.push(".raw");
        PathBuf::from(s)
    };
    let dir = a
        .raw_dir
        .clone()
        .or_else(|| {
            out.json
                .as_ref()
                .filter(|j| j.as_os_str() != "-")
                .map(beside)
        })
        .or_else(|| out.output.as_ref().map(|d| d.join("raw")));
    match dir {
        Some(d) => Ok(Some(d)),
        None => Err(Fatal::usage(
            "--raw all: every process writes its cells' trials to a file, and no place was given",
            "add --raw-dir DIR, --json FILE (the files go to FILE.raw) or --output DIR",
        )),
    }
}

/// All-pairs' own options, checked: no `--source`/`--dest` or `--drop-warmup auto`, a
/// positive z, a factor of at above 1, a positive round timeout, a pass at least, one npp at
/// most.
fn check_allpairs(a: &AllpairsArgs, given: &Given) -> Result<(), Fatal> {
    if a.common.out.launches.is_some() {
        return Err(Fatal::usage(
            "--launches: allpairs compares matrices one a side, not sets of launches",
            "run allpairs again for another launch and compare the two documents",
        ));
    }
    if let Some(flag) = ["--source", "--dest"].into_iter().find(|f| given.has(f)) {
        return Err(Fatal::usage(
            format!("{flag} is not used by allpairs: every rank is a source and a dest"),
            format!("drop {flag}"),
        ));
    }
    if a.common.expect_rate.is_some() {
        return Err(Fatal::usage(
            "--expect-rate: allpairs has no report card to hold its cells against a rate",
            "drop --expect-rate; pingpong --source I --dest J --expect-rate RATE measures one pair \
             against it",
        ));
    }
    if a.common.drift.drop_warmup != DropWarmupArg::None {
        return Err(Fatal::usage(
            "--drop-warmup auto: allpairs does not test its cells for a change over their \
             trials (a cell keeps its trial times, not when each started)",
            "drop --drop-warmup; pingpong --source I --dest J measures one pair with it",
        ));
    }
    if !(a.z.is_finite() && a.z > 0.0) {
        return Err(Fatal::usage(
            format!("--z {}: must be a positive number", a.z),
            "the default, 3.5, is the usual cut for a robust z-score",
        ));
    }
    if !(a.min_factor.is_finite() && a.min_factor > 1.0) {
        return Err(Fatal::usage(
            format!("--min-factor {}: must be a number above 1", a.min_factor),
            "for example --min-factor 1.25 (25% slower than a healthy pair of its class)",
        ));
    }
    if let Some(t) = a
        .round_timeout
        .filter(|t| !(t.is_finite() && *t >= MIN_TIMEOUT_S && *t < 1e9))
    {
        return Err(Fatal::usage(
            format!(
                "--round-timeout {} s: {MIN_TIMEOUT_S} s (1 ms) to 1e9 s",
                seconds(t)
            ),
            "for example --round-timeout 3600",
        ));
    }
    if a.rounds == 0 || a.rounds > MAX_PASSES {
        return Err(Fatal::usage(
            format!(
                "--rounds {}: 1 to {MAX_PASSES} passes over the schedule",
                a.rounds
            ),
            "drop --rounds (one pass), or give a few: each pass measures every cell again",
        ));
    }
    if a.concurrency > MAX_CONCURRENCY {
        return Err(Fatal::usage(
            format!(
                "--concurrency {}: at most {MAX_CONCURRENCY} pairs in one round",
                a.concurrency
            ),
            "drop --concurrency (as many pairs as the schedule has), or give fewer",
        ));
    }
    if let Some(t) = a.retest_trials.filter(|&t| t > MAX_TRIALS) {
        return Err(Fatal::usage(
            format!("--retest-trials {t}: at most {MAX_TRIALS} trials per retested cell"),
            "drop --retest-trials (4 x --trials), or 0 for no retests",
        ));
    }
    if a.common.npp.as_deref().is_some_and(|n| n.contains(',')) {
        return Err(Fatal::usage(
            "--npp with a list: all-pairs measures each cell with one npp",
            "give one value (--npp 16), or leave --npp out to calculate it",
        ));
    }
    Ok(())
}
