//! Starting the ranks: commbench's own local launcher (rank 0 re-executes itself once per other
//! rank), joining a launcher people already have (mpirun, srun), or the simulator's nodes.

use crate::cli::{self, Fatal, Plan};
use crate::output;
use commbench::core::launch::{self as cl, RankEnv};
use commbench::core::method::engine::{Collected, Measurement, Progress};
use commbench::core::method::timer::TimerReport;
use commbench::core::method::transpose::Transpose;
use commbench::core::method::PatternKind;
use commbench::core::{Error, Program};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What running a program on this process's ranks gave.
pub struct Ran {
    /// Ranks in the run.
    pub ranks: u32,
    /// Who started them.
    pub launcher: String,
    /// This process's rank (0 prints the results).
    pub rank: u32,
    /// The run's outcome on this process.
    pub result: Result<(), Error>,
}

/// The programs a run can measure: a pattern, or the column transpose with packing.
pub enum Prog<'a> {
    /// Ping-pong, exchange or bandwidth.
    Bench(Measurement<'a, PatternKind>),
    /// Seed 003's column transpose, packed.
    Pack(Measurement<'a, Transpose>),
}

impl Program for Prog<'_> {
    type Output = ();
    fn run<E: commbench::core::Endpoint>(&self, ep: &mut E) -> Result<(), Error> {
        match self {
            Prog::Bench(b) => b.run(ep),
            Prog::Pack(t) => t.run(ep),
        }
    }
}

impl<'a> Prog<'a> {
    fn new(
        plan: &Plan,
        progress: Option<&'a commbench::core::method::engine::ProgressFn<'a>>,
    ) -> Self {
        match plan.transpose_n {
            Some(n) => Prog::Pack(Measurement::new(
                Transpose { n },
                plan.method.clone(),
                progress,
            )),
            None => Prog::Bench(Measurement::new(plan.kind, plan.method.clone(), progress)),
        }
    }

    fn take(&self) -> Collected {
        match self {
            Prog::Bench(b) => b.take_collected(),
            Prog::Pack(t) => t.take_collected(),
        }
    }
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Run the benchmark of `plan` and report it.
pub fn measure(plan: Plan) -> Result<(), Fatal> {
    let started = Instant::now();
    let started_unix = now_unix();
    if plan.backends.len() > 1 || plan.backends[0] == "mpi" {
        return under_mpi(&plan, started, started_unix);
    }
    let env = if plan.backend == "sim" {
        None
    } else {
        Some(cli::rank_env(&plan.args.backend, plan.ranks)?)
    };
    let is_root = env.as_ref().map(|e| e.rank == 0).unwrap_or(true);
    let bar = output::ProgressBar::new(&plan.args.out, is_root);
    let cb = |p: Progress| bar.update(p);
    let prog = Prog::new(&plan, Some(&cb));
    let ran = run(&plan, env, &prog)?;
    bar.finish();
    if ran.rank != 0 {
        // Ranks other than 0 print nothing but their own failure.
        return ran
            .result
            .map_err(|e| Fatal::run(format!("rank {}: {e}", ran.rank), None));
    }
    let runs = vec![output::BackendRun {
        backend: plan.backend,
        collected: prog.take(),
        result: ran.result,
    }];
    output::finish(&plan, ran.ranks, &ran.launcher, runs, started, started_unix)
}

/// Under an MPI launcher: initialise MPI, then measure each listed backend in turn between the
/// same processes, the raw ones bootstrapped through MPI.
#[cfg(feature = "mpi")]
fn under_mpi(plan: &Plan, started: Instant, started_unix: u64) -> Result<(), Fatal> {
    use commbench::mpi::{Mpi, MpiConfig};
    let mpi = Mpi::init().map_err(|e| {
        Fatal::usage(
            e.reason(),
            "for example: mpirun -np 2 commbench pingpong --backend mpi,tcp,shm",
        )
    })?;
    let (rank, size) = (mpi.rank(), mpi.size());
    plan.method
        .validate(size)
        .map_err(|e| Fatal::usage(e.reason(), format!("mpirun started {size} ranks")))?;
    let mut mcfg = MpiConfig {
        timeout: plan.timeout,
        ..Default::default()
    };
    if let Some(c) = &plan.args.backend.clock {
        mcfg.clock = c
            .parse()
            .map_err(|e| Fatal::usage(format!("--clock {c}: {e}"), "use wtime or monotonic"))?;
    }
    let token = mpi
        .shared_token(plan.timeout)
        .map_err(|e| Fatal::run(e.to_string(), None))?;
    // The launcher's view of this rank, for shm (which meets its peers by job id and token)
    // and for the record.
    let env = RankEnv::detect(None, None, size).map(|mut e| {
        e.token = Some(token.clone());
        e
    });
    let bar = output::ProgressBar::new(&plan.args.out, rank == 0);
    let cb = |p: Progress| bar.update(p);
    let mut runs = Vec::new();
    for &b in &plan.backends {
        let prog = Prog::new(plan, Some(&cb));
        let result = match b {
            "mpi" => mpi.run(&mcfg, &prog),
            #[cfg(feature = "tcp")]
            "tcp" => {
                let cfg = tcp_config(plan)?;
                mpi.rendezvous(plan.timeout)
                    .and_then(|mut r| commbench::tcp::run_rank_over(&mut r, &token, &cfg, &prog))
            }
            #[cfg(feature = "shm")]
            "shm" => {
                let cfg = shm_config(plan)?;
                match &env {
                    Ok(env) => commbench::shm::run_rank(env, None, &cfg, &prog),
                    Err(e) => Err(Error::Config(e.to_string())),
                }
            }
            other => Err(Error::Config(format!(
                "backend `{other}` cannot run beside MPI"
            ))),
        };
        let failed = result.is_err();
        runs.push(output::BackendRun {
            backend: b,
            collected: prog.take(),
            result,
        });
        // On MPI the transpose is measured twice: packed as everywhere, and straight from the
        // matrix with a derived vector datatype.
        if b == "mpi" && !failed {
            if let Some(n) = plan.transpose_n {
                let tv = Measurement::new(Transpose { n }, plan.method.clone(), Some(&cb));
                let result = commbench::mpi::measure_vector(&mpi, &mcfg, &tv);
                let failed = result.is_err();
                runs.push(output::BackendRun {
                    backend: "mpi",
                    collected: tv.take_collected(),
                    result,
                });
                if failed {
                    break;
                }
            }
        }
        if failed {
            break;
        }
    }
    bar.finish();
    if rank != 0 {
        for r in runs {
            if let Err(e) = r.result {
                return Err(Fatal::run(format!("rank {rank}: {}: {e}", r.backend), None));
            }
        }
        return Ok(());
    }
    let launcher = env
        .as_ref()
        .ok()
        .map(launcher_name)
        .unwrap_or_else(|| "mpi".into());
    output::finish(plan, size, &launcher, runs, started, started_unix)
}

#[cfg(not(feature = "mpi"))]
fn under_mpi(_plan: &Plan, _started: Instant, _started_unix: u64) -> Result<(), Fatal> {
    Err(Fatal::usage(
        "measuring several backends in one run, or the mpi backend, needs MPI",
        "rebuild with `cargo build --release --features mpi` and start it under mpirun",
    ))
}

fn run<P: Program>(plan: &Plan, env: Option<RankEnv>, prog: &P) -> Result<Ran, Fatal> {
    match plan.backend {
        #[cfg(feature = "sim")]
        "sim" => {
            let cfg = cli::sim_config(plan.args.backend.sim_config.as_deref())?;
            let n = cfg.nodes();
            plan.method.validate(n).map_err(|e| {
                Fatal::usage(
                    e.reason(),
                    format!("the simulated machine `{}` has {n} nodes", cfg.name),
                )
            })?;
            let result = commbench::sim::run(&cfg, prog).map(drop);
            Ok(Ran {
                ranks: n,
                launcher: "simulator".into(),
                rank: 0,
                result,
            })
        }
        #[cfg(feature = "tcp")]
        "tcp" => run_tcp(
            plan,
            env.ok_or_else(|| Fatal::run("no rank identity", None))?,
            prog,
        ),
        #[cfg(feature = "shm")]
        "shm" => run_shm(
            plan,
            env.ok_or_else(|| Fatal::run("no rank identity", None))?,
            prog,
        ),
        other => Err(Fatal::usage(
            format!("backend `{other}` is not compiled in"),
            "see `commbench backends`",
        )),
    }
}

fn launcher_name(env: &RankEnv) -> String {
    serde_json::to_value(env.launcher)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(feature = "tcp")]
fn tcp_config(plan: &Plan) -> Result<commbench::tcp::TcpConfig, Fatal> {
    Ok(commbench::tcp::TcpConfig {
        poll: plan.args.backend.poll,
        timeout: plan.timeout,
        bind_host: plan.args.backend.bind.clone(),
        cpus: cpu_list(plan)?,
    })
}

/// `--cpus` as a list of CPU numbers (empty: no pinning).
#[cfg(any(feature = "tcp", feature = "shm"))]
fn cpu_list(plan: &Plan) -> Result<Vec<usize>, Fatal> {
    let Some(c) = &plan.args.backend.cpus else {
        return Ok(Vec::new());
    };
    let cpus = commbench::spec::parse_cpu_list(c).map_err(|e| {
        Fatal::usage(
            format!("--cpus: {e}"),
            "for example --cpus 0,1 or --cpus 0-3",
        )
    })?;
    let online = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(bad) = cpus.iter().find(|&&c| c >= 1024) {
        return Err(Fatal::usage(
            format!("--cpus: CPU {bad} does not exist"),
            format!("this host has {online} CPUs"),
        ));
    }
    Ok(cpus)
}

#[cfg(feature = "tcp")]
fn run_tcp<P: Program>(plan: &Plan, mut env: RankEnv, prog: &P) -> Result<Ran, Fatal> {
    use commbench::core::launch::rendezvous::Bootstrap;
    let cfg = tcp_config(plan)?;
    if !env.is_local_launcher() {
        let launcher = launcher_name(&env);
        if env.rendezvous.is_none() {
            return Err(Fatal::usage(
                format!("rank {} of {} has no rendezvous address", env.rank, env.size),
                "give every rank --rendezvous HOST:PORT (rank 0's host and a free port) or set COMMBENCH_RENDEZVOUS",
            ));
        }
        if env.token.is_none() {
            return Err(Fatal::usage(
                "the run has no token",
                "export COMMBENCH_TOKEN=<the same secret on every rank> (e.g. mpirun -x COMMBENCH_TOKEN)",
            ));
        }
        let result = commbench::tcp::run_rank(&env, &cfg, prog).map(drop);
        return Ok(Ran {
            ranks: env.size,
            launcher,
            rank: env.rank,
            result,
        });
    }
    let token = cl::new_token().map_err(|e| Fatal::run(e.to_string(), None))?;
    let host = plan
        .args
        .backend
        .bind
        .clone()
        .unwrap_or_else(|| "127.0.0.1".into());
    let listener = Bootstrap::listen(&format!("{host}:0"))
        .map_err(|e| Fatal::run(format!("cannot hold the rendezvous: {e}"), None))?;
    let addr = listener.local_addr().to_string();
    env.rendezvous = Some(addr.clone());
    env.token = Some(token.clone());
    let vars = vec![
        (cl::ENV_RENDEZVOUS.to_string(), addr),
        (cl::ENV_TOKEN.to_string(), token),
    ];
    run_local(plan, env.size, &vars, || {
        commbench::tcp::run_rank_with_listener(listener, &env, &cfg, prog).map(drop)
    })
}

#[cfg(feature = "shm")]
fn shm_config(plan: &Plan) -> Result<commbench::shm::ShmConfig, Fatal> {
    let a = &plan.args.backend;
    let mut cfg = commbench::shm::ShmConfig {
        timeout: plan.timeout,
        ..Default::default()
    };
    if let Some(w) = &a.wait {
        cfg.wait = w.parse().map_err(|e| {
            Fatal::usage(format!("--wait {w}: {e}"), "use spin, spin-yield or futex")
        })?;
    }
    cfg.cpus = cpu_list(plan)?;
    Ok(cfg)
}

#[cfg(feature = "shm")]
fn run_shm<P: Program>(plan: &Plan, env: RankEnv, prog: &P) -> Result<Ran, Fatal> {
    let cfg = shm_config(plan)?;
    if !env.is_local_launcher() {
        let launcher = launcher_name(&env);
        let result = commbench::shm::run_rank(&env, None, &cfg, prog).map(drop);
        return Ok(Ran {
            ranks: env.size,
            launcher,
            rank: env.rank,
            result,
        });
    }
    let (segment, vars) = commbench::shm::prepare_local(env.size, &cfg).map_err(|e| {
        Fatal::run(
            format!("cannot create the shared-memory segment: {e}"),
            None,
        )
    })?;
    run_local(plan, env.size, &vars, || {
        commbench::shm::run_rank(&env, Some(segment), &cfg, prog).map(drop)
    })
}

/// A local run: start ranks 1..size as children with `vars`, run rank 0 here with `rank0`,
/// then reap the children.
#[cfg(any(feature = "tcp", feature = "shm"))]
fn run_local(
    plan: &Plan,
    size: u32,
    vars: &[(String, String)],
    rank0: impl FnOnce() -> Result<(), Error>,
) -> Result<Ran, Fatal> {
    let mut children = Children::spawn(size, vars)?;
    let result = children.reap(rank0(), plan.timeout);
    Ok(Ran {
        ranks: size,
        launcher: "local".into(),
        rank: 0,
        result,
    })
}

/// The other ranks of a local run, as child processes of rank 0.
struct Children {
    kids: Vec<(u32, Child)>,
}

impl Children {
    /// Start ranks 1..n: this program, the same arguments, and the rank in the environment.
    fn spawn(n: u32, vars: &[(String, String)]) -> Result<Self, Fatal> {
        let exe = std::env::current_exe().map_err(|e| {
            Fatal::run(
                format!("cannot find the commbench executable to start the other ranks: {e}"),
                None,
            )
        })?;
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let job = format!("{}", std::process::id());
        let mut kids = Children { kids: Vec::new() };
        for r in 1..n {
            let mut cmd = Command::new(&exe);
            cmd.args(&args)
                .env(cl::ENV_RANK, r.to_string())
                .env(cl::ENV_SIZE, n.to_string())
                .env(cl::ENV_JOB, &job)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            for (k, v) in vars {
                cmd.env(k, v);
            }
            let child = cmd
                .spawn()
                .map_err(|e| Fatal::run(format!("cannot start rank {r}: {e}"), None))?;
            kids.kids.push((r, child));
        }
        Ok(kids)
    }

    /// Wait for the children after rank 0 finished. On success each must exit 0 within
    /// `timeout`; on failure they get a short grace period and are then killed.
    fn reap(&mut self, result: Result<(), Error>, timeout: Duration) -> Result<(), Error> {
        let grace = if result.is_ok() {
            timeout
        } else {
            Duration::from_secs(2)
        };
        let deadline = Instant::now() + grace;
        let mut first_failure: Option<Error> = None;
        for (r, child) in &mut self.kids {
            let status = loop {
                match child.try_wait() {
                    Ok(Some(s)) => break Some(s),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Ok(None) | Err(_) => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                }
            };
            if result.is_ok() && first_failure.is_none() {
                match status {
                    Some(s) if s.success() => {}
                    Some(s) => {
                        first_failure = Some(Error::PeerLost {
                            peer: *r,
                            detail: format!("its process ended with {s}"),
                        })
                    }
                    None => {
                        first_failure = Some(Error::Timeout {
                            rank: 0,
                            what: format!("rank {r} to exit"),
                            timeout: grace,
                        })
                    }
                }
            }
        }
        self.kids.clear();
        match (result, first_failure) {
            (Err(e), _) => Err(e),
            (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, c) in &mut self.kids {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `commbench timer --backend B`: characterise rank 0's clock on that backend.
pub fn timer_on_backend(
    backend: &str,
    samples: u64,
    sim_config: Option<&str>,
) -> Result<TimerReport, Fatal> {
    match backend {
        #[cfg(feature = "sim")]
        "sim" => {
            let p = commbench::core::method::engine::TimerOnly { samples, rank: 0 };
            let cfg = cli::sim_config(sim_config)?;
            let out = commbench::sim::run(&cfg, &p).map_err(|e| Fatal::run(e.to_string(), None))?;
            out.into_iter()
                .flatten()
                .next()
                .ok_or_else(|| Fatal::run("rank 0 returned no timer report", None))
        }
        _ => {
            let _ = sim_config;
            Ok(commbench::core::method::timer::characterize_with(
                commbench::core::method::clock::monotonic_ns,
                format!("CLOCK_MONOTONIC (as {backend} uses it)"),
                samples,
                commbench::core::method::clock::monotonic_claimed_resolution_ns().map(|x| x as f64),
            ))
        }
    }
}
