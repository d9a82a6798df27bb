//! Where ranks sit: pair classes and, on the hypercube, the e-cube routes of a round trip;
//! under a tree of switches, the switches and uplinks a route goes through.

use super::Topology;
use commbench_core::transport::error::{Error, Result};
use std::collections::BTreeMap;

/// Largest hypercube dimension accepted (2^20 nodes; an all-pairs matrix of that many ranks
/// would not fit in memory anyway).
pub(super) const MAX_DIMENSIONS: u32 = 20;

/// The topology resolved for analysis.
#[derive(Debug, Clone)]
pub(super) enum Geometry {
    /// Host index per rank and the host names (first-seen order), and the switches above
    /// the hosts when they are known.
    Hosts {
        /// Index into `names` per rank.
        host_of: Vec<usize>,
        /// Distinct host names.
        names: Vec<String>,
        /// The switches, when known: pair classes count the switches of a route.
        tree: Option<Box<Tree>>,
    },
    /// 2^d hypercube with e-cube routing.
    Cube {
        /// Dimension d.
        d: u32,
    },
}

impl Geometry {
    /// Resolves `topo` for `n` ranks; errors when it cannot hold them.
    pub(super) fn new(n: u32, topo: &Topology) -> Result<Geometry> {
        match topo {
            Topology::Hosts(hosts) => {
                let (host_of, names) = hosts_of(n, hosts)?;
                Ok(Geometry::Hosts {
                    host_of,
                    names,
                    tree: None,
                })
            }
            Topology::Switched { hosts, switches } => {
                let (host_of, names) = hosts_of(n, hosts)?;
                let tree = Tree::new(&host_of, names.len(), switches)?;
                Ok(Geometry::Hosts {
                    host_of,
                    names,
                    tree: Some(Box::new(tree)),
                })
            }
            Topology::Hypercube { dimensions: d } => {
                if *d > MAX_DIMENSIONS || u64::from(n) > 1u64 << d {
                    return Err(Error::Invalid(format!(
                        "{n} ranks do not fit a hypercube of {d} dimensions (at most 2^{d} nodes, \
                         d <= {MAX_DIMENSIONS})"
                    )));
                }
                Ok(Geometry::Cube { d: *d })
            }
        }
    }

    /// Number of pair classes: 2 for hosts (same host, across hosts), same host and each
    /// count of switches a route between hosts goes through under switches, d for the
    /// hypercube (1..=d hops).
    pub(super) fn class_count(&self) -> usize {
        match self {
            Geometry::Hosts { tree: Some(t), .. } => 1 + t.counts.len(),
            Geometry::Hosts { .. } => 2,
            Geometry::Cube { d } => *d as usize,
        }
    }

    /// Class index of the pair (i, j), `i != j`, both in range.
    pub(super) fn class_of(&self, i: u32, j: u32) -> usize {
        match self {
            Geometry::Hosts { host_of, tree, .. } => {
                let (a, b) = (host_of[i as usize], host_of[j as usize]);
                match tree {
                    _ if a == b => 0,
                    Some(t) => t.class_across(a, b),
                    None => 1,
                }
            }
            Geometry::Cube { .. } => ((i ^ j).count_ones() as usize).saturating_sub(1),
        }
    }

    /// The class id written in the document: 0 same host / 1 across hosts, or under
    /// switches the number of switches of the route (0 same host), or the hop count.
    pub(super) fn class_id(&self, c: usize) -> u32 {
        match self {
            Geometry::Hosts { tree: Some(t), .. } if c > 0 => t.counts[c - 1],
            Geometry::Hosts { .. } => c as u32,
            Geometry::Cube { .. } => c as u32 + 1,
        }
    }

    /// Human label of class `c`.
    pub(super) fn class_label(&self, c: usize) -> String {
        match self {
            Geometry::Hosts { .. } if c == 0 => "same host".to_string(),
            Geometry::Hosts { tree: Some(t), .. } => match t.counts[c - 1] {
                1 => "same switch".to_string(),
                k => format!("{k} switches"),
            },
            Geometry::Hosts { .. } => "across hosts".to_string(),
            Geometry::Cube { .. } if c == 0 => "1 hop".to_string(),
            Geometry::Cube { .. } => format!("{} hops", c + 1),
        }
    }

    /// The hypercube dimension, `None` for hosts.
    pub(super) fn cube(&self) -> Option<u32> {
        match self {
            Geometry::Cube { d } => Some(*d),
            Geometry::Hosts { .. } => None,
        }
    }

    /// The host index of rank `k` (`None` on the hypercube or out of range).
    pub(super) fn host_of(&self, k: u32) -> Option<u32> {
        match self {
            Geometry::Hosts { host_of, .. } => host_of.get(k as usize).map(|h| *h as u32),
            Geometry::Cube { .. } => None,
        }
    }

    /// The ranks on host `h`, in order.
    pub(super) fn ranks_on(&self, h: u32) -> Vec<u32> {
        match self {
            Geometry::Hosts { host_of, .. } => (0..host_of.len() as u32)
                .filter(|&r| host_of[r as usize] == h as usize)
                .collect(),
            Geometry::Cube { .. } => Vec::new(),
        }
    }

    /// The name of host `h`.
    pub(super) fn host_name(&self, h: u32) -> String {
        match self {
            Geometry::Hosts { names, .. } => names.get(h as usize).cloned().unwrap_or_default(),
            Geometry::Cube { .. } => String::new(),
        }
    }

    /// Whether hosts are elements of their own: at least two hosts and one with several ranks.
    pub(super) fn shared_hosts(&self) -> bool {
        match self {
            Geometry::Hosts { host_of, names, .. } => {
                names.len() >= 2 && host_of.len() > names.len()
            }
            Geometry::Cube { .. } => false,
        }
    }

    /// "rank 3 (host a12)" or "node 3".
    pub(super) fn rank_name(&self, k: u32) -> String {
        match self {
            Geometry::Hosts { host_of, names, .. } => match host_of.get(k as usize) {
                Some(h) => format!("rank {k} (host {})", names[*h]),
                None => format!("rank {k}"),
            },
            Geometry::Cube { .. } => format!("node {k}"),
        }
    }
}

impl Geometry {
    /// The switches above the hosts, when known.
    pub(super) fn tree(&self) -> Option<&Tree> {
        match self {
            Geometry::Hosts { tree: Some(t), .. } => Some(t),
            _ => None,
        }
    }

    /// The switches and uplinks the route between ranks `i` and `j` goes through (both
    /// directions go through the same), none when they share a host or no switch is known.
    pub(super) fn through(&self, i: u32, j: u32) -> Vec<Hop> {
        self.leaves(i, j)
            .map_or_else(Vec::new, |(t, a, b)| t.route(a, b))
    }

    /// The switch pairs the route between ranks `i` and `j` runs between
    /// ([`Tree::pairs_between`]), none on one host.
    pub(super) fn switch_pairs(&self, i: u32, j: u32) -> Vec<(u32, u32)> {
        self.leaves(i, j)
            .map_or_else(Vec::new, |(t, a, b)| t.pairs_between(a, b))
    }

    /// The tree and the leaf switches of ranks `i` and `j`, when they are on two hosts under
    /// known switches.
    fn leaves(&self, i: u32, j: u32) -> Option<(&Tree, u32, u32)> {
        match self {
            Geometry::Hosts {
                host_of,
                tree: Some(t),
                ..
            } => {
                let (a, b) = (host_of[i as usize], host_of[j as usize]);
                (a != b).then(|| (&**t, t.leaf[a], t.leaf[b]))
            }
            _ => None,
        }
    }

    /// The ranks on hosts under switch `s` (itself or below it), in order.
    pub(super) fn ranks_under(&self, s: u32) -> Vec<u32> {
        match self {
            Geometry::Hosts {
                host_of,
                tree: Some(t),
                ..
            } => (0..host_of.len() as u32)
                .filter(|&r| t.is_under(t.leaf[host_of[r as usize]], s))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Host index per rank and the distinct host names, first seen first.
fn hosts_of(n: u32, hosts: &[String]) -> Result<(Vec<usize>, Vec<String>)> {
    if hosts.len() != n as usize {
        return Err(Error::Invalid(format!(
            "{} host names for {n} ranks: one per rank is needed",
            hosts.len()
        )));
    }
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    let mut names = Vec::new();
    let mut host_of = Vec::with_capacity(hosts.len());
    for h in hosts {
        let next = names.len();
        let k = *index.entry(h.as_str()).or_insert(next);
        if k == next {
            names.push(h.clone());
        }
        host_of.push(k);
    }
    Ok((host_of, names))
}

/// A switch or an uplink a route goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Hop {
    /// The switch (index into [`Tree`]'s switches).
    Switch(u32),
    /// The link from the switch to its parent, either way.
    Uplink(u32),
}

/// Most switches in a path (a tree deeper than this is no fabric).
const MAX_DEPTH: usize = 64;

/// The switches above the hosts, as Slurm's topology/tree plugin gives them: each host hangs
/// from a switch (its leaf), each switch from its parent. Routes go up from the source's leaf
/// to the lowest switch the two leaves share and down to the dest's leaf (the only path in a
/// tree); two leaves with no switch in common are joined by one switch nobody named, which is
/// no element.
#[derive(Debug, Clone)]
pub(super) struct Tree {
    /// Each switch's path from the top, dot-separated (`root.s1.leaf4`), parents first.
    names: Vec<String>,
    /// Each switch's parent.
    parent: Vec<Option<u32>>,
    /// Each switch's depth (0: a top switch).
    depth: Vec<u32>,
    /// The switch each host hangs from.
    leaf: Vec<u32>,
    /// The switch counts of routes between hosts, ascending: class `1 + k` is `counts[k]`.
    counts: Vec<u32>,
}

impl Tree {
    /// The tree of `paths` (one per rank; the ranks of a host must agree), for `hosts` hosts.
    fn new(host_of: &[usize], hosts: usize, paths: &[String]) -> Result<Tree> {
        if paths.len() != host_of.len() {
            return Err(Error::Invalid(format!(
                "{} switch paths for {} ranks: one per rank is needed",
                paths.len(),
                host_of.len()
            )));
        }
        let mut of_host: Vec<Option<&str>> = vec![None; hosts];
        for (r, (p, &h)) in paths.iter().zip(host_of).enumerate() {
            match of_host[h] {
                None => of_host[h] = Some(p.as_str()),
                Some(q) if q == p => {}
                Some(q) => {
                    return Err(Error::Invalid(format!(
                        "rank {r} names the switches `{p}` above its host, another rank on that \
                         host `{q}`"
                    )))
                }
            }
        }
        let mut t = Tree {
            names: Vec::new(),
            parent: Vec::new(),
            depth: Vec::new(),
            leaf: Vec::with_capacity(hosts),
            counts: Vec::new(),
        };
        let mut index: BTreeMap<String, u32> = BTreeMap::new();
        for p in of_host.into_iter().flatten() {
            let parts: Vec<&str> = p.split('.').collect();
            if parts.iter().any(|s| s.trim().is_empty()) || parts.len() > MAX_DEPTH {
                return Err(Error::Invalid(format!(
                    "switch path `{p}`: switch names separated by dots, top first, at most \
                     {MAX_DEPTH} of them, none empty"
                )));
            }
            let mut up = None;
            for d in 0..parts.len() {
                let name = parts[..=d].join(".");
                let next = t.names.len() as u32;
                let k = *index.entry(name.clone()).or_insert(next);
                if k == next {
                    t.names.push(name);
                    t.parent.push(up);
                    t.depth.push(d as u32);
                }
                up = Some(k);
            }
            t.leaf.push(up.unwrap_or(0));
        }
        let mut leaves: BTreeMap<u32, usize> = BTreeMap::new();
        for &l in &t.leaf {
            *leaves.entry(l).or_insert(0) += 1;
        }
        let mut counts = std::collections::BTreeSet::new();
        for (&a, &k) in &leaves {
            if k > 1 {
                counts.insert(1);
            }
            for &b in leaves.keys().filter(|&&b| b > a) {
                counts.insert(t.switches_between(a, b));
            }
        }
        t.counts = counts.into_iter().collect();
        Ok(t)
    }

    /// The lowest switch above (or at) both `a` and `b`, `None` when they share none.
    pub(super) fn lca(&self, mut a: u32, mut b: u32) -> Option<u32> {
        while self.depth[a as usize] > self.depth[b as usize] {
            a = self.parent[a as usize]?;
        }
        while self.depth[b as usize] > self.depth[a as usize] {
            b = self.parent[b as usize]?;
        }
        while a != b {
            a = self.parent[a as usize]?;
            b = self.parent[b as usize]?;
        }
        Some(a)
    }

    /// The switches and uplinks of the route from leaf `a` to leaf `b`: up from `a`, the
    /// shared switch, down to `b` (each listed once).
    fn route(&self, a: u32, b: u32) -> Vec<Hop> {
        let top = self.lca(a, b);
        let mut out = Vec::new();
        for mut s in [a, b] {
            while Some(s) != top {
                out.push(Hop::Switch(s));
                match self.parent[s as usize] {
                    Some(p) => {
                        out.push(Hop::Uplink(s));
                        s = p;
                    }
                    None => break,
                }
            }
        }
        if let Some(s) = top {
            out.push(Hop::Switch(s));
        }
        out
    }

    /// The switch pairs of a route from leaf `a` to leaf `b`: at each depth where both leaves
    /// have a switch above them (or are one) and the two differ, that pair, lower index first,
    /// shallowest first. A switch pair stands for every route with one end under each of its
    /// switches: the paths between two leaves (or between two spines' subtrees) that a fabric
    /// with several paths between them (ECMP over spines, a bad trunk) can make slow on their
    /// own, where a tree has only the uplinks they share with other routes.
    fn pairs_between(&self, a: u32, b: u32) -> Vec<(u32, u32)> {
        let chain = |mut s: u32| {
            let mut v = vec![s];
            while let Some(p) = self.parent[s as usize] {
                v.push(p);
                s = p;
            }
            v.reverse();
            v
        };
        let (ca, cb) = (chain(a), chain(b));
        ca.iter()
            .zip(&cb)
            .filter(|(x, y)| x != y)
            .map(|(&x, &y)| (x.min(y), x.max(y)))
            .collect()
    }

    /// The number of switches a route from leaf `a` to leaf `b` goes through: up to the
    /// lowest switch both share and down again, or, with none shared, both ways to the top
    /// and one more that joins them.
    fn switches_between(&self, a: u32, b: u32) -> u32 {
        let d = |s: u32| self.depth[s as usize];
        match self.lca(a, b) {
            _ if a == b => 1,
            Some(c) => d(a) + d(b) - 2 * d(c) + 1,
            None => d(a) + d(b) + 3,
        }
    }

    /// The class of a route between hosts `a` and `b` (different).
    fn class_across(&self, a: usize, b: usize) -> usize {
        let switches = self.switches_between(self.leaf[a], self.leaf[b]);
        1 + self.counts.partition_point(|&c| c < switches)
    }

    /// Whether switch `leaf` is `s` or below it.
    fn is_under(&self, mut leaf: u32, s: u32) -> bool {
        while self.depth[leaf as usize] > self.depth[s as usize] {
            match self.parent[leaf as usize] {
                Some(p) => leaf = p,
                None => return false,
            }
        }
        leaf == s
    }

    /// The switch's path from the top.
    pub(super) fn name(&self, s: u32) -> &str {
        self.names.get(s as usize).map_or("", String::as_str)
    }

    /// The path of switch `s`'s parent (`None` for a top switch).
    pub(super) fn parent_name(&self, s: u32) -> Option<&str> {
        let p = (*self.parent.get(s as usize)?)?;
        Some(self.name(p))
    }

    /// The switch of that path.
    pub(super) fn find(&self, name: &str) -> Option<u32> {
        self.names.iter().position(|n| n == name).map(|k| k as u32)
    }

    /// Switch `s`'s depth (0: a top switch).
    pub(super) fn depth(&self, s: u32) -> u32 {
        self.depth.get(s as usize).copied().unwrap_or(0)
    }

    /// Switch `s`'s parent.
    pub(super) fn parent(&self, s: u32) -> Option<u32> {
        *self.parent.get(s as usize)?
    }

    /// How many switches hang from switch `p`.
    pub(super) fn children(&self, p: u32) -> usize {
        self.parent.iter().filter(|q| **q == Some(p)).count()
    }

    /// Whether switch `s` has a parent (an uplink).
    pub(super) fn has_uplink(&self, s: u32) -> bool {
        matches!(self.parent.get(s as usize), Some(Some(_)))
    }
}

/// Calls `visit(from, k)` for each dimension `k` a message from `i` to `j` crosses, in
/// e-cube order (lowest differing dimension first); `from` is the node where it crosses:
/// `j`'s bits below `k`, `i`'s bits from `k` up.
pub(super) fn route(i: u32, j: u32, mut visit: impl FnMut(u32, u32)) {
    let diff = i ^ j;
    let mut cur = i;
    for k in 0..32 {
        if diff >> k & 1 == 1 {
            visit(cur, k);
            cur ^= 1 << k;
        }
    }
}

/// Undirected channels `(lower end, dimension)` the round trip i -> j -> i uses, sorted and
/// deduplicated.
#[cfg(test)]
pub(super) fn channels(i: u32, j: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (a, b) in [(i, j), (j, i)] {
        route(a, b, |from, k| out.push((from & !(1 << k), k)));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Nodes the round trip i -> j -> i is forwarded through (neither end), sorted and
/// deduplicated.
#[cfg(test)]
pub(super) fn forwarders(i: u32, j: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for (a, b) in [(i, j), (j, i)] {
        route(a, b, |from, _| {
            if from != a {
                out.push(from);
            }
        });
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// How many of the round trip i -> j -> i's two routes cross the channel `(low, k)` (0, 1
/// or 2).
pub(super) fn channel_uses(i: u32, j: u32, low: u32, k: u32) -> u32 {
    let mut uses = 0;
    for (a, b) in [(i, j), (j, i)] {
        route(a, b, |from, kk| {
            uses += u32::from(kk == k && from & !(1 << k) == low);
        });
    }
    uses
}

/// Whether the pair (i, j) crosses dimension `k` (in either direction: both do or neither).
pub(super) fn crosses(i: u32, j: u32, k: u32) -> bool {
    k < 32 && (i ^ j) >> k & 1 == 1
}

/// Ordered pairs (i, j) of nodes below `n` whose message i -> j crosses the channel
/// `(low, k)` in either direction, in a fixed order.
pub(super) fn channel_users(d: u32, n: u32, low: u32, k: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    if k >= d || k >= 31 {
        return out;
    }
    let below = (1u32 << k) - 1;
    let above = d - k - 1;
    for from in [low, low ^ (1 << k)] {
        let to = from ^ (1 << k);
        for lo in 0..=below {
            let i = (from & !below) | lo;
            for hi in 0..(1u64 << above) {
                let j = (to & (below | 1 << k)) | ((hi as u32) << (k + 1));
                if i < n && j < n {
                    out.push((i, j));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_crosses_lowest_dimension_first_from_the_documented_nodes() {
        let mut steps = Vec::new();
        route(0b0000, 0b1011, |from, k| steps.push((from, k)));
        assert_eq!(steps, vec![(0b0000, 0), (0b0001, 1), (0b0011, 3)]);
        assert_eq!(
            forwarders(0b0000, 0b1011),
            vec![0b0001, 0b0011, 0b1000, 0b1010]
        );
        assert_eq!(channels(0, 1), vec![(0, 0)]);
    }

    #[test]
    fn channel_users_are_exactly_the_routes_over_the_channel() {
        let (d, n) = (4u32, 16u32);
        for k in 0..d {
            for low in (0..n).filter(|u| u >> k & 1 == 0) {
                let mut want = Vec::new();
                for i in 0..n {
                    for j in 0..n {
                        let mut used = false;
                        route(i, j, |from, kk| used |= kk == k && from & !(1 << k) == low);
                        if used {
                            want.push((i, j));
                        }
                    }
                }
                let mut got = channel_users(d, n, low, k);
                got.sort_unstable();
                assert_eq!(got, want, "channel ({low}, {k})");
            }
        }
    }
}
