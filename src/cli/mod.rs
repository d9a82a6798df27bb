//! The `commbench` command line (design §2), one way through:
//! [`args`] (clap) -> [`plan`] (typed, fully validated) -> [`run`] (the [`backend`]s launch the
//! ranks) -> `commbench::analysis::assemble` (the result document on rank 0) -> the renderers
//! and [`files`];
//! [`analyze`] reads documents back (`report`, `plot`, `compare`). [`backend`] is the one place
//! that names the backends. Exit codes: 0 success, 1 a failed run, 2 bad usage ([`fatal`]).

/// A line on standard error that never panics: a terminal that closed (SIGHUP) or a reader
/// that went away must not turn a run that measured into one that lost everything.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod allpairs;
pub mod analyze;
pub mod args;
pub mod backend;
pub mod fatal;
pub mod files;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod help_defaults;
mod launches;
mod live;
pub mod plan;
mod progress;
mod raw;
mod run;
mod signals;
mod stream;

use args::{Cli, Command, Given, QueueWhich, TimerArgs};
use backend::BACKENDS;
use clap::error::ErrorKind;
use clap::FromArgMatches;
use commbench::core::method::queue::QueueKind;
use commbench::core::method::sixtimes::Suite;
use commbench::core::method::PatternKind;
use fatal::{Fatal, EXIT_USAGE};
use plan::Work;
use std::process::ExitCode;

/// Parse the command line, do what it says, and turn the outcome into an exit code.
pub fn main() -> ExitCode {
    let mut cmd = args::command();
    let parsed = match cmd.try_get_matches_from_mut(std::env::args_os()) {
        Ok(m) => {
            let given = Given::from_matches(&cmd, &m);
            Cli::from_arg_matches(&m)
                .map(|cli| (cli, given))
                .map_err(|e| e.format(&mut cmd))
        }
        Err(e) => Err(e),
    };
    let result = match parsed {
        Ok((cli, given)) => dispatch(cli.cmd, &given),
        // --help and --version print and succeed.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // No subcommand: the help, as a usage error.
        Err(e) if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => Err(usage_from_clap(&e)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) if f.reason.is_empty() => ExitCode::from(f.code),
        Err(f) => {
            say!("commbench: error: {}", f.reason);
            if let Some(h) = f.hint {
                say!("hint: {h}");
            }
            ExitCode::from(f.code)
        }
    }
}

/// clap's own usage errors in commbench's form: one line (with the arguments clap lists below
/// it, such as the missing ones), then a hint (the values a closed choice takes, or clap's tip).
fn usage_from_clap(e: &clap::Error) -> Fatal {
    let text = e.render().to_string();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let first = lines.first().map(|l| l.trim()).unwrap_or("bad usage");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // The indented lines right after the first name what it is about.
    let listed: Vec<&str> = lines
        .iter()
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .map(|l| l.trim())
        .collect();
    let reason = if listed.is_empty() {
        first.to_string()
    } else {
        format!("{} {}", first, listed.join(" "))
    };
    let values = lines
        .iter()
        .find_map(|l| l.trim().strip_prefix("[possible values: "));
    let tip = lines.iter().find_map(|l| l.trim().strip_prefix("tip: "));
    let usage = lines.iter().find_map(|l| l.trim().strip_prefix("Usage: "));
    let hint = match (values, tip, usage) {
        (Some(v), _, _) => format!("use one of: {}", v.trim_end_matches(']')),
        (None, Some(t), _) => t.to_string(),
        (None, None, Some(u)) => format!("usage: {u}"),
        (None, None, None) => "see `commbench --help`".to_string(),
    };
    Fatal::usage(reason, hint)
}

fn dispatch(cmd: Command, given: &Given) -> Result<(), Fatal> {
    let other = match plan_of(cmd, given) {
        Ok(plan) => return plan.and_then(measure),
        Err(other) => *other,
    };
    match other {
        Command::Timer(a) => timer(a),
        Command::Report(a) => analyze::report(a),
        Command::Plot(a) => analyze::plot(a),
        Command::Compare(a) => analyze::compare(a),
        Command::Launches(a) => launches::summarise_command(a),
        Command::Backends => {
            list_backends();
            Ok(())
        }
        // Every other command measures, and was planned above.
        _ => Ok(()),
    }
}

/// The plan of a measuring command, fully validated and nothing started; `Err(cmd)` gives a
/// command that measures nothing back.
fn plan_of(cmd: Command, given: &Given) -> Result<Result<plan::Plan, Fatal>, Box<Command>> {
    Ok(match cmd {
        Command::Queue(q) => match q.which {
            QueueWhich::Posted(p) => {
                plan::queue(QueueKind::Posted, Some(&p.traversed), p.queue, given)
            }
            QueueWhich::Unexpected(u) => plan::queue(QueueKind::Unexpected, None, u, given),
        },
        Command::Pingpong(a) => plan::pattern(PatternKind::PingPong, a, given),
        Command::Exchange(a) => plan::pattern(PatternKind::Exchange, a, given),
        Command::Bandwidth(b) => plan::bandwidth(b, given),
        Command::Echo(e) => plan::seed001(Suite::Echo, e.sizes, Some(&e.hops), e.common, given),
        Command::Overhead(e) => {
            plan::seed001(Suite::Overhead, e.sizes, Some(&e.hops), e.common, given)
        }
        Command::Interference(i) => plan::seed001(
            Suite::Interference { streams: i.streams },
            None,
            None,
            i.common,
            given,
        ),
        Command::Transpose(t) => {
            if t.sizes.is_some() || t.sweep {
                let flag = if t.sweep { "--sweep" } else { "--sizes" };
                return Ok(Err(Fatal::usage(
                    format!(
                        "{flag} is not used by transpose: it measures one N x N matrix of doubles"
                    ),
                    "give the matrix order with --n (the message is N x N x 8 bytes)",
                )));
            }
            plan::transpose(t.n, t.common, t.refused.into(), given)
        }
        Command::Allpairs(a) => plan::allpairs(a, given),
        other => return Err(Box::new(other)),
    })
}

/// Run a measuring plan and report it (on rank 0; other ranks report only their own failure).
fn measure(plan: plan::Plan) -> Result<(), Fatal> {
    if let Some(asked) = plan.outputs.launches {
        // This process runs the set; each launch measures in processes of its own.
        signals::install(true).map_err(|e| Fatal::run(e, None))?;
        signals::set_safe_point("the launch under way");
        return launches::run_set(&plan, asked);
    }
    let reports = run::reporting_rank(&plan);
    // First, before any thread is started: SIGINT and SIGTERM stop the run at a safe point.
    signals::install(reports).map_err(|e| Fatal::run(e, None))?;
    if let Work::AllPairs(w) = &plan.work {
        // Every process writes its own raw file: each checks the directory on its host.
        if let Some(dir) = &w.raw_dir {
            files::probe_raw_dir(dir)?;
        }
    }
    if reports {
        files::probe(&plan.outputs)?;
        let who = run::Who::of(&plan);
        stream::open(&plan, who.ranks, &who.launcher)?;
        live::tell_with(stream::point);
        live::analyse_with(plan.recipe());
    }
    let ended = match plan.work.clone() {
        Work::Pattern(kind) => run::measure_spec(&plan, kind),
        Work::Sweep(s) => run::measure_spec(&plan, s),
        Work::Transpose(t) => run::measure_spec(&plan, t),
        Work::SixTimes(x) => run::measure_spec(&plan, x),
        Work::Queue(q) => run::measure_spec(&plan, q),
        Work::AllPairs(w) => allpairs::run(&plan, &w),
    };
    // A run that wrote its document ended its stream with it.
    stream::end_failed(&ended);
    ended
}

/// `commbench backends`.
fn list_backends() {
    for b in BACKENDS {
        let state = if b.compiled {
            "compiled in".to_string()
        } else if b.implemented {
            format!("not compiled in (rebuild with --features {})", b.feature)
        } else {
            "not available in this version".to_string()
        };
        println!("{:4} {:52} {state}", b.name, b.about);
        if let Some(found) = backend::found_here(b.name) {
            println!("     {found}");
        }
    }
}

/// `commbench timer [--backend B]`: characterise this process's clock, or rank 0's on B.
/// With `--json -` standard output holds the JSON alone.
fn timer(a: TimerArgs) -> Result<(), Fatal> {
    commbench::core::method::check_timer_samples(a.clock.samples)
        .map_err(|e| args::invalid_method(e, "for example --samples 16777216"))?;
    let samples = a.clock.samples;
    let chosen = backend::for_timer(a.on.backend.as_deref(), a.on.sim_config)?;
    if let Some(b) = &chosen {
        plan::check_timer_backend(b)?;
    }
    let report = match chosen {
        None => backend::monotonic_timer("CLOCK_MONOTONIC".into(), samples),
        Some(b) => b.timer(samples)?,
    };
    let json_to_stdout = a.json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if !json_to_stdout {
        files::to_stdout(&commbench::render::kind::timer::report(&report));
    }
    if let Some(p) = a.json {
        files::write_json_value(&p, &report)?;
    }
    Ok(())
}
