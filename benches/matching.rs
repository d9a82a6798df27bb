//! The tag-matching engine's cost per queue entry, the queue benchmarks of Underwood &
//! Brightwell §3 run on the engine alone ([`Matcher`], no transport underneath).
//!
//! * `posted_exact/T`, `posted_any_source/T`: `T` receives that do not match are posted, then
//!   the one that does; one iteration is a message arriving (`match_arrival`) and the receive
//!   it found posted again at the back, so the shape stays. Exact receives are hashed on
//!   (source, tag) and the arrival inspects one entry whatever `T`; wildcard-source receives
//!   defeat the hash (§5.1) and the arrival walks all `T + 1`.
//! * `unexpected_exact/T`, `unexpected_any_source/T`: `T` unexpected messages that do not
//!   match, then the one that does; one iteration is a receive posted (finding and copying it)
//!   and the message pushed unexpected again.
//!
//! The slope of the time over `T` for the wildcard walks is the cost per inspected entry;
//! the exact lines stay flat.
//!
//! Run: `cargo bench --bench matching`; CI runs it once in test mode (`cargo bench -- --test`).

use commbench::core::transport::matching::Matcher;
use commbench::core::transport::{ReqId, Src, TagSel};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

/// Receives (or messages) that do not match, queued ahead of the one that does.
const DEPTHS: [u32; 4] = [0, 16, 256, 1024];

/// Sender of every message.
const SOURCE: u32 = 1;

/// Tag of the message searched for; the others have tags from `OTHER` up.
const TAG: u32 = 7;
const OTHER: u32 = 1000;

/// Payload of every message, bytes: small, as latency is measured.
const SIZE: usize = 8;

/// The receive selector: exact, or any source.
fn source(any: bool) -> Src {
    if any {
        Src::Any
    } else {
        Src::Rank(SOURCE)
    }
}

fn posted(c: &mut Criterion) {
    let mut g = c.benchmark_group("matching_arrival");
    for (name, any) in [("posted_exact", false), ("posted_any_source", true)] {
        for depth in DEPTHS {
            let mut m = Matcher::new();
            for i in 0..depth {
                let r = m.post_recv(ReqId(i.into()), source(any), TagSel::Tag(OTHER + i), vec![]);
                assert!(r.is_none());
            }
            let r = m.post_recv(
                ReqId(u64::MAX),
                source(any),
                TagSel::Tag(TAG),
                vec![0; SIZE],
            );
            assert!(r.is_none());
            g.bench_with_input(BenchmarkId::new(name, depth), &depth, |b, _| {
                b.iter(|| {
                    let p = m.match_arrival(black_box(SOURCE), black_box(TAG));
                    let p = p.expect("the matching receive is posted");
                    black_box(m.post_recv(p.req, p.src, p.tag, p.buf));
                })
            });
        }
    }
    g.finish();
}

fn unexpected(c: &mut Criterion) {
    let mut g = c.benchmark_group("matching_post");
    for (name, any) in [("unexpected_exact", false), ("unexpected_any_source", true)] {
        for depth in DEPTHS {
            let mut m = Matcher::new();
            for i in 0..depth {
                let d = m.unexpected_buffer(SIZE);
                m.push_unexpected(SOURCE, OTHER + i, d);
            }
            let d = m.unexpected_buffer(SIZE);
            m.push_unexpected(SOURCE, TAG, d);
            let mut buf = vec![0u8; SIZE];
            g.bench_with_input(BenchmarkId::new(name, depth), &depth, |b, _| {
                b.iter(|| {
                    let c = m.post_recv(
                        ReqId(0),
                        source(any),
                        black_box(TagSel::Tag(TAG)),
                        std::mem::take(&mut buf),
                    );
                    buf = c.expect("the message waits").expect("it fits").buf;
                    let d = m.unexpected_buffer(SIZE);
                    m.push_unexpected(SOURCE, TAG, d);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, posted, unexpected);
criterion_main!(benches);
