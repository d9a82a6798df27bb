//! One all-pairs cell as rank 0 keeps it: a fixed-size summary of its trials, computed on the
//! source that measured it, so that rank 0's memory grows with the cells and not with the
//! trials (a thousand ranks make a million cells a size). The raw trials stay where they were
//! measured ([`RawMode`]): written by each process to a file of its own ([`RawSink`]), kept
//! in the record only for the retested cells, or not kept at all.

use crate::method::engine::{one_way_us_sorted, PointBuffers, RawPoint};
use crate::method::until::Stopping;
use crate::stats::{self, Interval, Summary};
use crate::transport::error::{Error, Result};
use crate::transport::Rank;
use serde::{Deserialize, Serialize};

/// The statistics of a cell's one-way times (us) that the attribution, the report and a
/// comparison need: a fixed size whatever the trials.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CellStats {
    /// Trials.
    pub n: u64,
    /// Smallest one-way time.
    pub min: f64,
    /// Median one-way time (seed 000 §3.4).
    pub median: f64,
    /// Mean one-way time.
    pub mean: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest one-way time.
    pub max: f64,
    /// Distribution-free 95 % interval of the median (`(min, max)` at 5 trials or fewer).
    pub ci95_median: Interval,
}

impl CellStats {
    /// The statistics of `sorted` one-way times; `None` without any.
    pub fn of_sorted(sorted: &[f64]) -> Option<Self> {
        stats::summarize(sorted).map(|s| Self::of_summary(&s))
    }

    /// The fields of a full summary (documents written before cells were summarised carry
    /// one).
    pub fn of_summary(s: &Summary) -> Self {
        CellStats {
            n: s.n,
            min: s.min,
            median: s.median,
            mean: s.mean,
            p90: s.p90,
            p99: s.p99,
            max: s.max,
            ci95_median: s.ci95_median,
        }
    }
}

/// Where a cell's raw trial times go (`--raw`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawMode {
    /// Every cell's trials, written by the process that measured it to its own file
    /// ([`RawSink`]); the retested cells' also in their records.
    All,
    /// Only the retested cells' trials, in their records (a few cells: the suspects).
    #[default]
    Suspects,
    /// None: every cell is its summary.
    None,
}

impl RawMode {
    /// Name on the command line and in the result document.
    pub fn name(self) -> &'static str {
        match self {
            RawMode::All => "all",
            RawMode::Suspects => "suspects",
            RawMode::None => "none",
        }
    }
}

/// One cell measured once, as rank 0 keeps it and the result document records it
/// (`allpairs.cells[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "CellWire")]
pub struct CellRecord {
    /// The timing source.
    pub source: Rank,
    /// The echoing dest.
    pub dest: Rank,
    /// Message size, bytes.
    pub size: u64,
    /// Index of its round in the run's rounds.
    pub round: u32,
    /// Whether it was measured again alone to confirm a suspect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retest: bool,
    /// `npp` used.
    pub npp: u64,
    /// `npp` the formula of §3.3 gave (None when given).
    #[serde(default)]
    pub npp_calculated: Option<u64>,
    /// Message times per iteration (2: a ping-pong).
    pub trips_per_iteration: u64,
    /// The one-way times' statistics, us.
    pub stats: CellStats,
    /// Every trial time, ns, the source's `min_ov` subtracted, in the order measured: kept
    /// only where [`RawMode`] keeps them in the record (empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trial_ns: Vec<i64>,
    /// What the cell's message buffers were, as a point's `buffers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<PointBuffers>,
    /// How the cell stopped when measured until its interval was narrow enough (boxed: most
    /// runs have none, and rank 0 holds a million cells a size at a thousand ranks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ci: Option<Box<Stopping>>,
}

/// A cell as documents hold it: those written before cells were summarised have the full
/// `one_way_us` summary and every trial, and no `stats`.
#[derive(Deserialize)]
struct CellWire {
    source: Rank,
    dest: Rank,
    size: u64,
    round: u32,
    #[serde(default)]
    retest: bool,
    npp: u64,
    #[serde(default)]
    npp_calculated: Option<u64>,
    trips_per_iteration: u64,
    #[serde(default)]
    stats: Option<CellStats>,
    #[serde(default)]
    one_way_us: Option<Summary>,
    #[serde(default)]
    trial_ns: Vec<i64>,
    #[serde(default)]
    buffers: Option<PointBuffers>,
    #[serde(default)]
    until_ci: Option<Stopping>,
}

impl From<CellWire> for CellRecord {
    fn from(w: CellWire) -> Self {
        let stats = w
            .stats
            .or_else(|| w.one_way_us.as_ref().map(CellStats::of_summary))
            .or_else(|| {
                CellStats::of_sorted(&one_way_us_sorted(
                    &w.trial_ns,
                    w.npp,
                    w.trips_per_iteration,
                ))
            })
            .unwrap_or(CellStats {
                n: 0,
                min: f64::NAN,
                median: f64::NAN,
                mean: f64::NAN,
                p90: f64::NAN,
                p99: f64::NAN,
                max: f64::NAN,
                ci95_median: Interval {
                    lo: f64::NAN,
                    hi: f64::NAN,
                },
            });
        CellRecord {
            source: w.source,
            dest: w.dest,
            size: w.size,
            round: w.round,
            retest: w.retest,
            npp: w.npp,
            npp_calculated: w.npp_calculated,
            trips_per_iteration: w.trips_per_iteration,
            stats,
            trial_ns: w.trial_ns,
            buffers: w.buffers,
            until_ci: w.until_ci.map(Box::new),
        }
    }
}

impl CellRecord {
    /// The record of a cell measured as `point` (a ping-pong) in round `round`, its trials
    /// kept when `keep`.
    pub fn of(
        (source, dest, round): (Rank, Rank, u32),
        retest: bool,
        point: RawPoint,
        keep: bool,
    ) -> Result<Self> {
        let stats = CellStats::of_sorted(&point.one_way_us_sorted()).ok_or_else(|| {
            Error::Protocol(format!(
                "cell {source} -> {dest} at {} B has no trials",
                point.size
            ))
        })?;
        Ok(CellRecord {
            source,
            dest,
            size: point.size,
            round,
            retest,
            npp: point.npp,
            npp_calculated: point.npp_calculated,
            trips_per_iteration: point.trips_per_iteration,
            stats,
            trial_ns: if keep { point.trial_ns } else { Vec::new() },
            buffers: point.buffers,
            until_ci: point.until_ci.map(Box::new),
        })
    }

    /// The one-way time of every trial kept, us, sorted (empty when none was kept).
    pub fn one_way_us_sorted(&self) -> Vec<f64> {
        one_way_us_sorted(&self.trial_ns, self.npp, self.trips_per_iteration)
    }
}

/// One cell's raw trials as a raw file holds them (one JSON line each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawCell {
    /// The timing source.
    pub source: Rank,
    /// The echoing dest.
    pub dest: Rank,
    /// Message size, bytes.
    pub size: u64,
    /// Index of its round in the run's rounds.
    pub round: u32,
    /// `npp` used.
    pub npp: u64,
    /// Message times per iteration.
    pub trips_per_iteration: u64,
    /// Every trial time, ns, as the record's `trial_ns`.
    pub trial_ns: Vec<i64>,
}

/// Where a process writes the raw trials of the cells its ranks measured ([`RawMode::All`]):
/// called on the source rank after each round, from the rank's own thread or coroutine.
pub trait RawSink: Sync {
    /// Append `cells`, measured by rank `rank`.
    fn write(&self, rank: Rank, cells: &[RawCell]) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;

    fn point(trial_ns: Vec<i64>, npp: u64) -> RawPoint {
        RawPoint {
            pattern: "pingpong".into(),
            size: 64,
            npp,
            trips_per_iteration: 2,
            trial_ns,
            ..RawPoint::default()
        }
    }

    #[test]
    fn a_record_summarises_its_trials_whether_it_keeps_them_or_not() {
        let mut rng = Xoshiro256::new(11);
        for case in 0..200 {
            let n = 1 + rng.below(300);
            let npp = 1 + rng.below(8) as u64;
            let scale = 10f64.powf(1.0 + 5.0 * rng.unit());
            let trials: Vec<i64> = (0..n)
                .map(|_| (scale * (1.0 + 3.0 * rng.unit().powi(4))) as i64 + 1)
                .collect();
            let keep = case % 2 == 0;
            let r = CellRecord::of((3, 7, 2), false, point(trials.clone(), npp), keep).unwrap();
            let us = one_way_us_sorted(&trials, npp, 2);
            assert_eq!(r.stats.n, n as u64);
            assert_eq!(Some(r.stats.median), stats::median(&us), "case {case}");
            assert_eq!(r.stats.min, us[0]);
            assert_eq!(r.stats.max, us[n - 1]);
            assert!(r.stats.ci95_median.lo <= r.stats.median);
            assert!(r.stats.ci95_median.hi >= r.stats.median);
            assert!(r.stats.p90 <= r.stats.p99 && r.stats.p99 <= r.stats.max);
            assert_eq!(r.trial_ns.is_empty(), !keep);
            // It reads back as written.
            let back: CellRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap())
                .expect("a record reads back");
            assert_eq!(back, r);
        }
        assert!(CellRecord::of((0, 1, 0), false, point(Vec::new(), 1), true).is_err());
    }

    #[test]
    fn cells_of_earlier_documents_still_read() {
        // Written before cells were summarised: every trial and the full summary.
        let trials = vec![4000i64, 4400, 4200, 9000, 4100];
        let us = one_way_us_sorted(&trials, 1, 2);
        let full = stats::summarize(&us).unwrap();
        let old = serde_json::json!({
            "source": 1, "dest": 0, "size": 8, "round": 4, "npp": 1,
            "npp_calculated": 1, "trips_per_iteration": 2, "trial_ns": trials,
            "one_way_us": full,
        });
        let c: CellRecord = serde_json::from_value(old).unwrap();
        assert_eq!(c.stats, CellStats::of_summary(&full));
        assert_eq!(c.trial_ns.len(), 5);
        assert!(!c.retest);
        // Without the summary, from the trials.
        let bare = serde_json::json!({
            "source": 1, "dest": 0, "size": 8, "round": 4, "npp": 1,
            "trips_per_iteration": 2, "trial_ns": [4000, 4400, 4200],
        });
        let c: CellRecord = serde_json::from_value(bare).unwrap();
        assert_eq!(c.stats.median, 2.1);
        assert_eq!(c.stats.n, 3);
    }

    #[test]
    fn raw_modes_have_their_names() {
        for m in [RawMode::All, RawMode::Suspects, RawMode::None] {
            let s = serde_json::to_string(&m).unwrap();
            assert_eq!(s, format!("\"{}\"", m.name()));
        }
        assert_eq!(RawMode::default(), RawMode::Suspects);
    }
}
