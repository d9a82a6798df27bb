//! What the messages are: how a kernel's message buffers are placed, reused, checked and left
//! in the caches ([`BufferOptions`]), as the peers let a user set them: OSU's `-c` (validation)
//! and `-b single|multiple` (buffer reuse), IMB's `-off_cache` and NetPIPE's `--nocache` (cache
//! state), NetPIPE's `--integrity`, `--soffset` and `--roffset` (data checks, offsets).
//!
//! * **Validation** never adds work to the timed loop. Before each trial (outside the clock
//!   reads) every sender fills its outgoing messages with a pattern of the trial and the sender
//!   ([`fill`]) and every receiver scrambles its buffers; after the trial each receiver checks
//!   every byte of what it holds ([`first_mismatch`]). A ping-pong or an exchange returns what
//!   arrived, so a byte corrupted in any message of the trial is still wrong at the check; a
//!   window is checked on its last messages.
//! * **Cold cache**: before each trial, after the buffers were filled, each measuring rank
//!   writes through a pool larger than its last-level cache ([`Evictor`]), so that the trial's
//!   message buffers start out of every cache.
//! * **Single buffers**: a streaming window posts one buffer `window` times
//!   ([`crate::transport::Span::count`]) instead of one buffer per message.
//! * **Alignment and offset**: each message starts at an address `offset` past a multiple of
//!   `align` ([`place`]); the alignment the addresses actually had is recorded
//!   ([`address_alignment`]).

use crate::method::alloc::try_zeroed;
use crate::method::units::human_bytes;
use crate::method::{Invalid, Setting};
use crate::transport::error::Result;
use crate::transport::{Rank, Span};
use serde::{Deserialize, Serialize};

/// Whether each trial starts with its message buffers in the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheState {
    /// The buffers stay where the last trial left them: in the caches, for messages that fit
    /// (the peers' default).
    #[default]
    Warm,
    /// Before every trial each measuring rank writes through a pool larger than its last-level
    /// cache (IMB `-off_cache`, NetPIPE `--nocache`).
    Cold,
}

/// How many buffers a streaming window's messages use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferReuse {
    /// One buffer per outstanding message (OSU `-b multiple`; commbench's default).
    #[default]
    Multiple,
    /// One buffer per side for the whole window (OSU `-b single`, osu_bw's default).
    Single,
}

/// How a kernel's message buffers are placed, reused, checked and left in the caches. The
/// default is what every earlier version measured.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BufferOptions {
    /// Fill every message with a pattern of its trial and sender, and check every byte that
    /// arrived, outside the timed loop.
    pub validate: bool,
    /// The cache state each trial starts in.
    pub cache: CacheState,
    /// Bytes of the pool a cold cache writes through; `None`: twice the last-level cache of
    /// the rank's host ([`Evictor::pool_for_host`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_pool: Option<u64>,
    /// Buffers of a streaming window.
    pub buffers: BufferReuse,
    /// Alignment, bytes, of the address each message starts `offset` bytes past; `None` with
    /// `offset` 0: wherever the allocator puts the buffer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub align: Option<u64>,
    /// Bytes past an `align`-aligned address at which each message starts.
    pub offset: u64,
}

/// Largest alignment [`BufferOptions::align`] may ask for: a 2 MiB huge page (each placed
/// buffer holds up to `align - 1` bytes in front of its message).
pub const MAX_ALIGN: u64 = 2 << 20;

/// Alignment used when only an offset is given: a page.
pub const DEFAULT_ALIGN: u64 = 4096;

/// Smallest cold-cache pool: below it a sweep could leave a buffer in a large cache.
pub const MIN_CACHE_POOL: u64 = 1 << 20;

/// Largest cold-cache pool (16 GiB): a sweep before every trial of that much memory would take
/// seconds.
pub const MAX_CACHE_POOL: u64 = 16 << 30;

impl BufferOptions {
    /// The alignment messages are placed at, when they are placed at all.
    pub fn placement(&self) -> Option<(u64, u64)> {
        match (self.align, self.offset) {
            (None, 0) => None,
            (None, off) => Some((DEFAULT_ALIGN, off)),
            (Some(a), off) => Some((a, off)),
        }
    }

    /// The options' own bounds: an alignment is a power of two up to [`MAX_ALIGN`], an offset
    /// lies within one alignment unit, a cold-cache pool between [`MIN_CACHE_POOL`] and
    /// [`MAX_CACHE_POOL`].
    pub fn check(&self) -> std::result::Result<(), Invalid> {
        if let Some(a) = self.align {
            if !a.is_power_of_two() || a > MAX_ALIGN {
                return Err(Invalid {
                    setting: Setting::Align,
                    reason: format!(
                        "an alignment of {a} bytes: it must be a power of two from 1 to {}",
                        human_bytes(MAX_ALIGN)
                    ),
                    hint: Some("for example 64 (a cache line) or 4096 (a page)".into()),
                });
            }
        }
        if let Some((align, offset)) = self.placement() {
            if offset >= align {
                return Err(Invalid {
                    setting: Setting::Offset,
                    reason: format!(
                        "an offset of {offset} bytes from a {align}-byte alignment: the offset \
                         must be less than the alignment"
                    ),
                    hint: Some(format!(
                        "ask for an offset below {align}, or a larger alignment"
                    )),
                });
            }
        }
        if let Some(p) = self.cache_pool {
            if !(MIN_CACHE_POOL..=MAX_CACHE_POOL).contains(&p) {
                return Err(Invalid {
                    setting: Setting::CachePool,
                    reason: format!(
                        "a cache pool of {}: it must be from {} to {}",
                        human_bytes(p),
                        human_bytes(MIN_CACHE_POOL),
                        human_bytes(MAX_CACHE_POOL)
                    ),
                    hint: Some("give at least twice the last-level cache (lscpu shows it)".into()),
                });
            }
        }
        Ok(())
    }
}

/// A zeroed buffer with a message of `len` bytes placed in it: the whole buffer without a
/// `placement`, else a buffer with room in front so that the message starts `offset` bytes
/// past a multiple of `align` (`(align, offset)`). `what` names the buffer in an
/// out-of-memory error.
pub fn place(
    len: u64,
    placement: Option<(u64, u64)>,
    what: impl FnOnce() -> String,
) -> Result<(Vec<u8>, Span)> {
    let Some((align, offset)) = placement else {
        let buf = try_zeroed(len, what)?;
        let span = Span::whole(buf.len());
        return Ok((buf, span));
    };
    let buf = try_zeroed(len.saturating_add(align - 1), what)?;
    let addr = buf.as_ptr() as u64;
    // The first index whose address is `offset` past a multiple of `align`.
    let start = offset.wrapping_sub(addr) & (align - 1);
    let span = Span {
        start: start as usize,
        len: len as usize,
        count: 1,
    };
    Ok((buf, span))
}

/// The largest power of two (up to 2^30) that divides the address of `buf[span.start]`: the
/// alignment a message actually had.
pub fn address_alignment(buf: &[u8], span: Span) -> u64 {
    let addr = (buf.as_ptr() as u64).wrapping_add(span.start as u64);
    1u64 << addr.trailing_zeros().min(30)
}

/// The pattern of one message: a seed of the trial (or warm-up), the sender and the message's
/// place in its iteration, so that a message left over from another trial, sender or place
/// never passes for this one.
pub fn seed(base: u64, sender: Rank, message: u64) -> u64 {
    mix(base ^ mix(u64::from(sender) << 32 ^ message))
}

/// SplitMix64's finaliser: every input bit reaches every output bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 8 bytes of the pattern of `seed` at word `i`.
#[inline]
fn word(seed: u64, i: u64) -> [u8; 8] {
    mix(seed ^ i.wrapping_mul(0xd6e8_feb8_6659_fd93)).to_le_bytes()
}

/// Fill `buf` with the pattern of `seed`.
pub fn fill(buf: &mut [u8], seed: u64) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = word(seed, i as u64);
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// The first byte of `buf` that differs from the pattern of `seed`: `(offset, expected, got)`.
pub fn first_mismatch(buf: &[u8], seed: u64) -> Option<(u64, u8, u8)> {
    for (i, chunk) in buf.chunks(8).enumerate() {
        let w = word(seed, i as u64);
        if chunk != &w[..chunk.len()] {
            let j = (0..chunk.len()).find(|&j| chunk[j] != w[j]).unwrap_or(0);
            return Some(((i * 8 + j) as u64, w[j], chunk[j]));
        }
    }
    None
}

/// A byte of a message that did not arrive as it was sent, found by a receiver's check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// The rank that found it.
    pub rank: Rank,
    /// The rank whose pattern the bytes should hold.
    pub from: Rank,
    /// The message's place in its iteration (0 for a ping-pong; the window slot).
    pub message: u64,
    /// Offset of the first byte that differs, from the message's first byte.
    pub offset: u64,
    /// What the byte should have been.
    pub expected: u8,
    /// What it was.
    pub got: u8,
    /// The trial after which it was found, counted in its phase.
    pub trial: u64,
    /// The phase: [`PHASE_WARMUP`], [`PHASE_NPP`] or [`PHASE_TRIALS`].
    pub phase: u8,
}

/// [`Mismatch::phase`] of the warm-up iterations.
pub const PHASE_WARMUP: u8 = 0;
/// [`Mismatch::phase`] of the trials that estimate npp (Luecke et al. 2009 §3.3).
pub const PHASE_NPP: u8 = 1;
/// [`Mismatch::phase`] of the timed trials.
pub const PHASE_TRIALS: u8 = 2;

impl Mismatch {
    /// Which message it was, in words: `message 3 of trial 17`, `message 0 of the warm-up`.
    pub fn which(&self) -> String {
        match self.phase {
            PHASE_WARMUP => format!("message {} of the warm-up", self.message),
            PHASE_NPP => format!(
                "message {} of trial {} of the npp estimate",
                self.message, self.trial
            ),
            _ => format!("message {} of trial {}", self.message, self.trial),
        }
    }
}

impl Mismatch {
    /// As 35 bytes for the control plane.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(35);
        b.extend_from_slice(&self.rank.to_le_bytes());
        b.extend_from_slice(&self.from.to_le_bytes());
        b.extend_from_slice(&self.message.to_le_bytes());
        b.extend_from_slice(&self.offset.to_le_bytes());
        b.extend_from_slice(&[self.expected, self.got]);
        b.extend_from_slice(&self.trial.to_le_bytes());
        b.push(self.phase);
        b
    }

    /// The inverse of [`Mismatch::encode`] (`None` for anything else, such as no bytes).
    pub fn decode(b: &[u8]) -> Option<Mismatch> {
        if b.len() != 35 {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Some(Mismatch {
            rank: u32_at(0),
            from: u32_at(4),
            message: u64_at(8),
            offset: u64_at(16),
            expected: b[24],
            got: b[25],
            trial: u64_at(26),
            phase: b[34],
        })
    }
}

/// A pool each measuring rank writes through before a trial so that its message buffers start
/// out of the caches (IMB's `-off_cache`, NetPIPE's `--nocache`): a write to every cache line
/// of a pool at least twice the last-level cache evicts everything the rank held.
#[derive(Debug)]
pub struct Evictor {
    pool: Vec<u8>,
    sweeps: u8,
}

/// Bytes between the writes of a sweep: a cache line on every CPU commbench runs on (64 B; 128
/// on some ARM parts, whose lines a 64-byte stride writes twice).
const LINE: usize = 64;

impl Evictor {
    /// A pool of `bytes` (allocated, and written once so that its pages exist).
    pub fn new(bytes: u64) -> Result<Evictor> {
        let pool = try_zeroed(bytes, || {
            format!(
                "the {} pool a cold cache writes through",
                human_bytes(bytes)
            )
        })?;
        let mut e = Evictor { pool, sweeps: 0 };
        e.sweep();
        Ok(e)
    }

    /// Bytes of the pool.
    pub fn bytes(&self) -> u64 {
        self.pool.len() as u64
    }

    /// Write one byte of every cache line of the pool.
    pub fn sweep(&mut self) {
        self.sweeps = self.sweeps.wrapping_add(1);
        let v = self.sweeps;
        for i in (0..self.pool.len()).step_by(LINE) {
            self.pool[i] = v;
        }
        std::hint::black_box(&mut self.pool);
    }

    /// The pool for this host: twice its last-level cache ([`last_level_cache`]), at least
    /// [`MIN_CACHE_POOL`]; 64 MiB where the host does not say.
    pub fn pool_for_host() -> u64 {
        match last_level_cache() {
            Some((bytes, _)) => bytes
                .saturating_mul(2)
                .clamp(MIN_CACHE_POOL, MAX_CACHE_POOL),
            None => 64 << 20,
        }
    }
}

/// The largest cache of CPU 0 and the level it is at, from
/// `/sys/devices/system/cpu/cpu0/cache/index*/{level,size}`; `None` where the host does not
/// say.
pub fn last_level_cache() -> Option<(u64, u32)> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let mut best: Option<(u64, u32)> = None;
    for entry in dir.flatten() {
        let path = entry.path();
        let read = |f: &str| std::fs::read_to_string(path.join(f)).ok();
        let (Some(level), Some(size)) = (read("level"), read("size")) else {
            continue;
        };
        let (Ok(level), Some(bytes)) = (level.trim().parse::<u32>(), parse_cache_size(&size))
        else {
            continue;
        };
        if best.map_or(true, |(_, l)| level > l) {
            best = Some((bytes, level));
        }
    }
    best
}

/// A sysfs cache size (`32768K`, `8M`, `512`) in bytes.
fn parse_cache_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let n: u64 = num.parse().ok()?;
    let mult = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placed_messages_start_where_asked() {
        for align in [1u64, 8, 64, 4096, 1 << 16] {
            for offset in [0u64, 1, 3, 7, 63, 4095].into_iter().filter(|&o| o < align) {
                for len in [0u64, 1, 100, 5000] {
                    let (buf, span) = place(len, Some((align, offset)), || "test".into()).unwrap();
                    assert_eq!(span.len as u64, len);
                    let r = span.range(buf.len()).unwrap();
                    let addr = buf.as_ptr() as u64 + r.start as u64;
                    assert_eq!(addr % align, offset, "align {align} offset {offset}");
                    if offset == 0 {
                        assert!(address_alignment(&buf, span) >= align);
                    }
                }
            }
        }
        let (buf, span) = place(10, None, || "test".into()).unwrap();
        assert!(span.is_whole(buf.len()));
    }

    #[test]
    fn bad_placements_and_pools_name_their_setting() {
        let bad = |o: BufferOptions| o.check().unwrap_err().setting;
        let align = |a| BufferOptions {
            align: Some(a),
            ..Default::default()
        };
        assert_eq!(bad(align(48)), Setting::Align);
        assert_eq!(bad(align(0)), Setting::Align);
        assert_eq!(bad(align(4 << 20)), Setting::Align);
        let off = BufferOptions {
            offset: 4096,
            ..Default::default()
        };
        assert_eq!(bad(off), Setting::Offset);
        let pool = BufferOptions {
            cache_pool: Some(1000),
            ..Default::default()
        };
        assert_eq!(bad(pool), Setting::CachePool);
        assert!(BufferOptions::default().check().is_ok());
        assert_eq!(
            BufferOptions {
                offset: 3,
                ..Default::default()
            }
            .placement(),
            Some((4096, 3))
        );
    }

    #[test]
    fn a_changed_byte_anywhere_is_found_at_its_offset() {
        let mut s = 0x1234_5678u64;
        for len in [1usize, 7, 8, 9, 4096, 65_537] {
            let seed = seed(len as u64, 3, 1);
            let mut buf = vec![0u8; len];
            fill(&mut buf, seed);
            assert_eq!(first_mismatch(&buf, seed), None);
            s = mix(s);
            let at = (s % len as u64) as usize;
            let was = buf[at];
            buf[at] ^= 1 << (s >> 60 & 7);
            assert_eq!(first_mismatch(&buf, seed), Some((at as u64, was, buf[at])));
        }
        // Another sender, message or trial is another pattern.
        let mut buf = vec![0u8; 64];
        fill(&mut buf, seed(1, 0, 0));
        for other in [seed(2, 0, 0), seed(1, 1, 0), seed(1, 0, 1)] {
            assert!(first_mismatch(&buf, other).is_some());
        }
    }

    #[test]
    fn mismatches_round_trip_through_bytes() {
        let m = Mismatch {
            rank: 3,
            from: 1,
            message: 17,
            offset: 1 << 40,
            expected: 0x5a,
            got: 0xa5,
            trial: 9,
            phase: PHASE_NPP,
        };
        assert_eq!(Mismatch::decode(&m.encode()), Some(m));
        assert_eq!(Mismatch::decode(&[]), None);
    }

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("12Q"), None);
        assert_eq!(parse_cache_size(""), None);
    }

    #[test]
    fn a_sweep_writes_every_line_of_its_pool() {
        let mut e = Evictor::new(MIN_CACHE_POOL).unwrap();
        e.sweep();
        assert_eq!(e.bytes(), MIN_CACHE_POOL);
        assert!(e.pool.iter().step_by(LINE).all(|&b| b == 2));
        assert!(Evictor::pool_for_host() >= MIN_CACHE_POOL);
    }
}
