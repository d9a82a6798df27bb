//! The command line fuzzed through the parser and the plan: every measuring command with
//! random options from its own definition, at hostile values (zero, negative, at and past
//! every integer width, tiny and huge floats, NaN, empty, malformed lists and sizes). A
//! command line is planned, refused as bad usage (exit 2) with a one-line reason and a hint,
//! or refused by clap; never a panic. Nothing is measured: the plan is where every bound is
//! checked. `COMMBENCH_TEST_SCALE=full` runs the full count (docs/testing.md).

use super::args::{Cli, Given};
use super::fatal::{EXIT_RUN, EXIT_USAGE};
use clap::FromArgMatches;
use proptest::prelude::*;

#[path = "../../backends/sim/tests/common/scale.rs"]
mod scale;

/// Values every option is tried with besides its own choices.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "8",
    "64K",
    "1M",
    "16G",
    "1..4M:x2",
    "1,8,64",
    "3,1,2",
    "1..0",
    "0..1:+0",
    "1..1099511627776:x2",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e-9",
    "5e-324",
    "0.5",
    "nan",
    "inf",
    "-inf",
    "",
    "x",
    ",",
    "ncube7",
    "generic",
    "none",
    "auto",
    "0-1",
    "0,0",
    "1%",
    "1%,99%",
    "0.5%,50%",
    "10s,5m",
    ",1ms",
    // Standard output, for the options that name a file (--json, --stream, --output).
    "-",
];

/// Options never generated: they reach other hosts (a rendezvous address is resolved), or
/// only print.
const SKIPPED: &[&str] = &["rendezvous", "help", "version"];

/// The command line's definition, built once.
fn definition() -> clap::Command {
    static CLI: std::sync::OnceLock<clap::Command> = std::sync::OnceLock::new();
    CLI.get_or_init(super::args::command).clone()
}

/// Each measuring command with its options, built once.
type Table = Vec<(Vec<String>, Vec<(String, bool, Vec<String>)>)>;

fn table() -> &'static Table {
    static TABLE: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        measuring()
            .into_iter()
            .map(|path| {
                let opts = options(&path);
                (path, opts)
            })
            .collect()
    })
}

/// The measuring subcommands, as paths of names.
pub(super) fn measuring() -> Vec<Vec<String>> {
    let cmd = definition();
    let mut out = Vec::new();
    for sub in cmd.get_subcommands() {
        let name = sub.get_name().to_string();
        if ["report", "plot", "compare", "backends", "timer", "help"].contains(&name.as_str()) {
            continue;
        }
        if sub.has_subcommands() {
            for inner in sub.get_subcommands() {
                out.push(vec![name.clone(), inner.get_name().to_string()]);
            }
        } else {
            out.push(vec![name]);
        }
    }
    out
}

/// The options of the command at `path`: long name, whether it takes a value, its choices.
fn options(path: &[String]) -> Vec<(String, bool, Vec<String>)> {
    let mut cmd = definition();
    for p in path {
        let Some(next) = cmd.find_subcommand(p).cloned() else {
            return Vec::new();
        };
        cmd = next;
    }
    cmd.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?.to_string();
            if SKIPPED.contains(&long.as_str()) {
                return None;
            }
            let takes = a.get_action().takes_values();
            let choices = a
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect();
            Some((long, takes, choices))
        })
        .collect()
}

/// One command line from indices: the command, then options each with a value.
fn command_line(cmd: usize, picks: &[(usize, usize, bool)]) -> Vec<String> {
    let all = table();
    let (path, opts) = &all[cmd % all.len()];
    let mut line = vec!["commbench".to_string()];
    line.extend(path.iter().cloned());
    if opts.is_empty() {
        return line;
    }
    for &(o, v, own) in picks {
        let (long, takes, choices) = &opts[o % opts.len()];
        line.push(format!("--{long}"));
        if *takes {
            let value = if own && !choices.is_empty() {
                choices[v % choices.len()].clone()
            } else {
                VALUES[v % VALUES.len()].to_string()
            };
            line.push(value);
        }
    }
    line
}

/// Parse and plan `line`: clap's refusal, a plan, or bad usage in one line with a hint.
fn check(line: &[String]) -> Result<(), TestCaseError> {
    let mut cmd = definition();
    let Ok(m) = cmd.try_get_matches_from_mut(line) else {
        return Ok(());
    };
    let given = Given::from_matches(&cmd, &m);
    let Ok(cli) = Cli::from_arg_matches(&m) else {
        return Ok(());
    };
    match super::plan_of(cli.cmd, &given) {
        Err(_) => prop_assert!(false, "{line:?} is not a measuring command"),
        Ok(Ok(plan)) => {
            let _ = plan.recipe();
        }
        Ok(Err(f)) => {
            prop_assert!(
                f.code == EXIT_USAGE || f.code == EXIT_RUN,
                "{line:?}: exit {}",
                f.code
            );
            prop_assert!(!f.reason.is_empty(), "{line:?}: no reason");
            prop_assert!(!f.reason.contains('\n'), "{line:?}: {}", f.reason);
            prop_assert!(f.hint.is_some(), "{line:?}: no hint for {}", f.reason);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(scale::proptest_config(256, 60_000))]

    #[test]
    fn random_command_lines_are_planned_or_refused_in_one_line(
        cmd in 0usize..64,
        picks in prop::collection::vec((0usize..64, 0usize..256, any::<bool>()), 0..7),
    ) {
        check(&command_line(cmd, &picks))?;
    }
}

/// Every measuring command with each of its options at each hostile value, one at a time
/// (in CI every third value, a different third for each option).
#[test]
fn every_option_at_every_value() {
    let all = table();
    assert!(all.len() >= 10, "{all:?}");
    let step = if scale::full() { 1 } else { 3 };
    for (c, (_, opts)) in all.iter().enumerate() {
        for o in 0..opts.len() {
            for v in ((c + o) % step..VALUES.len()).step_by(step) {
                let line = command_line(c, &[(o, v, false)]);
                if let Err(e) = check(&line) {
                    panic!("{e}");
                }
            }
        }
    }
}
