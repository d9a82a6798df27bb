//! `--launches L`: the measurement run L times, each launch a process of its own writing
//! DIR/launch-K, and the set's summary (DIR/launches.json, launches.txt); `commbench launches`
//! summarising documents a launcher's loop wrote; `compare` taking a set as one side. On the
//! simulator every launch of one machine measures the same trials, so the variance the
//! launches add is exactly zero and one more launch is worth exactly its own trials: the
//! summary is checked against those closed forms on random machines of the tests' own, and
//! two sets of machines of which one is slower by a random factor compare as `slower`.

use commbench::analysis::launches::LaunchSet;
use commbench::core::stats::Xoshiro256;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common;
use common::machine::{line, Machine};
use common::*;

/// A machine of one hop with hop time `e_us` + `per_byte` us/B and jitter.
fn machine(
    dir: &Path,
    name: &str,
    (e_us, per_byte, jitter_ns, seed): (f64, f64, u64, u64),
) -> String {
    let m = Machine::new(name, 1)
        .jitter(jitter_ns, seed)
        .set_times(|t| t.e = line(e_us, per_byte))
        .write(&dir.join(format!("{name}.toml")));
    m.to_str().expect("UTF-8 path").to_string()
}

/// `commbench pingpong` on `backend` (its options) at `sizes`, `trials` a size, as a set of
/// `l` launches into `out`.
fn set_command(backend: &[&str], (sizes, trials): (&str, &str), l: u32, out: &Path) -> Command {
    let l = l.to_string();
    let mut args = vec!["pingpong"];
    args.extend_from_slice(backend);
    args.extend_from_slice(&["--sizes", sizes, "--trials", trials, "--warmup", "2"]);
    args.extend_from_slice(&["--samples", "1000", "--launches", &l]);
    args.extend_from_slice(&["--output", out.to_str().expect("UTF-8 path")]);
    commbench(&args)
}

/// `commbench pingpong` on `machine` as a set of `l` launches into `out`.
fn set_of(machine: &str, l: u32, out: &Path) -> std::process::Output {
    let c = set_command(
        &["--backend", "sim", "--sim-config", machine],
        ("8,4K", "200"),
        l,
        out,
    );
    let (o, in_time) = bounded(c, Duration::from_secs(120));
    assert!(in_time, "the set did not end");
    o
}

fn read_set(dir: &Path) -> LaunchSet {
    let text = std::fs::read_to_string(dir.join("launches.json")).expect("launches.json");
    serde_json::from_str(&text).expect("a set")
}

/// Each launch wrote its own document, numbered, in a process of its own; the summary holds
/// every point over every launch, and on the simulator (the same trials every launch) the
/// launches add no variance: share 0, one more launch worth exactly its own trials, no
/// optimal count. Two sets, the second machine slower by a random factor, compare as slower
/// at every size; a set compared with itself shows no difference.
#[test]
fn sets_of_launches_on_random_machines() {
    let dir = tmpdir("launches-sets");
    let mut rng = Xoshiro256::new(0x001a_0c4e);
    for case in 0..scale::cases(1, 8) {
        let e = rng.range(5.0, 200.0);
        let per_byte = rng.range(0.0005, 0.05);
        let jitter = 50 + rng.next_u64() % 2000;
        let seed = rng.next_u64();
        let factor = rng.range(1.3, 2.0);
        let a = machine(&dir, &format!("a{case}"), (e, per_byte, jitter, seed));
        let b = machine(
            &dir,
            &format!("b{case}"),
            (e * factor, per_byte * factor, jitter, seed),
        );
        let (da, db) = (dir.join(format!("a{case}")), dir.join(format!("b{case}")));
        let l = 3 + (rng.next_u64() % 2) as u32;
        for (m, d) in [(&a, &da), (&b, &db)] {
            let o = set_of(m, l, d);
            assert_ok(&o);
            let out = stdout(&o);
            assert!(out.contains("launch worth"), "{out}");
            let set = read_set(d);
            assert_eq!(set.status, "complete", "{:?}", set.error);
            assert_eq!((set.asked, set.launches.len()), (l, l as usize));
            for (k, launch) in set.launches.iter().enumerate() {
                let doc = read_json(&d.join(&launch.document));
                assert_eq!(doc["config"]["launch"]["index"], k as u64 + 1);
                assert_eq!(doc["config"]["launch"]["of"], u64::from(l));
                assert_eq!(launch.exit, Some(0));
            }
            assert_eq!(set.points.len(), 2);
            for p in &set.points {
                assert_eq!(p.medians_us.len(), l as usize);
                let c = p.components.as_ref().expect("components");
                assert_eq!(c.between_var, 0.0, "case {case}: {p:?}");
                assert_eq!(c.between_share, 0.0);
                let worth = c.launch_worth_trials.expect("worth");
                assert!(
                    (worth - p.trials_mean).abs() < 1e-6 * p.trials_mean,
                    "{worth}"
                );
                assert_eq!(c.trials_optimal, None);
            }
        }
        let o = run(&["compare", da.to_str().unwrap(), db.to_str().unwrap()]);
        assert_ok(&o);
        let out = stdout(&o);
        let slower = out.lines().filter(|l| l.contains(" slower (+")).count();
        assert_eq!(slower, 2, "case {case} (x{factor:.2}):\n{out}");
        let o = run(&["compare", da.to_str().unwrap(), da.to_str().unwrap()]);
        assert_ok(&o);
        assert!(stdout(&o).contains("no difference"), "{}", stdout(&o));
    }
}

/// `commbench launches` over the documents of a set gives the set's own statistics, its
/// paths relative to the directory it writes into.
#[test]
fn summarising_documents_gives_the_sets_statistics() {
    let dir = tmpdir("launches-summary");
    let m = machine(&dir, "m", (20.0, 0.01, 500, 9));
    let set_dir = dir.join("set");
    assert_ok(&set_of(&m, 3, &set_dir));
    let set = read_set(&set_dir);
    let docs: Vec<String> = (1..=3)
        .map(|k| {
            set_dir
                .join(format!("launch-{k}/result.json"))
                .display()
                .to_string()
        })
        .collect();
    let mut args = vec!["launches"];
    args.extend(docs.iter().map(String::as_str));
    let out = dir.join("again");
    args.extend(["--output", out.to_str().unwrap()]);
    let o = run(&args);
    assert_ok(&o);
    let again = read_set(&out);
    assert_eq!(again.points, set.points);
    assert_eq!(again.launches.len(), 3);
    assert!(again.launches[0].document.ends_with("launch-1/result.json"));
    // A document given twice is refused.
    let o = run(&["launches", &docs[0], &docs[0]]);
    assert_usage_output(&o, "given twice", "twice");
}

/// What --launches refuses, each with a reason and a hint (exit 2).
#[test]
fn launches_usage_errors() {
    let dir = tmpdir("launches-usage");
    let out = dir.join("o");
    let o = out.to_str().unwrap();
    let sim = ["pingpong", "--backend", "sim", "--sizes", "8"];
    fn with<'a>(sim: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = sim.to_vec();
        v.extend_from_slice(extra);
        v
    }
    assert_usage_error(&with(&sim, &["--launches", "3"]), "needs --output");
    assert_usage_error(
        &with(&sim, &["--launches", "0", "--output", o]),
        "--launches 0",
    );
    let j = dir.join("r.json");
    let j = j.to_str().unwrap();
    assert_usage_error(
        &with(&sim, &["--launches", "3", "--output", o, "--json", j]),
        "--json with --launches",
    );
    assert_usage_error(
        &with(&sim, &["--launches", "3", "--output", o, "--stream", j]),
        "--stream with --launches",
    );
    assert_usage_error(
        &[
            "allpairs",
            "--backend",
            "sim",
            "--launches",
            "3",
            "--output",
            o,
        ],
        "allpairs compares matrices",
    );
    // Under a launcher, each launch is the launcher's.
    let mut c = commbench(&with(&sim, &["--launches", "3", "--output", o]));
    c.env("OMPI_COMM_WORLD_RANK", "0")
        .env("OMPI_COMM_WORLD_SIZE", "2");
    assert_usage_output(&c.output().expect("runs"), "under a launcher", "mpirun");
    // The variable a set gives its launches is not for people to set.
    let mut c = commbench(&with(&sim, &["--output", o]));
    c.env("COMMBENCH_LAUNCH_OF", "1/3");
    assert_usage_output(&c.output().expect("runs"), "COMMBENCH_LAUNCH_OF", "stray");
    assert!(!out.join("launches.json").exists());
}

/// A signal to the process running a set reaches the launch under way once: it saves what it
/// measured and stops; the summary says the set was interrupted, keeps the launches done, and
/// the exit is 128 + the signal.
#[test]
fn a_signal_stops_the_set_and_keeps_the_launches_done() {
    let dir = tmpdir("launches-signal");
    let m = machine(&dir, "slow", (50.0, 0.01, 500, 5));
    let out = dir.join("set");
    let mut c = set_command(
        &["--backend", "sim", "--sim-config", &m],
        ("8,1K,64K,1M", "20000"),
        3,
        &out,
    );
    c.args(["--progress", "always"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    let mut child = c.spawn().expect("starts");
    // Launch 2 measuring its first size: the signal lands with sizes left however loaded the
    // machine is (a fixed pause after the launch started could land in its last size, which
    // then completes).
    let lines = wait_for_line(&mut child, "launch 2 of 3");
    let lines = read_until(lines, "progress: size 1/4");
    let st = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let (code, err) = finish(child, lines, Duration::from_secs(120));
    assert_eq!(code, Some(143), "{err}");
    let set = read_set(&out);
    assert_eq!(set.status, "interrupted", "{err}");
    assert_eq!(set.launches.len(), 2);
    assert_eq!(set.launches[0].status, "complete");
    assert_eq!(set.launches[1].status, "interrupted");
    assert_eq!(set.launches[1].exit, Some(143));
    assert!(!out.join("launch-3").exists());
}

/// On shared memory the launches are real processes with their own placement and timing: a
/// set of three completes, each launch's statistics and the components are in range, and a
/// set compared with itself differs nowhere.
#[test]
fn a_set_on_shared_memory() {
    let dir = tmpdir("launches-shm");
    let out = dir.join("set");
    let c = set_command(&["--backend", "shm"], ("8,64K", "200"), 3, &out);
    let (o, in_time) = bounded(c, Duration::from_secs(120));
    assert!(in_time);
    assert_ok(&o);
    let set = read_set(&out);
    assert_eq!(set.status, "complete", "{:?}", set.error);
    for p in &set.points {
        assert_eq!(p.medians_us.len(), 3);
        let ci = p.ci95_us.expect("interval");
        assert!(ci.lo <= p.geomean_us && p.geomean_us <= ci.hi, "{p:?}");
        let c = p.components.as_ref().expect("components");
        assert!((0.0..=1.0).contains(&c.between_share), "{c:?}");
        assert!(
            c.per_trial_var > 0.0 && c.trial_s > 0.0 && c.launch_s > 0.0,
            "{c:?}"
        );
        if let Some(w) = c.launch_worth_trials {
            assert!(w >= p.trials_mean * (1.0 - 1e-9), "{c:?}");
        }
    }
    let o = run(&[
        "compare",
        out.to_str().unwrap(),
        out.join("launches.json").to_str().unwrap(),
    ]);
    assert_ok(&o);
    assert!(stdout(&o).contains("no difference"), "{}", stdout(&o));
}
