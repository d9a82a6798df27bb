//! Argument parsing and validation.

use crate::{launch, output};
use clap::{Args, Parser, Subcommand};
use commbench::core::launch::RankEnv;
use commbench::core::method::PatternKind;
use commbench::core::method::{MethodConfig, NppChoice};
use commbench::spec;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code of a failed run.
pub const EXIT_RUN: u8 = 1;
/// Exit code of bad usage.
pub const EXIT_USAGE: u8 = 2;

/// An error that ends the program: a one-line reason, an optional hint, and the exit code.
#[derive(Debug)]
pub struct Fatal {
    pub code: u8,
    pub reason: String,
    pub hint: Option<String>,
}

impl Fatal {
    pub fn usage(reason: impl Into<String>, hint: impl Into<String>) -> Self {
        Fatal {
            code: EXIT_USAGE,
            reason: reason.into(),
            hint: Some(hint.into()),
        }
    }
    pub fn run(reason: impl Into<String>, hint: Option<String>) -> Self {
        Fatal {
            code: EXIT_RUN,
            reason: reason.into(),
            hint,
        }
    }
}

const ABOUT: &str = "Point-to-point communication latency and rates, measured with one statistically sound method on every transport.";

const LONG_ABOUT: &str = "\
Point-to-point communication latency and rates, measured with one statistically sound method on
every transport (shared memory, TCP, a simulated hypercube, MPI; libfabric and UCX are planned).

The method is that of Luecke et al. (2009): the clock's overhead and resolution are measured
first; every timed trial is preceded by a barrier and a handshake; each trial times `npp`
ping-pongs, with npp chosen from the timer resolution; and the whole distribution of trial times
is analysed (minimum, median, mean, maximum, spread, percentiles, confidence intervals, rates),
again after filtering out trials above cut_coef x median.

Examples:
  commbench pingpong                          8-byte ping-pong over shared memory, 2 local ranks
  commbench pingpong --backend tcp --poll --sizes 1..4M:x2 --output out/
  commbench pingpong --backend sim --sim-config ncube7 --source 0 --dest 63
  commbench timer                             the clock's overhead and resolution
  mpirun -np 2 commbench pingpong --backend mpi,tcp,shm   (built with --features mpi)";

#[derive(Debug, Parser)]
#[command(name = "commbench", version, about = ABOUT, long_about = LONG_ABOUT)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// COMMS1 ping-pong between two ranks, timed with the method of seed 000 (sec. 3).
    Pingpong(PingpongArgs),
    /// COMMS2 exchange: both ranks send to each other at once, then return the messages.
    Exchange(PingpongArgs),
    /// Streaming bandwidth: a window of outstanding sends, then a short acknowledgement.
    Bandwidth(BandwidthArgs),
    /// Seed 003's column transpose: the source sends the columns of an N x N matrix of doubles,
    /// the dest stores them as rows (packed; on MPI also with a derived vector datatype).
    Transpose(TransposeArgs),
    /// Re-render a result document (text, markdown or csv) without measuring again.
    Report(crate::analyze::ReportArgs),
    /// Draw a result document as SVG: latency, bandwidth, histogram or signature graph.
    Plot(crate::analyze::PlotArgs),
    /// Compare two result documents size by size: ratio of medians, bootstrap CI, rank test.
    Compare(crate::analyze::CompareArgs),
    /// Characterise the clock: overhead and resolution from back-to-back reads (seed 000 sec. 3.1).
    Timer(TimerArgs),
    /// List the backends this build knows and whether each is compiled in.
    Backends,
}

#[derive(Debug, Args, Clone)]
pub struct PingpongArgs {
    #[command(flatten)]
    pub backend: BackendArgs,

    /// Message sizes: a list (1,8,64), powers (1..4M:x2) or linear steps (1..4096:+512).
    /// Suffixes K, M, G are binary (1K = 1024). Size 0 is allowed (the classic latency).
    /// Default: 8 (bandwidth: 1..4M:x2).
    #[arg(long, value_name = "SPEC", conflicts_with = "sweep")]
    pub sizes: Option<String>,

    /// Sweep 1 B..4 MiB in powers of two (the same as --sizes 1..4M:x2).
    #[arg(long)]
    pub sweep: bool,

    /// Timed trials per size (ntrial). Default: 10000 (bandwidth: 100).
    #[arg(long, value_name = "N")]
    pub trials: Option<u64>,

    /// Untimed iterations before the first trial of each size. Default: 100 (bandwidth: 10).
    #[arg(long, value_name = "N")]
    pub warmup: Option<u64>,

    /// Fix npp, the iterations per timing loop, instead of calculating it (seed 000 sec. 3.3).
    /// A list (1,9,18,36,72,144,15000) measures every size once per value: the npp study of
    /// seed 000 Tables 4.1-4.3.
    #[arg(long, value_name = "N[,N...]")]
    pub npp: Option<String>,

    /// res_npp: a timing loop should last at least res_npp x the timer resolution.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub res_npp: u64,

    /// npp_init: ping-pongs per loop while estimating the ping-pong time.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub npp_init: u64,

    /// npptrial: loops used to estimate the ping-pong time.
    #[arg(long, default_value_t = 200, value_name = "N")]
    pub npp_trials: u64,

    /// Filtered analysis: remove trials above this multiple of the median (seed 000 sec. 3.4).
    #[arg(long, default_value_t = 2.0, value_name = "X")]
    pub cut_coef: f64,

    /// Back-to-back clock-read pairs for the timer characterisation (seed 000 sec. 3.1).
    #[arg(long, default_value_t = 1 << 24, value_name = "N")]
    pub samples: u64,

    /// The rank that times the ping-pongs.
    #[arg(long, default_value_t = 0, value_name = "RANK")]
    pub source: u32,

    /// The rank that echoes them.
    #[arg(long, default_value_t = 1, value_name = "RANK")]
    pub dest: u32,

    /// Hockney fit (seed 002): none, auto (find the size that best splits the sweep into two
    /// linear regimes) or a size where the protocol changes (e.g. 4K).
    #[arg(long, default_value = "auto", value_name = "none|auto|SIZE")]
    pub breakpoint: String,

    /// Also express the fitted line in cycles, a + b n (seed 003 eq. 3-4).
    #[arg(long, value_name = "HZ")]
    pub instructions_per_second: Option<f64>,

    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(Debug, Args, Clone)]
pub struct BandwidthArgs {
    #[command(flatten)]
    pub common: PingpongArgs,

    /// Sends outstanding per window (as osu_bw). A window's buffers are capped at 64 MiB per
    /// rank; a smaller effective window is recorded per point.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub window: u32,

    /// Stream in both directions at once (as osu_bibw); rates are per direction.
    #[arg(long)]
    pub bidirectional: bool,
}

#[derive(Debug, Args, Clone)]
pub struct TransposeArgs {
    #[command(flatten)]
    pub common: PingpongArgs,

    /// Matrix order N (the message is N x N doubles).
    #[arg(long, value_name = "N")]
    pub n: usize,
}

#[derive(Debug, Args, Clone)]
pub struct BackendArgs {
    /// Transport: shm (default), tcp, sim, mpi (with --features mpi, under mpirun). Under mpirun
    /// a list (mpi,tcp,shm) measures each between the same processes, side by side.
    #[arg(long, value_name = "NAME[,NAME...]")]
    pub backend: Option<String>,

    /// mpi: the clock to read, wtime (MPI_Wtime, default) or monotonic (CLOCK_MONOTONIC).
    #[arg(long, value_name = "CLOCK", help_heading = "mpi")]
    pub clock: Option<String>,

    /// Ranks to start locally (default: enough for --source and --dest). The simulator always
    /// runs every node of its hypercube.
    #[arg(long, value_name = "N")]
    pub ranks: Option<u32>,

    /// Seconds without progress after which a wait is an error naming the silent peer.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub timeout: f64,

    /// tcp: busy-poll non-blocking sockets instead of blocking in the kernel.
    #[arg(long, help_heading = "tcp")]
    pub poll: bool,

    /// tcp: interface address to listen on for data connections (default: the one that reached
    /// the rendezvous).
    #[arg(long, value_name = "HOST", help_heading = "tcp")]
    pub bind: Option<String>,

    /// shm: how a rank waits: spin (default), spin-yield or futex (for oversubscribed hosts).
    #[arg(long, value_name = "POLICY", help_heading = "shm")]
    pub wait: Option<String>,

    /// shm, tcp: pin rank i to the i-th CPU of this list, cycling (e.g. 0,2 or 0-3).
    #[arg(long, value_name = "LIST", help_heading = "shm")]
    pub cpus: Option<String>,

    /// sim: a preset (ncube7, generic) or a TOML file describing the simulated machine.
    #[arg(long, value_name = "NAME|FILE", help_heading = "sim")]
    pub sim_config: Option<String>,

    /// Join a multi-process run as this rank (otherwise from the launcher's environment).
    #[arg(
        long,
        value_name = "R",
        requires = "size",
        help_heading = "Across hosts"
    )]
    pub rank: Option<u32>,

    /// Number of ranks of a multi-process run (with --rank).
    #[arg(
        long,
        value_name = "N",
        requires = "rank",
        help_heading = "Across hosts"
    )]
    pub size: Option<u32>,

    /// HOST:PORT where rank 0 holds the rendezvous of a multi-process run (tcp; shm under a
    /// launcher). Also COMMBENCH_RENDEZVOUS; the run's token comes from COMMBENCH_TOKEN.
    #[arg(long, value_name = "HOST:PORT", help_heading = "Across hosts")]
    pub rendezvous: Option<String>,
}

#[derive(Debug, Args, Clone)]
pub struct OutputArgs {
    /// Write the full output, the summary and the JSON result document into this directory.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Write the JSON result document to this file ('-' for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Print the full output (distributions included) instead of the summary.
    #[arg(long)]
    pub full: bool,

    /// Print nothing on success but the output files' names.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Progress: auto (a bar on a terminal), always (a bar, or plain lines at each quarter of a
    /// size's trials when standard error is a log; shown even with --quiet), never.
    #[arg(long, default_value = "auto", value_name = "WHEN")]
    pub progress: String,
}

#[derive(Debug, Args, Clone)]
struct TimerArgs {
    /// Back-to-back clock-read pairs.
    #[arg(long, default_value_t = 1 << 24, value_name = "N")]
    samples: u64,

    /// Characterise the clock of this backend's rank 0 instead of this process's
    /// CLOCK_MONOTONIC (useful with sim, whose clock is virtual).
    #[arg(long, value_name = "NAME")]
    backend: Option<String>,

    /// sim: a preset or a TOML file.
    #[arg(long, value_name = "NAME|FILE")]
    sim_config: Option<String>,

    /// Write the characterisation as JSON to this file ('-' for standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// The validated plan of a ping-pong run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub kind: PatternKind,
    /// Every backend to measure, in order (more than one only under an MPI launcher).
    pub backends: Vec<&'static str>,
    /// Matrix order of a transpose run.
    pub transpose_n: Option<usize>,
    pub breakpoint: commbench::analysis::fit::Breakpoint,
    pub backend: &'static str,
    pub sizes_spec: String,
    pub method: MethodConfig,
    pub ranks: u32,
    pub timeout: Duration,
    pub args: PingpongArgs,
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version print and succeed; everything else is bad usage.
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let r = match cli.cmd {
        Command::Pingpong(a) => plan(PatternKind::PingPong, a).and_then(launch::measure),
        Command::Transpose(t) => {
            if t.common.sizes.is_some() || t.common.sweep {
                Err(Fatal::usage(
                    "transpose measures one N x N matrix: --sizes and --sweep do not apply",
                    "give the matrix order with --n",
                ))
            } else if t.n == 0 || t.n > 16384 {
                Err(Fatal::usage(
                    format!("--n {}: the matrix order must be 1..=16384", t.n),
                    "for example --n 256",
                ))
            } else {
                let n = t.n;
                plan(PatternKind::PingPong, t.common).and_then(|mut p| {
                    p.transpose_n = Some(n);
                    p.method.sizes = vec![(n * n * 8) as u64];
                    p.sizes_spec = format!("{n}x{n} doubles");
                    launch::measure(p)
                })
            }
        }
        Command::Exchange(a) => plan(PatternKind::Exchange, a).and_then(launch::measure),
        Command::Bandwidth(b) => {
            if b.window == 0 {
                Err(Fatal::usage(
                    "--window 0: a window needs at least one send",
                    "for example --window 64",
                ))
            } else {
                let kind = if b.bidirectional {
                    PatternKind::BiBandwidth { window: b.window }
                } else {
                    PatternKind::Bandwidth { window: b.window }
                };
                plan(kind, b.common).and_then(launch::measure)
            }
        }
        Command::Timer(a) => timer(a),
        Command::Report(a) => crate::analyze::report(a),
        Command::Plot(a) => crate::analyze::plot(a),
        Command::Compare(a) => crate::analyze::compare(a),
        Command::Backends => {
            for b in commbench::BACKENDS {
                let state = if b.compiled {
                    "compiled in".to_string()
                } else if b.implemented {
                    format!("not compiled in (rebuild with --features {})", b.feature)
                } else {
                    "not available in this version".to_string()
                };
                println!("{:4} {:52} {state}", b.name, b.about);
            }
            Ok(())
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("commbench: error: {}", f.reason);
            if let Some(h) = f.hint {
                eprintln!("hint: {h}");
            }
            ExitCode::from(f.code)
        }
    }
}

/// Resolve `--backend` to a compiled-in backend or a usage error saying how to get it.
pub fn resolve_backend(name: Option<&str>) -> Result<&'static str, Fatal> {
    let b = match name {
        None => commbench::default_backend().ok_or_else(|| {
            Fatal::usage(
                "this build has no backend compiled in",
                "rebuild with the default features: cargo build --release",
            )
        })?,
        Some(n) => commbench::backend(n).ok_or_else(|| {
            let names: Vec<&str> = commbench::BACKENDS.iter().map(|b| b.name).collect();
            Fatal::usage(
                format!("unknown backend `{n}`"),
                format!("choose one of: {}", names.join(", ")),
            )
        })?,
    };
    if !b.compiled {
        return Err(if b.implemented {
            Fatal::usage(
                format!("backend `{}` is not compiled into this commbench", b.name),
                format!(
                    "rebuild with `cargo build --release --features {}`",
                    b.feature
                ),
            )
        } else {
            Fatal::usage(
                format!(
                    "backend `{}` ({}) is not available in this version of commbench",
                    b.name, b.about
                ),
                "`commbench backends` lists the backends this build has",
            )
        });
    }
    Ok(b.name)
}

/// Resolve `--backend`, a name or a comma-separated list of distinct names.
fn resolve_backends(spec: Option<&str>) -> Result<Vec<&'static str>, Fatal> {
    let Some(spec) = spec else {
        return Ok(vec![resolve_backend(None)?]);
    };
    let mut out = Vec::new();
    for name in spec.split(',').map(str::trim) {
        if name.is_empty() {
            return Err(Fatal::usage(
                format!("--backend {spec}: empty name in the list"),
                "for example --backend mpi,tcp,shm",
            ));
        }
        let b = resolve_backend(Some(name))?;
        if out.contains(&b) {
            return Err(Fatal::usage(
                format!("--backend {spec}: `{b}` is listed twice"),
                "list each backend once",
            ));
        }
        out.push(b);
    }
    if out.len() > 1 && out.contains(&"sim") {
        return Err(Fatal::usage(
            "the simulator cannot be measured beside real processes",
            "run --backend sim on its own",
        ));
    }
    Ok(out)
}

fn plan(kind: PatternKind, a: PingpongArgs) -> Result<Plan, Fatal> {
    let backends = resolve_backends(a.backend.backend.as_deref())?;
    let backend = backends[0];
    let streaming = matches!(
        kind,
        PatternKind::Bandwidth { .. } | PatternKind::BiBandwidth { .. }
    );
    let sizes_spec = match (&a.sizes, a.sweep, streaming) {
        (Some(s), _, _) => s.clone(),
        (None, true, _) | (None, false, true) => "1..4M:x2".to_string(),
        (None, false, false) => "8".to_string(),
    };
    let sizes = spec::parse_sizes(&sizes_spec).map_err(|e| {
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
    let npp = match a.npp.as_deref() {
        None => NppChoice::Auto {
            res_npp: a.res_npp,
            npp_init: a.npp_init,
            npptrial: a.npp_trials,
        },
        Some(list) => {
            let v = spec::parse_counts(list).map_err(|e| {
                Fatal::usage(format!("--npp: {e}"), "npp must be at least 1; leave --npp out to calculate it from the timer resolution")
            })?;
            if v.len() == 1 {
                NppChoice::Fixed(v[0])
            } else {
                NppChoice::Study(v)
            }
        }
    };
    let breakpoint: commbench::analysis::fit::Breakpoint = a.breakpoint.parse().map_err(|e| {
        Fatal::usage(
            format!("--breakpoint {}: {e}", a.breakpoint),
            "use none, auto or a size such as 4K",
        )
    })?;
    if let commbench::analysis::fit::Breakpoint::At(at) = breakpoint {
        commbench::analysis::fit::validate_breakpoint(&sizes, at).map_err(|e| {
            Fatal::usage(
                format!("--breakpoint {}: {e}", a.breakpoint),
                "a breakpoint needs at least two measured sizes on each side",
            )
        })?;
    }
    if let Some(ips) = a.instructions_per_second {
        if !(ips.is_finite() && ips > 0.0) {
            return Err(Fatal::usage(
                format!("--instructions-per-second {ips}: must be positive"),
                "for example --instructions-per-second 2.4e9",
            ));
        }
    }
    let trials = a.trials.unwrap_or(if streaming { 100 } else { 10_000 });
    let warmup = a.warmup.unwrap_or(if streaming { 10 } else { 100 });
    if !(a.backend.timeout.is_finite() && a.backend.timeout > 0.0 && a.backend.timeout < 1e7) {
        return Err(Fatal::usage(
            format!(
                "--timeout {}: must be a positive number of seconds",
                a.backend.timeout
            ),
            "for example --timeout 30",
        ));
    }
    if !["auto", "always", "never"].contains(&a.out.progress.as_str()) {
        return Err(Fatal::usage(
            format!("--progress {}: unknown choice", a.out.progress),
            "use auto, always or never",
        ));
    }
    let method = MethodConfig {
        sizes,
        trials,
        warmup,
        npp,
        cut_coef: a.cut_coef,
        timer_samples: a.samples,
        source: a.source,
        dest: a.dest,
    };
    let needed = a.source.max(a.dest) + 1;
    let ranks = match (a.backend.size, a.backend.ranks) {
        (Some(s), _) => s,
        (None, Some(r)) => r,
        (None, None) => needed.max(2),
    };
    if ranks < 2 {
        return Err(Fatal::usage(
            format!("--ranks {ranks}: a ping-pong needs at least 2 ranks"),
            "use --ranks 2 or more",
        ));
    }
    if ranks > 1024 && backend != "sim" {
        return Err(Fatal::usage(
            format!("--ranks {ranks}: at most 1024 local ranks"),
            "start large runs under mpirun or srun",
        ));
    }
    // The simulator's size is its hypercube's: its ranks are checked once it is loaded.
    let size = if backend == "sim" { u32::MAX } else { ranks };
    method
        .validate(size)
        .map_err(|e| Fatal::usage(e.reason(), "see `commbench pingpong --help`"))?;
    if !backends.contains(&"shm") && a.backend.wait.is_some() {
        return Err(Fatal::usage(
            "--wait applies to the shm backend only",
            "add --backend shm or drop it",
        ));
    }
    if !backends.iter().any(|b| *b == "shm" || *b == "tcp") && a.backend.cpus.is_some() {
        return Err(Fatal::usage(
            "--cpus applies to the shm and tcp backends only",
            "add --backend shm or --backend tcp, or drop it",
        ));
    }
    if !backends.contains(&"tcp") && (a.backend.poll || a.backend.bind.is_some()) {
        return Err(Fatal::usage(
            "--poll and --bind apply to the tcp backend only",
            "add --backend tcp or drop them",
        ));
    }
    if backend != "sim" && a.backend.sim_config.is_some() {
        return Err(Fatal::usage(
            "--sim-config applies to the sim backend only",
            "add --backend sim",
        ));
    }
    if a.backend.clock.is_some() && !backends.contains(&"mpi") {
        return Err(Fatal::usage(
            "--clock applies to the mpi backend only",
            "add --backend mpi or drop it",
        ));
    }
    Ok(Plan {
        kind,
        backends,
        transpose_n: None,
        breakpoint,
        backend,
        sizes_spec,
        method,
        ranks,
        timeout: Duration::from_secs_f64(a.backend.timeout),
        args: a,
    })
}

fn timer(a: TimerArgs) -> Result<(), Fatal> {
    if a.samples == 0 {
        return Err(Fatal::usage(
            "--samples 0: need at least one pair of clock reads",
            "for example --samples 16777216",
        ));
    }
    let report = match a.backend.as_deref() {
        None => commbench::core::method::timer::characterize_with(
            commbench::core::method::clock::monotonic_ns,
            "CLOCK_MONOTONIC".into(),
            a.samples,
            commbench::core::method::clock::monotonic_claimed_resolution_ns().map(|x| x as f64),
        ),
        Some(name) => {
            let b = resolve_backend(Some(name))?;
            launch::timer_on_backend(b, a.samples, a.sim_config.as_deref())?
        }
    };
    let mut s = String::new();
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "TIMER: {} ({} back-to-back read pairs, seed 000 section 3.1)",
        report.clock, report.samples
    );
    let _ = writeln!(
        s,
        "  minimum overhead min_ov  = {} ns",
        report.min_overhead_ns
    );
    let _ = writeln!(
        s,
        "  resolution res_timing    = {} ns",
        report.resolution_ns
    );
    let _ = writeln!(
        s,
        "  median / average / max   = {} / {:.2} / {} ns",
        report.median_ns, report.mean_ns, report.max_ns
    );
    let _ = writeln!(
        s,
        "  standard deviation       = {:.2} ns",
        report.std_dev_ns
    );
    if let Some(c) = report.claimed_resolution_ns {
        let _ = writeln!(s, "  resolution the OS claims = {c} ns (clock_getres)");
    }
    commbench::render::text::timer_distribution(&mut s, &report);
    print!("{s}");
    if let Some(p) = a.json {
        output::write_json_value(&p, &report)?;
    }
    Ok(())
}

/// The sim configuration named by --sim-config (default preset ncube7).
#[cfg(feature = "sim")]
pub fn sim_config(name: Option<&str>) -> Result<commbench::sim::SimConfig, Fatal> {
    let n = name.unwrap_or("ncube7");
    commbench::sim::SimConfig::load(n).map_err(|e| {
        Fatal::usage(
            format!("--sim-config {n}: {e}"),
            format!("use a preset ({}) or the path of a TOML file; docs/simulator.md describes the format", commbench::sim::SimConfig::preset_names().join(", ")),
        )
    })
}

/// The detected identity of this process within the run.
pub fn rank_env(b: &BackendArgs, default_size: u32) -> Result<RankEnv, Fatal> {
    let manual = b.rank.zip(b.size);
    RankEnv::detect(manual, b.rendezvous.as_deref(), default_size).map_err(|e| {
        Fatal::usage(
            e.to_string(),
            "check --rank/--size or the launcher's environment",
        )
    })
}
