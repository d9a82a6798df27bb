//! commbench's own local launcher: rank 0 re-executes this program once per other rank, with
//! the rank, the size and the backend's meeting place in the environment, runs its own part,
//! then reaps the others. Used by the backends whose ranks are processes of this host.

#![cfg_attr(not(any(feature = "tcp", feature = "shm")), allow(dead_code))]

use super::Ran;
use crate::cli::fatal::Fatal;
use commbench::core::launch as cl;
use commbench::core::Error;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A local run: start ranks 1..size as children with `vars`, run rank 0 here with `rank0`,
/// then reap the children.
pub fn run_local(
    timeout: Duration,
    size: u32,
    vars: &[(String, String)],
    rank0: impl FnOnce() -> Result<(), Error>,
) -> Result<Ran, Fatal> {
    let mut children = Children::spawn(size, vars)?;
    let result = children.reap(rank0(), timeout);
    Ok(Ran {
        ranks: size,
        launcher: "local".into(),
        rank: 0,
        result,
    })
}

/// The other ranks of a local run, as child processes of rank 0.
struct Children {
    kids: Vec<(u32, Child)>,
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
                .stderr(Stdio::inherit());
            for (k, v) in vars {
                cmd.env(k, v);
            }
            let child = cmd
                .spawn()
                .map_err(|e| Fatal::run(format!("cannot start rank {r}: {e}"), None))?;
            kids.kids.push((r, child));
        }
        Ok(kids)
    }

    /// Wait for the children after rank 0 finished. On success each must exit 0 within
    /// `timeout`; on failure they get a short grace period and are then killed.
    fn reap(&mut self, result: Result<(), Error>, timeout: Duration) -> Result<(), Error> {
        let grace = if result.is_ok() {
            timeout
        } else {
            Duration::from_secs(2)
        };
        let deadline = Instant::now() + grace;
        let mut first_failure: Option<Error> = None;
        for (r, child) in &mut self.kids {
            let status = loop {
                match child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Ok(None) | Err(_) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                }
            };
            if result.is_ok() && first_failure.is_none() {
                match status {
                    Some(s) if s.success() => {}
                    Some(s) => {
                        first_failure = Some(Error::PeerLost {
                            peer: *r,
                            detail: format!("its process ended with {s}"),
                        })
                    }
                    None => {
                        first_failure = Some(Error::Timeout {
                            rank: 0,
                            what: format!("rank {r} to exit"),
                            timeout: grace,
                        })
                    }
                }
            }
        }
        self.kids.clear();
        match (result, first_failure) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, c) in &mut self.kids {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
