//! The engine's own cost per message: the trial loop of seed 000 §3.2 ([`engine::trials`])
//! running each pattern's kernel over [`NoopEndpoint`], a transport that does nothing (every
//! operation finishes when posted). What it measures is what commbench adds to every message:
//! the loop, the kernel and the buffer moves, with blocking sends and receives on a direct path
//! (as the mpi and shm backends have) and posted ones (exchange, bandwidth) through a slab of
//! requests and the `Endpoint` trait's default `wait`. Target: at most 10 ns per message
//! (docs/overhead.md).
//!
//! One criterion iteration is one message sent or received by the timing rank (a ping-pong
//! iteration holds 2, an exchange 4, a bandwidth window `window` sends and the acknowledgement,
//! a bidirectional window `window` each way), so criterion's `time` reads directly as ns per
//! message.
//!
//! Run: `cargo bench --bench engine`; CI runs it once in test mode (`cargo bench -- --test`).

use commbench::core::method::engine::{self, Kernel, KernelSpec};
use commbench::core::method::{MethodConfig, PatternKind};
use commbench::core::transport::noop::NoopEndpoint;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::{Duration, Instant};

/// Message size of the bench: small, as latency is measured; nothing is copied anyway.
const SIZE: u64 = 8;

/// Messages the source sends and receives in one iteration of `kind`.
fn messages_per_iteration(kind: PatternKind) -> u64 {
    match kind {
        PatternKind::PingPong => 2,
        PatternKind::Exchange => 4,
        PatternKind::Bandwidth { .. } => kind.effective_window(SIZE) + 1,
        PatternKind::BiBandwidth { .. } => 2 * kind.effective_window(SIZE),
    }
}

/// `messages` messages of `kind` timed by the engine on rank 0 (the source) of two ranks over
/// a transport that does nothing; the time scaled to exactly `messages`.
fn time_messages(kind: PatternKind, messages: u64) -> Duration {
    let cfg = MethodConfig::default();
    let mut ep = NoopEndpoint::new(0, 2).expect("rank 0 of 2");
    let mut kernel = kind
        .kernel::<NoopEndpoint>(0, &cfg)
        .expect("the kernel of rank 0");
    Kernel::<NoopEndpoint>::prepare(&mut kernel, SIZE).expect("8-byte buffers");
    let per = messages_per_iteration(kind);
    let npp = messages.div_ceil(per).max(1);
    let mut st = engine::TrialState::new(&ep, &cfg).expect("no pool to allocate");
    let t0 = Instant::now();
    engine::trials(&mut ep, &mut kernel, &cfg, &mut st, npp, 1, 0, |_| {})
        .expect("a transport that does nothing cannot fail");
    let dt = t0.elapsed();
    dt.mul_f64(messages as f64 / (npp * per) as f64)
}

fn per_message(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_per_message");
    g.throughput(Throughput::Elements(1));
    for (name, kind) in [
        ("pingpong", PatternKind::PingPong),
        ("exchange", PatternKind::Exchange),
        ("bandwidth_w64", PatternKind::Bandwidth { window: 64 }),
        ("bibandwidth_w64", PatternKind::BiBandwidth { window: 64 }),
    ] {
        g.bench_function(name, |b| b.iter_custom(|n| time_messages(kind, n)));
    }
    g.finish();
}

criterion_group!(benches, per_message);
criterion_main!(benches);
