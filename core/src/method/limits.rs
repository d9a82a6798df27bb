//! What a run may ask for, and what it will cost, known before anything starts.
//!
//! Three kinds of bound keep a run from starting when it cannot finish:
//!
//! * **counts** ([`MAX_POINTS`], [`MAX_TRIALS`], [`MAX_ITERATIONS`], [`MAX_TIMER_SAMPLES`],
//!   [`MAX_WINDOW`]): fixed limits, each far above what the method of Luecke et al. (2009)
//!   uses, that keep one setting from asking for years or terabytes on its own
//!   ([`super::MethodConfig::check`]);
//! * **memory** ([`check_memory`]): the message buffers of the largest size, the copies a
//!   transport may make of them, and the trial times rank 0 keeps, against what this host has
//!   available ([`HostMemory`]: `MemAvailable`, the cgroup's limit, `ulimit -v`), and each size
//!   against the largest message the transport carries ([`check_sizes`]);
//! * **time** ([`RunCost`]): a lower bound of the run's duration from its counts, each message
//!   costing at least [`MESSAGE_FLOOR_NS`] plus its bytes at [`BYTES_PER_NS_CEILING`]; a run
//!   whose lower bound is over [`LONGEST_RUN`] is refused, one over [`LONG_RUN`] says so.
//!
//! Buffers proportional to a size or a count are allocated fallibly ([`try_zeroed`],
//! [`try_with_capacity`]): a failure is an error naming what was being allocated and how much,
//! never an abort.

use crate::method::engine::Stage;
use crate::method::{Invalid, MethodConfig, NppChoice, Setting};
use crate::transport::error::{Error, Result};
use std::time::Duration;

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

/// Address space a process uses beyond its message buffers and trial times that the checks
/// cannot see in advance (thread stacks, allocator arenas, the progress display).
pub const ADDRESS_SPACE_SLACK: u64 = 256 << 20;

/// The least time one message of `size` bytes takes, ns.
pub fn message_floor_ns(size: u64) -> f64 {
    MESSAGE_FLOOR_NS + size as f64 / BYTES_PER_NS_CEILING
}

/// The error of an allocation of `bytes` for `what` that failed: `cannot allocate 64 GiB for
/// <what>: out of memory`.
pub fn cannot_allocate(bytes: u64, what: impl std::fmt::Display) -> Error {
    Error::io(
        format!("cannot allocate {} for {what}", human_bytes(bytes)),
        std::io::Error::from(std::io::ErrorKind::OutOfMemory),
    )
}

/// `len` zero bytes, or an out-of-memory error naming `what` was being allocated (called only
/// on failure), `len` and the reason. Never aborts.
pub fn try_zeroed(len: u64, what: impl FnOnce() -> String) -> Result<Vec<u8>> {
    let mut v = try_with_capacity::<u8>(len, what)?;
    // The capacity is there: resizing only writes the zeros.
    v.resize(v.capacity().min(len as usize), 0);
    Ok(v)
}

/// An empty vector with room for `n` elements, or an out-of-memory error naming `what` and the
/// bytes it needed. Never aborts.
pub fn try_with_capacity<T>(n: u64, what: impl FnOnce() -> String) -> Result<Vec<T>> {
    let elem = std::mem::size_of::<T>() as u64;
    let fail = |what: String| match n.checked_mul(elem) {
        Some(bytes) => cannot_allocate(bytes, what),
        None => cannot_allocate(u64::MAX, format!("{what} ({n} x {elem} bytes)")),
    };
    let Ok(count) = usize::try_from(n) else {
        return Err(fail(what()));
    };
    let mut v = Vec::new();
    match v.try_reserve_exact(count) {
        Ok(()) => Ok(v),
        Err(_) => Err(fail(what())),
    }
}

/// Bytes in binary units with up to three significant digits (`64 GiB`, `1.5 MiB`, `100 B`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        return format!("{n} B");
    }
    let text = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text} {}", UNITS[u])
}

/// A duration in the two largest units that matter (`3 h 20 min`, `45 s`, `12 days 4 h`,
/// `63 years`).
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    const MIN: u64 = 60;
    const HOUR: u64 = 3600;
    const DAY: u64 = 86_400;
    const YEAR: u64 = 365 * DAY;
    let two = |big: u64, bu: &str, small: u64, su: &str| {
        if small == 0 {
            format!("{big} {bu}")
        } else {
            format!("{big} {bu} {small} {su}")
        }
    };
    match s {
        0 => format!("{:.1} s", d.as_secs_f64()),
        1..MIN => format!("{s} s"),
        MIN..HOUR => two(s / MIN, "min", s % MIN, "s"),
        HOUR..DAY => two(s / HOUR, "h", s % HOUR / MIN, "min"),
        DAY..YEAR => two(s / DAY, "days", s % DAY / HOUR, "h"),
        _ => format!("{} years", s / YEAR),
    }
}

/// What this process and its host can hold, read from the operating system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostMemory {
    /// Bytes that can still be allocated on this host without swapping: `MemAvailable`, or the
    /// room left under this process's cgroup memory limit when that is smaller. `None`: unknown.
    pub available: Option<u64>,
    /// The soft address-space limit of this process (`ulimit -v`, `RLIMIT_AS`), bytes; `None`:
    /// unlimited or unknown.
    pub address_space_limit: Option<u64>,
    /// Address space this process already uses (`VmSize`), bytes.
    pub address_space_used: u64,
}

impl HostMemory {
    /// This process and its host, from `/proc` and `/sys/fs/cgroup` (anything unreadable is
    /// unknown, and unknown limits are not checked).
    pub fn of_this_process() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let mem = read("/proc/meminfo").and_then(|t| kib_field(&t, "MemAvailable:"));
        let cgroup = read("/proc/self/cgroup").and_then(|c| cgroup_room(&c, &read));
        let available = match (mem, cgroup) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        HostMemory {
            available,
            address_space_limit: read("/proc/self/limits").and_then(|t| address_space_limit(&t)),
            address_space_used: read("/proc/self/status")
                .and_then(|t| kib_field(&t, "VmSize:"))
                .unwrap_or(0),
        }
    }
}

/// The value of a `Name:   1234 kB` line, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft limit of the `Max address space` line of `/proc/<pid>/limits`, bytes (None when
/// unlimited).
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Bytes left under this process's cgroup memory limit (v2 `memory.max`, or v1
/// `memory.limit_in_bytes`), None when there is none or it cannot be read.
fn cgroup_room(cgroup: &str, read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let num = |p: String| -> Option<u64> { read(&p)?.trim().parse().ok() };
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_end_matches('/');
        let (limit, used) = if id == "0" && controllers.is_empty() {
            let base = format!("/sys/fs/cgroup{path}");
            (
                num(format!("{base}/memory.max")),
                num(format!("{base}/memory.current")),
            )
        } else if controllers.split(',').any(|c| c == "memory") {
            // In a cgroup namespace the controller's mount is this process's own group.
            let own = |f: &str| {
                num(format!("/sys/fs/cgroup/memory{path}/{f}"))
                    .or_else(|| num(format!("/sys/fs/cgroup/memory/{f}")))
            };
            (own("memory.limit_in_bytes"), own("memory.usage_in_bytes"))
        } else {
            continue;
        };
        // v1 writes "no limit" as a huge number; v2 as "max", which does not parse.
        if let Some(l) = limit.filter(|&l| l < 1 << 60) {
            return Some(l.saturating_sub(used.unwrap_or(0)));
        }
    }
    None
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
        }
    }
}

/// A benchmark that keeps `posted` receives posted at once on a rank (seed 004's posted queue
/// with its latency receives) must fit what the transport holds.
pub fn check_posted(posted: u64, t: &Transport) -> std::result::Result<(), String> {
    if posted <= t.max_posted_receives {
        return Ok(());
    }
    Err(format!(
        "the run keeps {posted} receives posted at once on a rank, and the {} backend holds at \
         most {} ({})",
        t.name, t.max_posted_receives, t.max_posted_why
    ))
}

/// Each size must be one the transport carries.
pub fn check_sizes(sizes: &[u64], t: &Transport) -> std::result::Result<(), Invalid> {
    let Some(&big) = sizes.iter().filter(|&&s| s > t.max_message).max() else {
        return Ok(());
    };
    Err(Invalid {
        setting: Setting::Sizes,
        reason: format!(
            "size {} is over the largest message the {} backend carries, {} B ({}; {})",
            size_text(big),
            t.name,
            t.max_message,
            human_bytes(t.max_message),
            t.max_message_why
        ),
        hint: Some(format!(
            "measure sizes up to {} B on {}, or choose another backend",
            t.max_message, t.name
        )),
    })
}

/// `8 B`, `64 GiB`, or the number of bytes when it has no short form.
fn size_text(n: u64) -> String {
    if n < 1024 || n.trailing_zeros() < 10 {
        format!("{n} B")
    } else {
        human_bytes(n)
    }
}

/// What the transport maps in every process ([`Transport::process_bytes`], a shared segment
/// that grows with the ranks) against the address-space limit: the reason when it does not
/// fit, naming both.
pub fn check_transport_space(t: &Transport, host: &HostMemory) -> std::result::Result<(), String> {
    let Some(limit) = host.address_space_limit else {
        return Ok(());
    };
    let used = host
        .address_space_used
        .saturating_add(ADDRESS_SPACE_SLACK)
        .saturating_add(t.process_bytes);
    if used <= limit {
        return Ok(());
    }
    Err(format!(
        "the {} backend maps {} in every process of this run before any message buffer, and \
         the address-space limit (ulimit -v) is {}",
        t.name,
        human_bytes(t.process_bytes),
        human_bytes(limit)
    ))
}

/// Where the ranks of a run live, seen from this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The ranks of the run are processes of this host started here (commbench's own
    /// launcher), so their buffers all come out of this host's memory.
    pub all_here: bool,
}

/// Bytes of memory a run needs, and why, for one size.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Need {
    /// On this host.
    host: u64,
    /// In the address space of one process.
    process: u64,
    /// The message buffers of one rank.
    buffers: u64,
    /// The trial times rank 0 keeps.
    results: u64,
}

/// Trial times the run keeps on rank 0 (sizes x npp values x trials), and bytes they take
/// with the analysis of one point at its peak (a sorted copy and a filtered one).
fn results_bytes(cfg: &MethodConfig, sizes: usize) -> Option<u64> {
    let values = match &cfg.npp {
        NppChoice::Auto { .. } => 1,
        other => other.fixed_values().len().max(1) as u64,
    };
    let times = (sizes as u64)
        .checked_mul(values)?
        .checked_mul(cfg.trials)?;
    times
        .checked_mul(8)?
        .checked_add(cfg.trials.checked_mul(16)?)
}

/// What one size needs: each rank holds its buffers and as much again for messages the
/// transport holds for it (one that arrives before its receive is posted, or one in flight).
fn need(
    size: u64,
    buffers: &dyn Fn(u64) -> Option<u64>,
    t: &Transport,
    place: Placement,
    results: u64,
) -> Option<Need> {
    let b = buffers(size)?;
    let rank = b.checked_mul(2)?;
    let both = rank.checked_mul(2)?;
    let process = if t.one_process { both } else { rank }
        .checked_add(results)?
        .checked_add(t.process_bytes)?;
    let host = if t.one_process || place.all_here {
        both.checked_add(results)?
    } else {
        rank.checked_add(results)?
    };
    Some(Need {
        host,
        process,
        buffers: b,
        results,
    })
}

/// The memory a run needs against what this host and process have: the message buffers of its
/// largest size on the two ranks that measure, as much again for the messages the transport
/// holds, and the trial times rank 0 keeps. `buffers(size)` is what one measuring rank holds
/// for messages of `size` bytes (None: beyond any memory). The reason names the need and what
/// is available; the hint, the largest size that fits.
pub fn check_memory(
    cfg: &MethodConfig,
    sizes: &[u64],
    buffers: &dyn Fn(u64) -> Option<u64>,
    t: &Transport,
    place: Placement,
    host: &HostMemory,
) -> std::result::Result<(), Invalid> {
    let Some(results) = results_bytes(cfg, sizes.len()) else {
        return Err(trial_times_too_many(cfg, sizes.len(), None));
    };
    let Some((size, need)) = largest_need(sizes, buffers, t, place, results) else {
        return Ok(());
    };
    let largest = Largest {
        cfg,
        sizes: sizes.len(),
        size,
        need,
        buffers,
        t,
        place,
    };
    if let Some(avail) = host.available {
        largest.check_host(avail)?;
    }
    if let Some(limit) = host.address_space_limit {
        largest.check_address_space(limit, host.address_space_used)?;
    }
    if largest.need.buffers == u64::MAX {
        return Err(Invalid {
            setting: Setting::Sizes,
            reason: format!(
                "the buffers for size {} do not fit in 64 bits of memory",
                size_text(size)
            ),
            hint: None,
        });
    }
    Ok(())
}

/// Finds the size needing the most memory in one process, with its need (None: no sizes).
fn largest_need(
    sizes: &[u64],
    buffers: &dyn Fn(u64) -> Option<u64>,
    t: &Transport,
    place: Placement,
    results: u64,
) -> Option<(u64, Need)> {
    // The size needing the most (buffers are not always monotonic in the size: windows); a
    // need beyond 64 bits counts as the most there is.
    let saturated = Need {
        host: u64::MAX,
        process: u64::MAX,
        buffers: u64::MAX,
        results,
    };
    let mut worst: Option<(u64, Need)> = None;
    for &s in sizes {
        let n = need(s, buffers, t, place, results).unwrap_or_else(|| saturated.clone());
        if worst.as_ref().map_or(true, |(_, w)| n.process > w.process) {
            worst = Some((s, n));
        }
    }
    worst
}

/// Writes a byte count as "about 1.5 GiB", or "more than 16 EiB" for one beyond 64 bits.
fn about(b: u64) -> String {
    if b == u64::MAX {
        "more than 16 EiB".to_string()
    } else {
        format!("about {}", human_bytes(b))
    }
}

/// The run's largest need for memory, with what it takes to explain it and to find the
/// sizes that fit.
struct Largest<'a> {
    cfg: &'a MethodConfig,
    /// How many sizes the run measures.
    sizes: usize,
    /// The size needing the most.
    size: u64,
    need: Need,
    buffers: &'a dyn Fn(u64) -> Option<u64>,
    t: &'a Transport,
    place: Placement,
}

impl Largest<'_> {
    /// Says what the need is made of; `ranks` tells whose buffers they are.
    fn what(&self, ranks: &str) -> String {
        let n = &self.need;
        let times = if n.results >= 1 << 20 {
            format!(", and {} of trial times on rank 0", human_bytes(n.results))
        } else {
            String::new()
        };
        format!(
            "{} of message buffers{ranks} and as much again for messages the transport \
             holds{times}",
            if n.buffers == u64::MAX {
                "more than 16 EiB".to_string()
            } else {
                human_bytes(n.buffers)
            }
        )
    }

    /// Whether the message buffers, not the trial times, make up most of the need.
    fn buffers_dominate(&self) -> bool {
        self.need.buffers.saturating_mul(2) >= self.need.results
    }

    /// Finds the largest power-of-two size whose need passes `ok`.
    fn fits(&self, ok: &dyn Fn(&Need) -> bool) -> Option<u64> {
        largest_fitting(self.size, &|s| {
            need(s, self.buffers, self.t, self.place, self.need.results)
                .filter(ok)
                .is_some()
        })
    }

    /// Checks the need against the memory this host has `avail`able.
    fn check_host(&self, avail: u64) -> std::result::Result<(), Invalid> {
        let n = &self.need;
        if n.host <= avail {
            return Ok(());
        }
        if !self.buffers_dominate() {
            return Err(trial_times_too_many(
                self.cfg,
                self.sizes,
                Some((n.results, avail)),
            ));
        }
        let on_host = if self.place.all_here || self.t.one_process {
            " in each of 2 ranks"
        } else {
            ""
        };
        Err(Invalid {
            setting: Setting::Sizes,
            reason: format!(
                "size {} needs {} of memory ({}); this host has {} available",
                size_text(self.size),
                about(n.host),
                self.what(on_host),
                human_bytes(avail)
            ),
            hint: Some(fit_hint(
                self.fits(&|m: &Need| m.host <= avail),
                "on this host",
            )),
        })
    }

    /// Checks the need of one process against the address-space `limit`, `used` of it already
    /// taken.
    fn check_address_space(&self, limit: u64, used: u64) -> std::result::Result<(), Invalid> {
        let n = &self.need;
        let taken = used.saturating_add(ADDRESS_SPACE_SLACK);
        if n.process.saturating_add(taken) <= limit {
            return Ok(());
        }
        let room = limit.saturating_sub(taken);
        if !self.buffers_dominate() {
            return Err(trial_times_too_many(
                self.cfg,
                self.sizes,
                Some((n.results, room)),
            ));
        }
        let in_process = if self.t.one_process {
            " in each of its 2 ranks"
        } else {
            ""
        };
        Err(Invalid {
            setting: Setting::Sizes,
            reason: format!(
                "size {} needs {} of address space in one process ({}), and the \
                 address-space limit (ulimit -v) is {} with {} already in use",
                size_text(self.size),
                about(n.process),
                self.what(in_process),
                human_bytes(limit),
                human_bytes(used)
            ),
            hint: Some(fit_hint(
                self.fits(&|m: &Need| m.process <= room),
                "under this limit; raise it with `ulimit -v` (or ask the batch system for more memory)",
            )),
        })
    }
}

/// The largest power of two at most `below` for which `ok` holds (None: not even 1 byte).
fn largest_fitting(below: u64, ok: &dyn Fn(u64) -> bool) -> Option<u64> {
    if below == 0 {
        return None;
    }
    let mut s = 1u64 << (63 - below.leading_zeros());
    loop {
        if ok(s) {
            return Some(s);
        }
        if s == 1 {
            return None;
        }
        s /= 2;
    }
}

fn fit_hint(largest: Option<u64>, where_: &str) -> String {
    match largest {
        Some(s) => format!("sizes up to {} fit {where_}", size_text(s)),
        None => format!("no size fits {where_}"),
    }
}

/// The trial times of the run do not fit: `Some((need, have))` when memory was the limit.
fn trial_times_too_many(cfg: &MethodConfig, sizes: usize, mem: Option<(u64, u64)>) -> Invalid {
    let values = match &cfg.npp {
        NppChoice::Auto { .. } => 1,
        other => other.fixed_values().len().max(1),
    };
    let have = match mem {
        Some((need, have)) => format!(
            ": {} of trial times on rank 0, and {} is available",
            human_bytes(need),
            human_bytes(have)
        ),
        None => String::new(),
    };
    Invalid {
        setting: Setting::Trials,
        reason: format!(
            "{} trials x {sizes} sizes x {values} npp values are more trial times than rank 0 \
             can keep{have}",
            cfg.trials
        ),
        hint: Some("fewer trials, sizes or npp values; every trial time is kept (8 bytes)".into()),
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
    fn fallible_allocation_names_what_and_how_much() {
        let v = try_zeroed(1000, || "a test buffer".into()).unwrap();
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|&b| b == 0));
        // Far beyond any address space: an error, not an abort.
        let e = try_zeroed(1 << 62, || "2 message buffers of size 4 EiB".into())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot allocate 4 EiB for 2 message buffers of size 4 EiB"),
            "{e}"
        );
        assert!(e.contains("out of memory"), "{e}");
        let e = try_with_capacity::<i64>(u64::MAX, || "trial times".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("trial times"), "{e}");
        assert!(
            try_with_capacity::<i64>(3, || unreachable!())
                .unwrap()
                .capacity()
                >= 3
        );
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(64 << 30), "64 GiB");
        assert_eq!(human_bytes(u64::MAX), "16 EiB");
        assert_eq!(human_bytes((1 << 32) - 1), "4 GiB");
        assert_eq!(human_duration(Duration::from_secs(45)), "45 s");
        assert_eq!(human_duration(Duration::from_secs(12_000)), "3 h 20 min");
        assert_eq!(human_duration(Duration::from_secs(7 * 86_400)), "7 days");
        assert_eq!(human_duration(Duration::from_millis(300)), "0.3 s");
        assert_eq!(
            human_duration(Duration::from_secs(3 * 86_400 + 7200)),
            "3 days 2 h"
        );
        assert_eq!(human_duration(Duration::from_secs(2 << 30)), "68 years");
    }

    #[test]
    fn proc_files_are_read() {
        let meminfo = "MemTotal:       32000000 kB\nMemAvailable:   24000000 kB\n";
        assert_eq!(kib_field(meminfo, "MemAvailable:"), Some(24_000_000 * 1024));
        assert_eq!(kib_field(meminfo, "VmSize:"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max address space         4096000000           unlimited            bytes\n";
        assert_eq!(address_space_limit(limits), Some(4_096_000_000));
        let unlimited =
            "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(address_space_limit(unlimited), None);
        // cgroup v2 with a limit, v1 without one.
        let files = |p: &str| match p {
            "/sys/fs/cgroup/job/memory.max" => Some("1073741824\n".to_string()),
            "/sys/fs/cgroup/job/memory.current" => Some("73741824\n".to_string()),
            "/sys/fs/cgroup/memory/memory.limit_in_bytes" => {
                Some("9223372036854771712\n".to_string())
            }
            _ => None,
        };
        assert_eq!(cgroup_room("0::/job\n", &files), Some(1_000_000_000));
        assert_eq!(cgroup_room("4:memory:/x\n0::/\n", &files), None);
        let here = HostMemory::of_this_process();
        assert!(here.address_space_used > 0);
    }

    fn pingpong_buffers(s: u64) -> Option<u64> {
        s.checked_add(PER_MESSAGE_OVERHEAD)
    }

    fn cfg(sizes: Vec<u64>) -> MethodConfig {
        MethodConfig {
            sizes,
            ..MethodConfig::default()
        }
    }

    #[test]
    fn sizes_over_the_transport_limit_are_named() {
        let t = Transport {
            max_message: u32::MAX as u64,
            max_message_why: "its records carry a 32-bit length",
            ..Transport::unbounded("shm")
        };
        assert!(check_sizes(&[8, 1 << 31], &t).is_ok());
        let e = check_sizes(&[8, 5 << 30, 1 << 40], &t).unwrap_err();
        assert_eq!(e.setting, Setting::Sizes);
        assert!(e.reason.contains("size 1 TiB"), "{}", e.reason);
        assert!(e.reason.contains("4294967295 B"), "{}", e.reason);
        assert!(e.hint.unwrap().contains("up to 4294967295 B"));
    }

    #[test]
    fn memory_is_checked_against_the_host_and_the_address_space() {
        let t = Transport::unbounded("tcp");
        let here = Placement { all_here: true };
        let host = HostMemory {
            available: Some(24 << 30),
            address_space_limit: None,
            address_space_used: 10 << 20,
        };
        let c = cfg(vec![8, 1 << 30]);
        assert!(check_memory(&c, &c.sizes, &pingpong_buffers, &t, here, &host).is_ok());
        // 64 GiB on two ranks: 256 GiB with the transport's copies.
        let c = cfg(vec![8, 64 << 30]);
        let e = check_memory(&c, &c.sizes, &pingpong_buffers, &t, here, &host).unwrap_err();
        assert_eq!(e.setting, Setting::Sizes);
        assert!(
            e.reason.contains("size 64 GiB needs about 256 GiB"),
            "{}",
            e.reason
        );
        assert!(e.reason.contains("24 GiB available"), "{}", e.reason);
        assert_eq!(
            e.hint.as_deref(),
            Some("sizes up to 4 GiB fit on this host")
        );
        // Under ulimit -v 4000000 (KiB): 2 GiB needs 4 GiB of address space in each rank.
        let limited = HostMemory {
            available: None,
            address_space_limit: Some(4_000_000 * 1024),
            address_space_used: 20 << 20,
        };
        let c = cfg(vec![2 << 30]);
        let e = check_memory(&c, &c.sizes, &pingpong_buffers, &t, here, &limited).unwrap_err();
        assert!(e.reason.contains("address space"), "{}", e.reason);
        assert!(e.reason.contains("ulimit -v"), "{}", e.reason);
        assert!(e.hint.unwrap().contains("sizes up to 1 GiB fit"));
        let c = cfg(vec![1 << 30]);
        assert!(check_memory(&c, &c.sizes, &pingpong_buffers, &t, here, &limited).is_ok());
        // A segment mapped in every process, beyond the limit by itself.
        let big = Transport {
            process_bytes: 16 << 30,
            ..Transport::unbounded("shm")
        };
        let e = check_transport_space(&big, &limited).unwrap_err();
        assert!(e.contains("maps 16 GiB in every process"), "{e}");
        assert!(check_transport_space(&t, &limited).is_ok());
        assert!(check_transport_space(&big, &host).is_ok());
        // A size whose buffers overflow: beyond any host, and refused without one.
        let c = cfg(vec![8, u64::MAX]);
        let e = check_memory(&c, &c.sizes, &pingpong_buffers, &t, here, &host).unwrap_err();
        assert!(
            e.reason
                .contains("size 18446744073709551615 B needs more than 16 EiB of memory"),
            "{}",
            e.reason
        );
        assert_eq!(
            e.hint.as_deref(),
            Some("sizes up to 4 GiB fit on this host")
        );
        let e = check_memory(
            &c,
            &c.sizes,
            &pingpong_buffers,
            &t,
            here,
            &HostMemory::default(),
        )
        .unwrap_err();
        assert!(e.reason.contains("do not fit in 64 bits"), "{}", e.reason);
    }

    #[test]
    fn trial_times_are_part_of_the_memory() {
        let t = Transport::unbounded("shm");
        let host = HostMemory {
            available: Some(16 << 30),
            address_space_limit: None,
            address_space_used: 0,
        };
        let c = MethodConfig {
            sizes: (1..=1000).collect(),
            trials: MAX_TRIALS,
            ..MethodConfig::default()
        };
        let e = check_memory(
            &c,
            &c.sizes,
            &pingpong_buffers,
            &t,
            Placement { all_here: true },
            &host,
        )
        .unwrap_err();
        assert_eq!(e.setting, Setting::Trials, "{}", e.reason);
        assert!(e.reason.contains("747 GiB of trial times"), "{}", e.reason);
    }

    #[test]
    fn the_simulator_holds_both_ranks_in_one_process() {
        let sim = Transport {
            one_process: true,
            ..Transport::unbounded("sim")
        };
        let host = HostMemory {
            available: None,
            address_space_limit: Some(3 << 30),
            address_space_used: 0,
        };
        let c = cfg(vec![1 << 30]);
        let away = Placement { all_here: false };
        let tcp = Transport::unbounded("tcp");
        assert!(check_memory(&c, &c.sizes, &pingpong_buffers, &tcp, away, &host).is_ok());
        assert!(check_memory(&c, &c.sizes, &pingpong_buffers, &sim, away, &host).is_err());
    }

    #[test]
    fn largest_fitting_power_of_two() {
        assert_eq!(largest_fitting(100, &|s| s <= 10), Some(8));
        assert_eq!(largest_fitting(8, &|s| s <= 10), Some(8));
        assert_eq!(largest_fitting(100, &|_| false), None);
        assert_eq!(largest_fitting(u64::MAX, &|s| s <= 1 << 40), Some(1 << 40));
    }

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
