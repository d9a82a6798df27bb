//! `allpairs --raw all`: every process appends the raw trials of the cells its ranks measured
//! to a file of its own in the raw directory, one JSON line a cell
//! (`commbench::core::method::allpairs::RawCell`), where the ranks run: `rank-R.jsonl` for a
//! process of one rank, `ranks.jsonl` for the simulator, whose ranks all run in one process.
//! Rank 0's document lists the files (`allpairs.raw_files`); `report`, `plot` and `compare`
//! read them back when they need the trials (`commbench::analysis::matrix::RawFiles`).

use commbench::analysis::document::ResultDoc;
use commbench::core::method::allpairs::{RawCell, RawSink};
use commbench::core::{Error, Rank, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file name of rank `rank`'s raw trials (`None`: every rank in one process).
pub fn file_name(rank: Option<Rank>) -> String {
    match rank {
        Some(r) => format!("rank-{r}.jsonl"),
        None => "ranks.jsonl".into(),
    }
}

/// This process's raw file, opened when its first cell is written.
pub struct RawWriter {
    dir: PathBuf,
    one_process: bool,
    out: Mutex<Option<BufWriter<File>>>,
}

impl RawWriter {
    /// A writer into `dir`; `one_process`: every rank of the run writes from this process.
    pub fn new(dir: PathBuf, one_process: bool) -> Self {
        RawWriter {
            dir,
            one_process,
            out: Mutex::new(None),
        }
    }

    /// Write what is buffered (the simulator's file is flushed only here and when its buffer
    /// fills; a process of one rank flushes every round).
    pub fn finish(&self) -> Result<()> {
        let mut g = self.out.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_mut() {
            Some(w) => w.flush().map_err(|e| self.error(e)),
            None => Ok(()),
        }
    }

    fn error(&self, e: std::io::Error) -> Error {
        Error::io(format!("raw trials in {}", self.dir.display()), e)
    }

    fn open(&self, rank: Rank) -> Result<BufWriter<File>> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.error(e))?;
        let name = file_name((!self.one_process).then_some(rank));
        let f = File::create(self.dir.join(name)).map_err(|e| self.error(e))?;
        Ok(BufWriter::with_capacity(1 << 16, f))
    }
}

impl RawSink for RawWriter {
    fn write(&self, rank: Rank, cells: &[RawCell]) -> Result<()> {
        let mut g = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(self.open(rank)?);
        }
        let Some(w) = g.as_mut() else {
            return Ok(());
        };
        for c in cells {
            serde_json::to_writer(&mut *w, c)
                .map_err(|e| Error::Protocol(format!("encoding raw trials: {e}")))?;
            w.write_all(b"\n").map_err(|e| self.error(e))?;
        }
        if !self.one_process {
            w.flush().map_err(|e| self.error(e))?;
        }
        Ok(())
    }
}

/// Give the cells of `doc` (read from `path`) the trials of its raw files, when it lists
/// some: each file looked for in the directory as recorded, then beside the document (a
/// directory moved with it). A file not found, or a line that does not read, is said on
/// standard error; its cells keep their summaries.
pub fn attach(path: &Path, doc: &mut ResultDoc) {
    let Some(m) = doc.allpairs.as_mut() else {
        return;
    };
    let Some(raw) = m.raw_files.clone() else {
        return;
    };
    let recorded = PathBuf::from(&raw.dir);
    let beside = path
        .parent()
        .map(|p| p.join(recorded.file_name().unwrap_or(recorded.as_os_str())));
    let mut missing = Vec::new();
    for name in &raw.files {
        let found = std::iter::once(recorded.join(name))
            .chain(beside.iter().map(|b| b.join(name)))
            .find(|p| p.is_file());
        let Some(file) = found else {
            missing.push(name.clone());
            continue;
        };
        match read_lines(&file) {
            Ok(cells) => {
                m.attach_raw(cells);
            }
            Err(e) => say!("commbench: note: {}: {e}", file.display()),
        }
    }
    if !missing.is_empty() {
        say!(
            "commbench: note: {}: raw file(s) {} not found in {} or beside the document; \
             their cells are compared by their summaries",
            path.display(),
            missing.join(", "),
            raw.dir
        );
    }
}

/// The cells of one raw file.
fn read_lines(file: &Path) -> std::result::Result<Vec<RawCell>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}
