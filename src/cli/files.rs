//! The files of a run: `--output DIR` (the full output, the summary and the JSON document)
//! and `--json FILE`, and JSON written to a file or standard output.

use super::fatal::Fatal;
use super::plan::Outputs;
use commbench::analysis::document::ResultDoc;
use commbench::render::{Detail, Text};
use std::path::Path;

/// Check every output path before the first message is sent, so that a sweep is never
/// measured only to be lost: `--output DIR` is created if need be and must take new files,
/// and `--json FILE` must be a file this process can write (created empty if absent; the
/// document replaces it at the end).
pub fn probe(out: &Outputs) -> Result<(), Fatal> {
    if let Some(dir) = &out.dir {
        probe_dir(dir)?;
    }
    if let Some(p) = out.json.as_ref().filter(|_| !out.json_to_stdout()) {
        probe_file(p)?;
    }
    Ok(())
}

fn unwritable(what: String, hint: &str) -> Fatal {
    Fatal::usage(what, format!("{hint}; nothing was measured"))
}

fn probe_dir(dir: &Path) -> Result<(), Fatal> {
    if dir.exists() && !dir.is_dir() {
        return Err(unwritable(
            format!("--output {} is not a directory", dir.display()),
            "give a directory for --output (it is created if missing), or --json FILE",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| {
        unwritable(
            format!(
                "--output {}: cannot create the directory: {e}",
                dir.display()
            ),
            "choose a directory you can write",
        )
    })?;
    let test = dir.join(format!(".commbench-probe-{}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&test);
    match made {
        Ok(_) => {
            let _ = std::fs::remove_file(&test);
            Ok(())
        }
        Err(e) => Err(unwritable(
            format!("--output {}: cannot write files there: {e}", dir.display()),
            "choose a directory you can write",
        )),
    }
}

fn probe_file(p: &Path) -> Result<(), Fatal> {
    if p.is_dir() {
        return Err(unwritable(
            format!("--json {} is a directory", p.display()),
            "give a file name for --json, or --output DIR for a directory of results",
        ));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(p)
        .map(drop)
        .map_err(|e| {
            unwritable(
                format!("--json {}: cannot write it: {e}", p.display()),
                "choose a path in a directory that exists and you can write",
            )
        })
}

/// Write the files `--output DIR` holds; the names written.
pub fn write_dir(dir: &Path, doc: &ResultDoc) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let full = dir.join("commbench.output.txt");
    let summary = dir.join("commbench.summary.txt");
    let json = dir.join("result.json");
    let text = |detail| Text::new(detail).report(doc, doc.fit.as_slice());
    std::fs::write(&full, text(Detail::Full))
        .map_err(|e| format!("cannot write {}: {e}", full.display()))?;
    std::fs::write(&summary, text(Detail::Summary))
        .map_err(|e| format!("cannot write {}: {e}", summary.display()))?;
    write_doc(&json, doc)?;
    Ok(vec![
        full.display().to_string(),
        summary.display().to_string(),
        json.display().to_string(),
    ])
}

/// Write the result document to `p`.
pub fn write_doc(p: &Path, doc: &ResultDoc) -> Result<(), String> {
    std::fs::File::create(p)
        .map_err(|e| e.to_string())
        .and_then(|f| doc.write_json(f).map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot write {}: {e}", p.display()))
}

/// Print `s` on standard output. A reader that went away (`commbench ... | head`) ends the
/// output quietly instead of a panic: what it did not read it did not want.
pub fn to_stdout(s: &str) {
    use std::io::Write;
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
        std::fs::write(p, s + "\n")
            .map_err(|e| Fatal::run(format!("cannot write {}: {e}", p.display()), None))
    }
}
