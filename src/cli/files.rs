//! The files of a run: `--output DIR` (the JSON document and its two text renderings),
//! `--json FILE` and the file `--stream FILE` starts, and JSON written to a file or standard
//! output.
//!
//! A file is never destroyed by the write that was to replace it: a regular file (or a path
//! not there yet) is written to a temporary file beside it, flushed to disk and renamed over
//! it, so a reader (or a crash, or a full disk) sees the old document or the new one, never
//! half of one. A path that is not a regular file (a named pipe, a device) is written once,
//! in one go, at the end of the run: no probe opens it before, and no checkpoint writes to
//! it, since every open of a pipe is a document its reader takes.

use super::fatal::Fatal;
use super::plan::{Outputs, OUTPUT_FILES};
use commbench::analysis::document::ResultDoc;
use commbench::render::{Detail, Text};
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// What a path is to the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not there yet: created by the rename.
    Missing,
    /// A regular file (also through a symbolic link): replaced by the rename.
    Regular,
    /// A directory.
    Directory,
    /// A named pipe, a device or a socket: opened once and written in one go.
    Stream,
}

fn kind(p: &Path) -> Kind {
    match std::fs::metadata(p) {
        Err(_) => Kind::Missing,
        Ok(m) if m.is_dir() => Kind::Directory,
        Ok(m) if m.is_file() => Kind::Regular,
        Ok(m) => {
            let t = m.file_type();
            if t.is_fifo() || t.is_char_device() || t.is_block_device() || t.is_socket() {
                Kind::Stream
            } else {
                Kind::Regular
            }
        }
    }
}

/// Whether a checkpoint may be written to `p` before the run ends: only where the final
/// write replaces it (a regular file or a new path), never into a pipe or a device.
pub fn takes_checkpoints(p: &Path) -> bool {
    matches!(kind(p), Kind::Missing | Kind::Regular)
}

/// Check every output path before the first message is sent, so that a sweep is never
/// measured only to be lost: `--output DIR` is created if need be and must take new files,
/// and `--json FILE` must be a path this process can replace (its directory takes a new
/// file; a file already there is writable), or a pipe or device it may write (checked
/// without opening it, which would hand its reader an empty document).
pub fn probe(out: &Outputs) -> Result<(), Fatal> {
    if let Some(dir) = &out.dir {
        probe_dir(dir)?;
    }
    if let Some(p) = out.json.as_ref().filter(|_| !out.json_to_stdout()) {
        probe_file("--json", p)?;
    }
    if let Some(p) = out.stream.as_ref().filter(|_| !out.stream_to_stdout()) {
        probe_file("--stream", p)?;
    }
    Ok(())
}

fn unwritable(what: String, hint: &str) -> Fatal {
    Fatal::usage(what, format!("{hint}; nothing was measured"))
}

fn probe_dir(dir: &Path) -> Result<(), Fatal> {
    probe_dir_of(
        "--output",
        dir,
        "give a directory for --output (it is created if missing), or --json FILE",
    )
}

/// Check the directory of `allpairs --raw all` on this host before the first message is
/// sent: created if need be, and it must take new files.
pub fn probe_raw_dir(dir: &Path) -> Result<(), Fatal> {
    probe_dir_of(
        "--raw all: the raw directory",
        dir,
        "give a directory with --raw-dir (it is created if missing)",
    )
}

fn probe_dir_of(flag: &str, dir: &Path, not_a_dir: &str) -> Result<(), Fatal> {
    if dir.exists() && !dir.is_dir() {
        return Err(unwritable(
            format!("{flag} {} is not a directory", dir.display()),
            not_a_dir,
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        unwritable(
            format!("{flag} {}: cannot create the directory: {e}", dir.display()),
            "choose a directory you can write",
        )
    })?;
    takes_new_files(dir).map_err(|e| {
        unwritable(
            format!("{flag} {}: cannot write files there: {e}", dir.display()),
            "choose a directory you can write",
        )
    })
}

/// Whether a new file can be made in `dir` (one is made and removed).
fn takes_new_files(dir: &Path) -> std::io::Result<()> {
    let test = dir.join(format!(".commbench-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&test)?;
    let _ = std::fs::remove_file(&test);
    Ok(())
}

/// The directory a new file beside `p` goes to.
fn parent_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `flag`'s file `p` ([`probe`]).
fn probe_file(flag: &str, p: &Path) -> Result<(), Fatal> {
    let cannot = |e: &dyn std::fmt::Display| {
        unwritable(
            format!("{flag} {}: cannot write it: {e}", p.display()),
            "choose a path in a directory that exists and you can write",
        )
    };
    match kind(p) {
        Kind::Directory => Err(unwritable(
            format!("{flag} {} is a directory", p.display()),
            &format!("give a file name for {flag}, or --output DIR for a directory of results"),
        )),
        Kind::Stream | Kind::Regular => {
            nix::unistd::access(p, nix::unistd::AccessFlags::W_OK).map_err(|e| cannot(&e))?;
            if kind(p) == Kind::Regular {
                takes_new_files(&parent_of(&target(p))).map_err(|e| cannot(&e))?;
            }
            Ok(())
        }
        Kind::Missing => takes_new_files(&parent_of(p)).map_err(|e| cannot(&e)),
    }
}

/// The file a write to `p` replaces: `p`, or the file a symbolic link `p` names (the link
/// itself stays).
fn target(p: &Path) -> PathBuf {
    let is_link = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
    } else {
        p.to_path_buf()
    }
}

/// Write what `fill` writes to `p`, so that what `p` held is never lost to a failed write:
/// a regular file or a new path through a temporary file beside it, flushed to disk and
/// renamed over it; a pipe or device opened once and written in one go.
pub fn write_file(
    p: &Path,
    fill: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", p.display());
    if kind(p) == Kind::Stream {
        let mut bytes = Vec::new();
        fill(&mut bytes).map_err(fail)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .map_err(fail)?;
        return f.write_all(&bytes).and_then(|()| f.flush()).map_err(fail);
    }
    let dest = target(p);
    let tmp = beside(&dest);
    let written = (|| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        let mut w = std::io::BufWriter::new(f);
        fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &dest)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    // The rename itself on disk: best effort (not every file system syncs a directory).
    if let Ok(d) = std::fs::File::open(parent_of(&dest)) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The temporary file a new `dest` is written to before it is renamed over it.
fn beside(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map_or_else(|| std::ffi::OsString::from("file"), |n| n.to_os_string());
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(&name);
    tmp_name.push(format!(".commbench-{}.tmp", std::process::id()));
    parent_of(dest).join(tmp_name)
}

/// A new file at `p` that starts with `first`, open for what follows (`--stream`): a regular
/// file, or a path not there yet, is a new file made beside it and renamed over it at once,
/// so what `p` held is replaced, never truncated in place (a reader that has it open keeps
/// the old one); a pipe or a device is opened and written as it is.
pub fn create_stream(p: &Path, first: &[u8]) -> Result<std::fs::File, String> {
    let fail = |e: std::io::Error| format!("cannot write {}: {e}", p.display());
    if kind(p) == Kind::Stream {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .map_err(fail)?;
        f.write_all(first).map_err(fail)?;
        return Ok(f);
    }
    let dest = target(p);
    let tmp = beside(&dest);
    let made = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(first)?;
        std::fs::rename(&tmp, &dest)?;
        Ok(f)
    })();
    made.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

/// What a write of `--output DIR` left.
#[derive(Debug, Default)]
pub struct Written {
    /// The files written, in order.
    pub files: Vec<String>,
    /// Why the others were not, saying what survived.
    pub problem: Option<String>,
}

/// Write the files `--output DIR` holds: the JSON document first (the text files are
/// renderings of it, which `commbench report` prints again), then the full output and the
/// summary.
pub fn write_dir(dir: &Path, doc: &ResultDoc) -> Written {
    let mut w = Written::default();
    if let Err(e) = std::fs::create_dir_all(dir) {
        w.problem = Some(format!("cannot create {}: {e}", dir.display()));
        return w;
    }
    let [doc_name, full_name, summary_name] = OUTPUT_FILES;
    let json = dir.join(doc_name);
    if let Err(e) = write_doc(&json, doc) {
        w.problem = Some(format!(
            "{e}; nothing was written to {} (a result.json already there is unchanged)",
            dir.display()
        ));
        return w;
    }
    w.files.push(json.display().to_string());
    for (name, detail) in [(full_name, Detail::Full), (summary_name, Detail::Summary)] {
        let p = dir.join(name);
        let text = Text::new(detail).report(doc, doc.fit.as_slice());
        if let Err(e) = write_file(&p, &|f| f.write_all(text.as_bytes())) {
            w.problem = Some(format!(
                "{e}; {} holds the whole result (`commbench report {}` prints it)",
                json.display(),
                json.display()
            ));
            return w;
        }
        w.files.push(p.display().to_string());
    }
    w
}

/// Write the result document to `p`.
pub fn write_doc(p: &Path, doc: &ResultDoc) -> Result<(), String> {
    write_file(p, &|f| doc.write_json(f).map_err(std::io::Error::other))
}

/// Print the text `s` for people: on standard output, or on standard error when the stream
/// goes to standard output (`--stream -`), which then holds JSON lines only.
pub fn for_people(out: &Outputs, s: &str) {
    if out.stream_to_stdout() {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(s.as_bytes()).and_then(|()| err.flush());
    } else {
        to_stdout(s);
    }
}

/// Print `s` on standard output. A reader that went away (`commbench ... | head`) ends the
/// output quietly instead of a panic: what it did not read it did not want.
pub fn to_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
}

/// Write any serialisable value as JSON to a file or standard output ('-').
pub fn write_json_value<T: serde::Serialize>(p: &Path, v: &T) -> Result<(), Fatal> {
    let s = serde_json::to_string_pretty(v).map_err(|e| Fatal::run(e.to_string(), None))?;
    if p.as_os_str() == "-" {
        to_stdout(&(s + "\n"));
        Ok(())
    } else {
        write_file(p, &|f| writeln!(f, "{s}")).map_err(|e| Fatal::run(e, None))
    }
}
