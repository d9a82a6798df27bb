//! The result document: one self-describing JSON per run (design §5).
//!
//! Schema `commbench-result`, version [`SCHEMA_VERSION`]; documented in `docs/result-format.md`.
//! The keys named there as a contract are read by tools outside the project and only ever
//! gain siblings, never change meaning.

use crate::analysis::point::{self, Analysis, Distribution, Filtered, Rates};
use commbench_core::method::engine::RawPoint;
use commbench_core::method::timer::TimerReport;
use commbench_core::stats::Summary;
use commbench_core::transport::error::{Error, Result};
use commbench_core::transport::BackendInfo;
use serde::{Deserialize, Serialize};
use std::io::Write;

/// The schema name in every document.
pub const SCHEMA: &str = "commbench-result";
/// The schema version; bumped when a contract key changes meaning (never so far).
pub const SCHEMA_VERSION: u32 = 1;

/// Where the run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name of rank 0.
    pub hostname: Option<String>,
    /// CPU model of rank 0's host.
    pub cpu_model: Option<String>,
    /// Online CPUs on rank 0's host.
    pub cpus: Option<usize>,
    /// Kernel release and version.
    pub kernel: Option<String>,
    /// The kernel's clock source.
    pub clocksource: Option<String>,
    /// CPUs rank 0 may run on.
    pub affinity: Option<Vec<usize>>,
    /// Operating system and architecture commbench was built for.
    pub target: String,
    /// The backend.
    pub backend: String,
    /// What the backend recorded about itself (mode, wait policy, library version, pinning).
    pub backend_info: BackendInfo,
    /// Ranks in the run.
    pub ranks: u32,
    /// How the ranks were started.
    pub launcher: String,
}

impl Environment {
    /// Read what can be read about this host.
    pub fn probe(backend: &str, backend_info: BackendInfo, ranks: u32, launcher: &str) -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let kernel = match (
            read("/proc/sys/kernel/osrelease"),
            read("/proc/sys/kernel/version"),
        ) {
            (Some(r), Some(v)) => Some(format!("{r} {v}")),
            (r, _) => r,
        };
        let affinity = commbench_core::launch::affinity::pin(None).ok();
        Environment {
            hostname: read("/proc/sys/kernel/hostname"),
            cpu_model,
            cpus: std::thread::available_parallelism().ok().map(|n| n.get()),
            kernel,
            clocksource: commbench_core::method::clock::kernel_clocksource(),
            affinity,
            target: format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS),
            backend: backend.to_string(),
            backend_info,
            ranks,
            launcher: launcher.to_string(),
        }
    }
}

/// The `timer` section: the contract keys plus the full characterisation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimerSection {
    /// The clock characterised (`CLOCK_MONOTONIC`, `MPI_Wtime`, virtual time).
    pub clock: String,
    /// Clock-read pairs.
    pub samples: u64,
    /// `min_ov`, ns.
    pub min_overhead_ns: f64,
    /// `res_timing`, ns.
    pub resolution_ns: f64,
    /// Everything else §3.1 and Appendix A report.
    pub detail: TimerReport,
}

impl From<TimerReport> for TimerSection {
    fn from(t: TimerReport) -> Self {
        TimerSection {
            clock: t.clock.clone(),
            samples: t.samples,
            min_overhead_ns: t.min_overhead_ns,
            resolution_ns: t.resolution_ns,
            detail: t,
        }
    }
}

/// One measured size of one pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Pattern name.
    pub pattern: String,
    /// Backend name.
    pub backend: String,
    /// Message size, bytes.
    pub size: u64,
    /// `npp` used.
    pub npp: u64,
    /// `npp` calculated by §3.3 (null when fixed by the user).
    pub npp_calculated: Option<u64>,
    /// `median_ppt`, ns (null when npp was fixed).
    pub median_ppt_ns: Option<f64>,
    /// Number of trials.
    pub trials: u64,
    /// One-way trips per loop iteration (2 for ping-pong).
    pub trips_per_iteration: u64,
    /// Every raw trial time in ns after subtracting `min_ov`, in the order measured.
    pub trial_ns: Vec<i64>,
    /// Statistics of the one-way time `trial / (trips * npp)`, us.
    pub one_way_us: Summary,
    /// Rates in MB/s (10^6 B/s) using the minimum, median, mean and maximum one-way time.
    pub rate_mb_s: Rates,
    /// The cut_coef-filtered analysis.
    pub filtered: Filtered,
    /// Binned distribution of the one-way time, us.
    pub distribution_us: Distribution,
    /// The smallest distinct one-way times (us) with their frequency.
    pub frequencies_us: Vec<(f64, u64)>,
}

impl Point {
    /// Analyse a raw point (seed 000 §3.4).
    pub fn from_raw(raw: RawPoint, backend: &str, cut_coef: f64) -> Result<Point> {
        let Analysis {
            one_way_us,
            rate_mb_s,
            filtered,
            histogram,
            frequencies,
            ..
        } = point::analyse(
            &raw.trial_ns,
            raw.npp,
            raw.trips_per_iteration,
            raw.size,
            cut_coef,
        )?;
        Ok(Point {
            pattern: raw.pattern,
            backend: backend.to_string(),
            size: raw.size,
            npp: raw.npp,
            npp_calculated: raw.npp_calculated,
            median_ppt_ns: raw.median_ppt_ns,
            trials: raw.trial_ns.len() as u64,
            trips_per_iteration: raw.trips_per_iteration,
            trial_ns: raw.trial_ns,
            one_way_us,
            rate_mb_s,
            filtered,
            distribution_us: histogram,
            frequencies_us: frequencies,
        })
    }
}

/// The whole result of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultDoc {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// [`SCHEMA_VERSION`].
    pub version: u32,
    /// The commbench version that wrote it.
    pub tool_version: String,
    /// The command line, argument by argument.
    pub command: Vec<String>,
    /// The effective configuration (every default filled in).
    pub config: serde_json::Value,
    /// Where it ran.
    pub environment: Environment,
    /// The timer characterisation (seed 000 §3.1), when it was reached.
    pub timer: Option<TimerSection>,
    /// One entry per measured size, in the order measured.
    pub points: Vec<Point>,
    /// Fitted models (seeds 002 and 003) of the median time against size, when the run
    /// measured at least two sizes.
    #[serde(default)]
    pub fit: Option<crate::analysis::fit::FitSection>,
    /// `complete`, or `partial` when the run failed after some points.
    pub status: String,
    /// Why the run failed, when it did.
    pub error: Option<String>,
    /// When the run started (seconds since the Unix epoch).
    pub started_unix_s: u64,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
}

impl ResultDoc {
    /// Write as compact JSON to `w`, streaming (the trial arrays are never copied into a tree;
    /// compact because a run of 2^25 trials holds 2^25 numbers: `jq .` pretty-prints it).
    pub fn write_json<W: Write>(&self, w: W) -> Result<()> {
        let mut w = std::io::BufWriter::new(w);
        serde_json::to_writer(&mut w, &JsonSafe(self))
            .map_err(|e| Error::io("writing the result document", e.into()))?;
        w.write_all(b"\n")
            .map_err(|e| Error::io("writing the result document", e))?;
        w.flush()
            .map_err(|e| Error::io("writing the result document", e))
    }

    /// Read a document back, checking schema and version.
    pub fn read_json(s: &str) -> Result<ResultDoc> {
        let v: serde_json::Value = serde_json::from_str(s)
            .map_err(|e| Error::Config(format!("not a JSON document: {e}")))?;
        match v.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            other => {
                return Err(Error::Config(format!(
                    "not a commbench result (schema {other:?}, expected {SCHEMA:?})"
                )))
            }
        }
        let ver = v.get("version").and_then(|s| s.as_u64()).unwrap_or(0);
        if ver != SCHEMA_VERSION as u64 {
            return Err(Error::Config(format!(
                "result schema version {ver} is not supported (this commbench reads {SCHEMA_VERSION})"
            )));
        }
        serde_json::from_value(v)
            .map_err(|e| Error::Config(format!("malformed result document: {e}")))
    }
}

/// JSON has no NaN or infinity: statistics that are undefined (the coefficient of variation of
/// a zero mean, a standard error from two points) are written as `null` by serde_json and read
/// back as NaN (see [`commbench_core::stats::f64_or_nan`]).
struct JsonSafe<'a, T>(&'a T);

impl<T: Serialize> Serialize for JsonSafe<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}
