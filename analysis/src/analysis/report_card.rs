//! The report card: what a run did for rules 5 to 11 of Hoefler & Belli, "Scientific
//! benchmarking of parallel computing systems" (SC'15), one line per rule, each flagged where
//! the run leaves something for the reader to doubt (docs/methodology.md, "The report card").
//!
//! Made from the document alone ([`ReportCard::of`]): a run's document, a stream's and one
//! written by an earlier version read back by `commbench report` all get the same card.

use crate::analysis::document::{CardRule, Environment, ReportCard, ResultDoc, RunConfig};
use crate::analysis::normality::Normality;
use crate::analysis::point::{normality_of, Point};
use commbench_core::method::until::Outcome;

/// The key of a backend's measured cache-line hand-off in its `backend_info`.
pub use commbench_core::transport::CACHE_HANDOFF_KEY as HANDOFF_KEY;
/// The slowest hand-off taken as a bound, ns: moving a cache line between two cores takes well
/// under a microsecond on any machine (across sockets a few hundred ns); a slower one was
/// measured while the ranks shared a core, and bounds nothing.
pub const HANDOFF_MAX_NS: f64 = 2000.0;

/// The source every card cites.
pub const SOURCE: &str =
    "Hoefler & Belli, Scientific benchmarking of parallel computing systems, SC'15, rules 5-11";

impl ReportCard {
    /// The card of `doc`; `None` for a document without points (an all-pairs matrix, a
    /// timer characterisation), which the card does not cover.
    pub fn of(doc: &ResultDoc) -> Option<ReportCard> {
        if doc.points.is_empty() {
            return None;
        }
        let config = doc.config.as_ref();
        let rules = vec![
            rule5(&doc.points),
            rule6(&doc.points),
            rule7(config),
            rule8(),
            rule9(&doc.environment, config),
            rule10(doc),
            rule11(doc),
        ];
        Some(ReportCard {
            source: SOURCE.into(),
            rules,
        })
    }

    /// Whether any rule is flagged.
    pub fn flagged(&self) -> bool {
        self.rules.iter().any(|r| r.flagged)
    }
}

/// A rule's line, flagged when `points` is not empty.
fn line(rule: u32, topic: &str, says: String, points: Vec<usize>) -> CardRule {
    CardRule {
        rule,
        topic: topic.into(),
        flagged: !points.is_empty(),
        says,
        points,
    }
}

/// Rule 5: every median has a distribution-free 95 % interval; with `--until-ci`, the width
/// asked and reached. Flags points whose interval does not reach its coverage (5 trials or
/// fewer) and sizes that did not converge.
fn rule5(points: &[Point]) -> CardRule {
    let short: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].one_way_us.n <= 5)
        .collect();
    let mut says =
        "each point's median has a distribution-free 95% CI (order statistics)".to_string();
    if !short.is_empty() {
        says += &format!(
            "; {} point(s) have 5 trials or fewer, where (min, max) is not a 95% interval",
            short.len()
        );
    }
    let until: Vec<(usize, &commbench_core::method::until::Stopping)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.until_ci.as_ref()?)))
        .collect();
    let mut flagged = short;
    if let Some((_, first)) = until.first() {
        let unconverged: Vec<usize> = until
            .iter()
            .filter(|(_, u)| !matches!(u.outcome, Outcome::Converged | Outcome::Separated))
            .map(|(i, _)| *i)
            .collect();
        let widest = until
            .iter()
            .map(|(_, u)| u.half_width_rel)
            .filter(|w| w.is_finite())
            .fold(0.0f64, f64::max);
        says += &format!(
            "; --until-ci asked ±{} at {}: {} of {} size(s) reached it (widest ±{})",
            pct(first.rel),
            pct(first.level),
            until.len() - unconverged.len(),
            until.len(),
            pct(widest)
        );
        flagged.extend(unconverged);
    }
    flagged.sort_unstable();
    flagged.dedup();
    line(5, "confidence intervals", says, flagged)
}

/// A fraction as a per cent with up to two decimals (`1%`, `0.25%`, `95%`).
fn pct(x: f64) -> String {
    let t = format!("{:.2}", 100.0 * x);
    format!("{}%", t.trim_end_matches('0').trim_end_matches('.'))
}

/// The normality test of a point: its own, or computed from its trials (a document written
/// before the test was recorded).
fn normality(p: &Point) -> Option<Normality> {
    p.normality
        .clone()
        .or_else(|| normality_of(&p.trial_ns, p.npp, p.trips_per_iteration))
}

/// Rule 6: normality checked, not assumed. Flags the points whose times are not normal.
fn rule6(points: &[Point]) -> CardRule {
    let tests: Vec<Option<Normality>> = points.iter().map(normality).collect();
    let tested = tests.iter().flatten().count();
    let failed: Vec<usize> = (0..points.len())
        .filter(|&i| tests[i].as_ref().is_some_and(|t| !t.normal))
        .collect();
    let multimodal = points
        .iter()
        .filter(|p| p.modality.as_ref().is_some_and(|m| m.multimodal))
        .count();
    let mut says = format!(
        "Shapiro-Wilk (Royston): {} of {tested} point(s) tested are not normal (p < 0.05)",
        failed.len()
    );
    if tested < points.len() {
        says += &format!(
            ", {} not testable (under 3 trials or all equal)",
            points.len() - tested
        );
    }
    says += &format!(
        "; {multimodal} multimodal; medians, order-statistic CIs and percentiles do not assume \
         normality (means and t-intervals do)"
    );
    line(6, "normality", says, failed)
}

/// Rule 7: comparison over launches. Flagged for a run on its own (its run-to-run variance
/// is unknown).
fn rule7(config: Option<&RunConfig>) -> CardRule {
    match config.and_then(|c| c.launch) {
        Some(l) => CardRule {
            rule: 7,
            topic: "launches".into(),
            flagged: false,
            says: format!(
                "launch {} of {}; `commbench compare` over the set compares by CIs over launches",
                l.index, l.of
            ),
            points: Vec::new(),
        },
        None => CardRule {
            rule: 7,
            topic: "launches".into(),
            flagged: true,
            says: "one launch: run-to-run variation is unknown; --launches L and `commbench \
                   compare` over them give it"
                .into(),
            points: Vec::new(),
        },
    }
}

/// Rule 8: percentiles beside the median.
fn rule8() -> CardRule {
    line(
        8,
        "percentiles",
        "min, p50 (median), p90, p99, p99.9, p99.99 and max of every point's one-way times, \
         and their binned distribution (distribution_us)"
            .into(),
        Vec::new(),
    )
}

/// Rule 9: factors and environment recorded; flagged when something the host could tell is
/// missing.
fn rule9(env: &Environment, config: Option<&RunConfig>) -> CardRule {
    let mut have = vec!["target".to_string()];
    let mut missing = Vec::new();
    let mut note = |name: &str, present: bool| {
        if present {
            have.push(name.into());
        } else {
            missing.push(name.to_string());
        }
    };
    note("host", env.hostname.is_some());
    note("CPU model", env.cpu_model.is_some());
    note("CPUs", env.cpus.is_some());
    note("kernel", env.kernel.is_some());
    note("clock source", env.clocksource.is_some());
    note("affinity", env.affinity.is_some());
    note("backend info", !env.backend_info.is_empty());
    note("configuration", config.is_some());
    if let Some(c) = config {
        if !c.backend_options.is_empty() {
            have.push("backend options".into());
        }
        if c.cpus.is_some() {
            have.push("placement (--cpus)".into());
        }
        have.push("sizes, trials, npp, cut_coef".into());
    }
    let mut says = format!("recorded: {}", have.join(", "));
    let flag = !missing.is_empty();
    if flag {
        says += &format!("; missing: {}", missing.join(", "));
    }
    CardRule {
        rule: 9,
        topic: "environment".into(),
        flagged: flag,
        says,
        points: Vec::new(),
    }
}

/// What the engine does for a pattern: who times a trial and what one trial is.
fn synchronisation(pattern: &str, source: u32) -> String {
    let clock = format!("timed on rank {source}'s clock alone (no clock synchronisation)");
    let what = match pattern {
        "pingpong" => "a trial = npp round trips, one-way = trial / (2 npp)",
        "exchange" => "a trial = npp exchanges (both send, then both return), per message = trial / (2 npp)",
        "bandwidth" => "a trial = npp windows of sends and an acknowledgement, per message = trial / (window npp)",
        "bibandwidth" => "a trial = npp windows each way at once, per message = trial / (window npp)",
        "transpose" => "a trial = npp transposes there and back, per transpose = trial / (2 npp)",
        "queue_posted" | "queue_unexpected" => {
            "a trial = npp round trips behind the queue, one-way = trial / (2 npp)"
        }
        _ => return format!("{pattern}: its own program, not covered by this card (docs/seed001.md)"),
    };
    format!("{pattern}: {clock}, a barrier and a handshake before each trial; {what}")
}

/// Rule 10: synchronisation and summarisation named, per pattern measured.
fn rule10(doc: &ResultDoc) -> CardRule {
    let source = doc.config.as_ref().map_or(0, |c| c.method.source);
    let mut patterns: Vec<&str> = Vec::new();
    for p in &doc.points {
        if !patterns.contains(&p.pattern.as_str()) {
            patterns.push(&p.pattern);
        }
    }
    let cut = doc.points.first().map_or(2.0, |p| p.filtered.cut_coef);
    let per: Vec<String> = patterns
        .iter()
        .map(|p| synchronisation(p, source))
        .collect();
    let says = format!(
        "{}; summary = the median of the trials' times, filtered statistics cut at {cut} x \
         median (seed 000 §3.4)",
        per.join("; ")
    );
    line(10, "synchronisation", says, Vec::new())
}

/// The backend that measured a cache-line hand-off between its ranks and the hand-off's
/// one-way minimum, ns, from `environment.backend_info` (the backend's own record, or under
/// its name when several backends ran).
pub fn handoff_ns(env: &Environment) -> Option<(String, f64)> {
    let info = &env.backend_info;
    let (backend, h) = match info.get(HANDOFF_KEY) {
        Some(h) => (env.backend.clone(), h),
        None => info
            .iter()
            .find_map(|(name, v)| Some((name.clone(), v.get(HANDOFF_KEY)?)))?,
    };
    let ns = h.get("one_way_ns_min")?.as_f64().filter(|x| *x > 0.0)?;
    Some((backend, ns))
}

/// Rule 11: the bounds known (the shm hand-off, `--expect-rate`) and the points beyond them.
fn rule11(doc: &ResultDoc) -> CardRule {
    let mut parts = Vec::new();
    let mut flagged = Vec::new();
    let handoff = handoff_ns(&doc.environment);
    let shm: Vec<usize> = (0..doc.points.len())
        .filter(|&i| {
            let p = &doc.points[i];
            handoff.as_ref().is_some_and(|(b, _)| *b == p.backend) && p.pattern == "pingpong"
        })
        .collect();
    match (handoff, shm.is_empty()) {
        (Some((b, h)), false) if h > HANDOFF_MAX_NS => parts.push(format!(
            "the {b} cache-line hand-off took {h:.0} ns at set-up, too slow to be one (the \
             ranks shared a core then): no bound from it"
        )),
        (Some((b, h)), false) => {
            let median_ns = |i: usize| 1e3 * doc.points[i].one_way_us.median;
            let best = shm
                .iter()
                .map(|&i| median_ns(i))
                .fold(f64::INFINITY, f64::min);
            let below: Vec<usize> = shm.iter().copied().filter(|&i| median_ns(i) < h).collect();
            parts.push(format!(
                "{b} one-way time cannot be below the cache-line hand-off {h:.0} ns; the best \
                 median is {:.1}x it; {} point(s) below it",
                best / h,
                below.len()
            ));
            flagged.extend(below);
        }
        _ => {}
    }
    if let Some(rate) = doc.config.as_ref().and_then(|c| c.expect_rate_mb_s) {
        let sized: Vec<usize> = (0..doc.points.len())
            .filter(|&i| doc.points[i].size > 0)
            .collect();
        let r = |i: usize| doc.points[i].rate_mb_s.median;
        let best = sized.iter().map(|&i| r(i)).fold(0.0f64, f64::max);
        let above: Vec<usize> = sized.iter().copied().filter(|&i| r(i) > rate).collect();
        parts.push(format!(
            "expected rate {rate} MB/s: the best median rate is {best:.1} MB/s, {} of it; {} \
             point(s) above it",
            pct(best / rate),
            above.len()
        ));
        flagged.extend(above);
    }
    if parts.is_empty() {
        parts.push(
            "no upper bound known for this run (shm measures its cache-line hand-off; \
             --expect-rate RATE gives a link's rate)"
                .into(),
        );
    }
    flagged.sort_unstable();
    flagged.dedup();
    line(11, "upper bounds", parts.join("; "), flagged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::document::LaunchOf;
    use crate::analysis::testkit::{doc, point_of};

    fn rule(card: &ReportCard, n: u32) -> &CardRule {
        card.rules.iter().find(|r| r.rule == n).unwrap()
    }

    #[test]
    fn no_points_no_card() {
        assert_eq!(ReportCard::of(&doc(Vec::new())), None);
    }

    #[test]
    fn launches_and_normality_are_stated() {
        let trials: Vec<i64> = (0..200).map(|i| 1000 + (i * i) % 977).collect();
        let mut d = doc(vec![point_of("pingpong", 8, trials)]);
        let c = ReportCard::of(&d).unwrap();
        assert_eq!(c.rules.len(), 7);
        assert!(rule(&c, 7).flagged && rule(&c, 7).says.contains("one launch"));
        assert!(
            rule(&c, 6).says.contains("of 1 point(s) tested"),
            "{}",
            rule(&c, 6).says
        );
        assert!(rule(&c, 10)
            .says
            .contains("pingpong: timed on rank 0's clock"));
        assert!(rule(&c, 11).says.contains("no upper bound known"));
        let cfg = d.config.get_or_insert_with(Default::default);
        cfg.launch = Some(LaunchOf { index: 2, of: 5 });
        let c = ReportCard::of(&d).unwrap();
        assert!(!rule(&c, 7).flagged && rule(&c, 7).says.contains("launch 2 of 5"));
    }

    #[test]
    fn an_expected_rate_flags_points_above_it() {
        // 1000-byte messages at 1 us one-way: 1000 MB/s.
        let p = point_of("pingpong", 1000, vec![2000; 50]);
        let mut d = doc(vec![p]);
        let cfg = d.config.get_or_insert_with(Default::default);
        cfg.expect_rate_mb_s = Some(500.0);
        let c = ReportCard::of(&d).unwrap();
        assert!(
            rule(&c, 11).flagged && rule(&c, 11).points == [0],
            "{:?}",
            rule(&c, 11)
        );
        d.config.as_mut().unwrap().expect_rate_mb_s = Some(2000.0);
        let c = ReportCard::of(&d).unwrap();
        assert!(!rule(&c, 11).flagged, "{:?}", rule(&c, 11));
        assert!(rule(&c, 11).says.contains("50%"), "{}", rule(&c, 11).says);
    }

    #[test]
    fn the_handoff_bounds_pingpong_points() {
        let mut d = doc(vec![point_of("pingpong", 8, vec![200; 50])]);
        d.environment.backend_info.insert(
            HANDOFF_KEY.into(),
            serde_json::json!({"one_way_ns_min": 150.0, "one_way_ns_median": 170.0}),
        );
        // 200 ns per trial of one round trip: 100 ns one-way, below 150.
        let c = ReportCard::of(&d).unwrap();
        assert!(rule(&c, 11).flagged, "{:?}", rule(&c, 11));
        d.points[0] = point_of("pingpong", 8, vec![400; 50]);
        let c = ReportCard::of(&d).unwrap();
        assert!(!rule(&c, 11).flagged, "{:?}", rule(&c, 11));
        assert!(rule(&c, 11).says.contains("1.3x"), "{}", rule(&c, 11).says);
        // Several backends: the one whose record holds the hand-off.
        let own = std::mem::take(&mut d.environment.backend_info);
        d.environment
            .backend_info
            .insert("sim".into(), serde_json::Value::Object(own.clone()));
        assert_eq!(handoff_ns(&d.environment), Some(("sim".into(), 150.0)));
        d.environment.backend_info = own;
        // A hand-off measured while the ranks shared a core bounds nothing.
        d.environment.backend_info.insert(
            HANDOFF_KEY.into(),
            serde_json::json!({"one_way_ns_min": 130_000.0, "one_way_ns_median": 140_000.0}),
        );
        let c = ReportCard::of(&d).unwrap();
        assert!(!rule(&c, 11).flagged, "{:?}", rule(&c, 11));
        assert!(
            rule(&c, 11).says.contains("no bound from it"),
            "{}",
            rule(&c, 11).says
        );
    }
}
