//! Progress on standard error: a bar on a terminal; with `--progress always` and no terminal
//! (a log, a batch job), plain lines at each quarter of every size's trials. The engine
//! reports progress on rank 0 only, so the bar appears there only.
//!
//! Both show the time the whole run has left: the time so far, extrapolated with the share of
//! the run done as the engine weighs it (each stage by its least cost, core
//! `method::limits::RunCost`), so a sweep whose large sizes are still to come is not taken for
//! one nearly done; and, as each size of a sweep costs at least what the sizes before it cost
//! on average once the fixed costs per trial dominate, never less than that average for each
//! size still to come. A run that will take an hour or more says so on standard error (unless
//! `--progress never`, or `--quiet` without `--progress always`), even without a bar: before
//! it starts when its counts alone make it that long, and once, after its first minute, when
//! the extrapolation does.

use super::args::ProgressWhen;
use commbench::core::method::engine::{Progress, Stage};
use commbench::core::method::limits::{human_duration, LONG_RUN};
use commbench::spec::format_size;
use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Extrapolate only after this much of the run, so that start-up costs do not dominate.
const SETTLE: Duration = Duration::from_secs(60);

/// The progress display of a run.
pub struct ProgressBar {
    show: Show,
    /// Whether a long run is announced on standard error.
    announce: bool,
    state: Mutex<State>,
}

enum Show {
    Hidden,
    /// A bar, drawn from the first report on.
    Bar(OnceLock<indicatif::ProgressBar>),
    /// The last line printed: (size index, quarter of its trials).
    Lines(Mutex<Option<(usize, u64)>>),
}

/// What the extrapolation and the announcements remember.
#[derive(Default)]
struct State {
    /// The first report.
    start: Option<Instant>,
    /// The least duration was said before the start.
    floor_said: bool,
    /// The extrapolated duration was said.
    expected_said: bool,
    /// When the first size started.
    first_size: Option<Instant>,
    /// The size being measured and when it started.
    current: Option<(usize, Instant)>,
}

impl State {
    /// The time left if every size still to come takes what the sizes done took on average.
    fn per_size_left(&mut self, p: &Progress, now: Instant) -> Option<Duration> {
        if p.stage == Stage::Timer {
            return None;
        }
        let first = *self.first_size.get_or_insert(now);
        let started = match self.current {
            Some((i, t)) if i == p.size_index => t,
            _ => {
                self.current = Some((p.size_index, now));
                now
            }
        };
        if p.size_index == 0 {
            return None;
        }
        let mean = started.duration_since(first) / p.size_index as u32;
        let to_come = mean * (p.sizes - p.size_index) as u32;
        Some(to_come.saturating_sub(now.duration_since(started)))
    }
}

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Timer => "timer",
        Stage::Warmup => "warm-up",
        Stage::Npp => "npp",
        Stage::Trials => "trials",
        Stage::Rounds => "rounds",
        Stage::Retests => "retests",
    }
}

fn new_bar() -> indicatif::ProgressBar {
    let b =
        indicatif::ProgressBar::with_draw_target(Some(1), indicatif::ProgressDrawTarget::stderr());
    let style =
        indicatif::ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
    b.set_style(style);
    b
}

/// The time left when `done` (0 to 1) of the run took `elapsed`: None until the run has
/// settled and a share has been done.
pub fn time_left(elapsed: Duration, done: f64) -> Option<Duration> {
    if elapsed < Duration::from_secs(2) || !(done > 0.0 && done.is_finite()) {
        return None;
    }
    let total = elapsed.as_secs_f64() / done.min(1.0);
    Some(Duration::from_secs_f64(
        (total - elapsed.as_secs_f64()).clamp(0.0, 1e12),
    ))
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
        let announce = !matches!(
            (when, quiet),
            (ProgressWhen::Never, _) | (ProgressWhen::Auto, true)
        );
        ProgressBar {
            show,
            announce,
            state: Mutex::new(State::default()),
        }
    }

    /// A line on standard error, above the bar when there is one.
    fn say(&self, line: String) {
        match &self.show {
            Show::Bar(b) => match b.get() {
                Some(bar) => bar.println(line),
                None => say!("{line}"),
            },
            _ => say!("{line}"),
        }
    }

    /// The time the run has left, and the lines to say about its length.
    fn extrapolate(&self, p: &Progress) -> Option<Duration> {
        let mut st = match self.state.lock() {
            Ok(g) => g,
            Err(e) => e.into_inner(),
        };
        let now = Instant::now();
        let start = *st.start.get_or_insert(now);
        let elapsed = now.duration_since(start);
        let by_size = st.per_size_left(p, now);
        let mut lines = Vec::new();
        if !st.floor_said {
            st.floor_said = true;
            if p.run_floor >= LONG_RUN {
                let shown = if matches!(self.show, Show::Hidden) {
                    "`--progress always` shows the time left as it goes"
                } else {
                    "the time left is shown as it goes"
                };
                lines.push(format!(
                    "commbench: this run will take at least {} (its counts, at no less than \
                     0.1 us a message); {shown}",
                    human_duration(p.run_floor)
                ));
            }
        }
        let left = match (time_left(elapsed, p.run_done), by_size) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, _) => a,
        };
        if let Some(left) = left {
            let total = elapsed + left;
            if !st.expected_said && elapsed >= SETTLE && total >= LONG_RUN {
                st.expected_said = true;
                lines.push(format!(
                    "commbench: expected to take about {} in all, {} more (extrapolated from \
                     the first {})",
                    human_duration(total),
                    human_duration(left),
                    human_duration(elapsed)
                ));
            }
        }
        drop(st);
        if self.announce {
            for l in lines {
                self.say(l);
            }
        }
        left
    }

    /// Show a progress report.
    pub fn update(&self, p: Progress) {
        let left = self.extrapolate(&p);
        let left_text = left.map(|l| format!(", about {} left", human_duration(l)));
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
                b.set_message(format!(
                    "{}{}",
                    stage_name(p.stage),
                    left_text.unwrap_or_default()
                ));
                b.set_length(p.total.max(1));
                b.set_position(p.done);
            }
            Show::Lines(last) => {
                if !matches!(p.stage, Stage::Trials | Stage::Rounds | Stage::Retests)
                    || p.total == 0
                {
                    return;
                }
                let quarter = p.done * 4 / p.total;
                let mut last = match last.lock() {
                    Ok(g) => g,
                    Err(e) => e.into_inner(),
                };
                if quarter > 0 && *last != Some((p.size_index, quarter)) {
                    *last = Some((p.size_index, quarter));
                    say!(
                        "progress: {prefix}: {} {}/{}{}",
                        stage_name(p.stage),
                        p.done,
                        p.total,
                        left_text.unwrap_or_default()
                    );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_extrapolates_the_share_done() {
        let s = Duration::from_secs;
        assert_eq!(time_left(s(100), 0.25), Some(s(300)));
        assert_eq!(time_left(s(100), 1.0), Some(s(0)));
        // Too early, or nothing done yet: no estimate rather than a wild one.
        assert_eq!(time_left(Duration::from_millis(500), 0.5), None);
        assert_eq!(time_left(s(100), 0.0), None);
        assert_eq!(time_left(s(100), f64::NAN), None);
    }
}
