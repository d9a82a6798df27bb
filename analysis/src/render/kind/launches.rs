//! A set of launches (`--launches L`, `commbench launches`): what each launch was, then per
//! point the set's median over the launches with its interval, the share of the variance the
//! launches add, and what one more launch is worth in trials (docs/methodology.md §3b).

use crate::analysis::launches::LaunchSet;
use crate::render::number::{number, Style};

/// The text of `set`.
pub fn text(set: &LaunchSet) -> String {
    let mut out = header(set);
    out.push_str(&table(set));
    out.push_str(NOTES);
    out
}

/// What the set is: its command, its launches and their status.
fn header(set: &LaunchSet) -> String {
    let ran = set.launches.len();
    let complete = set
        .launches
        .iter()
        .filter(|l| l.status == "complete")
        .count();
    let mut s = format!(
        "launches: {ran} of {} ({complete} complete) of `{}`\n",
        set.asked,
        set.command.join(" ")
    );
    for l in &set.launches {
        let exit = l.exit.map(|c| format!(", exit {c}")).unwrap_or_default();
        s.push_str(&format!(
            "  launch {:>3}  {:<11} {:>8} s  {}{exit}\n",
            l.index,
            l.status,
            number(l.wall_s, Style::Significant, "-"),
            l.document
        ));
    }
    if let Some(e) = &set.error {
        s.push_str(&format!("! set {}: {e}\n", set.status));
    }
    s.push('\n');
    s
}

/// One line per point.
fn table(set: &LaunchSet) -> String {
    let mut s = format!(
        "{:<10} {:<5} {:>9} {:>4} {:>12} {:>23} {:>9} {:>13} {:>9}\n",
        "pattern",
        "backend",
        "size",
        "runs",
        "median us",
        "95% CI over launches",
        "between",
        "launch worth",
        "best r"
    );
    for p in &set.points {
        let ci = p.ci95_us.map_or("-".to_string(), |c| {
            format!(
                "{}..{}",
                number(c.lo, Style::Significant, "-"),
                number(c.hi, Style::Significant, "-")
            )
        });
        let (share, worth, best) = match &p.components {
            None => ("-".into(), "-".into(), "-".into()),
            Some(c) => (
                format!("{:.0}%", 100.0 * c.between_share),
                c.launch_worth_trials
                    .map_or("any number".to_string(), |w| format!("{w:.0} trials")),
                c.trials_optimal
                    .map_or("more".to_string(), |r| format!("{r:.0}")),
            ),
        };
        s.push_str(&format!(
            "{:<10} {:<5} {:>9} {:>4} {:>12} {:>23} {:>9} {:>13} {:>9}\n",
            p.pattern,
            p.backend,
            p.size,
            p.medians_us.len(),
            number(p.geomean_us, Style::Significant, "-"),
            ci,
            share,
            worth,
            best
        ));
    }
    s
}

const NOTES: &str = "
median us: the geometric mean of the launches' medians (compare's statistic of a side).
between: the share of a launch median's variance that is the launch's own (placement,
  connections, the state of the machine), not its trials' (Kalibera & Jones 2013).
launch worth: the trials, spread over the launches, that narrow the set's statistic as much as
  one more launch; `any number`: no number of trials does, only more launches.
best r: Kalibera & Jones's optimal trials per launch for the cost of a launch against a trial;
  `more`: the launches add nothing measurable, so more trials per launch pay.
compare two sets: commbench compare DIR_A DIR_B (3 or more launches a side give a verdict).
";
