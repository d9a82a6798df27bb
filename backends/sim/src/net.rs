//! The network a simulated machine routes over: the hypercube of seed 001 (the default), or a
//! tree of switches (`[tree]` in TOML) whose leaves hold the hosts, as in the fat trees and
//! leaf-spine fabrics of today's clusters (docs/simulator.md §6c).
//!
//! Both are store-and-forward networks of FIFO channels, one per direction of each link, a
//! hop over one held for E(n) (scaled by its faults and, on a tree, by the uplink factor
//! between two switches). They differ in what the vertices between the ends are: on the cube,
//! nodes, which pay R and S for every message they forward; on the tree, switches, which have
//! no CPU, so that only the source pays S and only the destination pays R.
//!
//! A tree's vertices are numbered nodes first (`0..nodes`), then its switches level by level
//! from the leaves up, the root last. Every vertex but the root has two channels to its
//! parent: `2x` up and `2x + 1` down.

use serde::{Deserialize, Serialize};

/// Most levels of switches a `[tree]` may give (`fanout` entries).
pub const MAX_TREE_LEVELS: usize = 8;

/// Largest `uplink_factor`, as a fault's factor.
const MAX_UPLINK_FACTOR: f64 = 1e6;

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// A tree of switches above the machine's nodes (`[tree]` in TOML): `fanout[0]` hosts under
/// each leaf switch, `fanout[1]` leaves under each switch of the level above, and so on;
/// when the last level given has more than one switch, one more, the root `core`, joins them.
/// Switches are named by level, `leaf3`, `spine1`, `l3s0` (level 3, switch 0), and `core`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchTree {
    /// Children per switch, from the leaves up: hosts per leaf, then switches per switch.
    pub fanout: Vec<u32>,
    /// How many times E of a hop between two switches (an uplink, either way) is E of a hop
    /// between a host and its leaf: above 1 for uplinks slower than host links (an
    /// oversubscribed fabric), 1 (the default) for links all alike.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub uplink_factor: f64,
}

impl SwitchTree {
    /// `Ok` when the tree fits `nodes` hosts; else the reason.
    pub(crate) fn check(&self, nodes: u32) -> std::result::Result<(), String> {
        if self.fanout.is_empty() {
            return Err(
                "tree.fanout is empty: give at least the hosts under each leaf \
                        switch (fanout = [16])"
                    .into(),
            );
        }
        if self.fanout.len() > MAX_TREE_LEVELS {
            return Err(format!(
                "tree.fanout has {} levels: at most {MAX_TREE_LEVELS}",
                self.fanout.len()
            ));
        }
        let mut count = nodes;
        for (i, &f) in self.fanout.iter().enumerate() {
            if f == 0 {
                return Err(format!(
                    "tree.fanout[{i}] = 0: a switch has at least one child"
                ));
            }
            if count == 1 && i > 0 {
                return Err(format!(
                    "tree.fanout[{i}] = {f}: the level below already has one switch, which is \
                     the root; drop the entries from {i} on"
                ));
            }
            count = count.div_ceil(f);
        }
        let u = self.uplink_factor;
        if !(u.is_finite() && u > 0.0 && u <= MAX_UPLINK_FACTOR) {
            return Err(format!(
                "tree.uplink_factor = {u}: must be finite, above 0 and at most \
                 {MAX_UPLINK_FACTOR}"
            ));
        }
        Ok(())
    }
}

/// A tree laid out over `nodes` hosts: the levels' sizes and where their vertices start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    nodes: u32,
    /// Vertices per level: `count[0] = nodes`, then switches per level up to the root's 1.
    count: Vec<u32>,
    /// First vertex of each level, and one past the last vertex at the end.
    base: Vec<u32>,
    /// Hosts under one vertex of each level (the root: all).
    span: Vec<u32>,
    /// Children per vertex of each level above the hosts (`fan[l]` for level `l + 1`).
    fan: Vec<u32>,
    /// Whether the root was added above the levels given (it is then named `core`).
    added_root: bool,
    uplink_factor: f64,
}

impl Layout {
    /// The tree `t` over `nodes` hosts ([`SwitchTree::check`] passed).
    pub(crate) fn new(nodes: u32, t: &SwitchTree) -> Self {
        let mut count = vec![nodes];
        let mut span = vec![1u32];
        let mut fan = Vec::new();
        for &f in &t.fanout {
            let below = *count.last().unwrap_or(&1);
            if below == 1 && count.len() > 1 {
                break;
            }
            count.push(below.div_ceil(f.max(1)));
            span.push(span.last().unwrap_or(&1).saturating_mul(f.max(1)));
            fan.push(f.max(1));
        }
        let top = *count.last().unwrap_or(&1);
        let added_root = top > 1;
        if added_root {
            count.push(1);
            span.push(nodes);
            fan.push(top);
        }
        let mut base = Vec::with_capacity(count.len() + 1);
        let mut at = 0u32;
        for &c in &count {
            base.push(at);
            at += c;
        }
        base.push(at);
        Layout {
            nodes,
            count,
            base,
            span,
            fan,
            added_root,
            uplink_factor: t.uplink_factor,
        }
    }

    /// All vertices: hosts and switches.
    pub(crate) fn vertices(&self) -> u32 {
        *self.base.last().unwrap_or(&0)
    }

    /// Channels: two per vertex but the root.
    pub(crate) fn channels(&self) -> u32 {
        2 * (self.vertices() - 1)
    }

    /// The level of vertex `x` (0: a host) and its index within the level.
    #[inline]
    fn level(&self, x: u32) -> (usize, u32) {
        let mut l = 0;
        while l + 2 < self.base.len() && x >= self.base[l + 1] {
            l += 1;
        }
        (l, x - self.base[l])
    }

    /// The parent of vertex `x` (`None`: the root).
    #[inline]
    pub(crate) fn parent(&self, x: u32) -> Option<u32> {
        let (l, i) = self.level(x);
        if l + 1 >= self.count.len() {
            return None;
        }
        Some(self.base[l + 1] + i / self.fan[l])
    }

    /// The channel a message at vertex `at` bound for host `dest` takes next, and the vertex
    /// it leads to (`at != dest`).
    #[inline]
    pub(crate) fn next(&self, at: u32, dest: u32) -> (u32, u32) {
        let (l, i) = self.level(at);
        if l > 0 {
            let lo = i.saturating_mul(self.span[l]);
            if dest >= lo && dest - lo < self.span[l] {
                let child = self.base[l - 1] + dest / self.span[l - 1];
                return (2 * child + 1, child);
            }
        }
        let up = self.base[l + 1] + i / self.fan[l];
        (2 * at, up)
    }

    /// The two ends of channel `c`, as (from, to).
    #[inline]
    pub(crate) fn ends(&self, c: u32) -> (u32, u32) {
        let x = c / 2;
        let p = self.parent(x).unwrap_or(x);
        if c % 2 == 0 {
            (x, p)
        } else {
            (p, x)
        }
    }

    /// E's factor on channel `c` before faults: the uplink factor between two switches.
    #[inline]
    pub(crate) fn base_factor(&self, c: u32) -> f64 {
        if c / 2 >= self.nodes {
            self.uplink_factor
        } else {
            1.0
        }
    }

    /// The name of switch `x` (a vertex above the hosts).
    pub(crate) fn name(&self, x: u32) -> String {
        let (l, i) = self.level(x);
        if self.added_root && l + 1 == self.count.len() {
            return "core".into();
        }
        match l {
            1 => format!("leaf{i}"),
            2 => format!("spine{i}"),
            _ => format!("l{l}s{i}"),
        }
    }

    /// The switch named `name`, if the tree has it.
    pub(crate) fn find(&self, name: &str) -> Option<u32> {
        let top = self.count.len() - 1;
        if name == "core" {
            return self.added_root.then(|| self.base[top]);
        }
        let (l, rest) = if let Some(r) = name.strip_prefix("leaf") {
            (1, r)
        } else if let Some(r) = name.strip_prefix("spine") {
            (2, r)
        } else {
            let r = name.strip_prefix('l')?;
            let (l, i) = r.split_once('s')?;
            let l: usize = l.parse().ok()?;
            if l < 3 {
                return None;
            }
            (l, i)
        };
        // Canonical numbers only: `leaf03` is not `leaf3`.
        let i: u32 = rest.parse().ok()?;
        if i.to_string() != rest || l > top || (l == top && self.added_root) {
            return None;
        }
        (i < self.count[l]).then(|| self.base[l] + i)
    }

    /// The switches above host `v`, top first and dot-separated (`core.spine1.leaf5`), as
    /// Slurm's topology/tree plugin gives them.
    pub(crate) fn path(&self, v: u32) -> String {
        let mut names = Vec::new();
        let mut x = v;
        while let Some(p) = self.parent(x) {
            names.push(self.name(p));
            x = p;
        }
        names.reverse();
        names.join(".")
    }

    /// Whether vertices `x` and `y` are at the same level.
    pub(crate) fn same_level(&self, x: u32, y: u32) -> bool {
        self.level(x).0 == self.level(y).0
    }

    /// Whether host `h` is under vertex `x` (or is it).
    fn under(&self, h: u32, x: u32) -> bool {
        let (l, i) = self.level(x);
        h < self.nodes && h / self.span[l] == i
    }

    /// Whether channel `c`, a hop of the route from host `from` to host `to`, is one a
    /// `slow_switch_pair` of switches `x` and `y` (one level) scales: the message runs between
    /// them (one end under each) and the hop is at or above their level (the uplink, either
    /// way, of one of them or of a switch above it).
    pub(crate) fn pair_hop(&self, c: u32, from: u32, to: u32, x: u32, y: u32) -> bool {
        let between = (self.under(from, x) && self.under(to, y))
            || (self.under(from, y) && self.under(to, x));
        between && self.level(c / 2).0 >= self.level(x).0
    }

    /// Whether channel `c` touches switch `x` (a port of it).
    pub(crate) fn touches(&self, c: u32, x: u32) -> bool {
        let (a, b) = self.ends(c);
        a == x || b == x
    }

    /// The most channels a route takes: up to the root and down again.
    pub(crate) fn max_hops(&self) -> u32 {
        2 * (self.count.len() as u32 - 1)
    }

    /// The switches, as vertices.
    pub(crate) fn switches(&self) -> std::ops::Range<u32> {
        self.nodes..self.vertices()
    }
}

/// The network of a machine, for the kernel and the closed forms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Net {
    /// A `d`-cube: channel `v * d + k` leaves node `v` in dimension `k`.
    Cube { d: u32 },
    /// A tree of switches.
    Tree(Layout),
}

impl Net {
    /// The network of `cfg` (validated).
    pub(crate) fn of(cfg: &crate::config::SimConfig) -> Self {
        match &cfg.tree {
            None => Net::Cube { d: cfg.dimensions },
            Some(t) => Net::Tree(Layout::new(cfg.nodes(), t)),
        }
    }

    /// Its channels.
    pub(crate) fn channels(&self, nodes: u32) -> u32 {
        match self {
            Net::Cube { d } => nodes * d,
            Net::Tree(l) => l.channels(),
        }
    }

    /// The channel a message at vertex `at` bound for node `dest` takes next, and the vertex
    /// it leads to (`at != dest`): e-cube routing (the lowest differing dimension first) on
    /// the cube, up to the lowest switch above both and down on the tree.
    #[inline]
    pub(crate) fn next(&self, at: u32, dest: u32) -> (u32, u32) {
        match self {
            Net::Cube { d } => {
                let k = (at ^ dest).trailing_zeros();
                (at * d + k, at ^ (1 << k))
            }
            Net::Tree(l) => l.next(at, dest),
        }
    }

    /// The two ends of channel `c`, as (from, to).
    #[inline]
    pub(crate) fn ends(&self, c: u32) -> (u32, u32) {
        match self {
            Net::Cube { d } => {
                let v = c / d;
                (v, v ^ (1 << (c % d)))
            }
            Net::Tree(l) => l.ends(c),
        }
    }

    /// E's factor on channel `c` before faults (a tree's uplink factor; else 1).
    #[inline]
    pub(crate) fn base_factor(&self, c: u32) -> f64 {
        match self {
            Net::Cube { .. } => 1.0,
            Net::Tree(l) => l.base_factor(c),
        }
    }

    /// The channels of the route from node `from` to node `to`, in order.
    pub(crate) fn route(&self, from: u32, to: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = from;
        while at != to {
            let (c, next) = self.next(at, to);
            out.push(c);
            at = next;
        }
        out
    }

    /// The most channels one route takes.
    pub(crate) fn max_hops(&self) -> u32 {
        match self {
            Net::Cube { d } => *d,
            Net::Tree(l) => l.max_hops(),
        }
    }

    /// The tree, if the network is one.
    pub(crate) fn tree(&self) -> Option<&Layout> {
        match self {
            Net::Cube { .. } => None,
            Net::Tree(l) => Some(l),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(fanout: &[u32]) -> SwitchTree {
        SwitchTree {
            fanout: fanout.to_vec(),
            uplink_factor: 1.0,
        }
    }

    /// The route of every pair, walked against the parent relation: up to the lowest common
    /// ancestor, down to the destination, each channel's ends joined.
    #[test]
    fn routes_climb_to_the_common_switch_and_descend() {
        for (nodes, fanout) in [
            (16, vec![4]),
            (16, vec![4, 2]),
            (13, vec![4, 2]),
            (64, vec![8, 4]),
            (7, vec![16]),
            (30, vec![3, 2, 2]),
            (5, vec![1]),
        ] {
            let t = tree(&fanout);
            t.check(nodes).unwrap();
            let l = Layout::new(nodes, &t);
            let net = Net::Tree(l.clone());
            let ancestors = |v: u32| {
                let mut out = vec![v];
                let mut x = v;
                while let Some(p) = l.parent(x) {
                    out.push(p);
                    x = p;
                }
                out
            };
            for a in 0..nodes {
                assert!(
                    l.path(a).split('.').all(|s| l.find(s).is_some()),
                    "{}",
                    l.path(a)
                );
                for b in 0..nodes {
                    let r = net.route(a, b);
                    let (ua, ub) = (ancestors(a), ancestors(b));
                    let up = ua.iter().position(|x| ub.contains(x)).unwrap();
                    let down = ub.iter().position(|x| *x == ua[up]).unwrap();
                    assert_eq!(r.len(), up + down, "{nodes} {fanout:?} {a}->{b}");
                    let mut at = a;
                    for &c in &r {
                        let (x, y) = l.ends(c);
                        assert_eq!(x, at);
                        at = y;
                    }
                    assert_eq!(at, b);
                    assert!(r.iter().all(|&c| c < l.channels()));
                }
            }
        }
    }

    #[test]
    fn names_levels_and_the_added_root() {
        let l = Layout::new(64, &tree(&[8, 4]));
        // 8 leaves under 2 spines under an added core.
        assert_eq!(l.vertices(), 64 + 8 + 2 + 1);
        assert_eq!(l.path(0), "core.spine0.leaf0");
        assert_eq!(l.path(63), "core.spine1.leaf7");
        assert_eq!(l.find("leaf7"), Some(71));
        assert_eq!(l.find("leaf8"), None);
        assert_eq!(l.find("leaf07"), None);
        assert_eq!(l.find("spine1"), Some(73));
        assert_eq!(l.find("core"), Some(74));
        assert_eq!(l.max_hops(), 6);
        // One leaf of everything: it is the root, and no core is added.
        let one = Layout::new(8, &tree(&[8]));
        assert_eq!(one.path(3), "leaf0");
        assert_eq!(one.find("core"), None);
        assert_eq!(one.max_hops(), 2);
        let deep = Layout::new(16, &tree(&[2, 2, 2]));
        assert_eq!(deep.path(0), "core.l3s0.spine0.leaf0");
        assert_eq!(deep.find("l3s1"), Some(16 + 8 + 4 + 1));
        assert_eq!(deep.find("l2s0"), None);
    }

    #[test]
    fn bad_trees_say_why() {
        for (fanout, want) in [
            (vec![], "is empty"),
            (vec![0], "at least one child"),
            (vec![16, 2], "already has one switch"),
            (vec![2; 9], "at most 8"),
        ] {
            let e = tree(&fanout).check(16).unwrap_err();
            assert!(e.contains(want), "{fanout:?}: {e}");
        }
        for u in [0.0, -1.0, f64::NAN, 2e6] {
            let t = SwitchTree {
                uplink_factor: u,
                ..tree(&[4])
            };
            assert!(t.check(16).unwrap_err().contains("uplink_factor"));
        }
    }
}
