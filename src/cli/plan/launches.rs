//! `--launches L` in a plan: the process the user started runs the set (`cli::launches`), each
//! launch a process of its own started with the same command line and [`ENV_LAUNCH`] saying
//! which launch it is; that process writes its files into `DIR/launch-K` and records its
//! place in the set (`config.launch`).

use super::super::args::{BackendArgs, OutputArgs};
use super::super::fatal::Fatal;
use commbench::analysis::document::LaunchOf;
use commbench::core::launch::RankEnv;

/// Set by the process that runs a set of launches in each launch's environment: `K/L`.
pub const ENV_LAUNCH: &str = "COMMBENCH_LAUNCH_OF";

/// Most launches in one set.
pub const MAX_LAUNCHES: u32 = 1000;

/// The directory of launch `k` within the set's `--output` directory.
pub fn launch_dir(k: u32) -> String {
    format!("launch-{k}")
}

/// Which launch of a set this process is, from [`ENV_LAUNCH`] (`None` when it is not one, or
/// the variable does not read as `K/L`).
pub fn of_this_process() -> Option<LaunchOf> {
    let v = std::env::var(ENV_LAUNCH).ok()?;
    let (k, l) = v.split_once('/')?;
    let (index, of) = (k.trim().parse().ok()?, l.trim().parse().ok()?);
    (index >= 1 && index <= of).then_some(LaunchOf { index, of })
}

/// `--launches` checked against the other output options: the set to run (on the process the
/// user started), or the launch this process is.
pub fn of(o: &OutputArgs, b: &BackendArgs) -> Result<(Option<u32>, Option<LaunchOf>), Fatal> {
    if std::env::var_os(ENV_LAUNCH).is_some() {
        let this = of_this_process().filter(|l| o.launches == Some(l.of));
        return match this {
            Some(l) => Ok((None, Some(l))),
            None => Err(Fatal::usage(
                format!(
                    "{ENV_LAUNCH} is set, and this is not a launch of a set with --launches: \
                     commbench sets it for each launch it starts"
                ),
                format!("unset {ENV_LAUNCH}"),
            )),
        };
    }
    let Some(l) = o.launches else {
        return Ok((None, None));
    };
    if !(1..=MAX_LAUNCHES).contains(&l) {
        return Err(Fatal::usage(
            format!("--launches {l}: from 1 to {MAX_LAUNCHES}"),
            "for example --launches 5 (three or more a side let compare give a verdict)",
        ));
    }
    if o.output.is_none() {
        return Err(Fatal::usage(
            "--launches writes one document per launch and their summary: it needs --output DIR",
            "add --output DIR (DIR/launch-1, ... and DIR/launches.json)",
        ));
    }
    if let Some(flag) = [
        ("--json", o.json.is_some()),
        ("--stream", o.stream.is_some()),
    ]
    .into_iter()
    .find_map(|(f, given)| given.then_some(f))
    {
        return Err(Fatal::usage(
            format!(
                "{flag} with --launches: each launch writes its own document into --output DIR"
            ),
            format!("drop {flag}; DIR/launch-K/result.json is launch K's document"),
        ));
    }
    let under = "each launch is a run of the launcher: run it L times with --output DIR/launch-K, \
                 then `commbench launches DIR/launch-*/result.json --output DIR`";
    if b.rank.is_some() {
        return Err(Fatal::usage(
            "--launches with --rank: a rank started by hand cannot start the other ranks again",
            under,
        ));
    }
    if RankEnv::detect(None, None, 2).is_ok_and(|e| !e.is_local_launcher()) {
        return Err(Fatal::usage(
            "--launches under a launcher (mpirun, srun): only the launcher starts fresh ranks",
            under,
        ));
    }
    Ok((Some(l), None))
}
