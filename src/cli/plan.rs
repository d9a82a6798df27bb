//! From parsed arguments to a typed, fully validated [`Plan`] (design §2): every bad value is
//! found here, before anything starts, and is a usage error (exit 2) with one line and a hint.

use super::args::{
    choice_name, invalid_method, AllpairsArgs, BackendArgs, BuffersArg, CacheArg, CacheArgs,
    FitArgs, Given, MessageArgs, OutputArgs, PatternArgs, PingpongArgs, ProgressWhen, QArg,
    QueueArgs, ScheduleArg, SeedArgs, SizeArgs,
};
use super::fatal::Fatal;
use crate::cli::backend::{self, Chosen, Job};
use commbench::analysis::document::RunConfig;
use commbench::analysis::fit::{self, Breakpoint};
use commbench::core::method::allpairs::{AllPairsConfig, Schedule};
use commbench::core::method::buffers::{BufferOptions, BufferReuse, CacheState, Evictor};
use commbench::core::method::queue::{self, QueueBench, QueueKind};
use commbench::core::method::sixtimes::{self, Placement, SixTimes, Suite};
use commbench::core::method::transpose::Transpose;
use commbench::core::method::{limits, Invalid, MethodConfig, NppChoice, PatternKind, Setting};
use commbench::core::transport::work::QKind;
use commbench::spec;
use std::path::PathBuf;
use std::time::Duration;

/// What a run measures.
#[derive(Debug, Clone)]
pub enum Work {
    /// Ping-pong, exchange or bandwidth.
    Pattern(PatternKind),
    /// Seed 003's column transpose.
    Transpose(Transpose),
    /// Seed 001's experiments.
    SixTimes(SixTimes),
    /// Seed 004's queue benchmarks.
    Queue(QueueBench),
    /// Every ordered pair of ranks.
    AllPairs(AllPairsWork),
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
}

/// Where the results go.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// `--output DIR`.
    pub dir: Option<PathBuf>,
    /// `--json FILE` (`-`: standard output).
    pub json: Option<PathBuf>,
    /// `--full`.
    pub full: bool,
    /// `--quiet`.
    pub quiet: bool,
    /// `--progress`.
    pub progress: ProgressWhen,
}

impl Outputs {
    /// Whether the JSON document goes to standard output (and the report does not).
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_ref().is_some_and(|p| p.as_os_str() == "-")
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
        self.backends.len() > 1 || self.backends.iter().any(Chosen::is_mpi)
    }
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

/// The method's parameters of a pattern run (sizes, trials, npp, ...).
fn method(
    a: &PingpongArgs,
    sizes: Vec<u64>,
    streaming: bool,
    given: &Given,
) -> Result<MethodConfig, Fatal> {
    Ok(MethodConfig {
        sizes,
        trials: a.trials.unwrap_or(if streaming { 100 } else { 10_000 }),
        warmup: a.warmup.unwrap_or(if streaming { 10 } else { 100 }),
        npp: npp_choice(a, given)?,
        cut_coef: a.cut_coef,
        timer_samples: a.clock.samples,
        source: a.source,
        dest: a.dest,
        // Checked against the work in [`build`], which sets them.
        buffers: BufferOptions::default(),
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

/// `--timeout` as a duration.
fn timeout(b: &BackendArgs) -> Result<Duration, Fatal> {
    if !(b.timeout.is_finite() && b.timeout > 0.0 && b.timeout < 1e7) {
        return Err(Fatal::usage(
            format!(
                "--timeout {}: must be a positive number of seconds",
                b.timeout
            ),
            "for example --timeout 30",
        ));
    }
    Ok(Duration::from_secs_f64(b.timeout))
}

/// Ranks of the run: `--ranks`, or enough for `--source` and `--dest`.
fn ranks(a: &PingpongArgs) -> Result<u32, Fatal> {
    let b = &a.backend;
    let needed = a.source.max(a.dest) + 1;
    let ranks = b.ranks.unwrap_or(needed.max(2));
    if ranks < 2 {
        return Err(Fatal::usage(
            format!("--ranks {ranks}: a ping-pong needs at least 2 ranks"),
            "use --ranks 2 or more",
        ));
    }
    Ok(ranks)
}

/// The plan of a pattern run (ping-pong, exchange, bandwidth).
pub fn pattern(kind: PatternKind, p: PatternArgs, given: &Given) -> Result<Plan, Fatal> {
    let streaming = matches!(
        kind,
        PatternKind::Bandwidth { .. } | PatternKind::BiBandwidth { .. }
    );
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
    let method = method(&a, sizes, streaming, given)?;
    build(
        Work::Pattern(kind),
        a,
        fit,
        method,
        spec_text,
        given,
        p.messages,
    )
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
    let method = method(&a, vec![bytes], false, given)?;
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
    method.buffers = buffer_options(&a.cache, &messages, &work)?;
    let b = &a.backend;
    let timeout = timeout(b)?;
    let ranks = ranks(&a)?;
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
        posted_receives: posted_receives(&work, &method),
        wildcards: wildcards(&work),
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
    if let Work::SixTimes(x) = work {
        check_placement(x, &method.sizes, &backends, size)?;
    }
    let all_here = job.rank_env().is_ok_and(|e| e.is_local_launcher());
    check_limits(&work, &method, &backends, all_here, size)?;
    // The plan is good: only now is a note about it worth reading.
    if method.buffers.cache == CacheState::Cold {
        for b in backends.iter().filter(|b| !models_caches(b)) {
            eprintln!(
                "commbench: note: --cache cold changes nothing on {}: the simulator models no \
                 caches, so no pool is written (the result records none)",
                b.name()
            );
        }
    }
    if all_here && !sized_by_backend {
        let cpus = commbench::core::launch::affinity::allowed().map_or(0, |c| c.len());
        for note in backends.iter().filter_map(|b| b.crowding(ranks, cpus)) {
            eprintln!("commbench: note: {note}");
        }
    }
    let config = record(&a, &method, &work, spec_text, timeout);
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

/// Bytes one measuring rank of `work` holds for messages of `s` bytes (None: more than 64
/// bits count), for the memory check.
fn work_buffer_bytes(work: &Work, method: &MethodConfig, s: u64) -> Option<u64> {
    match work {
        Work::Pattern(k) => pattern_buffer_bytes(*k, s, &method.buffers),
        Work::AllPairs(_) => pattern_buffer_bytes(PatternKind::PingPong, s, &method.buffers),
        Work::Transpose(t) => t.buffer_bytes(),
        // A message, two per stream where rank 0 forwards the interference streams, and the
        // messages of one reading that rank 0 holds unread (a+u's, r's) or a+u's dest posts.
        // The send and receive buffers, a latency receive per round trip of a trial (or of
        // the warm-up), and the queue's entries.
        Work::Queue(q) => {
            let rounds = method.warmup.max(npp_bound(&method.npp)).saturating_add(2);
            rounds
                .checked_mul(s.checked_add(limits::PER_MESSAGE_OVERHEAD)?)?
                .checked_add(q.max_length().checked_mul(limits::PER_MESSAGE_OVERHEAD)?)
        }
        Work::SixTimes(x) => {
            let streams = match x.suite {
                Suite::Interference { streams } => u64::from(streams),
                _ => 0,
            };
            (1 + 2 * streams)
                .checked_add(x.messages)?
                .checked_mul(s.checked_add(limits::PER_MESSAGE_OVERHEAD)?)
        }
    }
}

/// What the run would need against what its backends carry, this host holds and a run may
/// last (core `method::limits`): a window over its bound, a size over a backend's largest
/// message, buffers or trial times beyond the memory available here or the address-space
/// limit, and a run whose least duration is over a week are usage errors, found before any
/// rank starts. `all_here`: commbench starts every rank on this host.
fn check_limits(
    work: &Work,
    method: &MethodConfig,
    backends: &[Chosen],
    all_here: bool,
    ranks: u32,
) -> Result<(), Fatal> {
    let help = "see `commbench pingpong --help` and docs/methodology.md (limits)";
    let fail = |e: Invalid| match work {
        Work::Transpose(t) if e.setting == Setting::Sizes => Fatal::usage(
            format!("--n {}: {}", t.n, e.reason),
            e.hint
                .unwrap_or_else(|| "a smaller matrix, e.g. --n 256".into()),
        ),
        _ => invalid_method(e, help),
    };
    let buffers = |s: u64| work_buffer_bytes(work, method, s);
    let trips = |s: u64| match work {
        Work::Pattern(k) => k.trips_per_iteration(s),
        Work::Queue(_) | Work::AllPairs(_) => 2,
        Work::Transpose(_) | Work::SixTimes(_) => 1,
    };
    if let Work::Pattern(k) = work {
        k.check().map_err(fail)?;
    }
    let place = limits::Placement { all_here };
    let host = limits::HostMemory::of_this_process();
    for b in backends {
        let t = b.transport(ranks);
        limits::check_transport_space(&t, &host).map_err(|e| {
            Fatal::usage(
                format!("--ranks {ranks}: {e}"),
                "fewer ranks, or raise the limit with `ulimit -v`",
            )
        })?;
        limits::check_posted(posted_receives(work, method), &t).map_err(|e| {
            Fatal::usage(
                e,
                "shorter queues (--lengths), or a provider with a longer receive queue (--ofi-provider 'tcp;ofi_rxm')",
            )
        })?;
        // A transpose sends columns, not its matrix.
        if !matches!(work, Work::Transpose(_)) {
            limits::check_sizes(&method.sizes, &t).map_err(fail)?;
        }
        limits::check_memory(method, &method.sizes, &buffers, &t, place, &host).map_err(fail)?;
        check_cache_pool(&method.buffers, b, all_here, &host)?;
    }
    // A queue benchmark measures every size once per queue.
    let sizes = match work {
        Work::Queue(q) => q
            .shapes()
            .iter()
            .flat_map(|_| method.sizes.clone())
            .collect(),
        // Every ordered pair measures every size (at most a million cells counted: beyond,
        // the run is refused anyway).
        Work::AllPairs(_) => {
            let cells = (u64::from(ranks) * u64::from(ranks.saturating_sub(1))).min(1 << 20);
            (0..cells).flat_map(|_| method.sizes.clone()).collect()
        }
        _ => method.sizes.clone(),
    };
    limits::RunCost::new(method, &sizes, &trips, 0.0)
        .check(method)
        .map_err(fail)
}

/// Bytes one measuring rank of a pattern holds for messages of `size` bytes with the buffers
/// `opts` asks for: a streaming window's single buffers are one per direction (one a side
/// for `bandwidth`, two for `bibandwidth`) instead of one per outstanding message, and a
/// placed message has up to `align - 1` bytes in front of it.
fn pattern_buffer_bytes(kind: PatternKind, size: u64, opts: &BufferOptions) -> Option<u64> {
    let count = match (opts.buffers, kind) {
        (BufferReuse::Single, PatternKind::Bandwidth { .. }) => 1,
        (BufferReuse::Single, PatternKind::BiBandwidth { .. }) => 2,
        _ => kind.buffers_per_rank(size),
    };
    let front = opts.placement().map_or(0, |(align, _)| align - 1);
    count.checked_mul(
        size.checked_add(front)?
            .checked_add(limits::PER_MESSAGE_OVERHEAD)?,
    )
}

/// Whether `b`'s endpoints have caches a cold-cache sweep can empty (the simulator's do not:
/// core `Endpoint::models_caches`).
fn models_caches(b: &Chosen) -> bool {
    b.name() != "sim"
}

/// A cold cache's pool against this host's memory: each measuring rank on it allocates one
/// (two where both ranks run here). Not on a backend without caches, which allocates none.
fn check_cache_pool(
    opts: &BufferOptions,
    b: &Chosen,
    all_here: bool,
    host: &limits::HostMemory,
) -> Result<(), Fatal> {
    if opts.cache != CacheState::Cold || !models_caches(b) {
        return Ok(());
    }
    let pool = opts.cache_pool.unwrap_or_else(Evictor::pool_for_host);
    let here = if all_here { 2 } else { 1 };
    match host.available {
        Some(avail) if pool.saturating_mul(here) > avail => Err(Fatal::usage(
            format!(
                "--cache cold: {here} pool(s) of {} do not fit in the {} this host has available",
                limits::human_bytes(pool),
                limits::human_bytes(avail)
            ),
            "give a smaller --cache-pool (at least twice the last-level cache, which lscpu shows)",
        )),
        _ => Ok(()),
    }
}

/// The name a usage error gives a benchmark whose kernel neither checks nor places its
/// messages.
fn command_name(work: &Work) -> &'static str {
    match work {
        Work::Pattern(k) => k.name(),
        Work::AllPairs(_) => "allpairs",
        Work::Transpose(_) => "transpose",
        Work::Queue(q) => match q.kind {
            QueueKind::Posted => "queue posted",
            QueueKind::Unexpected => "queue unexpected",
        },
        Work::SixTimes(x) => match x.suite {
            Suite::Echo => "echo",
            Suite::Overhead => "overhead",
            Suite::Interference { .. } => "interference",
        },
    }
}

/// The message buffer options (docs/buffers.md) against the work: only the pattern kernels
/// (ping-pong, exchange, the streaming windows, and all-pairs' ping-pong) check and place
/// their messages, only a streaming window has several buffers to make one, and a pool is a
/// cold cache's. Their own bounds (an alignment, an offset within it, a pool's size) are
/// checked with the method ([`MethodConfig::check`]).
fn buffer_options(c: &CacheArgs, b: &MessageArgs, work: &Work) -> Result<BufferOptions, Fatal> {
    if c.cache_pool.is_some() && c.cache != CacheArg::Cold {
        return Err(Fatal::usage(
            "--cache-pool is the pool a cold cache writes through: it is used only with --cache cold",
            "add --cache cold, or drop --cache-pool",
        ));
    }
    let name = command_name(work);
    let places = matches!(work, Work::Pattern(_) | Work::AllPairs(_));
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
    let streaming = matches!(
        work,
        Work::Pattern(PatternKind::Bandwidth { .. } | PatternKind::BiBandwidth { .. })
    );
    if b.buffers == BuffersArg::Single && !streaming {
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

/// The receives a rank keeps posted at once, at least: seed 004's posted queue and the latency
/// receives posted for a trial's round trips (a lower bound where npp is calculated); 0 for
/// the other benchmarks, which post a handful.
fn posted_receives(work: &Work, method: &MethodConfig) -> u64 {
    let Work::Queue(q) = work else {
        return 0;
    };
    let rounds = method.warmup.max(npp_bound(&method.npp)).saturating_add(2);
    let entries = match q.kind {
        QueueKind::Posted => q.max_length(),
        QueueKind::Unexpected => 0,
    };
    entries.saturating_add(rounds)
}

/// Whether the work posts receives of any source or any tag: seed 001's interference streams
/// (rank 0 forwards whatever arrives) and the queue benchmarks' `--any-source`.
fn wildcards(work: &Work) -> bool {
    match work {
        Work::SixTimes(x) => matches!(x.suite, Suite::Interference { .. }),
        Work::Queue(q) => q.any_source,
        Work::Pattern(_) | Work::Transpose(_) | Work::AllPairs(_) => false,
    }
}

/// The most round trips one trial times: the npp given, or, when it is calculated, the
/// estimation's `npp_init` and a generous guess for the npp calculated from the timer (seed
/// 000 §3.3 asks a loop of 50 resolutions).
fn npp_bound(npp: &NppChoice) -> u64 {
    match npp {
        NppChoice::Auto { npp_init, .. } => (*npp_init).max(64),
        other => other.fixed_values().into_iter().max().unwrap_or(1),
    }
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
    let (pattern, transpose_n) = match work {
        Work::Pattern(k) => (*k, None),
        Work::Transpose(t) => (PatternKind::PingPong, Some(t.n)),
        Work::SixTimes(_) | Work::Queue(_) | Work::AllPairs(_) => (PatternKind::PingPong, None),
    };
    RunConfig {
        method: method.clone(),
        // The backends that ran and the ranks they had are known once the run is over.
        backend: String::new(),
        ranks: 0,
        timeout_s: timeout.as_secs_f64(),
        poll: b.poll,
        wait: b.wait.as_ref().map(choice_name),
        cpus: b.cpus.clone(),
        sim_config: b.sim_config.clone(),
        clock: b.clock.as_ref().map(choice_name),
        mpi_threads: b.mpi_threads.as_ref().map(choice_name),
        sizes_spec,
        pattern,
        transpose_n,
        sixtimes: match work {
            Work::SixTimes(x) => Some(*x),
            _ => None,
        },
        queue: match work {
            Work::Queue(q) => Some(q.clone()),
            _ => None,
        },
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
    if o.quiet && o.output.is_none() && o.json.is_none() && reporting {
        return Err(Fatal::usage(
            "--quiet without --output or --json would measure and keep nothing",
            "add --json FILE or --output DIR, or drop --quiet to see the report",
        ));
    }
    let json_stdout = o.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if o.full && (o.quiet || json_stdout) {
        let why = if o.quiet { "--quiet" } else { "--json -" };
        return Err(Fatal::usage(
            format!("--full with {why}: the report it would lengthen is not printed"),
            "drop one of them; the files of --output DIR always hold the full output",
        ));
    }
    Ok(Outputs {
        dir: o.output.clone(),
        json: o.json.clone(),
        full: o.full,
        quiet: o.quiet,
        progress: o.progress,
    })
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
    if let Suite::Interference { streams } = suite {
        if streams == 0 || streams > sixtimes::MAX_STREAMS {
            return Err(Fatal::usage(
                format!("--streams {streams}: 1 to {}", sixtimes::MAX_STREAMS),
                "the paper measured 1, 2 and 3 streams: --streams 3",
            ));
        }
    }
    for (flag, v, max) in [
        ("--repetitions", a.repetitions, 1_000_000),
        ("--messages", a.messages, 1_000_000_000),
    ] {
        if v == 0 || v > max {
            return Err(Fatal::usage(
                format!("{flag} {v}: 1 to {max}"),
                "the paper used 5 repetitions of 100 messages",
            ));
        }
    }
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
        trials: Some(a.repetitions),
        warmup: Some(a.warmup),
        npp: None,
        res_npp: 50,
        npp_init: 4,
        npp_trials: 200,
        cut_coef: 2.0,
        clock: a.clock,
        source: 0,
        dest: needed - 1,
        cache: a.cache,
        out: a.out,
    };
    let method = MethodConfig {
        sizes,
        trials: a.repetitions,
        warmup: a.warmup,
        npp: NppChoice::Fixed(a.messages),
        cut_coef: 2.0,
        timer_samples: p.clock.samples,
        source: 0,
        dest: 1,
        buffers: BufferOptions::default(),
    };
    let fit = FitArgs {
        breakpoint: Breakpoint::None,
        instructions_per_second: None,
    };
    let refused = a.refused.into();
    build(Work::SixTimes(x), p, fit, method, spec_text, given, refused)
}

/// Every experiment's ranks exist: on the simulator's cube (its dimension and the nodes that
/// run a program), or among the run's ranks.
fn check_placement(
    x: SixTimes,
    sizes: &[u64],
    backends: &[Chosen],
    size: u32,
) -> Result<(), Fatal> {
    for b in backends {
        let placement = match b.hypercube() {
            Some((d, ranks)) => Placement {
                hypercube: Some(d),
                size: ranks,
            },
            None => Placement {
                hypercube: None,
                size,
            },
        };
        x.check(placement, sizes).map_err(|e| {
            let hint = if placement.hypercube.is_some() {
                "fewer --hops or --streams, or a larger cube (--sim-config with more dimensions)"
                    .to_string()
            } else {
                format!(
                    "give --ranks {} or more, or fewer --hops / --streams",
                    x.ranks_needed()
                )
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
    let mut method = method(&a, sizes, false, given)?;
    if let NppChoice::Study(_) = method.npp {
        return Err(Fatal::usage(
            "--npp: a queue benchmark takes one npp, not a list",
            "give one value (--npp 1 is the paper's one round trip per queue set up), or leave \
             --npp out to calculate it",
        ));
    }
    method.trials = a.trials.unwrap_or(1000);
    method.warmup = a.warmup.unwrap_or(10);
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
    if !given.has("--npp-trials") {
        c.npp_trials = 20;
    }
    if !given.has("--samples") {
        c.clock.samples = 10_000;
    }
    c.backend.ranks = c.backend.ranks.or(Some(4));
    let mut method = method(c, sizes, false, given)?;
    method.trials = c.trials.unwrap_or(100);
    method.warmup = c.warmup.unwrap_or(10);
    let config = AllPairsConfig {
        schedule: match a.schedule {
            ScheduleArg::Tournament => Schedule::Tournament,
            ScheduleArg::Shift => Schedule::Shift,
            ScheduleArg::Random => Schedule::Random,
            ScheduleArg::Serial => Schedule::Serial,
        },
        passes: a.rounds,
        concurrency: a.concurrency,
        seed: a.seed,
        retest_trials: a.retest_trials.unwrap_or(4 * method.trials),
        round_timeout_s: a.round_timeout.unwrap_or(0.0),
    };
    let work = Work::AllPairs(AllPairsWork {
        config,
        z: a.z,
        min_factor: a.min_factor,
        fail_on_suspect: a.fail_on_suspect,
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
    Ok(plan)
}

/// All-pairs' own options, checked: no `--source`/`--dest`, a positive z, a factor of at
/// above 1, a positive round timeout, a pass at least, one npp at most.
fn check_allpairs(a: &AllpairsArgs, given: &Given) -> Result<(), Fatal> {
    if let Some(flag) = ["--source", "--dest"].into_iter().find(|f| given.has(f)) {
        return Err(Fatal::usage(
            format!("{flag} is not used by allpairs: every rank is a source and a dest"),
            format!("drop {flag}"),
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
        .filter(|t| !(t.is_finite() && *t > 0.0 && *t < 1e9))
    {
        return Err(Fatal::usage(
            format!("--round-timeout {t}: must be a positive number of seconds"),
            "for example --round-timeout 3600",
        ));
    }
    if a.rounds == 0 {
        return Err(Fatal::usage(
            "--rounds 0: at least one pass over the schedule",
            "drop --rounds, or give 1 or more",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_buffers_count_one_a_direction_and_placement_its_room_in_front() {
        let o = limits::PER_MESSAGE_OVERHEAD;
        let single = BufferOptions {
            buffers: BufferReuse::Single,
            ..Default::default()
        };
        let multiple = BufferOptions::default();
        let bw = PatternKind::Bandwidth { window: 64 };
        let bibw = PatternKind::BiBandwidth { window: 64 };
        assert_eq!(
            pattern_buffer_bytes(bw, 1000, &multiple),
            Some(64 * (1000 + o))
        );
        assert_eq!(pattern_buffer_bytes(bw, 1000, &single), Some(1000 + o));
        assert_eq!(
            pattern_buffer_bytes(bibw, 1000, &single),
            Some(2 * (1000 + o))
        );
        assert_eq!(
            pattern_buffer_bytes(bibw, 1000, &multiple),
            Some(128 * (1000 + o))
        );
        // A window capped by its bytes keeps its cap with multiple buffers.
        let big = 8 << 20;
        assert_eq!(
            pattern_buffer_bytes(bw, big, &multiple),
            Some(bw.effective_window(big) * (big + o))
        );
        let placed = BufferOptions {
            align: Some(4096),
            offset: 3,
            ..Default::default()
        };
        assert_eq!(
            pattern_buffer_bytes(PatternKind::Exchange, 10, &placed),
            Some(2 * (10 + 4095 + o))
        );
        assert_eq!(pattern_buffer_bytes(bw, u64::MAX, &placed), None);
    }
}
