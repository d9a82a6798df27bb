//! commbench backend: shared memory between processes on one host.
//!
//! Ranks are processes (or, for tests, threads) sharing one mapping created for the run: a
//! memfd, which has no name in `/dev/shm`, so no crash, SIGKILL included, leaves anything behind.
//! The mapping holds a header (magic, layout version, sizes, a creation token, each rank's pid
//! and state) and one single-producer single-consumer ring per ordered pair of ranks. Small
//! messages travel inline; large ones stream through the ring in chunks, so any size up to
//! 4 GiB - 1 works with a fixed footprint. Tags and wildcards come from the core matching
//! engine ([`commbench_core::transport::matching`]); a posted receive gets its payload copied straight from
//! the ring into its buffer.
//!
//! How a segment reaches each rank:
//!
//! * [`run_threads`]: all ranks are threads of this process (tests, conformance).
//! * Local launcher: rank 0 calls [`prepare_local`] before spawning the other ranks, passes the
//!   returned variables to each child and then calls [`run_rank`] with the segment; children
//!   inherit the memfd (or open `/proc/<pid>/fd/<n>` of rank 0 when the descriptor did not
//!   survive) and call [`run_rank`] with `None`.
//! * External launcher (mpirun, srun): [`run_rank`] with `None` and none of the variables; rank 0
//!   creates the memfd and passes it to the others over an abstract Unix socket named after the
//!   run's job id and token.
//!
//! Waiting is a busy poll by default; [`WaitPolicy`] offers `spin-yield` and `futex` for
//! oversubscribed hosts. A rank watches its peers while it waits (their state in the header and
//! a pidfd per peer process), so a peer that exits or is killed ends the wait with
//! [`Error::PeerLost`] naming it, and nothing waits longer than [`ShmConfig::timeout`].

#![allow(unsafe_code)]

mod endpoint;
mod handoff;
mod rendezvous;
mod segment;
mod sys;

pub use endpoint::ShmEndpoint;

use commbench_core::launch::affinity;
use commbench_core::launch::RankEnv;
use commbench_core::method::limits::Transport;
use commbench_core::{Error, Program, Result};
use segment::{Layout, Mapping};
use std::fs::File;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// Environment variable: the memfd's descriptor number in rank 0 (inherited by local children).
pub const ENV_SHM_FD: &str = "COMMBENCH_SHM_FD";
/// Environment variable: the pid of the process that created the segment (rank 0).
pub const ENV_SHM_PID: &str = "COMMBENCH_SHM_PID";
/// Environment variable: the segment's creation token (16 hex digits), checked on attach.
pub const ENV_SHM_TOKEN: &str = "COMMBENCH_SHM_TOKEN";

/// How a rank waits for a message or for ring space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Pure busy polling (lowest latency; one core per rank).
    Spin,
    /// Poll a little, then `sched_yield` between polls (oversubscribed hosts).
    SpinYield,
    /// Poll a little, then sleep on a futex that senders ring (oversubscribed hosts).
    Futex,
}

impl WaitPolicy {
    /// The name used on the command line and in the result document.
    pub fn name(self) -> &'static str {
        match self {
            WaitPolicy::Spin => "spin",
            WaitPolicy::SpinYield => "spin-yield",
            WaitPolicy::Futex => "futex",
        }
    }

    pub(crate) fn code(self) -> u32 {
        match self {
            WaitPolicy::Spin => 1,
            WaitPolicy::SpinYield => 2,
            WaitPolicy::Futex => 3,
        }
    }

    pub(crate) fn from_code(c: u32) -> Option<Self> {
        match c {
            1 => Some(WaitPolicy::Spin),
            2 => Some(WaitPolicy::SpinYield),
            3 => Some(WaitPolicy::Futex),
            _ => None,
        }
    }
}

impl std::fmt::Display for WaitPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WaitPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "spin" => Ok(WaitPolicy::Spin),
            "spin-yield" => Ok(WaitPolicy::SpinYield),
            "futex" => Ok(WaitPolicy::Futex),
            other => Err(Error::Config(format!(
                "unknown wait policy `{other}` (choose spin, spin-yield or futex)"
            ))),
        }
    }
}

/// The largest message: a record carries its length in 32 bits.
pub const MAX_MESSAGE: u64 = endpoint::MAX_MSG as u64;

/// What a run of `n` ranks with these settings can carry and maps in every process, for the
/// checks before it starts.
pub fn transport(n: u32, cfg: &ShmConfig) -> Result<Transport> {
    let layout = Layout::new(n, cfg.ring_bytes)?;
    Ok(Transport {
        max_message: MAX_MESSAGE,
        max_message_why: "its records carry a 32-bit length",
        process_bytes: layout.total as u64,
        ..Transport::unbounded("shm")
    })
}

/// Settings of the shared-memory backend.
#[derive(Debug, Clone)]
pub struct ShmConfig {
    /// How ranks wait.
    pub wait: WaitPolicy,
    /// CPUs to pin ranks to: rank `i` goes to `cpus[i % len]`; empty: no pinning.
    pub cpus: Vec<usize>,
    /// Longest wait before an error.
    pub timeout: Duration,
    /// Data bytes of each ring: a power of two from 4 KiB to 1 GiB.
    pub ring_bytes: usize,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            wait: WaitPolicy::Spin,
            cpus: Vec::new(),
            timeout: Duration::from_secs(30),
            ring_bytes: 256 << 10,
        }
    }
}

impl ShmConfig {
    /// Check the settings (ring size, timeout).
    pub fn validate(&self) -> Result<()> {
        segment::check_ring_bytes(self.ring_bytes)?;
        if self.timeout.is_zero() {
            return Err(Error::Config("shm: the timeout must be above zero".into()));
        }
        Ok(())
    }
}

/// The segment rank 0 of a local run creates before spawning the other ranks (see
/// [`prepare_local`]). Its memfd is inherited by children; it closes once every rank has
/// mapped the segment.
#[derive(Debug)]
pub struct LocalSegment {
    file: File,
    token: u64,
    layout: Layout,
}

/// Local launcher side: create the segment for `n` ranks before spawning children; returns a
/// handle (for rank 0's own [`run_rank`]) and the environment variables each child must get.
pub fn prepare_local(n: u32, cfg: &ShmConfig) -> Result<(LocalSegment, Vec<(String, String)>)> {
    use std::os::fd::AsRawFd;
    cfg.validate()?;
    let (file, token, layout) = segment::create(n, cfg.ring_bytes, cfg.wait, true)?;
    let vars = vec![
        (ENV_SHM_FD.to_string(), file.as_raw_fd().to_string()),
        (ENV_SHM_PID.to_string(), std::process::id().to_string()),
        (ENV_SHM_TOKEN.to_string(), format!("{token:016x}")),
    ];
    Ok((
        LocalSegment {
            file,
            token,
            layout,
        },
        vars,
    ))
}

/// Map `file` whole and check it is this run's segment.
pub(crate) fn map_checked(file: &File, n: u32, token: Option<u64>) -> Result<(Mapping, Layout)> {
    let len = file
        .metadata()
        .map_err(|e| Error::io("shm: fstat of the segment", e))?
        .len();
    let len = usize::try_from(len)
        .map_err(|_| Error::Protocol(format!("shm: segment of {len} bytes")))?;
    if len == 0 {
        return Err(Error::Protocol(
            "shm: the segment is empty: not a commbench shared-memory segment".into(),
        ));
    }
    let map = Mapping::map(file, len)?;
    let layout = segment::validate(&map, n, token)?;
    Ok((map, layout))
}

fn env_var(name: &str) -> Result<String> {
    std::env::var(name).map_err(|_| {
        Error::Config(format!(
            "shm: {name} is not set although {ENV_SHM_FD} is: this rank was not started by the \
             commbench that created the segment"
        ))
    })
}

/// A child of the local launcher: open the segment named by the environment.
fn open_inherited(fd_text: &str, n: u32) -> Result<(Mapping, Layout)> {
    let bad = |name: &str, v: &str| Error::Config(format!("shm: {name}={v:?} is malformed"));
    let fd: i32 = fd_text
        .trim()
        .parse()
        .ok()
        .filter(|&f| f >= 0)
        .ok_or_else(|| bad(ENV_SHM_FD, fd_text))?;
    let pid_text = env_var(ENV_SHM_PID)?;
    let pid: u32 = pid_text
        .trim()
        .parse()
        .map_err(|_| bad(ENV_SHM_PID, &pid_text))?;
    let tok_text = env_var(ENV_SHM_TOKEN)?;
    let token =
        u64::from_str_radix(tok_text.trim(), 16).map_err(|_| bad(ENV_SHM_TOKEN, &tok_text))?;
    let open = |path: &str| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
    };
    // The descriptor counts as ours only if it really is a commbench memfd.
    let own = format!("/proc/self/fd/{fd}");
    let inherited = std::fs::read_link(&own)
        .map(|t| t.to_string_lossy().starts_with("/memfd:commbench-shm"))
        .unwrap_or(false);
    let theirs = format!("/proc/{pid}/fd/{fd}");
    let file = if inherited {
        open(&own).map_err(|e| Error::io(format!("shm: reopening inherited {own}"), e))?
    } else {
        open(&theirs).map_err(|e| {
            Error::io(
                format!(
                    "shm: cannot open the segment: descriptor {fd} was not inherited and {theirs} \
                     (rank 0's) cannot be opened"
                ),
                e,
            )
        })?
    };
    let r = map_checked(&file, n, Some(token));
    if inherited {
        // The inherited descriptor is no longer needed once we have our own.
        let _ = nix::unistd::close(fd);
    }
    r
}

/// Run `p` on an attached endpoint: pin, run, finish (or leave failed).
fn run_on<P: Program>(
    map: Arc<Mapping>,
    layout: Layout,
    rank: u32,
    cfg: &ShmConfig,
    mode: &str,
    keep: Option<File>,
    p: &P,
) -> Result<P::Output> {
    let mut ep = ShmEndpoint::attach(map, layout, rank, cfg.wait, cfg.timeout, mode)?;
    // Every rank has mapped the segment: its descriptor is no longer needed by anyone.
    drop(keep);
    let cpu = affinity::cpu_for(&cfg.cpus, rank);
    let actual = affinity::pin(cpu)?;
    ep.record_affinity(cpu, &actual);
    let out = p.run(&mut ep)?;
    ep.finish()?;
    Ok(out)
}

/// All ranks as threads of this process (tests, conformance).
pub fn run_threads<P: Program>(n: u32, cfg: &ShmConfig, p: &P) -> Result<Vec<P::Output>> {
    cfg.validate()?;
    let (file, _token, layout) = segment::create(n, cfg.ring_bytes, cfg.wait, false)?;
    let map = Arc::new(Mapping::map(&file, layout.total)?);
    drop(file);
    let results: Vec<Result<P::Output>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|r| {
                let map = Arc::clone(&map);
                s.spawn(move || run_on(map, layout, r, cfg, "threads", None, p))
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(r, h)| {
                h.join().unwrap_or_else(|_| {
                    map.mark_failed(r as u32);
                    Err(Error::Backend {
                        backend: "shm",
                        message: format!("rank {r} panicked"),
                    })
                })
            })
            .collect()
    });
    // Report the cause, not its echoes: prefer an error other than a lost peer or a timeout.
    let mut first_err = None;
    let mut outs = Vec::with_capacity(n as usize);
    for (r, res) in results.into_iter().enumerate() {
        match res {
            Ok(o) => outs.push(o),
            Err(e) => {
                let e = e.in_phase(format!("shm rank {r}"));
                let echo = matches!(e.root(), Error::PeerLost { .. } | Error::Timeout { .. });
                match &first_err {
                    None => first_err = Some((echo, e)),
                    Some((true, _)) if !echo => first_err = Some((echo, e)),
                    _ => {}
                }
            }
        }
    }
    match first_err {
        Some((_, e)) => Err(e),
        None => Ok(outs),
    }
}

/// Run this process's rank. Rank 0 of a local run passes `Some(segment)` from
/// [`prepare_local`]; children and launcher-started ranks pass `None` and find the segment from
/// the environment ([`ENV_SHM_FD`], [`ENV_SHM_PID`], [`ENV_SHM_TOKEN`]) or, with none of those,
/// through rank 0 over an abstract Unix socket named after the run's job id and token.
pub fn run_rank<P: Program>(
    env: &RankEnv,
    segment: Option<LocalSegment>,
    cfg: &ShmConfig,
    p: &P,
) -> Result<P::Output> {
    cfg.validate()?;
    let mut keep = None;
    let (map, layout, mode) = match segment {
        Some(seg) => {
            if seg.layout.n != env.size {
                return Err(Error::Config(format!(
                    "shm: the segment was prepared for {} ranks but this run has {}",
                    seg.layout.n, env.size
                )));
            }
            let (map, layout) = map_checked(&seg.file, env.size, Some(seg.token))?;
            // Kept open until every rank has attached: a child whose inherited descriptor
            // was closed can still open it through /proc/<rank 0>/fd/<n>.
            keep = Some(seg.file);
            (map, layout, "local")
        }
        None => match std::env::var(ENV_SHM_FD) {
            Ok(fd) => {
                let (m, l) = open_inherited(&fd, env.size)?;
                (m, l, "local")
            }
            Err(_) if env.rank == 0 => {
                let (m, l) = rendezvous::serve(env, cfg)?;
                (m, l, "external")
            }
            Err(_) => {
                let (m, l) = rendezvous::fetch(env, cfg)?;
                (m, l, "external")
            }
        },
    };
    run_on(Arc::new(map), layout, env.rank, cfg, mode, keep, p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_policy_parses_and_names() {
        for w in [WaitPolicy::Spin, WaitPolicy::SpinYield, WaitPolicy::Futex] {
            assert_eq!(w.name().parse::<WaitPolicy>().unwrap(), w);
            assert_eq!(WaitPolicy::from_code(w.code()), Some(w));
        }
        let e = "busy".parse::<WaitPolicy>().unwrap_err().to_string();
        assert!(e.contains("spin, spin-yield or futex"), "{e}");
    }

    #[test]
    fn transport_names_its_limit_and_segment() {
        let t = transport(2, &ShmConfig::default()).unwrap();
        assert_eq!(t.max_message, u32::MAX as u64);
        assert!(!t.one_process);
        // A header page and two rings of 256 KiB with their indices.
        assert_eq!(t.process_bytes, 4096 + 2 * (256 + (256 << 10)));
        assert!(transport(0, &ShmConfig::default()).is_err());
    }

    #[test]
    fn config_is_checked() {
        assert!(ShmConfig::default().validate().is_ok());
        let c = ShmConfig {
            ring_bytes: 3000,
            ..ShmConfig::default()
        };
        assert!(matches!(c.validate(), Err(Error::Config(_))));
        let c = ShmConfig {
            timeout: Duration::ZERO,
            ..ShmConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
