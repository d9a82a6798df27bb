//! The command line under `mpirun` with the mpi backend. Built only with
//! `--features mpi` (`cargo test --features mpi --test mpi`); needs Open MPI's `mpirun`.
//! Every run is bounded in time: a hang is a failure, not a stuck test.
#![cfg(feature = "mpi")]

mod common;

use common::{
    assert_ok, bounded, commbench, measured_or_noted, ok_json, sizes_given_or_flagged, stderr,
    stdout, tmpdir, wait_for, with_json, EXE, QUICK, QUICK_TRIALS,
};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `mpirun -np <np> commbench args` (oversubscribed above two ranks).
fn mpirun(np: u32, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["-np", &np.to_string()]);
    if np > 2 {
        c.arg("--oversubscribe");
    }
    c.arg(EXE).args(args);
    c
}

/// `mpirun -np <np> commbench args` with [`QUICK`] settings, which must succeed within two
/// minutes: its result document.
fn mpi_doc(np: u32, name: &str, args: &[&str]) -> Value {
    let j = tmpdir(name).join("r.json");
    let mut all = args.to_vec();
    all.extend_from_slice(QUICK);
    ok_json(
        mpirun(np, &with_json(&all, &j)),
        &j,
        Duration::from_secs(120),
    )
}

/// The message-buffer options over MPI: a validated, cold-cache window on one buffer each way
/// (osu_bw's single buffer) with messages 3 bytes past a 64-byte boundary, and a validated
/// ping-pong on the native loop at the same placement.
#[test]
fn message_buffers_are_checked_cold_single_and_placed_on_mpi() {
    let placed = ["--validate", "--align", "64", "--offset", "3"];
    let mut window = vec!["bandwidth", "--backend", "mpi", "--window", "8"];
    window.extend_from_slice(&["--buffers", "single", "--sizes", "8,64K"]);
    window.extend_from_slice(&["--cache", "cold", "--cache-pool", "2M"]);
    window.extend_from_slice(&placed);
    let mut pp = vec!["pingpong", "--backend", "mpi", "--sizes", "8,1M"];
    pp.extend_from_slice(&placed);
    for (name, args, pool) in [
        ("buffers-bw", window, Some(2 << 20)),
        ("buffers-pp", pp, None),
    ] {
        let doc = mpi_doc(2, name, &args);
        assert_eq!(doc["status"], "complete", "{}", doc["error"]);
        for p in doc["points"].as_array().expect("points") {
            let b = &p["buffers"];
            assert!(
                b["validated_trials"].as_u64().unwrap_or(0) > QUICK_TRIALS,
                "{b}"
            );
            assert_eq!(b["cache_pool"].as_u64(), pool, "{b}");
            assert_eq!(b["source_alignment"], 1, "{b}");
            assert_eq!(b["dest_alignment"], 1, "{b}");
        }
    }
}

#[test]
fn pingpong_on_mpi_records_library_clock_and_wtick() {
    let doc = mpi_doc(
        2,
        "pp",
        &["pingpong", "--backend", "mpi", "--sizes", "0,8,1K"],
    );
    let pts = doc["points"].as_array().expect("points");
    assert_eq!(pts.len(), 3);
    assert_eq!(pts[1]["size"], 8);
    assert_eq!(
        pts[1]["trial_ns"].as_array().unwrap().len(),
        QUICK_TRIALS as usize
    );
    let info = &doc["environment"]["backend_info"];
    assert!(info["library"].as_str().unwrap().contains("MPI"), "{info}");
    assert!(info["wtick_s"].is_number(), "{info}");
    assert_eq!(info["clock"], "MPI_Wtime");
    assert_eq!(doc["timer"]["clock"], "MPI_Wtime");
    // MPI_Init's thread level unless asked otherwise, as the plain loops get.
    assert_eq!(info["threading"], "single", "{info}");
    assert!(doc["config"].get("mpi_threads").is_none());
}

/// `--mpi-threads` asks MPI for a thread level; the document records the level asked for and
/// the level provided, and the run measures as any other.
#[test]
fn thread_level_is_asked_for_and_recorded() {
    for level in ["funneled", "multiple"] {
        let doc = mpi_doc(
            2,
            &format!("threads-{level}"),
            &["pingpong", "--backend", "mpi", "--mpi-threads", level],
        );
        let info = &doc["environment"]["backend_info"];
        assert_eq!(info["threading"], level, "{info}");
        let provided = info["threading_provided"].as_str().expect("provided");
        assert!(
            ["single", "funneled", "serialized", "multiple"].contains(&provided),
            "{info}"
        );
        assert_eq!(doc["config"]["mpi_threads"], level);
        assert_eq!(doc["points"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn monotonic_clock_and_any_two_ranks_on_four() {
    for pattern in ["pingpong", "exchange", "bandwidth"] {
        let args = [
            pattern,
            "--backend",
            "mpi",
            "--clock",
            "monotonic",
            "--source",
            "3",
            "--dest",
            "1",
            "--sizes",
            "8K",
        ];
        let doc = mpi_doc(4, pattern, &args);
        assert_eq!(doc["timer"]["clock"], "CLOCK_MONOTONIC", "{pattern}");
        assert_eq!(doc["points"].as_array().unwrap().len(), 1, "{pattern}");
    }
}

#[test]
fn mpi_tcp_and_shm_between_the_same_processes() {
    let mut args = vec!["pingpong", "--backend", "mpi,tcp,shm"];
    args.extend_from_slice(QUICK);
    let (o, in_time) = bounded(mpirun(2, &args), Duration::from_secs(120));
    assert!(in_time, "hung: {}", stderr(&o));
    assert_ok(&o);
    let out = stdout(&o);
    for b in ["mpi", "tcp", "shm"] {
        assert!(out.contains(b), "{b} missing from\n{out}");
    }
}

#[test]
fn transpose_is_verified_with_vector_type_and_packing() {
    let doc = mpi_doc(
        2,
        "transpose",
        &["transpose", "--backend", "mpi", "--n", "24"],
    );
    let pats: Vec<&str> = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["pattern"].as_str())
        .collect();
    assert!(pats.contains(&"transpose-vector"), "{pats:?}");
    assert!(pats.contains(&"transpose-pack"), "{pats:?}");
    for p in doc["points"].as_array().unwrap() {
        assert_eq!(p["size"], 24 * 24 * 8);
    }
}

#[test]
fn without_a_launcher_it_says_how_to_start() {
    let c = commbench(&["pingpong", "--backend", "mpi"]);
    let (o, in_time) = bounded(c, Duration::from_secs(30));
    let err = stderr(&o);
    assert!(in_time);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("mpirun -np 2"), "{err}");
}

/// Processes below `pid` whose environment says they are MPI rank `rank`.
fn rank_pid(root: u32, rank: u32) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        let Ok(kids) = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")) else {
            continue;
        };
        for k in kids
            .split_whitespace()
            .filter_map(|k| k.parse::<u32>().ok())
        {
            let env = std::fs::read(format!("/proc/{k}/environ")).unwrap_or_default();
            if env.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
                return Some(k);
            }
            todo.push(k);
        }
    }
    None
}

#[test]
fn a_rank_killed_mid_run_is_an_error_not_a_hang() {
    let mut c = mpirun(
        2,
        &[
            "pingpong",
            "--backend",
            "mpi",
            "--trials",
            "100000000",
            "--npp",
            "10",
        ],
    );
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    let start = Instant::now();
    let victim = loop {
        std::thread::sleep(Duration::from_millis(200));
        if let Some(p) = rank_pid(child.id(), 1) {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rank 1 never started"
        );
    };
    std::thread::sleep(Duration::from_millis(1500));
    let st = Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let status = wait_for(&mut child, Duration::from_secs(60))
        .expect("the run hung after rank 1 was killed");
    assert!(!status.success());
}

/// A sweep under mpirun long enough to be stopped in the middle: 64 sizes, progress lines on
/// standard error, the document written to `out`.
fn long_mpi_sweep(out: &std::path::Path) -> std::process::Child {
    let sizes = (1..=64).map(|i| (i * 8).to_string()).collect::<Vec<_>>();
    let out = out.to_str().expect("UTF-8 path");
    let sizes = sizes.join(",");
    let args = [
        "pingpong",
        "--backend",
        "mpi",
        "--sizes",
        &sizes,
        "--trials",
        "20000",
        "--samples",
        "10000",
        "--warmup",
        "5",
        "--progress",
        "always",
        "--output",
        out,
    ];
    mpirun(2, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start")
}

/// Read progress lines until size `n` of the sweep is under way; the rest of standard error is
/// read to its end by a thread (its text returned by the handle).
fn after_size(c: &mut std::process::Child, n: usize) -> std::thread::JoinHandle<String> {
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(c.stderr.take().expect("stderr")).lines();
    for line in lines.by_ref() {
        if line.expect("line").contains(&format!("size {n}/")) {
            return std::thread::spawn(move || {
                lines.map_while(Result::ok).collect::<Vec<_>>().join("\n")
            });
        }
    }
    panic!("the run ended before size {n}");
}

/// The document a stopped run left: status "interrupted", whole sizes in order, at least
/// `least` of them.
fn check_saved(out: &std::path::Path, least: usize) {
    let text =
        std::fs::read_to_string(out.join("result.json")).expect("the sizes measured are saved");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(doc["status"], "interrupted", "{}", doc["error"]);
    let points = doc["points"].as_array().expect("points");
    assert!(
        points.len() >= least && points.len() < 64,
        "{}",
        points.len()
    );
    for (i, p) in points.iter().enumerate() {
        assert_eq!(p["size"], (i as u64 + 1) * 8);
        assert_eq!(p["trials"], 20000);
    }
}

/// mpirun forwards SIGTERM to the ranks and kills them a second later (Open MPI's
/// odls_base_sigkill_timeout): the sizes measured are saved on the first signal.
#[test]
fn sigterm_to_mpirun_saves_the_sizes_measured() {
    let out = tmpdir("mpi-sigterm").join("out");
    let mut c = long_mpi_sweep(&out);
    let rest = after_size(&mut c, 3);
    let st = Command::new("kill")
        .args(["-TERM", &c.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let status = wait_for(&mut c, Duration::from_secs(60)).expect("mpirun ends after SIGTERM");
    assert!(!status.success());
    let err = rest.join().expect("stderr");
    assert!(err.contains("SIGTERM received"), "{err}");
    check_saved(&out, 2);
}

/// A rank that dies of a signal: mpirun ends the job, and rank 0 saves what it measured.
#[test]
fn a_rank_killed_by_a_signal_leaves_the_sizes_measured_saved() {
    let out = tmpdir("mpi-killed").join("out");
    let mut c = long_mpi_sweep(&out);
    let rest = after_size(&mut c, 3);
    let victim = rank_pid(c.id(), 1).expect("rank 1");
    let st = Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let status = wait_for(&mut c, Duration::from_secs(60)).expect("mpirun ends");
    assert!(!status.success());
    let _ = rest.join();
    check_saved(&out, 2);
}

/// Underwood & Brightwell's queue benchmarks over MPI: MPI's own matcher walks the pre-posted
/// receives and the unexpected messages. One point per queue length (and fraction traversed),
/// each with its queue keys, and a line per series.
#[test]
fn queue_posted_and_unexpected_on_mpi() {
    for (kind, pcts) in [("posted", &[0u64, 100][..]), ("unexpected", &[][..])] {
        let j = tmpdir(&format!("queue-{kind}-mpi")).join("r.json");
        let mut args = vec!["queue", kind, "--backend", "mpi", "--lengths", "0,32"];
        if !pcts.is_empty() {
            args.extend_from_slice(&["--traversed", "0,100"]);
        }
        args.extend_from_slice(QUICK);
        let doc = ok_json(
            mpirun(2, &with_json(&args, &j)),
            &j,
            Duration::from_secs(120),
        );
        assert_eq!(doc["status"], "complete", "{kind}: {}", doc["error"]);
        let q = &doc["config"]["queue"];
        assert_eq!(q["kind"], kind, "{q}");
        assert_eq!(q["lengths"], serde_json::json!([0, 32]), "{q}");
        assert_eq!(q["traversed_pct"], serde_json::json!(pcts), "{q}");
        assert_eq!(q["any_source"], false, "{q}");
        let points = doc["points"].as_array().expect("points");
        let mut seen: Vec<(u64, Option<u64>)> = points
            .iter()
            .map(|p| {
                assert_eq!(p["pattern"], format!("queue_{kind}").as_str(), "{p}");
                assert_eq!(p["backend"], "mpi", "{p}");
                assert_eq!(p["trials"], QUICK_TRIALS, "{p}");
                assert!(p["one_way_us"]["median"].as_f64().unwrap() > 0.0, "{p}");
                let l = p["queue_length"].as_u64().expect("queue_length");
                let pct = p["traversed_pct"].as_u64();
                match pct {
                    Some(c) => assert_eq!(p["traversed"], l * c / 100, "{p}"),
                    None => assert!(p.get("traversed").is_none(), "{p}"),
                }
                (l, pct)
            })
            .collect();
        seen.sort_unstable();
        let mut want: Vec<(u64, Option<u64>)> = if pcts.is_empty() {
            vec![(0, None), (32, None)]
        } else {
            [0, 32]
                .iter()
                .flat_map(|&l| pcts.iter().map(move |&c| (l, Some(c))))
                .collect()
        };
        want.sort_unstable();
        assert_eq!(seen, want, "{kind}: one point per (length, pct)");
        let lines = doc["queue"].as_array().expect("queue lines");
        assert_eq!(lines.len(), pcts.len().max(1), "{kind}: {lines:?}");
        for l in lines {
            assert_eq!(l["backend"], "mpi", "{l}");
            assert_eq!(l["all"]["points"], 2, "{l}");
            assert!(l["all"]["slope_ns_per_entry"].is_number(), "{l}");
        }
    }
}

/// Seed 001's overhead experiments over MPI: the echo through a forwarding rank gives E, the
/// rest R and the measured sums; S, F, U and A are named as not separable. And the
/// interference streams through rank 0's program.
#[test]
fn seed001_overhead_and_interference_on_mpi() {
    let j = tmpdir("seed001-mpi").join("r.json");
    let args = [
        "overhead",
        "--backend",
        "mpi",
        "--hops",
        "1..2",
        "--sizes",
        "16,1000",
        "--repetitions",
        "3",
        "--messages",
        "20",
        "--samples",
        "10000",
    ];
    let doc = ok_json(
        mpirun(3, &with_json(&args, &j)),
        &j,
        Duration::from_secs(120),
    );
    assert!(doc["params"]["S"].is_null());
    let ns = doc["sixtimes"]["not_separable"].as_array().unwrap();
    // E at each size: a value, or flagged where a busy host made the echo through the
    // forwarding rank no longer than the direct one.
    let (given, flagged) = sizes_given_or_flagged(&doc, "E");
    assert_eq!(given + flagged, 2, "{}", doc["sixtimes"]);
    // S, F, U and A at every size; R only where a busy host read it below zero beyond noise.
    let everywhere: Vec<&serde_json::Value> = ns.iter().filter(|n| n["sizes"].is_null()).collect();
    assert_eq!(everywhere.len(), 4, "{ns:?}");
    assert!(
        ns.iter()
            .all(|n| n["sizes"].is_null() || n["time"] == "R" || n["time"] == "E"),
        "{ns:?}"
    );
    assert!(doc["params"]["R"].is_object() || ns.iter().any(|n| n["time"] == "R"));
    for k in ["F+S", "A+U", "2(F+E+U)", "o_r"] {
        assert!(measured_or_noted(&doc, k), "{k}: {}", doc["sixtimes"]);
    }
    let j = tmpdir("seed001-mpi-interference").join("r.json");
    let args = [
        "interference",
        "--backend",
        "mpi",
        "--streams",
        "1",
        "--repetitions",
        "2",
        "--messages",
        "20",
        "--samples",
        "10000",
    ];
    let doc = ok_json(
        mpirun(3, &with_json(&args, &j)),
        &j,
        Duration::from_secs(120),
    );
    let rows = doc["interference"].as_array().expect("rows");
    assert_eq!(rows.len(), 1);
    assert!(rows[0]["slowdown"].as_f64().unwrap() > 0.0, "{rows:?}");
    assert!(
        rows[0]["us_per_message"].as_f64().unwrap() > 0.0,
        "{rows:?}"
    );
}

/// `mpirun -np 2 commbench pingpong --backend mpi,B,tcp,shm` with `B`'s options: its addresses
/// go through MPI, each backend's results are there, and `recorded` (what `B` says it used) is
/// in the document.
#[cfg(any(feature = "ofi", feature = "ucx"))]
fn beside_mpi_between_the_same_processes(b: &str, options: &[&str], recorded: &str) {
    let d = tmpdir(&format!("mpi-{b}"));
    let j = d.join("r.json");
    let backends = format!("mpi,{b},tcp,shm");
    let mut args = vec!["pingpong", "--backend", &backends];
    args.extend_from_slice(options);
    args.extend_from_slice(QUICK);
    let doc = ok_json(
        mpirun(2, &with_json(&args, &j)),
        &j,
        Duration::from_secs(180),
    );
    let text = doc.to_string();
    for name in ["mpi", b, "tcp", "shm"] {
        assert!(
            text.contains(&format!("\"{name}\"")),
            "{name} missing from the result"
        );
    }
    assert!(text.contains(recorded), "{recorded} is not recorded");
}

/// The libfabric backend beside MPI (`--features mpi,ofi`), the provider recorded.
#[cfg(feature = "ofi")]
#[test]
fn mpi_ofi_tcp_and_shm_between_the_same_processes() {
    beside_mpi_between_the_same_processes("ofi", &["--ofi-provider", "tcp;ofi_rxm"], "tcp;ofi_rxm");
}

/// The UCX backend beside MPI (`--features mpi,ucx`), the lanes recorded.
#[cfg(feature = "ucx")]
#[test]
fn mpi_ucx_tcp_and_shm_between_the_same_processes() {
    beside_mpi_between_the_same_processes("ucx", &["--ucx-tls", "posix,self"], "posix/memory");
}

/// The matrix of an all-pairs run under `mpirun -np 4`: every ordered pair measured once at
/// each size, the rounds of the tournament recorded, four ranks' timers.
fn complete_matrix(doc: &Value, ranks: u64) {
    assert_eq!(doc["status"], "complete", "{}", doc["error"]);
    let m = &doc["allpairs"];
    assert_eq!(m["ranks"], ranks);
    assert_eq!(m["hosts"].as_array().expect("hosts").len() as u64, ranks);
    assert_eq!(m["timers"].as_array().expect("timers").len() as u64, ranks);
    let cells = m["cells"].as_array().expect("cells");
    for size in [8, 4096] {
        let mut seen: Vec<(u64, u64)> = cells
            .iter()
            .filter(|c| c["size"] == size && c.get("retest").is_none())
            .map(|c| (c["source"].as_u64().unwrap(), c["dest"].as_u64().unwrap()))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(
            seen.len() as u64,
            ranks * (ranks - 1),
            "size {size}: {seen:?}"
        );
    }
    // A suspect measured again alone (four ranks on two CPUs make some) has four times the
    // trials.
    for c in cells {
        let want = if c.get("retest").is_some() {
            4 * QUICK_TRIALS
        } else {
            QUICK_TRIALS
        };
        assert_eq!(c["stats"]["n"].as_u64(), Some(want), "{c}");
        assert!(c["stats"]["median"].as_f64().unwrap() > 0.0, "{c}");
    }
    // The tournament over 4 ranks: 3 rounds of 2 pairs at each size.
    let main: Vec<&Value> = m["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["retest"] == false)
        .collect();
    assert_eq!(main.len(), 6);
    assert!(main
        .iter()
        .all(|r| r["pairs"].as_array().unwrap().len() == 2));
}

#[test]
fn allpairs_on_four_ranks_over_mpi_and_shm() {
    for backend in ["mpi", "shm"] {
        let doc = mpi_doc(
            4,
            &format!("allpairs-{backend}"),
            &["allpairs", "--backend", backend, "--sizes", "8,4K"],
        );
        complete_matrix(&doc, 4);
        assert_eq!(doc["environment"]["backend"], backend);
    }
}

/// Two pairs streaming at once (`bandwidth --pairs 2`) under `mpirun -np 4`, over MPI and over
/// every other backend this build has between the same four processes: every backend's
/// points keep both pairs' samples and their aggregates, and the pairs' hosts are recorded.
#[test]
fn two_pairs_at_once_on_every_backend_under_mpirun() {
    let mut backends = vec!["mpi", "tcp", "shm"];
    if cfg!(feature = "ofi") {
        backends.push("ofi");
    }
    if cfg!(feature = "ucx") {
        backends.push("ucx");
    }
    let list = backends.join(",");
    let doc = mpi_doc(
        4,
        "mpi-pairs",
        &[
            "bandwidth",
            "--backend",
            &list,
            "--pairs",
            "2",
            "--sizes",
            "8,64K",
            "--window",
            "16",
            "--npp",
            "2",
        ],
    );
    let points = doc["points"].as_array().expect("points");
    assert_eq!(points.len(), 2 * backends.len(), "{list}");
    for p in points {
        let each = p["pair_trial_ns"].as_array().expect("every pair's samples");
        assert_eq!(each.len(), 2, "{}", p["backend"]);
        assert!(each
            .iter()
            .all(|v| v.as_array().map(Vec::len) == Some(QUICK_TRIALS as usize)));
        let names: Vec<&str> = p["pairs"]["aggregates"]
            .as_array()
            .expect("aggregates")
            .iter()
            .filter_map(|a| a["name"].as_str())
            .collect();
        assert_eq!(names, ["makespan", "mean_time", "sum"], "{}", p["backend"]);
    }
    let places = doc["pairs"]["pairs"].as_array().expect("the pairs' places");
    assert_eq!(
        (places[0]["sender"].as_u64(), places[0]["receiver"].as_u64()),
        (Some(0), Some(2))
    );
    assert!(
        places.iter().all(|p| p["crosses_hosts"] == false),
        "one host"
    );
}
