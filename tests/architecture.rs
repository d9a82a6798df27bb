//! The layout docs/architecture.md promises, checked on the source itself so that it stays
//! true: no file of `core/src`, `analysis/src` or `src/` imports another in a circle, and no
//! production code of the command line or the analysis outside `src/cli/backend/` names a
//! backend.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The root of the workspace.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir` that is production code (not a module declared after a
/// `#[cfg(test)]`), sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let all = all_rust_files(dir);
    let tests_only: BTreeSet<PathBuf> = all.iter().flat_map(|f| test_modules(f)).collect();
    all.into_iter()
        .filter(|f| !tests_only.contains(f))
        .collect()
}

/// The files of the modules `file` declares after its first `#[cfg(test)]`.
fn test_modules(file: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(file).expect("a readable source file");
    let Some((_, tests)) = text.split_once("#[cfg(test)]") else {
        return Vec::new();
    };
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let dir = match name {
        "mod.rs" | "lib.rs" | "main.rs" => file.parent().map(Path::to_path_buf),
        _ => Some(file.with_extension("")),
    };
    let Some(dir) = dir else {
        return Vec::new();
    };
    tests
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
        .flat_map(|m| [dir.join(format!("{m}.rs")), dir.join(m).join("mod.rs")])
        .collect()
}

/// Every `.rs` file under `dir`, sorted.
fn all_rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("a source folder").flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A file's production code: what comes before its first `#[cfg(test)]`, without `//`
/// comments.
fn production_code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a readable source file");
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module path of `file` under the crate root `root` (`[]` for lib.rs and main.rs).
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).expect("a file under its root");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

/// The file of the longest prefix of module path `parts` that is a module file.
fn resolve(root: &Path, parts: &[String]) -> Option<PathBuf> {
    (1..=parts.len()).rev().find_map(|n| {
        let base = parts[..n].iter().fold(root.to_path_buf(), |p, x| p.join(x));
        [base.with_extension("rs"), base.join("mod.rs")]
            .into_iter()
            .find(|f| f.is_file())
    })
}

/// Whether `c` may be part of an identifier.
fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a `use` tree names, braces expanded one level (`a::{b, c::{d}}` gives `a::b` and
/// `a::c`: the module is what matters).
fn use_paths(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find("::{") else {
        return vec![tree];
    };
    let (head, inner) = (&tree[..open], &tree[open + 3..tree.len().saturating_sub(1)]);
    let (mut items, mut cur, mut depth) = (Vec::new(), String::new(), 0);
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    items
        .into_iter()
        .filter(|i| !i.is_empty())
        .map(|i| format!("{head}::{}", i.split("::{").next().unwrap_or("")))
        .collect()
}

/// Every path `code` names: its `use` trees, and each `crate::`, `super::` or `self::` path
/// written in the code.
fn paths_in(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + 4..];
        if before.is_some_and(ident_char) {
            continue;
        }
        if let Some(end) = rest.find(';') {
            out.extend(use_paths(&rest[..end]));
        }
    }
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            if code[..i].chars().next_back().is_some_and(ident_char) {
                continue;
            }
            let path: String = code[i..]
                .chars()
                .take_while(|&c| ident_char(c) || c == ':')
                .collect();
            out.push(path);
        }
    }
    out
}

/// The files of the crate at `root` that `file` imports.
fn imports(root: &Path, crate_names: &[&str], file: &Path) -> BTreeSet<PathBuf> {
    let me = module_of(root, file);
    let mut deps = BTreeSet::new();
    for p in paths_in(&production_code(file)) {
        let mut parts: Vec<String> = p
            .split("::")
            .map(|x| x.split(" as ").next().unwrap_or("").trim().to_string())
            .filter(|x| !x.is_empty() && x != "*")
            .collect();
        let Some(first) = parts.first().cloned() else {
            continue;
        };
        if first == "crate" || crate_names.contains(&first.as_str()) {
            parts.remove(0);
        } else if first == "self" {
            parts = me.iter().cloned().chain(parts.drain(1..)).collect();
        } else if first == "super" {
            let mut base = me.clone();
            while parts.first().is_some_and(|x| x == "super") {
                base.pop();
                parts.remove(0);
            }
            parts = base.into_iter().chain(parts).collect();
        } else {
            continue;
        }
        if let Some(t) = resolve(root, &parts) {
            let top = t.ends_with("lib.rs") || t.ends_with("main.rs");
            if t != file && !top {
                deps.insert(t);
            }
        }
    }
    // A mod.rs that declares and re-exports its children is the folder itself.
    let name = file.file_name().and_then(|n| n.to_str());
    if matches!(name, Some("mod.rs" | "lib.rs" | "main.rs")) {
        let dir = file.parent().expect("a folder");
        deps.retain(|t| t.parent() != Some(dir) && t.parent().and_then(Path::parent) != Some(dir));
    }
    deps
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                s.low.entry(v).and_modify(|l| *l = (*l).min(lw));
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                s.low.entry(v).and_modify(|l| *l = (*l).min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The import graph of the crate whose sources are under `root`.
fn graph(root: &Path, crate_names: &[&str]) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    rust_files(root)
        .into_iter()
        .map(|f| {
            let deps = imports(root, crate_names, &f);
            (f, deps)
        })
        .collect()
}

#[test]
fn no_file_imports_another_in_a_circle() {
    let mut found = Vec::new();
    for (dir, names) in [
        ("core/src", &["commbench_core"][..]),
        ("analysis/src", &["commbench_analysis"][..]),
        ("src", &["commbench"][..]),
    ] {
        let root = root().join(dir);
        let g = graph(&root, names);
        assert!(g.len() > 10, "{dir}: only {} files read", g.len());
        for c in circles(&g) {
            let names: Vec<String> = c
                .iter()
                .map(|f| {
                    f.strip_prefix(root.parent().unwrap_or(&root))
                        .unwrap_or(f)
                        .display()
                        .to_string()
                })
                .collect();
            found.push(names.join(" <-> "));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other (move the shared piece down a level):\n{}",
        found.join("\n")
    );
}

/// The check finds a circle where there is one, and none in a chain, on a tree of its own.
#[test]
fn the_circle_check_sees_a_circle() {
    let dir = std::env::temp_dir().join(format!("commbench-circles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    let write = |f: &str, text: &str| std::fs::write(src.join(f), text).unwrap();
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\n#[cfg(test)]\nmod t;\n",
    );
    write("t.rs", "use crate::a::x::X;\n");
    write("a/mod.rs", "pub mod x;\npub use x::X;\n");
    write("a/x.rs", "use crate::b::B;\npub struct X(B);\n");
    write("b.rs", "use crate::c::{self, C};\npub struct B(C);\n");
    write(
        "c.rs",
        "pub struct C;\n// use crate::a::X; a comment is no import\n",
    );
    let chain = graph(&src, &["demo"]);
    assert!(circles(&chain).is_empty(), "{chain:?}");
    assert!(
        !chain.contains_key(&src.join("t.rs")),
        "a test module is no production code"
    );
    write("c.rs", "pub struct C(Box<super::a::x::X>);\n");
    let circle = graph(&src, &["demo"]);
    let found = circles(&circle);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 1, "{circle:?}");
    let names: Vec<String> = found[0]
        .iter()
        .map(|f| f.strip_prefix(&src).unwrap_or(f).display().to_string())
        .collect();
    assert_eq!(names, ["a/x.rs", "b.rs", "c.rs"]);
}

/// The backends' names, crates and Cargo features.
const BACKENDS: [&str; 6] = ["shm", "tcp", "sim", "mpi", "ofi", "ucx"];

/// What production code outside `src/cli/backend/` may not write: a backend's crate, a `cfg`
/// on its feature, or its name as a string of its own.
fn backend_mentions(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for b in BACKENDS {
        for needle in [
            format!("commbench_{b}"),
            format!("feature = \"{b}\""),
            format!("\"{b}\""),
        ] {
            if code.contains(&needle) {
                out.push(needle);
            }
        }
    }
    out
}

#[test]
fn only_the_backend_seam_names_a_backend() {
    let src = root().join("src");
    let seam = src.join("cli").join("backend");
    let mut found = Vec::new();
    for f in rust_files(&src)
        .into_iter()
        .chain(rust_files(&root().join("analysis").join("src")))
        .filter(|f| !f.starts_with(&seam))
    {
        for m in backend_mentions(&production_code(&f)) {
            found.push(format!("{}: {m}", f.display()));
        }
    }
    assert!(
        found.is_empty(),
        "a backend named outside src/cli/backend/ (ask the Backend trait instead):\n{}",
        found.join("\n")
    );
    // The check sees what it looks for.
    let seen = backend_mentions("if b.name() != \"sim\" { commbench_ofi::providers(); }");
    assert_eq!(seen, ["\"sim\"", "commbench_ofi"]);
}
