//! Message buffers the simulator never fills: every simulated rank allocates buffers of the
//! message size (a thousand ranks measuring 1 MiB cells hold 2 GiB of them), while the
//! simulator copies only the first `carry_bytes` of each message. Zeroed buffers of 128 KiB
//! and more are therefore asked of the allocator as fresh pages of their own, which the
//! kernel backs only where they are touched; left to itself, glibc raises that bound after
//! the first such buffer is freed, and later buffers come from reused memory that must be
//! cleared byte by byte, all of it resident.
#![allow(unsafe_code)]

/// Allocations from this size up get pages of their own (glibc's default starting bound).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const FRESH_PAGES_FROM: libc::c_int = 128 * 1024;

/// Fix the allocator's bound for fresh pages (once per process; glibc only).
pub(crate) fn fresh_pages_for_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: mallopt only sets a parameter of glibc's allocator; it reads and writes
            // no memory of ours, and every allocation made before or after stays valid.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, FRESH_PAGES_FROM);
            }
        });
    }
}
