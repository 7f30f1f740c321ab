//! What `check` adds for RDMA, pure: every configured rail that has an
//! RDMA port needs the port ACTIVE and LinkUp, and on RoCE each of its
//! configured addresses needs a RoCE v2 GID that belongs to that rail (RDMA
//! CM resolves with the GID's address as the source: an address without
//! one is an address RDMA cannot use, whatever the routing says).

use serde::Serialize;

use crate::model::Prefix;
use crate::plan::PlannedInterface;
use crate::rdma::{GidKind, Port, Rdma, Unreadable};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdmaDrift {
    /// rdma_port or rdma_gid.
    pub kind: &'static str,
    /// The rail concerned; None for a device that could not be read.
    pub interface: Option<String>,
    pub description: String,
    pub fix: String,
}

/// The RDMA side as check, show and apply read it (`rdma::scan_lenient`):
/// what could be read, why the rest could not, and the sysfs root the fixes
/// name.
pub struct Observed {
    pub rdma: Rdma,
    pub unreadable: Vec<Unreadable>,
    pub root: String,
}

impl Observed {
    /// Every RDMA difference of `rails`: `drift`, then `unreadable`.
    pub fn drift(&self, rails: &[PlannedInterface]) -> Vec<RdmaDrift> {
        let mut all = drift(&self.rdma, rails, &self.root);
        all.extend(unreadable(&self.unreadable));
        all
    }
}

pub fn drift(rdma: &Rdma, rails: &[PlannedInterface], sysfs_root: &str) -> Vec<RdmaDrift> {
    let mut out = Vec::new();
    let root = sysfs_root.trim_end_matches('/');
    for rail in rails {
        let Some(port) = rdma.port_of(&rail.name) else { continue };
        if !port.active() || !port.link_up() {
            out.push(port_down(port, &rail.name, root));
        }
        if !port.is_roce() {
            continue;
        }
        for a in &rail.addresses {
            if port.v2_gids_of(&a.addr, &rail.name).next().is_none() {
                out.push(no_v2_gid(rdma, port, &rail.name, a, root));
            }
        }
    }
    out
}

/// rdma_port: `port` of `rail` is not ACTIVE and LinkUp.
fn port_down(port: &Port, rail: &str, root: &str) -> RdmaDrift {
    RdmaDrift {
        kind: "rdma_port",
        interface: Some(rail.to_string()),
        description: format!(
            "{} of rail {rail} is {} ({}), not ACTIVE (LinkUp): RDMA cannot use it, and NCCL skips it silently",
            port.label(),
            port.state,
            port.phys_state
        ),
        fix: format!(
            "bring the port up: the netdev must be up (`ip link set dev {rail} up`), then check the cable, the \
             switch port and, on InfiniBand, the subnet manager (`{root}/class/infiniband/{}/ports/{}/state` \
             shows it); apply cannot change a port",
            port.device, port.port
        ),
    }
}

/// rdma_gid: address `a` of `rail` has no RoCE v2 GID of `rail` on `port`.
fn no_v2_gid(rdma: &Rdma, port: &Port, rail: &str, a: &Prefix, root: &str) -> RdmaDrift {
    let same_ip: Vec<String> = port
        .gids
        .iter()
        .filter(|g| g.ip() == a.addr)
        .map(|g| {
            let kind = match g.kind {
                Some(GidKind::V1) => "RoCE v1",
                Some(GidKind::V2) => "RoCE v2",
                None => "type unknown",
            };
            format!("index {} ({kind}, netdev {})", g.index, g.ndev.as_deref().unwrap_or("none"))
        })
        .collect();
    let found = if same_ip.is_empty() {
        "has no GID at all".to_string()
    } else {
        format!("has GIDs only at {}", same_ip.join(", "))
    };
    // Where RDMA resolves the address instead: a RoCE v2 GID of it
    // on another port (the address is on that port's netdev too).
    let elsewhere = rdma
        .ports
        .iter()
        .filter(|p| (p.device.as_str(), p.port) != (port.device.as_str(), port.port))
        .flat_map(|p| {
            p.gids.iter().filter(|g| g.kind == Some(GidKind::V2) && g.ip() == a.addr).map(move |g| (p, g))
        })
        .next();
    let mut description = format!(
        "{} on {rail} {found} on {}, none of them a RoCE v2 GID of {rail}: RDMA (rping, NCCL) cannot use this \
         address from {rail}",
        a.addr,
        port.label(),
    );
    let fix = match elsewhere {
        Some((p, g)) => {
            let ndev = g.ndev.as_deref().unwrap_or("none");
            description.push_str(&format!(
                "; its RoCE v2 GID is on {} at index {} (netdev {ndev})",
                p.label(),
                g.index
            ));
            format!(
                "{} is on {ndev} as well, so RDMA resolves it to that port: if it belongs on {rail}, remove it from \
                 {ndev} (`ip addr del {a} dev {ndev}`)",
                a.addr
            )
        }
        None => format!(
            "the RDMA core adds a RoCE v2 GID for each address of a netdev its port serves: put {} on {rail} itself \
             (not on a bond, bridge or macvlan above it), and if every slot of \
             `{root}/class/infiniband/{}/ports/{}/gids` is used, remove addresses the port does not need",
            a.addr, port.device, port.port
        ),
    };
    RdmaDrift { kind: "rdma_gid", interface: Some(rail.to_string()), description, fix }
}

/// A device check could not read: its rails are not checked, which is
/// drift too (never a silent pass).
pub fn unreadable(why: &[Unreadable]) -> Vec<RdmaDrift> {
    why.iter()
        .map(|w| RdmaDrift {
            kind: "rdma_unreadable",
            interface: None,
            description: w.to_string(),
            fix: "read the file named: in a sysfs copy it is damaged (copy it again); on a live host the device \
                  fails to answer (see `dmesg` and the driver's logs)"
                .to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::prefix;
    use crate::rdma::{Gid, LinkLayer, Netdev, PhysState, PortState, Via};

    fn port(active: bool, gids: Vec<Gid>) -> Port {
        Port {
            device: "rocep193s0f0".into(),
            port: 1,
            link_layer: LinkLayer::Ethernet,
            state: if active { PortState::Active } else { PortState::Down },
            phys_state: if active { PhysState::LinkUp } else { PhysState::Disabled },
            rate: None,
            gids,
            netdevs: vec![Netdev { name: "ens3f0np0".into(), via: Via::GidTable, pkey: None, parent: None }],
        }
    }

    fn gid(index: u32, kind: GidKind, ndev: &str) -> Gid {
        Gid {
            index,
            gid: "198.51.100.40".parse::<std::net::Ipv4Addr>().unwrap().to_ipv6_mapped(),
            kind: Some(kind),
            ndev: Some(ndev.into()),
        }
    }

    fn rail() -> PlannedInterface {
        PlannedInterface {
            name: "ens3f0np0".into(),
            table: 100,
            priority: 1000,
            addresses: vec![prefix("198.51.100.40/24")],
            gateways: vec![],
            subnets: vec![prefix("198.51.100.0/24")],
            onlink_gateways: vec![],
        }
    }

    #[test]
    fn an_active_port_with_the_v2_gid_is_in_sync() {
        let rdma = Rdma {
            ports: vec![port(true, vec![gid(2, GidKind::V1, "ens3f0np0"), gid(3, GidKind::V2, "ens3f0np0")])],
        };
        assert_eq!(drift(&rdma, &[rail()], "/sys"), []);
        assert_eq!(
            drift(&Rdma::default(), &[rail()], "/sys"),
            [],
            "a rail without RDMA device is not RDMA drift"
        );
    }

    #[test]
    fn a_down_port_and_a_missing_or_foreign_gid_are_drift() {
        let rdma = Rdma {
            ports: vec![port(
                false,
                vec![gid(2, GidKind::V1, "ens3f0np0"), gid(3, GidKind::V2, "ens3f0np0.7")],
            )],
        };
        let d = drift(&rdma, &[rail()], "/sys/");
        assert_eq!(d.len(), 2, "{d:#?}");
        assert_eq!(d[0].kind, "rdma_port");
        assert!(
            d[0].description.starts_with("rocep193s0f0 port 1 of rail ens3f0np0 is DOWN (Disabled)"),
            "{}",
            d[0].description
        );
        assert!(d[0].fix.contains("`/sys/class/infiniband/rocep193s0f0/ports/1/state`"), "{}", d[0].fix);
        assert_eq!(d[1].kind, "rdma_gid");
        assert!(
            d[1].description.starts_with("198.51.100.40 on ens3f0np0 has GIDs only at index 2 (RoCE v1, netdev ens3f0np0), index 3 (RoCE v2, netdev ens3f0np0.7) on rocep193s0f0 port 1"),
            "{}",
            d[1].description
        );
        let rdma = Rdma { ports: vec![port(true, vec![])] };
        let d = drift(&rdma, &[rail()], "/sys");
        assert!(d[0].description.contains("has no GID at all"), "{:?}", d);
    }
}
