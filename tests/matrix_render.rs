//! What shows an all-pairs matrix: the text report (verdicts first), the matrix plot and the
//! comparison of two matrices, on matrices measured by the real program on simulated 8-node
//! cubes (one healthy, one with a node three times slower), in-process and through the
//! command line.
#![cfg(feature = "sim")]

use crate::common;

use commbench::analysis::document::ResultDoc;
use commbench::analysis::matrix::MatrixSection;
use commbench::analysis::matrix_compare::{self, Change, SizeComparison};
use commbench::render::svg::PlotKind;
use commbench::render::text::Detail;
use commbench::render::{Plot, Renderer, Text};
use commbench_sim::{Fault, SimConfig};
use common::machine::{six, Machine};
use common::{assert_ok, assert_usage_output, run, stdout, tmpdir};
use std::collections::BTreeSet;
use std::path::Path;

/// The slow node.
const SLOW: u32 = 3;
/// The sizes measured.
const SIZES: [u64; 2] = [8, 1024];

/// An 8-node cube whose nodes' copies (F, U) cost far more than a hop's handlers (R, S), so
/// that a slow node slows its own cells and hardly those it forwards; a little jitter. Node
/// [`SLOW`] is three times slower when `faulty`.
fn machine(faulty: bool) -> Machine {
    let m = Machine::new("cube8", 3)
        .tick_ns(1)
        .clock_read_ns(20)
        .poll_ns(50)
        .jitter(5, 7)
        .times(six([
            (2.0, 0.0001),
            (0.1, 0.0),
            (0.1, 0.0),
            (0.1, 0.0),
            (2.0, 0.0001),
            (1.0, 0.001),
        ]));
    if faulty {
        m.fault(Fault::SlowNode {
            node: SLOW,
            factor: 3.0,
            from_us: None,
            until_us: None,
        })
    } else {
        m
    }
}

/// The whole all-pairs run on `cfg`, suspects measured again alone, in its document as the
/// command line makes it.
fn document(cfg: &SimConfig) -> ResultDoc {
    common::allpairs::sim_matrix_doc(cfg, &SIZES, 9)
}

/// Every tag of `svg` closed in order, one root element.
fn balanced(svg: &str) {
    let mut stack: Vec<&str> = Vec::new();
    let mut roots = 0;
    for piece in svg.split('<').skip(1) {
        let tag = &piece[..piece.find('>').expect("a closed tag")];
        if tag.starts_with('?') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name), "</{name}> out of order");
        } else if !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap();
            roots += usize::from(stack.is_empty());
            stack.push(name);
        } else {
            roots += usize::from(stack.is_empty());
        }
    }
    assert!(stack.is_empty(), "unclosed {stack:?}");
    assert_eq!(roots, 1);
}

/// The cells with the slow node at an end.
fn slow_cells() -> BTreeSet<(u32, u32)> {
    (0..8u32)
        .flat_map(|i| (0..8u32).map(move |j| (i, j)))
        .filter(|&(i, j)| i != j && (i == SLOW || j == SLOW))
        .collect()
}

#[test]
fn report_plot_and_compare_in_process() {
    let healthy = document(&machine(false).config());
    let faulty = document(&machine(true).config());
    check_reports(&healthy, &faulty);
    check_plots(&healthy, &faulty);
    let (h, f) = (
        healthy.allpairs.as_ref().unwrap(),
        faulty.allpairs.as_ref().unwrap(),
    );
    check_compare_with_itself(h);
    check_compare_healthy_with_faulty(h, f);
}

/// The report: the verdict first, naming the node and its host; none of a healthy machine,
/// whose pair classes are kept apart, every line within 100 characters.
fn check_reports(healthy: &ResultDoc, faulty: &ResultDoc) {
    let s = Text::new(Detail::Table).report(faulty, faulty.fit.as_slice());
    let verdicts = s.find("Verdicts").expect(&s);
    let node = s.find("1. node 3 (node3): its own cells x").expect(&s);
    let first_size = s.find("8 bytes:").expect(&s);
    assert!(verdicts < node && node < first_size, "{s}");
    let head: String = s[node..].lines().take(2).collect::<Vec<_>>().join(" ");
    assert!(head.contains("confirmed measured alone"), "{s}");
    assert!(!s.contains("no suspect"), "{s}");
    let s = Text::new(Detail::Table).report(healthy, healthy.fit.as_slice());
    assert!(
        s.contains("no suspect: no node, link or dimension has its own cells x1.25 slower"),
        "{s}"
    );
    assert!(s.contains("1 hop") && s.contains("3 hops"), "{s}");
    for line in s.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
}

/// The plot: one rect per cell, the diagonal grey, the slow node's cells outlined.
fn check_plots(healthy: &ResultDoc, faulty: &ResultDoc) {
    for (d, outlined) in [(healthy, 0), (faulty, 14)] {
        for size in SIZES {
            let svg = Plot::new(PlotKind::Matrix, Some(size))
                .render(d, &[])
                .expect("a matrix plot");
            assert!(svg.starts_with("<?xml") && svg.contains("<svg "), "{svg}");
            assert!(svg.trim_end().ends_with("</svg>"));
            assert_eq!(svg.matches(r#"<rect class="cell"#).count(), 64);
            assert_eq!(svg.matches(r#"<rect class="cell missing"#).count(), 8);
            assert_eq!(svg.matches(r#"<rect class="flag""#).count(), outlined);
            balanced(&svg);
        }
    }
}

/// Compare: a matrix against itself is the same everywhere.
fn check_compare_with_itself(h: &MatrixSection) {
    let same = matrix_compare::compare(h, h, 500, 1).unwrap();
    assert_eq!(same.totals(), (0, 0, 2 * 56));
    assert!(same
        .sizes
        .iter()
        .flat_map(|s| &s.cells)
        .all(|c| c.ratio == 1.0 && c.change == Change::Same));
}

/// Healthy against faulty: exactly the slow node's cells are slower, at each size, and they
/// are the cells the simulator's closed form says are more than 1.25 times slower; the text
/// counts them.
fn check_compare_healthy_with_faulty(h: &MatrixSection, f: &MatrixSection) {
    let cmp = matrix_compare::compare(h, f, 500, 1).unwrap();
    let (mh, mf) = (machine(false).config(), machine(true).config());
    for s in &cmp.sizes {
        check_size_compared(s, &mh, &mf);
    }
    let text = commbench::render::matrix::comparison(&cmp, h, ("healthy.json", "faulty.json"));
    assert!(
        text.contains("in all: 28 cell(s) slower, 0 faster, 84 the same"),
        "{text}"
    );
}

/// One size of healthy (`mh`) against faulty (`mf`): the slower cells are the slow node's and
/// those the closed form predicts; the slow node alone changed among the nodes.
fn check_size_compared(s: &SizeComparison, mh: &SimConfig, mf: &SimConfig) {
    let slower: BTreeSet<(u32, u32)> = s
        .cells
        .iter()
        .filter(|c| c.change == Change::Slower)
        .map(|c| (c.source, c.dest))
        .collect();
    assert_eq!(slower, slow_cells(), "size {}", s.size);
    assert_eq!((s.faster, s.cells.len()), (0, 56));
    let expected: BTreeSet<(u32, u32)> = s
        .cells
        .iter()
        .filter(|c| {
            let t = |m: &SimConfig| {
                (m.pingpong_one_way_between_ns(s.size, c.source, c.dest)
                    + m.pingpong_one_way_between_ns(s.size, c.dest, c.source))
                    as f64
            };
            t(mf) / t(mh) > matrix_compare::SLOWER
        })
        .map(|c| (c.source, c.dest))
        .collect();
    assert_eq!(slower, expected, "size {}", s.size);
    let node = s.nodes.iter().find(|n| n.rank == SLOW).unwrap();
    assert!(node.ratio > 1.5 && node.slower == 14, "{node:?}");
    assert!(s
        .nodes
        .iter()
        .filter(|n| n.rank != SLOW)
        .all(|n| (n.ratio - 1.0).abs() < 0.05));
}

/// Writes a machine and runs `commbench allpairs` on it: the report it printed and the
/// document it wrote.
fn cli_run(dir: &Path, name: &str, faulty: bool) -> (String, String) {
    let toml = dir.join(format!("{name}.toml"));
    machine(faulty).write(&toml);
    let json = dir.join(format!("{name}.json"));
    let o = run(&[
        "allpairs",
        "--backend",
        "sim",
        "--sim-config",
        toml.to_str().unwrap(),
        "--sizes",
        "8,1K",
        "--trials",
        "9",
        "--warmup",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_ok(&o);
    (stdout(&o), json.to_str().unwrap().to_string())
}

#[test]
fn report_plot_and_compare_from_the_command_line() {
    let dir = tmpdir("matrix-render");
    let (printed, faulty) = cli_run(&dir, "faulty", true);
    let (_, healthy) = cli_run(&dir, "healthy", false);
    assert!(printed.contains("1. node 3 (node3)"), "{printed}");

    // `report` prints what the run printed.
    let o = run(&["report", &faulty]);
    assert_ok(&o);
    assert_eq!(stdout(&o), printed);
    for format in ["markdown", "csv"] {
        let o = run(&["report", &faulty, "--format", format]);
        assert_usage_output(&o, "is an all-pairs document", format);
    }
    let o = run(&["report", &healthy, "--full"]);
    assert_ok(&o);
    let s = stdout(&o);
    assert!(s.contains("no suspect") && s.contains("every cell"), "{s}");

    // `plot --kind matrix`, at the first size and at another.
    let svg = dir.join("m.svg");
    let svg_s = svg.to_str().unwrap();
    for extra in [&[][..], &["--size", "1K"][..]] {
        let mut args = vec!["plot", "--kind", "matrix", &faulty, "-o", svg_s];
        args.extend_from_slice(extra);
        assert_ok(&run(&args));
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(s.contains("<svg ") && s.matches(r#"<rect class="cell"#).count() == 64);
        let size = if extra.is_empty() { "8 B" } else { "1 KiB" };
        assert!(s.contains(&format!("of its class, {size}")), "{size}");
        // The slow node is marked on both axes, the cells carry their slowdown.
        assert_eq!(
            s.matches(r#"class="verdict-mark" data-rank="3""#).count(),
            2
        );
        assert!(s.contains("data-excess=") && !s.contains("data-us="));
    }
    // --colour time: the median one-way time, as before.
    assert_ok(&run(&[
        "plot", "--kind", "matrix", &faulty, "-o", svg_s, "--colour", "time",
    ]));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains("median one-way time per cell, 8 B") && s.contains("data-us="));
    let o = run(&["plot", &faulty, "-o", svg_s, "--colour", "time"]);
    assert_usage_output(
        &o,
        "--colour applies to --kind matrix only",
        "--kind matrix",
    );
    let o = run(&[
        "plot", "--kind", "matrix", &faulty, "-o", svg_s, "--size", "64",
    ]);
    assert_usage_output(&o, "no matrix of size 64", "--size 64");
    assert!(common::stderr(&o).contains("8, 1024"));
    let o = run(&["plot", &faulty, "-o", svg_s]);
    assert_usage_output(&o, "is an all-pairs document", "plot latency");
    assert!(common::stderr(&o).contains("hint: use --kind matrix"));
    let pingpong = "tests/data/sim-pingpong-jitter.json";
    let o = run(&["plot", "--kind", "matrix", pingpong, "-o", svg_s]);
    assert_usage_output(&o, "no all-pairs matrix", "plot matrix of pingpong");
    assert!(common::stderr(&o).contains("latency, bandwidth, histogram, signature"));

    // `compare`: the slow node's 14 cells at each size, worst first.
    let o = run(&["compare", &healthy, &faulty]);
    assert_ok(&o);
    let s = stdout(&o);
    assert!(
        s.contains("in all: 28 cell(s) slower, 0 faster, 84 the same"),
        "{s}"
    );
    let first = s
        .lines()
        .find(|l| l.contains(" -> ") && l.trim_end().ends_with("slower"))
        .expect(&s);
    assert!(first.contains("3 (node3)"), "{first}");
    let o = run(&["compare", &healthy, &healthy]);
    assert_ok(&o);
    assert!(stdout(&o).contains("in all: 0 cell(s) slower, 0 faster, 112 the same"));
    let js = dir.join("cmp.json");
    assert_ok(&run(&[
        "compare",
        &healthy,
        &faulty,
        "--json",
        js.to_str().unwrap(),
    ]));
    let v = common::read_json(&js);
    assert_eq!(v["sizes"][0]["slower"], 14);
    // A matrix against a ping-pong document, or with --fail-if-slower: usage errors.
    let o = run(&["compare", &healthy, pingpong]);
    assert_usage_output(&o, "has no all-pairs matrix", "matrix against pingpong");
    let o = run(&["compare", pingpong, &healthy]);
    assert_usage_output(&o, "has no all-pairs matrix", "pingpong against matrix");
    let _ = std::fs::remove_dir_all(&dir);
}
