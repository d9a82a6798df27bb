//! The plan's checks of a run against the backends' transports and this host's memory, made
//! before any rank starts: each size against the largest message a transport carries
//! ([`check_sizes`]), the receives a benchmark keeps posted against what it holds
//! ([`check_posted`]), what it maps in every process against the address-space limit
//! ([`check_transport_space`]), the message buffers of the largest size, the copies a
//! transport may make of them and the trial times rank 0 keeps against what this host has
//! available ([`check_memory`], [`HostMemory`]: `MemAvailable`, the cgroup's limit,
//! `ulimit -v`), and a cold cache's pool against it ([`check_cache_pool`]). The bounds on
//! counts and the run's least duration are core's (`method::limits`).

use super::Work;
use crate::cli::args::invalid_method;
use crate::cli::backend::Chosen;
use crate::cli::fatal::Fatal;
use commbench::core::method::buffers::{BufferOptions, CacheState, Evictor};
use commbench::core::method::limits::{human_bytes, RunCost, Transport};
use commbench::core::method::{Invalid, MethodConfig, NppChoice, Setting};

/// What the run would need against what its backends carry, this host holds and a run may
/// last (core `method::limits`): a window over its bound, a size over a backend's largest
/// message, buffers or trial times beyond the memory available here or the address-space
/// limit, and a run whose least duration is over a week are usage errors, found before any
/// rank starts. `all_here`: commbench starts every rank on this host.
pub(super) fn check_limits(
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
    let bench = work.benchmark();
    let buffers = |s: u64| bench.buffer_bytes(method, s);
    let trips = |s: u64| bench.trips(s);
    bench.check().map_err(fail)?;
    let place = Placement {
        all_here,
        measuring: measuring_ranks(method),
        per_size: match work {
            Work::Sweep(s) => s.steps().len(),
            _ => 1,
        },
    };
    let host = HostMemory::of_this_process();
    for b in backends {
        let t = b.transport(ranks);
        check_transport_space(&t, &host).map_err(|e| {
            Fatal::usage(
                format!("--ranks {ranks}: {e}"),
                "fewer ranks, or raise the limit with `ulimit -v`",
            )
        })?;
        check_posted(bench.posted_receives(method), &t)
            .map_err(|e| Fatal::usage(e, b.posted_queue_hint()))?;
        check_sizes(&bench.message_sizes(method), &t).map_err(fail)?;
        check_payload(method, &bench.message_sizes(method), &t)?;
        check_memory(method, &method.sizes, &buffers, &t, place, &host).map_err(|e| {
            // A count that multiplies every size's buffers is at fault, not the sizes,
            // when even the smallest size does not fit.
            let smallest = method.sizes.iter().copied().min().unwrap_or(0);
            match count_at_fault(work, method) {
                Some((flag, n, what))
                    if e.setting == Setting::Sizes
                        && check_memory(method, &[smallest], &buffers, &t, place, &host)
                            .is_err() =>
                {
                    Fatal::usage(
                        format!("{flag} {n}: {n} {what}, and {}", e.reason),
                        format!("a smaller {flag}"),
                    )
                }
                _ => fail(e),
            }
        })?;
        check_cache_pool(&method.buffers, b, all_here, &host)?;
    }
    let sizes = bench.points(method, ranks);
    for b in backends {
        b.check_run(method, &sizes, &trips)?;
    }
    let cost = RunCost::new(method, &sizes, &trips, 0.0);
    cost.check(method).map_err(fail)?;
    if let Work::AllPairs(w) = work {
        check_passes(w.config.passes, cost.floor())?;
    }
    Ok(())
}

/// `--validate` checks every byte of a message: a transport that delivers only a message's
/// first bytes (a simulated machine's `carry_bytes`) cannot have the larger sizes checked,
/// which is the configuration's fault, not the transport's.
fn check_payload(method: &MethodConfig, sizes: &[u64], t: &Transport) -> Result<(), Fatal> {
    let Some(&big) = sizes.iter().filter(|&&s| s > t.payload_bytes).max() else {
        return Ok(());
    };
    if !method.buffers.validate {
        return Ok(());
    }
    Err(Fatal::usage(
        format!(
            "--validate: size {big} B is over the {} B of a message the {} backend delivers \
             (the machine's carry_bytes), so its bytes cannot be checked",
            t.payload_bytes, t.name
        ),
        "drop --validate, measure smaller sizes, or raise carry_bytes in the machine file",
    ))
}

/// The count that multiplies every size's message buffers, if the benchmark has one: its
/// flag, its value and what it counts. A queue benchmark posts a latency receive for each
/// warm-up iteration or ping-pong of a timing loop; seed 001's experiments keep every
/// message of a repetition.
fn count_at_fault(work: &Work, method: &MethodConfig) -> Option<(&'static str, u64, &'static str)> {
    match work {
        Work::Queue(_) => {
            let npp = commbench::core::method::benchmark::npp_bound(&method.npp);
            Some(if method.warmup >= npp {
                ("--warmup", method.warmup, "warm-up receives posted at once")
            } else {
                ("--npp", npp, "receives posted at once for a timing loop")
            })
        }
        Work::SixTimes(x) => Some(("--messages", x.messages, "messages kept per repetition")),
        _ => None,
    }
}

/// `allpairs --rounds`: every pass measures every cell again, so a run of `passes` takes
/// `passes` times the least one pass (`one`) takes.
fn check_passes(passes: u32, one: std::time::Duration) -> Result<(), Fatal> {
    use commbench::core::method::limits::LONGEST_RUN;
    use commbench::core::method::units::human_duration;
    let all = one.saturating_mul(passes);
    if all <= LONGEST_RUN {
        return Ok(());
    }
    Err(Fatal::usage(
        format!(
            "--rounds {passes}: {passes} passes take at least {} (one pass at least {}), more \
             than the {} a run may take",
            human_duration(all),
            human_duration(one),
            human_duration(LONGEST_RUN)
        ),
        "fewer passes, sizes or trials",
    ))
}

/// A cold cache's pool against this host's memory: each measuring rank on it allocates one
/// (two where both ranks run here). Not on a backend without caches, which allocates none.
fn check_cache_pool(
    opts: &BufferOptions,
    b: &Chosen,
    all_here: bool,
    host: &HostMemory,
) -> Result<(), Fatal> {
    if opts.cache != CacheState::Cold || !b.models_caches() {
        return Ok(());
    }
    let pool = opts.cache_pool.unwrap_or_else(Evictor::pool_for_host);
    let here = if all_here { 2 } else { 1 };
    match host.available {
        Some(avail) if pool.saturating_mul(here) > avail => Err(Fatal::usage(
            format!(
                "--cache cold: {here} pool(s) of {} do not fit in the {} this host has available",
                human_bytes(pool),
                human_bytes(avail)
            ),
            "give a smaller --cache-pool (at least twice the last-level cache, which lscpu shows)",
        )),
        _ => Ok(()),
    }
}

/// Address space a process uses beyond its message buffers and trial times that the checks
/// cannot see in advance (thread stacks, allocator arenas, the progress display).
pub const ADDRESS_SPACE_SLACK: u64 = 256 << 20;

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
    /// The ranks that measure, each holding its buffers: 2, or 2 per pair streaming at once.
    pub measuring: u64,
    /// The points each size makes, each keeping its trial times on rank 0: the steps of a
    /// sweep of windows and pairs, 1 otherwise.
    pub per_size: usize,
}

/// The ranks of `cfg` that hold message buffers: `source` and `dest`, or every pair's two.
fn measuring_ranks(cfg: &MethodConfig) -> u64 {
    cfg.pairs.as_ref().map_or(2, |c| 2 * c.pairs.len() as u64)
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
    // Pairs at once keep every pair's times and the point's own (each trial's slowest).
    let series = cfg.pairs.as_ref().map_or(1, |c| c.pairs.len() as u64 + 1);
    let times = (sizes as u64)
        .checked_mul(values)?
        .checked_mul(cfg.trials)?
        .checked_mul(series)?;
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
    let both = rank.checked_mul(place.measuring)?;
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
    let points = sizes.len().saturating_mul(place.per_size);
    let Some(results) = results_bytes(cfg, points) else {
        return Err(trial_times_too_many(cfg, points, None));
    };
    let Some((size, need)) = largest_need(sizes, buffers, t, place, results) else {
        return Ok(());
    };
    let largest = Largest {
        cfg,
        sizes: points,
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
            format!(" in each of {} ranks", self.place.measuring)
        } else {
            String::new()
        };
        Err(Invalid {
            setting: Setting::Sizes,
            reason: format!(
                "size {} needs {} of memory ({}); this host has {} available",
                size_text(self.size),
                about(n.host),
                self.what(&on_host),
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
            format!(" in each of its {} ranks", self.place.measuring)
        } else {
            String::new()
        };
        Err(Invalid {
            setting: Setting::Sizes,
            reason: format!(
                "size {} needs {} of address space in one process ({}), and the \
                 address-space limit (ulimit -v) is {} with {} already in use",
                size_text(self.size),
                about(n.process),
                self.what(&in_process),
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
            "{} trials x {sizes} points (sizes, each once per window and pairs swept) x \
             {values} npp values are more trial times than rank 0 can keep{have}",
            cfg.trials
        ),
        hint: Some("fewer trials, sizes or npp values; every trial time is kept (8 bytes)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench::core::method::limits::{MAX_TRIALS, PER_MESSAGE_OVERHEAD};

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
        let here = Placement {
            all_here: true,
            measuring: 2,
            per_size: 1,
        };
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
            Placement {
                all_here: true,
                measuring: 2,
                per_size: 1,
            },
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
        let away = Placement {
            all_here: false,
            measuring: 2,
            per_size: 1,
        };
        let tcp = Transport::unbounded("tcp");
        assert!(check_memory(&c, &c.sizes, &pingpong_buffers, &tcp, away, &host).is_ok());
        assert!(check_memory(&c, &c.sizes, &pingpong_buffers, &sim, away, &host).is_err());
    }

    /// Pairs streaming at once on one host each hold their buffers: what two ranks of 1 GiB
    /// messages fit in, four pairs do not, and the reason counts the ranks.
    #[test]
    fn every_pair_on_the_host_holds_its_buffers() {
        let host = HostMemory {
            available: Some(9 << 30),
            address_space_limit: None,
            address_space_used: 0,
        };
        let mut c = cfg(vec![1 << 30]);
        let tcp = Transport::unbounded("tcp");
        let here = |measuring| Placement {
            all_here: true,
            measuring,
            per_size: 1,
        };
        assert!(check_memory(&c, &c.sizes, &pingpong_buffers, &tcp, here(2), &host).is_ok());
        c.pairs = Some(commbench::core::method::pairs::Concurrent {
            pairs: commbench::core::method::pairs::Placement::Block.pairs(4),
            placement: commbench::core::method::pairs::Placement::Block,
            start: Default::default(),
        });
        let m = measuring_ranks(&c);
        assert_eq!(m, 8);
        let e = check_memory(&c, &c.sizes, &pingpong_buffers, &tcp, here(m), &host).unwrap_err();
        assert!(e.reason.contains("in each of 8 ranks"), "{}", e.reason);
    }

    #[test]
    fn largest_fitting_power_of_two() {
        assert_eq!(largest_fitting(100, &|s| s <= 10), Some(8));
        assert_eq!(largest_fitting(8, &|s| s <= 10), Some(8));
        assert_eq!(largest_fitting(100, &|_| false), None);
        assert_eq!(largest_fitting(u64::MAX, &|s| s <= 1 << 40), Some(1 << 40));
    }
}
