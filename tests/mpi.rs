//! The command line under `mpirun` with the mpi backend (issue 6). Built only with
//! `--features mpi` (`cargo test --features mpi --test mpi`); needs Open MPI's `mpirun`.
//! Every run is bounded in time: a hang is a failure, not a stuck test.
#![cfg(feature = "mpi")]

mod common;

use common::{
    assert_ok, bounded, commbench, ok_json, stderr, stdout, tmpdir, wait_for, with_json, EXE,
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

/// A short run: few trials, a small timer characterisation.
const QUICK: &[&str] = &["--trials", "30", "--samples", "10000", "--warmup", "5"];

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
    assert_eq!(pts[1]["trial_ns"].as_array().unwrap().len(), 30);
    let info = &doc["environment"]["backend_info"];
    assert!(info["library"].as_str().unwrap().contains("MPI"), "{info}");
    assert!(info["wtick_s"].is_number(), "{info}");
    assert_eq!(info["clock"], "MPI_Wtime");
    assert_eq!(doc["timer"]["clock"], "MPI_Wtime");
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
            "--quiet",
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
