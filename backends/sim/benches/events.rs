//! Simulator speed: kernel events per second of host time, and the 10-dimension (1024-node)
//! neighbour exchange of 200,000 messages. Run with `cargo bench -p commbench-sim`; each
//! benchmark also prints the figure it is about (events/s, wall time per exchange).

use commbench_core::{Endpoint, Program, Result, Src, TagSel};
use commbench_sim::{run_with_stats, SimConfig};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::time::Instant;

/// Every node exchanges `rounds` messages with a neighbour per dimension, round-robin over
/// dimensions: `nodes * rounds` messages in all.
struct Exchange {
    rounds: u32,
    size: usize,
}

impl Program for Exchange {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        let dims = ep.size().trailing_zeros().max(1);
        let mut sbuf = vec![0u8; self.size];
        let mut rbuf = vec![0u8; self.size];
        for i in 0..self.rounds {
            let peer = me ^ (1 << (i % dims));
            let r = ep.irecv(Src::Rank(peer), TagSel::Tag(0), rbuf)?;
            let s = ep.isend(peer, 0, sbuf)?;
            rbuf = ep.wait(r)?.buf;
            sbuf = ep.wait(s)?.buf;
        }
        ep.barrier()
    }
}

/// Two nodes ping-pong: the kernel's per-event cost with little else going on.
struct PingPong {
    iters: u32,
}

impl Program for PingPong {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        let me = ep.rank();
        let mut buf = vec![0u8; 8];
        for _ in 0..self.iters {
            if me == 0 {
                buf = ep.send(1, 0, buf)?;
                buf = ep.recv(Src::Rank(1), TagSel::Tag(0), buf)?.buf;
            } else if me == 1 {
                buf = ep.recv(Src::Rank(0), TagSel::Tag(0), buf)?.buf;
                buf = ep.send(0, 0, buf)?;
            }
        }
        Ok(())
    }
}

fn cfg(dims: u32) -> SimConfig {
    let mut c = SimConfig::preset("ncube7").expect("preset");
    c.dimensions = dims;
    c.stack_kib = 64;
    c
}

fn report(what: &str, c: &SimConfig, p: &impl Program) {
    let t0 = Instant::now();
    let (_, st) = run_with_stats(c, p).expect("simulation");
    let s = t0.elapsed().as_secs_f64();
    println!(
        "{what}: {} events, {} messages in {:.3} s wall = {:.2} M events/s",
        st.events,
        st.messages,
        s,
        st.events as f64 / s / 1e6
    );
}

fn benches(cr: &mut Criterion) {
    let pp = PingPong { iters: 200_000 };
    let c1 = cfg(1);
    report("pingpong 2 nodes", &c1, &pp);
    let events = run_with_stats(&c1, &pp).expect("simulation").1.events;
    let mut g = cr.benchmark_group("sim");
    g.sample_size(10);
    g.throughput(Throughput::Elements(events));
    g.bench_function("pingpong_events", |b| {
        b.iter(|| run_with_stats(&c1, &pp).expect("simulation"))
    });

    // 1024 nodes x 196 rounds = 200,704 messages between neighbours.
    let ex = Exchange {
        rounds: 196,
        size: 64,
    };
    let c10 = cfg(10);
    report("exchange 1024 nodes", &c10, &ex);
    let events = run_with_stats(&c10, &ex).expect("simulation").1.events;
    g.throughput(Throughput::Elements(events));
    g.bench_function("exchange_1024_nodes_200k_messages", |b| {
        b.iter(|| run_with_stats(&c10, &ex).expect("simulation"))
    });
    g.finish();
}

criterion_group!(sim, benches);
criterion_main!(sim);
