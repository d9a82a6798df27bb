//! Sets of launches: `--launches L` runs the measurement L times, each launch a process of
//! its own (so fresh rank placement and fresh connections) started with the same command line,
//! writing DIR/launch-K; then the set's summary, DIR/launches.json and DIR/launches.txt
//! (`analysis::launches`). `commbench launches DOC...` summarises documents a launcher's loop
//! wrote. `compare` reads a set (its directory or its launches.json) as one side.

use super::analyze::{load, SUMMARY_JSON};
use super::args::LaunchesArgs;
use super::fatal::Fatal;
use super::files;
use super::plan::launches::{launch_dir, ENV_LAUNCH};
use super::plan::Plan;
use super::signals;
use commbench::analysis::document::ResultDoc;
use commbench::analysis::launches::{self, LaunchSet, Member};
use commbench::render::kind::launches::text;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// The summary's text in a set's directory (beside [`SUMMARY_JSON`]).
const SUMMARY_TEXT: &str = "launches.txt";

/// Run `plan` as a set of `asked` launches into its output directory, then summarise them.
pub fn run_set(plan: &Plan, asked: u32) -> Result<(), Fatal> {
    let dir = plan
        .outputs
        .dir
        .clone()
        .ok_or_else(|| Fatal::usage("--launches needs --output DIR", "add --output DIR"))?;
    if plan.under_mpi() {
        return Err(Fatal::usage(
            "--launches with the mpi backend: only mpirun or srun start MPI ranks",
            "run the launcher L times with --output DIR/launch-K, then `commbench launches \
             DIR/launch-*/result.json --output DIR`",
        ));
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| Fatal::run(format!("cannot create {}: {e}", dir.display()), None))?;
    let exe = std::env::current_exe().map_err(|e| {
        Fatal::run(
            format!("cannot find this program to start a launch: {e}"),
            None,
        )
    })?;
    let mut exits: Vec<Option<i32>> = Vec::new();
    let mut stopped = None;
    for k in 1..=asked {
        if let Some(sig) = signals::STOP.requested() {
            stopped = Some(sig);
            break;
        }
        if !plan.outputs.quiet {
            say!(
                "commbench: launch {k} of {asked} (fresh processes), into {}",
                dir.join(launch_dir(k)).display()
            );
        }
        let status = launch(&exe, k, asked)?;
        exits.push(status.code());
        if status.code() == Some(2) {
            // A usage error says its reason itself, and every other launch would repeat it.
            return Err(Fatal::silent(2));
        }
        if let Some(sig) = signals::STOP.requested() {
            stopped = Some(sig);
            break;
        }
    }
    let set = summarise_launches(&dir, &exits, asked)?;
    write_summary(&dir, &set)?;
    if !plan.outputs.quiet {
        files::to_stdout(&text(&set));
    }
    say!("wrote {}", dir.join(SUMMARY_JSON).display());
    match (stopped, set.status.as_str()) {
        (Some(sig), _) => Err(Fatal::silent(signals::exit_code(sig))),
        (None, "complete") => Ok(()),
        (None, _) => Err(Fatal::run(
            format!(
                "the set is {}: {}",
                set.status,
                set.error.clone().unwrap_or_default()
            ),
            Some(format!(
                "each launch's document is in {}/launch-K",
                dir.display()
            )),
        )),
    }
}

/// Start launch `k` of `asked` and wait for it; a first signal to this process is passed on
/// to it once (it then saves what it measured and stops at its safe point), and it is waited
/// for. A launch is a process group of its own, so a terminal's Ctrl-C reaches it only through
/// here, once.
fn launch(exe: &Path, k: u32, asked: u32) -> Result<ExitStatus, Fatal> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(ENV_LAUNCH, format!("{k}/{asked}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Fatal::run(format!("cannot start launch {k}: {e}"), None))?;
    signals::register_child(child.id());
    wait_passing_signals(&mut child)
        .map_err(|e| Fatal::run(format!("waiting for launch {k}: {e}"), None))
}

fn wait_passing_signals(child: &mut Child) -> std::io::Result<ExitStatus> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let mut passed = false;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if let (false, Some(sig)) = (passed, signals::STOP.requested()) {
            passed = true;
            let sig = Signal::try_from(sig).unwrap_or(Signal::SIGTERM);
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = kill(Pid::from_raw(pid), sig);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The set in `dir` after its launches ran, `exits[k-1]` launch k's exit status.
fn summarise_launches(dir: &Path, exits: &[Option<i32>], asked: u32) -> Result<LaunchSet, Fatal> {
    let paths: Vec<String> = (1..=exits.len() as u32)
        .map(|k| format!("{}/result.json", launch_dir(k)))
        .collect();
    let docs: Vec<Option<ResultDoc>> = paths.iter().map(|p| load(&dir.join(p)).ok()).collect();
    let members: Vec<Member<'_>> = docs
        .iter()
        .zip(&paths)
        .zip(exits)
        .map(|((d, p), e)| Member {
            doc: d.as_ref(),
            path: p,
            exit: *e,
        })
        .collect();
    launches::summarise(&members, asked).map_err(|e| {
        Fatal::run(
            e.to_string(),
            Some(format!(
                "each launch's output is in {}/launch-K",
                dir.display()
            )),
        )
    })
}

/// Write `set` into `dir`: launches.json, then launches.txt.
fn write_summary(dir: &Path, set: &LaunchSet) -> Result<(), Fatal> {
    let json = serde_json::to_string_pretty(set).map_err(|e| Fatal::run(e.to_string(), None))?;
    for (name, body) in [(SUMMARY_JSON, json + "\n"), (SUMMARY_TEXT, text(set))] {
        files::write_file(&dir.join(name), &|f| f.write_all(body.as_bytes()))
            .map_err(|e| Fatal::run(e, None))?;
    }
    Ok(())
}

/// `commbench launches DOC... [--output DIR]`.
pub fn summarise_command(a: LaunchesArgs) -> Result<(), Fatal> {
    let mut files_given: Vec<PathBuf> = Vec::new();
    for f in &a.files {
        for p in super::analyze::expand(f)? {
            if files_given.contains(&p) {
                return Err(Fatal::usage(
                    format!("{} is given twice", p.display()),
                    "give each launch once: a launch counted twice looks like two that agree",
                ));
            }
            files_given.push(p);
        }
    }
    let docs = files_given
        .iter()
        .map(|f| load(f))
        .collect::<Result<Vec<_>, _>>()?;
    let paths: Vec<String> = files_given
        .iter()
        .map(|f| recorded_path(f, a.output.as_deref()))
        .collect();
    let members: Vec<Member<'_>> = docs
        .iter()
        .zip(&paths)
        .map(|(d, p)| Member {
            doc: Some(d),
            path: p,
            exit: None,
        })
        .collect();
    let set = launches::summarise(&members, members.len() as u32).map_err(|e| {
        Fatal::usage(
            e.to_string(),
            "give the result documents of the launches of one measurement",
        )
    })?;
    files::to_stdout(&text(&set));
    if let Some(dir) = &a.output {
        std::fs::create_dir_all(dir)
            .map_err(|e| Fatal::run(format!("cannot create {}: {e}", dir.display()), None))?;
        write_summary(dir, &set)?;
        say!("wrote {}", dir.join(SUMMARY_JSON).display());
    }
    Ok(())
}

/// `f` as a summary in `out` records it: relative to `out` when below it, else as given made
/// absolute.
fn recorded_path(f: &Path, out: Option<&Path>) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let file = abs(f);
    if let Some(rel) = out.and_then(|o| file.strip_prefix(abs(o)).ok().map(Path::to_path_buf)) {
        return rel.display().to_string();
    }
    file.display().to_string()
}
