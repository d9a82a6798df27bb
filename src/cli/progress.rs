//! Progress on standard error: a bar on a terminal; with `--progress always` and no terminal
//! (a log, a batch job), plain lines at each quarter of every size's trials. The engine
//! reports progress on rank 0 only, so the bar appears there only.

use super::args::ProgressWhen;
use commbench::core::method::engine::{Progress, Stage};
use commbench::spec::format_size;
use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};

/// The progress display of a run.
pub struct ProgressBar {
    show: Show,
}

enum Show {
    Hidden,
    /// A bar, drawn from the first report on.
    Bar(OnceLock<indicatif::ProgressBar>),
    /// The last line printed: (size index, quarter of its trials).
    Lines(Mutex<Option<(usize, u64)>>),
}

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Timer => "timer",
        Stage::Warmup => "warm-up",
        Stage::Npp => "npp",
        Stage::Trials => "trials",
    }
}

fn new_bar() -> indicatif::ProgressBar {
    let b =
        indicatif::ProgressBar::with_draw_target(Some(1), indicatif::ProgressDrawTarget::stderr());
    let style = indicatif::ProgressStyle::with_template(
        "{prefix:>24} [{bar:30}] {pos}/{len} {msg} ({eta})",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    b.set_style(style);
    b
}

impl ProgressBar {
    /// For `--progress`; an explicit `always` wins over `--quiet`, which is about the report.
    pub fn new(when: ProgressWhen, quiet: bool) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let show = match (when, quiet, terminal) {
            (ProgressWhen::Never, _, _) | (ProgressWhen::Auto, true, _) => Show::Hidden,
            (ProgressWhen::Always, _, false) => Show::Lines(Mutex::new(None)),
            (_, _, true) => Show::Bar(OnceLock::new()),
            (ProgressWhen::Auto, false, false) => Show::Hidden,
        };
        ProgressBar { show }
    }

    /// Show a progress report.
    pub fn update(&self, p: Progress) {
        let prefix = format!(
            "size {}/{} ({})",
            p.size_index + 1,
            p.sizes,
            format_size(p.size)
        );
        match &self.show {
            Show::Hidden => {}
            Show::Bar(b) => {
                let b = b.get_or_init(new_bar);
                b.set_prefix(prefix);
                b.set_message(stage_name(p.stage).to_string());
                b.set_length(p.total.max(1));
                b.set_position(p.done);
            }
            Show::Lines(last) => {
                if p.stage != Stage::Trials || p.total == 0 {
                    return;
                }
                let quarter = p.done * 4 / p.total;
                let mut last = match last.lock() {
                    Ok(g) => g,
                    Err(e) => e.into_inner(),
                };
                if quarter > 0 && *last != Some((p.size_index, quarter)) {
                    *last = Some((p.size_index, quarter));
                    eprintln!("progress: {prefix}: trials {}/{}", p.done, p.total);
                }
            }
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        if let Show::Bar(b) = &self.show {
            if let Some(b) = b.get() {
                b.finish_and_clear();
            }
        }
    }
}
