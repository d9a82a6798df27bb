//! commbench's own local launcher: rank 0 re-executes this program once per other rank, with
//! the rank, the size and the backend's meeting place in the environment, runs its own part,
//! then reaps the others. Used by the backends whose ranks are processes of this host.

#![cfg_attr(
    not(any(feature = "tcp", feature = "shm", feature = "ofi", feature = "ucx")),
    allow(dead_code)
)]

use super::Ran;
use crate::cli::fatal::Fatal;
use crate::cli::signals;
use commbench::core::launch as cl;
use commbench::core::Error;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A local run: start ranks 1..size as children with `vars`, run rank 0 here with `rank0`,
/// then reap the children; those `gone` names after rank 0 finished (the ranks its run went
/// on without, [`commbench::core::Program::gone`]) are ended rather than waited for.
pub fn run_local(
    timeout: Duration,
    size: u32,
    vars: &[(String, String)],
    rank0: impl FnOnce() -> Result<(), Error>,
    gone: impl FnOnce() -> Vec<u32>,
) -> Result<Ran, Fatal> {
    let mut children = Children::spawn(size, vars)?;
    let result = rank0();
    children.end(&gone());
    let result = children.reap(result, timeout);
    Ok(Ran {
        ranks: size,
        launcher: "local".into(),
        rank: 0,
        result,
    })
}

/// The other ranks of a local run, as child processes of rank 0.
struct Children {
    kids: Vec<Kid>,
}

/// One child rank and what it said of its own failure.
struct Kid {
    rank: u32,
    child: Child,
    /// Its standard error, passed on line by line except its `commbench: error:` line,
    /// which is kept: rank 0 reports the run, with the child's reason where it is the cause.
    relay: Option<JoinHandle<()>>,
    reason: Arc<Mutex<Option<String>>>,
}

/// Pass a child's standard error on to ours, keeping its error line.
fn relay(rank: u32, from: ChildStderr, reason: Arc<Mutex<Option<String>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { return };
            if let Some(r) = line.strip_prefix("commbench: error: ") {
                if let Ok(mut slot) = reason.lock() {
                    slot.get_or_insert_with(|| r.to_string());
                }
            } else if !line.starts_with("hint: ") {
                let _ = writeln!(std::io::stderr(), "rank {rank}: {line}");
            }
        }
    })
}

impl Children {
    /// Start ranks 1..n: this program, the same arguments, and the rank in the environment.
    fn spawn(n: u32, vars: &[(String, String)]) -> Result<Self, Fatal> {
        let exe = std::env::current_exe().map_err(|e| {
            Fatal::run(
                format!("cannot find the commbench executable to start the other ranks: {e}"),
                None,
            )
        })?;
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let job = format!("{}", std::process::id());
        let mut kids = Children { kids: Vec::new() };
        for r in 1..n {
            let mut cmd = Command::new(&exe);
            cmd.args(&args)
                .env(cl::ENV_RANK, r.to_string())
                .env(cl::ENV_SIZE, n.to_string())
                .env(cl::ENV_JOB, &job)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            for (k, v) in vars {
                cmd.env(k, v);
            }
            let mut child = cmd
                .spawn()
                .map_err(|e| Fatal::run(format!("cannot start rank {r}: {e}"), None))?;
            signals::register_child(child.id());
            let reason = Arc::new(Mutex::new(None));
            let relay = child
                .stderr
                .take()
                .map(|e| relay(r, e, Arc::clone(&reason)));
            kids.kids.push(Kid {
                rank: r,
                child,
                relay,
                reason,
            });
        }
        Ok(kids)
    }

    /// End the children of `ranks` (silent ranks the run went on without: stopped or hung,
    /// they would never exit) and forget them: they are not the run's failure.
    fn end(&mut self, ranks: &[u32]) {
        for k in self.kids.iter_mut().filter(|k| ranks.contains(&k.rank)) {
            let _ = k.child.kill();
            let _ = k.child.wait();
            if let Some(h) = k.relay.take() {
                let _ = h.join();
            }
        }
        self.kids.retain(|k| !ranks.contains(&k.rank));
    }

    /// Wait for the children after rank 0 finished. On success each must exit 0 within
    /// `timeout`; on failure they get a short grace period and are then killed. The error
    /// reported is the cause: rank 0's own unless it only lost a child that failed first
    /// (then the child's reason), exit 2 kept for a child that refused the configuration.
    fn reap(&mut self, result: Result<(), Error>, timeout: Duration) -> Result<(), Error> {
        let grace = if result.is_ok() {
            timeout
        } else {
            Duration::from_secs(2)
        };
        let deadline = Instant::now() + grace;
        let mut reaped = Vec::with_capacity(self.kids.len());
        for kid in &mut self.kids {
            let status = loop {
                match kid.child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Ok(None) | Err(_) => {
                        let _ = kid.child.kill();
                        let _ = kid.child.wait();
                        break None;
                    }
                }
            };
            if let Some(h) = kid.relay.take() {
                let _ = h.join();
            }
            reaped.push(Reaped {
                rank: kid.rank,
                status,
                reason: kid.reason.lock().ok().and_then(|mut g| g.take()),
            });
        }
        self.kids.clear();
        verdict(result, grace, &reaped)
    }
}

/// A child rank after the run: how it ended (None: killed after the grace period) and the
/// reason it gave for failing.
#[derive(Debug)]
struct Reaped {
    rank: u32,
    status: Option<std::process::ExitStatus>,
    reason: Option<String>,
}

/// The run's result from rank 0's own and its children's: the cause first. Rank 0's error
/// when it has one of its own (a stop, a configuration, a failed check); when it only lost a
/// child that said why, the child's reason (a configuration error when it exited 2), a reason
/// of its own before one that only says another rank left (when a stopped or hung rank
/// falls silent, its peers time out waiting for it and the others then lose them: the
/// timeout names it); when rank 0 succeeded, the first child that failed.
fn verdict(result: Result<(), Error>, grace: Duration, reaped: &[Reaped]) -> Result<(), Error> {
    let cascade = |k: &Reaped| {
        k.reason
            .as_deref()
            .is_some_and(|w| w.contains(" is gone ("))
    };
    let reason_of = |k: &Reaped| {
        let (status, why) = (k.status?, k.reason.as_deref()?);
        let r = k.rank;
        let why = why.strip_prefix(&format!("rank {r}: ")).unwrap_or(why);
        Some(
            if status.code() == Some(i32::from(crate::cli::fatal::EXIT_USAGE)) {
                let why = why.strip_prefix("bad configuration: ").unwrap_or(why);
                Error::Config(format!("rank {r}: {why}"))
            } else {
                Error::PeerLost {
                    peer: r,
                    detail: format!("it failed: {why}"),
                }
            },
        )
    };
    // A child's own reason; one that only says another rank left, apart.
    let own = reaped.iter().filter(|k| !cascade(k)).find_map(reason_of);
    let lost = reaped.iter().filter(|k| cascade(k)).find_map(reason_of);
    let first_failure = reaped.iter().find_map(|k| match k.status {
        Some(s) if s.success() => None,
        Some(s) => Some(Error::PeerLost {
            peer: k.rank,
            detail: format!("its process ended with {s}"),
        }),
        None => Some(Error::Timeout {
            rank: 0,
            what: format!("rank {} to exit", k.rank),
            timeout: grace,
        }),
    });
    match (result, own, lost, first_failure) {
        (Err(e), Some(c), _, _) if lost_peer(&e) => Err(c),
        // Rank 0 timed out on a silent rank (stopped, hung): its error names it, and the
        // children only lost rank 0 or each other after.
        (Err(e), None, Some(c), _) if matches!(e.root(), Error::PeerLost { .. }) => Err(c),
        (Err(e), _, _, _) => Err(e),
        (Ok(()), Some(c), _, _) | (Ok(()), None, Some(c), _) => Err(c),
        (Ok(()), None, None, Some(e)) => Err(e),
        (Ok(()), None, None, None) => Ok(()),
    }
}

/// Whether rank 0's error only says that a peer went away or went silent.
fn lost_peer(e: &Error) -> bool {
    matches!(e.root(), Error::PeerLost { .. } | Error::Timeout { .. })
}

impl Drop for Children {
    fn drop(&mut self) {
        for k in &mut self.kids {
            let _ = k.child.kill();
            let _ = k.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn kid(rank: u32, code: Option<i32>, reason: Option<&str>) -> Reaped {
        Reaped {
            rank,
            status: code.map(|c| std::process::ExitStatus::from_raw(c << 8)),
            reason: reason.map(str::to_string),
        }
    }

    const GRACE: Duration = Duration::from_secs(2);

    fn lost(peer: u32) -> Error {
        Error::PeerLost {
            peer,
            detail: "connection closed".into(),
        }
        .in_phase("pingpong 8 B, trial 3")
    }

    #[test]
    fn a_child_refusing_the_configuration_is_the_cause_with_exit_2() {
        let r = verdict(
            Err(lost(1)),
            GRACE,
            &[kid(1, Some(2), Some("rank 1: bad configuration: no CPU 7"))],
        );
        let e = r.unwrap_err();
        assert!(e.is_configuration(), "{e}");
        assert_eq!(e.to_string(), "bad configuration: rank 1: no CPU 7");
    }

    #[test]
    fn rank_0s_own_configuration_error_wins_over_children_that_lost_it() {
        let own = Error::Config("cannot pin to CPU 7".into());
        let e = verdict(
            Err(own),
            GRACE,
            &[kid(1, Some(1), Some("rank 1: rank 0 is gone (closed)"))],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "bad configuration: cannot pin to CPU 7");
    }

    #[test]
    fn a_child_that_failed_while_running_names_its_reason() {
        let e = verdict(
            Err(lost(2)),
            GRACE,
            &[
                kid(1, Some(0), None),
                kid(2, Some(1), Some("rank 2: message truncated")),
            ],
        )
        .unwrap_err();
        assert!(!e.is_configuration());
        assert_eq!(
            e.to_string(),
            "rank 2 is gone (it failed: message truncated)"
        );
    }

    #[test]
    fn a_stop_stays_a_stop() {
        let stop = Error::Interrupted {
            signal: 15,
            done: 3,
            sizes: 9,
        };
        let e = verdict(Err(stop), GRACE, &[kid(1, Some(143), None)]).unwrap_err();
        assert_eq!(e.interrupted(), Some(15));
    }

    #[test]
    fn children_that_fail_silently_or_hang_fail_the_run() {
        assert!(verdict(Ok(()), GRACE, &[kid(1, Some(0), None)]).is_ok());
        let e = verdict(
            Ok(()),
            GRACE,
            &[kid(1, Some(0), None), kid(2, Some(9), None)],
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("rank 2 is gone"), "{e}");
        let e = verdict(Ok(()), GRACE, &[kid(1, None, None)]).unwrap_err();
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
    }
}
