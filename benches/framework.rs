//! Criterion benches of commbench's own costs: reading the clock, the statistics of seed 000
//! §3.4 on 10^6 samples, and one 8-byte round trip per backend (the cost every timed loop pays).
//!
//! Run: `cargo bench --bench framework`; CI runs them once each with `cargo bench -- --test`.

use commbench::core::transport::clock;
use commbench::core::transport::{Endpoint, Program, Src, TagSel};
use commbench::core::{stats, Result};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::time::Duration;

fn clock_read(c: &mut Criterion) {
    c.bench_function("clock/monotonic_ns", |b| {
        b.iter(|| black_box(clock::monotonic_ns()))
    });
}

fn statistics(c: &mut Criterion) {
    // A skewed, latency-like sample: 1 us with a tail.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let samples: Vec<f64> = (0..1_000_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            1.0 + 0.1 * (-u.max(1e-12).ln())
        })
        .collect();
    let trial_ns: Vec<i64> = samples.iter().map(|s| (s * 4000.0) as i64).collect();
    let mut g = c.benchmark_group("stats");
    g.sample_size(10);
    g.bench_function("sort+summarize 1e6", |b| {
        b.iter(|| {
            let mut v = samples.clone();
            stats::sort_samples(&mut v);
            black_box(stats::summarize(&v))
        })
    });
    g.bench_function("analyse 1e6 trials (seed 000 sec. 3.4)", |b| {
        b.iter(|| black_box(commbench::analysis::point::analyse(&trial_ns, 2, 2, 8, 2.0)))
    });
    g.finish();
}

/// `iters` 8-byte ping-pongs between ranks 0 and 1; rank 0 returns the time they took.
struct RoundTrips(u64);

impl Program for RoundTrips {
    type Output = Duration;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<Duration> {
        let mut buf = vec![0u8; 8];
        ep.barrier()?;
        let t0 = std::time::Instant::now();
        for _ in 0..self.0 {
            if ep.rank() == 0 {
                buf = ep.send(1, 1, buf)?;
                buf = ep.recv(Src::Rank(1), TagSel::Tag(1), buf)?.buf;
            } else {
                buf = ep.recv(Src::Rank(0), TagSel::Tag(1), buf)?.buf;
                buf = ep.send(0, 1, buf)?;
            }
        }
        let dt = t0.elapsed();
        ep.barrier()?;
        Ok(dt)
    }
}

fn round_trips(c: &mut Criterion) {
    let mut g = c.benchmark_group("round_trip_8B");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    #[cfg(feature = "tcp")]
    for poll in [false, true] {
        let cfg = commbench_tcp::TcpConfig {
            poll,
            ..Default::default()
        };
        let name = if poll { "tcp/poll" } else { "tcp/blocking" };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                commbench_tcp::run_threads(2, &cfg, &RoundTrips(iters))
                    .map(|v| v[0])
                    .unwrap_or(Duration::MAX)
            })
        });
    }
    #[cfg(feature = "shm")]
    {
        let cfg = commbench_shm::ShmConfig::default();
        g.bench_function("shm/spin", |b| {
            b.iter_custom(|iters| {
                commbench_shm::run_threads(2, &cfg, &RoundTrips(iters))
                    .map(|v| v[0])
                    .unwrap_or(Duration::MAX)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, clock_read, statistics, round_trips);
criterion_main!(benches);
