//! The switches above the hosts: a `--topology` file read into each host's switch path, and
//! what a route between two ranks goes through, from their paths alone.
//!
//! A switch path names the switches above a host from the top down, dot-separated, as Slurm's
//! topology/tree plugin gives it to every task in `SLURM_TOPOLOGY_ADDR` (less the host):
//! `root.s1.leaf4`. The file is either Slurm's own `topology.conf`
//! (`SwitchName=leaf4 Nodes=node[384-415]`, `SwitchName=s1 Switches=leaf[4-7]`), or one line
//! per host: `node386 root.s1.leaf4`.

use super::Topology;
use commbench_core::transport::error::{Error, Result};
use std::collections::BTreeMap;

/// Most hosts or switches one hostlist expression may name.
const MAX_EXPANSION: usize = 1 << 20;

/// Most switches above a host.
const MAX_DEPTH: usize = 64;

/// Host name to switch path, read from the text of a topology file (either form).
pub fn parse_topology(text: &str) -> Result<BTreeMap<String, String>> {
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(k, l)| (k + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return Err(Error::Invalid(
            "the topology file names no host: expected Slurm's topology.conf \
             (SwitchName=s1 Nodes=node[1-16]) or lines of `HOST SWITCH.PATH`"
                .into(),
        ));
    }
    if lines.iter().any(|(_, l)| has_key(l, "SwitchName")) {
        slurm_conf(&lines)
    } else {
        host_lines(&lines)
    }
}

/// Whether a word of `line` is `key=...`.
fn has_key(line: &str, key: &str) -> bool {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .any(|(k, _)| k.eq_ignore_ascii_case(key))
}

/// Lines of `HOST PATH`.
fn host_lines(lines: &[(usize, &str)]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for &(k, l) in lines {
        let words: Vec<&str> = l.split_whitespace().collect();
        let [host, path] = words[..] else {
            return Err(host_line_error(k, l));
        };
        if host.contains('=') || path.contains('=') {
            return Err(host_line_error(k, l));
        }
        check_path(path).map_err(|e| Error::Invalid(format!("topology file line {k}: {e}")))?;
        if let Some(old) = out.insert(host.to_string(), path.to_string()) {
            if old != path {
                return Err(Error::Invalid(format!(
                    "topology file line {k}: host {host} is under `{old}` and `{path}`"
                )));
            }
        }
    }
    Ok(out)
}

fn host_line_error(k: usize, l: &str) -> Error {
    Error::Invalid(format!(
        "topology file line {k}: `{l}`: expected `HOST SWITCH.PATH` (the switches above the \
         host, top first, dot-separated) or Slurm's SwitchName= lines"
    ))
}

/// A switch path: switch names, dot-separated, none empty.
fn check_path(path: &str) -> std::result::Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) || parts.len() > MAX_DEPTH {
        return Err(format!(
            "switch path `{path}`: switch names, top first, separated by single dots \
             (at most {MAX_DEPTH})"
        ));
    }
    Ok(())
}

/// Slurm's topology.conf: `SwitchName=` with `Switches=` (its children) and `Nodes=` (its
/// hosts); other keys (LinkSpeed) are read past.
fn slurm_conf(lines: &[(usize, &str)]) -> Result<BTreeMap<String, String>> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut switches: Vec<String> = Vec::new();
    let mut host_leaf: BTreeMap<String, String> = BTreeMap::new();
    for &(k, l) in lines {
        let bad = |why: String| Error::Invalid(format!("topology file line {k}: `{l}`: {why}"));
        let mut name = None;
        let (mut children, mut hosts) = (Vec::new(), Vec::new());
        for word in l.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                return Err(bad(format!("`{word}` is no KEY=VALUE")));
            };
            match key.to_ascii_lowercase().as_str() {
                "switchname" => name = Some(value.to_string()),
                "switches" => children = expand(value).map_err(&bad)?,
                "nodes" => hosts = expand(value).map_err(&bad)?,
                _ => {}
            }
        }
        let Some(name) = name.filter(|n| !n.is_empty() && !n.contains('.')) else {
            return Err(bad(
                "each line needs SwitchName=NAME (a name without dots)".into()
            ));
        };
        if switches.contains(&name) {
            return Err(bad(format!("switch {name} is described twice")));
        }
        switches.push(name.clone());
        for c in children {
            if let Some(p) = parent.insert(c.clone(), name.clone()) {
                return Err(bad(format!("switch {c} hangs from {p} and from {name}")));
            }
        }
        for h in hosts {
            if let Some(p) = host_leaf.insert(h.clone(), name.clone()) {
                return Err(bad(format!("host {h} hangs from {p} and from {name}")));
            }
        }
    }
    if let Some(c) = parent.keys().find(|c| !switches.contains(c)) {
        return Err(Error::Invalid(format!(
            "topology file: switch {c} is listed under {} but has no SwitchName= line",
            parent[c]
        )));
    }
    // Each switch's path from the top; a loop is an error.
    let mut path_of: BTreeMap<&str, String> = BTreeMap::new();
    for s in &switches {
        let mut chain = vec![s.as_str()];
        let mut at = s.as_str();
        while let Some(p) = parent.get(at) {
            if chain.contains(&p.as_str()) || chain.len() > MAX_DEPTH {
                return Err(Error::Invalid(format!(
                    "topology file: switch {s} is above itself (a loop of Switches=) or more \
                     than {MAX_DEPTH} switches deep"
                )));
            }
            chain.push(p);
            at = p;
        }
        chain.reverse();
        path_of.insert(s, chain.join("."));
    }
    if host_leaf.is_empty() {
        return Err(Error::Invalid(
            "topology file: no switch lists a host (Nodes=)".into(),
        ));
    }
    Ok(host_leaf
        .into_iter()
        .map(|(h, leaf)| {
            let p = path_of.get(leaf.as_str()).cloned().unwrap_or(leaf);
            (h, p)
        })
        .collect())
}

/// A Slurm hostlist expression (`node[1-4,7],gpu01`, `r[1-2]n[01-02]`) as names.
pub fn expand(expr: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in split_outside_brackets(expr)? {
        if item.is_empty() {
            return Err(format!("an empty name in the hostlist `{expr}`"));
        }
        let mut names = vec![String::new()];
        let mut rest = item;
        while !rest.is_empty() {
            match rest.find('[') {
                None => {
                    names.iter_mut().for_each(|n| n.push_str(rest));
                    rest = "";
                }
                Some(open) => {
                    let close = rest[open..]
                        .find(']')
                        .map(|c| open + c)
                        .ok_or_else(|| format!("an unclosed `[` in the hostlist `{expr}`"))?;
                    let prefix = &rest[..open];
                    let choices = ranges(&rest[open + 1..close], expr)?;
                    if names.len().saturating_mul(choices.len()) > MAX_EXPANSION {
                        return Err(format!(
                            "the hostlist `{expr}` names more than {MAX_EXPANSION} hosts"
                        ));
                    }
                    names = names
                        .iter()
                        .flat_map(|n| choices.iter().map(move |c| format!("{n}{prefix}{c}")))
                        .collect();
                    rest = &rest[close + 1..];
                }
            }
        }
        if names.iter().any(|n| n.contains(']')) {
            return Err(format!("a stray `]` in the hostlist `{expr}`"));
        }
        out.extend(names);
        if out.len() > MAX_EXPANSION {
            return Err(format!(
                "the hostlist `{expr}` names more than {MAX_EXPANSION} hosts"
            ));
        }
    }
    Ok(out)
}

/// Splits at commas outside brackets.
fn split_outside_brackets(expr: &str) -> std::result::Result<Vec<&str>, String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (k, ch) in expr.char_indices() {
        match ch {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&expr[start..k]);
                start = k + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced brackets in the hostlist `{expr}`"));
        }
    }
    if depth != 0 {
        return Err(format!("an unclosed `[` in the hostlist `{expr}`"));
    }
    out.push(&expr[start..]);
    Ok(out)
}

/// `1-4,7,09-11` as the numbers, each as wide as its range's start was written.
fn ranges(inner: &str, expr: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    for r in inner.split(',') {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let bad = || format!("`{r}` in the hostlist `{expr}` is no number or range of numbers");
        if a.is_empty() || !a.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        if b.is_empty() || !b.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        let (lo, hi): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if hi < lo || hi - lo >= MAX_EXPANSION as u64 {
            return Err(format!(
                "the range `{r}` in the hostlist `{expr}` runs backwards or names more than \
                 {MAX_EXPANSION} hosts"
            ));
        }
        let width = a.len();
        out.extend((lo..=hi).map(|v| format!("{v:0width$}")));
    }
    Ok(out)
}

/// The topology of a run: the hosts alone, or with their switches when every rank's host has
/// a switch path (`paths` per rank; an empty one is unknown) and the ranks of each host name
/// the same. The number of ranks without one, or whose host's ranks disagree, comes back with
/// the hosts alone.
pub fn with_switches(hosts: &[String], paths: &[String]) -> (Topology, usize) {
    let missing = if paths.len() == hosts.len() {
        let mut first: BTreeMap<&str, &str> = BTreeMap::new();
        for (h, p) in hosts.iter().zip(paths) {
            first.entry(h.as_str()).or_insert(p.as_str());
        }
        hosts
            .iter()
            .zip(paths)
            .filter(|(h, p)| check_path(p).is_err() || first.get(h.as_str()) != Some(&p.as_str()))
            .count()
    } else {
        hosts.len()
    };
    if missing == 0 && !hosts.is_empty() {
        (
            Topology::Switched {
                hosts: hosts.to_vec(),
                switches: paths.to_vec(),
            },
            0,
        )
    } else {
        (Topology::Hosts(hosts.to_vec()), missing)
    }
}

/// Switch paths per rank from a host's and a topology file's map (`""` for a host the map
/// does not hold).
pub fn paths_of(hosts: &[String], map: &BTreeMap<String, String>) -> Vec<String> {
    hosts
        .iter()
        .map(|h| map.get(h).cloned().unwrap_or_default())
        .collect()
}

/// Components `a` and `b` share from the top.
fn shared(a: &[&str], b: &[&str]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The rank's host and switch path under a switched topology.
fn place(topo: &Topology, r: u32) -> Option<(&str, Vec<&str>)> {
    match topo {
        Topology::Switched { hosts, switches } => Some((
            hosts.get(r as usize)?.as_str(),
            switches.get(r as usize)?.split('.').collect(),
        )),
        _ => None,
    }
}

/// The number of switches the route between ranks `i` and `j` goes through under `topo`'s
/// switches (0 on one host; two tops with no switch in common are joined by one more), the
/// class id the attribution writes; `None` without switches.
pub fn switch_count(topo: &Topology, i: u32, j: u32) -> Option<u32> {
    let ((hi, pi), (hj, pj)) = (place(topo, i)?, place(topo, j)?);
    if hi == hj {
        return Some(0);
    }
    if pi == pj {
        return Some(1);
    }
    let c = shared(&pi, &pj);
    let below = (pi.len() - c + pj.len() - c) as u32;
    Some(below + 1)
}

/// Whether the route between ranks `i` and `j` (either way: both go the same way) goes
/// through the switch of path `switch` (`uplink` false) or crosses the link from it to its
/// parent (`uplink` true), under `topo`'s switches.
pub fn route_uses(topo: &Topology, i: u32, j: u32, switch: &str, uplink: bool) -> bool {
    let (Some((hi, pi)), Some((hj, pj))) = (place(topo, i), place(topo, j)) else {
        return false;
    };
    if hi == hj {
        return false;
    }
    let s: Vec<&str> = switch.split('.').collect();
    let on = pi.starts_with(&s) || pj.starts_with(&s);
    // Below the shared switches the two paths differ: a switch there is on one side only.
    let (c, k) = (shared(&pi, &pj), s.len());
    if uplink {
        on && k > c && k >= 2
    } else {
        on && k >= c.max(1)
    }
}

/// Whether the route between ranks `i` and `j` runs between the switches of paths `a` and
/// `b` (a switch pair: two different switches at the same depth), one end under each, under
/// `topo`'s switches.
pub fn route_between(topo: &Topology, i: u32, j: u32, a: &str, b: &str) -> bool {
    let (Some((hi, pi)), Some((hj, pj))) = (place(topo, i), place(topo, j)) else {
        return false;
    };
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    hi != hj
        && a.len() == b.len()
        && a != b
        && ((pi.starts_with(&a) && pj.starts_with(&b))
            || (pi.starts_with(&b) && pj.starts_with(&a)))
}
