//! `commbench allpairs` from the command line: bad input refused before anything runs, the
//! matrix complete over local ranks, the simulator's faults named and `--fail-on-suspect`'s
//! exit status, a stop between rounds keeping what was measured.

use crate::common;

use commbench_sim::Fault;
use common::machine::{six, Machine};
use common::{
    assert_ok, assert_usage_error, bounded, commbench, quick, read_json, run, run_json, stderr,
    stdout, tmpdir, with_json, QUICK_TRIALS,
};
use serde_json::Value;
use std::time::Duration;

/// `allpairs extra`, a quick run.
fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["allpairs"];
    a.extend_from_slice(extra);
    quick(&a)
}

/// The ordered pairs of `size` measured in the main passes.
fn cells(doc: &Value, size: u64) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = doc["allpairs"]["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .filter(|c| c["size"] == size && c.get("retest").is_none())
        .map(|c| (c["source"].as_u64().unwrap(), c["dest"].as_u64().unwrap()))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    assert_usage_error(
        &["allpairs", "--source", "1"],
        "--source is not used by allpairs",
    );
    assert_usage_error(&["allpairs", "--z", "0"], "--z 0");
    assert_usage_error(&["allpairs", "--min-factor", "0.5"], "--min-factor 0.5");
    assert_usage_error(&["allpairs", "--min-factor", "1"], "--min-factor 1");
    assert_usage_error(&["allpairs", "--rounds", "0"], "--rounds 0");
    // A topology file that cannot be read or meant, or one for the simulator's cube.
    let d = tmpdir("allpairs-topology");
    let bad = d.join("bad.conf");
    std::fs::write(&bad, "SwitchName=l0 Nodes=n[1-\n").expect("a file");
    let good = d.join("good.conf");
    std::fs::write(&good, "n1 top.l0\n").expect("a file");
    let (bad, good) = (bad.display().to_string(), good.display().to_string());
    assert_usage_error(
        &["allpairs", "--topology", "/nonexistent/t.conf"],
        "--topology",
    );
    assert_usage_error(&["allpairs", "--topology", &bad], "unclosed `[`");
    assert_usage_error(
        &["allpairs", "--backend", "sim", "--topology", &good],
        "hypercube",
    );
    // Counts beyond their bounds name the value, the bound and its unit, and nothing runs
    // (a pass count was once allocated up front: 103 GB, an abort).
    for (args, needle) in [
        (
            vec!["--rounds", "4294967295"],
            "--rounds 4294967295: 1 to 1000000 passes",
        ),
        (
            vec!["--retest-trials", "100000001"],
            "--retest-trials 100000001: at most 100000000 trials",
        ),
        (
            vec!["--retest-trials", "18446744073709551615"],
            "at most 100000000 trials per retested cell",
        ),
        (
            vec!["--concurrency", "4294967295"],
            "at most 1048576 pairs in one round",
        ),
        (vec!["--round-timeout", "1e-9"], "1e-9 s: 0.001 s (1 ms)"),
    ] {
        for backend in ["sim", "shm"] {
            let mut all = vec!["allpairs", "--backend", backend];
            all.extend(&args);
            let t = std::time::Instant::now();
            assert_usage_error(&all, needle);
            assert!(t.elapsed() < std::time::Duration::from_secs(20), "{all:?}");
        }
    }
    // Passes multiply the run's length; on the simulator its virtual clock is the bound.
    let many = ["--rounds", "1000000", "--trials", "1000000"];
    for (backend, needle) in [
        ("shm", "--rounds 1000000: 1000000 passes take at least"),
        ("sim", "of virtual time on this machine"),
    ] {
        let mut all = vec!["allpairs", "--backend", backend];
        all.extend(many);
        assert_usage_error(&all, needle);
    }
    assert_usage_error(&["allpairs", "--round-timeout", "0"], "--round-timeout 0");
    assert_usage_error(&["allpairs", "--npp", "1,2"], "--npp with a list");
    assert_usage_error(&["allpairs", "--sizes", "8,x"], "--sizes");
    assert_usage_error(&["allpairs", "--schedule", "ring"], "ring");
    assert_usage_error(&["allpairs", "--ranks", "1"], "2 ranks");
    let help = stdout(&run(&["allpairs", "--help"]));
    for word in [
        "tournament",
        "median polish",
        "--fail-on-suspect",
        "--concurrency",
    ] {
        assert!(help.contains(word), "--help lacks {word}: {help}");
    }
}

#[test]
fn four_local_ranks_fill_the_matrix_over_shm_and_tcp() {
    for backend in ["shm", "tcp"] {
        let j = tmpdir(&format!("ap-{backend}")).join("r.json");
        let a = args(&["--backend", backend, "--sizes", "8,4K"]);
        let doc = run_json(&j, &a);
        assert_eq!(doc["status"], "complete", "{}", doc["error"]);
        let m = &doc["allpairs"];
        assert_eq!(m["ranks"], 4);
        assert_eq!(m["config"]["schedule"], "tournament");
        for size in [8, 4096] {
            let c = cells(&doc, size);
            assert_eq!(c.len(), 12, "{backend} {size}: {c:?}");
        }
        // Every cell is a summary of its trials (a suspect measured again alone, on this busy
        // host, four times as many); only a retested cell keeps its trials (--raw suspects).
        for c in m["cells"].as_array().unwrap() {
            let retest = c.get("retest").is_some();
            let want = if retest {
                4 * QUICK_TRIALS
            } else {
                QUICK_TRIALS
            };
            assert_eq!(c["stats"]["n"].as_u64(), Some(want), "{c}");
            assert!(c["stats"]["median"].as_f64().unwrap() > 0.0);
            let kept = c.get("trial_ns").and_then(Value::as_array).map(Vec::len);
            assert_eq!(kept, retest.then_some(want as usize), "{c}");
        }
        // Every rank on this one host: one class of pairs.
        let hosts: Vec<&Value> = m["hosts"].as_array().unwrap().iter().collect();
        assert!(hosts.windows(2).all(|w| w[0] == w[1]), "{hosts:?}");
    }
}

#[test]
fn every_schedule_covers_every_pair_and_records_its_rounds() {
    for (schedule, extra, rounds) in [
        ("serial", vec![], 10),
        ("shift", vec![], 12),
        ("random", vec!["--rounds", "2"], 10),
        ("tournament", vec!["--concurrency", "1"], 10),
    ] {
        let j = tmpdir(&format!("ap-sched-{schedule}")).join("r.json");
        // Five shm ranks on a machine of two CPUs: ranks that sleep while they wait, as the
        // schedule is what is checked here, not the scheduler (busy-polling ranks are the
        // other tests').
        let mut a = args(&["--ranks", "5", "--schedule", schedule, "--sizes", "8"]);
        a.extend(["--wait", "futex"]);
        a.extend(extra.iter().copied());
        a.extend(["--retest-trials", "0"]);
        let doc = run_json(&j, &a);
        let m = &doc["allpairs"];
        let mut c = cells(&doc, 8);
        c.dedup();
        assert_eq!(c.len(), 20, "{schedule}: {c:?}");
        let main = m["rounds"].as_array().unwrap();
        assert_eq!(main.len(), rounds, "{schedule}");
        let starts: Vec<u64> = main
            .iter()
            .map(|r| r["start_ns"].as_u64().unwrap())
            .collect();
        assert!(
            starts.windows(2).all(|w| w[0] <= w[1]),
            "{schedule}: {starts:?}"
        );
    }
}

/// A machine description of our own in `dir`: a 3-cube, network slower than the copies, with
/// `faults`. Its path.
fn machine(dir: &std::path::Path, faults: &[Fault]) -> String {
    cube(dir, 3, faults)
}

/// A machine `name` of `dimensions` dimensions whose network is slower than its copies.
fn network_bound(name: &str, dimensions: u32) -> Machine {
    Machine::new(name, dimensions)
        .clock_read_ns(50)
        .poll_ns(100)
        .stack_kib(128)
        .times(six([
            (0.4, 0.0001),
            (0.2, 0.0),
            (0.2, 0.0),
            (0.1, 0.0),
            (0.4, 0.0001),
            (1.5, 0.001),
        ]))
}

/// [`machine`] on `dimensions` dimensions, written to `cubeD.toml` in `dir`.
fn cube(dir: &std::path::Path, dimensions: u32, faults: &[Fault]) -> String {
    let name = format!("cube{dimensions}");
    network_bound(&name, dimensions)
        .faults(faults.iter().cloned())
        .write(&dir.join(format!("{name}.toml")))
        .display()
        .to_string()
}

#[test]
fn a_slow_node_on_the_simulator_is_named_and_fails_a_health_check() {
    let dir = tmpdir("ap-sim-slow");
    let cfg = machine(
        &dir,
        &[Fault::SlowNode {
            node: 6,
            factor: 4.0,
            from_us: None,
            until_us: None,
        }],
    );
    let j = dir.join("r.json");
    let a = args(&[
        "--backend",
        "sim",
        "--sim-config",
        &cfg,
        "--fail-on-suspect",
    ]);
    let (o, in_time) = bounded(commbench(&with_json(&a, &j)), Duration::from_secs(120));
    assert!(in_time);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--fail-on-suspect"), "{}", stderr(&o));
    // The document was written first, and names node 6 alone.
    let doc = read_json(&j);
    let v = doc["allpairs"]["verdicts"].as_array().expect("verdicts");
    let faults: Vec<&Value> = v.iter().filter(|v| v["kind"] != "contention").collect();
    assert_eq!(faults.len(), 1, "{v:?}");
    assert_eq!(faults[0]["kind"], "node");
    assert_eq!(faults[0]["nodes"], serde_json::json!([6]));
    assert_eq!(faults[0]["confirmed"], true);
    assert!(faults[0]["factor"]["value"].as_f64().unwrap() > 1.25);
    // The report leads with the verdict.
    let report = stdout(&run(&["report", j.to_str().unwrap()]));
    let verdict = report.find("node 6").expect("the verdict in the report");
    assert!(
        verdict < report.find("8 bytes").unwrap_or(usize::MAX),
        "{report}"
    );

    // The same machine without the fault: no verdict, exit 0 with --fail-on-suspect.
    let healthy = machine(&dir, &[]);
    let j = dir.join("healthy.json");
    let a = args(&[
        "--backend",
        "sim",
        "--sim-config",
        &healthy,
        "--fail-on-suspect",
    ]);
    let o = run(&with_json(&a, &j));
    assert_ok(&o);
    assert_eq!(read_json(&j)["allpairs"]["verdicts"], serde_json::json!([]));
}

/// A simulated tree of switches (16 hosts, two a leaf, eight leaves under a core) with the
/// uplink of leaf5 three times slower: the run finds the switches as it would under srun,
/// names the uplink by its path, and fails a health check.
#[test]
fn a_slow_uplink_in_a_simulated_tree_is_named_by_its_path() {
    let dir = tmpdir("ap-sim-tree");
    let cfg = network_bound("tree16", 4)
        .tree(&[2], 1.0)
        .fault(Fault::SlowUplink {
            switch: "leaf5".into(),
            factor: 3.0,
            from_us: None,
            until_us: None,
        })
        .write(&dir.join("tree16.toml"));
    let j = dir.join("r.json");
    let a = args(&[
        "--backend",
        "sim",
        "--sim-config",
        cfg.to_str().unwrap(),
        "--fail-on-suspect",
    ]);
    let (o, in_time) = bounded(commbench(&with_json(&a, &j)), Duration::from_secs(180));
    assert!(in_time);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the verdicts name uplink core.leaf5"),
        "{}",
        stderr(&o)
    );
    let doc = read_json(&j);
    let m = &doc["allpairs"];
    let switches: Vec<String> = (0..16).map(|r| format!("core.leaf{}", r / 2)).collect();
    assert_eq!(m["switches"], serde_json::json!(switches));
    let v = m["verdicts"].as_array().expect("verdicts");
    let faults: Vec<&Value> = v.iter().filter(|v| v["kind"] != "contention").collect();
    assert_eq!(faults.len(), 1, "{v:?}");
    assert_eq!(faults[0]["kind"], "uplink");
    assert_eq!(faults[0]["switch"], "core.leaf5");
    assert_eq!(faults[0]["nodes"], serde_json::json!([10, 11]));
    let report = stdout(&run(&["report", j.to_str().unwrap()]));
    assert!(
        report.contains("uplink of switch core.leaf5 to core"),
        "{report}"
    );
}

#[test]
fn ctrl_c_between_rounds_keeps_the_cells_measured_and_exits_130() {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;

    let out = tmpdir("ap-sigint").join("out");
    let mut c = commbench(&[
        "allpairs",
        "--ranks",
        "4",
        "--schedule",
        "serial",
        "--sizes",
        "8",
        "--trials",
        "5000",
        "--warmup",
        "5",
        "--samples",
        "1000",
        "--retest-trials",
        "0",
        "--progress",
        "always",
        "--output",
    ]);
    c.arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = c.spawn().expect("starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("stderr line");
        let reached = line.contains("rounds 3/6");
        seen.push(line);
        if reached {
            break;
        }
    }
    assert!(
        seen.last().is_some_and(|l| l.contains("rounds 3/6")),
        "{seen:#?}"
    );
    // Ctrl-C reaches the whole foreground process group: rank 0 and its child ranks.
    killpg(Pid::from_raw(child.id() as i32), Signal::SIGINT).expect("killpg");
    let reader =
        std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
    let status = common::wait_for(&mut child, Duration::from_secs(60)).expect("it stops");
    let err = reader.join().expect("reader");
    assert_eq!(status.code(), Some(130), "{err}");
    let doc = read_json(&out.join("result.json"));
    assert_eq!(doc["status"], "interrupted", "{}", doc["error"]);
    // Whole rounds only: two cells each, the rounds before the stop and the one under way.
    let rounds = doc["allpairs"]["rounds"].as_array().expect("rounds").len();
    assert!((3..6).contains(&rounds), "{rounds} rounds");
    assert_eq!(cells(&doc, 8).len(), 2 * rounds);
    let text = std::fs::read_to_string(out.join("commbench.output.txt")).expect("output");
    assert!(text.contains("RUN STOPPED"), "{text}");
}

/// The lines of a raw file.
fn raw_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("a raw line"))
        .collect()
}

#[test]
fn raw_trials_stay_where_they_were_measured_and_compare_reads_them_back() {
    let dir = tmpdir("ap-raw");
    assert_usage_error(
        &["allpairs", "--raw", "all"],
        "--raw all: every process writes",
    );
    assert_usage_error(&["allpairs", "--raw-dir", "x"], "--raw-dir: only --raw all");
    // A directory that cannot be made is refused before anything runs.
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under = file.join("raw");
    assert_usage_error(
        &[
            "allpairs",
            "--backend",
            "sim",
            "--raw",
            "all",
            "--raw-dir",
            under.to_str().unwrap(),
        ],
        "--raw all: the raw directory",
    );
    let slow = Fault::SlowNode {
        node: 5,
        factor: 3.0,
        from_us: None,
        until_us: None,
    };
    let cfg = machine(&dir, &[slow]);
    let trials = QUICK_TRIALS;
    let sim = |raw: &str, name: &str| {
        let j = dir.join(name);
        let a = args(&["--backend", "sim", "--sim-config", &cfg, "--raw", raw]);
        let o = run(&with_json(&a, &j));
        assert_ok(&o);
        (j.clone(), read_json(&j))
    };
    // --raw all: rank 0 keeps summaries; every trial is in the simulator's one file.
    let (ja, all) = sim("all", "all.json");
    let m = &all["allpairs"];
    assert_eq!(m["config"]["raw"], "all");
    assert_eq!(m["raw_files"]["files"], serde_json::json!(["ranks.jsonl"]));
    let lines = raw_lines(&dir.join("all.json.raw").join("ranks.jsonl"));
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(lines.len(), cells.len(), "a raw line for every cell");
    for c in cells {
        let n = c["stats"]["n"].as_u64().unwrap();
        let line = lines
            .iter()
            .find(|l| {
                ["source", "dest", "size", "round"]
                    .iter()
                    .all(|k| l[k] == c[k])
            })
            .unwrap_or_else(|| panic!("no raw line for {c}"));
        assert_eq!(line["trial_ns"].as_array().map(Vec::len), Some(n as usize));
        // The summary is of those trials: the median of the one-way times.
        let mut us: Vec<f64> = line["trial_ns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap() / 2000.0 / c["npp"].as_f64().unwrap())
            .collect();
        us.sort_by(f64::total_cmp);
        let med = if us.len() % 2 == 1 {
            us[us.len() / 2]
        } else {
            (us[us.len() / 2 - 1] + us[us.len() / 2]) / 2.0
        };
        let got = c["stats"]["median"].as_f64().unwrap();
        assert!(
            (got - med).abs() <= 1e-9 * med.max(1.0),
            "{got} vs {med}: {c}"
        );
        // Only a retested cell keeps its trials in the document.
        assert_eq!(
            c.get("trial_ns").is_some(),
            c.get("retest").is_some(),
            "{c}"
        );
    }
    assert!(cells.iter().any(|c| c["stats"]["n"] == trials), "{cells:?}");
    // --raw none: no trials anywhere, the same verdict.
    let (jn, none) = sim("none", "none.json");
    assert!(none["allpairs"]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c.get("trial_ns").is_none()));
    assert!(none["allpairs"].get("raw_files").is_none());
    assert_eq!(
        none["allpairs"]["verdicts"][0]["nodes"],
        serde_json::json!([5])
    );
    assert_eq!(
        all["allpairs"]["verdicts"][0]["nodes"],
        serde_json::json!([5])
    );
    // compare resamples the trials of the raw files, and says when it had only summaries.
    let cmp = |a: &std::path::Path, b: &std::path::Path, name: &str| {
        let out = dir.join(name);
        let o = run(&[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
            out.to_str().unwrap(),
        ]);
        assert_ok(&o);
        read_json(&out)
    };
    let both = cmp(&ja, &ja, "cmp-raw.json");
    let summaries = cmp(&jn, &ja, "cmp-summaries.json");
    for (doc, want) in [(&both, false), (&summaries, true)] {
        let cells = doc["sizes"][0]["cells"].as_array().expect("compared cells");
        assert!(!cells.is_empty());
        for c in cells {
            assert_eq!(c.get("summaries").is_some(), want, "{c}");
            let ci = &c["ci95"];
            assert!(ci["lo"].as_f64().unwrap() <= c["ratio"].as_f64().unwrap());
            assert!(ci["hi"].as_f64().unwrap() >= c["ratio"].as_f64().unwrap());
        }
    }
    // Raw files moved with the document are found beside it.
    let moved = tmpdir("ap-raw-moved");
    std::fs::copy(&ja, moved.join("all.json")).unwrap();
    std::fs::create_dir_all(moved.join("all.json.raw")).unwrap();
    std::fs::copy(
        dir.join("all.json.raw").join("ranks.jsonl"),
        moved.join("all.json.raw").join("ranks.jsonl"),
    )
    .unwrap();
    std::fs::remove_dir_all(dir.join("all.json.raw")).unwrap();
    let again = cmp(
        &moved.join("all.json"),
        &moved.join("all.json"),
        "cmp-moved.json",
    );
    assert!(again["sizes"][0]["cells"][0].get("summaries").is_none());
}

#[test]
fn every_process_writes_its_own_raw_file() {
    let dir = tmpdir("ap-raw-tcp");
    let j = dir.join("r.json");
    let raw = dir.join("trials");
    let a = args(&[
        "--backend",
        "tcp",
        "--sizes",
        "8",
        "--raw",
        "all",
        "--raw-dir",
        raw.to_str().unwrap(),
    ]);
    let doc = run_json(&j, &a);
    assert_eq!(doc["status"], "complete", "{}", doc["error"]);
    let files = doc["allpairs"]["raw_files"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 4, "{files:?}");
    // Rank R's file holds the cells R timed, and only those.
    for r in 0..4u64 {
        let lines = raw_lines(&raw.join(format!("rank-{r}.jsonl")));
        assert!(lines.len() >= 3, "rank {r}: {lines:?}");
        assert!(
            lines.iter().all(|l| l["source"] == r),
            "rank {r}: {lines:?}"
        );
    }
}

#[test]
fn a_time_budget_ends_rounds_early_and_says_what_it_covered() {
    let dir = tmpdir("ap-budget");
    assert_usage_error(
        &["allpairs", "--backend", "sim", "--max-time", "1s,2s"],
        "allpairs takes one time",
    );
    let cfg = cube(
        &dir,
        4,
        &[Fault::SlowNode {
            node: 9,
            factor: 6.0,
            from_us: None,
            until_us: None,
        }],
    );
    let base = ["--backend", "sim", "--sim-config", &cfg, "--sizes", "8"];
    // Every round, to learn how long the rounds take on this machine (virtual time).
    let full = run_json(&dir.join("full.json"), &args(&base));
    let rounds = full["allpairs"]["rounds"].as_array().unwrap();
    let main: Vec<&Value> = rounds.iter().filter(|r| r["retest"] == false).collect();
    assert_eq!(main.len(), 15);
    // A budget that ends the main rounds about halfway (the clock characterisation first).
    let half = main[7]["end_ns"].as_f64().unwrap() / 1e9;
    let t = format!("{half}");
    let mut a = args(&base);
    a.extend(["--max-time", t.as_str()]);
    let doc = run_json(&dir.join("budget.json"), &a);
    assert_eq!(doc["status"], "complete", "{}", doc["error"]);
    let m = &doc["allpairs"];
    assert_eq!(m["config"]["max_time_s"].as_f64(), Some(half));
    // Random bisections without --schedule.
    assert_eq!(m["config"]["schedule"], "random");
    assert_eq!(m["budget_reached"], true);
    let c = &m["coverage"][0];
    let cells = c["cells"].as_u64().unwrap();
    assert!(cells > 0 && cells < 240, "{c}");
    assert_eq!(c["of_cells"], 240);
    // Every round a perfect matching: every rank in a cell from the first.
    assert_eq!(c["ranks"], 16);
    assert!(c["host_pairs"].as_u64().unwrap() < c["of_host_pairs"].as_u64().unwrap());
    let measured = m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("retest").is_none())
        .count() as u64;
    assert_eq!(measured, cells);
    // The slow node is still named from the cells measured (x3 leaves its own cells about
    // x1.35 slower, which half the matrix puts at the edge of x1.25; x6 well beyond).
    let v = m["verdicts"].as_array().unwrap();
    assert!(
        v.iter()
            .any(|v| v["kind"] == "node" && v["nodes"] == serde_json::json!([9])),
        "{v:?}"
    );
    let report = stdout(&run(&["report", dir.join("budget.json").to_str().unwrap()]));
    assert!(
        report.contains("ended the size early; covered")
            && report.contains(&format!("covered {cells} of 240 cells")),
        "{report}"
    );
}

/// 64 tcp ranks, each started by hand as a launcher would start them on 64 hosts, each under
/// `ulimit -n 32`: fewer descriptors than a full mesh (63 a rank) or a star at rank 0 (63)
/// needs. The bootstrap's tree, the control plane's trees and connections made on demand and
/// closed when idle let the run complete every cell.
#[test]
fn sixty_four_tcp_ranks_started_by_hand_run_under_ulimit_32() {
    const N: u32 = 64;
    let d = tmpdir("allpairs-ulimit");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let rdv = format!("127.0.0.1:{port}");
    let j = d.join("ap.json");
    let rank = |r: u32| {
        let mut c = std::process::Command::new("sh");
        c.arg("-c")
            .arg("ulimit -n 32 && exec \"$0\" \"$@\"")
            .arg(common::EXE)
            .args([
                "allpairs",
                "--backend",
                "tcp",
                "--sizes",
                "8",
                "--trials",
                "3",
            ])
            .args(["--warmup", "1", "--npp", "1", "--samples", "20", "--quiet"])
            .args(["--timeout", "60", "--rank", &r.to_string(), "--ranks", "64"])
            .args(["--rendezvous", &rdv]);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("COMMBENCH_") {
                c.env_remove(&k);
            }
        }
        // Each rank on a host of its own under one of eight leaf switches, as Slurm's
        // topology/tree plugin tells every task.
        c.env("COMMBENCH_TOKEN", "a-shared-token-0123456789")
            .env("SLURMD_NODENAME", format!("n{r:02}"))
            .env("SLURM_TOPOLOGY_ADDR", format!("top.l{}.n{r:02}", r / 8))
            .env("SLURM_TOPOLOGY_ADDR_PATTERN", "switch.switch.node")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(d.join(format!("r{r}.err"))).expect("a log"));
        if r == 0 {
            c.arg("--json").arg(&j);
        }
        c.spawn().expect("a rank starts")
    };
    // Rank 0 binds the rendezvous first: the others' connection attempts take ephemeral
    // ports, one of which could otherwise be the one picked here.
    let mut ranks = vec![rank(0)];
    std::thread::sleep(Duration::from_millis(300));
    ranks.extend((1..N).map(rank));
    let limit = Duration::from_secs(240);
    let failed: Vec<(u32, String)> = ranks
        .iter_mut()
        .enumerate()
        .filter_map(|(r, c)| {
            let ok = common::wait_for(c, limit).is_some_and(|s| s.success());
            let log = std::fs::read_to_string(d.join(format!("r{r}.err"))).unwrap_or_default();
            (!ok).then_some((r as u32, log))
        })
        .collect();
    assert!(failed.is_empty(), "ranks failed: {failed:?}");
    let doc = read_json(&j);
    assert_eq!(doc["status"], "complete");
    assert_eq!(cells(&doc, 8).len(), (N * (N - 1)) as usize);
    let info = &doc["environment"]["backend_info"];
    let how = info["connections"].as_str().unwrap_or_default();
    assert!(how.starts_with("on demand"), "{info}");
    assert!(info["max_open"].as_u64().is_some_and(|m| m < 32), "{info}");
    let said = (0..N).any(|r| {
        std::fs::read_to_string(d.join(format!("r{r}.err")))
            .is_ok_and(|l| l.contains("RLIMIT_NOFILE soft limit 32"))
    });
    assert!(said, "no rank said that its descriptor limit binds");
    // The switches each rank's launcher named reached rank 0, and pairs are kept apart by
    // the switches their route goes through.
    let m = &doc["allpairs"];
    for r in 0..N {
        assert_eq!(
            m["switches"][r as usize],
            format!("top.l{}", r / 8),
            "rank {r}"
        );
    }
    assert!(m["topology"]["Switched"].is_object(), "{}", m["topology"]);
    let labels: Vec<&str> = m["fits"][0]["fit"]["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .filter_map(|c| c["label"].as_str())
        .collect();
    assert!(
        labels.contains(&"same switch") && labels.contains(&"3 switches"),
        "{labels:?}"
    );
}
