//! The result document: one self-describing JSON per run (design §5).
//!
//! Schema `commbench-result`, version [`SCHEMA_VERSION`]; documented in `docs/result-format.md`.
//! The keys named there as a contract are read by tools outside the project and only ever
//! gain siblings, never change meaning.

/// The record of one measured size, which lives below the document with its analysis.
pub use crate::analysis::point::Point;
use commbench_core::method::timer::TimerReport;
use commbench_core::method::{MethodConfig, NppChoice, PatternKind};
use commbench_core::transport::error::{Error, Result};
use commbench_core::transport::BackendInfo;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;

/// The schema name in every document.
pub const SCHEMA: &str = "commbench-result";
/// The schema version; bumped when a contract key changes meaning (never so far).
pub const SCHEMA_VERSION: u32 = 1;

/// The effective configuration of a run (the `config` object): the method's settings at the
/// top level, then what the command line chose around them.
///
/// Documents written by earlier versions may lack keys (`pattern` came with the second
/// pattern); every key reads back with a default (the method's defaults, ping-pong, empty
/// text, zero), and keys this version does not know are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    /// Sizes, trials, warm-up, npp, cut_coef, timer samples, source, dest and what the
    /// message buffers were asked to be (`buffers`).
    #[serde(flatten, with = "method_keys")]
    pub method: MethodConfig,
    /// The backend, or the comma-separated backends of a run that measured several.
    pub backend: String,
    /// Ranks in the run.
    pub ranks: u32,
    /// `--timeout`, seconds.
    pub timeout_s: f64,
    /// `--poll` (tcp).
    pub poll: bool,
    /// `--wait` (shm), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<String>,
    /// `--cpus`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// `--sim-config`, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sim_config: Option<String>,
    /// `--clock` (mpi), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// `--mpi-threads` (mpi), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_threads: Option<String>,
    /// Every option of each backend that ran, by backend name, as it ran: given on the
    /// command line or the backend's default (ofi's provider, ucx's transports, tcp's
    /// polling, ...; docs/result-format.md). Empty in documents of earlier versions, which
    /// record only the flat keys above.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub backend_options: BTreeMap<String, BackendInfo>,
    /// `--sizes` as written on the command line.
    pub sizes_spec: String,
    /// The kernel timed.
    pub pattern: PatternKind,
    /// `N` of the transpose's `N x N` matrix, for a transpose run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transpose_n: Option<usize>,
    /// Seed 001's program (`echo`, `overhead`, `interference`): which, the echo's distances,
    /// Q's loop and the messages per reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sixtimes: Option<commbench_core::method::sixtimes::SixTimes>,
    /// Underwood & Brightwell's queue benchmark (`queue posted`, `queue unexpected`): which
    /// queue, its lengths, the fractions traversed and whether receives take any source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<commbench_core::method::queue::QueueBench>,
    /// `--drop-warmup`: whether the trials before the steady state of a `warm-up` point were
    /// left out of its statistics (`auto`) or kept (`none`; documents written before it read
    /// so).
    #[serde(default)]
    pub drop_warmup: crate::analysis::steady::DropWarmup,
    /// Which launch of a set this run was (`--launches`); absent for a run on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<LaunchOf>,
    /// `--expect-rate`, MB/s (10^6 B/s): the rate no point should exceed (a link's), which
    /// the report card holds the points against; absent when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_rate_mb_s: Option<f64>,
}

/// A run's place in a set of launches of one measurement (`--launches L`, each launch in
/// fresh processes): launch `index` (from 1) of `of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchOf {
    /// This launch, from 1.
    pub index: u32,
    /// Launches in the set.
    pub of: u32,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            method: MethodConfig::default(),
            backend: String::new(),
            ranks: 0,
            timeout_s: 0.0,
            poll: false,
            wait: None,
            cpus: None,
            sim_config: None,
            clock: None,
            mpi_threads: None,
            backend_options: BTreeMap::new(),
            sizes_spec: String::new(),
            pattern: PatternKind::PingPong,
            transpose_n: None,
            sixtimes: None,
            queue: None,
            drop_warmup: Default::default(),
            launch: None,
            expect_rate_mb_s: None,
        }
    }
}

/// The method's keys of [`RunConfig`] as the document spells them. `npp` is
/// `{"mode":"auto","res_npp","npp_init","npptrial"}`, `{"mode":"fixed","value"}` or
/// `{"mode":"study","values"}`: every choice keeps its numbers in an object, which
/// [`NppChoice`]'s own serde form cannot do for the fixed and study values.
mod method_keys {
    use super::{MethodConfig, NppChoice};
    use commbench_core::method::buffers::BufferOptions;
    use commbench_core::method::pairs::Concurrent;
    use commbench_core::method::until::UntilCi;
    use commbench_core::transport::Rank;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// The fixed and study choices with their numbers in an object; the automatic choice as
    /// [`NppChoice`] writes it.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "snake_case", tag = "mode")]
    enum Npp {
        Fixed {
            value: u64,
        },
        Study {
            values: Vec<u64>,
        },
        #[serde(untagged)]
        Auto(NppChoice),
    }

    impl From<NppChoice> for Npp {
        fn from(c: NppChoice) -> Self {
            match c {
                NppChoice::Fixed(value) => Npp::Fixed { value },
                NppChoice::Study(values) => Npp::Study { values },
                auto => Npp::Auto(auto),
            }
        }
    }

    impl From<Npp> for NppChoice {
        fn from(n: Npp) -> Self {
            match n {
                Npp::Fixed { value } => NppChoice::Fixed(value),
                Npp::Study { values } => NppChoice::Study(values),
                Npp::Auto(auto) => auto,
            }
        }
    }

    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    struct Keys {
        sizes: Vec<u64>,
        trials: u64,
        warmup: u64,
        npp: Npp,
        cut_coef: f64,
        timer_samples: u64,
        source: Rank,
        dest: Rank,
        /// Absent from documents written before the buffer options: the default, what
        /// those runs measured.
        buffers: BufferOptions,
        /// Absent from documents of fixed counts and of versions before it.
        #[serde(skip_serializing_if = "Option::is_none")]
        until: Option<UntilCi>,
        /// Absent from documents of one pair and of versions before pairs streamed at once.
        #[serde(skip_serializing_if = "Option::is_none")]
        pairs: Option<Concurrent>,
    }

    impl Default for Keys {
        fn default() -> Self {
            Keys::from(MethodConfig::default())
        }
    }

    impl From<MethodConfig> for Keys {
        fn from(m: MethodConfig) -> Self {
            let MethodConfig {
                sizes,
                trials,
                warmup,
                npp,
                cut_coef,
                timer_samples,
                source,
                dest,
                buffers,
                until,
                pairs,
            } = m;
            Keys {
                sizes,
                trials,
                warmup,
                npp: npp.into(),
                cut_coef,
                timer_samples,
                source,
                dest,
                buffers,
                until,
                pairs,
            }
        }
    }

    impl From<Keys> for MethodConfig {
        fn from(k: Keys) -> Self {
            MethodConfig {
                sizes: k.sizes,
                trials: k.trials,
                warmup: k.warmup,
                npp: k.npp.into(),
                cut_coef: k.cut_coef,
                timer_samples: k.timer_samples,
                source: k.source,
                dest: k.dest,
                buffers: k.buffers,
                until: k.until,
                pairs: k.pairs,
            }
        }
    }

    pub fn serialize<S: Serializer>(m: &MethodConfig, s: S) -> Result<S::Ok, S::Error> {
        Keys::from(m.clone()).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<MethodConfig, D::Error> {
        Keys::deserialize(d).map(MethodConfig::from)
    }
}

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
            clocksource: commbench_core::transport::clock::kernel_clocksource(),
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

/// One rule's line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardRule {
    /// Hoefler & Belli's rule number (5 to 11).
    pub rule: u32,
    /// What the rule asks, in two or three words (`confidence intervals`).
    pub topic: String,
    /// Whether the run leaves something here the reader should doubt.
    pub flagged: bool,
    /// What the run did, in one sentence or two.
    pub says: String,
    /// The indices in `points` of the points this rule flags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<usize>,
}

/// The document's `report_card`: what the run did for rules 5-11 of Hoefler & Belli
/// (SC'15), computed by [`crate::analysis::report_card`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportCard {
    /// Where the rules come from.
    pub source: String,
    /// One line per rule that applies, by rule number.
    pub rules: Vec<CardRule>,
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
    /// The effective configuration (every default filled in); `None` when a document written
    /// by an earlier version recorded none (a run with `--npp N` wrote `null`).
    #[serde(default)]
    pub config: Option<RunConfig>,
    /// Where it ran.
    pub environment: Environment,
    /// The timer characterisation (seed 000 §3.1), when it was reached.
    pub timer: Option<TimerSection>,
    /// One entry per measured size, in the order measured.
    pub points: Vec<Point>,
    /// Fitted models (seeds 002 and 003) of the median time against size, when the run
    /// measured at least two sizes.
    #[serde(default)]
    pub fit: Option<crate::analysis::model::FitSection>,
    /// Seed 001's six per-message times, each a line in the message size (`commbench
    /// overhead`, `echo`; docs/seed001.md): a contract key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<crate::analysis::sixtimes::Params>,
    /// Seed 001 §5.2's interference rows (`commbench interference`): a contract key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<Vec<crate::analysis::sixtimes::InterferenceRow>>,
    /// The rest of seed 001's analysis: the echo per distance, the measured sums, Q's
    /// calibration, the times not separable on the transport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sixtimes: Option<crate::analysis::sixtimes::Detail>,
    /// Underwood & Brightwell's queue benchmarks: per series, the line of the median one-way
    /// time against the queue entries (docs/seed004.md): a contract key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<Vec<crate::analysis::queue::QueueLine>>,
    /// The all-pairs matrix (`commbench allpairs`): every cell, the schedule and its rounds,
    /// the attribution and the verdicts (docs/allpairs.md): a contract key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allpairs: Option<crate::analysis::matrix::MatrixSection>,
    /// Pairs that streamed at once (`bandwidth --pairs`): their placement, how each sample
    /// started, every pair's hosts and whether it crosses them. Absent otherwise and in
    /// documents written before pairs streamed at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<crate::analysis::pairs::PairsSection>,
    /// The max-rate model of Gropp, Olson and Samfass fitted to a sweep of pairs, per backend
    /// and window (`analysis::maxrate`). Absent without two numbers of pairs and two sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rate: Option<Vec<crate::analysis::maxrate::MaxRateFit>>,
    /// What the run did for rules 5-11 of Hoefler & Belli (SC'15): one line per rule, the
    /// points each flags (docs/result-format.md). Absent for documents without points and in
    /// documents written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_card: Option<ReportCard>,
    /// `complete`, `partial` when the run failed after some points, or `interrupted` when a
    /// signal stopped it between sizes.
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
    /// JSON has no NaN or infinity: serde_json writes an undefined statistic (the coefficient
    /// of variation of a zero mean) as `null`, which reads back as NaN
    /// ([`commbench_core::stats::f64_or_nan`]).
    pub fn write_json<W: Write>(&self, w: W) -> Result<()> {
        let mut w = std::io::BufWriter::new(w);
        serde_json::to_writer(&mut w, self)
            .map_err(|e| Error::io("writing the result document", e.into()))?;
        w.write_all(b"\n")
            .map_err(|e| Error::io("writing the result document", e))?;
        w.flush()
            .map_err(|e| Error::io("writing the result document", e))
    }

    /// Read a document back, checking schema and version.
    pub fn read_json(s: &str) -> Result<ResultDoc> {
        /// The keys that say what a document is, read first (the rest skipped, nothing of it
        /// held: an all-pairs document of a thousand ranks is most of a gigabyte).
        #[derive(Deserialize)]
        struct Head {
            schema: Option<serde_json::Value>,
            version: Option<serde_json::Value>,
        }
        let head: Head = match serde_json::from_str(s) {
            Ok(h) => h,
            // JSON, but not an object: no schema.
            Err(_) if serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok() => Head {
                schema: None,
                version: None,
            },
            Err(e) => return Err(Error::Config(format!("not a JSON document: {e}"))),
        };
        match head.schema.as_ref().and_then(|s| s.as_str()) {
            Some(SCHEMA) => {}
            other => {
                return Err(Error::Config(format!(
                    "not a commbench result (schema {other:?}, expected {SCHEMA:?})"
                )))
            }
        }
        let ver = head.version.as_ref().and_then(|s| s.as_u64()).unwrap_or(0);
        if ver != SCHEMA_VERSION as u64 {
            return Err(Error::Config(format!(
                "result schema version {ver} is not supported (this commbench reads {SCHEMA_VERSION})"
            )));
        }
        // serde quotes what it did not expect as it is: escape the line breaks a document's
        // text may hold, so that the reason stays one line.
        let doc: ResultDoc = serde_json::from_str(s).map_err(|e| {
            let reason = commbench_core::transport::error::escape_controls(&e.to_string());
            Error::Config(format!("malformed result document: {reason}"))
        })?;
        doc.check_counts()?;
        Ok(doc)
    }

    /// Counts no run can have written, which the analysis would overflow on: `npp` times the
    /// trips per iteration (the divisor of every one-way time) or the trials kept plus those
    /// removed beyond `u64`.
    pub(crate) fn check_counts(&self) -> Result<()> {
        for (i, p) in self.points.iter().enumerate() {
            let bad = |what: String| {
                Err(Error::Config(format!(
                    "malformed result document: point {} ({} B): {what}",
                    i + 1,
                    p.size
                )))
            };
            if p.npp
                .max(1)
                .checked_mul(p.trips_per_iteration.max(1))
                .is_none()
            {
                return bad(format!(
                    "npp {} times trips_per_iteration {} is beyond 64 bits",
                    p.npp, p.trips_per_iteration
                ));
            }
            if p.filtered.kept.checked_add(p.filtered.removed).is_none() {
                return bad(format!(
                    "{} trials kept and {} removed are beyond 64 bits",
                    p.filtered.kept, p.filtered.removed
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Documents as commbench 0.1.0 wrote them before the run configuration was typed: the
    /// configuration's keys in alphabetical order, and `null` for a run with `--npp N`.
    const SWEEP: &str = include_str!("testdata/v0.1-sweep.json");
    const FIXED: &str = include_str!("testdata/v0.1-fixed-npp.json");

    fn rewritten(doc: &ResultDoc) -> ResultDoc {
        let mut buf = Vec::new();
        doc.write_json(&mut buf).unwrap();
        ResultDoc::read_json(std::str::from_utf8(&buf).unwrap()).unwrap()
    }

    #[test]
    fn earlier_documents_read() {
        let doc = ResultDoc::read_json(SWEEP).unwrap();
        let c = doc.config.as_ref().expect("a configuration");
        assert_eq!(c.method.sizes, [8, 64, 512, 4096]);
        assert_eq!((c.method.trials, c.method.warmup), (5, 1));
        assert_eq!((c.method.source, c.method.dest), (0, 1));
        assert_eq!((c.backend.as_str(), c.ranks), ("sim", 64));
        assert_eq!(c.sizes_spec, "8,64,512,4K");
        assert_eq!(c.pattern, PatternKind::PingPong);
        assert_eq!((c.timeout_s, c.poll, c.transpose_n), (30.0, false, None));
        assert_eq!(rewritten(&doc), doc);

        let doc = ResultDoc::read_json(FIXED).unwrap();
        assert_eq!(doc.config, None);
        assert_eq!(rewritten(&doc), doc);
    }

    #[test]
    fn missing_and_unknown_config_keys() {
        // Before the second pattern there was no `pattern`; unknown keys are ignored.
        let mut v: serde_json::Value = serde_json::from_str(SWEEP).unwrap();
        let c = v["config"].as_object_mut().unwrap();
        c.remove("pattern");
        c.remove("timer_samples");
        c.insert("from_the_future".into(), 1.into());
        let doc = ResultDoc::read_json(&v.to_string()).unwrap();
        let c = doc.config.unwrap();
        assert_eq!(c.pattern, PatternKind::PingPong);
        assert_eq!(
            c.method.timer_samples,
            MethodConfig::default().timer_samples
        );
        assert_eq!(c.method.trials, 5);
        let c: RunConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, RunConfig::default());
    }

    #[test]
    fn buffer_options_are_written_and_old_documents_read_as_the_default() {
        use commbench_core::method::buffers::{BufferOptions, BufferReuse, CacheState};
        // Before the options: the default, what those runs measured.
        let doc = ResultDoc::read_json(SWEEP).unwrap();
        let c = doc.config.as_ref().unwrap();
        assert_eq!(c.method.buffers, BufferOptions::default());
        assert!(doc.points.iter().all(|p| p.buffers.is_none()));
        let v = serde_json::to_value(c).unwrap();
        assert_eq!(
            v["buffers"],
            serde_json::json!({"validate": false, "cache": "warm", "buffers": "multiple", "offset": 0})
        );
        let asked = BufferOptions {
            validate: true,
            cache: CacheState::Cold,
            cache_pool: Some(64 << 20),
            buffers: BufferReuse::Single,
            align: Some(4096),
            offset: 3,
        };
        let c = RunConfig {
            method: MethodConfig {
                buffers: asked.clone(),
                ..MethodConfig::default()
            },
            ..RunConfig::default()
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v["buffers"],
            serde_json::json!({"validate": true, "cache": "cold", "cache_pool": 67108864,
                "buffers": "single", "align": 4096, "offset": 3})
        );
        let back: RunConfig = serde_json::from_value(v).unwrap();
        assert_eq!(back.method.buffers, asked);
        // A point keeps what its buffers were.
        let mut p = crate::analysis::testkit::point_of("pingpong", 8, vec![100, 110, 120]);
        p.buffers = Some(commbench_core::method::engine::PointBuffers {
            validated_trials: 3,
            cache_pool: None,
            source_alignment: Some(1),
            dest_alignment: Some(8),
        });
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v["buffers"],
            serde_json::json!({"validated_trials": 3, "source_alignment": 1, "dest_alignment": 8})
        );
        assert_eq!(serde_json::from_value::<Point>(v).unwrap(), p);
    }

    #[test]
    fn every_npp_choice_is_written_and_read_back() {
        for npp in [
            NppChoice::Fixed(9),
            NppChoice::Study(vec![1, 9, 18, 36]),
            MethodConfig::default().npp,
        ] {
            let c = RunConfig {
                method: MethodConfig {
                    npp: npp.clone(),
                    ..MethodConfig::default()
                },
                pattern: PatternKind::Bandwidth { window: 64 },
                wait: Some("spin".into()),
                ..RunConfig::default()
            };
            let v = serde_json::to_value(&c).unwrap();
            assert!(v["npp"]["mode"].is_string(), "{v}");
            assert_eq!(v["wait"], "spin");
            assert!(v.get("cpus").is_none() && v.get("transpose_n").is_none());
            let back: RunConfig = serde_json::from_value(v).unwrap();
            assert_eq!(back, c);
        }
        let v = serde_json::to_value(RunConfig {
            method: MethodConfig {
                npp: NppChoice::Fixed(9),
                ..MethodConfig::default()
            },
            ..RunConfig::default()
        })
        .unwrap();
        assert_eq!(v["npp"], serde_json::json!({"mode": "fixed", "value": 9}));
    }
}
