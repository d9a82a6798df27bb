//! Signals during a measuring run: SIGINT and SIGTERM, and the others that end a job from
//! outside ([`STOPPING`]: a closed terminal or dropped ssh session's SIGHUP, SIGQUIT, the
//! warnings batch systems send before a kill, SIGUSR1/2, SIGXCPU and SIGPWR). The first
//! saves what was measured so far at once (a launcher may kill the ranks soon after) and
//! asks the run to stop at its next safe point (between sizes, or rounds of all-pairs: every
//! rank's request is heard there, so a signal to any rank stops the run as one to rank 0
//! does; the measured part is reported and written with status `interrupted`, exit 128 + the
//! signal); a second quits at once, but only once the first one's save is on disk (one
//! thread takes the signals in turn).
//!
//! The signals are blocked in every thread and taken by one thread that waits for them, so
//! no code runs in a signal handler. Children started by the local launcher inherit the mask
//! and do the same.

use commbench::core::method::engine::StopFlag;
use commbench::core::transport::error::signal_name;
use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The stop asked for by a signal; the measurement reads it on rank 0 between sizes.
pub static STOP: StopFlag = StopFlag::new();

/// Child processes to kill when a second signal quits at once.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// What saves the sizes measured so far when the first signal arrives: what it wrote (a
/// line to say), or why it could not.
type Checkpoint = Box<dyn Fn(i32) -> Result<String, String> + Send>;

/// Set on rank 0 while a run with output files goes on: a launcher (mpirun, srun) that
/// forwards a signal kills its ranks soon after (Open MPI: 1 s), perhaps before the run
/// reaches its safe point, so the sizes measured are saved at once.
static CHECKPOINT: Mutex<Option<Checkpoint>> = Mutex::new(None);

/// Whether this process is the one that reports (rank 0 of a local run).
static ANNOUNCE: AtomicBool = AtomicBool::new(false);

/// The signals that stop a run: an interactive stop, a launcher's or batch system's
/// termination and its warnings, a closed terminal, a CPU-time limit, a power failure.
pub const STOPPING: [Signal; 8] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGXCPU,
    Signal::SIGPWR,
];

/// What the run does at its next safe point, said when the first signal arrives.
static SAFE_POINT: Mutex<&str> = Mutex::new("the size being measured");

/// Take the [`STOPPING`] signals from now on. Call before any other thread is started: a
/// thread started earlier would keep the default action and die of the signal. `announce`:
/// say on standard error what the first signal does (rank 0 only, so that one line is
/// printed).
pub fn install(announce: bool) -> Result<(), String> {
    ANNOUNCE.store(announce, Ordering::SeqCst);
    let mut set = SigSet::empty();
    for s in STOPPING {
        set.add(s);
    }
    set.thread_block()
        .map_err(|e| format!("cannot block the signals that stop a run: {e}"))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            match set.wait() {
                Ok(sig) => on_signal(sig),
                Err(_) => return,
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(())
}

/// Where the run stops after a first signal, as the announcement says it ("the round under
/// way"); the size being measured unless set.
pub fn set_safe_point(what: &'static str) {
    if let Ok(mut s) = SAFE_POINT.lock() {
        *s = what;
    }
}

/// Save what was measured when the first signal arrives, with `save(signal)`.
pub fn set_checkpoint(save: Checkpoint) {
    if let Ok(mut c) = CHECKPOINT.lock() {
        *c = Some(save);
    }
}

/// No checkpoint from now on; waits for one being written to finish, so that the final
/// files are never written over by it.
pub fn clear_checkpoint() {
    if let Ok(mut c) = CHECKPOINT.lock() {
        *c = None;
    }
}

/// A child process to kill if the run must quit at once.
pub fn register_child(pid: u32) {
    if let Ok(mut c) = CHILDREN.lock() {
        c.push(pid);
    }
}

/// The exit code of a run stopped by `signal`: 128 + its number, as a shell reports it.
pub fn exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal.clamp(1, 127)).unwrap_or(255)
}

fn on_signal(sig: Signal) {
    let n = sig as i32;
    if STOP.requested().is_none() {
        STOP.request(n);
        let announce = ANNOUNCE.load(Ordering::SeqCst);
        if announce {
            let nl = if std::io::stderr().is_terminal() {
                "\n"
            } else {
                ""
            };
            let at = SAFE_POINT.lock().map_or("the size being measured", |s| *s);
            say!(
                "{nl}commbench: {} received: the run stops after {at}; send it again to quit \
                 at once",
                signal_name(n)
            );
        }
        // Held while saving: the final write waits for it (`clear_checkpoint`), and a
        // second signal is taken only once this returns.
        if let Ok(c) = CHECKPOINT.lock() {
            if let Some(save) = c.as_ref() {
                match save(n) {
                    Ok(saved) if announce => say!("commbench: {saved}"),
                    Ok(_) => {}
                    Err(e) => say!("commbench: saving what was measured so far: {e}"),
                }
            }
        }
        return;
    }
    // The second signal: nothing more is measured or written.
    if let Ok(c) = CHILDREN.lock() {
        for &pid in c.iter() {
            if let Ok(p) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
        }
    }
    if ANNOUNCE.load(Ordering::SeqCst) {
        say!(
            "commbench: {} again: quitting at once, nothing more written",
            signal_name(n)
        );
    }
    std::process::exit(i32::from(exit_code(n)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        assert_eq!(exit_code(2), 130);
        assert_eq!(exit_code(15), 143);
        assert_eq!(exit_code(-1), 129);
    }
}
