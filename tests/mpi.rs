//! The command line under `mpirun` with the mpi backend (issue 6). Built only with
//! `--features mpi` (`cargo test --features mpi --test mpi`); needs Open MPI's `mpirun`.
//! Every run is bounded in time: a hang is a failure, not a stuck test.
#![cfg(feature = "mpi")]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_commbench")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("commbench-mpi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn mpirun(np: u32, args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["-np", &np.to_string()]);
    if np > 2 {
        c.arg("--oversubscribe");
    }
    c.arg(exe()).args(args);
    c
}

/// Run with a wall-clock limit; `(output, finished in time)`.
fn bounded(mut c: Command, limit: Duration) -> (Output, bool) {
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start");
    let start = Instant::now();
    let mut in_time = true;
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            in_time = false;
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (child.wait_with_output().expect("output"), in_time)
}

fn ok_json(c: Command, json: &PathBuf) -> serde_json::Value {
    let (o, in_time) = bounded(c, Duration::from_secs(120));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(in_time, "hung: {err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    serde_json::from_str(&std::fs::read_to_string(json).expect("result document")).expect("JSON")
}

const QUICK: &[&str] = &[
    "--trials",
    "30",
    "--samples",
    "10000",
    "--warmup",
    "5",
    "--quiet",
];

#[test]
fn pingpong_on_mpi_records_library_clock_and_wtick() {
    let d = tmpdir("pp");
    let j = d.join("r.json");
    let mut args = vec!["pingpong", "--backend", "mpi", "--sizes", "0,8,1K"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--json", j.to_str().unwrap()]);
    let doc = ok_json(mpirun(2, &args), &j);
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
        let d = tmpdir(pattern);
        let j = d.join("r.json");
        let mut args = vec![
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
        args.extend_from_slice(QUICK);
        args.extend_from_slice(&["--json", j.to_str().unwrap()]);
        let doc = ok_json(mpirun(4, &args), &j);
        assert_eq!(doc["timer"]["clock"], "CLOCK_MONOTONIC", "{pattern}");
        assert_eq!(doc["points"].as_array().unwrap().len(), 1, "{pattern}");
    }
}

#[test]
fn mpi_tcp_and_shm_between_the_same_processes() {
    let mut args = vec!["pingpong", "--backend", "mpi,tcp,shm"];
    args.extend_from_slice(&["--trials", "30", "--samples", "10000", "--warmup", "5"]);
    let (o, in_time) = bounded(mpirun(2, &args), Duration::from_secs(120));
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(in_time, "hung: {err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    for b in ["mpi", "tcp", "shm"] {
        assert!(out.contains(b), "{b} missing from\n{out}");
    }
}

#[test]
fn transpose_is_verified_with_vector_type_and_packing() {
    let d = tmpdir("transpose");
    let j = d.join("r.json");
    let mut args = vec!["transpose", "--backend", "mpi", "--n", "24"];
    args.extend_from_slice(QUICK);
    args.extend_from_slice(&["--json", j.to_str().unwrap()]);
    let doc = ok_json(mpirun(2, &args), &j);
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
    let mut c = Command::new(exe());
    c.args(["pingpong", "--backend", "mpi"]);
    for v in [
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_SIZE",
        "PMI_RANK",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_PROCID",
    ] {
        c.env_remove(v);
    }
    let (o, in_time) = bounded(c, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&o.stderr);
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
    let killed_at = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if killed_at.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the run hung after rank 1 was killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().expect("output");
    assert!(!o.status.success());
}
