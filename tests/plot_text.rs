//! Every plot kind, drawn at its size from documents of real runs (the recorded documents and
//! runs on the simulator), keeps every piece of text inside its canvas: each `<text>`'s
//! extent, its characters at the width the plots allow one (`CHAR_WIDTH_EM`) placed by its
//! anchor, lies within the SVG's width and height.
#![cfg(feature = "sim")]

use crate::common;

use commbench::analysis::document::{ResultDoc, RunConfig};
use commbench::analysis::fit::{fit_points, Breakpoint};
use commbench::core::method::queue::{QueueBench, QueueKind};
use commbench::core::method::{MethodConfig, NppChoice, PatternKind};
use commbench::render::svg::{MatrixColour, PlotKind, BOLD_WIDTH, CHAR_WIDTH_EM};
use commbench::render::{Plot, Renderer};
use commbench_sim::Fault;
use common::allpairs::sim_matrix_doc;
use common::inprocess::sim_document;
use common::machine::Machine;

/// The value of attribute `name` in the tag `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    tag[at..].split('"').next()
}

fn number(tag: &str, name: &str) -> Option<f64> {
    attr(tag, name).and_then(|v| v.parse().ok())
}

/// The characters `body` shows, its entities counted as one.
fn shown(body: &str) -> usize {
    let mut n = 0;
    let mut in_entity = false;
    for c in body.chars() {
        match c {
            '&' => in_entity = true,
            ';' if in_entity => in_entity = false,
            _ if in_entity => continue,
            _ => {}
        }
        if !in_entity {
            n += 1;
        }
    }
    n
}

/// The texts of `svg` that reach outside its canvas, each with its extent.
fn outside(svg: &str) -> Vec<String> {
    let root = &svg[svg.find("<svg ").expect("an svg element")..];
    let root = &root[..root.find('>').unwrap_or(root.len())];
    let (w, h) = (
        number(root, "width").unwrap(),
        number(root, "height").unwrap(),
    );
    let base = number(root, "font-size").unwrap_or(16.0);
    let mut out = Vec::new();
    for piece in svg.split("<text").skip(1) {
        let (tag, rest) = piece.split_once('>').expect("a text tag");
        let body = rest.split("</text>").next().unwrap_or_default();
        let fs = number(tag, "font-size").unwrap_or(base);
        let bold = if attr(tag, "font-weight") == Some("bold") {
            BOLD_WIDTH
        } else {
            1.0
        };
        let len = shown(body) as f64 * fs * CHAR_WIDTH_EM * bold;
        let (x, y) = (number(tag, "x").unwrap(), number(tag, "y").unwrap());
        let (before, after) = match attr(tag, "text-anchor").unwrap_or("start") {
            "middle" => (len / 2.0, len / 2.0),
            "end" => (len, 0.0),
            _ => (0.0, len),
        };
        // Horizontal text runs along x; text turned by -90 degrees runs up along y.
        let (x0, x1, y0, y1) = if attr(tag, "transform").is_some_and(|t| t.contains("-90")) {
            (x - fs, x + 0.3 * fs, y - after, y + before)
        } else {
            (x - before, x + after, y - fs, y + 0.3 * fs)
        };
        if x0 < 0.0 || y0 < 0.0 || x1 > w || y1 > h {
            out.push(format!(
                "x {x0:.0}..{x1:.0}, y {y0:.0}..{y1:.0} of {w} x {h}: {body}"
            ));
        }
    }
    out
}

/// The documents runs wrote and this repository keeps.
fn recorded() -> Vec<(&'static str, ResultDoc)> {
    [
        (
            "v0.1-sweep",
            include_str!("../analysis/src/analysis/testdata/v0.1-sweep.json"),
        ),
        (
            "sim-pingpong-jitter",
            include_str!("data/sim-pingpong-jitter.json"),
        ),
        (
            "sim-bandwidth-jitter",
            include_str!("data/sim-bandwidth-jitter.json"),
        ),
    ]
    .into_iter()
    .map(|(name, text)| (name, ResultDoc::read_json(text).expect(name)))
    .collect()
}

fn method(sizes: &[u64], npp: u64) -> MethodConfig {
    MethodConfig {
        sizes: sizes.to_vec(),
        trials: 20,
        warmup: 2,
        npp: NppChoice::Fixed(npp),
        timer_samples: 1000,
        ..MethodConfig::default()
    }
}

/// Runs on the simulator: a ping-pong sweep from size 0 (whose points a log axis leaves out,
/// and a caption says so), both queue benchmarks on a NIC that matches slowly, and an
/// all-pairs matrix of an 8-node cube with a slow node.
fn simulated() -> Vec<(&'static str, ResultDoc)> {
    let generic = Machine::preset("generic").config();
    let sweep = sim_document(
        &generic,
        PatternKind::PingPong,
        method(&[0, 1, 64, 4096, 65536, 1 << 20], 4),
        RunConfig::default(),
    );
    let slow_match = Machine::new("queue", 1).match_ns_per_entry(490.0).config();
    let queue = |kind, traversed_pct: Vec<u32>| {
        let bench = QueueBench {
            kind,
            lengths: vec![0, 100, 500, 1000],
            traversed_pct,
            any_source: false,
        };
        let config = RunConfig {
            queue: Some(bench.clone()),
            ..RunConfig::default()
        };
        sim_document(&slow_match, bench, method(&[8], 1), config)
    };
    let cube = Machine::new("cube8", 3)
        .jitter(5, 7)
        .fault(Fault::SlowNode {
            node: 3,
            factor: 3.0,
            from_us: None,
            until_us: None,
        })
        .config();
    vec![
        ("sim sweep from 0", sweep),
        ("queue posted", queue(QueueKind::Posted, vec![0, 50, 100])),
        ("queue unexpected", queue(QueueKind::Unexpected, vec![])),
        ("allpairs", sim_matrix_doc(&cube, &[8, 1024], 5)),
    ]
}

#[test]
fn every_plot_keeps_its_text_inside_the_canvas() {
    let plots = [
        Plot::new(PlotKind::Latency, None),
        Plot::new(PlotKind::Bandwidth, None),
        Plot::new(PlotKind::Histogram, None),
        Plot::new(PlotKind::Signature, None),
        Plot::new(PlotKind::Queue, None),
        Plot::new(PlotKind::Matrix, None),
        Plot::new(PlotKind::Matrix, None).colour(MatrixColour::Time),
    ];
    let mut drawn = vec![0; plots.len()];
    let mut wrong = Vec::new();
    for (name, doc) in recorded().into_iter().chain(simulated()) {
        let fits = fit_points(&doc.points, Breakpoint::Auto, None);
        for (k, plot) in plots.iter().enumerate() {
            // A kind the document holds nothing for is refused, and checked elsewhere.
            let Ok(svg) = plot.render(&doc, &fits) else {
                continue;
            };
            drawn[k] += 1;
            for t in outside(&svg) {
                wrong.push(format!("{name}, {:?}: {t}", plot.kind));
            }
        }
    }
    assert!(wrong.is_empty(), "text outside:\n{}", wrong.join("\n"));
    assert!(drawn.iter().all(|&n| n > 0), "kinds drawn: {drawn:?}");
}

#[test]
fn the_check_sees_text_that_runs_off() {
    let svg = r#"<svg xmlns="x" width="100" height="50" font-size="10">
<text x="10" y="20" text-anchor="start">abc</text>
<text x="90" y="20" text-anchor="start">abcdef</text>
<text x="50" y="20" text-anchor="middle" font-size="20" font-weight="bold">abcdefgh</text>
<text x="5" y="25" text-anchor="end">&amp;</text>
<text x="10" y="20" text-anchor="middle" transform="rotate(-90 10 20)">abcdefghij</text>
</svg>"#;
    let out = outside(svg);
    assert_eq!(out.len(), 4, "{out:?}");
    assert!(
        out[0].ends_with("abcdef") && out[2].ends_with("&amp;"),
        "{out:?}"
    );
    assert!(out[1].ends_with("abcdefgh") && out[3].ends_with("abcdefghij"));
}
