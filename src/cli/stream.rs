//! `--stream FILE|-` on rank 0 (docs/result-format.md; the lines are
//! `commbench::analysis::stream`'s): the start line before anything is measured, a line for
//! each point as the engine keeps it for good and for each all-pairs round as its cells come
//! in, the end line once the run's files are written. Each line is one write made before the
//! run goes on, so a run killed at any moment leaves whole lines (a kill in the middle of a
//! write can cut only the line being written, which a reader leaves out).
//!
//! A stream that cannot be written stops, and the run goes on to write its document; the
//! failure is reported when the run ends (exit 1), except a reader of standard output that
//! went away (`| head`), which wanted no more.

use super::fatal::Fatal;
use super::files;
use super::live::Heard;
use super::plan::{Plan, Work};
use commbench::analysis::assemble::Started;
use commbench::analysis::document::{Environment, Point, ResultDoc};
use commbench::analysis::matrix::MatrixCell;
use commbench::analysis::stream::{
    self, AllPairsStart, BackendLine, End, PointLine, RanksLine, RoundLine, Start, STREAM,
    STREAM_VERSION,
};
use commbench::core::method::allpairs::RoundSeen;
use commbench::core::transport::BackendInfo;
use serde::Serialize;
use std::io::Write;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Instant;

/// This process's stream: one per run, on rank 0 only.
static OPEN: OnceLock<Stream> = OnceLock::new();

/// A stream being written.
struct Stream {
    /// Where it goes, for messages.
    name: String,
    /// When the run started, for the lines' times.
    started: Instant,
    state: Mutex<State>,
}

/// Where the lines go.
enum Sink {
    Stdout,
    File(std::fs::File),
}

/// What has been written.
struct State {
    /// `None` once the stream ended or stopped.
    sink: Option<Sink>,
    /// Why it stopped, to report when the run ends.
    problem: Option<String>,
    /// Lines written.
    lines: u64,
    /// Point lines written: the next point's index.
    points: u64,
    /// Round lines written.
    rounds: u64,
    /// Backends whose line is written.
    backends: Vec<String>,
    /// Whether the all-pairs ranks line is written.
    ranks: bool,
    /// Whether the run is all-pairs (the end line counts rounds).
    allpairs: bool,
}

/// Start `plan`'s stream, if it asks for one, before anything is measured (rank 0 only):
/// the start line written to standard output or a file that replaces what its path held.
/// `ranks` and `launcher`: the run's, as rank 0 sees them before it starts.
pub fn open(plan: &Plan, ranks: u32, launcher: &str) -> Result<(), Fatal> {
    let Some(path) = &plan.outputs.stream else {
        return Ok(());
    };
    let recipe = plan.recipe();
    let mut names: Vec<&str> = plan.backends.iter().map(|b| b.name()).collect();
    names.dedup();
    let mut config = recipe.config.clone();
    config.ranks = ranks;
    config.backend = names.join(",");
    let allpairs = match &plan.work {
        Work::AllPairs(w) => Some(AllPairsStart {
            config: w.config.clone(),
            rule: w.rule(),
        }),
        _ => None,
    };
    let start = Start {
        stream: STREAM.into(),
        version: STREAM_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        command: recipe.command.clone(),
        config,
        environment: Environment::probe(&names.join(","), BackendInfo::new(), ranks, launcher),
        started_unix_s: Started::now().unix_s,
        analysis: recipe.analyses(),
        allpairs,
    };
    let is_allpairs = start.allpairs.is_some();
    let first = stream::line("start", &start).map_err(|e| Fatal::run(e.to_string(), None))?;
    let sink = if plan.outputs.stream_to_stdout() {
        files::to_stdout(&String::from_utf8_lossy(&first));
        Sink::Stdout
    } else {
        let f = files::create_stream(path, &first).map_err(|e| {
            Fatal::usage(
                format!("--stream: {e}"),
                "choose a path in a directory that exists and you can write; nothing was \
                 measured",
            )
        })?;
        Sink::File(f)
    };
    let s = Stream {
        name: path.display().to_string(),
        started: Instant::now(),
        state: Mutex::new(State {
            sink: Some(sink),
            problem: None,
            lines: 1,
            points: 0,
            rounds: 0,
            backends: Vec::new(),
            ranks: false,
            allpairs: is_allpairs,
        }),
    };
    let _ = OPEN.set(s);
    Ok(())
}

/// The line of a point `backend` kept for good, analysed as the document analyses it (when
/// this process streams); `timer` and `info` are its run's, for the backend's line.
pub fn point(backend: &'static str, (timer, info): Heard, point: Point) {
    if let Some(s) = OPEN.get() {
        s.point(backend, (timer, info), point);
    }
}

/// The line of an all-pairs round of `backend` (when this process streams).
pub fn round(backend: &'static str, seen: RoundSeen) {
    if let Some(s) = OPEN.get() {
        s.round(backend, seen);
    }
}

/// The end line of a run that wrote `doc`, its document at `documents` (`-`: standard
/// output): why the stream could not be written, if it could not.
pub fn end(doc: &ResultDoc, documents: Vec<String>) -> Option<String> {
    let s = OPEN.get()?;
    s.end(End {
        status: doc.status.clone(),
        error: doc.error.clone(),
        points: 0,
        rounds: None,
        unix_s: 0.0,
        wall_s: doc.wall_s,
        documents,
    })
}

/// The end line of a run that ended without a document (it failed to start, or a rank could
/// not run it), when none was written: status `partial` with its reason.
pub fn end_failed(outcome: &Result<(), Fatal>) {
    let Some(s) = OPEN.get() else {
        return;
    };
    let error = match outcome {
        Ok(()) => None,
        Err(f) if f.reason.is_empty() => Some("the run failed".to_string()),
        Err(f) => Some(f.reason.clone()),
    };
    let _ = s.end(End {
        status: if error.is_some() {
            "partial"
        } else {
            "complete"
        }
        .into(),
        error,
        points: 0,
        rounds: None,
        unix_s: 0.0,
        wall_s: s.started.elapsed().as_secs_f64(),
        documents: Vec::new(),
    });
}

/// Seconds since the Unix epoch.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Stream {
    fn state(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// A point `backend` kept for good, analysed as the document analyses it; the backend's
    /// line first if this is its first point.
    fn point(&self, backend: &str, (timer, info): Heard, point: Point) {
        let mut st = self.state();
        if st.sink.is_none() {
            return;
        }
        if !st.backends.iter().any(|b| b == backend) {
            st.backends.push(backend.to_string());
            let b = BackendLine {
                backend: backend.to_string(),
                timer: timer.map(Into::into),
                backend_info: info.unwrap_or_default(),
            };
            self.write(&mut st, "backend", &b);
        }
        let line = PointLine {
            index: st.points,
            unix_s: unix_now(),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            point,
        };
        if self.write(&mut st, "point", &line) {
            st.points += 1;
        }
    }

    /// A round with its cells; the ranks' line first, before the first round.
    fn round(&self, backend: &str, mut seen: RoundSeen) {
        let mut st = self.state();
        if st.sink.is_none() {
            return;
        }
        let lost = std::mem::take(&mut seen.run.lost);
        if !st.ranks {
            st.ranks = true;
            let run = seen.run;
            let r = RanksLine {
                backend: backend.to_string(),
                ranks: run.ranks,
                hosts: run.hosts,
                switches: run.switches,
                hypercube: run.hypercube,
                timers: run.timers,
                backend_info: run.backend_info.unwrap_or_default(),
            };
            self.write(&mut st, "ranks", &r);
        }
        let cells: Vec<MatrixCell> = seen.cells;
        let line = RoundLine {
            index: seen.index as u64,
            unix_s: unix_now(),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            round: seen.round,
            cells,
            lost,
        };
        if self.write(&mut st, "round", &line) {
            st.rounds += 1;
        }
    }

    /// The end line, `end` with the counts and the time filled in; the stream is closed.
    fn end(&self, mut end: End) -> Option<String> {
        let mut st = self.state();
        end.points = st.points;
        end.rounds = st.allpairs.then_some(st.rounds);
        end.unix_s = unix_now();
        self.write(&mut st, "end", &end);
        st.sink = None;
        st.problem.take()
    }

    /// Write one line (one write, done before the run goes on); on failure the stream
    /// stops, saying why. Whether it was written.
    fn write<T: Serialize>(&self, st: &mut State, kind: &str, body: &T) -> bool {
        let bytes = match stream::line(kind, body) {
            Ok(b) => b,
            Err(e) => {
                st.problem = Some(format!("--stream {}: {e}", self.name));
                st.sink = None;
                return false;
            }
        };
        let Some(sink) = st.sink.as_mut() else {
            return false;
        };
        let written = match sink {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes).and_then(|()| out.flush())
            }
            Sink::File(f) => f.write_all(&bytes),
        };
        match written {
            Ok(()) => {
                st.lines += 1;
                true
            }
            Err(e) => {
                let gone =
                    matches!(sink, Sink::Stdout) && e.kind() == std::io::ErrorKind::BrokenPipe;
                if !gone {
                    st.problem = Some(format!(
                        "--stream {}: stopped after {} whole line(s): {e}",
                        self.name, st.lines
                    ));
                }
                st.sink = None;
                false
            }
        }
    }
}
