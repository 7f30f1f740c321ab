//! Pure: the peers of `probe`, from `--peers FILE`: either addresses, one
//! a line (`#` starts a comment), or the JSON document that `roce-route
//! probe --self --json` prints on the peer host (its rails with name,
//! addresses, link-layer address, MTU and RDMA device:port), which lets
//! the verdicts name the peer's NICs. Bad input is an error naming
//! file:line (exit 2).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// One rail of a host as `probe --self` describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfRail {
    pub name: String,
    /// `198.51.100.110/24`, `2001:db8:1::110/64` (a bare address is taken
    /// too).
    pub addresses: Vec<String>,
    pub mac: Option<String>,
    pub mtu: Option<u32>,
    /// `mlx5_0:1`.
    #[serde(default)]
    pub rdma: Option<String>,
}

/// `probe --self`: this host's rails.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfDoc {
    pub rails: Vec<SelfRail>,
}

/// A peer rail, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerRail {
    pub name: String,
    pub addresses: Vec<IpAddr>,
    pub mac: Option<String>,
    pub mtu: Option<u32>,
    pub rdma: Option<String>,
}

/// The peer addresses to probe, and what is known of the peer's NICs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peers {
    pub addresses: Vec<IpAddr>,
    pub rails: Vec<PeerRail>,
}

impl Peers {
    /// Bare addresses (`--peer`), duplicates dropped.
    pub fn of(addresses: &[IpAddr]) -> Peers {
        let mut p = Peers::default();
        for a in addresses {
            if !p.addresses.contains(a) {
                p.addresses.push(*a);
            }
        }
        p
    }

    /// Adds another set (several `--peers` files, plus `--peer`).
    pub fn extend(&mut self, other: Peers) {
        for a in other.addresses {
            if !self.addresses.contains(&a) {
                self.addresses.push(a);
            }
        }
        self.rails.extend(other.rails);
    }

    /// The peer NIC that has `ip`.
    pub fn rail_of(&self, ip: &IpAddr) -> Option<&PeerRail> {
        self.rails.iter().find(|r| r.addresses.contains(ip))
    }

    /// The peer NIC with link-layer address `mac`.
    pub fn rail_of_mac(&self, mac: &str) -> Option<&PeerRail> {
        self.rails.iter().find(|r| r.mac.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(mac)))
    }
}

/// Why `ip` cannot name a peer's rail, or None. A link-local address
/// names no host without an interface (every rail has one), so an
/// answer could not tell which peer NIC or path it proves.
pub fn unfit_peer(ip: &IpAddr) -> Option<&'static str> {
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_unicast_link_local(),
    };
    if link_local {
        Some("is link-local: it names no host without an interface; give the peer rail's global address")
    } else if ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() || *ip == IpAddr::from([255; 4]) {
        Some("is not the unicast address of a host; give the peer rail's global address")
    } else {
        None
    }
}

/// Parses `text`, the contents of `file`. The error names file:line.
pub fn parse(file: &str, text: &str) -> Result<Peers, String> {
    if text.trim_start().starts_with('{') {
        return parse_json(file, text);
    }
    let mut addrs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ip: IpAddr = line.parse().map_err(|_| {
            format!(
                "{file}:{}: {line:?} is not an IP address (one address a line, `#` comments, or the JSON of \
                 `roce-route probe --self --json`)",
                n + 1
            )
        })?;
        if let Some(why) = unfit_peer(&ip) {
            return Err(format!("{file}:{}: peer {ip} {why}", n + 1));
        }
        addrs.push(ip);
    }
    if addrs.is_empty() {
        return Err(format!("{file}: no peer address in it"));
    }
    Ok(Peers::of(&addrs))
}

/// The `probe --self --json` document (the whole envelope, or only its
/// `rails`).
fn parse_json(file: &str, text: &str) -> Result<Peers, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{file}:{}: not valid JSON: {e}", e.line()))?;
    let at = |what: &str| format!("{file}: {what} (expected the output of `roce-route probe --self --json`)");
    let doc = match value.get("self") {
        Some(inner) => inner.clone(),
        None => value,
    };
    let doc: SelfDoc = serde_json::from_value(doc).map_err(|e| at(&format!("{e}")))?;
    let line_of = |needle: &str| {
        text.lines().position(|l| l.contains(needle)).map_or(String::new(), |n| format!(":{}", n + 1))
    };
    let mut peers = Peers::default();
    for r in doc.rails {
        let mut addresses = Vec::new();
        for a in &r.addresses {
            let bare = a.split('/').next().unwrap_or(a);
            let ip: IpAddr = bare.parse().map_err(|_| {
                format!(
                    "{file}{}: rail {:?}: {a:?} is not an IP address",
                    line_of(&format!("\"{a}\"")),
                    r.name
                )
            })?;
            if let Some(why) = unfit_peer(&ip) {
                return Err(format!(
                    "{file}{}: rail {:?}: peer {ip} {why}",
                    line_of(&format!("\"{a}\"")),
                    r.name
                ));
            }
            addresses.push(ip);
        }
        if let Some(mac) = &r.mac
            && mac.split(':').any(|o| o.len() != 2 || u8::from_str_radix(o, 16).is_err())
        {
            return Err(format!(
                "{file}{}: rail {:?}: {mac:?} is not a link-layer address",
                line_of(&format!("\"{mac}\"")),
                r.name
            ));
        }
        peers.extend(Peers::of(&addresses));
        peers.rails.push(PeerRail {
            name: r.name,
            addresses,
            mac: r.mac.map(|m| m.to_ascii_lowercase()),
            mtu: r.mtu,
            rdma: r.rdma,
        });
    }
    if peers.addresses.is_empty() {
        return Err(at("no rail address in it"));
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_lists_take_comments_and_blank_lines() {
        let p = parse("peers.txt", "# rack 3\n198.51.100.110\n\n  2001:db8:1::110  # b\n198.51.100.110\n")
            .unwrap();
        let want: Vec<IpAddr> = vec!["198.51.100.110".parse().unwrap(), "2001:db8:1::110".parse().unwrap()];
        assert_eq!(p.addresses, want);
        assert!(p.rails.is_empty());
    }

    #[test]
    fn bad_lines_name_file_and_line() {
        let e = parse("peers.txt", "198.51.100.110\n198.51.100.300\n").unwrap_err();
        assert!(e.starts_with("peers.txt:2: \"198.51.100.300\" is not an IP address"), "{e}");
        assert_eq!(parse("p", "# nothing\n").unwrap_err(), "p: no peer address in it");
        let e =
            parse("b.json", "{\"rails\": [\n  {\"name\": \"ib0\", \"addresses\": [\"x/24\"]}]}").unwrap_err();
        assert!(e.starts_with("b.json:2: rail \"ib0\": \"x/24\" is not an IP address"), "{e}");
        let e = parse("peers.txt", "198.51.100.110\nfe80::1\n").unwrap_err();
        assert!(e.starts_with("peers.txt:2: peer fe80::1 is link-local"), "{e}");
        let e = parse("peers.txt", "169.254.7.1\n").unwrap_err();
        assert!(e.starts_with("peers.txt:1: peer 169.254.7.1 is link-local"), "{e}");
        let e = parse("peers.txt", "224.0.0.1\n").unwrap_err();
        assert!(e.contains("is not the unicast address of a host"), "{e}");
        let e = parse("b.json", "{\"rails\": [\n  {\"name\": \"r0\", \"addresses\": [\"fe80::2/64\"]}]}")
            .unwrap_err();
        assert!(e.starts_with("b.json:2: rail \"r0\": peer fe80::2 is link-local"), "{e}");
        let e = parse("b.json", "{\"rails\": [\n,]}").unwrap_err();
        assert!(e.starts_with("b.json:2: not valid JSON"), "{e}");
    }

    /// The document `probe --self --json` prints (the envelope) is read
    /// back, rails and all.
    #[test]
    fn the_self_document_round_trips() {
        let doc = SelfDoc {
            rails: vec![SelfRail {
                name: "ib1".into(),
                addresses: vec!["198.51.100.111/24".into(), "2001:db8:1::111/64".into()],
                mac: Some("AA:bb:cc:dd:ee:01".into()),
                mtu: Some(9000),
                rdma: Some("mlx5_1:1".into()),
            }],
        };
        let envelope = serde_json::json!({"command": "probe", "ok": true, "self": doc});
        let p = parse("b.json", &serde_json::to_string_pretty(&envelope).unwrap()).unwrap();
        assert_eq!(p.addresses.len(), 2);
        let r = p.rail_of(&"2001:db8:1::111".parse().unwrap()).unwrap();
        assert_eq!(r.name, "ib1");
        assert_eq!(p.rail_of_mac("aa:BB:cc:dd:ee:01").unwrap().name, "ib1");
        assert_eq!(r.mtu, Some(9000));
    }
}
