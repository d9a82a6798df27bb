//! The TCP backend across separate processes: this test binary re-executes itself once per
//! child rank (with `COMMBENCH_RANK`, `COMMBENCH_SIZE`, `COMMBENCH_RENDEZVOUS`,
//! `COMMBENCH_TOKEN` and [`CHILD`] set, filtered to [`rank_process_entry`]); the test itself
//! is rank 0, holding the rendezvous as the local launcher does.

use commbench_core::launch::rendezvous::Bootstrap;
use commbench_core::launch::{self, Launcher, RankEnv};
use commbench_core::testkit::{run_check, Harness, CHECKS};
use commbench_core::{Endpoint, Error, Program, Result, Src, TagSel};
use commbench_tcp::{run_rank, run_rank_with_listener, TcpConfig};
use std::cell::RefCell;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Names what a child rank runs: a conformance check, or `pingpong`.
const CHILD: &str = "COMMBENCH_TCP_TEST_CHILD";

fn cfg(secs: u64) -> TcpConfig {
    TcpConfig {
        poll: false,
        timeout: Duration::from_secs(secs),
        bind_host: None,
        cpus: Vec::new(),
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
    let env = RankEnv::detect(None, None, 1).expect("child rank environment");
    let res = match what.as_str() {
        "pingpong" => run_rank(&env, &cfg(3), &PingPong { rounds: 0 }).map(drop),
        check => run_check(&ChildHarness(env.clone()), check, env.size, 1 << 20),
    };
    if let Err(e) = res {
        eprintln!("child rank {}: {e}", env.rank);
        std::process::exit(3);
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
    let l = launch(2, "pingpong", "genuine-token");
    let addr = l.env.rendezvous.clone().unwrap();
    let rogue = std::thread::spawn(move || {
        Bootstrap::connect(&addr, 1, 2, "forged-token", Duration::from_secs(5))
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
