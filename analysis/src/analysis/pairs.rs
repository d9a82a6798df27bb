//! Several pairs streaming at once (core `method::pairs`): every pair's samples -> the three
//! aggregates peers disagree on, each with its formula, the message rate beside each, the
//! per-pair distribution and the straggler pair.
//!
//! A sample (trial) `k` of pair `p` moves `B` bytes in `M` messages (per pair: `npp` windows
//! of `W` messages of `n` bytes, twice that when every pair streams both ways) in `t_pk`, as
//! the pair's sender timed it after the same barrier as every other pair. Over `K` pairs:
//!
//! * **makespan** (IMB Uniband/Biband, OSU before 7.4 for the slowest rank): `K B / max_p t_pk`:
//!   what all pairs moved over the time until the last one finished;
//! * **mean time** (OSU 7.4 and later): `K B / mean_p t_pk`;
//! * **sum of rates** (what SOS and perftest summed): `sum_p B / t_pk`, the largest of the
//!   three (the harmonic mean never exceeds the arithmetic one) and the one that can pass a
//!   link's rate when the pairs did not overlap.
//!
//! Each is taken per sample and summarised over the samples (median, its distribution-free
//! 95% interval, min and max); the message rate is the same with `M` for `B`. The 1-byte-class
//! acknowledgement that closes each window is inside `t_pk` but not counted in `B` or `M`.

use commbench_core::method::pairs::{Concurrent, Placement, StartSync};
use commbench_core::stats;
use serde::{Deserialize, Serialize};

/// One aggregate's name, its formula and whose it is.
const AGGREGATES: [(&str, &str, &str); 3] = [
    ("makespan", "K x B / max_p t_p", "IMB Uniband/Biband"),
    (
        "mean_time",
        "K x B / mean_p t_p",
        "OSU 7.4 and later (osu_mbw_mr)",
    ),
    ("sum", "sum_p B / t_p", "sum of per-pair rates"),
];

/// A rate over the samples: its median with the median's distribution-free 95% interval
/// (absent with fewer than 6 samples), the least and the greatest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateSummary {
    /// Median over the samples.
    pub median: f64,
    /// The 95% interval of the median, low end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_low: Option<f64>,
    /// The 95% interval of the median, high end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95_high: Option<f64>,
    /// Least sample.
    pub min: f64,
    /// Greatest sample.
    pub max: f64,
}

impl RateSummary {
    /// The summary of `v` (finite values), `None` when empty; the interval only from as many
    /// samples as a 95% distribution-free interval of the median needs.
    fn of(mut v: Vec<f64>) -> Option<RateSummary> {
        stats::sort_samples(&mut v);
        let median = stats::median(&v)?;
        let n = v.len() as u64;
        let enough = stats::min_samples_for_median_ci(0.95).is_some_and(|m| n >= m);
        let ci = stats::median_ci_ranks(n).filter(|_| enough);
        // The ranks are 0-based.
        let at = |r: u64| v.get(r as usize).copied();
        Some(RateSummary {
            median,
            ci95_low: ci.and_then(|(lo, _)| at(lo)),
            ci95_high: ci.and_then(|(_, hi)| at(hi)),
            min: v[0],
            max: v[v.len() - 1],
        })
    }
}

/// One aggregate of a point's pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// `makespan`, `mean_time` or `sum`.
    pub name: String,
    /// Its formula (`K x B / max_p t_p`), `B` a pair's bytes per sample.
    pub formula: String,
    /// Whose aggregate it is.
    pub after: String,
    /// Aggregate bandwidth, MB/s (10^6 B/s), over the samples.
    pub mb_s: RateSummary,
    /// Aggregate message rate, messages per second, over the samples.
    pub messages_per_s: RateSummary,
}

/// One pair's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairStats {
    /// Its index in the run's pairs.
    pub pair: u32,
    /// Median time of a sample, ns.
    pub median_ns: f64,
    /// Least time of a sample, ns.
    pub min_ns: f64,
    /// Greatest time of a sample, ns.
    pub max_ns: f64,
    /// Bandwidth at the median, MB/s; absent when the median is not positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mb_s: Option<f64>,
    /// Message rate at the median, messages per second; absent as `mb_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages_per_s: Option<f64>,
}

/// The pair whose median sample took longest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Straggler {
    /// Its index in the run's pairs.
    pub pair: u32,
    /// Its median over the median of every pair's median (1: no straggler).
    pub slowdown: f64,
}

/// What a point's pairs add up to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairsPoint {
    /// `K`: pairs streaming at once.
    pub pairs: u32,
    /// `M`: messages one pair's sample counts (`npp` x window, both directions when every pair
    /// streams both ways).
    pub messages_per_sample: u64,
    /// `B`: bytes one pair's sample counts (`M` x size).
    pub bytes_per_sample: u64,
    /// Whether the acknowledgement closing each window is counted in `B` and `M`: never (its
    /// time is inside every sample).
    pub acknowledgements_counted: bool,
    /// Samples every pair measured and the aggregates use.
    pub samples: u64,
    /// Samples left out of the aggregates: some pair's time was not positive (a clock too
    /// coarse for the loop), so no rate can be taken from it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unusable_samples: u64,
    /// makespan, mean_time and sum, in that order (empty when no sample was usable).
    pub aggregates: Vec<Aggregate>,
    /// Every pair's samples summarised, in the order of the pairs.
    pub per_pair: Vec<PairStats>,
    /// The slowest pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub straggler: Option<Straggler>,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

impl PairsPoint {
    /// The aggregate `name` (`makespan`, `mean_time`, `sum`), when the samples gave one.
    pub fn aggregate(&self, name: &str) -> Option<&Aggregate> {
        self.aggregates.iter().find(|a| a.name == name)
    }
}

/// `x` per `ns` nanoseconds as per second, `/1e6` for MB/s.
fn per_s(x: f64, ns: f64) -> f64 {
    x * 1e9 / ns
}

/// The aggregates of `pair_ns` (every pair's trial times, ns, in the order of the pairs), each
/// pair's sample moving `messages` messages of `size` bytes; the first `skip` samples of every
/// pair left out (a warm-up the point dropped). `None` without pairs or samples, or when the
/// pairs' samples differ in number.
pub fn analyse(pair_ns: &[Vec<i64>], messages: u64, size: u64, skip: usize) -> Option<PairsPoint> {
    let k = pair_ns.len();
    let n = pair_ns.first()?.len();
    if n <= skip || pair_ns.iter().any(|v| v.len() != n) {
        return None;
    }
    let bytes = messages.saturating_mul(size);
    let (b, m, kf) = (bytes as f64, messages as f64, k as f64);
    let mut per = [(); 3].map(|_| (Vec::new(), Vec::new()));
    let mut unusable = 0u64;
    for s in skip..n {
        let t: Vec<f64> = pair_ns.iter().map(|v| v[s] as f64).collect();
        if t.iter().any(|&x| x <= 0.0) {
            unusable += 1;
            continue;
        }
        let max = t.iter().copied().fold(0.0, f64::max);
        let mean = t.iter().sum::<f64>() / kf;
        let inv: f64 = t.iter().map(|&x| 1.0 / x).sum();
        for (i, (times_b, times_m)) in per.iter_mut().enumerate() {
            let (xb, xm) = match i {
                0 => (per_s(kf * b, max), per_s(kf * m, max)),
                1 => (per_s(kf * b, mean), per_s(kf * m, mean)),
                _ => (b * 1e9 * inv, m * 1e9 * inv),
            };
            times_b.push(xb / 1e6);
            times_m.push(xm);
        }
    }
    let aggregates = AGGREGATES
        .iter()
        .zip(per)
        .filter_map(|(&(name, formula, after), (vb, vm))| {
            Some(Aggregate {
                name: name.into(),
                formula: formula.into(),
                after: after.into(),
                mb_s: RateSummary::of(vb)?,
                messages_per_s: RateSummary::of(vm)?,
            })
        })
        .collect();
    let per_pair: Vec<PairStats> = pair_ns
        .iter()
        .enumerate()
        .filter_map(|(i, v)| pair_stats(i as u32, &v[skip..], b, m))
        .collect();
    Some(PairsPoint {
        pairs: k as u32,
        messages_per_sample: messages,
        bytes_per_sample: bytes,
        acknowledgements_counted: false,
        samples: (n - skip) as u64,
        unusable_samples: unusable,
        aggregates,
        straggler: straggler(&per_pair),
        per_pair,
    })
}

/// One pair's samples: their median, least and greatest, and the rates at the median.
fn pair_stats(pair: u32, ns: &[i64], b: f64, m: f64) -> Option<PairStats> {
    let mut v: Vec<f64> = ns.iter().map(|&x| x as f64).collect();
    stats::sort_samples(&mut v);
    let median_ns = stats::median(&v)?;
    let rate = |x: f64| (median_ns > 0.0).then(|| per_s(x, median_ns));
    Some(PairStats {
        pair,
        median_ns,
        min_ns: v[0],
        max_ns: v[v.len() - 1],
        mb_s: rate(b).map(|r| r / 1e6),
        messages_per_s: rate(m),
    })
}

/// The pair with the longest median, against the median of the pairs' medians.
fn straggler(per_pair: &[PairStats]) -> Option<Straggler> {
    let slowest = per_pair
        .iter()
        .max_by(|a, b| a.median_ns.total_cmp(&b.median_ns))?;
    let mut medians: Vec<f64> = per_pair.iter().map(|p| p.median_ns).collect();
    stats::sort_samples(&mut medians);
    let typical = stats::median(&medians)?;
    (typical > 0.0).then(|| Straggler {
        pair: slowest.pair,
        slowdown: slowest.median_ns / typical,
    })
}

/// Where one pair ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairPlace {
    /// The rank that sends and times.
    pub sender: u32,
    /// The rank that receives.
    pub receiver: u32,
    /// The sender's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_host: Option<String>,
    /// The receiver's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_host: Option<String>,
    /// Whether its messages cross from one host to another (absent: hosts unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crosses_hosts: Option<bool>,
}

/// The document's record of the pairs that streamed at once: how they were placed, how each
/// sample started, where each pair ran, and a note when the placement mixes pairs that cross
/// hosts with pairs that do not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairsSection {
    /// How the pairs were placed (block, cyclic, file).
    pub placement: Placement,
    /// How every sample's pairs started together.
    pub start: StartSync,
    /// Every pair, in order.
    pub pairs: Vec<PairPlace>,
    /// Why the aggregate may not be what was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl PairsSection {
    /// The pairs of `c` on the hosts of every rank (`hosts`, in rank order; empty when
    /// unknown).
    pub fn of(c: &Concurrent, hosts: &[String]) -> PairsSection {
        let host = |r: u32| hosts.get(r as usize).cloned();
        let pairs: Vec<PairPlace> = c
            .pairs
            .iter()
            .map(|p| {
                let (s, r) = (host(p.sender), host(p.receiver));
                PairPlace {
                    sender: p.sender,
                    receiver: p.receiver,
                    crosses_hosts: s.as_ref().zip(r.as_ref()).map(|(s, r)| s != r),
                    sender_host: s,
                    receiver_host: r,
                }
            })
            .collect();
        let crossing: Vec<usize> = (0..pairs.len())
            .filter(|&i| pairs[i].crosses_hosts == Some(true))
            .collect();
        let within = pairs
            .iter()
            .filter(|p| p.crosses_hosts == Some(false))
            .count();
        let mut distinct: Vec<&String> = hosts.iter().collect();
        distinct.sort();
        distinct.dedup();
        let name = placement_name(&c.placement);
        let note = if !crossing.is_empty() && within > 0 {
            Some(format!(
                "{} of {} pairs cross hosts and {within} do not: the aggregate mixes rates \
                 between hosts with rates within one (the launcher placed the ranks otherwise \
                 than --placement {name} assumes; see pairs.pairs)",
                crossing.len(),
                pairs.len(),
            ))
        } else if crossing.is_empty() && distinct.len() > 1 {
            Some(format!(
                "the ranks run on {} hosts but no pair crosses between them: the aggregate is \
                 each host's own rate (ranks dealt to the hosts in turn pair across with \
                 --placement cyclic, ranks filled host by host with block)",
                distinct.len()
            ))
        } else {
            None
        };
        PairsSection {
            placement: c.placement.clone(),
            start: c.start,
            pairs,
            note,
        }
    }
}

/// A placement as `--placement` names it.
pub fn placement_name(p: &Placement) -> String {
    match p {
        Placement::Block => "block".into(),
        Placement::Cyclic => "cyclic".into(),
        Placement::File { path } => path.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use commbench_core::stats::Xoshiro256;

    /// Pairs' samples drawn at random, with a straggler sometimes and an unusable sample
    /// sometimes: every aggregate against its formula computed here sample by sample, the
    /// order makespan <= mean time <= sum on every sample, and the straggler found.
    #[test]
    fn aggregates_follow_their_formulas_on_random_pairs() {
        let mut rng = Xoshiro256::new(0xa66);
        for _ in 0..300 {
            let k = 1 + rng.below(12);
            let n = 1 + rng.below(60);
            let base = rng.log_range(50.0, 5e7);
            let slow = rng.below(k);
            let factor = if rng.below(2) == 0 {
                1.0
            } else {
                rng.range(1.5, 8.0)
            };
            let mut pairs: Vec<Vec<i64>> = (0..k)
                .map(|p| {
                    (0..n)
                        .map(|_| {
                            let f = if p == slow { factor } else { 1.0 };
                            (base * f * rng.range(1.0, 1.3)).round() as i64
                        })
                        .collect()
                })
                .collect();
            if rng.below(4) == 0 {
                let (p, s) = (rng.below(k), rng.below(n));
                pairs[p][s] = -(rng.below(100) as i64);
            }
            let (msgs, size) = (1 + rng.below(5000) as u64, 1 + rng.below(1 << 22) as u64);
            let got = analyse(&pairs, msgs, size, 0).expect("samples");
            let b = (msgs * size) as f64;
            let usable: Vec<usize> = (0..n).filter(|&s| pairs.iter().all(|v| v[s] > 0)).collect();
            assert_eq!(got.unusable_samples as usize, n - usable.len());
            if usable.is_empty() {
                assert!(got.aggregates.is_empty());
                continue;
            }
            let kf = k as f64;
            let mut expect: [Vec<f64>; 3] = Default::default();
            for &s in &usable {
                let t: Vec<f64> = pairs.iter().map(|v| v[s] as f64).collect();
                let max = t.iter().cloned().fold(f64::MIN, f64::max);
                let mean = t.iter().sum::<f64>() / kf;
                let sum: f64 = t.iter().map(|x| b / x).sum::<f64>() * 1e3;
                let (a, m) = (kf * b / max * 1e3, kf * b / mean * 1e3);
                assert!(a <= m * (1.0 + 1e-12) && m <= sum * (1.0 + 1e-12));
                expect[0].push(a);
                expect[1].push(m);
                expect[2].push(sum);
            }
            for (agg, mut e) in got.aggregates.iter().zip(expect) {
                stats::sort_samples(&mut e);
                let med = stats::median(&e).unwrap();
                assert!((agg.mb_s.median - med).abs() <= 1e-9 * med, "{}", agg.name);
                let rate_ratio = agg.messages_per_s.median / (agg.mb_s.median * 1e6);
                assert!((rate_ratio * size as f64 - 1.0).abs() < 1e-9);
            }
            if factor > 1.31 * 1.31 {
                assert_eq!(got.straggler.as_ref().map(|s| s.pair), Some(slow as u32));
            }
        }
    }

    /// Hosts drawn at random for each rank: the crossings are the pairs whose two hosts
    /// differ, and the note says when they mix or when none crosses on several hosts.
    #[test]
    fn crossings_follow_the_hosts_and_a_mixed_placement_is_noted() {
        let mut rng = Xoshiro256::new(0x4057);
        for _ in 0..200 {
            let k = 1 + rng.below(8) as u32;
            let nh = 1 + rng.below(3);
            let hosts: Vec<String> = (0..2 * k).map(|_| format!("h{}", rng.below(nh))).collect();
            let c = Concurrent {
                pairs: Placement::Cyclic.pairs(k),
                placement: Placement::Cyclic,
                start: StartSync::Barrier,
            };
            let s = PairsSection::of(&c, &hosts);
            let crossing: Vec<bool> = (0..k as usize)
                .map(|i| hosts[2 * i] != hosts[2 * i + 1])
                .collect();
            let got: Vec<bool> = s.pairs.iter().map(|p| p.crosses_hosts.unwrap()).collect();
            assert_eq!(got, crossing);
            let used: std::collections::BTreeSet<&String> = hosts.iter().collect();
            let mixed = crossing.iter().any(|&x| x) && crossing.iter().any(|&x| !x);
            let none_across = !crossing.iter().any(|&x| x) && used.len() > 1;
            assert_eq!(
                s.note.is_some(),
                mixed || none_across,
                "{hosts:?}: {:?}",
                s.note
            );
            let unknown = PairsSection::of(&c, &[]);
            assert!(unknown.pairs.iter().all(|p| p.crosses_hosts.is_none()));
            assert!(unknown.note.is_none());
        }
    }

    /// The interval of a median is taken at the order statistics `median_ci_ranks` names
    /// (0-based), brackets the median, and is absent below the samples a 95% interval needs.
    #[test]
    fn a_rate_s_interval_brackets_its_median() {
        let mut rng = Xoshiro256::new(0xc1);
        for n in 1..80 {
            let v: Vec<f64> = (0..n).map(|_| rng.log_range(1.0, 1e4)).collect();
            let s = RateSummary::of(v.clone()).expect("samples");
            let mut sorted = v;
            stats::sort_samples(&mut sorted);
            match (s.ci95_low, s.ci95_high) {
                (Some(lo), Some(hi)) => {
                    assert!(n >= 6, "{n}");
                    let (a, b) = stats::median_ci_ranks(n as u64).unwrap();
                    assert_eq!((lo, hi), (sorted[a as usize], sorted[b as usize]));
                    assert!(lo <= s.median && s.median <= hi, "{n}");
                }
                _ => assert!(n < 6, "{n}"),
            }
            assert_eq!((s.min, s.max), (sorted[0], sorted[n - 1]));
        }
    }

    #[test]
    fn pairs_of_unequal_samples_are_not_aggregated() {
        assert!(analyse(&[vec![1, 2], vec![3]], 1, 1, 0).is_none());
        assert!(analyse(&[], 1, 1, 0).is_none());
        assert!(analyse(&[vec![5, 6]], 1, 1, 2).is_none());
        let one = analyse(&[vec![1000; 10]], 4, 250, 3).unwrap();
        assert_eq!(one.samples, 7);
        // One pair: 1000 B in 1000 ns is 1000 MB/s, every way.
        assert!(one
            .aggregates
            .iter()
            .all(|a| (a.mb_s.median - 1000.0).abs() < 1e-9));
    }
}
