//! Thin wrappers over the system calls nix lacks (futex, pidfd_open).

use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleep on `word` while it still holds `expected`, at most `timeout` (shared futex: the word
/// lives in a MAP_SHARED mapping seen by other processes). Spurious returns are fine.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind `word` (valid for the call) and the
    // timespec on our stack; the other arguments are ignored for this operation.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wake every sleeper on `word`.
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only uses the address of the aligned u32 as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// A way to tell whether another process is still running.
#[derive(Debug)]
pub(crate) enum Watch {
    /// The same process (threads mode): nothing to check.
    Myself,
    /// A pidfd: readable once the process has terminated (zombies included).
    PidFd(OwnedFd),
    /// pidfd_open is unavailable: `kill(pid, 0)`.
    Pid(i32),
}

impl Watch {
    /// Start watching `pid`.
    pub fn new(pid: u32) -> Self {
        if pid == std::process::id() {
            return Watch::Myself;
        }
        let Ok(p) = i32::try_from(pid) else {
            return Watch::Pid(-1);
        };
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, p, 0u32) };
        if fd >= 0 {
            // SAFETY: the kernel just returned this fd to us; nobody else owns it.
            Watch::PidFd(unsafe { OwnedFd::from_raw_fd(fd as i32) })
        } else {
            Watch::Pid(p)
        }
    }

    /// Whether the process is gone (exited, killed, or a zombie).
    pub fn gone(&self) -> bool {
        match self {
            Watch::Myself => false,
            Watch::PidFd(fd) => {
                use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
                matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
            }
            Watch::Pid(p) => {
                *p <= 0
                    || nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), None)
                        == Err(nix::errno::Errno::ESRCH)
            }
        }
    }
}
