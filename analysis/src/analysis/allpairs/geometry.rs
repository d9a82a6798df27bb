//! Where ranks sit: pair classes and, on the hypercube, the e-cube routes of a round trip.

use super::Topology;
use commbench_core::transport::error::{Error, Result};
use std::collections::BTreeMap;

/// Largest hypercube dimension accepted (2^20 nodes; an all-pairs matrix of that many ranks
/// would not fit in memory anyway).
pub(super) const MAX_DIMENSIONS: u32 = 20;

/// The topology resolved for analysis.
#[derive(Debug, Clone)]
pub(super) enum Geometry {
    /// Host index per rank and the host names (first-seen order).
    Hosts {
        /// Index into `names` per rank.
        host_of: Vec<usize>,
        /// Distinct host names.
        names: Vec<String>,
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
                Ok(Geometry::Hosts { host_of, names })
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

    /// Number of pair classes: 2 for hosts (same host, across hosts), d for the hypercube
    /// (1..=d hops).
    pub(super) fn class_count(&self) -> usize {
        match self {
            Geometry::Hosts { .. } => 2,
            Geometry::Cube { d } => *d as usize,
        }
    }

    /// Class index of the pair (i, j), `i != j`, both in range.
    pub(super) fn class_of(&self, i: u32, j: u32) -> usize {
        match self {
            Geometry::Hosts { host_of, .. } => {
                usize::from(host_of[i as usize] != host_of[j as usize])
            }
            Geometry::Cube { .. } => ((i ^ j).count_ones() as usize).saturating_sub(1),
        }
    }

    /// The class id written in the document: 0 same host / 1 across hosts, or the hop count.
    pub(super) fn class_id(&self, c: usize) -> u32 {
        match self {
            Geometry::Hosts { .. } => c as u32,
            Geometry::Cube { .. } => c as u32 + 1,
        }
    }

    /// Human label of class `c`.
    pub(super) fn class_label(&self, c: usize) -> String {
        match self {
            Geometry::Hosts { .. } if c == 0 => "same host".to_string(),
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
            Geometry::Hosts { host_of, names } => names.len() >= 2 && host_of.len() > names.len(),
            Geometry::Cube { .. } => false,
        }
    }

    /// "rank 3 (host a12)" or "node 3".
    pub(super) fn rank_name(&self, k: u32) -> String {
        match self {
            Geometry::Hosts { host_of, names } => match host_of.get(k as usize) {
                Some(h) => format!("rank {k} (host {})", names[*h]),
                None => format!("rank {k}"),
            },
            Geometry::Cube { .. } => format!("node {k}"),
        }
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
