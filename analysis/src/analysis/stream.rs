//! The stream of a run (`--stream FILE|-`, docs/result-format.md): JSON Lines that rank 0
//! writes as the run goes, each line whole and written as soon as what it records is final,
//! so that a run killed before its end leaves every point (every all-pairs round) it
//! completed; and the document a stream stands for, read back ([`read_document`]) by
//! `commbench report`, `plot` and `compare`.
//!
//! Format [`STREAM`], version [`STREAM_VERSION`]. Every line is one JSON object whose `line`
//! names its kind:
//!
//! * `start`, the first: the format and its version, the tool version, the command line, the
//!   effective configuration and the environment as the document records them, what the
//!   document's analyses take ([`Analyses`]), and an all-pairs run's schedule and rule;
//! * `backend`: a backend's timer and description, before its first point;
//! * `point`: one point as the document's `points[]` holds it, with its index there and when
//!   it was written;
//! * `ranks`: an all-pairs run's ranks, hosts and clocks, before its first round;
//! * `round`: one all-pairs round with its cells as the document's `allpairs.cells[]` holds
//!   them;
//! * `end`, the last: how the run ended and where its document was written.
//!
//! A reader skips kinds it does not know, so the format only grows; a stream without its end
//! line reads as a `partial` document of the points it holds.

use crate::analysis::allpairs::Rule;
use crate::analysis::assemble::{self, Analyses};
use crate::analysis::document::{
    Environment, Point, ResultDoc, RunConfig, TimerSection, SCHEMA, SCHEMA_VERSION,
};
use crate::analysis::matrix::MatrixCell;
use commbench_core::method::allpairs::{AllPairsCollected, AllPairsConfig, LostRank, RoundRaw};
use commbench_core::method::timer::TimerReport;
use commbench_core::transport::error::{escape_controls, Error, Result};
use commbench_core::transport::BackendInfo;
use serde::{Deserialize, Serialize};

/// The format named in every stream's first line.
pub const STREAM: &str = "commbench-stream";
/// The stream format's version; bumped when a key changes meaning (never so far).
pub const STREAM_VERSION: u32 = 1;

/// The first line (`"line": "start"`): what the run is, before anything is measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    /// Always [`STREAM`].
    pub stream: String,
    /// [`STREAM_VERSION`].
    pub version: u32,
    /// The commbench version that wrote it.
    pub tool_version: String,
    /// The command line, argument by argument.
    pub command: Vec<String>,
    /// The effective configuration, as the document's `config`.
    pub config: RunConfig,
    /// Where the run happens, as the document's `environment` (the backend's description
    /// comes with its `backend` line).
    pub environment: Environment,
    /// When the run started (seconds since the Unix epoch).
    pub started_unix_s: u64,
    /// What the document's analyses take besides the points.
    pub analysis: Analyses,
    /// An all-pairs run's schedule and the rule its suspects are flagged by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allpairs: Option<AllPairsStart>,
}

/// What an all-pairs run's matrix section takes besides its rounds and cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllPairsStart {
    /// The schedule and its settings, as `allpairs.config`.
    pub config: AllPairsConfig,
    /// The rule, as `allpairs.rule`.
    pub rule: Rule,
}

/// A backend's line (`"line": "backend"`), before its first point: rank 0's timer and the
/// backend's description as the run had them then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendLine {
    /// The backend's name, as each of its points' `backend`.
    pub backend: String,
    /// Its timer characterisation, as the document's `timer`.
    pub timer: Option<TimerSection>,
    /// What it recorded about itself, as `environment.backend_info`.
    #[serde(default)]
    pub backend_info: BackendInfo,
}

/// A point's line (`"line": "point"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointLine {
    /// Its index in the document's `points`, from 0.
    pub index: u64,
    /// When it was written, seconds since the Unix epoch.
    pub unix_s: f64,
    /// When it was written, seconds after the run started.
    pub elapsed_s: f64,
    /// The point, as the document's `points[]` holds it (raw `trial_ns` included).
    pub point: Point,
}

/// An all-pairs run's ranks (`"line": "ranks"`), before its first round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RanksLine {
    /// The backend.
    pub backend: String,
    /// Ranks in the run.
    pub ranks: u32,
    /// The host of every rank.
    pub hosts: Vec<String>,
    /// The switches above every rank's host (`allpairs.switches`); absent when none is
    /// known and in streams of earlier versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<String>,
    /// The hypercube's dimension when the transport routes over one (the simulator).
    #[serde(default)]
    pub hypercube: Option<u32>,
    /// Every rank's clock, characterised (seed 000 §3.1).
    pub timers: Vec<TimerReport>,
    /// What the backend recorded about itself, as `environment.backend_info`.
    #[serde(default)]
    pub backend_info: BackendInfo,
}

/// An all-pairs round's line (`"line": "round"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundLine {
    /// Its index in the document's `allpairs.rounds`, from 0.
    pub index: u64,
    /// When it was written, seconds since the Unix epoch.
    pub unix_s: f64,
    /// When it was written, seconds after the run started.
    pub elapsed_s: f64,
    /// The round, as `allpairs.rounds[]` holds it (its start and end on rank 0's clock).
    pub round: RoundRaw,
    /// Its cells, as `allpairs.cells[]` holds them.
    pub cells: Vec<MatrixCell>,
    /// Every rank the run went on without so far, as `allpairs.lost[]` holds them (absent:
    /// none; streams written before it never lost one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostRank>,
}

/// The last line (`"line": "end"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct End {
    /// As the document's `status`: `complete`, `partial` or `interrupted`.
    pub status: String,
    /// Why the run failed, when it did.
    pub error: Option<String>,
    /// Point lines written.
    pub points: u64,
    /// Round lines written (all-pairs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u64>,
    /// When it was written, seconds since the Unix epoch.
    pub unix_s: f64,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
    /// Where the full document was written (`-`: standard output); empty when it was not.
    pub documents: Vec<String>,
}

/// `body` as one line of kind `kind` (`{"line": kind, ...body's keys}`) with its newline:
/// what a writer hands to a single write.
pub fn line<T: Serialize>(kind: &str, body: &T) -> Result<Vec<u8>> {
    #[derive(Serialize)]
    struct Tagged<'a, T> {
        line: &'a str,
        #[serde(flatten)]
        body: &'a T,
    }
    let mut out = serde_json::to_vec(&Tagged { line: kind, body })
        .map_err(|e| Error::Protocol(format!("writing a {kind} line: {e}")))?;
    out.push(b'\n');
    Ok(out)
}

/// Whether `text` is a stream: its first line names the format.
pub fn is_stream(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        stream: Option<String>,
    }
    let first = text.split('\n').next().unwrap_or_default();
    serde_json::from_str::<Probe>(first).is_ok_and(|p| p.stream.as_deref() == Some(STREAM))
}

/// A result document, or the document a stream stands for ([`read`]).
pub fn read_document(text: &str) -> Result<ResultDoc> {
    if is_stream(text) {
        read(text)
    } else {
        ResultDoc::read_json(text)
    }
}

/// What the lines after the first hold.
#[derive(Default)]
struct Lines {
    backends: Vec<BackendLine>,
    points: Vec<Point>,
    ranks: Option<RanksLine>,
    rounds: Vec<RoundRaw>,
    cells: Vec<MatrixCell>,
    lost: Vec<LostRank>,
    end: Option<End>,
    /// When the last line with a time was written, seconds after the start.
    last_s: f64,
}

fn malformed(n: usize, what: impl std::fmt::Display) -> Error {
    Error::Config(format!(
        "malformed stream: line {n}: {}",
        escape_controls(&what.to_string())
    ))
}

/// Line `n`'s body of a known kind.
fn body<T: serde::de::DeserializeOwned>(n: usize, v: serde_json::Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| malformed(n, e))
}

/// The first line, checked: the format and a version this reader knows.
fn start(v: serde_json::Value) -> Result<Start> {
    let kind = v.get("line").and_then(|k| k.as_str());
    let format = v.get("stream").and_then(|k| k.as_str());
    if kind != Some("start") || format != Some(STREAM) {
        return Err(Error::Config(format!(
            "not a commbench stream (its first line is not a {STREAM:?} start line)"
        )));
    }
    let ver = v.get("version").and_then(|s| s.as_u64()).unwrap_or(0);
    if ver != u64::from(STREAM_VERSION) {
        return Err(Error::Config(format!(
            "stream version {ver} is not supported (this commbench reads {STREAM_VERSION})"
        )));
    }
    body(1, v)
}

/// The document a stream stands for: its start line's configuration and environment, the
/// points (or all-pairs rounds) it holds, analysed as the run's own document is
/// ([`assemble::analyse`], [`assemble::with_matrix`]), and the status its end line gives;
/// without an end line (the run was killed) `partial`, saying so. A last line cut short
/// (a kill while it was written) is left out; lines of kinds this version does not know are
/// skipped.
pub fn read(text: &str) -> Result<ResultDoc> {
    let pieces: Vec<&str> = text.split('\n').collect();
    let mut first: Option<Start> = None;
    let mut got = Lines::default();
    let mut cut_short = false;
    for (i, piece) in pieces.iter().enumerate() {
        let n = i + 1;
        if piece.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = match serde_json::from_str(piece) {
            Ok(v) => v,
            // The last line has no newline: the write was cut short.
            Err(_) if n == pieces.len() => {
                cut_short = true;
                break;
            }
            Err(e) => return Err(malformed(n, e)),
        };
        if first.is_none() {
            first = Some(start(v)?);
            continue;
        }
        if got.end.is_some() {
            return Err(malformed(n, "a line after the end line"));
        }
        take(&mut got, n, v)?;
    }
    let start = first.ok_or_else(|| {
        Error::Config("an empty stream: the run wrote nothing (not even its first line)".into())
    })?;
    document(start, got, cut_short)
}

/// Line `n`, the `index`-th line of its `kind` after `seen` of them: an error when lines
/// before it are missing.
fn in_order(n: usize, kind: &str, index: u64, seen: usize) -> Result<()> {
    if index == seen as u64 {
        return Ok(());
    }
    Err(malformed(
        n,
        format!("{kind} {index} after {seen} {kind} line(s): lines are missing"),
    ))
}

/// Take line `n` into `got`.
fn take(got: &mut Lines, n: usize, v: serde_json::Value) -> Result<()> {
    let kind = v.get("line").and_then(|k| k.as_str()).unwrap_or_default();
    match kind {
        "backend" => got.backends.push(body(n, v)?),
        "point" => {
            let p: PointLine = body(n, v)?;
            in_order(n, "point", p.index, got.points.len())?;
            got.last_s = p.elapsed_s;
            got.points.push(p.point);
        }
        "ranks" => got.ranks = Some(body(n, v)?),
        "round" => {
            let r: RoundLine = body(n, v)?;
            in_order(n, "round", r.index, got.rounds.len())?;
            got.last_s = r.elapsed_s;
            got.rounds.push(r.round);
            got.cells.extend(r.cells);
            got.lost = r.lost;
        }
        "end" => got.end = Some(body(n, v)?),
        "start" => return Err(malformed(n, "a second start line")),
        // A kind of a later version: what this one knows is read all the same.
        _ => {}
    }
    Ok(())
}

/// How a stream's run ended: its end line's `(status, error, wall_s)`, or, without one, a
/// partial run stopped from outside with the units it holds (a last line `cut_short` left
/// out).
fn ending(start: &Start, got: &Lines, cut_short: bool) -> (String, Option<String>, f64) {
    if let Some(e) = &got.end {
        return (e.status.clone(), e.error.clone(), e.wall_s);
    }
    let units = match &start.allpairs {
        Some(_) => format!("{} round(s)", got.rounds.len()),
        None => format!("{} point(s)", got.points.len()),
    };
    let torn = if cut_short {
        "; its last line, cut short, is left out"
    } else {
        ""
    };
    (
        "partial".to_string(),
        Some(format!(
            "the stream has no end line: the run was stopped before it ended (killed, or its \
             host lost) with the {units} it holds{torn}"
        )),
        got.last_s,
    )
}

/// Cells whose one-way times can be computed: `npp x trips_per_iteration` within 64 bits.
fn check_cells(cells: &[MatrixCell]) -> Result<()> {
    for c in cells {
        if c.npp
            .max(1)
            .checked_mul(c.trips_per_iteration.max(1))
            .is_none()
        {
            return Err(Error::Config(format!(
                "malformed stream: cell {} -> {} ({} B): npp {} times trips_per_iteration {} \
                 is beyond 64 bits",
                c.source, c.dest, c.size, c.npp, c.trips_per_iteration
            )));
        }
    }
    Ok(())
}

/// The document of a stream read into `start` and `got`.
fn document(start: Start, got: Lines, cut_short: bool) -> Result<ResultDoc> {
    let (status, error, wall_s) = ending(&start, &got, cut_short);
    let several = start.config.backend.contains(',');
    let mut infos = BackendInfo::new();
    let mut timer = None;
    for b in &got.backends {
        timer = timer.or_else(|| b.timer.clone());
        infos.insert(
            b.backend.clone(),
            serde_json::Value::Object(b.backend_info.clone()),
        );
    }
    if let Some(r) = &got.ranks {
        timer = timer.or_else(|| r.timers.first().cloned().map(Into::into));
        infos.insert(
            r.backend.clone(),
            serde_json::Value::Object(r.backend_info.clone()),
        );
    }
    let mut environment = start.environment;
    if !infos.is_empty() {
        environment.backend_info = assemble::described(infos, several);
    }
    // A stream does not carry the ranks' hosts: which pairs crossed them is not known.
    let pairs = start
        .config
        .method
        .pairs
        .as_ref()
        .map(|c| crate::analysis::pairs::PairsSection::of(c, &[]));
    let mut doc = ResultDoc {
        pairs,
        max_rate: None,
        schema: SCHEMA.into(),
        version: SCHEMA_VERSION,
        tool_version: start.tool_version,
        command: start.command,
        config: Some(start.config),
        environment,
        timer,
        points: got.points,
        fit: None,
        params: None,
        interference: None,
        sixtimes: None,
        queue: None,
        allpairs: None,
        report_card: None,
        status,
        error,
        started_unix_s: start.started_unix_s,
        wall_s,
    };
    doc.check_counts()?;
    check_cells(&got.cells)?;
    assemble::analyse(&mut doc, &start.analysis);
    let (Some(ap), Some(r)) = (start.allpairs, got.ranks) else {
        return Ok(doc);
    };
    let collected = AllPairsCollected {
        ranks: r.ranks,
        hosts: r.hosts,
        switches: r.switches,
        timers: r.timers,
        backend_info: Some(r.backend_info),
        hypercube: r.hypercube,
        rounds: got.rounds,
        cells: got.cells,
        // A stream does not say why its rounds ended; the coverage is still computed.
        budget_reached: false,
        lost: got.lost,
    };
    Ok(assemble::with_matrix(doc, collected, ap.config, ap.rule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testkit::point_of;

    fn start_line() -> Start {
        Start {
            stream: STREAM.into(),
            version: STREAM_VERSION,
            tool_version: "0.1.0".into(),
            command: vec!["commbench".into(), "pingpong".into()],
            config: RunConfig {
                backend: "shm".into(),
                ranks: 2,
                ..RunConfig::default()
            },
            environment: Environment::default(),
            started_unix_s: 1,
            analysis: Analyses {
                breakpoint: crate::analysis::fit::Breakpoint::Auto,
                instructions_per_second: None,
                transport_forwards: false,
            },
            allpairs: None,
        }
    }

    fn point_line(index: u64, size: u64) -> Vec<u8> {
        let p = point_of("pingpong", size, vec![100, 110, 120, 130]);
        line(
            "point",
            &PointLine {
                index,
                unix_s: 2.0,
                elapsed_s: 1.0 + index as f64,
                point: p,
            },
        )
        .unwrap()
    }

    fn text(lines: &[Vec<u8>]) -> String {
        String::from_utf8(lines.concat()).unwrap()
    }

    #[test]
    fn a_stream_reads_as_the_document_of_its_points() {
        let s = line("start", &start_line()).unwrap();
        assert!(s.starts_with(br#"{"line":"start","stream":"commbench-stream","version":1,"#));
        let end = line(
            "end",
            &End {
                status: "complete".into(),
                error: None,
                points: 2,
                rounds: None,
                unix_s: 3.0,
                wall_s: 2.5,
                documents: vec!["r.json".into()],
            },
        )
        .unwrap();
        let all = text(&[s.clone(), point_line(0, 8), point_line(1, 64), end]);
        assert!(is_stream(&all));
        let doc = read_document(&all).unwrap();
        assert_eq!(doc.status, "complete");
        assert_eq!(doc.wall_s, 2.5);
        let sizes: Vec<u64> = doc.points.iter().map(|p| p.size).collect();
        assert_eq!(sizes, [8, 64]);
        assert_eq!(doc.config.unwrap().backend, "shm");

        // Killed: no end line, and a last line cut short.
        let p2 = point_line(2, 512);
        let cut = &p2[..p2.len() / 2];
        let killed = text(&[s.clone(), point_line(0, 8), point_line(1, 64), cut.to_vec()]);
        let doc = read_document(&killed).unwrap();
        assert_eq!(doc.status, "partial");
        let e = doc.error.unwrap();
        assert!(e.contains("no end line") && e.contains("2 point(s)"), "{e}");
        assert!(e.contains("cut short"), "{e}");
        assert_eq!(doc.points.len(), 2);
        assert_eq!(doc.wall_s, 2.0);

        // Only the first line: a run killed before its first point.
        let doc = read_document(&text(std::slice::from_ref(&s))).unwrap();
        assert!(doc.points.is_empty());
        assert_eq!(doc.status, "partial");
    }

    #[test]
    fn what_a_stream_must_not_hold_is_refused() {
        let s = line("start", &start_line()).unwrap();
        // A lost line.
        let e = read(&text(&[s.clone(), point_line(0, 8), point_line(2, 64)])).unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        // A malformed line before the last.
        let e = read(&text(&[s.clone(), b"{oops\n".to_vec(), point_line(0, 8)])).unwrap_err();
        assert!(e.to_string().contains("malformed stream: line 2"), "{e}");
        // A later version.
        let mut later = start_line();
        later.version = STREAM_VERSION + 1;
        let e = read(&text(&[line("start", &later).unwrap()])).unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
        // A kind of a later version is skipped.
        let future = line("future", &serde_json::json!({"x": 1})).unwrap();
        let doc = read(&text(&[s, future, point_line(0, 8)])).unwrap();
        assert_eq!(doc.points.len(), 1);
        // A document is not a stream, and reads as a document.
        let json = include_str!("testdata/v0.1-sweep.json");
        assert!(!is_stream(json));
        assert_eq!(read_document(json).unwrap().points.len(), 4);
        assert!(read_document("").is_err());
    }
}
