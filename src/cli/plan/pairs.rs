//! `bandwidth --pairs K --placement block|cyclic|FILE`: the pairs that stream at once (core
//! `method::pairs`), checked before anything starts.

use super::super::args::Given;
use super::super::fatal::Fatal;
use commbench::core::method::limits::MAX_WINDOW;
use commbench::core::method::pairs::{self, Concurrent, Placement, StartSync, MAX_PAIRS};
use commbench::spec;

/// The pairs of `--pairs` and `--placement`, or `None` for one pair (`--source`, `--dest`).
/// A file's pairs are read here; `--pairs` with a file must count its lines.
pub fn concurrent(
    k: Option<u32>,
    placement: Option<&str>,
    given: &Given,
) -> Result<Option<Concurrent>, Fatal> {
    if (k.is_some() || placement.is_some()) && (given.has("--source") || given.has("--dest")) {
        return Err(Fatal::usage(
            "--pairs and --placement place every pair's sender and receiver: --source and \
             --dest do not apply",
            "drop --source/--dest (pair 0 is the first pair --placement gives)",
        ));
    }
    let Some(text) = placement.map(str::trim) else {
        return k.map(|k| of(Placement::Block, k)).transpose();
    };
    match text {
        "block" | "cyclic" => {
            let Some(k) = k else {
                return Err(Fatal::usage(
                    format!("--placement {text}: how many pairs?"),
                    "give --pairs K, e.g. --pairs 4 --placement block",
                ));
            };
            let p = if text == "block" {
                Placement::Block
            } else {
                Placement::Cyclic
            };
            of(p, k).map(Some)
        }
        path => from_file(path, k).map(Some),
    }
}

/// `--window`: one window or a list to sweep (the forms of `--npp`: `1..128` doubles), each
/// 1 to [`MAX_WINDOW`] sends.
pub fn windows(text: &str) -> Result<Vec<u32>, Fatal> {
    let hint = "for example --window 64, or --window 1..128 for 1, 2, 4, ..., 128 (osu_mbw_mr -V)";
    let v = spec::parse_counts(text)
        .map_err(|e| Fatal::usage(format!("--window {text}: {e}"), hint))?;
    v.iter()
        .map(|&w| {
            u32::try_from(w)
                .ok()
                .filter(|&w| w <= MAX_WINDOW)
                .ok_or_else(|| {
                    Fatal::usage(
                        format!("--window {w}: at most {MAX_WINDOW} sends outstanding"),
                        hint,
                    )
                })
        })
        .collect()
}

/// `--pairs`: one number of pairs or a list to sweep (`1..8:+1` every k, `1..8` doubling),
/// each 1 to [`MAX_PAIRS`].
pub fn counts(text: &str) -> Result<Vec<u32>, Fatal> {
    let hint = "for example --pairs 4, or --pairs 1..8:+1 for every k from 1 to 8";
    let v =
        spec::parse_counts(text).map_err(|e| Fatal::usage(format!("--pairs {text}: {e}"), hint))?;
    v.iter()
        .map(|&k| {
            u32::try_from(k)
                .ok()
                .filter(|&k| k <= MAX_PAIRS)
                .ok_or_else(|| Fatal::usage(format!("--pairs {k}: 1 to {MAX_PAIRS} pairs"), hint))
        })
        .collect()
}

/// `k` pairs placed by `p` (block or cyclic).
fn of(p: Placement, k: u32) -> Result<Concurrent, Fatal> {
    if k == 0 || k > MAX_PAIRS {
        return Err(Fatal::usage(
            format!("--pairs {k}: 1 to {MAX_PAIRS} pairs"),
            "for example --pairs 4 (8 ranks)",
        ));
    }
    Ok(Concurrent {
        pairs: p.pairs(k),
        placement: p,
        start: StartSync::Barrier,
    })
}

/// The pairs a placement file lists, each rank in one pair.
fn from_file(path: &str, k: Option<u32>) -> Result<Concurrent, Fatal> {
    let hint = "a placement is block, cyclic or a file of SENDER RECEIVER lines, e.g. `0 4`";
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fatal::usage(format!("--placement {path}: {e}"), hint))?;
    let list = pairs::parse_pairs(&text)
        .map_err(|why| Fatal::usage(format!("--placement {path}: {why}"), hint))?;
    if let Some(k) = k.filter(|&k| k as usize != list.len()) {
        return Err(Fatal::usage(
            format!("--pairs {k} but {path} lists {} pairs", list.len()),
            "drop --pairs (the file gives the pairs) or make them agree",
        ));
    }
    let c = Concurrent {
        pairs: list,
        placement: Placement::File { path: path.into() },
        start: StartSync::Barrier,
    };
    // The ranks' range is checked against the run's size with the method; a rank in two
    // pairs is wrong whatever the size.
    if let Some(why) = c.problem(u32::MAX) {
        return Err(Fatal::usage(format!("--placement {path}: {why}"), hint));
    }
    Ok(c)
}
