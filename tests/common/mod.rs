//! Helpers shared by the command-line integration tests: the built `commbench` binary, the
//! options that keep a run short, runs bounded in time, result documents, temporary
//! directories and exit-code checks; the simulated machines the tests build ([`machine`]) and
//! how many cases their randomized checks run ([`scale`]), both shared with the simulator's
//! own tests. Each test file uses only some of them.
#![allow(dead_code)]

#[cfg(feature = "sim")]
pub mod allpairs;
#[cfg(feature = "sim")]
pub mod inprocess;
#[cfg(feature = "sim")]
#[path = "../../backends/sim/tests/common/machine.rs"]
pub mod machine;
pub mod runs;
#[path = "../../backends/sim/tests/common/scale.rs"]
pub mod scale;

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const EXE: &str = env!("CARGO_BIN_EXE_commbench");

/// Prefixes of the variables by which launchers (commbench's own, Open MPI, PMIx, MPICH's Hydra
/// and PMI, Slurm) tell a process it is one of their ranks.
const LAUNCHER_PREFIXES: &[&str] = &["COMMBENCH_", "OMPI_", "PMIX_", "PMI_", "MPI_", "SLURM_"];

/// `commbench args`, started as from a shell of its own: no launcher variables inherited.
pub fn commbench(args: &[&str]) -> Command {
    let mut c = Command::new(EXE);
    c.args(args);
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if LAUNCHER_PREFIXES.iter().any(|p| name.starts_with(p)) {
            c.env_remove(&k);
        }
    }
    c
}

/// Options that keep a run short: [`QUICK_TRIALS`] trials, two warm-up rounds and a small
/// timer characterisation. What a test measures and checks comes with its own options.
pub const QUICK: &[&str] = &["--trials", "20", "--warmup", "2", "--samples", "1000"];

/// Trials per point of a [`QUICK`] run, as [`QUICK`] says.
pub const QUICK_TRIALS: u64 = decimal(QUICK[1]);

/// The value of the decimal number `s`, at compile time.
const fn decimal(s: &str) -> u64 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut v = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit(), "not a decimal number");
        v = v * 10 + (b[i] - b'0') as u64;
        i += 1;
    }
    v
}

/// `args` followed by [`QUICK`].
pub fn quick<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend_from_slice(QUICK);
    all
}

/// Run `commbench args` to completion.
pub fn run(args: &[&str]) -> Output {
    commbench(args).output().expect("commbench starts")
}

/// A fresh, empty directory for one test, named after it.
///
/// The tests of many files share one process (tests/main.rs), so a name asked for twice is a
/// test's error: two tests would wipe each other's files. It panics rather than let them.
pub fn tmpdir(name: &str) -> PathBuf {
    static TAKEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    {
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            !taken.iter().any(|t| t == name),
            "tmpdir({name:?}) asked for twice in one test process: give each test its own name"
        );
        taken.push(name.to_string());
    }
    let d = std::env::temp_dir().join(format!("commbench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 0, or a failure showing standard error.
pub fn assert_ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
}

/// A usage error: exit 2 with `commbench: error: <one line naming needle>` and a hint.
/// `what` (the arguments, say) is shown when it is not.
pub fn assert_usage_output(o: &Output, needle: &str, what: impl Debug) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{what:?}: {e}");
    let first = e.lines().next().unwrap_or("");
    assert!(first.starts_with("commbench: error: "), "{what:?}: {e}");
    assert!(
        first.contains(needle),
        "{what:?}: expected {needle:?} in {first:?}"
    );
    assert!(
        e.lines().any(|l| l.starts_with("hint: ")),
        "{what:?}: no hint in {e}"
    );
}

/// `commbench args` is a usage error naming `needle` (see [`assert_usage_output`]).
pub fn assert_usage_error(args: &[&str], needle: &str) {
    assert_usage_output(&run(args), needle, args);
}

/// A child's standard error, line by line.
pub type ErrLines = std::io::Lines<std::io::BufReader<std::process::ChildStderr>>;

/// Read `lines` until one contains `needle`; the rest, to be read to the end (so that the
/// child never writes to a closed pipe).
pub fn read_until(mut lines: ErrLines, needle: &str) -> ErrLines {
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        let reached = line.contains(needle);
        seen.push(line);
        if reached {
            return lines;
        }
    }
    panic!("the run ended before {needle:?}: {seen:#?}");
}

/// The standard error of `c` (piped), read until a line contains `needle`.
pub fn wait_for_line(c: &mut Child, needle: &str) -> ErrLines {
    use std::io::BufRead;
    let err = c.stderr.take().expect("stderr piped");
    read_until(std::io::BufReader::new(err).lines(), needle)
}

/// Read the rest of `lines` to its end, then the exit code of `c`, within `limit` (a hang
/// fails the test).
pub fn finish(mut c: Child, lines: ErrLines, limit: Duration) -> (Option<i32>, String) {
    let reader =
        std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
    let status = wait_for(&mut c, limit).expect("the run ends after a stop");
    (status.code(), reader.join().expect("reader"))
}

/// Wait for `c` at most `limit`; its exit status, or None (and `c` killed) when over the limit.
pub fn wait_for(c: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(s) = c.try_wait().expect("wait") {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    None
}

/// Run `c` with its output captured and a wall-clock limit, so that a hang is a failure and not
/// a stuck test: the output, and whether it ended in time.
pub fn bounded(mut c: Command, limit: Duration) -> (Output, bool) {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    let in_time = wait_for(&mut child, limit).is_some();
    (child.wait_with_output().expect("output"), in_time)
}

/// `args` followed by `--json j --quiet`.
pub fn with_json<'a>(args: &[&'a str], j: &'a Path) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--json", j.to_str().expect("UTF-8 path"), "--quiet"]);
    all
}

/// The result document (or any JSON file) at `p`.
pub fn read_json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).expect("result document");
    serde_json::from_str(&text).expect("JSON")
}

/// `c` must end within `limit` with exit 0, having written the document `j`: that document.
pub fn ok_json(c: Command, j: &Path, limit: Duration) -> serde_json::Value {
    let (o, in_time) = bounded(c, limit);
    assert!(in_time, "hung: {}", stderr(&o));
    assert_ok(&o);
    read_json(j)
}

/// Run `commbench args --json j --quiet`; it must succeed within five minutes. The result
/// document.
pub fn run_json(j: &Path, args: &[&str]) -> serde_json::Value {
    ok_json(commbench(&with_json(args, j)), j, Duration::from_secs(300))
}

/// Seed 001's `time` in a result document: its sizes with a value in `params`, and those at
/// which it is flagged as not separable. On a busy host a measured time can read below zero
/// beyond its noise (R) or an echo not grow with the distance (E): flagged, never a value.
pub fn sizes_given_or_flagged(doc: &serde_json::Value, time: &str) -> (usize, usize) {
    let given = doc["params"][time]["values"].as_array().map_or(0, Vec::len);
    let flagged = doc["sixtimes"]["not_separable"].as_array().map_or(0, |ns| {
        ns.iter()
            .filter(|n| n["time"] == time)
            .map(|n| n["sizes"].as_array().map_or(0, Vec::len))
            .sum()
    });
    (given, flagged)
}

/// Whether seed 001's measured value `key` is in a result document, or named in a note
/// instead (below zero beyond its noise at every size on a busy host); `o_s` is F+S's.
pub fn measured_or_noted(doc: &serde_json::Value, key: &str) -> bool {
    let noted_as = if key == "o_s" { "F+S" } else { key };
    doc["sixtimes"]["measured"][key].is_object()
        || doc["sixtimes"]["notes"]
            .as_array()
            .is_some_and(|ns| ns.iter().any(|n| n["time"] == noted_as))
}
