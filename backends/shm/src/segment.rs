//! The shared segment: its layout, creation, validation and mapping.
//!
//! ```text
//! [ Header (128 B) | RankSlot x n (128 B each) | HandoffLine (128 B) | pad to 4 KiB ]
//! [ Ring (src 0 -> dst 1) | Ring (0 -> 2) | ... ]      n * (n - 1) rings
//! Ring = [ RingCtrl (256 B: head line, tail line) | data (ring_bytes) ]
//! ```
//!
//! The segment is a memfd: it has no name in `/dev/shm` or anywhere else, so a rank that
//! crashes or is killed with SIGKILL at any moment leaves nothing behind; the memory goes away
//! with the last mapping.

use crate::handoff::HandoffLine;
use crate::WaitPolicy;
use commbench_core::method::limits;
use commbench_core::{Error, Result};
use std::fs::File;
use std::num::NonZeroUsize;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// "CBSHMSEG" in little-endian: the first word of every segment.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"CBSHMSEG");
/// Layout version; a segment of another version is refused (2: the hand-off line after the
/// rank slots).
pub(crate) const VERSION: u32 = 2;
/// Most ranks one segment serves (n * (n - 1) rings grow fast).
pub(crate) const MAX_RANKS: u32 = 256;
/// Bytes of a ring's control block (producer line + consumer line).
pub(crate) const CTRL_BYTES: usize = 256;
/// Smallest ring data area.
pub(crate) const MIN_RING: usize = 4096;
/// Largest ring data area.
pub(crate) const MAX_RING: usize = 1 << 30;

/// A rank slot's `state`: nobody has attached yet.
pub(crate) const ST_EMPTY: u32 = 0;
/// The rank has mapped the segment and runs.
pub(crate) const ST_MAPPED: u32 = 1;
/// The rank's program returned successfully; it sends nothing more.
pub(crate) const ST_FINISHED: u32 = 2;
/// The rank failed (error or panic) and left the run.
pub(crate) const ST_FAILED: u32 = 3;

/// The segment header, written once by the creator before any other rank maps it.
#[repr(C)]
pub(crate) struct Header {
    pub magic: u64,
    pub version: u32,
    pub nranks: u32,
    pub ring_bytes: u64,
    pub total_bytes: u64,
    pub token: u64,
    pub wait: u32,
    pub creator_pid: u32,
    _pad: [u8; 80],
}

/// Per-rank shared state. `state`/`pid` are written once or twice and read by the liveness
/// checks; `doorbell`/`waiting` (the futex wait policy) live on their own cache line.
#[repr(C, align(128))]
pub(crate) struct RankSlot {
    pub state: AtomicU32,
    pub pid: AtomicU32,
    _a: [u8; 56],
    pub doorbell: AtomicU32,
    pub waiting: AtomicU32,
    _b: [u8; 56],
}

/// A ring's indices, each on its own 128-byte block (adjacent-line prefetch included).
#[repr(C, align(128))]
pub(crate) struct RingCtrl {
    /// Bytes published by the producer (absolute stream position).
    pub head: AtomicU64,
    _a: [u8; 120],
    /// Bytes released by the consumer (absolute stream position).
    pub tail: AtomicU64,
    _b: [u8; 120],
}

const _: () = assert!(std::mem::size_of::<Header>() == 128);
const _: () = assert!(std::mem::size_of::<RankSlot>() == 128);
const _: () = assert!(std::mem::size_of::<RingCtrl>() == CTRL_BYTES);

/// Where everything lives in a segment of `n` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub n: u32,
    pub ring_bytes: usize,
    pub header_bytes: usize,
    pub stride: usize,
    pub total: usize,
}

impl Layout {
    /// The layout for `n` ranks and rings of `ring_bytes`, checked.
    pub fn new(n: u32, ring_bytes: usize) -> Result<Self> {
        if n == 0 || n > MAX_RANKS {
            return Err(Error::Config(format!(
                "shm: {n} ranks (1..={MAX_RANKS} are supported)"
            )));
        }
        check_ring_bytes(ring_bytes)?;
        let nu = n as usize;
        let header_bytes = (128 + nu * 128 + 128).div_ceil(4096) * 4096;
        let stride = CTRL_BYTES + ring_bytes;
        let total = nu
            .checked_mul(nu - 1)
            .and_then(|r| r.checked_mul(stride))
            .and_then(|r| r.checked_add(header_bytes))
            .ok_or_else(|| Error::Config("shm: segment size overflows".into()))?;
        Ok(Layout {
            n,
            ring_bytes,
            header_bytes,
            stride,
            total,
        })
    }

    /// Byte offset of the ring carrying messages from `src` to `dst` (`src != dst`).
    pub fn ring_offset(&self, src: u32, dst: u32) -> usize {
        let n1 = self.n as usize - 1;
        let d = if dst < src { dst } else { dst - 1 } as usize;
        self.header_bytes + (src as usize * n1 + d) * self.stride
    }
}

/// Checks a ring size: a power of two in `MIN_RING..=MAX_RING`.
pub(crate) fn check_ring_bytes(ring_bytes: usize) -> Result<()> {
    if !ring_bytes.is_power_of_two() || !(MIN_RING..=MAX_RING).contains(&ring_bytes) {
        return Err(Error::Config(format!(
            "shm: ring size {ring_bytes} bytes must be a power of two between {MIN_RING} and {MAX_RING}"
        )));
    }
    Ok(())
}

/// A shared mapping of a whole segment, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every concurrent access to it goes through
// atomics (indices, stamps, slots) or through ring areas the ring protocol hands to exactly one
// side at a time, so sharing the pointer between threads is sound.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: the struct itself is immutable after creation.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map all of `file` (which must be `len` bytes) shared, read-write.
    pub fn map(file: &File, len: usize) -> Result<Self> {
        let nz = NonZeroUsize::new(len)
            .ok_or_else(|| Error::Protocol("shm: the segment is empty".into()))?;
        use nix::sys::mman::{mmap, MapFlags, ProtFlags};
        // SAFETY: a fresh shared mapping of a file we hold open; no existing memory is
        // replaced (addr is None) and the length is what fstat reported.
        let p = unsafe {
            mmap(
                None,
                nz,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                file,
                0,
            )
        }
        .map_err(|e| {
            Error::io(
                format!(
                    "shm: cannot map the {} shared-memory segment{}",
                    limits::human_bytes(len as u64),
                    if e == nix::errno::Errno::ENOMEM {
                        " (the address-space limit, ulimit -v, may be too low)"
                    } else {
                        ""
                    }
                ),
                e.into(),
            )
        })?;
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// Base address.
    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The header. Only valid once the length has been checked (>= 128 bytes).
    pub fn header(&self) -> &Header {
        // SAFETY: callers check len >= size_of::<Header>() first (validate/create); the
        // mapping is page-aligned and lives as long as &self.
        unsafe { &*(self.ptr.as_ptr() as *const Header) }
    }

    /// The slot of rank `r` (< layout.n, checked by callers).
    pub fn slot(&self, r: u32) -> &RankSlot {
        debug_assert!(128 + (r as usize + 1) * 128 <= self.len);
        // SAFETY: the layout puts n slots of 128 bytes after the 128-byte header, inside the
        // validated mapping; RankSlot is all atomics and padding, valid for any bit pattern.
        unsafe { &*(self.ptr.as_ptr().add(128 + r as usize * 128) as *const RankSlot) }
    }

    /// The cache line ranks 0 and 1 bounce at set-up, after the `n` rank slots.
    pub fn handoff(&self, n: u32) -> &HandoffLine {
        debug_assert!(128 + (n as usize + 1) * 128 <= self.len);
        // SAFETY: the layout puts the 128-byte hand-off line after the header and the n
        // slots, inside the header area of the validated mapping (128-byte aligned, since the
        // mapping is page-aligned); HandoffLine is an atomic and padding, valid for any bit
        // pattern.
        unsafe { &*(self.ptr.as_ptr().add(128 + n as usize * 128) as *const HandoffLine) }
    }
}

impl Mapping {
    /// Mark `rank` failed unless it already finished or failed, so its peers stop waiting.
    pub fn mark_failed(&self, rank: u32) {
        let s = self.slot(rank);
        for from in [ST_EMPTY, ST_MAPPED] {
            if s.state
                .compare_exchange(
                    from,
                    ST_FAILED,
                    std::sync::atomic::Ordering::AcqRel,
                    std::sync::atomic::Ordering::Acquire,
                )
                .is_ok()
            {
                break;
            }
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows the mapping any
        // longer (endpoints hold an Arc to it).
        let _ = unsafe { nix::sys::mman::munmap(self.ptr.cast(), self.len) };
    }
}

/// A random, nonzero 64-bit token identifying one segment.
fn new_token() -> Result<u64> {
    use std::io::Read;
    let mut b = [0u8; 8];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| Error::io("shm: reading /dev/urandom", e))?;
    Ok(u64::from_le_bytes(b) | 1)
}

/// Create a zeroed segment for `n` ranks as a memfd (close-on-exec unless `inherit`) and write
/// its header. Returns the file, its token and its layout.
pub(crate) fn create(
    n: u32,
    ring_bytes: usize,
    wait: WaitPolicy,
    inherit: bool,
) -> Result<(File, u64, Layout)> {
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    let layout = Layout::new(n, ring_bytes)?;
    let flags = if inherit {
        MemFdCreateFlag::empty()
    } else {
        MemFdCreateFlag::MFD_CLOEXEC
    };
    let fd = memfd_create(c"commbench-shm", flags)
        .map_err(|e| Error::io("shm: memfd_create", e.into()))?;
    let file = File::from(fd);
    file.set_len(layout.total as u64).map_err(|e| {
        Error::io(
            format!(
                "shm: cannot size the segment for {n} ranks to {} ({} bytes)",
                limits::human_bytes(layout.total as u64),
                layout.total
            ),
            e,
        )
    })?;
    let token = new_token()?;
    let map = Mapping::map(&file, layout.total)?;
    let h = Header {
        magic: MAGIC,
        version: VERSION,
        nranks: n,
        ring_bytes: ring_bytes as u64,
        total_bytes: layout.total as u64,
        token,
        wait: wait.code(),
        creator_pid: std::process::id(),
        _pad: [0; 80],
    };
    // SAFETY: the mapping is at least header_bytes long and page-aligned; nobody else has
    // the segment yet, so this plain write races with nothing.
    unsafe { std::ptr::write(map.base() as *mut Header, h) };
    Ok((file, token, layout))
}

/// Check that `map` is a commbench segment for `n` ranks (and `token`, when known) and return
/// its layout. Every mismatch is a clear error naming what differs.
pub(crate) fn validate(map: &Mapping, n: u32, token: Option<u64>) -> Result<Layout> {
    if map.len() < 4096 {
        return Err(Error::Protocol(format!(
            "shm: the segment is {} bytes, too small to be a commbench shared-memory segment",
            map.len()
        )));
    }
    let h = map.header();
    if h.magic != MAGIC {
        return Err(Error::Protocol(format!(
            "shm: not a commbench shared-memory segment (magic {:#018x}, expected {MAGIC:#018x})",
            h.magic
        )));
    }
    if h.version != VERSION {
        return Err(Error::Protocol(format!(
            "shm: segment layout version {} (this build speaks {VERSION})",
            h.version
        )));
    }
    if h.nranks != n {
        return Err(Error::Config(format!(
            "shm: the segment was made for {} ranks but this run has {n}",
            h.nranks
        )));
    }
    if let Some(t) = token {
        if h.token != t {
            return Err(Error::Protocol(
                "shm: the segment's token differs from the run's: it belongs to another run".into(),
            ));
        }
    }
    let ring = usize::try_from(h.ring_bytes)
        .map_err(|_| Error::Protocol(format!("shm: ring size {} in header", h.ring_bytes)))?;
    let layout = Layout::new(n, ring).map_err(|e| Error::Protocol(format!("bad header: {e}")))?;
    if h.total_bytes != layout.total as u64 || map.len() != layout.total {
        return Err(Error::Protocol(format!(
            "shm: segment is {} bytes, header says {}, layout needs {}",
            map.len(),
            h.total_bytes,
            layout.total
        )));
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_rings_are_disjoint_and_aligned() {
        let l = Layout::new(4, 4096).unwrap();
        let mut offs = Vec::new();
        for s in 0..4 {
            for d in (0..4).filter(|&d| d != s) {
                offs.push(l.ring_offset(s, d));
            }
        }
        offs.sort_unstable();
        offs.dedup();
        assert_eq!(offs.len(), 12);
        assert!(offs.iter().all(|o| o % 128 == 0));
        assert_eq!(*offs.last().unwrap() + l.stride, l.total);
        assert!(Layout::new(0, 4096).is_err());
        assert!(Layout::new(2, 5000).is_err());
    }

    #[test]
    fn created_segment_validates_and_mismatches_are_errors() {
        let (f, tok, l) = create(3, 4096, WaitPolicy::Spin, false).unwrap();
        let m = Mapping::map(&f, l.total).unwrap();
        assert_eq!(validate(&m, 3, Some(tok)).unwrap(), l);
        assert!(matches!(validate(&m, 2, Some(tok)), Err(Error::Config(_))));
        assert!(matches!(
            validate(&m, 3, Some(tok ^ 2)),
            Err(Error::Protocol(_))
        ));
        // Garbage magic.
        // SAFETY: test-only write to the first word of our own fresh mapping.
        unsafe { std::ptr::write(m.base() as *mut u64, 0xdead_beef) };
        let e = validate(&m, 3, None).unwrap_err().to_string();
        assert!(e.contains("not a commbench shared-memory segment"), "{e}");
    }
}
