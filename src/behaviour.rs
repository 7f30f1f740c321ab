//! Behaviour checks: which way would traffic from each configured address
//! really go? Pure: choosing probe destinations and judging the kernel's
//! answers (the lookups themselves are `Netlink::route_get`).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::model::{Family, Prefix, Route};

/// One question for the kernel: from `src` to `dst`, we expect `dev` and
/// `table` (and `gateway` for off-subnet destinations).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Probe {
    pub interface: String,
    pub from: IpAddr,
    pub to: IpAddr,
    pub expected_dev: String,
    pub expected_table: u32,
    pub expected_gateway: Option<IpAddr>,
}

/// The kernel's answer to a probe, judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    #[serde(flatten)]
    pub probe: Probe,
    pub dev: Option<String>,
    pub table: Option<u32>,
    pub gateway: Option<IpAddr>,
    pub error: Option<String>,
    pub ok: bool,
}

impl Verdict {
    /// "traffic from A to B leaves via X (table T), expected Y (table U)".
    pub fn describe(&self) -> String {
        let p = &self.probe;
        let actual = match (&self.error, &self.dev) {
            (Some(e), _) => format!("cannot be routed ({e})"),
            (None, dev) => format!(
                "leaves via {} (table {}{})",
                dev.as_deref().unwrap_or("?"),
                self.table.map_or("?".into(), table_name),
                self.gateway.map_or(String::new(), |g| format!(", via {g}"))
            ),
        };
        format!(
            "traffic from {} to {} {actual}; expected {} (table {}{})",
            p.from,
            p.to,
            p.expected_dev,
            p.expected_table,
            p.expected_gateway.map_or(String::new(), |g| format!(", via {g}"))
        )
    }
}

fn table_name(t: u32) -> String {
    match t {
        254 => "main".into(),
        253 => "default".into(),
        255 => "local".into(),
        n => n.to_string(),
    }
}

/// Probes for one interface address: a peer inside its subnet, and an
/// off-subnet destination when the interface has a gateway of that family.
pub fn probes_for(
    interface: &str,
    table: u32,
    addr: &Prefix,
    gateways: &[IpAddr],
    local: &BTreeSet<IpAddr>,
) -> Vec<Probe> {
    let probe = |to: IpAddr, gw: Option<IpAddr>| Probe {
        interface: interface.to_string(),
        from: addr.addr,
        to,
        expected_dev: interface.to_string(),
        expected_table: table,
        expected_gateway: gw,
    };
    let mut out = Vec::new();
    let family = addr.family();
    let gw = gateways.iter().copied().find(|g| Family::of(g) == family);
    if let Some(peer) = peer_in_subnet(addr, gw, local) {
        out.push(probe(peer, None));
    }
    if let Some(gw) = gw
        && let Some(far) = off_subnet(addr)
    {
        out.push(probe(far, Some(gw)));
    }
    out
}

/// A destination inside the subnet that is not a local address: the
/// gateway when it is in the subnet, else the first free host address.
pub fn peer_in_subnet(addr: &Prefix, gw: Option<IpAddr>, local: &BTreeSet<IpAddr>) -> Option<IpAddr> {
    if let Some(g) = gw.filter(|g| addr.contains(g)) {
        return Some(g);
    }
    let host_bits = u32::from(addr.family().max_len() - addr.len);
    if host_bits == 0 {
        return None;
    }
    let tries = if host_bits >= 6 { 32u128 } else { 1u128 << host_bits };
    (1..tries).map(|i| offset(addr.network().addr, i)).find(|ip| !local.contains(ip) && addr.contains(ip))
}

/// A documentation address outside the subnet, to exercise the default route.
pub fn off_subnet(addr: &Prefix) -> Option<IpAddr> {
    let candidates: [IpAddr; 2] = match addr.family() {
        Family::V4 => [Ipv4Addr::new(203, 0, 113, 1).into(), Ipv4Addr::new(198, 51, 100, 1).into()],
        Family::V6 => [
            Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1).into(),
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into(),
        ],
    };
    candidates.into_iter().find(|c| !addr.contains(c))
}

fn offset(ip: IpAddr, i: u128) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(a).wrapping_add(i as u32))),
        IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(a).wrapping_add(i))),
    }
}

/// Judges the kernel's answer (or error) to a probe.
pub fn judge(probe: &Probe, answer: Result<&Route, String>) -> Verdict {
    match answer {
        Err(error) => Verdict {
            probe: probe.clone(),
            dev: None,
            table: None,
            gateway: None,
            error: Some(error),
            ok: false,
        },
        Ok(route) => {
            let ok = route.oif.as_deref() == Some(probe.expected_dev.as_str())
                && route.table == probe.expected_table
                && (probe.expected_gateway.is_none() || route.gateway == probe.expected_gateway);
            Verdict {
                probe: probe.clone(),
                dev: route.oif.clone(),
                table: Some(route.table),
                gateway: route.gateway,
                error: None,
                ok,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        let (ip, len) = s.split_once('/').unwrap();
        Prefix::new(ip.parse().unwrap(), len.parse().unwrap())
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn peer_skips_local_addresses_and_prefers_the_gateway() {
        let local = BTreeSet::from([ip("198.51.100.1"), ip("198.51.100.10")]);
        assert_eq!(peer_in_subnet(&p("198.51.100.10/24"), None, &local), Some(ip("198.51.100.2")));
        let gw = Some(ip("198.51.100.254"));
        assert_eq!(peer_in_subnet(&p("198.51.100.10/24"), gw, &local), Some(ip("198.51.100.254")));
        assert_eq!(peer_in_subnet(&p("198.51.100.10/32"), None, &local), None);
        assert_eq!(
            peer_in_subnet(&p("2001:db8:1::10/64"), None, &BTreeSet::new()),
            Some(ip("2001:db8:1::1"))
        );
    }

    #[test]
    fn off_subnet_is_outside() {
        assert_eq!(off_subnet(&p("203.0.113.5/24")), Some(ip("198.51.100.1")));
        assert_eq!(off_subnet(&p("198.51.100.5/24")), Some(ip("203.0.113.1")));
    }

    #[test]
    fn gateway_adds_an_off_subnet_probe() {
        let probes =
            probes_for("rail1", 101, &p("198.51.100.11/24"), &[ip("198.51.100.1")], &BTreeSet::new());
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[1].expected_gateway, Some(ip("198.51.100.1")));
        assert_eq!(probes[1].to, ip("203.0.113.1"));
    }

    #[test]
    fn verdict_flags_the_wrong_interface_or_table() {
        let probe = &probes_for("rail1", 101, &p("198.51.100.11/24"), &[], &BTreeSet::new())[0];
        // What `ip route get 198.51.100.1 from 198.51.100.11` answers.
        let mut r = Route::connected(101, p("198.51.100.1/32"), "rail1", ip("198.51.100.11"), 0);
        assert!(judge(probe, Ok(&r)).ok);
        r.oif = Some("rail0".into());
        r.table = 254;
        let v = judge(probe, Ok(&r));
        assert!(!v.ok);
        assert_eq!(
            v.describe(),
            "traffic from 198.51.100.11 to 198.51.100.1 leaves via rail0 (table main); expected rail1 (table 101)"
        );
        assert!(!judge(probe, Err("Network is unreachable".into())).ok);
    }
}
