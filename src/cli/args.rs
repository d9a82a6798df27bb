//! The command line as clap parses it (design §2: args -> plan -> launch -> runs -> document
//! -> render). Every closed choice is a `ValueEnum`, so `--help` lists it and a typo is a usage
//! error; nothing here is validated beyond its type (that is [`super::plan`]'s job).

use super::fatal::Fatal;
pub use crate::cli::backend::args::BackendArgs;
use clap::{Args, Parser, Subcommand, ValueEnum};
use commbench::analysis::fit::Breakpoint;
use commbench::analysis::steady::DropWarmup;
use commbench::core::method::{Invalid, Setting};
use commbench::render::svg::PlotKind;
use std::path::PathBuf;

const ABOUT: &str = "Point-to-point communication latency and rates, measured with one statistically sound method on every transport.";

const LONG_ABOUT: &str = "\
Point-to-point communication latency and rates, measured with one statistically sound method on
every transport: shared memory, TCP, a simulated hypercube, and with the opt-in Cargo features
mpi, ofi and ucx, MPI, libfabric and UCX (`commbench backends` lists what this build has).

The method is that of Luecke et al. (2009): the clock's overhead and resolution are measured
first; every timed trial is preceded by a barrier and a handshake; each trial times `npp`
ping-pongs, with npp chosen from the timer resolution; and the whole distribution of trial times
is analysed (minimum, median, mean, maximum, spread, percentiles, confidence intervals, rates),
again after filtering out trials above cut_coef x median.

Examples:
  commbench pingpong                          8-byte ping-pong over shared memory, 2 local ranks
  commbench pingpong --backend tcp --poll --sizes 1..4M:x2 --output out/
  commbench pingpong --backend sim --sim-config ncube7 --source 0 --dest 63
  commbench overhead --backend sim --sim-config ncube7   the six times of Krumme & Greenfield 1988
  commbench queue posted --any-source         latency behind 0..1000 pre-posted receives
  commbench timer                             the clock's overhead and resolution
  commbench allpairs --sizes 8,1M             every ordered pair of 4 local ranks, slow ones named
  mpirun -np 2 commbench pingpong --backend mpi,tcp,shm   (built with --features mpi)
  commbench pingpong --backend ofi --ofi-provider shm     (built with --features ofi)
  commbench pingpong --backend ucx --ucx-tls posix,self   (built with --features ucx)";

#[derive(Debug, Parser)]
#[command(name = "commbench", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ping-pong between two ranks (Hockney's COMMS1), timed with the method of Luecke et al.
    /// 2009 §3.
    Pingpong(PatternArgs),
    /// Exchange (Hockney's COMMS2): both ranks send to each other at once, then return the
    /// messages.
    Exchange(PatternArgs),
    /// Streaming bandwidth: a window of outstanding sends, then a short acknowledgement.
    Bandwidth(BandwidthArgs),
    /// The column transpose of the Janus ping-pong report: the source sends the columns of an
    /// N x N matrix of doubles, the dest stores them as rows (packed; on MPI also with a derived
    /// vector datatype).
    Transpose(TransposeArgs),
    /// The echo test of Krumme & Greenfield (1988) §3.2: rank 0 and a rank d hops away, for
    /// each distance d; E = (T(d+1) - T(d)) / 2, with Q running (busy) and idle (§5.1).
    Echo(EchoArgs),
    /// The six per-message times F, S, R, A, U and E of Krumme & Greenfield (1988) §3: the
    /// echo, then the experiments giving R, A+U, F+S, R+S and 2(F+E+U) per size, solved in
    /// the paper's order and fitted as lines (Tables 1 and 3).
    Overhead(EchoArgs),
    /// Krumme & Greenfield (1988) §5.2: rank 0 times a fixed computation while 1, 2, .. ranks
    /// stream 2000-byte messages through it, against the slowdown predicted with no
    /// interaction.
    Interference(InterferenceArgs),
    /// The queue-usage benchmarks of Underwood & Brightwell: latency with a long pre-posted
    /// receive queue (`queue posted`) or a long unexpected message queue (`queue unexpected`).
    Queue(QueueCmd),
    /// Every ordered pair of ranks, each cell a ping-pong timed with the method of Luecke et
    /// al. 2009, in rounds of disjoint pairs; a robust model (Tukey's median polish on log
    /// time) names the slow node, link or switch, confirmed by measuring suspects again alone.
    #[command(long_about = ALLPAIRS_ABOUT)]
    Allpairs(AllpairsArgs),
    /// Re-render a result document (text, markdown or csv) without measuring again.
    Report(ReportArgs),
    /// Draw a result document as SVG: latency, bandwidth, histogram or signature graph.
    Plot(PlotArgs),
    /// Compare two sides, each one or more runs (result documents, or a set of launches),
    /// size by size: ratio, bootstrap CI over runs and trials, run-to-run spread.
    Compare(CompareArgs),
    /// Summarise result documents as one set of launches (the runs of a launcher's loop,
    /// `for k in 1..L: mpirun ... --output DIR/launch-k`): per size, the share of the
    /// variance between launches and what one more launch is worth in trials.
    Launches(LaunchesArgs),
    /// Characterise the clock: overhead and resolution from back-to-back reads (Luecke et al.
    /// 2009 §3.1).
    Timer(TimerArgs),
    /// List the backends this build knows and whether each is compiled in.
    Backends,
}

/// The options of a pattern (ping-pong, exchange, bandwidth): the message sizes, the options
/// every measuring command shares, and the Hockney fit over the sizes.
#[derive(Debug, Args, Clone)]
pub struct PatternArgs {
    #[command(flatten)]
    pub sizes: SizeArgs,

    #[command(flatten)]
    pub common: PingpongArgs,

    #[command(flatten)]
    pub messages: MessageArgs,

    #[command(flatten)]
    pub fit: FitArgs,
}

/// The message sizes of a pattern (a transpose has one, from its matrix order).
#[derive(Debug, Args, Clone)]
pub struct SizeArgs {
    /// Message sizes: a list (1,8,64), powers (1..4M:x2) or linear steps (1..4096:+512).
    /// Suffixes K, M, G are binary (1K = 1024). Size 0 is allowed (the classic latency).
    /// Default: 8 (bandwidth: 1..4M:x2). At most 10000 sizes; each at most what the backend
    /// carries (shm 4 GiB - 1, tcp 64 GiB, mpi 2 GiB - 1) and what memory holds, checked
    /// before the run starts.
    #[arg(long, value_name = "SPEC", conflicts_with = "sweep")]
    pub sizes: Option<String>,

    /// Sweep 1 B..4 MiB in powers of two (the same as --sizes 1..4M:x2).
    #[arg(long)]
    pub sweep: bool,
}

/// The help heading of the fit's options.
const FIT: &str = "Hockney fit";

/// The line fitted through the measured sizes (Hockney's COMMS1), which needs two or more.
#[derive(Debug, Args, Clone)]
pub struct FitArgs {
    /// Where the protocol changes: none (one line), auto (the size that best splits the sweep
    /// into two linear regimes) or a size (e.g. 4K).
    #[arg(long, default_value = "auto", value_name = "none|auto|SIZE", value_parser = parse_breakpoint, help_heading = FIT)]
    pub breakpoint: Breakpoint,

    /// Also express the fitted line in cycles, a + b n, at this many instructions per second
    /// (the Janus ping-pong report, eq. 3-4).
    #[arg(long, value_name = "HZ", help_heading = FIT)]
    pub instructions_per_second: Option<f64>,
}

/// The options every measuring command shares: the backends and how the ranks are found, the
/// method's parameters, the outputs.
#[derive(Debug, Args, Clone)]
pub struct PingpongArgs {
    #[command(flatten)]
    pub backend: BackendArgs,

    /// Timed trials per size (ntrial), at most 10^8.
    #[arg(long, value_name = "N")]
    pub trials: u64,

    /// Untimed iterations before the first trial of each size, at most 10^9.
    #[arg(long, value_name = "N")]
    pub warmup: u64,

    /// Fix npp, the ping-pongs per timing loop, instead of calculating it from the timer
    /// resolution (Luecke et al. 2009 §3.3). A list (1,9,18,36,72,144,15000) measures every
    /// size once per value: the npp study of Luecke et al. 2009, Tables 4.1-4.3. Each value at
    /// most 10^9; a run whose counts alone take over a week is refused.
    #[arg(long, value_name = "N[,N...]")]
    pub npp: Option<String>,

    /// res_npp: a timing loop should last at least res_npp x the timer resolution (when npp is
    /// calculated, without --npp).
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub res_npp: u64,

    /// npp_init: ping-pongs per loop while estimating the ping-pong time (without --npp).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub npp_init: u64,

    /// npptrial: loops used to estimate the ping-pong time (without --npp).
    #[arg(long, default_value_t = PINGPONG_COUNTS.npp_trials, value_name = "N")]
    pub npp_trials: u64,

    /// Filtered analysis: remove trials above this multiple of the median (Luecke et al. 2009
    /// §3.4).
    #[arg(long, default_value_t = 2.0, value_name = "X")]
    pub cut_coef: f64,

    /// The rate no point should exceed, a link's (10Gbit/s, 1gbit, 1.25GB/s, 800MB/s): the
    /// report card gives the best rate reached as a fraction of it and flags the points above
    /// it (Hoefler & Belli rule 11).
    #[arg(long, value_name = "RATE")]
    pub expect_rate: Option<String>,

    #[command(flatten)]
    pub drift: DriftArgs,

    #[command(flatten)]
    pub clock: ClockSamples,

    /// The rank that times the ping-pongs.
    #[arg(long, default_value_t = 0, value_name = "RANK")]
    pub source: u32,

    /// The rank that echoes them.
    #[arg(long, default_value_t = 1, value_name = "RANK")]
    pub dest: u32,

    #[command(flatten)]
    pub cache: CacheArgs,

    #[command(flatten)]
    pub stop: StopArgs,

    #[command(flatten)]
    pub out: OutputArgs,
}

/// The help heading of the options that stop a size on its confidence interval.
const STOP: &str = "Measuring until the answer is known (docs/methodology.md)";

/// `--until-ci` and its bounds: trials in blocks until the median's confidence interval is
/// narrow enough (core `method::until`).
#[derive(Debug, Args, Clone, Default)]
pub struct StopArgs {
    /// Measure each size until the distribution-free confidence interval of its median has a
    /// half-width within REL of the median, at coverage LEVEL (default 95%): 1%, 0.5%,99%.
    /// Trials run in blocks (the first --min-trials, then 50 or a twentieth of those
    /// measured); after each the interval is computed again. A size that reaches
    /// --max-trials or --max-time first stops there and is marked did_not_converge with the
    /// width it reached. --trials is then --max-trials.
    #[arg(long, value_name = "REL[,LEVEL]", help_heading = STOP)]
    pub until_ci: Option<String>,

    /// With --until-ci: the fewest trials of a size (default 100; at least 6 at 95%, 8 at
    /// 99%, below which no distribution-free interval of the median has that coverage).
    #[arg(long, value_name = "N", help_heading = STOP)]
    pub min_trials: Option<u64>,

    /// With --until-ci: the most trials of a size (default: the command's --trials default).
    #[arg(long, value_name = "N", help_heading = STOP)]
    pub max_trials: Option<u64>,

    /// With --until-ci: the most time of one size's trials and, after a comma, of the whole
    /// run's sizes (10s, 10s,5m or ,5m; units ns, us, ms, s, m, h; a number alone is
    /// seconds), on the timing rank's clock (virtual time on sim). Once the run's time is
    /// spent, each size left gets its first block only. allpairs: the run's time budget
    /// (one time, e.g. 10m): the sizes share it, a round starts only within its size's
    /// share, the report says how much of the matrix was covered; without --schedule the
    /// rounds are then random bisections, every rank and far pairs met from the first.
    #[arg(long, value_name = "SIZE[,RUN]", help_heading = STOP)]
    pub max_time: Option<String>,
}

/// What is done with a point's trials when they changed while they were measured (every
/// point's trials are tested for a change: docs/methodology.md §4a).
#[derive(Debug, Args, Clone, Default)]
pub struct DriftArgs {
    /// A point whose trials settled after a warm-up (a slower start, then a steady state
    /// holding at least the last quarter of its trials): none (keep every trial; the report
    /// names the warm-up) or auto (leave its leading trials slower than the steady state out
    /// of its statistics, kept beside them in the document).
    #[arg(long, value_enum, default_value_t = DropWarmupArg::None, value_name = "WHEN")]
    pub drop_warmup: DropWarmupArg,
}

/// `--drop-warmup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum DropWarmupArg {
    /// Keep every trial.
    #[default]
    None,
    /// Drop the trials before the steady state of a point that warmed up.
    Auto,
}

impl From<DropWarmupArg> for DropWarmup {
    fn from(a: DropWarmupArg) -> Self {
        match a {
            DropWarmupArg::None => DropWarmup::None,
            DropWarmupArg::Auto => DropWarmup::Auto,
        }
    }
}

/// The help heading of the message buffer options.
const BUFFERS: &str = "Message buffers (docs/buffers.md)";

/// The cache state each trial starts in (core `method::buffers`): every measuring command
/// has it, since the engine sweeps the caches between trials for any kernel.
#[derive(Debug, Args, Clone, Default)]
pub struct CacheArgs {
    /// The cache state each trial starts in: warm (the buffers stay cached, every peer's
    /// default) or cold (each measuring rank writes through a pool of 2x its last-level cache
    /// before every trial: IMB -off_cache, NetPIPE -I/--nocache).
    #[arg(long, value_enum, default_value_t = CacheArg::Warm, value_name = "STATE", help_heading = BUFFERS)]
    pub cache: CacheArg,

    /// With --cache cold: the pool written through before each trial, a size such as 64M,
    /// 1 MiB to 16 GiB (default: twice the last-level cache; IMB -off_cache's cache size).
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg, help_heading = BUFFERS)]
    pub cache_pool: Option<u64>,
}

/// What the messages of a pattern are: checked, reused, placed (core `method::buffers`). The
/// defaults are what every earlier version measured.
#[derive(Debug, Args, Clone, Default)]
pub struct MessageArgs {
    /// Fill every message with a pattern of its trial and sender before each trial and check
    /// every byte that arrived after it, outside the timed loop (OSU -c, fabtests -v,
    /// fi_pingpong -c; NetPIPE -i/--integrity checks instead of timing). A corrupted byte fails
    /// the run (exit 1).
    #[arg(long, help_heading = BUFFERS)]
    pub validate: bool,

    /// A streaming window's buffers: multiple (one per outstanding message, commbench's
    /// default, so earlier results stay comparable) or single (one buffer posted the whole
    /// window, osu_bw's default; OSU -b).
    #[arg(long, value_enum, default_value_t = BuffersArg::Multiple, value_name = "REUSE", help_heading = BUFFERS)]
    pub buffers: BuffersArg,

    /// Start every message at an address that is a multiple of N bytes (a power of two up to
    /// 2M), plus --offset (NetPIPE -A; OSU's buffers are page-aligned).
    #[arg(long, value_name = "N", value_parser = parse_size_arg, help_heading = BUFFERS)]
    pub align: Option<u64>,

    /// Start every message N bytes past an --align boundary (4096 when --align is not given),
    /// N below the alignment: misaligned messages (NetPIPE -O/--soffset/--roffset).
    #[arg(long, value_name = "N", value_parser = parse_size_arg, help_heading = BUFFERS)]
    pub offset: Option<u64>,
}

/// [`MessageArgs`] of a benchmark whose kernel neither checks nor places its messages:
/// accepted only to be refused with that reason (hidden from --help).
#[derive(Debug, Args, Clone, Default)]
pub struct RefusedMessageArgs {
    /// As pingpong's --validate.
    #[arg(long, hide = true)]
    pub validate: bool,

    /// As bandwidth's --buffers.
    #[arg(long, value_enum, default_value_t = BuffersArg::Multiple, hide = true)]
    pub buffers: BuffersArg,

    /// As pingpong's --align.
    #[arg(long, value_parser = parse_size_arg, hide = true)]
    pub align: Option<u64>,

    /// As pingpong's --offset.
    #[arg(long, value_parser = parse_size_arg, hide = true)]
    pub offset: Option<u64>,
}

impl From<RefusedMessageArgs> for MessageArgs {
    fn from(r: RefusedMessageArgs) -> Self {
        MessageArgs {
            validate: r.validate,
            buffers: r.buffers,
            align: r.align,
            offset: r.offset,
        }
    }
}

/// `--cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum CacheArg {
    /// The buffers stay where the last trial left them (every peer's default).
    #[default]
    Warm,
    /// A pool larger than the last-level cache is written through before every trial.
    Cold,
}

/// `--buffers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum BuffersArg {
    /// One buffer per outstanding message of a window (commbench's default).
    #[default]
    Multiple,
    /// One buffer per direction, posted the whole window (osu_bw's default).
    Single,
}

/// A size option (`--cache-pool`, `--align`, `--offset`) with the suffixes of `--sizes`.
fn parse_size_arg(s: &str) -> Result<u64, String> {
    commbench::spec::parse_size(s).map_err(|e| e.to_string())
}

#[derive(Debug, Args, Clone)]
pub struct BandwidthArgs {
    #[command(flatten)]
    pub common: PatternArgs,

    /// Sends outstanding per window (as osu_bw), 1 to 65536, or a list to sweep: 1,8,64, or
    /// 1..128 for 1, 2, 4, ..., 128 (osu_mbw_mr's -V). A window's buffers are capped at 64 MiB
    /// per rank; a smaller effective window is recorded per point.
    #[arg(long, default_value = "64", value_name = "W[,W...]")]
    pub window: String,

    /// Stream in both directions at once (as osu_bibw); rates are per direction. With
    /// --pairs every pair streams both ways (IMB Biband).
    #[arg(long)]
    pub bidirectional: bool,

    /// Stream K pairs at once (osu_mbw_mr, IMB Uniband/Biband), 1 to 4096: every pair's
    /// samples are kept, and the aggregate bandwidth and message rate are reported three ways
    /// (makespan, mean time, sum of rates) with their formulas. A list sweeps the pairs
    /// (1..8:+1 is every k from 1 to 8, 1..8 is 1, 2, 4, 8), each k the first k pairs of the
    /// largest's placement, and fits the max-rate model to them. Needs 2K ranks (--ranks
    /// defaults to them); not with --source/--dest, which --placement replaces.
    #[arg(long, value_name = "K[,K...]", help_heading = PAIRS)]
    pub pairs: Option<String>,

    /// With --pairs: which ranks pair up. block (sender r with r + K, osu_mbw_mr's: with the
    /// ranks filled host by host, every pair crosses), cyclic (2i with 2i + 1: with ranks
    /// dealt to hosts in turn) or a FILE of `SENDER RECEIVER` lines. The run records which
    /// pairs cross hosts and warns when some do and some do not.
    #[arg(long, value_name = "block|cyclic|FILE", help_heading = PAIRS)]
    pub placement: Option<String>,
}

/// The help heading of the options of several pairs at once.
const PAIRS: &str = "Several pairs at once (docs/methodology.md)";

#[derive(Debug, Args, Clone)]
pub struct TransposeArgs {
    /// Matrix order N (the message is N x N doubles).
    #[arg(long, value_name = "N")]
    pub n: usize,

    /// Not for a transpose, whose one size is its matrix's: accepted only to be refused with
    /// that reason (hidden from --help).
    #[arg(long, hide = true, value_name = "SPEC")]
    pub sizes: Option<String>,

    /// As --sizes.
    #[arg(long, hide = true)]
    pub sweep: bool,

    #[command(flatten)]
    pub refused: RefusedMessageArgs,

    #[command(flatten)]
    pub common: PingpongArgs,
}

/// The help heading of seed 001's options.
const SEED001: &str = "Krumme & Greenfield 1988";

/// The options of `echo` and `overhead`.
#[derive(Debug, Args, Clone)]
pub struct EchoArgs {
    /// Message sizes (default: 16,500,1000,1500,2000, the sizes of the paper's Table 1), in
    /// the syntax of pingpong's --sizes.
    #[arg(long, value_name = "SPEC")]
    pub sizes: Option<String>,

    /// The echo's distances, LO..HI hops or one distance (1 to 16). On sim the partner is
    /// node 2^d - 1 and the cube routes the message; elsewhere ranks 1..d-1 forward it in
    /// their own program, so a run needs HI + 1 ranks. E needs two distances or more.
    #[arg(long, default_value = "1..5", value_name = "LO..HI", help_heading = SEED001)]
    pub hops: String,

    #[command(flatten)]
    pub common: SeedArgs,
}

/// The options of `interference`.
#[derive(Debug, Args, Clone)]
pub struct InterferenceArgs {
    /// Most streams through rank 0 (1 to 8): it is measured with 1, 2, .. of them. On sim
    /// stream i runs from node 2^(2i) to node 2^(2i+1), which the cube routes through node 0
    /// (a cube of 2 x STREAMS dimensions); elsewhere from rank 2i+1 to rank 2i+2, forwarded
    /// by rank 0's own program between slices of its computation (2 x STREAMS + 1 ranks).
    #[arg(long, default_value_t = 3, value_name = "N", help_heading = SEED001)]
    pub streams: u32,

    #[command(flatten)]
    pub common: SeedArgs,
}

/// What seed 001's commands share.
#[derive(Debug, Args, Clone)]
pub struct SeedArgs {
    #[command(flatten)]
    pub backend: BackendArgs,

    /// Repetitions of each experiment, each a timed trial after a barrier and a handshake;
    /// the report gives their mean and standard deviation (the paper's five, Table 1).
    /// 1 to 10^6.
    #[arg(long, default_value_t = 5, value_name = "N", help_heading = SEED001)]
    pub repetitions: u64,

    /// Messages per clock reading, at least (the paper's 100). On a coarse clock more are
    /// timed per reading, so that one tick is at most 50 ns of each per-message value
    /// (2926 on the NCUBE's 146 us tick). 1 to 10^9.
    #[arg(long, default_value_t = 100, value_name = "N", help_heading = SEED001)]
    pub messages: u64,

    /// Untimed iterations of each experiment before its repetitions (the paper discards the
    /// first of its 101).
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = SEED001)]
    pub warmup: u64,

    /// The background computation Q: int (additions, multiplications, compares; Table 1) or
    /// float (floating-point additions and multiplications; Table 2).
    #[arg(long, value_enum, default_value_t = QArg::Int, value_name = "LOOP", help_heading = SEED001)]
    pub q: QArg,

    #[command(flatten)]
    pub clock: ClockSamples,

    #[command(flatten)]
    pub drift: DriftArgs,

    #[command(flatten)]
    pub cache: CacheArgs,

    #[command(flatten)]
    pub refused: RefusedMessageArgs,

    #[command(flatten)]
    pub stop: StopArgs,

    #[command(flatten)]
    pub out: OutputArgs,
}

/// The help heading of the queue benchmarks' options.
const QUEUE: &str = "Underwood & Brightwell";

/// `queue posted|unexpected`.
#[derive(Debug, Args, Clone)]
pub struct QueueCmd {
    #[command(subcommand)]
    pub which: QueueWhich,
}

/// Which queue the benchmark fills.
#[derive(Debug, Subcommand, Clone)]
pub enum QueueWhich {
    /// The pre-posted receive queue (Underwood & Brightwell §3.1, Figure 1): both ranks
    /// pre-post the receives the measured message traverses (tags that do not match), then
    /// the matching receive, then the untraversed rest; the asymmetric barrier in which the
    /// dest leaves first; the timed ping-pong; the extra receives are then cleared by
    /// matching messages. Points: median one-way time per queue length, fraction traversed
    /// and size, and the time one traversed entry adds.
    Posted(QueuePostedArgs),
    /// The unexpected message queue (Underwood & Brightwell §3.2, Figure 2): LENGTH messages
    /// are sent to each rank first; after the asymmetric barrier the source makes a
    /// non-blocking send, then posts its receive (the post, and its walk of the unexpected
    /// queue, counted in the latency); the dest receives and answers. The messages are
    /// cleared afterwards by matching receives.
    Unexpected(QueueArgs),
}

/// The options of both queue benchmarks.
#[derive(Debug, Args, Clone)]
pub struct QueueArgs {
    /// Queue lengths: entries that are not the measured message's (0 is the plain
    /// ping-pong), in the syntax of pingpong's --sizes, each at most 16384.
    #[arg(long, default_value = "0..1000:+100", value_name = "SPEC", help_heading = QUEUE)]
    pub lengths: String,

    /// Post every receive with a wildcard source (MPI_ANY_SOURCE): the change that defeats
    /// matching hashed on the envelope (§5.1), so the whole queue in front is walked.
    #[arg(long, help_heading = QUEUE)]
    pub any_source: bool,

    /// Message sizes of the measured messages, in the syntax of pingpong's --sizes.
    #[arg(long, default_value = "8", value_name = "SPEC")]
    pub sizes: String,

    #[command(flatten)]
    pub refused: RefusedMessageArgs,

    #[command(flatten)]
    pub common: PingpongArgs,
}

/// The options of `queue posted`.
#[derive(Debug, Args, Clone)]
pub struct QueuePostedArgs {
    /// Per cent of the queue in front of the matching receive, a list of 0..100:
    /// floor(LENGTH x PCT / 100) receives are traversed, the rest follow the match.
    #[arg(long, default_value = "0,25,50,75,100", value_name = "PCTS", help_heading = QUEUE)]
    pub traversed: String,

    #[command(flatten)]
    pub queue: QueueArgs,
}

/// `--q`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QArg {
    /// Integer arithmetic (`qint`).
    Int,
    /// Floating-point arithmetic (`qfloat`).
    Float,
}

const ALLPAIRS_ABOUT: &str = "\
Every ordered pair of ranks i -> j (i times, j echoes) measured with the method of Luecke et al.
(2009): the clock characterised on every rank, then per cell a warm-up, npp from the source's
timer resolution, and timed trials each after the pair's barrier and handshake. Pairs run in
rounds of disjoint pairs; the round and its start time are recorded, so interference local in
time shows.

The matrix is then attributed at each size by a robust two-way model on log time,
log t_ij = m + s_i + r_j + c(class of ij) + e_ij, fitted by Tukey's median polish: sender and
receiver node effects, and link residuals flagged by a robust z-score. Pairs on one host and
pairs across hosts are separate classes (on the simulator: the hop distance). Suspects are
measured again, one pair alone in the machine with more trials, before a verdict: node, link
(on the simulator: the channel), dimension (the simulator), or contention (slow only while
other pairs ran). A healthy machine gets no verdict.

Defaults differ from pingpong's, since a run has n (n - 1) cells: fewer trials, warm-up
iterations, npp estimation loops and clock samples (each option shows its own).

Examples:
  commbench allpairs --ranks 4                       4 local ranks over shared memory
  commbench allpairs --backend sim --sim-config machine.toml    a cube with [[faults]]
  mpirun -np 16 commbench allpairs --backend mpi --sizes 8,1M --fail-on-suspect
  commbench plot --kind matrix result.json -o matrix.svg";

/// The help heading of all-pairs' own options.
const ALLPAIRS: &str = "All pairs";

/// The options of `allpairs`.
#[derive(Debug, Args, Clone)]
pub struct AllpairsArgs {
    /// Message sizes of every cell, in the syntax of pingpong's --sizes.
    #[arg(long, default_value = "8,1M", value_name = "SPEC", help_heading = ALLPAIRS)]
    pub sizes: String,

    /// How pairs are grouped into rounds: tournament (n - 1 rounds of n/2 disjoint pairs),
    /// shift (mpiGraph's r -> r + D, D = 1..n-1), random (the tournament over shuffled ranks,
    /// each round a random bisection), serial (one pair at a time: no interference).
    #[arg(long, value_enum, default_value_t = ScheduleArg::Tournament, value_name = "NAME", help_heading = ALLPAIRS)]
    pub schedule: ScheduleArg,

    /// Passes over the schedule; each measures every cell once more (random: reshuffled).
    #[arg(long, default_value_t = 1, value_name = "R", help_heading = ALLPAIRS)]
    pub rounds: u32,

    /// Most pairs measured at once; a round with more is split (0: as the schedule has them).
    #[arg(long, default_value_t = 0, value_name = "K", help_heading = ALLPAIRS)]
    pub concurrency: u32,

    /// Seed of the random schedule.
    #[arg(long, default_value_t = 1, value_name = "N", help_heading = ALLPAIRS)]
    pub seed: u64,

    /// Trials of a suspect's pairs measured again alone (default: 4 x --trials; 0: no retest,
    /// suspects are reported unconfirmed).
    #[arg(long, value_name = "N", help_heading = ALLPAIRS)]
    pub retest_trials: Option<u64>,

    /// An element (node, host, link, switch, uplink, dimension) enters the model when its
    /// effect, from all
    /// of its cells, passes this z and a Bonferroni level over every element tested; a cell is
    /// flagged when its robust z (residual / (1.4826 MAD)) is above it...
    #[arg(long, default_value_t = 3.5, value_name = "Z", help_heading = ALLPAIRS)]
    pub z: f64,

    /// ... and an element is named (a suspect, then a verdict) when its own cells, in the
    /// class where they are slowest, are slower than healthy ones by at least this factor. The
    /// report says the smallest slowdown each run could have found.
    #[arg(long, default_value_t = 1.25, value_name = "X", help_heading = ALLPAIRS)]
    pub min_factor: f64,

    /// Seconds a rank that has measured its cells may wait for the other pairs of its round
    /// (default: 100 x --timeout; at least --timeout); --timeout still bounds every wait
    /// within a pair. A rank
    /// silent for twice this long between rounds is named lost, and the run goes on without
    /// it (on the simulator: virtual seconds).
    #[arg(long, value_name = "SECS", help_heading = ALLPAIRS)]
    pub round_timeout: Option<f64>,

    /// Where each cell's raw trial times go: suspects (the retested cells', in the document),
    /// all (every cell's, written where it was measured: each process appends to a file of
    /// its own in --raw-dir, the document lists them), none. Rank 0 keeps every cell as a
    /// fixed-size summary (median and its 95% interval, percentiles, trials) whatever this
    /// says, so its memory grows with the cells, not the trials.
    #[arg(long, value_enum, default_value_t = RawArg::Suspects, value_name = "WHICH", help_heading = ALLPAIRS)]
    pub raw: RawArg,

    /// Directory of the raw files of --raw all, on every host the same path (default: the
    /// --json document's path with `.raw` appended, or `raw` in the --output directory).
    #[arg(long, value_name = "DIR", help_heading = ALLPAIRS)]
    pub raw_dir: Option<PathBuf>,

    /// Exit 1 when a verdict other than contention names a node, host, link, switch, uplink
    /// or dimension, confirmed alone or not, for health-check scripts; the report and files
    /// are written first.
    #[arg(long, help_heading = ALLPAIRS)]
    pub fail_on_suspect: bool,

    /// The switches above the hosts, so that verdicts can name a switch or an uplink: Slurm's
    /// topology.conf (`SwitchName=leaf1 Nodes=node[1-16]`, `SwitchName=spine
    /// Switches=leaf[1-4]`) or one line per host, `HOST SWITCH.PATH` with the switches top
    /// first (`node7 spine.leaf1`). Without it, under Slurm's topology/tree plugin each rank's
    /// SLURM_TOPOLOGY_ADDR gives them; with neither, pairs are kept apart by host only.
    #[arg(long, value_name = "FILE", help_heading = ALLPAIRS)]
    pub topology: Option<PathBuf>,

    #[command(flatten)]
    pub messages: MessageArgs,

    #[command(flatten)]
    pub common: PingpongArgs,
}

/// `--raw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RawArg {
    /// Every cell's trials, in a file per process.
    All,
    /// The retested cells' trials, in the document.
    Suspects,
    /// No trials: every cell is its summary.
    None,
}

/// `--schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScheduleArg {
    /// A 1-factorisation: n - 1 rounds of n/2 disjoint pairs.
    Tournament,
    /// mpiGraph's shift: step D measures every r -> r + D.
    Shift,
    /// The tournament over ranks shuffled from --seed.
    Random,
    /// One pair at a time.
    Serial,
}

#[derive(Debug, Args, Clone)]
pub struct OutputArgs {
    /// Write the full output, the summary and the JSON result document into this directory
    /// (for the document alone on standard output, --json -).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Write the JSON result document to this file ('-' for standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Write one JSON line per point (per round of allpairs) to this file as soon as it is
    /// measured, so a run killed before its end keeps what it measured ('-' for standard
    /// output, the report then going to standard error); `commbench report` reads it as a
    /// document (docs/result-format.md). A file already there is replaced when the run
    /// starts: a new file is renamed over it, never truncated in place.
    #[arg(long, value_name = "FILE")]
    pub stream: Option<PathBuf>,

    /// Run the whole measurement L times, each launch in fresh processes (fresh rank
    /// placement, fresh connections): DIR/launch-K/ for each launch, and DIR/launches.json
    /// with, per size, the share of the variance between launches and what one more launch is
    /// worth in trials (Kalibera & Jones). `commbench compare DIR_A DIR_B` compares two sets.
    /// Needs --output DIR. Under mpirun or srun, run the launcher L times and summarise with
    /// `commbench launches`.
    #[arg(long, value_name = "L")]
    pub launches: Option<u32>,

    /// Print the full output (distributions included) instead of the summary.
    #[arg(long)]
    pub full: bool,

    /// Print nothing on success but the output files' names (with --output, --json or
    /// --stream).
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Progress: auto (a bar on a terminal), always (a bar, or plain lines at each quarter of a
    /// size's trials when standard error is a log; shown even with --quiet), never.
    #[arg(long, value_enum, default_value_t = ProgressWhen::Auto, value_name = "WHEN")]
    pub progress: ProgressWhen,
}

/// The timer characterisation's size, shared by the measuring commands and `timer`.
#[derive(Debug, Args, Clone)]
pub struct ClockSamples {
    /// Back-to-back clock-read pairs for the timer characterisation (Luecke et al. 2009 §3.1),
    /// at most 2^32.
    #[arg(long, default_value_t = PINGPONG_COUNTS.samples, value_name = "N")]
    pub samples: u64,
}

/// Whose clock `timer` characterises.
#[derive(Debug, Args, Clone)]
pub struct TimerBackend {
    /// Characterise the clock of this backend's rank 0 instead of this process's
    /// CLOCK_MONOTONIC (useful with sim, whose clock is virtual).
    #[arg(long, value_name = "NAME")]
    pub backend: Option<String>,

    /// With --backend sim: a preset (ncube7, generic) or a TOML file.
    #[arg(long, value_name = "NAME|FILE")]
    pub sim_config: Option<String>,
}

#[derive(Debug, Args, Clone)]
pub struct TimerArgs {
    #[command(flatten)]
    pub clock: ClockSamples,

    #[command(flatten)]
    pub on: TimerBackend,

    /// Write the characterisation as JSON to this file ('-': standard output, which then
    /// holds the JSON alone).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `--progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProgressWhen {
    /// A bar when standard error is a terminal.
    Auto,
    /// A bar, or plain lines when standard error is a log; shown even with --quiet.
    Always,
    /// No progress.
    Never,
}

/// The name of a closed choice as the command line and the result document spell it.
pub fn choice_name<T: ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

/// A method configuration the run cannot have, as a usage error naming the flags at fault.
pub fn invalid_method(e: Invalid, hint: impl Into<String>) -> Fatal {
    let flag = match e.setting {
        Setting::Sizes => "--sizes",
        Setting::Trials => "--trials",
        Setting::TimerSamples => "--samples",
        Setting::NppCalculation => "--res-npp/--npp-init/--npp-trials",
        Setting::Npp => "--npp",
        Setting::CutCoef => "--cut-coef",
        Setting::Ranks => "--source/--dest",
        Setting::Warmup => "--warmup",
        Setting::Window => "--window",
        Setting::Align => "--align",
        Setting::Offset => "--offset",
        Setting::CachePool => "--cache-pool",
        Setting::Buffers => "--validate/--buffers",
        Setting::UntilCi => "--until-ci/--min-trials/--max-trials/--max-time",
    };
    let hint = e.hint.unwrap_or_else(|| hint.into());
    Fatal::usage(format!("{flag}: {}", e.reason), hint)
}

/// `--breakpoint none|auto|SIZE`.
fn parse_breakpoint(s: &str) -> Result<Breakpoint, String> {
    s.parse::<Breakpoint>()
        .map_err(|e| format!("{}; use none, auto or a size such as 4K", e.reason()))
}

/// The options given on the command line (not left at their defaults) of the subcommand run,
/// by long flag (`--ranks` also when spelt with an alias): what decides whether an option the
/// run would not use was given.
#[derive(Debug, Clone, Default)]
pub struct Given(Vec<String>);

impl Given {
    /// These options without `flag` (one a command reads in a way of its own).
    pub fn without(&self, flag: &str) -> Self {
        Given(self.0.iter().filter(|f| *f != flag).cloned().collect())
    }

    /// The subcommand's options that `m`, parsed by `cmd`, took from the command line.
    pub fn from_matches(cmd: &clap::Command, m: &clap::ArgMatches) -> Self {
        let Some((name, sub)) = m.subcommand() else {
            return Given::default();
        };
        let Some(sc) = cmd.find_subcommand(name) else {
            return Given::default();
        };
        Given(
            sc.get_arguments()
                .filter(|a| {
                    sub.value_source(a.get_id().as_str())
                        == Some(clap::parser::ValueSource::CommandLine)
                })
                .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                .collect(),
        )
    }

    /// Whether `flag` (`--name`) was given.
    pub fn has(&self, flag: &str) -> bool {
        self.0.iter().any(|f| f == flag)
    }

    /// The flags given, in the order the command declares them.
    pub fn flags(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// `commbench report FILE.json`: re-render a result document.
#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// The result document a run wrote (result.json of --output DIR, or --json FILE).
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,

    /// text (the summary of Luecke et al. 2009, Appendix C, with the fitted models), markdown
    /// or csv.
    #[arg(long, value_enum, default_value_t = Format::Text, value_name = "FORMAT")]
    pub format: Format,

    /// text: add each size's distribution and the timer's (the full output of Luecke et al.
    /// 2009 §5).
    #[arg(long)]
    pub full: bool,
}

/// `commbench launches DOC...`: summarise documents as one set of launches.
#[derive(Debug, Args, Clone)]
pub struct LaunchesArgs {
    /// The launches' result documents, in launch order (`*` and `?` in the file name are
    /// expanded, sorted).
    #[arg(value_name = "DOC.json", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,

    /// Write the summary into this directory: launches.json (what `commbench compare DIR`
    /// reads as one side) and launches.txt.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
}

/// `commbench plot FILE.json -o out.svg`: draw a result document as SVG.
#[derive(Debug, Args, Clone)]
pub struct PlotArgs {
    /// The result document a run wrote.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,

    /// The SVG file to write.
    #[arg(long, short = 'o', value_name = "OUT.svg")]
    pub output: PathBuf,

    /// latency (log-log, 95% CI error bars, fit), bandwidth (MB/s against size), histogram
    /// (one size's trial times with the cut_coef line), signature (throughput against time),
    /// queue (a `commbench queue` run: latency against queue length), matrix (a `commbench
    /// allpairs` run: heatmap of every cell's slowdown, node effects, histogram of the robust
    /// z), aggregate and message-rate (a `bandwidth --pairs` run: the pairs' aggregate
    /// bandwidth and message rate against size, per number of pairs) or window (a `bandwidth
    /// --window 1..128` run: the rate against the window, per size).
    #[arg(long, value_enum, default_value_t = Kind::Latency, value_name = "KIND")]
    pub kind: Kind,

    /// histogram and matrix: the message size to draw (default: the first measured).
    #[arg(long, value_name = "BYTES")]
    pub size: Option<String>,

    /// matrix: what a cell's colour shows. excess (default): its median over a healthy cell
    /// of its class (hop count, same host or not), so that a slow node, link or dimension
    /// shows rather than the topology; time: its median one-way time.
    #[arg(long, alias = "color", value_enum, value_name = "WHAT")]
    pub colour: Option<Colour>,
}

/// `commbench plot --colour`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Colour {
    /// A cell's slowdown over a healthy cell of its class.
    Excess,
    /// A cell's median one-way time.
    Time,
}

/// `commbench report --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The summary of Luecke et al. 2009, Appendix C, with the fitted models.
    Text,
    /// A Markdown table per pattern.
    Markdown,
    /// One row per point.
    Csv,
}

/// `commbench plot --kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Median one-way time against size, log-log, with 95% CI error bars and the fit.
    Latency,
    /// Rate (MB/s) against size.
    Bandwidth,
    /// One size's trial times with the median and cut_coef lines.
    Histogram,
    /// Throughput against transfer time (NetPIPE's signature graph).
    Signature,
    /// A queue benchmark's median one-way time against queue length, one line per fraction
    /// traversed (`commbench queue`).
    Queue,
    /// An all-pairs matrix at one size: every cell's slowdown over a healthy cell of its
    /// class (or, with --colour time, its median one-way time), the node effects and the
    /// histogram of the robust z (`commbench allpairs`).
    Matrix,
    /// The aggregate bandwidth of pairs streaming at once against size, a line per number of
    /// pairs (`commbench bandwidth --pairs`).
    Aggregate,
    /// The aggregate message rate of pairs streaming at once against size, log-log.
    MessageRate,
    /// The rate against the window, a line per size (`commbench bandwidth --window 1..128`).
    Window,
}

impl From<Kind> for PlotKind {
    fn from(k: Kind) -> Self {
        match k {
            Kind::Latency => PlotKind::Latency,
            Kind::Bandwidth => PlotKind::Bandwidth,
            Kind::Histogram => PlotKind::Histogram,
            Kind::Signature => PlotKind::Signature,
            Kind::Queue => PlotKind::Queue,
            Kind::Matrix => PlotKind::Matrix,
            Kind::Aggregate => PlotKind::Aggregate,
            Kind::MessageRate => PlotKind::MessageRate,
            Kind::Window => PlotKind::Window,
        }
    }
}

/// `commbench compare A.json B.json`, or `commbench compare A1.json A2.json A3.json --against
/// B1.json B2.json B3.json`: is B faster or slower than A, size by size?
#[derive(Debug, Args, Clone)]
#[command(override_usage = "commbench compare A.json B.json [OPTIONS]
       commbench compare A1.json A2.json A3.json... --against B1.json B2.json B3.json... [OPTIONS]")]
#[command(after_help = "\
Each side should be several runs (3 or more), so that the comparison sees how much separate \
runs of the same benchmark differ; on a shared machine that is often far more than the spread \
of one run's trials. A pattern with * or ? in the file name is expanded by commbench, sorted \
(quote it: 'base/*.json'). With one run per side the intervals describe the variation within \
each run only: the table is shown, no size is called slower or faster, and --fail-if-slower \
refuses to judge (exit 2) rather than pass or fail on within-run noise.")]
pub struct CompareArgs {
    /// Side A, the baseline: one or more result documents, each one run (or, without
    /// --against, exactly two documents: A.json B.json).
    #[arg(value_name = "A.json", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,

    /// Side B, compared against A: one or more result documents, each one run. Put it after
    /// A's files.
    #[arg(long, value_name = "B.json", num_args = 1..)]
    pub against: Vec<PathBuf>,

    /// Exit 1 when B is slower than A by more than PCT percent at some size, with 95%
    /// confidence for all sizes together (the lower end of the simultaneous CI of B/A is above
    /// 1 + PCT/100). Needs 3 or more runs per side; with fewer it exits 2.
    #[arg(long, value_name = "PCT")]
    pub fail_if_slower: Option<f64>,

    /// Bootstrap resamples per size (at most 2000).
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub resamples: usize,

    /// Also write the comparison as JSON to FILE ('-' for standard output, instead of the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// The counts of the method that differ between measuring commands: set here alone, as the
/// defaults clap parses and each command's --help shows ([`command`]).
#[derive(Debug, Clone, Copy)]
struct Counts {
    /// `--trials`.
    trials: u64,
    /// `--warmup`.
    warmup: u64,
    /// `--npp-trials`.
    npp_trials: u64,
    /// `--samples`.
    samples: u64,
}

/// pingpong, exchange and transpose (Luecke et al. 2009's counts).
const PINGPONG_COUNTS: Counts = Counts {
    trials: 10_000,
    warmup: 100,
    npp_trials: 200,
    samples: 1 << 24,
};

/// bandwidth: a trial is a whole window.
const BANDWIDTH_COUNTS: Counts = Counts {
    trials: 100,
    warmup: 10,
    ..PINGPONG_COUNTS
};

/// The queue benchmarks: the paper's 1000 iterations, each after its queue is set up.
const QUEUE_COUNTS: Counts = Counts {
    trials: 1000,
    warmup: 10,
    ..PINGPONG_COUNTS
};

/// allpairs, sized for n (n - 1) cells.
const ALLPAIRS_COUNTS: Counts = Counts {
    trials: 100,
    warmup: 10,
    npp_trials: 20,
    samples: 10_000,
};

/// `cmd` with the counts `c` as its defaults.
fn with_counts(cmd: clap::Command, c: Counts) -> clap::Command {
    let default = |v: u64| move |a: clap::Arg| a.required(false).default_value(v.to_string());
    cmd.mut_arg("trials", default(c.trials))
        .mut_arg("warmup", default(c.warmup))
        .mut_arg("npp_trials", default(c.npp_trials))
        .mut_arg("samples", default(c.samples))
}

/// The command line's definition: [`Cli`] with each measuring command's own counts.
/// `allpairs` hides `--source`, `--dest` and `--drop-warmup`, which it accepts only to
/// refuse them.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let queue = |q: clap::Command| {
        q.mut_subcommand("posted", |c| with_counts(c, QUEUE_COUNTS))
            .mut_subcommand("unexpected", |c| with_counts(c, QUEUE_COUNTS))
    };
    let hide = |a: clap::Arg| a.hide(true);
    Cli::command()
        .mut_subcommand("pingpong", |c| with_counts(c, PINGPONG_COUNTS))
        .mut_subcommand("exchange", |c| with_counts(c, PINGPONG_COUNTS))
        .mut_subcommand("transpose", |c| with_counts(c, PINGPONG_COUNTS))
        .mut_subcommand("bandwidth", |c| with_counts(c, BANDWIDTH_COUNTS))
        .mut_subcommand("queue", queue)
        .mut_subcommand("allpairs", |c| {
            with_counts(c, ALLPAIRS_COUNTS)
                .mut_arg("source", hide)
                .mut_arg("dest", hide)
                .mut_arg("drop_warmup", hide)
        })
}
