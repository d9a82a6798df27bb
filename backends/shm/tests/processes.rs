//! The shm backend with ranks as separate processes: this test binary re-executes itself with
//! [`ROLE`] set to play the other ranks (hence `harness = false`: `main` dispatches).
//!
//! * the conformance suite over processes of a local run (2, 3 and 4 ranks);
//! * the external-launcher path (segment passed over an abstract Unix socket);
//! * a peer killed with SIGKILL gives an error naming it, and nothing is left in /dev/shm;
//! * a wrong or missing segment gives a clear error, not a panic or a hang.

use commbench_core::launch::{Launcher, RankEnv, ENV_JOB, ENV_RANK, ENV_SIZE};
use commbench_core::testkit::{run_check, Harness, PeerDies, CHECKS};
use commbench_core::{Endpoint, Error, Program, Result, Src, TagSel};
use commbench_shm::{prepare_local, run_rank, ShmConfig, ENV_SHM_FD, ENV_SHM_PID, ENV_SHM_TOKEN};
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ManyInFlight, BROKEN_IN_CORE};

/// Set in a child: what it must do.
const ROLE: &str = "COMMBENCH_SHM_TEST_ROLE";

fn cfg() -> ShmConfig {
    // spin-yield: up to 4 ranks share a 2-core test machine.
    ShmConfig {
        wait: commbench_shm::WaitPolicy::SpinYield,
        timeout: Duration::from_secs(20),
        ring_bytes: 64 << 10,
        ..ShmConfig::default()
    }
}

// ---------------------------------------------------------------- child side

/// A child's harness: runs its own rank only.
struct ChildRank(RankEnv);

impl Harness for ChildRank {
    fn run<P: Program>(&self, _n: u32, p: &P) -> Result<Vec<P::Output>> {
        run_rank(&self.0, None, &cfg(), p).map(|o| vec![o])
    }
}

/// Waits for a message from `from` that never comes (until killed or the peer is lost).
struct WaitFor(u32);

impl Program for WaitFor {
    type Output = ();
    fn run<E: Endpoint>(&self, ep: &mut E) -> Result<()> {
        ep.barrier()?;
        ep.recv(Src::Rank(self.0), TagSel::Any, vec![0; 8])
            .map(drop)
    }
}

/// Attaches and leaves.
struct Nothing;

impl Program for Nothing {
    type Output = ();
    fn run<E: Endpoint>(&self, _ep: &mut E) -> Result<()> {
        Ok(())
    }
}

fn child(role: &str) -> i32 {
    let env = match RankEnv::detect(None, None, 1) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("child: {e}");
            return 2;
        }
    };
    let res = if let Some(rest) = role.strip_prefix("check:") {
        let (name, max) = rest.split_once(':').unwrap_or((rest, "0"));
        let max = max.parse().unwrap_or(0);
        if name == "many_in_flight_fit" {
            run_rank(&env, None, &cfg(), &ManyInFlight)
        } else {
            run_check(&ChildRank(env.clone()), name, env.size, max)
        }
    } else if role == "peer-dies" {
        run_rank(&env, None, &cfg(), &PeerDies).map(drop)
    } else if let Some(from) = role.strip_prefix("wait:") {
        run_rank(&env, None, &cfg(), &WaitFor(from.parse().unwrap_or(0)))
    } else {
        run_rank(&env, None, &cfg(), &Nothing)
    };
    match res {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("child rank {}: {e}", env.rank);
            1
        }
    }
}

// ---------------------------------------------------------------- parent side

fn spawn(rank: u32, n: u32, role: &str, vars: &[(String, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().expect("test binary path"));
    c.env(ROLE, role)
        .env(ENV_RANK, rank.to_string())
        .env(ENV_SIZE, n.to_string())
        .env_remove(ENV_SHM_FD)
        .env_remove(ENV_SHM_PID)
        .env_remove(ENV_SHM_TOKEN)
        .envs(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().expect("spawning a child rank")
}

/// Wait for a child at most `limit`; its exit success and stderr. Killed if over the limit.
fn finish(mut c: Child, limit: Duration) -> (bool, String) {
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = c.try_wait().expect("try_wait") {
            break Some(s);
        }
        if t0.elapsed() > limit {
            let _ = c.kill();
            let _ = c.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut err = String::new();
    if let Some(mut e) = c.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    match status {
        Some(s) => (s.success(), err),
        None => (false, format!("child hung for {limit:?}; {err}")),
    }
}

fn rank0(n: u32, job: Option<String>) -> RankEnv {
    RankEnv {
        rank: 0,
        size: n,
        rendezvous: None,
        token: None,
        job,
        launcher: Launcher::Local,
    }
}

/// Rank 0's outcome `mine` as a harness gives it, once the child ranks `kids` (1, 2, ..) have
/// all ended well, each waited for at most 30 s; else the first that did not.
fn after_children<T>(kids: Vec<Child>, mine: Result<T>) -> Result<Vec<T>> {
    for (i, k) in kids.into_iter().enumerate() {
        let (ok, err) = finish(k, Duration::from_secs(30));
        if !ok {
            return Err(Error::Backend {
                backend: "test",
                message: format!("rank {}: {err}", i + 1),
            });
        }
    }
    mine.map(|o| vec![o])
}

/// A local run: rank 0 here, ranks 1.. as children of this process.
struct Local {
    role: String,
}

impl Harness for Local {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        let (seg, vars) = prepare_local(n, &cfg())?;
        let kids: Vec<Child> = (1..n).map(|r| spawn(r, n, &self.role, &vars)).collect();
        drop(vars);
        let mine = run_rank(&rank0(n, None), Some(seg), &cfg(), p);
        after_children(kids, mine)
    }
}

/// An externally launched run: no inherited descriptor, the segment found through rank 0.
struct External {
    role: String,
}

impl Harness for External {
    fn run<P: Program>(&self, n: u32, p: &P) -> Result<Vec<P::Output>> {
        let job = format!(
            "shm-test-{}-{}",
            std::process::id(),
            commbench_core::transport::clock::monotonic_ns()
        );
        let vars = vec![(ENV_JOB.to_string(), job.clone())];
        let kids: Vec<Child> = (1..n).map(|r| spawn(r, n, &self.role, &vars)).collect();
        let mine = run_rank(&rank0(n, Some(job)), None, &cfg(), p);
        after_children(kids, mine)
    }
}

fn dev_shm() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn new_in_dev_shm(before: &[String]) -> Vec<String> {
    dev_shm()
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect()
}

fn conformance_over_local_processes() {
    let before = dev_shm();
    let max = 4 << 20;
    for n in 2..=4 {
        for name in CHECKS.iter().filter(|c| !BROKEN_IN_CORE.contains(c)) {
            let h = Local {
                role: format!("check:{name}:{max}"),
            };
            run_check(&h, name, n, max).unwrap_or_else(|e| panic!("{name} on {n} processes: {e}"));
        }
        let h = Local {
            role: "check:many_in_flight_fit:0".into(),
        };
        h.run(n, &ManyInFlight)
            .unwrap_or_else(|e| panic!("many_in_flight on {n} processes: {e}"));
    }
    assert_eq!(new_in_dev_shm(&before), Vec::<String>::new());
}

fn conformance_under_an_external_launcher() {
    for name in ["sizes", "tags_and_wildcards", "control_plane"] {
        let h = External {
            role: format!("check:{name}:{}", 1 << 20),
        };
        run_check(&h, name, 3, 1 << 20).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

fn killed_child_is_peer_lost_and_leaves_nothing() {
    let before = dev_shm();
    let c = ShmConfig {
        timeout: Duration::from_secs(20),
        ..cfg()
    };
    let (seg, vars) = prepare_local(2, &c).unwrap();
    let kid = spawn(1, 2, "wait:0", &vars);
    let pid = nix::unistd::Pid::from_raw(kid.id() as i32);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL)
    });
    let t0 = Instant::now();
    let e = run_rank(&rank0(2, None), Some(seg), &c, &WaitFor(1)).unwrap_err();
    let took = t0.elapsed();
    killer.join().unwrap().unwrap();
    let (ok, _) = finish(kid, Duration::from_secs(5));
    assert!(!ok);
    assert!(matches!(e.root(), Error::PeerLost { peer: 1, .. }), "{e}");
    assert!(e.to_string().contains("rank 1 is gone"), "{e}");
    assert!(took < Duration::from_secs(5), "noticed after {took:?}");
    assert_eq!(new_in_dev_shm(&before), Vec::<String>::new());
}

/// A rank whose process exits mid-run fails only what involves it (the run of
/// [`PeerDies`]): rank 0 goes on with rank 1 to the end, its receive posted for the dead rank
/// and a send to it fail naming it, and rank 1 finishes cleanly.
fn a_dead_peer_fails_only_what_involves_it() {
    let (seg, vars) = prepare_local(3, &cfg()).unwrap();
    let kids: Vec<Child> = (1..3).map(|r| spawn(r, 3, "peer-dies", &vars)).collect();
    let out = run_rank(&rank0(3, None), Some(seg), &cfg(), &PeerDies);
    let mut kids = kids.into_iter();
    let (one, two) = (kids.next().unwrap(), kids.next().unwrap());
    PeerDies::check(out.expect("rank 0 goes on")).unwrap();
    let (ok, err) = finish(one, Duration::from_secs(10));
    assert!(ok, "rank 1 finishes: {err}");
    let (ok, _) = finish(two, Duration::from_secs(10));
    assert!(!ok, "rank 2 exited with an error");
}

fn killed_rank0_is_peer_lost_for_a_non_child() {
    // Both ranks are children: rank 1 is not rank 0's parent and must still notice its death.
    let before = dev_shm();
    let (seg, vars) = prepare_local(2, &cfg()).unwrap();
    let r0 = spawn(0, 2, "wait:1", &vars);
    let r1 = spawn(1, 2, "wait:0", &vars);
    drop(seg);
    std::thread::sleep(Duration::from_millis(400));
    let pid = nix::unistd::Pid::from_raw(r0.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    let t0 = Instant::now();
    let (ok, err) = finish(r1, Duration::from_secs(10));
    assert!(!ok);
    assert!(err.contains("rank 0 is gone"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let _ = finish(r0, Duration::from_secs(5));
    assert_eq!(new_in_dev_shm(&before), Vec::<String>::new());
}

fn bad_segment(vars: &[(&str, String)], expect: &str) {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let t0 = Instant::now();
    let (ok, err) = finish(spawn(1, 2, "attach", &vars), Duration::from_secs(10));
    assert!(!ok, "attached with {vars:?}");
    assert!(err.contains(expect), "expected {expect:?} in {err:?}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

fn wrong_or_missing_segment_is_a_clear_error() {
    use std::os::fd::AsRawFd;
    let me = std::process::id().to_string();
    let tok = ("COMMBENCH_SHM_TOKEN", "0123456789abcdef".to_string());
    bad_segment(
        &[
            (ENV_SHM_FD, "x7".into()),
            (ENV_SHM_PID, me.clone()),
            tok.clone(),
        ],
        "malformed",
    );
    bad_segment(&[(ENV_SHM_FD, "5".into())], "COMMBENCH_SHM_PID is not set");
    bad_segment(
        &[
            (ENV_SHM_FD, "987".into()),
            (ENV_SHM_PID, me.clone()),
            tok.clone(),
        ],
        "cannot open the segment",
    );
    // A file full of garbage, reachable through /proc/<this pid>/fd/<n>.
    let path = std::env::temp_dir().join(format!("commbench-shm-garbage-{me}"));
    std::fs::write(&path, vec![0xA5u8; 8192]).unwrap();
    let garbage = std::fs::File::open(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    bad_segment(
        &[
            (ENV_SHM_FD, garbage.as_raw_fd().to_string()),
            (ENV_SHM_PID, me.clone()),
            tok.clone(),
        ],
        "not a commbench shared-memory segment",
    );
    // A real segment with another run's token.
    let (seg, mut vars) = prepare_local(2, &cfg()).unwrap();
    for (k, v) in vars.iter_mut() {
        if k == ENV_SHM_TOKEN {
            *v = "00000000000000ff".into();
        }
    }
    let vars: Vec<(&str, String)> = vars.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    bad_segment(&vars, "belongs to another run");
    drop(seg);
}

fn main() {
    if let Ok(role) = std::env::var(ROLE) {
        std::process::exit(child(&role));
    }
    let tests: &[(&str, fn())] = &[
        (
            "conformance_over_local_processes",
            conformance_over_local_processes,
        ),
        (
            "conformance_under_an_external_launcher",
            conformance_under_an_external_launcher,
        ),
        (
            "killed_child_is_peer_lost_and_leaves_nothing",
            killed_child_is_peer_lost_and_leaves_nothing,
        ),
        (
            "a_dead_peer_fails_only_what_involves_it",
            a_dead_peer_fails_only_what_involves_it,
        ),
        (
            "killed_rank0_is_peer_lost_for_a_non_child",
            killed_rank0_is_peer_lost_for_a_non_child,
        ),
        (
            "wrong_or_missing_segment_is_a_clear_error",
            wrong_or_missing_segment_is_a_clear_error,
        ),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    let mut ran = 0;
    for (name, f) in tests {
        if !filter.is_empty() && !filter.iter().any(|p| name.contains(p.as_str())) {
            continue;
        }
        ran += 1;
        let t0 = Instant::now();
        let ok = std::panic::catch_unwind(f).is_ok();
        println!(
            "test {name} ... {} ({:.2} s)",
            if ok { "ok" } else { "FAILED" },
            t0.elapsed().as_secs_f64()
        );
        failed += usize::from(!ok);
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        ran - failed
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
