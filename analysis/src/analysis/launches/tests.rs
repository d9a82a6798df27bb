use super::*;
use crate::analysis::assemble::{self, Recipe, Started};
use crate::analysis::document::RunConfig;
use crate::analysis::fit::Breakpoint;
use commbench_core::method::engine::RawPoint;
use commbench_core::stats::Xoshiro256;

fn recipe() -> Recipe {
    Recipe {
        cut_coef: 2.0,
        breakpoint: Breakpoint::None,
        instructions_per_second: None,
        config: RunConfig::default(),
        transport_forwards: false,
        command: vec!["commbench".into(), "pingpong".into()],
    }
}

/// The document of one launch: ping-pong points of `r` trials (npp 1, two trips a trial) at
/// each of `sizes`, trial times log-normal around `exp(mu)` ns shifted by the launch's
/// `effect`, with a per-trial log sd of `sd`, `wall_s` long.
fn launch_doc(
    rng: &mut Xoshiro256,
    sizes: &[u64],
    r: usize,
    (mu, effect, sd): (f64, f64, f64),
    wall_s: f64,
) -> ResultDoc {
    let points = sizes
        .iter()
        .map(|&size| RawPoint {
            pattern: "pingpong".into(),
            size,
            npp: 1,
            trips_per_iteration: 2,
            trial_ns: (0..r)
                .map(|_| (mu + effect + sd * rng.normal()).exp().round() as i64)
                .collect(),
            ..RawPoint::default()
        })
        .collect();
    let outcome = crate::analysis::testkit::shm_outcome(points);
    let mut d = assemble::document(&recipe(), outcome, Started::now());
    d.wall_s = wall_s;
    d
}

fn members(docs: &[ResultDoc]) -> Vec<Member<'_>> {
    docs.iter()
        .map(|d| Member {
            doc: Some(d),
            path: "x/result.json",
            exit: Some(0),
        })
        .collect()
}

/// The trials worth one launch satisfy their definition: `n` launches of `r + worth/n`
/// trials leave the variance that `n + 1` launches of `r` leave; with no variance between
/// launches a launch is worth exactly its `r` trials; where the launches' own variance over
/// `n` is above what `n + 1` launches leave, no number of trials is worth one.
#[test]
fn worth_in_trials_meets_its_definition() {
    let mut rng = Xoshiro256::new(7);
    for _ in 0..2000 {
        let n = 1.0 + (rng.next_u64() % 30) as f64;
        let r = rng.range(5.0, 20_000.0);
        let t1 = rng.range(1e-6, 1.0);
        let t2 = if rng.unit() < 0.2 {
            0.0
        } else {
            rng.range(0.0, 0.01)
        };
        let var = |n: f64, r: f64| t2 / n + t1 / (n * r);
        match worth_in_trials(n, r, t2, t1) {
            Some(w) => {
                let with_trials = var(n, r + w / n);
                let with_launch = var(n + 1.0, r);
                assert!(
                    (with_trials - with_launch).abs() <= 1e-9 * with_launch,
                    "n {n} r {r} t1 {t1} t2 {t2}: {with_trials} vs {with_launch}"
                );
                assert!(
                    w >= r * (1.0 - 1e-9),
                    "a launch is worth at least its trials"
                );
                if t2 == 0.0 {
                    assert!((w - r).abs() <= 1e-9 * r);
                }
            }
            None => assert!(t2 / n >= var(n + 1.0, r), "n {n} r {r} t1 {t1} t2 {t2}"),
        }
    }
    assert_eq!(worth_in_trials(0.0, 10.0, 0.1, 0.1), None);
    assert_eq!(worth_in_trials(3.0, 0.0, 0.1, 0.1), None);
}

/// Over random sets of launches with a known between-launch sd (zero included) and per-trial
/// noise: the 95 % interval over launches covers the true centre about 95 % of the time; the
/// between-launch variance is found (its mean over the sets near the truth) where it is
/// large against the trials' noise, and the share is small where the launches add nothing.
#[test]
fn components_find_the_variance_launches_add() {
    let mut rng = Xoshiro256::new(0x01a0_c4e5);
    let (mut covered, mut sets) = (0, 0);
    for case in 0..40 {
        let n = 3 + (rng.next_u64() % 6) as usize;
        let r = 100 + (rng.next_u64() % 300) as usize;
        let sd = rng.range(0.01, 0.2);
        // Between-launch sd: none, about the median's own noise, or well above it.
        let median_se = sd * (std::f64::consts::FRAC_PI_2 / r as f64).sqrt();
        let sb = match case % 3 {
            0 => 0.0,
            1 => median_se,
            _ => median_se * rng.range(5.0, 20.0),
        };
        let mu = rng.range(6.0, 12.0);
        let (mut between_sum, mut share_sum) = (0.0, 0.0);
        let reps = 6;
        for _ in 0..reps {
            let docs: Vec<ResultDoc> = (0..n)
                .map(|_| {
                    let effect = sb * rng.normal();
                    launch_doc(&mut rng, &[8], r, (mu, effect, sd), 2.0)
                })
                .collect();
            let set = summarise(&members(&docs), n as u32).expect("summary");
            assert_eq!(set.status, "complete");
            let p = &set.points[0];
            assert_eq!(p.medians_us.len(), n);
            let ci = p.ci95_us.expect("interval");
            // The true centre of the launches' medians, in us of one-way time.
            let centre = mu.exp() / 2.0 / 1000.0;
            covered += usize::from(ci.lo <= centre && centre <= ci.hi);
            sets += 1;
            let c = p.components.as_ref().expect("components");
            between_sum += c.between_var;
            share_sum += c.between_share;
            assert!((0.0..=1.0).contains(&c.between_share));
            assert!(c.per_trial_var > 0.0);
        }
        let (between, share) = (between_sum / reps as f64, share_sum / reps as f64);
        match case % 3 {
            0 => assert!(
                share < 0.6,
                "case {case}: share {share} with no launch effect"
            ),
            2 => {
                let truth = sb * sb;
                assert!(
                    between > 0.3 * truth && between < 2.5 * truth,
                    "case {case}: between {between} against {truth}"
                );
                assert!(share > 0.6, "case {case}: share {share}");
            }
            _ => {}
        }
    }
    let coverage = covered as f64 / sets as f64;
    assert!((0.85..=1.0).contains(&coverage), "coverage {coverage}");
}

/// A set keeps every launch, missing ones included, says why it is not complete, matches
/// points by pattern, backend and size (a size one launch lacks is over the others), and
/// refuses all-pairs documents.
#[test]
fn a_set_with_a_missing_launch_is_partial() {
    let mut rng = Xoshiro256::new(11);
    let a = launch_doc(&mut rng, &[8, 64], 200, (8.0, 0.0, 0.05), 1.0);
    let b = launch_doc(&mut rng, &[8], 200, (8.0, 0.01, 0.05), 1.0);
    let ms = vec![
        Member {
            doc: Some(&a),
            path: "launch-1/result.json",
            exit: Some(0),
        },
        Member {
            doc: None,
            path: "launch-2/result.json",
            exit: Some(1),
        },
        Member {
            doc: Some(&b),
            path: "launch-3/result.json",
            exit: Some(0),
        },
    ];
    let set = summarise(&ms, 4).expect("summary");
    assert_eq!(set.status, "partial");
    assert_eq!(set.error.as_deref(), Some("launch 2 is missing"));
    assert_eq!(set.launches.len(), 3);
    assert_eq!(set.points.len(), 2);
    assert_eq!(set.points[0].launches, vec![1, 3]);
    assert_eq!(set.points[1].launches, vec![1]);
    assert!(set.points[1].components.is_none() && set.points[1].ci95_us.is_none());
    let none: Vec<Member<'_>> = vec![Member {
        doc: None,
        path: "launch-1/result.json",
        exit: Some(1),
    }];
    assert!(summarise(&none, 1).is_err());
    let json = serde_json::to_string(&set).expect("JSON");
    let back: LaunchSet = serde_json::from_str(&json).expect("reads back");
    assert_eq!(back.points.len(), 2);
}
