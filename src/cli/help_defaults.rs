//! Every default a measuring command's `--help` shows is the one its run uses: for each
//! option whose help states a default, the command planned with that value given explicitly
//! is the plan of the command left at its defaults.

use super::args::{self, Cli, Given};
use clap::FromArgMatches;

/// Options a command needs before it can be planned at all.
fn required(path: &[String]) -> Vec<String> {
    match path {
        [c] if c == "transpose" => vec!["--n".into(), "16".into()],
        _ => Vec::new(),
    }
}

/// What an option is used with, where it is refused alone: the fit's options need a sweep.
fn used_with(flag: &str) -> Vec<String> {
    match flag {
        "--breakpoint" => vec!["--sweep".into()],
        _ => Vec::new(),
    }
}

/// The plan of `commbench PATH... WORDS...`, as text to compare, or the reason it is refused.
fn plan(path: &[String], words: &[String]) -> String {
    let mut line = vec!["commbench".to_string()];
    line.extend(path.iter().cloned());
    line.extend(required(path));
    line.extend(words.iter().cloned());
    let mut cmd = args::command();
    let m = match cmd.try_get_matches_from_mut(&line) {
        Ok(m) => m,
        Err(e) => return format!("clap refused {line:?}: {e}"),
    };
    let given = Given::from_matches(&cmd, &m);
    let cli = match Cli::from_arg_matches(&m) {
        Ok(c) => c,
        Err(e) => return format!("clap refused {line:?}: {e}"),
    };
    match super::plan_of(cli.cmd, &given) {
        Ok(Ok(p)) => format!("{p:?}"),
        Ok(Err(f)) => format!("refused {line:?}: {}", f.reason),
        Err(_) => format!("{line:?} measures nothing"),
    }
}

/// The long help of the command at `path`, as `commbench PATH... --help` prints it.
fn help(path: &[String]) -> String {
    let mut line = vec!["commbench".to_string()];
    line.extend(path.iter().cloned());
    line.push("--help".into());
    match args::command().try_get_matches_from(&line) {
        Ok(_) => panic!("{line:?} printed no help"),
        Err(e) => e.render().to_string(),
    }
}

/// Each option of a help text with the text that describes it, joined into one line.
fn options(help: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let t = line.trim_start();
        if t.is_empty() {
            continue;
        }
        // Options stand at most 6 columns in (`  -o, --output`, `      --trials`), their
        // text further in.
        let indent = line.len() - t.len();
        let flag = t
            .strip_prefix("--")
            .or_else(|| t.get(4..).and_then(|r| r.strip_prefix("--")))
            .filter(|_| (1..=6).contains(&indent));
        if let Some(rest) = flag {
            let name = rest.split([' ', '<']).next().unwrap_or_default();
            out.push((format!("--{name}"), String::new()));
        } else if !line.starts_with(' ') {
            // A heading or a paragraph that is no option's.
            out.push((String::new(), String::new()));
        } else if let Some((_, text)) = out.last_mut() {
            text.push(' ');
            text.push_str(t);
        }
    }
    out.retain(|(flag, _)| !flag.is_empty());
    out
}

/// The default an option's help states for the command `name`: clap's `[default: X]`, or
/// one written in its text, `Default: X` (with `(name: Y)` after it, Y for that command).
/// A default described rather than stated (`4 x --trials`, `twice the last-level cache`) is
/// none.
fn stated_default(text: &str, name: &str) -> Option<String> {
    if let Some(i) = text.find("[default: ") {
        let rest = &text[i + "[default: ".len()..];
        return rest.split(']').next().map(str::to_string);
    }
    let lower = text.to_ascii_lowercase();
    let i = lower.find("default: ")?;
    let rest = &text[i + "default: ".len()..];
    let value = rest.split_whitespace().next()?;
    let value = value.trim_end_matches([',', ';', '.', ')']);
    let after = rest[rest.find(value)? + value.len()..].trim_start_matches([',', ';']);
    if !value.starts_with(|c: char| c.is_ascii_digit()) || after.starts_with(" x ") {
        return None;
    }
    let own = format!("({name}: ");
    if let Some(j) = after.find(&own).filter(|&j| after[..j].trim().is_empty()) {
        let theirs = &after[j + own.len()..];
        return theirs.split(')').next().map(str::to_string);
    }
    Some(value.to_string())
}

#[test]
fn every_default_shown_by_help_is_the_one_used() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    for path in super::fuzz::measuring() {
        let name = path.last().cloned().unwrap_or_default();
        let default = plan(&path, &[]);
        assert!(!default.starts_with("refused"), "{default}");
        assert_eq!(
            default,
            plan(&path, &[]),
            "{path:?} is not planned alike twice"
        );
        for (flag, text) in options(&help(&path)) {
            let Some(value) = stated_default(&text, &name) else {
                continue;
            };
            checked += 1;
            let mut words = used_with(&flag);
            let default = plan(&path, &words);
            words.extend([flag.clone(), value.clone()]);
            if plan(&path, &words) != default {
                wrong.push(format!("{} {flag}: help says {value}", path.join(" ")));
            }
        }
    }
    assert!(wrong.is_empty(), "defaults not used:\n{}", wrong.join("\n"));
    // trials and warm-up of the ten measuring commands, at least.
    assert!(checked >= 20, "only {checked} defaults found");
}

#[test]
fn a_stated_default_is_read_as_written() {
    let s = |t: &str, n: &str| stated_default(t, n);
    assert_eq!(s("Trials. [default: 1000]", "queue"), Some("1000".into()));
    assert_eq!(
        s(
            "Trials. Default: 10000 (bandwidth: 100); at most",
            "bandwidth"
        ),
        Some("100".into())
    );
    assert_eq!(
        s(
            "Trials. Default: 10000 (bandwidth: 100); at most",
            "pingpong"
        ),
        Some("10000".into())
    );
    assert_eq!(
        s("Sizes (default: 16,500,1000, the sizes of", "echo"),
        Some("16,500,1000".into())
    );
    assert_eq!(
        s("Retests (default: 4 x --trials; 0: none)", "allpairs"),
        None
    );
    assert_eq!(s("A pool (default: twice the cache)", "pingpong"), None);
    let help = "Options:\n      --trials <N>\n          Timed.\n\n          [default: 5]\n  \
                -o, --output <DIR>\n          Write.\nAll pairs:\n      --z <Z>\n          z\n";
    assert_eq!(
        options(help),
        vec![
            ("--trials".to_string(), " Timed. [default: 5]".to_string()),
            ("--output".to_string(), " Write.".to_string()),
            ("--z".to_string(), " z".to_string()),
        ]
    );
}
