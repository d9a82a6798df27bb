//! The simulator's configuration: machine shape, clock, the six per-message times of seed 001
//! §2 as piecewise-linear functions of the message size, presets and the TOML format.

use crate::net::{Layout, Net, SwitchTree};
use commbench_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// One section of a piecewise-linear time: for sizes `n >= from` (up to the next section),
/// `t(n) = base_us + per_byte_us * n` microseconds. `n` is the whole message size, not the
/// size above `from`, so each section is a line as in Table 3 of seed 001.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Piece {
    /// First message size (bytes) this section applies to.
    #[serde(default)]
    pub from: u64,
    /// Fixed part in microseconds.
    pub base_us: f64,
    /// Per-byte part in microseconds.
    #[serde(default)]
    pub per_byte_us: f64,
}

/// What a time may be written as in TOML: one line, or a list of sections.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum LinearRepr {
    One(Piece),
    Many(Vec<Piece>),
}

/// A time as a piecewise-linear function of the message size `n` (bytes).
///
/// Coefficients are rounded once to whole picoseconds (`base_ps = round(base_us * 1e6)`,
/// `per_byte_ps = round(per_byte_us * 1e6)`), and a time is evaluated in integer arithmetic as
/// `t_ns(n) = floor((base_ps + per_byte_ps * n + 500) / 1000)`, i.e. rounded to the nearest
/// nanosecond, halves up. Every Table 3 coefficient is a whole number of nanoseconds, so the
/// `ncube7` preset is exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LinearRepr", into = "Vec<Piece>")]
pub struct Linear {
    pieces: Vec<Piece>,
    /// (from, base_ps, per_byte_ps), same order as `pieces`.
    compiled: Vec<(u64, u64, u64)>,
}

fn to_ps(us: f64, what: &str) -> Result<u64> {
    if !(0.0..=1e12).contains(&us) {
        return Err(Error::Config(format!(
            "{what} = {us} µs: must be finite, >= 0 and at most 1e12 µs"
        )));
    }
    Ok((us * 1e6).round() as u64)
}

impl Linear {
    /// Build from sections, checking them: the first starts at 0, `from` strictly increases,
    /// coefficients are finite and non-negative.
    pub fn new(pieces: Vec<Piece>) -> Result<Self> {
        if pieces.is_empty() {
            return Err(Error::Config("a time needs at least one section".into()));
        }
        if pieces[0].from != 0 {
            return Err(Error::Config(format!(
                "the first section of a time must start at from = 0, not {}",
                pieces[0].from
            )));
        }
        let mut compiled = Vec::with_capacity(pieces.len());
        for (i, p) in pieces.iter().enumerate() {
            if i > 0 && p.from <= pieces[i - 1].from {
                return Err(Error::Config(format!(
                    "sections of a time must have increasing `from`: {} after {}",
                    p.from,
                    pieces[i - 1].from
                )));
            }
            compiled.push((
                p.from,
                to_ps(p.base_us, "base_us")?,
                to_ps(p.per_byte_us, "per_byte_us")?,
            ));
        }
        Ok(Self { pieces, compiled })
    }

    /// One line `base_us + per_byte_us * n` for every size.
    pub fn line(base_us: f64, per_byte_us: f64) -> Result<Self> {
        Self::new(vec![Piece {
            from: 0,
            base_us,
            per_byte_us,
        }])
    }

    /// The sections as configured.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The time for an `n`-byte message in nanoseconds (see the type's rounding rule).
    #[inline]
    pub fn ns(&self, n: u64) -> u64 {
        let mut sel = self.compiled[0];
        for &c in &self.compiled[1..] {
            if c.0 <= n {
                sel = c;
            } else {
                break;
            }
        }
        let ps = sel.1 as u128 + sel.2 as u128 * n as u128 + 500;
        u64::try_from(ps / 1000).unwrap_or(u64::MAX)
    }
}

impl TryFrom<LinearRepr> for Linear {
    type Error = Error;
    fn try_from(r: LinearRepr) -> Result<Self> {
        match r {
            LinearRepr::One(p) => Linear::new(vec![p]),
            LinearRepr::Many(v) => Linear::new(v),
        }
    }
}

impl From<Linear> for Vec<Piece> {
    fn from(l: Linear) -> Self {
        l.pieces
    }
}

/// The six times of seed 001 §2, each a function of the message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Times {
    /// F, "format": the sender's user-side copy into a system buffer (the send call).
    #[serde(rename = "F")]
    pub f: Linear,
    /// S, "send": interrupt-level CPU load on a node that puts a message on a channel.
    #[serde(rename = "S")]
    pub s: Linear,
    /// R, "receive": interrupt-level CPU load on a node that takes a message off a channel.
    #[serde(rename = "R")]
    pub r: Linear,
    /// A, "accept": the part of the receive call done before the message arrives (a function
    /// of the receive buffer's length).
    #[serde(rename = "A")]
    pub a: Linear,
    /// U, "unformat": the receiver's copy out of the system buffer (the rest of the receive).
    #[serde(rename = "U")]
    pub u: Linear,
    /// E, elapsed time of one hop, system buffer to system buffer.
    #[serde(rename = "E")]
    pub e: Linear,
}

impl Times {
    /// `Ok` when every per-message time of an `n`-byte message is at most 1e15 ns, so
    /// that the virtual clock (a u64 of nanoseconds) holds thousands of such steps; else the
    /// error names the time and the size.
    pub fn check_size(&self, n: u64) -> Result<()> {
        for (key, t) in [
            ("F", &self.f),
            ("S", &self.s),
            ("R", &self.r),
            ("A", &self.a),
            ("U", &self.u),
            ("E", &self.e),
        ] {
            let ns = t.ns(n);
            if ns > MAX_COST_NS {
                return Err(Error::Config(format!(
                    "sim config: {key} of a {n}-byte message is {ns} ns, over the {MAX_COST_NS} ns \
                     (1e12 us) one step may take; lower its per-byte time or the size"
                )));
            }
        }
        Ok(())
    }

    /// Table 3 of seed 001 (NCUBE/seven, integer background computation), in microseconds:
    /// E = 220 + 1.285n, R = 180 + .04n, S = 150 + .01n, F = 160 + .60n, U = 130 + .61n,
    /// A = 120 + 0.0n.
    pub fn ncube7_table3() -> Self {
        // Constants: these lines are valid, so `expect` cannot fire; avoid it anyway.
        let l = |b: f64, p: f64| Linear {
            pieces: vec![Piece {
                from: 0,
                base_us: b,
                per_byte_us: p,
            }],
            compiled: vec![(0, (b * 1e6).round() as u64, (p * 1e6).round() as u64)],
        };
        Times {
            e: l(220.0, 1.285),
            r: l(180.0, 0.04),
            s: l(150.0, 0.01),
            f: l(160.0, 0.60),
            u: l(130.0, 0.61),
            a: l(120.0, 0.0),
        }
    }
}

/// One injected fault: part of the machine is slower than the rest by `factor` (finite,
/// `1 <= factor <= 1e6`), from virtual time `from_us` until `until_us` (each optional: by
/// default always, a static fault). Several faults on the same channel or node multiply. A
/// scaled time is [`scaled_ns`]`(base, product of factors)`, the factors those of the faults
/// whose window holds the virtual time at which the step starts. In TOML, one `[[faults]]`
/// entry tagged by `kind` (docs/simulator.md §6a).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// E of both channels between neighbours `from` and `to` (`from -> to` and `to -> from`)
    /// is scaled by `factor`.
    SlowLink {
        /// One end of the link.
        from: u32,
        /// The other end: a neighbour of `from` (their numbers differ in one bit).
        to: u32,
        /// How many times slower each hop over the link is.
        factor: f64,
        /// Virtual time, µs, from which the fault applies (absent: from the start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_us: Option<f64>,
        /// Virtual time, µs, from which it no longer applies (absent: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_us: Option<f64>,
    },
    /// F and U of `node`'s program and the R and S it pays as a hop's end (also when it only
    /// forwards) are scaled by `factor`; A is not.
    SlowNode {
        /// The slow node.
        node: u32,
        /// How many times slower its copies and handlers are.
        factor: f64,
        /// Virtual time, µs, from which the fault applies (absent: from the start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_us: Option<f64>,
        /// Virtual time, µs, from which it no longer applies (absent: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_us: Option<f64>,
    },
    /// E of every channel in `dimension` (both directions) is scaled by `factor`.
    SlowDimension {
        /// The slow dimension, `0 .. dimensions`.
        dimension: u32,
        /// How many times slower each hop in that dimension is.
        factor: f64,
        /// Virtual time, µs, from which the fault applies (absent: from the start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_us: Option<f64>,
        /// Virtual time, µs, from which it no longer applies (absent: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_us: Option<f64>,
    },
    /// On a `[tree]` machine, E of every channel into or out of `switch` (each of its ports,
    /// both ways) is scaled by `factor`: a message through it is slower on both hops.
    SlowSwitch {
        /// The switch, by name (`leaf3`, `spine0`, `core`).
        switch: String,
        /// How many times slower each hop through it is.
        factor: f64,
        /// Virtual time, µs, from which the fault applies (absent: from the start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_us: Option<f64>,
        /// Virtual time, µs, from which it no longer applies (absent: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_us: Option<f64>,
    },
    /// On a `[tree]` machine, E of both channels between `switch` and the switch above it
    /// (its uplink) is scaled by `factor`.
    SlowUplink {
        /// The switch whose uplink is slow, by name (`leaf3`, `spine0`; not the root).
        switch: String,
        /// How many times slower each hop over the uplink is.
        factor: f64,
        /// Virtual time, µs, from which the fault applies (absent: from the start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_us: Option<f64>,
        /// Virtual time, µs, from which it no longer applies (absent: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_us: Option<f64>,
    },
    /// On a `[tree]` machine, the routes between the hosts under `switch` and those under
    /// `other` (two switches at one level) are slow, and no other: E of each hop of a message
    /// between the two that is above them (the uplinks of the two switches and of those above
    /// them, up to the switch they share, both ways) is scaled by `factor`. A path between
    /// two leaves that other routes over the same uplinks do not take: one spine of several
    /// under ECMP, a bad cable of a trunk.
    SlowSwitchPair {
        /// One switch, by name (`leaf3`, `spine0`).
        switch: String,
        /// The other, at the same level (`leaf6`, `spine1`).
        other: String,
        /// How many times slower each hop between them is.
        factor: f64,
        /// Virtual time, µs, from which the fault applies (absent: from the start).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_us: Option<f64>,
        /// Virtual time, µs, from which it no longer applies (absent: never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until_us: Option<f64>,
    },
}

/// The `kind`s a `[[faults]]` entry may have.
pub const FAULT_KINDS: &[&str] = &[
    "slow_link",
    "slow_node",
    "slow_dimension",
    "slow_switch",
    "slow_uplink",
    "slow_switch_pair",
];

/// Where a fault is, its switch's name resolved on the machine's network.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    Link(u32, u32),
    Node(u32),
    Dimension(u32),
    Switch(u32),
    Uplink(u32),
    SwitchPair(u32, u32),
}

impl Place {
    /// Whether a fault here scales E of channel `c` of `net` for a message from host
    /// `from` to host `to` (only a switch pair's depends on the message).
    fn on_route(self, net: &Net, c: u32, from: u32, to: u32) -> bool {
        match (self, net) {
            (Place::SwitchPair(x, y), Net::Tree(l)) => l.pair_hop(c, from, to, x, y),
            _ => self.on_channel(net, c),
        }
    }

    /// Whether a fault here scales E of channel `c` of `net`.
    fn on_channel(self, net: &Net, c: u32) -> bool {
        match (self, net) {
            (Place::Link(from, to), Net::Cube { d }) => {
                let (v, k) = (c / d, c % d);
                (from ^ to).trailing_zeros() == k && (v == from || v == to)
            }
            (Place::Dimension(k), Net::Cube { d }) => c % d == k,
            (Place::Switch(x), Net::Tree(l)) => l.touches(c, x),
            (Place::Uplink(x), Net::Tree(_)) => c / 2 == x,
            _ => false,
        }
    }
}

/// Largest factor one fault may have.
pub const MAX_FAULT_FACTOR: f64 = 1e6;

/// Latest virtual time a fault's window may name, µs: the clock's limit.
pub const MAX_FAULT_TIME_US: f64 = (CLOCK_LIMIT_NS / 1000) as f64;

/// A window's bound in µs as virtual ns: `round(us * 1000)`.
fn window_ns(us: f64) -> u64 {
    // `as` saturates; the bound was checked to be finite and within the clock.
    (us * 1000.0).round() as u64
}

impl Fault {
    /// How many times slower the faulty part is.
    pub fn factor(&self) -> f64 {
        match *self {
            Fault::SlowLink { factor, .. }
            | Fault::SlowNode { factor, .. }
            | Fault::SlowDimension { factor, .. }
            | Fault::SlowSwitch { factor, .. }
            | Fault::SlowUplink { factor, .. }
            | Fault::SlowSwitchPair { factor, .. } => factor,
        }
    }

    /// The fault's window as given: `(from_us, until_us)`.
    pub fn window_us(&self) -> (Option<f64>, Option<f64>) {
        match *self {
            Fault::SlowLink {
                from_us, until_us, ..
            }
            | Fault::SlowNode {
                from_us, until_us, ..
            }
            | Fault::SlowDimension {
                from_us, until_us, ..
            }
            | Fault::SlowSwitch {
                from_us, until_us, ..
            }
            | Fault::SlowUplink {
                from_us, until_us, ..
            }
            | Fault::SlowSwitchPair {
                from_us, until_us, ..
            } => (from_us, until_us),
        }
    }

    /// The fault's window in virtual ns, `[from, until)`: from 0 and until `u64::MAX` where
    /// not given.
    pub fn window_ns(&self) -> (u64, u64) {
        let (from, until) = self.window_us();
        (from.map_or(0, window_ns), until.map_or(u64::MAX, window_ns))
    }

    /// Whether the fault applies at virtual time `t_ns`.
    pub fn active_at(&self, t_ns: u64) -> bool {
        let (from, until) = self.window_ns();
        from <= t_ns && t_ns < until
    }

    /// Whether the fault has a window (else it applies throughout).
    pub fn timed(&self) -> bool {
        self.window_us() != (None, None)
    }

    /// The entry's `kind` in TOML: `slow_link`, `slow_node`, `slow_dimension`,
    /// `slow_switch`, `slow_uplink` or `slow_switch_pair`.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::SlowLink { .. } => FAULT_KINDS[0],
            Fault::SlowNode { .. } => FAULT_KINDS[1],
            Fault::SlowDimension { .. } => FAULT_KINDS[2],
            Fault::SlowSwitch { .. } => FAULT_KINDS[3],
            Fault::SlowUplink { .. } => FAULT_KINDS[4],
            Fault::SlowSwitchPair { .. } => FAULT_KINDS[5],
        }
    }

    /// Where the fault is on `net` (a switch it names that the tree lacks: nowhere, which
    /// [`SimConfig::validate`] refuses).
    fn place(&self, net: &Net) -> Option<Place> {
        let switch = |name: &str| net.tree().and_then(|l| l.find(name));
        Some(match self {
            Fault::SlowLink { from, to, .. } => Place::Link(*from, *to),
            Fault::SlowNode { node, .. } => Place::Node(*node),
            Fault::SlowDimension { dimension, .. } => Place::Dimension(*dimension),
            Fault::SlowSwitch { switch: s, .. } => Place::Switch(switch(s)?),
            Fault::SlowUplink { switch: s, .. } => Place::Uplink(switch(s)?),
            Fault::SlowSwitchPair {
                switch: s, other, ..
            } => Place::SwitchPair(switch(s)?, switch(other)?),
        })
    }

    /// Whether the fault scales E of channel `c` of `net` for a message from host `from` to
    /// host `to`.
    fn on_route(&self, net: &Net, c: u32, from: u32, to: u32) -> bool {
        self.place(net)
            .is_some_and(|p| p.on_route(net, c, from, to))
    }

    /// Whether the fault scales E of channel `c` of `net`.
    fn on_channel(&self, net: &Net, c: u32) -> bool {
        self.place(net).is_some_and(|p| p.on_channel(net, c))
    }

    /// Whether the fault scales F, U, R and S of node `v`.
    fn on_node(&self, v: u32) -> bool {
        matches!(*self, Fault::SlowNode { node, .. } if node == v)
    }

    /// `Ok` when the fault fits the network of `cfg` (a `dimensions`-cube, or its tree) and
    /// its factor is in range; else the reason, without the entry's name.
    fn check(&self, cfg: &SimConfig) -> std::result::Result<(), String> {
        let dimensions = cfg.dimensions;
        let nodes = u64::from(cfg.nodes());
        let node_in_range = |v: u32| {
            if u64::from(v) < nodes {
                Ok(())
            } else {
                Err(format!(
                    "node {v} is out of range: a {dimensions}-cube has nodes 0..={}",
                    nodes - 1
                ))
            }
        };
        let net = Net::of(cfg);
        match (self, &net) {
            (Fault::SlowLink { .. } | Fault::SlowDimension { .. }, Net::Tree(_)) => {
                return Err(format!(
                    "{} is a fault of the hypercube; a tree machine has slow_node, slow_switch, \
                     slow_uplink and slow_switch_pair",
                    self.kind()
                ))
            }
            (
                Fault::SlowSwitch { .. } | Fault::SlowUplink { .. } | Fault::SlowSwitchPair { .. },
                Net::Cube { .. },
            ) => {
                return Err(format!(
                    "{} is a fault of a tree of switches, and this machine is a hypercube (no \
                     [tree])",
                    self.kind()
                ))
            }
            (
                Fault::SlowSwitch { .. } | Fault::SlowUplink { .. } | Fault::SlowSwitchPair { .. },
                Net::Tree(l),
            ) => self.check_on_tree(l)?,
            (&Fault::SlowLink { from, to, .. }, _) => {
                node_in_range(from)?;
                node_in_range(to)?;
                let bits = distance(from, to);
                if bits != 1 {
                    return Err(format!(
                        "nodes {from} and {to} are not neighbours in a {dimensions}-cube (they \
                         differ in {bits} bits); a link joins nodes that differ in one bit"
                    ));
                }
            }
            (&Fault::SlowNode { node, .. }, _) => node_in_range(node)?,
            (&Fault::SlowDimension { dimension, .. }, _) if dimension >= dimensions => {
                return Err(match dimensions {
                    0 => format!("dimension {dimension} is out of range: a 0-cube has none"),
                    d => format!(
                        "dimension {dimension} is out of range: a {d}-cube has dimensions 0..={}",
                        d - 1
                    ),
                });
            }
            (Fault::SlowDimension { .. }, _) => {}
        }
        let f = self.factor();
        if !f.is_finite() || !(1.0..=MAX_FAULT_FACTOR).contains(&f) {
            return Err(format!(
                "factor = {f}: must be finite, >= 1 (a fault slows) and at most \
                 {MAX_FAULT_FACTOR}"
            ));
        }
        self.check_window()
    }

    /// `Ok` when the switches a fault of a tree names are on tree `l` and fit its kind (not
    /// the root's uplink; a pair's two, different, at one level); else the reason.
    fn check_on_tree(&self, l: &Layout) -> std::result::Result<(), String> {
        let find = |name: &str| {
            l.find(name).ok_or_else(|| {
                format!(
                    "the tree has no switch `{}` (its switches: {})",
                    one_line(name),
                    switch_list(l)
                )
            })
        };
        match self {
            Fault::SlowSwitch { switch, .. } => {
                find(switch)?;
            }
            Fault::SlowUplink { switch, .. } => {
                let x = find(switch)?;
                if l.parent(x).is_none() {
                    return Err(format!("`{switch}` is the root: it has no uplink"));
                }
            }
            Fault::SlowSwitchPair { switch, other, .. } => {
                let (x, y) = (find(switch)?, find(other)?);
                if x == y {
                    return Err(format!(
                        "`{}` twice: a switch pair is two switches, the routes between the \
                         hosts under one and those under the other",
                        one_line(switch)
                    ));
                }
                if !l.same_level(x, y) {
                    return Err(format!(
                        "`{}` and `{}` are at different levels of the tree: a switch pair is \
                         two leaves, two spines, ...",
                        one_line(switch),
                        one_line(other)
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `from_us` and `until_us`, when given, are finite, `>= 0`, within the clock's limit,
    /// and `from_us < until_us`.
    fn check_window(&self) -> std::result::Result<(), String> {
        let (from, until) = self.window_us();
        for (key, v) in [("from_us", from), ("until_us", until)] {
            let Some(v) = v else { continue };
            if !v.is_finite() || !(0.0..=MAX_FAULT_TIME_US).contains(&v) {
                return Err(format!(
                    "{key} = {v}: a virtual time must be finite, >= 0 and at most \
                     {MAX_FAULT_TIME_US:e} µs (the clock's limit)"
                ));
            }
        }
        if let (Some(a), Some(b)) = (from, until) {
            if window_ns(a) >= window_ns(b) {
                return Err(format!(
                    "from_us = {a} is not before until_us = {b}: the fault would never apply"
                ));
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Fault {
    /// `slow_link 3 <-> 7 x4`, `slow_node 5 x3`, `slow_dimension 2 x2.5`, with its window
    /// when it has one: `slow_node 5 x3 from 1500 us`, `... until 20 us`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::SlowLink {
                from, to, factor, ..
            } => write!(f, "slow_link {from} <-> {to} x{factor}")?,
            Fault::SlowNode { node, factor, .. } => write!(f, "slow_node {node} x{factor}")?,
            Fault::SlowDimension {
                dimension, factor, ..
            } => write!(f, "slow_dimension {dimension} x{factor}")?,
            Fault::SlowSwitch { switch, factor, .. } => {
                write!(f, "slow_switch {} x{factor}", one_line(switch))?
            }
            Fault::SlowUplink { switch, factor, .. } => {
                write!(f, "slow_uplink {} x{factor}", one_line(switch))?
            }
            Fault::SlowSwitchPair {
                switch,
                other,
                factor,
                ..
            } => write!(
                f,
                "slow_switch_pair {} - {} x{factor}",
                one_line(switch),
                one_line(other)
            )?,
        }
        let (from, until) = self.window_us();
        if let Some(a) = from {
            write!(f, " from {a} us")?;
        }
        if let Some(b) = until {
            write!(f, " until {b} us")?;
        }
        Ok(())
    }
}

/// The switches of a tree, for an error message: all when a few, else the first and the
/// count.
fn switch_list(l: &Layout) -> String {
    let names: Vec<String> = l.switches().take(6).map(|x| l.name(x)).collect();
    let all = l.switches().len();
    if all > names.len() {
        format!("{}, ... ({all} in all)", names.join(", "))
    } else {
        names.join(", ")
    }
}

/// A time of `base_ns` on a part of the machine slowed by `factor`:
/// `round(base_ns * factor)` ns (halves away from zero, computed in `f64`), saturating at
/// `u64::MAX`; exactly `base_ns` when `factor` is 1.
#[inline]
pub fn scaled_ns(base_ns: u64, factor: f64) -> u64 {
    if factor == 1.0 {
        return base_ns;
    }
    // `as` saturates.
    (base_ns as f64 * factor).round() as u64
}

/// The products of the factors of `faults` on each channel of `cfg`'s network (on a tree,
/// times the uplink factor of the channels between switches) and on each node; empty tables
/// when there are none and every channel's base factor is 1.
fn products<'a>(cfg: &SimConfig, faults: impl Iterator<Item = &'a Fault>) -> (Vec<f64>, Vec<f64>) {
    let mut faults = faults.peekable();
    let uplinks = cfg.tree.as_ref().is_some_and(|t| t.uplink_factor != 1.0);
    if faults.peek().is_none() && !uplinks {
        return (Vec::new(), Vec::new());
    }
    let net = Net::of(cfg);
    let nodes = cfg.nodes() as usize;
    let mut e: Vec<f64> = (0..net.channels(cfg.nodes()))
        .map(|c| net.base_factor(c))
        .collect();
    let mut node = vec![1.0; nodes];
    for fault in faults {
        match fault.place(&net) {
            Some(Place::Node(v)) => {
                if let Some(x) = node.get_mut(v as usize) {
                    *x *= fault.factor();
                }
            }
            Some(p) => {
                for (c, x) in e.iter_mut().enumerate() {
                    if p.on_channel(&net, c as u32) {
                        *x *= fault.factor();
                    }
                }
            }
            None => {}
        }
    }
    (e, node)
}

/// The largest product of factors on one channel or node of `cfg` with every fault in
/// effect at once, windows ignored (1 without faults): an upper bound of how much slower
/// any step of the machine may be.
pub(crate) fn worst_factor(cfg: &SimConfig) -> f64 {
    let (e, node) = products(cfg, cfg.faults.iter());
    let e = e.iter().copied().fold(1.0, f64::max) * pair_product(cfg);
    node.iter().copied().fold(e, f64::max)
}

/// The product of the factors of the `slow_switch_pair` faults (1 when none): a bound of how
/// much slower they make a channel's hop for some messages, beside the channel's own
/// factor.
fn pair_product(cfg: &SimConfig) -> f64 {
    cfg.faults
        .iter()
        .filter(|f| matches!(f, Fault::SlowSwitchPair { .. }))
        .map(Fault::factor)
        .product()
}

/// The faults of a configuration, per channel and per node, for the kernel: the products of
/// the factors of the faults that always apply, and the faults with a window, whose factors
/// are multiplied in when a step starts inside it. Empty tables when the machine has no
/// static faults, so that a run without faults only tests for that.
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultTable {
    /// E factor of each channel of the network, of the static faults and the uplink factor.
    e: Vec<f64>,
    /// F, U, R, S factor of each node, of the static faults.
    node: Vec<f64>,
    /// The faults with a window: where each is, its factor and its window in virtual ns,
    /// `[from, until)`.
    timed: Vec<(Place, f64, u64, u64)>,
    /// The switch pairs, with or without a window (`[0, u64::MAX)`): they apply to the
    /// messages between their two switches only.
    pairs: Vec<(Place, f64, u64, u64)>,
    /// The network, to find where a channel is.
    net: Option<Net>,
    /// Largest factor of a channel and of a node with every fault in effect (1 when none).
    max_e: f64,
    max_node: f64,
}

impl FaultTable {
    /// The table of `cfg`'s faults (which [`SimConfig::validate`] has checked).
    pub(crate) fn new(cfg: &SimConfig) -> Self {
        let (e, node) = products(cfg, cfg.faults.iter().filter(|f| !f.timed()));
        let net = Net::of(cfg);
        let placed = |f: &Fault| {
            let (a, b) = f.window_ns();
            Some((f.place(&net)?, f.factor(), a, b))
        };
        let is_pair = |f: &&Fault| matches!(f, Fault::SlowSwitchPair { .. });
        let timed: Vec<(Place, f64, u64, u64)> = cfg
            .faults
            .iter()
            .filter(|f| f.timed() && !is_pair(f))
            .filter_map(placed)
            .collect();
        let pairs: Vec<(Place, f64, u64, u64)> = cfg
            .faults
            .iter()
            .filter(is_pair)
            .filter_map(placed)
            .collect();
        let (all_e, all_node) = if timed.is_empty() {
            (e.clone(), node.clone())
        } else {
            products(cfg, cfg.faults.iter())
        };
        let max = |v: &[f64]| v.iter().copied().fold(1.0, f64::max);
        FaultTable {
            max_e: max(&all_e) * pair_product(cfg),
            max_node: max(&all_node),
            e,
            node,
            net: (!timed.is_empty() || !pairs.is_empty()).then_some(net),
            timed,
            pairs,
        }
    }

    /// E of `base_ns` over channel `c` for a hop of a message from host `from` to host `to`
    /// starting at `now`, scaled: [`FaultTable::channel_ns`] and the switch pairs the message
    /// runs between.
    #[inline]
    pub(crate) fn hop_ns(&self, now: u64, c: u32, from: u32, to: u32, base_ns: u64) -> u64 {
        let mut f = self.channel_factor(now, c);
        if let (false, Some(net)) = (self.pairs.is_empty(), &self.net) {
            for &(place, factor, a, b) in &self.pairs {
                if (a..b).contains(&now) && place.on_route(net, c, from, to) {
                    f *= factor;
                }
            }
        }
        scaled_ns(base_ns, f)
    }

    /// E of `base_ns` over channel `c` for a hop starting at `now`, scaled (the kernel's
    /// [`FaultTable::hop_ns`] without a message).
    #[cfg(test)]
    pub(crate) fn channel_ns(&self, now: u64, c: u32, base_ns: u64) -> u64 {
        scaled_ns(base_ns, self.channel_factor(now, c))
    }

    /// The factor of E over channel `c` for a hop starting at `now`.
    #[inline]
    fn channel_factor(&self, now: u64, c: u32) -> f64 {
        let mut f = self.e.get(c as usize).copied().unwrap_or(1.0);
        if let Some(net) = &self.net {
            for &(place, factor, from, until) in &self.timed {
                if (from..until).contains(&now) && place.on_channel(net, c) {
                    f *= factor;
                }
            }
        }
        f
    }

    /// F, U, R or S of `base_ns` on `node` for a step starting at `now`, scaled.
    #[inline]
    pub(crate) fn node_ns(&self, now: u64, node: u32, base_ns: u64) -> u64 {
        let mut f = self.node.get(node as usize).copied().unwrap_or(1.0);
        for &(place, factor, from, until) in &self.timed {
            if (from..until).contains(&now) && place == Place::Node(node) {
                f *= factor;
            }
        }
        scaled_ns(base_ns, f)
    }

    /// As [`Times::check_size`], on the slowest channel and node: `Ok` when every scaled
    /// per-message time of an `n`-byte message is at most 1e15 ns.
    pub(crate) fn check_size(&self, t: &Times, n: u64) -> Result<()> {
        if self.max_e == 1.0 && self.max_node == 1.0 {
            return Ok(());
        }
        for (key, l, f) in [
            ("F", &t.f, self.max_node),
            ("S", &t.s, self.max_node),
            ("R", &t.r, self.max_node),
            ("U", &t.u, self.max_node),
            ("E", &t.e, self.max_e),
        ] {
            let ns = scaled_ns(l.ns(n), f);
            if ns > MAX_COST_NS {
                return Err(Error::Config(format!(
                    "sim config: {key} of a {n}-byte message on the slowest part of the \
                     machine (x{f} by its faults) is {ns} ns, over the {MAX_COST_NS} ns \
                     (1e12 us) one step may take; lower the factor, the time or the size"
                )));
            }
        }
        Ok(())
    }
}

fn default_compute() -> f64 {
    1.0
}
fn default_spin_limit() -> u64 {
    1_000_000
}
fn default_stack_kib() -> u64 {
    1024
}
fn default_poll() -> u64 {
    100
}
fn default_clock_read() -> u64 {
    50
}
fn default_name() -> String {
    "custom".into()
}
fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Everything the simulator needs to know about the machine it simulates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Name of the machine (a preset's name, or the file's `name`).
    #[serde(default = "default_name")]
    pub name: String,
    /// Hypercube dimension d: 2^d nodes (0..=16).
    pub dimensions: u32,
    /// Nodes that run the program (ranks `0..ranks`); the others only forward. Default: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<u32>,
    /// Clock granularity: `now_ns()` returns `floor(t / tick_ns) * tick_ns`.
    pub tick_ns: u64,
    /// User CPU time one clock read costs (at least 1).
    #[serde(default = "default_clock_read")]
    pub clock_read_ns: u64,
    /// User CPU time one `test()` costs (at least 1, so polling loops advance virtual time).
    #[serde(default = "default_poll")]
    pub poll_ns: u64,
    /// Virtual CPU time of one iteration of the integer background computation Q
    /// (`compute(Work::int(iters))`, seed 001 §3.1).
    #[serde(default = "default_compute")]
    pub compute_ns_per_iter: f64,
    /// Virtual CPU time of one iteration of the floating-point Q (`compute(Work::float(..))`).
    /// `None`: the same as `compute_ns_per_iter` (seed 001 found no significant difference,
    /// Tables 1 and 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_float_ns_per_iter: Option<f64>,
    /// The six per-message times of seed 001 §2.
    pub times: Times,
    /// Matching cost per queue entry inspected, ns (Underwood & Brightwell §5: about 490 ns on
    /// Quadrics Elan3, whose NIC walks the posted-receive queue). Each search of a node's
    /// posted-receive queue (when a message is delivered) or unexpected-message queue (when a
    /// receive is posted) costs `round(entries * match_ns_per_entry)` ns of that node's CPU as
    /// handler time; the entries are position + 1 on a hit and the whole queue on a miss.
    /// 0 (the default): matching is free.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub match_ns_per_entry: f64,
    /// Bytes of system buffer per node for messages delivered and not yet received by the
    /// program. `None`: unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_buffer_bytes: Option<u64>,
    /// Seed of the random number generator (used by `jitter_ns`).
    #[serde(default)]
    pub seed: u64,
    /// Each hop takes `E(n)` plus a uniformly drawn `0..=jitter_ns` (0: exact, the default).
    #[serde(default)]
    pub jitter_ns: u64,
    /// Most bytes of a message the simulator carries (None, the default: all). A longer
    /// message carries its first `carry_bytes` and its length; its receive buffer keeps what
    /// it held beyond them. The virtual times are the same either way; what changes is that
    /// the host no longer copies every large message twice (a 256-node all-pairs run at
    /// 1 MiB would move terabytes). For runs whose programs time large messages but read only
    /// small ones (the control plane, handshakes): `carry_bytes = 4096`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carry_bytes: Option<u64>,
    /// Polls (`test` with nothing pending anywhere else in the machine) after which a run
    /// that cannot progress is reported as a livelock.
    #[serde(default = "default_spin_limit")]
    pub spin_limit: u64,
    /// Stack of each node's coroutine, KiB.
    #[serde(default = "default_stack_kib")]
    pub stack_kib: u64,
    /// Injected faults (`[[faults]]` in TOML): links, nodes or whole dimensions slower than the
    /// rest of the machine by a factor (docs/simulator.md §6a). Empty (the default): none, and
    /// the key is not written out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
    /// Nodes whose program stops answering (`[[silent]]` in TOML): a hung process, its node's
    /// network still forwarding (docs/simulator.md §6b). Empty (the default): none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silent: Vec<Silent>,
    /// Virtual µs a wait may block before it fails with a timeout naming what it waited for.
    /// Absent: no bound (a run in which every node is blocked is a deadlock, reported at
    /// once), unless a node is silent, then [`DEFAULT_SILENT_WAIT_US`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_timeout_us: Option<f64>,
    /// The network: absent (the default), the hypercube of `dimensions`; `[tree]`, its
    /// 2^dimensions nodes as hosts under a tree of switches (docs/simulator.md §6c).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<SwitchTree>,
}

/// A node whose program stops answering at virtual time `from_us`: from its first step at or
/// after it, the program makes no further step (no send, receive, clock read or collective)
/// and never returns. Messages sent to it are still delivered to its queues, and the node
/// still forwards other nodes' messages: a hung process, not a dead router.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Silent {
    /// The node, a rank of the run.
    pub node: u32,
    /// Virtual time, µs, from which it is silent (0: from its first step).
    #[serde(default)]
    pub from_us: f64,
}

impl Silent {
    /// When the node falls silent, virtual ns.
    pub fn from_ns(&self) -> u64 {
        window_ns(self.from_us)
    }
}

/// The bound on a wait in a machine with silent nodes and no `wait_timeout_us` of its own:
/// one virtual second, thousands of times what one message takes on any preset.
pub const DEFAULT_SILENT_WAIT_US: f64 = 1e6;

/// The latest virtual time a run may reach, ns (2^62, about 146 years): a reading above it
/// could wrap when core takes differences of readings as signed numbers, so a run that would
/// pass it ends with an error naming the machine instead.
pub const CLOCK_LIMIT_NS: u64 = 1 << 62;

/// Most nanoseconds one iteration of Q may cost: a millisecond, a million times a real CPU's.
/// A costlier one makes seed 001's interference simulate every stream message that arrives
/// while node 0 computes: hours of simulation for seconds of result.
pub const MAX_COMPUTE_NS_PER_ITER: f64 = 1e6;

/// Most nanoseconds one clock read, poll or hop jitter may cost: 1e12 µs, the bound on a
/// time's coefficients.
const MAX_COST_NS: u64 = 1_000_000_000_000_000;

/// Most nanoseconds `match_ns_per_entry` may be: 1 ms per queue entry, 2000 times Elan3's
/// 0.49 µs, so that a search of a billion entries still costs at most 1e15 ns.
pub const MAX_MATCH_NS_PER_ENTRY: f64 = 1e6;

/// Names of the built-in presets.
const PRESETS: &[&str] = &["ncube7", "generic"];

/// NCUBE clock tick: `USPT = 1024.0 / MHZ` µs with `MHZ = 7.0` (seed 001 Appendix B), i.e.
/// 146.2857 µs, rounded to whole nanoseconds.
pub const NCUBE_TICK_NS: u64 = 146_286;

impl SimConfig {
    /// A built-in preset: `ncube7` (64-node NCUBE/seven with the times of seed 001 Table 3)
    /// or `generic` (a 16-node machine with sub-microsecond software costs and a protocol
    /// switch at 16 KiB).
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "ncube7" => Ok(SimConfig {
                name: "ncube7".into(),
                dimensions: 6,
                ranks: None,
                tick_ns: NCUBE_TICK_NS,
                clock_read_ns: 20_000,
                poll_ns: 20_000,
                compute_ns_per_iter: 1000.0,
                compute_float_ns_per_iter: None,
                times: Times::ncube7_table3(),
                match_ns_per_entry: 0.0,
                recv_buffer_bytes: None,
                seed: 0,
                jitter_ns: 0,
                carry_bytes: None,
                spin_limit: default_spin_limit(),
                stack_kib: default_stack_kib(),
                faults: Vec::new(),
                silent: Vec::new(),
                wait_timeout_us: None,
                tree: None,
            }),
            "generic" => {
                let switch = 16 * 1024;
                let two = |a: f64, b: f64, c: f64, d: f64| {
                    Linear::new(vec![
                        Piece {
                            from: 0,
                            base_us: a,
                            per_byte_us: b,
                        },
                        Piece {
                            from: switch,
                            base_us: c,
                            per_byte_us: d,
                        },
                    ])
                };
                Ok(SimConfig {
                    name: "generic".into(),
                    dimensions: 4,
                    ranks: None,
                    tick_ns: 1,
                    clock_read_ns: 20,
                    poll_ns: 50,
                    compute_ns_per_iter: 1.0,
                    compute_float_ns_per_iter: None,
                    times: Times {
                        // Eager copies below 16 KiB, zero-copy rendezvous above.
                        f: two(0.3, 0.0001, 0.8, 0.0)?,
                        u: two(0.3, 0.0001, 0.5, 0.0)?,
                        a: Linear::line(0.1, 0.0)?,
                        s: Linear::line(0.2, 0.0)?,
                        r: Linear::line(0.25, 0.0)?,
                        e: two(1.0, 0.0001, 2.5, 0.0001)?,
                    },
                    match_ns_per_entry: 0.0,
                    recv_buffer_bytes: None,
                    seed: 0,
                    jitter_ns: 0,
                    carry_bytes: None,
                    spin_limit: default_spin_limit(),
                    stack_kib: default_stack_kib(),
                    faults: Vec::new(),
                    silent: Vec::new(),
                    wait_timeout_us: None,
                    tree: None,
                })
            }
            other => Err(Error::Config(format!(
                "no simulator preset named `{}` (presets: {})",
                one_line(other),
                PRESETS.join(", ")
            ))),
        }
    }

    /// Names of the built-in presets.
    pub fn preset_names() -> &'static [&'static str] {
        PRESETS
    }

    /// Parse a TOML configuration and validate it. A top-level `preset = "NAME"` starts from
    /// that preset and overrides only the keys the file gives (a time is replaced whole).
    pub fn from_toml_str(s: &str) -> Result<Self> {
        let mut doc: toml::Table = toml::from_str(s)
            .map_err(|e| Error::Config(format!("sim config: {}", toml_error(s, &e))))?;
        // Read apart, entry by entry, so that an error names the entry.
        let faults = faults_from_toml(doc.remove("faults"))?;
        let mut cfg: SimConfig = match doc.remove("preset") {
            None => toml::Value::Table(doc)
                .try_into()
                .map_err(|e| Error::Config(format!("sim config: {}", toml_error(s, &e))))?,
            Some(toml::Value::String(p)) => {
                let base = Self::preset(&p)?;
                let mut merged = toml::Value::try_from(&base)
                    .map_err(|e| Error::Config(format!("sim config preset {p}: {e}")))?;
                merge(&mut merged, toml::Value::Table(doc));
                if let toml::Value::Table(t) = &mut merged {
                    // A file that names a preset and no name of its own keeps the preset's.
                    t.entry("name")
                        .or_insert_with(|| toml::Value::String(p.clone()));
                }
                merged
                    .try_into()
                    .map_err(|e| Error::Config(format!("sim config: {}", toml_error(s, &e))))?
            }
            Some(v) => {
                return Err(Error::Config(format!(
                    "sim config: `preset` must be a string, got {}",
                    one_line(&v.to_string())
                )))
            }
        };
        cfg.faults = faults;
        cfg.validate()?;
        Ok(cfg)
    }

    /// A preset name, or the path of a TOML file.
    pub fn load(name_or_path: &str) -> Result<Self> {
        if PRESETS.contains(&name_or_path) {
            return Self::preset(name_or_path);
        }
        let text = std::fs::read_to_string(name_or_path).map_err(|e| {
            Error::Config(format!(
                "sim config `{name_or_path}` is neither a preset ({}) nor a readable file: {e}",
                PRESETS.join(", ")
            ))
        })?;
        Self::from_toml_str(&text).map_err(|e| e.in_phase(format!("sim config {name_or_path}")))
    }

    /// Virtual CPU time of `work` (rounded to whole nanoseconds).
    pub fn compute_ns(&self, work: commbench_core::transport::work::Work) -> u64 {
        use commbench_core::transport::work::QKind;
        let per = match work.q {
            QKind::Int => self.compute_ns_per_iter,
            QKind::Float => self
                .compute_float_ns_per_iter
                .unwrap_or(self.compute_ns_per_iter),
        };
        (work.iters as f64 * per).round() as u64
    }

    /// Number of nodes, 2^dimensions.
    pub fn nodes(&self) -> u32 {
        1u32 << self.dimensions.min(31)
    }

    /// Number of ranks that run the program.
    pub fn ranks(&self) -> u32 {
        self.ranks.unwrap_or_else(|| self.nodes())
    }

    /// Check every value; each problem is a clear [`Error::Config`].
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.dimensions > 16 {
            return bad(format!("dimensions = {}: at most 16", self.dimensions));
        }
        if let Some(r) = self.ranks {
            if r == 0 || r > self.nodes() {
                return bad(format!(
                    "ranks = {r}: must be 1..={} for {} dimensions",
                    self.nodes(),
                    self.dimensions
                ));
            }
        }
        if self.tick_ns == 0 {
            return bad("tick_ns must be at least 1".into());
        }
        if self.clock_read_ns == 0 {
            return bad("clock_read_ns must be at least 1 (a clock loop must advance time)".into());
        }
        if self.poll_ns == 0 {
            return bad("poll_ns must be at least 1 (a polling loop must advance time)".into());
        }
        // One operation's cost is bounded as a time's coefficients are (1e12 µs), so that the
        // virtual clock, a u64 of nanoseconds, holds thousands of them.
        for (key, v) in [
            ("clock_read_ns", self.clock_read_ns),
            ("poll_ns", self.poll_ns),
            ("jitter_ns", self.jitter_ns),
        ] {
            if v > MAX_COST_NS {
                return bad(format!("{key} = {v}: at most {MAX_COST_NS} (1e12 µs)"));
            }
        }
        let computes = [
            ("compute_ns_per_iter", Some(self.compute_ns_per_iter)),
            ("compute_float_ns_per_iter", self.compute_float_ns_per_iter),
        ];
        for (key, v) in computes {
            let Some(v) = v else { continue };
            if !v.is_finite() || !(0.0..=MAX_COMPUTE_NS_PER_ITER).contains(&v) {
                return bad(format!(
                    "{key} = {v}: must be finite, >= 0 and at most {MAX_COMPUTE_NS_PER_ITER} \
                     (1 ms an iteration)"
                ));
            }
        }
        self.check_match_cost()?;
        if self.recv_buffer_bytes == Some(0) {
            return bad("recv_buffer_bytes must be at least 1 (or absent: unbounded)".into());
        }
        if self.spin_limit == 0 {
            return bad("spin_limit must be at least 1".into());
        }
        if !(64..=1 << 20).contains(&self.stack_kib) {
            return bad(format!(
                "stack_kib = {}: must be 64..=1048576",
                self.stack_kib
            ));
        }
        // Linear values are validated on construction; re-check in case of direct building.
        for (n, l) in [
            ("F", &self.times.f),
            ("S", &self.times.s),
            ("R", &self.times.r),
            ("A", &self.times.a),
            ("U", &self.times.u),
            ("E", &self.times.e),
        ] {
            Linear::new(l.pieces.clone()).map_err(|e| e.in_phase(format!("time {n}")))?;
        }
        if let Some(t) = &self.tree {
            t.check(self.nodes())
                .map_err(|why| Error::Config(format!("sim config: {why}")))?;
        }
        self.check_faults()?;
        self.check_silent()
    }

    /// On a `[tree]` machine, the switches above `node`, top first and dot-separated
    /// (`core.spine1.leaf5`), as Slurm's topology/tree plugin gives a task them; `None` on a
    /// hypercube, or for a node the machine lacks.
    pub fn switch_path(&self, node: u32) -> Option<String> {
        let t = self.tree.as_ref()?;
        (node < self.nodes()).then(|| Layout::new(self.nodes(), t).path(node))
    }

    /// The most hops one message makes: `dimensions` on the cube, up to the root and down
    /// on a tree.
    pub fn max_hops(&self) -> u32 {
        Net::of(self).max_hops()
    }

    /// Every silent node is a rank of the run, named once, from a time within the clock; the
    /// wait bound is positive and within the clock.
    fn check_silent(&self) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for (i, q) in self.silent.iter().enumerate() {
            let bad = |why: String| Err(Error::Config(format!("sim config: silent[{i}]: {why}")));
            if q.node >= self.ranks() {
                return bad(format!(
                    "node {} is not a rank of the run (ranks 0..={})",
                    q.node,
                    self.ranks() - 1
                ));
            }
            if !seen.insert(q.node) {
                return bad(format!("node {} is named silent twice", q.node));
            }
            if !q.from_us.is_finite() || !(0.0..=MAX_FAULT_TIME_US).contains(&q.from_us) {
                return bad(format!(
                    "from_us = {}: a virtual time must be finite, >= 0 and at most \
                     {MAX_FAULT_TIME_US:e} µs (the clock's limit)",
                    q.from_us
                ));
            }
        }
        if let Some(t) = self.wait_timeout_us {
            if !t.is_finite() || !(1e-3..=MAX_FAULT_TIME_US).contains(&t) {
                return Err(Error::Config(format!(
                    "sim config: wait_timeout_us = {t}: must be finite, at least 0.001 (1 ns) \
                     and at most {MAX_FAULT_TIME_US:e} µs"
                )));
            }
        }
        Ok(())
    }

    /// The bound on one wait, virtual ns: `wait_timeout_us`, else one virtual second when a
    /// node is silent, else none.
    pub fn wait_timeout_ns(&self) -> Option<u64> {
        match (self.wait_timeout_us, self.silent.is_empty()) {
            (Some(t), _) => Some(window_ns(t).max(1)),
            (None, false) => Some(window_ns(DEFAULT_SILENT_WAIT_US)),
            (None, true) => None,
        }
    }

    /// When `node` falls silent, virtual ns (`None`: never).
    pub fn silent_from_ns(&self, node: u32) -> Option<u64> {
        self.silent
            .iter()
            .find(|q| q.node == node)
            .map(Silent::from_ns)
    }

    /// Every fault fits the cube and has a factor in `1..=1e6`; else an [`Error::Config`]
    /// naming the entry (`faults[2] (slow_link 3 <-> 5 x4)`) and the reason.
    fn check_faults(&self) -> Result<()> {
        for (i, f) in self.faults.iter().enumerate() {
            f.check(self)
                .map_err(|why| Error::Config(format!("sim config: faults[{i}] ({f}): {why}")))?;
        }
        Ok(())
    }

    /// The injected faults, in the order given.
    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// The product of the factors that scale E of the channel `from -> to`: the `slow_link`
    /// faults between these two nodes (either way round) and the `slow_dimension` faults of
    /// the dimension they differ in, every one whatever its window (the machine with all its
    /// faults in effect; [`link_factor_at`](Self::link_factor_at) for one time). 1 when none
    /// does, or when the nodes are not neighbours.
    pub fn link_factor(&self, from: u32, to: u32) -> f64 {
        self.link_factor_where(from, to, |_| true)
    }

    /// As [`link_factor`](Self::link_factor), of the faults in effect at virtual time
    /// `t_ns`.
    pub fn link_factor_at(&self, from: u32, to: u32, t_ns: u64) -> f64 {
        self.link_factor_where(from, to, |f| f.active_at(t_ns))
    }

    fn link_factor_where(&self, from: u32, to: u32, on: impl Fn(&Fault) -> bool) -> f64 {
        if self.tree.is_some() || distance(from, to) != 1 {
            return 1.0;
        }
        let c = from * self.dimensions + (from ^ to).trailing_zeros();
        self.channel_factor_where(&Net::of(self), c, on)
    }

    /// The factor of E on channel `c` of `net`: its base factor (a tree's uplink factor)
    /// times the factors of the faults on it that `on` keeps, multiplied in the order the
    /// kernel's table multiplies them.
    fn channel_factor_where(&self, net: &Net, c: u32, on: impl Fn(&Fault) -> bool) -> f64 {
        self.faults
            .iter()
            .filter(|f| on(f) && f.on_channel(net, c))
            .fold(net.base_factor(c), |x, f| x * f.factor())
    }

    /// The product of the factors of the `slow_node` faults of `node`, which scale its F, U,
    /// R and S (1 when none), every one whatever its window
    /// ([`node_factor_at`](Self::node_factor_at) for one time).
    pub fn node_factor(&self, node: u32) -> f64 {
        self.node_factor_where(node, |_| true)
    }

    /// As [`node_factor`](Self::node_factor), of the faults in effect at virtual time `t_ns`.
    pub fn node_factor_at(&self, node: u32, t_ns: u64) -> f64 {
        self.node_factor_where(node, |f| f.active_at(t_ns))
    }

    fn node_factor_where(&self, node: u32, on: impl Fn(&Fault) -> bool) -> f64 {
        self.faults
            .iter()
            .filter(|f| on(f) && f.on_node(node))
            .map(Fault::factor)
            .product()
    }

    /// `match_ns_per_entry` is finite, >= 0 and at most [`MAX_MATCH_NS_PER_ENTRY`].
    fn check_match_cost(&self) -> Result<()> {
        let m = self.match_ns_per_entry;
        if !m.is_finite() || !(0.0..=MAX_MATCH_NS_PER_ENTRY).contains(&m) {
            return Err(Error::Config(format!(
                "match_ns_per_entry = {m}: must be finite, >= 0 and at most \
                 {MAX_MATCH_NS_PER_ENTRY} ns (1 ms per queue entry)"
            )));
        }
        Ok(())
    }

    /// The matching cost of a search that inspected `entries` queue entries:
    /// `round(entries * match_ns_per_entry)` ns (0 when the key is 0).
    #[inline]
    pub fn match_ns(&self, entries: u64) -> u64 {
        if self.match_ns_per_entry == 0.0 || entries == 0 {
            return 0;
        }
        // `as` saturates: a cost beyond u64 nanoseconds is u64::MAX.
        (entries as f64 * self.match_ns_per_entry).round() as u64
    }

    /// Closed-form one-way ping-pong time in ns for an `n`-byte message between nodes at
    /// distance `d`, on an otherwise idle machine with the receive posted in advance and no
    /// jitter: `F(n) + (d-1)·E(n) + max(E(n), R(n)) + U(n)` for `d >= 1` (which is
    /// `F + d·E + U` whenever `R <= E`, as on the NCUBE), and `F(n) + U(n)` for `d = 0`.
    /// See docs/simulator.md for the derivation. A time beyond `u64` nanoseconds (sections of
    /// up to 1e12 µs per byte allow it) is `u64::MAX`.
    ///
    /// This ignores [`faults`](Self::faults); see
    /// [`pingpong_one_way_between_ns`](Self::pingpong_one_way_between_ns) for a machine with
    /// faults.
    pub fn pingpong_one_way_ns(&self, n: u64, d: u32) -> u64 {
        let t = &self.times;
        let (f, u, e, r) = (t.f.ns(n), t.u.ns(n), t.e.ns(n), t.r.ns(n));
        if d == 0 {
            return f.saturating_add(u);
        }
        f.saturating_add((d as u64 - 1).saturating_mul(e))
            .saturating_add(e.max(r))
            .saturating_add(u)
    }

    /// Closed-form one-way ping-pong time in ns for an `n`-byte message from node `from` to
    /// node `to`, with the machine's faults, on an otherwise idle machine with the receive
    /// posted in advance and no jitter. Over the e-cube route `from = v_0, v_1, .., v_d = to`
    /// with `E_i` the scaled E of hop `v_{i-1} -> v_i`:
    /// `F_from + E_1 + .. + E_{d-1} + max(E_d, R_to) + U_to` for `d >= 1`, `F_from + U_from`
    /// for `d = 0`, where `X_v` is X scaled by `v`'s `slow_node` factor (each term rounded
    /// with [`scaled_ns`]). Without faults it is [`pingpong_one_way_ns`](Self::pingpong_one_way_ns).
    /// A node that only forwards adds nothing: its (scaled) R and S are off the path.
    /// On a `[tree]` machine the route is up to the lowest switch above both and down, its
    /// `E_i` scaled by the uplink factor between two switches, by the `slow_switch` and
    /// `slow_uplink` faults on the hop, and by the `slow_switch_pair` faults the message runs
    /// between when the hop is above their switches; the formula is the same. Saturates at
    /// `u64::MAX`.
    pub fn pingpong_one_way_between_ns(&self, n: u64, from: u32, to: u32) -> u64 {
        self.one_way_where(n, from, to, |_| true)
    }

    /// As [`pingpong_one_way_between_ns`](Self::pingpong_one_way_between_ns) on the machine
    /// as it is at virtual time `t_ns`: with the faults whose window holds `t_ns` (a message
    /// whose steps all start in the same windows).
    pub fn pingpong_one_way_between_at_ns(&self, n: u64, from: u32, to: u32, t_ns: u64) -> u64 {
        self.one_way_where(n, from, to, |f| f.active_at(t_ns))
    }

    fn one_way_where(&self, n: u64, from: u32, to: u32, on: impl Fn(&Fault) -> bool) -> u64 {
        let t = &self.times;
        let node = |v| self.node_factor_where(v, &on);
        let f = scaled_ns(t.f.ns(n), node(from));
        let u = scaled_ns(t.u.ns(n), node(to));
        let net = Net::of(self);
        let path = net.route(from, to);
        let mut total = f;
        for (i, &c) in path.iter().enumerate() {
            let pairs: f64 = self
                .faults
                .iter()
                .filter(|f| matches!(f, Fault::SlowSwitchPair { .. }))
                .filter(|f| on(f) && f.on_route(&net, c, from, to))
                .map(Fault::factor)
                .product();
            let e = scaled_ns(t.e.ns(n), self.channel_factor_where(&net, c, &on) * pairs);
            let last = i + 1 == path.len();
            let step = if last {
                e.max(scaled_ns(t.r.ns(n), node(to)))
            } else {
                e
            };
            total = total.saturating_add(step);
        }
        total.saturating_add(u)
    }
}

/// The `faults` array of a TOML configuration (absent: none).
fn faults_from_toml(v: Option<toml::Value>) -> Result<Vec<Fault>> {
    match v {
        None => Ok(Vec::new()),
        Some(toml::Value::Array(entries)) => entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| fault_from_toml(i, e))
            .collect(),
        Some(other) => Err(Error::Config(format!(
            "sim config: `faults` must be an array of tables (`[[faults]]` entries), got {}",
            one_line(&other.to_string())
        ))),
    }
}

/// Entry `i` of the `faults` array: its `kind` first (a clear error listing the kinds), then
/// the fields of that kind (unknown or missing ones are errors).
fn fault_from_toml(i: usize, v: toml::Value) -> Result<Fault> {
    let bad = |why: String| Error::Config(format!("sim config: faults[{i}]: {why}"));
    let kinds = FAULT_KINDS.join(", ");
    let toml::Value::Table(t) = &v else {
        return Err(bad(format!(
            "must be a table such as {{ kind = \"slow_link\", from = 0, to = 1, factor = 2.0 }}, \
             got {}",
            one_line(&v.to_string())
        )));
    };
    let kind = match t.get("kind") {
        None => return Err(bad(format!("no `kind` (kinds: {kinds})"))),
        Some(toml::Value::String(k)) if FAULT_KINDS.contains(&k.as_str()) => k.clone(),
        Some(k) => {
            return Err(bad(format!(
                "unknown kind {} (kinds: {kinds})",
                one_line(&k.to_string())
            )))
        }
    };
    v.try_into::<Fault>()
        .map_err(|e| bad(format!("{kind}: {}", one_line(e.message()))))
}

/// `s` on one line, for an error message: its lines joined by `; `, other control characters
/// escaped (`\t`).
fn one_line(s: &str) -> String {
    let joined = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    commbench_core::transport::error::escape_controls(&joined)
}

/// A TOML error on one line: where it is in `text` (line and column) when known, then what
/// (the toml crate's own text draws the line with a caret under it, over several lines).
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let at = e.span().and_then(|r| text.get(..r.start)).map(|before| {
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        format!("line {line}, column {column}: ")
    });
    format!("{}{}", at.unwrap_or_default(), one_line(e.message()))
}

/// Merge `over` into `base`: tables recursively, everything else replaced. The six times are
/// replaced whole (a time given as one line replaces a list of sections).
fn merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                let is_time = matches!(k.as_str(), "F" | "S" | "R" | "A" | "U" | "E");
                match b.get_mut(&k) {
                    Some(slot) if !is_time => merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Hops between nodes `a` and `b` of a hypercube: the Hamming distance of their numbers.
pub fn distance(a: u32, b: u32) -> u32 {
    (a ^ b).count_ones()
}

/// The e-cube route of a message from node `from` to node `to`: the nodes it visits, both ends
/// included, correcting the lowest differing dimension first (`[from]` when they are equal).
pub fn route(from: u32, to: u32) -> Vec<u32> {
    let mut path = Vec::with_capacity(distance(from, to) as usize + 1);
    let mut at = from;
    path.push(at);
    while at != to {
        at ^= 1 << (at ^ to).trailing_zeros();
        path.push(at);
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table3_in_ns() {
        let t = Times::ncube7_table3();
        assert_eq!(t.e.ns(0), 220_000);
        assert_eq!(t.e.ns(2000), 220_000 + 2_570_000);
        assert_eq!(t.r.ns(1000), 180_000 + 40_000);
        assert_eq!(t.s.ns(16), 150_160);
        assert_eq!(t.f.ns(500), 460_000);
        assert_eq!(t.u.ns(1), 130_610);
        assert_eq!(t.a.ns(123_456), 120_000);
    }

    #[test]
    fn pieces_select_by_size_and_round() {
        let l = Linear::new(vec![
            Piece {
                from: 0,
                base_us: 1.0,
                per_byte_us: 0.0005,
            },
            Piece {
                from: 100,
                base_us: 5.0,
                per_byte_us: 0.0,
            },
        ])
        .unwrap();
        assert_eq!(l.ns(0), 1000);
        assert_eq!(l.ns(1), 1001); // 1000.5 rounds half up
        assert_eq!(l.ns(99), 1050); // 1049.5 -> 1050
        assert_eq!(l.ns(100), 5000);
        assert_eq!(l.ns(1 << 30), 5000);
    }

    #[test]
    fn bad_pieces_rejected() {
        assert!(Linear::new(vec![]).is_err());
        assert!(Linear::line(-1.0, 0.0).is_err());
        assert!(Linear::line(f64::NAN, 0.0).is_err());
        let p = |from| Piece {
            from,
            base_us: 1.0,
            per_byte_us: 0.0,
        };
        assert!(Linear::new(vec![p(5)]).is_err());
        assert!(Linear::new(vec![p(0), p(10), p(10)]).is_err());
    }

    #[test]
    fn toml_full_and_shorthand() {
        let s = r#"
            name = "mine"
            dimensions = 3
            tick_ns = 100
            recv_buffer_bytes = 4096
            [times]
            F = { base_us = 1, per_byte_us = 0.5 }
            S = { base_us = 2 }
            R = { base_us = 3 }
            A = { base_us = 4 }
            U = { base_us = 5 }
            E = [{ from = 0, base_us = 220.0, per_byte_us = 1.285 }, { from = 4096, base_us = 300, per_byte_us = 1.0 }]
        "#;
        let c = SimConfig::from_toml_str(s).unwrap();
        assert_eq!(c.nodes(), 8);
        assert_eq!(c.times.f.ns(2), 2000);
        assert_eq!(c.times.e.ns(4096), 300_000 + 4_096_000);
        assert_eq!(c.recv_buffer_bytes, Some(4096));
        assert_eq!(c.clock_read_ns, default_clock_read());
        // Round trip through TOML.
        let back = toml::to_string(&c).unwrap();
        assert_eq!(SimConfig::from_toml_str(&back).unwrap(), c);
    }

    #[test]
    fn toml_preset_override() {
        let c = SimConfig::from_toml_str(
            "preset = \"ncube7\"\nrecv_buffer_bytes = 8192\n[times]\nA = { base_us = 1 }\n",
        )
        .unwrap();
        assert_eq!(c.name, "ncube7");
        assert_eq!(c.dimensions, 6);
        assert_eq!(c.recv_buffer_bytes, Some(8192));
        assert_eq!(c.times.a.ns(0), 1000);
        assert_eq!(c.times.e.ns(0), 220_000);
    }

    #[test]
    fn toml_errors_are_config_errors() {
        for s in [
            "dimensions = 3",
            "preset = \"nope\"",
            "preset = \"ncube7\"\ndimensions = 40",
            "preset = \"ncube7\"\ntick_ns = 0",
            "preset = \"ncube7\"\nbogus = 1",
            "preset = \"ncube7\"\n[times]\nE = { base_us = -3 }",
            "preset = \"ncube7\"\n[times]\nE = [{ from = 5, base_us = 3 }]",
            "preset = \"generic\"\nranks = 17",
        ] {
            let e = SimConfig::from_toml_str(s).unwrap_err();
            assert!(matches!(e.root(), Error::Config(_)), "{s}: {e}");
        }
    }

    #[test]
    fn match_cost_key_is_read_bounded_and_rounded() {
        let base = "preset = \"generic\"\n";
        let c = SimConfig::from_toml_str(base).unwrap();
        assert_eq!(c.match_ns_per_entry, 0.0);
        assert_eq!(c.match_ns(1_000_000), 0);
        let c = SimConfig::from_toml_str(&format!("{base}match_ns_per_entry = 137.5\n")).unwrap();
        assert_eq!(c.match_ns(0), 0);
        assert_eq!(c.match_ns(1), 138); // 137.5 rounds half away from zero
        assert_eq!(c.match_ns(2), 275);
        assert_eq!(c.match_ns(1001), 137_638);
        let back = toml::to_string(&c).unwrap();
        assert!(back.contains("match_ns_per_entry = 137.5"), "{back}");
        assert_eq!(SimConfig::from_toml_str(&back).unwrap(), c);
        let edge = SimConfig::from_toml_str(&format!("{base}match_ns_per_entry = 1e6\n")).unwrap();
        assert_eq!(edge.match_ns(u64::MAX), u64::MAX, "saturates");
        for v in ["-1.0", "-1e-9", "nan", "inf", "-inf", "1000000.5", "1e300"] {
            let e =
                SimConfig::from_toml_str(&format!("{base}match_ns_per_entry = {v}\n")).unwrap_err();
            assert!(matches!(e.root(), Error::Config(_)), "{v}: {e}");
            assert!(e.to_string().contains("match_ns_per_entry"), "{v}: {e}");
        }
        let e = SimConfig::from_toml_str(&format!("{base}match_ns_per_entry = \"fast\"\n"))
            .unwrap_err();
        assert!(matches!(e.root(), Error::Config(_)), "{e}");
    }

    #[test]
    fn presets_validate() {
        for p in SimConfig::preset_names() {
            SimConfig::preset(p).unwrap().validate().unwrap();
        }
        assert!(SimConfig::load("no-such-preset-or-file").is_err());
    }

    /// A 3-cube with round-number times and the given `[[faults]]` entries (TOML text).
    fn cube3(faults: &str) -> Result<SimConfig> {
        SimConfig::from_toml_str(&format!(
            "dimensions = 3\ntick_ns = 1\n{faults}\n[times]\nF = {{ base_us = 10 }}\n\
             S = {{ base_us = 2 }}\nR = {{ base_us = 3 }}\nA = {{ base_us = 1 }}\n\
             U = {{ base_us = 8 }}\nE = {{ base_us = 20, per_byte_us = 0.01 }}\n"
        ))
    }

    fn config_error(faults: &str) -> String {
        let e = cube3(faults).unwrap_err();
        assert!(matches!(e.root(), Error::Config(_)), "{faults}: {e}");
        e.to_string()
    }

    #[test]
    fn faults_parse_describe_and_round_trip() {
        let c = cube3(
            "[[faults]]\nkind = \"slow_link\"\nfrom = 3\nto = 7\nfactor = 4\n\
             [[faults]]\nkind = \"slow_node\"\nnode = 5\nfactor = 3.0\n\
             [[faults]]\nkind = \"slow_dimension\"\ndimension = 2\nfactor = 2.5\n",
        )
        .unwrap();
        assert_eq!(
            c.faults(),
            &[
                Fault::SlowLink {
                    from: 3,
                    to: 7,
                    factor: 4.0,
                    from_us: None,
                    until_us: None
                },
                Fault::SlowNode {
                    node: 5,
                    factor: 3.0,
                    from_us: None,
                    until_us: None
                },
                Fault::SlowDimension {
                    dimension: 2,
                    factor: 2.5,
                    from_us: None,
                    until_us: None
                },
            ]
        );
        let shown: Vec<String> = c.faults().iter().map(|f| f.to_string()).collect();
        assert_eq!(
            shown,
            [
                "slow_link 3 <-> 7 x4",
                "slow_node 5 x3",
                "slow_dimension 2 x2.5"
            ]
        );
        // Link 3 <-> 7 is in dimension 2: both faults apply to it, either way round.
        assert_eq!(c.link_factor(3, 7), 10.0);
        assert_eq!(c.link_factor(7, 3), 10.0);
        assert_eq!(c.link_factor(1, 5), 2.5);
        assert_eq!(c.link_factor(1, 3), 1.0);
        assert_eq!(c.link_factor(0, 3), 1.0, "not neighbours");
        assert_eq!(c.node_factor(5), 3.0);
        assert_eq!(c.node_factor(4), 1.0);
        let back = toml::to_string(&c).unwrap();
        assert!(back.contains("[[faults]]"), "{back}");
        assert_eq!(SimConfig::from_toml_str(&back).unwrap(), c);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["faults"][1]["kind"], "slow_node");
        assert_eq!(serde_json::from_value::<SimConfig>(json).unwrap(), c);
    }

    #[test]
    fn no_faults_reads_and_writes_as_before() {
        let plain = cube3("").unwrap();
        assert!(plain.faults().is_empty());
        assert_eq!(cube3("faults = []\n").unwrap(), plain);
        assert!(!toml::to_string(&plain).unwrap().contains("faults"));
        let json = serde_json::to_value(&plain).unwrap();
        assert!(json.get("faults").is_none(), "{json}");
        for p in SimConfig::preset_names() {
            let c = SimConfig::preset(p).unwrap();
            assert!(!toml::to_string(&c).unwrap().contains("faults"));
        }
    }

    #[test]
    fn faults_merge_with_a_preset_and_multiply() {
        let c = SimConfig::from_toml_str(
            "preset = \"ncube7\"\nrecv_buffer_bytes = 8192\n\
             [[faults]]\nkind = \"slow_link\"\nfrom = 40\nto = 41\nfactor = 2\n\
             [[faults]]\nkind = \"slow_link\"\nfrom = 41\nto = 40\nfactor = 1.5\n\
             [[faults]]\nkind = \"slow_node\"\nnode = 63\nfactor = 2\n\
             [[faults]]\nkind = \"slow_node\"\nnode = 63\nfactor = 2\n",
        )
        .unwrap();
        assert_eq!(c.name, "ncube7");
        assert_eq!(c.dimensions, 6);
        assert_eq!(c.recv_buffer_bytes, Some(8192));
        assert_eq!(c.faults().len(), 4);
        assert_eq!(c.link_factor(40, 41), 3.0);
        assert_eq!(c.node_factor(63), 4.0);
        let t = FaultTable::new(&c);
        assert_eq!(t.channel_ns(0, 40 * 6, 1000), 3000);
        assert_eq!(t.channel_ns(0, 41 * 6, 1000), 3000);
        assert_eq!(t.channel_ns(0, 41 * 6 + 1, 1000), 1000);
        assert_eq!(t.node_ns(0, 63, 1001), 4004);
        assert_eq!(t.node_ns(0, 62, 1001), 1001);
    }

    #[test]
    fn scaled_times_round_to_the_nearest_ns() {
        assert_eq!(scaled_ns(1000, 1.0), 1000);
        assert_eq!(scaled_ns(u64::MAX, 1.0), u64::MAX);
        assert_eq!(scaled_ns(3, 1.5), 5); // 4.5 rounds half away from zero
        assert_eq!(scaled_ns(1001, 2.5), 2503); // 2502.5
        assert_eq!(scaled_ns(7, 1.1), 8); // 7.7
        assert_eq!(scaled_ns(u64::MAX / 2, 1e6), u64::MAX, "saturates");
        // A slow_dimension table: every channel of that dimension, and no other.
        let c =
            cube3("[[faults]]\nkind = \"slow_dimension\"\ndimension = 1\nfactor = 1.5\n").unwrap();
        let t = FaultTable::new(&c);
        for ch in 0..8 * 3u32 {
            let want = if ch % 3 == 1 { 1500 } else { 1000 };
            assert_eq!(t.channel_ns(0, ch, 1000), want, "channel {ch}");
        }
        let none = FaultTable::new(&cube3("").unwrap());
        assert_eq!(none.channel_ns(0, 5, 1234), 1234);
        assert_eq!(none.node_ns(0, 5, 1234), 1234);
    }

    #[test]
    fn bad_faults_are_config_errors_naming_the_entry() {
        let link = |from: &str, to: &str, factor: &str| {
            format!(
                "[[faults]]\nkind = \"slow_node\"\nnode = 0\nfactor = 2\n\
                 [[faults]]\nkind = \"slow_link\"\nfrom = {from}\nto = {to}\nfactor = {factor}\n"
            )
        };
        assert_eq!(
            config_error(&link("3", "5", "4")),
            "bad configuration: sim config: faults[1] (slow_link 3 <-> 5 x4): nodes 3 and 5 are \
             not neighbours in a 3-cube (they differ in 2 bits); a link joins nodes that differ \
             in one bit"
        );
        let e = config_error(&link("2", "2", "4"));
        assert!(e.contains("differ in 0 bits"), "{e}");
        let e = config_error(&link("3", "11", "4"));
        assert!(
            e.contains("faults[1]") && e.contains("node 11 is out of range"),
            "{e}"
        );
        assert!(e.contains("nodes 0..=7"), "{e}");
        for f in ["0.5", "0", "-2", "nan", "inf", "-inf", "1000000.5", "1e300"] {
            let e = config_error(&link("3", "7", f));
            assert!(
                e.contains("faults[1]") && e.contains("factor ="),
                "{f}: {e}"
            );
            assert!(e.contains(">= 1"), "{f}: {e}");
        }
        let edge = cube3(&link("3", "7", "1e6")).unwrap();
        assert_eq!(edge.link_factor(3, 7), 1e6);
        let e = config_error("[[faults]]\nkind = \"slow_node\"\nnode = 8\nfactor = 2\n");
        assert!(
            e.contains("faults[0] (slow_node 8 x2): node 8 is out of range"),
            "{e}"
        );
        let e = config_error("[[faults]]\nkind = \"slow_dimension\"\ndimension = 3\nfactor = 2\n");
        assert!(
            e.contains("dimension 3 is out of range: a 3-cube has dimensions 0..=2"),
            "{e}"
        );
        let e = config_error("[[faults]]\nkind = \"slow_wire\"\nnode = 1\nfactor = 2\n");
        assert!(
            e.contains("faults[0]: unknown kind \"slow_wire\"")
                && e.contains("slow_link, slow_node, slow_dimension"),
            "{e}"
        );
        let e = config_error("[[faults]]\nnode = 1\nfactor = 2\n");
        assert!(e.contains("faults[0]: no `kind`"), "{e}");
        let e = config_error("[[faults]]\nkind = \"slow_node\"\nnode = 1\nfactor = 2\nspeed = 3\n");
        assert!(
            e.contains("faults[0]: slow_node: unknown field `speed`"),
            "{e}"
        );
        let e = config_error("[[faults]]\nkind = \"slow_node\"\nnode = 1\n");
        assert!(
            e.contains("faults[0]: slow_node: missing field `factor`"),
            "{e}"
        );
        let e =
            config_error("[[faults]]\nkind = \"slow_link\"\nfrom = 1\nto = 3\nfactor = \"x\"\n");
        assert!(e.contains("faults[0]: slow_link"), "{e}");
        let e = config_error("faults = 3\n");
        assert!(e.contains("`faults` must be an array"), "{e}");
        let e = config_error("faults = [3]\n");
        assert!(e.contains("faults[0]: must be a table"), "{e}");
        // A configuration built in code is checked the same way.
        let mut c = cube3("").unwrap();
        c.faults.push(Fault::SlowNode {
            node: 1,
            factor: f64::NAN,
            from_us: None,
            until_us: None,
        });
        assert!(c.validate().unwrap_err().to_string().contains("faults[0]"));
    }

    #[test]
    fn fault_windows_parse_describe_validate_and_round_trip() {
        let c = cube3(
            "[[faults]]\nkind = \"slow_node\"\nnode = 5\nfactor = 3.0\nfrom_us = 1500\n\
             [[faults]]\nkind = \"slow_link\"\nfrom = 3\nto = 7\nfactor = 2\nuntil_us = 20.5\n\
             [[faults]]\nkind = \"slow_dimension\"\ndimension = 1\nfactor = 4\n\
             from_us = 10\nuntil_us = 30\n",
        )
        .unwrap();
        let shown: Vec<String> = c.faults().iter().map(|f| f.to_string()).collect();
        assert_eq!(
            shown,
            [
                "slow_node 5 x3 from 1500 us",
                "slow_link 3 <-> 7 x2 until 20.5 us",
                "slow_dimension 1 x4 from 10 us until 30 us"
            ]
        );
        assert_eq!(c.faults()[0].window_ns(), (1_500_000, u64::MAX));
        assert_eq!(c.faults()[1].window_ns(), (0, 20_500));
        assert!(c.faults().iter().all(Fault::timed));
        // In effect from its start, up to (not at) its end.
        let n = &c.faults()[0];
        assert!(!n.active_at(1_499_999) && n.active_at(1_500_000) && n.active_at(u64::MAX - 1));
        let d = &c.faults()[2];
        assert!(!d.active_at(9_999) && d.active_at(10_000) && d.active_at(29_999));
        assert!(!d.active_at(30_000));
        // The factors at a time, and every fault at once without one.
        assert_eq!(c.node_factor_at(5, 0), 1.0);
        assert_eq!(c.node_factor_at(5, 1_500_000), 3.0);
        assert_eq!(c.node_factor(5), 3.0);
        assert_eq!(c.link_factor_at(3, 7, 0), 2.0);
        // Link 3-7 is in dimension 2, not the slow dimension 1.
        assert_eq!(c.link_factor_at(7, 3, 20_000), 2.0);
        assert_eq!(c.link_factor_at(3, 7, 25_000), 1.0);
        assert_eq!(c.link_factor(1, 3), 4.0);
        assert_eq!(c.link_factor_at(1, 3, 40_000), 1.0);
        assert_eq!(worst_factor(&c), 4.0);
        let t = FaultTable::new(&c);
        assert_eq!(t.node_ns(0, 5, 1000), 1000);
        assert_eq!(t.node_ns(1_500_000, 5, 1000), 3000);
        assert_eq!(t.channel_ns(10_000, 3 * 3 + 2, 1000), 2000);
        assert_eq!(t.channel_ns(25_000, 3 * 3 + 2, 1000), 1000);
        assert_eq!(t.channel_ns(25_000, 3 * 3 + 1, 1000), 4000);
        assert_eq!(t.channel_ns(30_000, 3 * 3 + 1, 1000), 1000);
        // Written and read back, in TOML and JSON; absent bounds are not written.
        let back = toml::to_string(&c).unwrap();
        assert!(back.contains("from_us = 1500.0") && !back.contains("until_us = 30.0\nfrom"));
        assert_eq!(SimConfig::from_toml_str(&back).unwrap(), c);
        let json = serde_json::to_value(&c).unwrap();
        assert!(json["faults"][0].get("until_us").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<SimConfig>(json).unwrap(), c);
        // Bad bounds name the entry and the key.
        let node = |window: &str| {
            config_error(&format!(
                "[[faults]]\nkind = \"slow_node\"\nnode = 1\nfactor = 2\n{window}\n"
            ))
        };
        for v in ["-1", "-1e-9", "nan", "inf", "-inf", "1e300", "4.7e15"] {
            let e = node(&format!("from_us = {v}"));
            assert!(
                e.contains("faults[0]") && e.contains("from_us = "),
                "{v}: {e}"
            );
            assert!(e.contains("a virtual time must be finite"), "{v}: {e}");
            let e = node(&format!("until_us = {v}"));
            assert!(e.contains("until_us = "), "{v}: {e}");
        }
        let e = node("from_us = 30\nuntil_us = 30");
        assert!(
            e.contains("from_us = 30 is not before until_us = 30"),
            "{e}"
        );
        let e = node("from_us = 30\nuntil_us = 20");
        assert!(e.contains("would never apply"), "{e}");
        let e = node("from_us = \"soon\"");
        assert!(e.contains("faults[0]: slow_node"), "{e}");
        // A window from 0 with no end is the static fault, in effect throughout.
        let c0 = cube3("[[faults]]\nkind = \"slow_node\"\nnode = 5\nfactor = 3.0\nfrom_us = 0\n")
            .unwrap();
        assert!(c0.faults()[0].active_at(0) && c0.faults()[0].active_at(u64::MAX - 1));
    }

    #[test]
    fn closed_form_between_nodes_with_faults() {
        let c = cube3(
            "[[faults]]\nkind = \"slow_link\"\nfrom = 1\nto = 3\nfactor = 2\n\
             [[faults]]\nkind = \"slow_node\"\nnode = 6\nfactor = 3\n",
        )
        .unwrap();
        assert_eq!(route(0, 3), [0, 1, 3]);
        assert_eq!(route(3, 0), [3, 2, 0]);
        assert_eq!(route(5, 5), [5]);
        assert_eq!(route(0, 7), [0, 1, 3, 7]);
        // 0 -> 3 goes over 1 -> 3 (E x2 = 40 us); 3 -> 0 does not.
        let (f, e, u) = (10_000, 20_000, 8_000);
        assert_eq!(c.pingpong_one_way_between_ns(0, 0, 3), f + e + 2 * e + u);
        assert_eq!(c.pingpong_one_way_between_ns(0, 3, 0), f + 2 * e + u);
        assert_eq!(
            c.pingpong_one_way_between_ns(0, 3, 0),
            c.pingpong_one_way_ns(0, 2)
        );
        // To node 6: R x3 = 9 us < E, U x3; from it: F x3.
        assert_eq!(c.pingpong_one_way_between_ns(0, 2, 6), f + e + 3 * u);
        assert_eq!(c.pingpong_one_way_between_ns(0, 6, 2), 3 * f + e + u);
        assert_eq!(c.pingpong_one_way_between_ns(0, 6, 6), 3 * f + 3 * u);
        // Through node 6 only (7 -> 6 -> 4; the way back is 4 -> 5 -> 7): unchanged.
        assert_eq!(route(7, 4), [7, 6, 4]);
        assert_eq!(
            c.pingpong_one_way_between_ns(0, 7, 4),
            c.pingpong_one_way_ns(0, 2)
        );
        // Over the slow link as its middle hop: 2 -> 3 -> 1 -> 5.
        assert_eq!(c.pingpong_one_way_between_ns(0, 2, 5), f + 4 * e + u);
    }

    #[test]
    fn closed_form() {
        let c = SimConfig::preset("ncube7").unwrap();
        // F + dE + U at 16 bytes: 169.6 + d*240.56 + 139.76 us.
        assert_eq!(c.pingpong_one_way_ns(16, 1), 169_600 + 240_560 + 139_760);
        assert_eq!(
            c.pingpong_one_way_ns(16, 6),
            169_600 + 6 * 240_560 + 139_760
        );
        assert_eq!(distance(0, 63), 6);
        assert_eq!(distance(5, 6), 2);
    }
}
