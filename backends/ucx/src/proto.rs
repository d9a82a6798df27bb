//! What UCX says about an endpoint (`ucp_ep_print_info`): its lanes, each a transport on a
//! device, and the message sizes at which the tag protocols change, the v1 protocols'
//! counterpart of what `UCX_PROTO_INFO` prints for the v2 ones:
//!
//! ```text
//! #                 lane[0]:  1:posix/memory.0 md[1]  -> md[1]/posix/sysdev[255] am am_bw#0
//! #                tag_send: 0..<egr/short>..8185..<egr/bcopy>..8192..<rndv>..(inf)
//! ```
//!
//! A range `a..<p>..b` says that messages of `a` bytes up to, not including, `b` go with
//! protocol `p`.

/// The endpoint to one rank, as UCX describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    /// One line per lane: the transport and device, and what the lane is used for.
    pub lanes: Vec<String>,
    /// The `tag_send` line (the thresholds of `ucp_tag_send_nbx`), as UCX prints it.
    pub tag_send: String,
    /// The protocols of `tag_send`: each below its bound (exclusive; `usize::MAX`: any size).
    ranges: Vec<(usize, &'static str)>,
}

/// The protocol names UCX prints, as static strings for the result document.
const PROTOCOLS: &[&str] = &[
    "egr/short",
    "egr/bcopy",
    "egr/zcopy",
    "egr/multi",
    "rndv",
    "rndv/put",
    "rndv/get",
    "multi/bcopy",
    "multi/zcopy",
];

impl Peer {
    /// Read `ucp_ep_print_info`'s text.
    pub fn parse(text: &str) -> Peer {
        let mut p = Peer::default();
        for line in text.lines() {
            let l = line.trim_start_matches('#').trim();
            if l.starts_with("lane[") {
                p.lanes
                    .push(l.split_whitespace().collect::<Vec<_>>().join(" "));
            } else if let Some(rest) = l.strip_prefix("tag_send:") {
                p.tag_send = rest.trim().to_string();
                p.ranges = parse_ranges(&p.tag_send);
            }
        }
        p
    }

    /// The smallest message that goes with a rendezvous protocol, if UCX said and any does.
    pub fn rndv_from(&self) -> Option<usize> {
        let mut from = 0;
        for &(bound, p) in &self.ranges {
            if p.starts_with("rndv") {
                return Some(from);
            }
            from = bound;
        }
        None
    }

    /// The same endpoint with its thresholds set aside, for when UCX sends by the new protocol
    /// selection (v2) although it prints the v1 thresholds: every size is then `"unknown"`.
    pub fn without_thresholds(mut self) -> Peer {
        self.ranges.clear();
        self
    }

    /// The protocol of a `len`-byte `ucp_tag_send_nbx`, or `"unknown"` when UCX did not say.
    pub fn protocol(&self, len: usize) -> &'static str {
        self.ranges
            .iter()
            .find(|&&(bound, _)| len < bound)
            .map_or("unknown", |&(_, p)| p)
    }
}

/// Whether UCX selects protocols with its new (v2) scheme: `UCX_PROTO_ENABLE` set to a true
/// value (UCX 1.13's default is off). Then the `tag_send` thresholds it prints do not say what
/// it sends with; `UCX_PROTO_INFO=y` prints what it chose.
pub fn proto_v2_enabled() -> bool {
    std::env::var("UCX_PROTO_ENABLE").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "y" | "yes" | "on" | "1" | "true"
        )
    })
}

/// `0..<egr/short>..8185..<egr/bcopy>..8192..<rndv>..(inf)` as `(bound, protocol)` pairs.
fn parse_ranges(s: &str) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find("..<") {
        let after = &rest[open + 3..];
        let Some(close) = after.find(">..") else {
            break;
        };
        let name = &after[..close];
        let tail = &after[close + 3..];
        let end = tail.find("..").unwrap_or(tail.len());
        let bound = match tail[..end].trim() {
            "(inf)" => usize::MAX,
            b => match b.parse() {
                Ok(b) => b,
                Err(_) => break,
            },
        };
        let name = PROTOCOLS
            .iter()
            .find(|&&p| p == name)
            .copied()
            .unwrap_or("other");
        out.push((bound, name));
        rest = &tail[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const POSIX: &str = "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n\
        #                 lane[0]:  1:posix/memory.0 md[1]          -> md[1]/posix/sysdev[255] am am_bw#0\n\
        #                 lane[1]:  2:cma/memory.0 md[2]            -> md[2]/cma/sysdev[255] rma_bw#0\n\
        #\n#                tag_send: 0..<egr/short>..8185..<egr/bcopy>..8192..<rndv>..(inf)\n\
        #            tag_send_nbr: 0..<egr/short>..8185..<egr/bcopy>..262144..<rndv>..(inf)\n";

    #[test]
    fn lanes_and_protocols_are_read() {
        let p = Peer::parse(POSIX);
        assert_eq!(p.lanes.len(), 2);
        assert!(
            p.lanes[0].starts_with("lane[0]: 1:posix/memory.0"),
            "{:?}",
            p.lanes
        );
        assert_eq!(
            p.tag_send,
            "0..<egr/short>..8185..<egr/bcopy>..8192..<rndv>..(inf)"
        );
        for (len, want) in [
            (0, "egr/short"),
            (8, "egr/short"),
            (8184, "egr/short"),
            (8185, "egr/bcopy"),
            (8191, "egr/bcopy"),
            (8192, "rndv"),
            (4 << 20, "rndv"),
            (usize::MAX - 1, "rndv"),
        ] {
            assert_eq!(p.protocol(len), want, "{len} bytes");
        }
        assert_eq!(p.rndv_from(), Some(8192));
    }

    #[test]
    fn text_without_thresholds_says_unknown() {
        for t in [
            "",
            "garbage",
            "# tag_send: 0..<egr/short>..x..<rndv>..(inf)",
        ] {
            assert_eq!(Peer::parse(t).protocol(8), "unknown", "{t}");
        }
        assert_eq!(
            Peer::parse("# tag_send: 0..<new/proto>..(inf)").protocol(8),
            "other"
        );
    }
}
