//! The TCP backend across separate processes: this test binary re-executes itself once per
//! child rank (with `COMMBENCH_RANK`, `COMMBENCH_SIZE`, `COMMBENCH_RENDEZVOUS`,
//! `COMMBENCH_TOKEN` and [`CHILD`] set, filtered to [`rank_process_entry`]); the test itself
//! is rank 0, holding the rendezvous as the local launcher does. The rendezvous tests turn
//! this round: a child holds the rendezvous (so that its threads and its log can be looked
//! at from outside) and the test joins it as rank 1.

use commbench_core::launch::rendezvous::{self, Bootstrap};
use commbench_core::launch::{self, Launcher, RankEnv};
use commbench_core::testkit::{run_check, Harness, PeerDies, CHECKS};
use commbench_core::{Endpoint, Error, Program, Result, Src, TagSel};
use commbench_tcp::{run_rank, run_rank_with_listener, TcpConfig};
use std::cell::RefCell;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Names what a child rank runs: a conformance check, `pingpong`, or `hold` (rank 0 holding
/// the rendezvous, see [`hold`]).
const CHILD: &str = "COMMBENCH_TCP_TEST_CHILD";
/// The handshake limit, in milliseconds, of a `hold` child.
const LIMIT_MS: &str = "COMMBENCH_TCP_TEST_LIMIT_MS";
/// What a `hold` child prints before the address it listens on.
const LISTENING: &str = "rendezvous listening at ";
/// Rounds a `hold` child plays with the rank that joins it.
const HOLD_ROUNDS: u64 = 50;

fn cfg(secs: u64) -> TcpConfig {
    TcpConfig {
        poll: false,
        timeout: Duration::from_secs(secs),
        ..TcpConfig::default()
    }
}

/// Ping-pongs with rank 0 until rank 0 sends tag 2.
struct PingPong {
    rounds: u64,
}

impl Program for PingPong {
    type Output = u64;
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<u64> {
        let mut buf = vec![0u8; 8];
        let mut n = 0;
        if ep.rank() == 0 {
            for i in 0..self.rounds {
                buf = ep.send(1, 1, buf)?;
                buf = ep.recv(Src::Rank(1), TagSel::Tag(1), buf)?.buf;
                n = i + 1;
            }
            ep.send(1, 2, buf)?;
        } else {
            loop {
                let c = ep.recv(Src::Rank(0), TagSel::Any, buf)?;
                if c.tag == 2 {
                    break;
                }
                buf = ep.send(0, 1, c.buf)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Child side: runs its program as one rank of the harness's run.
struct ChildHarness(RankEnv);

impl Harness for ChildHarness {
    fn run<P: Program>(&self, _n: u32, p: &P) -> Result<Vec<P::Output>> {
        run_rank(&self.0, &cfg(20), p).map(|o| vec![o])
    }
}

/// Entry point of the child ranks this binary starts; in the parent (without [`CHILD`]) there
/// is nothing to do. A failing child exits non-zero and fails the parent's test.
#[test]
fn rank_process_entry() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    if what == "hold" {
        if let Err(e) = hold_rendezvous() {
            eprintln!("rendezvous holder: {e}");
            std::process::exit(3);
        }
        return;
    }
    let env = RankEnv::detect(None, None, 1).expect("child rank environment");
    let res = match what.as_str() {
        "pingpong" => run_rank(&env, &cfg(3), &PingPong { rounds: 0 }).map(drop),
        "survive" => run_rank(&env, &cfg(3), &PeerDies).map(drop),
        check => run_check(&ChildHarness(env.clone()), check, env.size, 1 << 20),
    };
    if let Err(e) = res {
        eprintln!("child rank {}: {e}", env.rank);
        std::process::exit(3);
    }
}

/// Child side of [`hold`]: rank 0 of a run of 2, listening on a free loopback port with the
/// handshake limit of [`LIMIT_MS`], playing [`HOLD_ROUNDS`] rounds of ping-pong with rank 1.
fn hold_rendezvous() -> Result<()> {
    let ms = std::env::var(LIMIT_MS)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let listener =
        Bootstrap::listen("127.0.0.1:0")?.with_handshake_limit(Duration::from_millis(ms));
    let addr = listener.local_addr().to_string();
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{LISTENING}{addr}");
    let _ = out.flush();
    let env = RankEnv {
        rank: 0,
        size: 2,
        rendezvous: Some(addr),
        token: std::env::var(launch::ENV_TOKEN).ok(),
        job: None,
        launcher: Launcher::Local,
    };
    let rounds = HOLD_ROUNDS;
    let n = run_rank_with_listener(listener, &env, &cfg(20), &PingPong { rounds })?;
    if n != rounds {
        return Err(Error::Protocol(format!("{n} rounds of {rounds}")));
    }
    Ok(())
}

/// A child process holding a rendezvous ([`hold_rendezvous`]), its address, and its standard
/// error as collected so far.
struct Holder {
    child: Child,
    addr: String,
    stderr: std::thread::JoinHandle<String>,
}

/// Start a child holding a rendezvous for `token` with a handshake limit of `limit_ms`.
fn hold(token: &str, limit_ms: u64) -> Holder {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "rank_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "hold")
        .env(LIMIT_MS, limit_ms.to_string())
        .env(launch::ENV_TOKEN, token)
        .env_remove(launch::ENV_RANK)
        .env_remove(launch::ENV_SIZE)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both pipes are drained to their end, so that the child never blocks on a full one.
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
            // libtest may have begun the line with the test's name.
            if let Some((_, a)) = line.split_once(LISTENING) {
                let _ = tx.send(a.trim().to_string());
            }
        }
    });
    let mut err = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the holder prints its address");
    Holder {
        child,
        addr,
        stderr,
    }
}

impl Holder {
    /// Join as rank 1 with `token` and ping-pong until rank 0 is done.
    fn join(&self, token: &str) -> std::thread::JoinHandle<Result<u64>> {
        let env = RankEnv {
            rank: 1,
            size: 2,
            rendezvous: Some(self.addr.clone()),
            token: Some(token.to_string()),
            job: None,
            launcher: Launcher::Manual,
        };
        std::thread::spawn(move || run_rank(&env, &cfg(20), &PingPong { rounds: 0 }))
    }

    /// Wait for the child; its exit status and standard error.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let st = self.child.wait().unwrap();
        (st, self.stderr.join().unwrap())
    }
}

/// Threads of process `pid`, from /proc.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Whether the other end closed `s` (end of file or a reset) rather than staying silent.
fn closed_by_peer(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => rest.is_empty(),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn a_thousand_idle_connections_take_no_threads_and_the_ranks_get_through() {
    let token = launch::new_token().unwrap();
    let h = hold(&token, 10_000);
    let pid = h.child.id();
    let before = threads(pid);
    let mut most = before;
    let mut idle = Vec::with_capacity(1000);
    for i in 0..1000 {
        idle.push(TcpStream::connect(&h.addr).unwrap());
        if i % 50 == 49 {
            most = most.max(threads(pid));
        }
    }
    // The genuine rank arrives while every idle connection is still open on this side.
    let rank1 = h.join(&token);
    while !rank1.is_finished() {
        most = most.max(threads(pid));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rank1.join().unwrap().unwrap(), HOLD_ROUNDS);
    drop(idle);
    let (st, err) = h.finish();
    assert!(st.success(), "rank 0 failed: {st}\n{err}");
    // One thread accepts, whatever connects (one per connection made 1000 and more).
    assert!(
        before > 0 && most <= before + 2,
        "rank 0 went from {before} to {most} threads"
    );
    assert!(
        err.contains("dropped connection from 127.0.0.1:")
            && err.contains("handshakes pending, the oldest makes room")
            && err.contains("more refused or dropped connections not shown"),
        "{err}"
    );
    assert!(err.lines().count() < 40, "the log is bounded: {err}");
}

#[test]
fn silent_and_slow_connections_are_dropped_with_a_line_naming_them() {
    let token = launch::new_token().unwrap();
    let h = hold(&token, 300);
    let mut silent = TcpStream::connect(&h.addr).unwrap();
    let mut slow = TcpStream::connect(&h.addr).unwrap();
    // The start of a hello (magic and this version), and no more.
    let mut start = rendezvous::MAGIC.to_vec();
    start.extend_from_slice(&rendezvous::PROTOCOL_VERSION.to_le_bytes());
    slow.write_all(&start).unwrap();
    assert!(closed_by_peer(&mut silent));
    assert!(closed_by_peer(&mut slow));
    let rank1 = h.join(&token);
    assert_eq!(rank1.join().unwrap().unwrap(), HOLD_ROUNDS);
    let (st, err) = h.finish();
    assert!(st.success(), "rank 0 failed: {st}\n{err}");
    for s in [&silent, &slow] {
        let line = format!(
            "dropped connection from {}: no complete handshake within 0.3 s",
            s.local_addr().unwrap()
        );
        assert!(err.contains(&line), "no `{line}` in: {err}");
    }
}

#[test]
fn an_intruder_is_refused_and_told_so() {
    let token = launch::new_token().unwrap();
    let h = hold(&token, 10_000);
    let env = RankEnv {
        rank: 1,
        size: 2,
        rendezvous: Some(h.addr.clone()),
        token: Some("a-guess-at-the-token-0123456789ab".into()),
        job: None,
        launcher: Launcher::Manual,
    };
    let e = run_rank(&env, &cfg(5), &PingPong { rounds: 0 }).unwrap_err();
    assert!(
        e.to_string()
            .contains("did not prove it knows the run's token"),
        "{e}"
    );
    let rank1 = h.join(&token);
    assert_eq!(rank1.join().unwrap().unwrap(), HOLD_ROUNDS);
    let (st, err) = h.finish();
    assert!(st.success(), "rank 0 failed: {st}\n{err}");
    assert!(
        err.contains("(claiming rank 1): it closed without proving it knows the run's token"),
        "{err}"
    );
}

#[test]
fn a_short_token_is_refused_before_connecting() {
    let env = RankEnv {
        rank: 1,
        size: 2,
        rendezvous: Some("127.0.0.1:9".into()),
        token: Some("right-token".into()),
        job: None,
        launcher: Launcher::Manual,
    };
    match run_rank(&env, &cfg(30), &PingPong { rounds: 0 }).unwrap_err() {
        Error::Config(m) => assert!(m.contains("11 bytes") && m.contains("head -c 24"), "{m}"),
        e => panic!("{e}"),
    }
}

struct Launch {
    listener: commbench_core::launch::rendezvous::Listener,
    env: RankEnv,
    children: Vec<Child>,
}

fn launch(n: u32, what: &str, token: &str) -> Launch {
    let listener = Bootstrap::listen("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().to_string();
    let exe = std::env::current_exe().unwrap();
    let children = (1..n)
        .map(|r| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "rank_process_entry",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, what)
                .env(launch::ENV_RANK, r.to_string())
                .env(launch::ENV_SIZE, n.to_string())
                .env(launch::ENV_RENDEZVOUS, &addr)
                .env(launch::ENV_TOKEN, token)
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let env = RankEnv {
        rank: 0,
        size: n,
        rendezvous: Some(addr),
        token: Some(token.to_string()),
        job: None,
        launcher: Launcher::Local,
    };
    Launch {
        listener,
        env,
        children,
    }
}

/// Run one conformance check with rank 0 here and the other ranks as child processes.
fn run_named(check: &str, n: u32) {
    struct Parent<'a>(&'a str, RefCell<Vec<Child>>);
    impl Harness for Parent<'_> {
        fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
            let l = launch(n, self.0, &launch::new_token()?);
            self.1.borrow_mut().extend(l.children);
            run_rank_with_listener(l.listener, &l.env, &cfg(20), p).map(|o| vec![o])
        }
    }
    let h = Parent(check, RefCell::new(Vec::new()));
    let res = run_check(&h, check, n, 1 << 20);
    for mut c in h.1.take() {
        let st = c.wait().unwrap();
        assert!(
            st.success(),
            "check `{check}` on {n} ranks: a child rank failed: {st}"
        );
    }
    if let Err(e) = res {
        panic!("check `{check}` on {n} ranks: {e}");
    }
}

#[test]
fn conformance_across_processes() {
    // `many_in_flight` is run by tests/conformance.rs in a corrected form (see there).
    for n in [2, 4] {
        for check in CHECKS.iter().filter(|&&c| c != "many_in_flight") {
            run_named(check, n);
        }
    }
}

#[test]
fn wrong_token_is_refused_while_the_run_completes() {
    let l = launch(2, "pingpong", "genuine-token-0123456789");
    let addr = l.env.rendezvous.clone().unwrap();
    let rogue = std::thread::spawn(move || {
        Bootstrap::connect(
            &addr,
            1,
            2,
            "forged-token-0123456789",
            Duration::from_secs(5),
        )
    });
    let n =
        run_rank_with_listener(l.listener, &l.env, &cfg(10), &PingPong { rounds: 100 }).unwrap();
    assert_eq!(n, 100);
    assert!(matches!(rogue.join().unwrap(), Err(Error::Protocol(_))));
    for mut c in l.children {
        assert!(c.wait().unwrap().success());
    }
}

fn killed_or_stopped(stop: bool) {
    let l = launch(2, "pingpong", &launch::new_token().unwrap());
    let mut children = l.children;
    let pid = nix::unistd::Pid::from_raw(children[0].id() as i32);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        let sig = if stop {
            nix::sys::signal::Signal::SIGSTOP
        } else {
            nix::sys::signal::Signal::SIGKILL
        };
        nix::sys::signal::kill(pid, sig).unwrap();
        Instant::now()
    });
    let e = run_rank_with_listener(l.listener, &l.env, &cfg(3), &PingPong { rounds: u64::MAX })
        .unwrap_err();
    let noticed = Instant::now();
    let signalled = killer.join().unwrap();
    // Never left stopped or running.
    let _ = children[0].kill();
    let _ = children[0].wait();
    let waited = noticed.duration_since(signalled);
    assert!(waited < Duration::from_secs(5), "noticed after {waited:?}");
    match e.root() {
        Error::PeerLost { peer: 1, .. } if !stop => {}
        Error::Timeout { rank: 0, what, .. } if stop => {
            assert!(what.contains("rank 1"), "{what}")
        }
        e => panic!("unexpected error {e}"),
    }
}

#[test]
fn killed_peer_is_named_within_the_timeout() {
    killed_or_stopped(false);
}

#[test]
fn silent_peer_times_out_naming_it() {
    killed_or_stopped(true);
}

/// A rank whose process exits mid-run fails only what involves it: rank 0 goes on with rank
/// 1 to the end, its receive posted for the dead rank and a send to it fail naming it, and
/// rank 1 finishes cleanly.
#[test]
fn a_dead_peer_fails_only_what_involves_it() {
    let l = launch(3, "survive", &launch::new_token().unwrap());
    let out = run_rank_with_listener(l.listener, &l.env, &cfg(10), &PeerDies);
    let mut children = l.children;
    PeerDies::check(out.expect("rank 0 goes on")).unwrap();
    assert!(children[0].wait().unwrap().success(), "rank 1 finishes");
    assert_eq!(children[1].wait().unwrap().code(), Some(9), "rank 2 exited");
}
