//! The files of a run: `--output DIR` (the full output, the summary and the JSON document)
//! and `--json FILE`, and JSON written to a file or standard output.

use super::fatal::Fatal;
use commbench::analysis::document::ResultDoc;
use commbench::render::text::{self as report, Detail};
use std::path::Path;

/// Write the files `--output DIR` holds; the names written.
pub fn write_dir(dir: &Path, doc: &ResultDoc) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let full = dir.join("commbench.output.txt");
    let summary = dir.join("commbench.summary.txt");
    let json = dir.join("result.json");
    std::fs::write(&full, report::render(doc, Detail::Full))
        .map_err(|e| format!("cannot write {}: {e}", full.display()))?;
    std::fs::write(&summary, report::render(doc, Detail::Summary))
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

/// Write any serialisable value as JSON to a file or standard output ('-').
pub fn write_json_value<T: serde::Serialize>(p: &Path, v: &T) -> Result<(), Fatal> {
    let s = serde_json::to_string_pretty(v).map_err(|e| Fatal::run(e.to_string(), None))?;
    if p.as_os_str() == "-" {
        println!("{s}");
        Ok(())
    } else {
        std::fs::write(p, s + "\n")
            .map_err(|e| Fatal::run(format!("cannot write {}: {e}", p.display()), None))
    }
}
