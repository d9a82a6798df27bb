//! The report a run prints: by default a table a user reads at once (one line per size, the
//! median's 95% CI, what the times are for the pattern measured, the papers cited by author);
//! with `--full` (and in `--output DIR`) every statistic of Luecke et al. (2009) Appendix C
//! and the distributions.

use crate::common;

use common::{assert_ok, quick, run, stdout, tmpdir};

/// `commbench pattern --backend sim extra` as a quick run: its standard output, after checking
/// it succeeded.
fn report_of(pattern: &str, extra: &[&str]) -> String {
    let mut args = quick(&[pattern, "--backend", "sim"]);
    args.extend_from_slice(extra);
    let o = run(&args);
    assert_ok(&o);
    stdout(&o)
}

/// The lines of the tables: those ending in `kept/removed` (a warning mark may follow).
fn rows(s: &str) -> Vec<&str> {
    s.lines()
        .filter(|l| {
            let last = l.trim_end_matches('!').split_whitespace().last();
            last.and_then(|c| c.split_once('/'))
                .is_some_and(|(a, b)| a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok())
        })
        .collect()
}

const CI_NOTE: &str = "95% CIs describe this run only; run-to-run variation is not included";

/// No seed numbers; Hockney's benchmarks named with their author.
fn cites_by_author(s: &str) {
    assert!(!s.contains("seed 0") && !s.contains("Seed 0"), "{s}");
    for (i, _) in s.match_indices("COMMS") {
        assert!(
            s[..i].ends_with("Hockney's "),
            "COMMS without Hockney in\n{s}"
        );
    }
}

#[test]
fn a_sweep_prints_a_table_of_a_line_per_size() {
    let d = tmpdir("report-sweep");
    let s = report_of(
        "pingpong",
        &["--sizes", "1..4M:x2", "--output", d.to_str().unwrap()],
    );
    let r = rows(&s);
    assert_eq!(r.len(), 23, "{s}");
    assert!(r[0].trim_start().starts_with("1 B") && r[22].trim_start().starts_with("4 MiB"));
    let n = s.lines().count();
    assert!((25..=40).contains(&n), "{n} lines:\n{s}");
    let header = s
        .lines()
        .find(|l| l.contains("median") && l.contains("kept/removed"))
        .expect("a header");
    for col in ["size", "min", "[95% CI]", "mean", "p99", "max", "MB/s"] {
        assert!(header.contains(col), "{col} missing from {header}");
    }
    assert!(
        s.contains("one-way time (half a round trip) = trial / (2 npp), in us"),
        "{s}"
    );
    assert!(
        s.contains(CI_NOTE) && s.contains("commbench compare"),
        "{s}"
    );
    assert!(
        s.contains("Luecke et al. 2009") && s.contains("Hockney's COMMS1"),
        "{s}"
    );
    assert!(
        s.contains("latency") && s.contains("r_inf"),
        "the fit in brief: {s}"
    );
    assert!(
        !s.contains("TIMING RESULTS") && !s.contains("DISTRIBUTION OF"),
        "{s}"
    );
    cites_by_author(&s);

    // The full output written beside it keeps the Appendix-C blocks and the distributions.
    let full = std::fs::read_to_string(d.join("commbench.output.txt")).expect("full output");
    assert_eq!(
        full.matches("TIMING RESULTS AND STATISTICS").count(),
        2 * 23
    );
    assert_eq!(full.matches("DISTRIBUTION OF ONE-WAY TIMES").count(), 23);
    assert!(full.contains(CI_NOTE) && full.contains("FITTED MODELS"));

    // `report` prints the same table from the document, and the full output with --full.
    let doc = d.join("result.json").display().to_string();
    let o = run(&["report", &doc]);
    assert_ok(&o);
    let again = stdout(&o);
    assert_eq!(rows(&again), r, "{again}");
    let o = run(&["report", &doc, "--full"]);
    assert_ok(&o);
    let f = stdout(&o);
    assert_eq!(f.matches("TIMING RESULTS AND STATISTICS").count(), 2 * 23);
    assert!(f.contains("DISTRIBUTION OF ONE-WAY TIMES"));
}

#[test]
fn full_prints_every_statistic_with_its_unit() {
    let s = report_of("pingpong", &["--sizes", "1,8", "--full"]);
    assert_eq!(s.matches("TIMING RESULTS AND STATISTICS").count(), 4, "{s}");
    assert_eq!(s.matches("FILTERED: cut-off coefficient").count(), 2, "{s}");
    assert!(s.contains("ping-pong of 1 byte over sim"), "{s}");
    assert!(s.contains("ping-pong of 8 bytes over sim"), "{s}");
    assert!(!s.contains("1 bytes"), "{s}");
    let variance: Vec<&str> = s.lines().filter(|l| l.contains("variance")).collect();
    assert!(
        !variance.is_empty() && variance.iter().all(|l| l.ends_with(" us^2")),
        "{s}"
    );
    assert!(s.contains("DISTRIBUTION OF TIMES FROM THE TIMER") && s.contains(CI_NOTE));
    assert!(s.contains("Luecke et al. 2009 §3.1"), "{s}");
    // The fitted models' section has a renderer of its own (render::fit).
    let before_fit = s.split("FITTED MODELS").next().unwrap_or("");
    cites_by_author(before_fit);
}

#[test]
fn each_pattern_says_what_its_time_is() {
    let s = report_of("exchange", &["--sizes", "1,64"]);
    assert!(s.contains("exchange (Hockney's COMMS2)"), "{s}");
    assert!(
        s.contains("time per exchange") && s.contains("per direction"),
        "{s}"
    );
    assert!(!s.contains("one-way") && !s.contains("ping-pong"), "{s}");
    assert_eq!(rows(&s).len(), 2, "{s}");
    cites_by_author(&s);

    let s = report_of("bandwidth", &["--sizes", "1,64", "--window", "8"]);
    assert!(s.contains("time per message in a window of 8"), "{s}");
    assert!(s.contains("trial / (window x npp)"), "{s}");
    assert!(!s.contains("one-way") && !s.contains("ping-pong"), "{s}");
    cites_by_author(&s);

    let s = report_of("transpose", &["--n", "8"]);
    assert!(
        s.contains("column transpose of a 8 x 8 matrix of doubles"),
        "{s}"
    );
    assert!(
        s.contains("time per transpose (8 messages of 64 bytes"),
        "{s}"
    );
    assert!(s.contains("verified: after the trials"), "{s}");
    assert!(
        !s.contains("time per message") && !s.contains("one-way"),
        "{s}"
    );
    assert_eq!(rows(&s).len(), 1, "{s}");
    cites_by_author(&s);
    let s = report_of("transpose", &["--n", "8", "--full"]);
    assert!(
        s.contains("TIMING RESULTS AND STATISTICS (time per transpose"),
        "{s}"
    );
    assert!(s.contains("DISTRIBUTION OF TIMES PER TRANSPOSE"), "{s}");
    assert!(s.contains("verified: after the trials"), "{s}");
}
