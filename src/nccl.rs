//! `nccl-env`, pure: NCCL's settings for the rails of a config, from the
//! RDMA ports (`rdma::scan`) as they are now. NCCL's parsing (from its
//! `net_ib/init.cc` and `misc/utils.cc`) decides the forms:
//!
//! - `NCCL_IB_HCA` and `NCCL_SOCKET_IFNAME` match names by prefix unless
//!   the list starts with `=` (`mlx5_1` also selects `mlx5_10`...), so both
//!   are written with `=`;
//! - `NCCL_IB_GID_INDEX` is one index for every HCA, so it is given only
//!   when the RoCE v2 GID of each RoCE rail's configured IPv4 address has
//!   the same index on every device; otherwise NCCL (>= 2.21) selects by
//!   `NCCL_IB_ADDR_FAMILY` and `NCCL_IB_ADDR_RANGE`, which takes exactly one
//!   CIDR (a comma list silently uses the first);
//! - InfiniBand ports use GID 0 and ignore the index.
//!
//! GID indices move (the kernel gives a new entry the first free slot), so
//! they are computed now, never stored: run `nccl-env` where the job starts.

use std::net::{IpAddr, Ipv4Addr};

use serde::Serialize;

use crate::model::Prefix;
use crate::rdma::{Port, Rdma};

/// One rail of the config with its addresses (listed, or live).
#[derive(Clone, Debug)]
pub struct RailAddrs {
    pub name: String,
    pub addresses: Vec<Prefix>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct NcclEnv {
    /// In the order written.
    pub variables: Vec<Variable>,
    pub rails: Vec<NcclRail>,
    /// Why the GID selection is what it is.
    pub notes: Vec<String>,
    /// What may make NCCL use another GID or port than the config says.
    pub warnings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Variable {
    pub name: &'static str,
    pub value: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct NcclRail {
    pub name: String,
    /// `mlx5_0:1`; None: no RDMA device.
    pub hca: Option<String>,
    pub link_layer: Option<String>,
    /// The configured IPv4 address NCCL should use (RoCE), and its RoCE v2
    /// GID index now.
    pub address: Option<IpAddr>,
    pub gid_index: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "none of the rails of the config has an RDMA device ({0}); NCCL would not use them for RDMA. \
     `roce-route discover` lists the RDMA devices and their netdevs"
)]
pub struct NoRdmaRail(pub String);

pub fn nccl_env(rails: &[RailAddrs], rdma: &Rdma) -> Result<NcclEnv, NoRdmaRail> {
    let mut env = NcclEnv::default();
    let mut hcas: Vec<String> = Vec::new();
    // (device label, index, address) of each RoCE rail's intended GID.
    let mut roce: Vec<(&Port, IpAddr, Option<u32>)> = Vec::new();
    for rail in rails {
        let Some(port) = rdma.port_of(&rail.name) else {
            env.warnings.push(format!(
                "rail {} has no RDMA device: it is not in NCCL_IB_HCA, and NCCL does no RDMA over it",
                rail.name
            ));
            env.rails.push(NcclRail {
                name: rail.name.clone(),
                hca: None,
                link_layer: None,
                address: None,
                gid_index: None,
            });
            continue;
        };
        if !port.active() {
            env.warnings.push(format!(
                "{} (rail {}) is {} ({}): NCCL skips ports that are not ACTIVE, silently",
                port.label(),
                rail.name,
                port.state.name,
                port.phys_state.name
            ));
        }
        if !hcas.contains(&port.hca()) {
            hcas.push(port.hca());
        }
        let mut shown = NcclRail {
            name: rail.name.clone(),
            hca: Some(port.hca()),
            link_layer: Some(port.link_layer.clone()),
            address: None,
            gid_index: None,
        };
        if port.is_roce() {
            match rail.addresses.iter().find(|a| a.addr.is_ipv4()) {
                None => env.warnings.push(format!(
                    "rail {} ({}) has no IPv4 address in the config: NCCL selects an IPv4 RoCE v2 GID by \
                     default, and this port has none of the rail",
                    rail.name,
                    port.label()
                )),
                Some(a) => {
                    let index = port.v2_gids_of(&a.addr, &rail.name).next().map(|g| g.index);
                    if index.is_none() {
                        env.warnings.push(format!(
                            "{} on {} has no RoCE v2 GID on {}: RDMA cannot use this address (`roce-route \
                             check` says more)",
                            a.addr,
                            rail.name,
                            port.label()
                        ));
                    }
                    shown.address = Some(a.addr);
                    shown.gid_index = index;
                    roce.push((port, a.addr, index));
                }
            }
        }
        env.rails.push(shown);
    }
    if hcas.is_empty() {
        let names: Vec<&str> = rails.iter().map(|r| r.name.as_str()).collect();
        return Err(NoRdmaRail(names.join(", ")));
    }
    env.variables.push(Variable { name: "NCCL_IB_HCA", value: format!("={}", hcas.join(",")) });
    let names: Vec<&str> = rails.iter().map(|r| r.name.as_str()).collect();
    env.variables.push(Variable { name: "NCCL_SOCKET_IFNAME", value: format!("={}", names.join(",")) });
    gid_selection(&mut env, &roce, rails);
    Ok(env)
}

fn gid_selection(env: &mut NcclEnv, roce: &[(&Port, IpAddr, Option<u32>)], rails: &[RailAddrs]) {
    if roce.is_empty() {
        if env.rails.iter().any(|r| r.hca.is_some()) {
            env.notes.push(
                "no RoCE rail: InfiniBand ports use GID index 0, and NCCL ignores NCCL_IB_GID_INDEX for them"
                    .into(),
            );
        }
        return;
    }
    let found: Vec<(&Port, IpAddr, u32)> =
        roce.iter().filter_map(|(p, a, i)| i.map(|i| (*p, *a, i))).collect();
    let mut indices: Vec<u32> = found.iter().map(|(_, _, i)| *i).collect();
    indices.dedup();
    let same = found.len() == roce.len() && indices.len() == 1;
    // Several IPv4 RoCE v2 GIDs on one port: NCCL's automatic selection
    // takes the lowest index in the range.
    for (port, addr, index) in &found {
        let v4: Vec<_> = port.v2_ipv4_gids().collect();
        if v4.len() > 1 {
            let list: Vec<String> = v4.iter().map(|g| format!("{} at {}", g.ip(), g.index)).collect();
            let lowest = v4[0];
            let consequence = if lowest.index == *index {
                format!("the configured {addr} has the lowest index, which NCCL's automatic selection takes")
            } else {
                format!(
                    "NCCL's automatic selection takes the lowest index, {} ({}), not the configured {addr} ({index})",
                    lowest.index,
                    lowest.ip()
                )
            };
            env.warnings.push(format!(
                "{} has {} IPv4 RoCE v2 GIDs ({}): {consequence}",
                port.label(),
                v4.len(),
                list.join(", ")
            ));
        }
    }
    if same {
        env.variables.push(Variable { name: "NCCL_IB_GID_INDEX", value: indices[0].to_string() });
        env.notes.push(format!(
            "the RoCE v2 GID of every RoCE rail's IPv4 address is at index {} now; indices move when \
             addresses change or links flap, so run nccl-env where the job starts",
            indices[0]
        ));
        return;
    }
    let per_device: Vec<String> = roce
        .iter()
        .map(|(p, a, i)| match i {
            Some(i) => format!("{} {a} at {i}", p.hca()),
            None => format!("{} {a} has none", p.hca()),
        })
        .collect();
    env.notes.push(format!(
        "no single NCCL_IB_GID_INDEX fits: the RoCE v2 GIDs of the rails' IPv4 addresses are at different \
         indices ({}), and NCCL takes one index for every HCA; so NCCL (2.21 or later) selects per device \
         by address family and range instead",
        per_device.join(", ")
    ));
    env.variables.push(Variable { name: "NCCL_IB_ADDR_FAMILY", value: "AF_INET".into() });
    let subnets: Vec<Prefix> = roce
        .iter()
        .filter_map(|(_, a, _)| {
            rails.iter().flat_map(|r| &r.addresses).find(|p| p.addr == *a).map(Prefix::network)
        })
        .collect();
    if let Some(range) = covering(&subnets) {
        env.variables.push(Variable { name: "NCCL_IB_ADDR_RANGE", value: range.to_string() });
        for (port, addr, index) in &found {
            let in_range: Vec<_> = port.v2_ipv4_gids().filter(|g| range.contains(&g.ip())).collect();
            if in_range.first().is_some_and(|g| g.index != *index) {
                env.warnings.push(format!(
                    "on {} the lowest IPv4 RoCE v2 GID in {range} is {} (index {}), not the configured {addr}: \
                     NCCL will use that one",
                    port.label(),
                    in_range[0].ip(),
                    in_range[0].index
                ));
            }
        }
    }
}

/// The smallest IPv4 CIDR holding all of `subnets`.
pub fn covering(subnets: &[Prefix]) -> Option<Prefix> {
    let v4: Vec<(u32, u8)> = subnets
        .iter()
        .filter_map(|p| match p.addr {
            IpAddr::V4(a) => Some((u32::from(a), p.len)),
            IpAddr::V6(_) => None,
        })
        .collect();
    let (first, _) = *v4.first()?;
    let mut len = v4.iter().map(|(_, l)| *l).min()?;
    while len > 0 {
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
        if v4.iter().all(|(a, _)| a & mask == first & mask) {
            break;
        }
        len -= 1;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
    Some(Prefix::new(IpAddr::V4(Ipv4Addr::from(first & mask)), len))
}

/// `export NAME=VALUE` lines, shell-quoted, with the notes as comments.
pub fn shell(env: &NcclEnv) -> String {
    let mut out: Vec<String> = env.notes.iter().map(|n| format!("# {n}")).collect();
    out.extend(env.variables.iter().map(|v| format!("export {}={}", v.name, crate::render::quote(&v.value))));
    out.push(String::new());
    out.join("\n")
}

/// `/etc/nccl.conf` lines: `NAME=VALUE`, nothing else (NCCL's reader
/// takes every line with a `=` as a variable, comments included).
pub fn nccl_conf(env: &NcclEnv) -> String {
    let mut out: Vec<String> = env.variables.iter().map(|v| format!("{}={}", v.name, v.value)).collect();
    out.push(String::new());
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::prefix;
    use crate::rdma::{Gid, GidKind, Netdev, State, Via};

    fn gid(index: u32, ip: &str, kind: GidKind, ndev: &str) -> Gid {
        let gid = match ip.parse::<IpAddr>().unwrap() {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        };
        Gid { index, gid, kind: Some(kind), ndev: Some(ndev.into()) }
    }

    fn roce(device: &str, netdev: &str, v4: &[(&str, u32)]) -> Port {
        let mut gids = vec![gid(0, "fe80::1", GidKind::V1, netdev), gid(1, "fe80::1", GidKind::V2, netdev)];
        for (a, i) in v4 {
            gids.push(gid(*i - 1, a, GidKind::V1, netdev));
            gids.push(gid(*i, a, GidKind::V2, netdev));
        }
        Port {
            device: device.into(),
            port: 1,
            link_layer: "Ethernet".into(),
            state: State { code: 4, name: "ACTIVE".into() },
            phys_state: State { code: 5, name: "LinkUp".into() },
            rate: None,
            gids,
            netdevs: vec![Netdev { name: netdev.into(), via: Via::GidTable, pkey: None, parent: None }],
        }
    }

    fn rail(name: &str, a: &str) -> RailAddrs {
        RailAddrs { name: name.into(), addresses: vec![prefix(a)] }
    }

    fn var<'a>(env: &'a NcclEnv, name: &str) -> Option<&'a str> {
        env.variables.iter().find(|v| v.name == name).map(|v| v.value.as_str())
    }

    #[test]
    fn same_index_everywhere_gives_the_index_and_exact_names() {
        let rdma = Rdma {
            ports: vec![
                roce("mlx5_1", "ens1", &[("198.51.100.11", 3)]),
                roce("mlx5_10", "ens10", &[("198.51.100.20", 3)]),
            ],
        };
        let env =
            nccl_env(&[rail("ens1", "198.51.100.11/24"), rail("ens10", "198.51.100.20/24")], &rdma).unwrap();
        assert_eq!(var(&env, "NCCL_IB_HCA"), Some("=mlx5_1:1,mlx5_10:1"));
        assert_eq!(var(&env, "NCCL_SOCKET_IFNAME"), Some("=ens1,ens10"));
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), Some("3"));
        assert_eq!(var(&env, "NCCL_IB_ADDR_RANGE"), None);
        assert!(env.warnings.is_empty(), "{:?}", env.warnings);
        assert_eq!(shell(&env).lines().filter(|l| l.starts_with("export")).count(), 3);
        assert!(shell(&env).contains("export NCCL_IB_HCA==mlx5_1:1,mlx5_10:1\n"), "{}", shell(&env));
        assert_eq!(
            nccl_conf(&env),
            "NCCL_IB_HCA==mlx5_1:1,mlx5_10:1\nNCCL_SOCKET_IFNAME==ens1,ens10\nNCCL_IB_GID_INDEX=3\n"
        );
    }

    #[test]
    fn different_indices_give_family_and_one_range() {
        let rdma = Rdma {
            ports: vec![
                roce("r0", "e0", &[("198.51.100.40", 3)]),
                roce("r1", "e1", &[("198.51.100.41", 5), ("198.51.100.141", 7)]),
            ],
        };
        let env = nccl_env(&[rail("e0", "198.51.100.40/24"), rail("e1", "198.51.100.41/24")], &rdma).unwrap();
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), None);
        assert_eq!(var(&env, "NCCL_IB_ADDR_FAMILY"), Some("AF_INET"));
        assert_eq!(var(&env, "NCCL_IB_ADDR_RANGE"), Some("198.51.100.0/24"));
        assert!(env.notes[0].contains("r0:1 198.51.100.40 at 3, r1:1 198.51.100.41 at 5"), "{:?}", env.notes);
        assert_eq!(env.warnings.len(), 1, "{:?}", env.warnings);
        assert!(
            env.warnings[0].contains("has 2 IPv4 RoCE v2 GIDs (198.51.100.41 at 5, 198.51.100.141 at 7)")
        );
        // The configured address registered second: NCCL takes the other.
        let rdma = Rdma {
            ports: vec![
                roce("r0", "e0", &[("198.51.100.40", 3)]),
                roce("r1", "e1", &[("198.51.100.141", 5), ("198.51.100.41", 7)]),
            ],
        };
        let env = nccl_env(&[rail("e0", "198.51.100.40/24"), rail("e1", "198.51.100.41/24")], &rdma).unwrap();
        assert!(
            env.warnings.iter().any(|w| w.contains("not the configured 198.51.100.41 (7)")),
            "{:?}",
            env.warnings
        );
        assert!(
            env.warnings
                .iter()
                .any(|w| w.contains("lowest IPv4 RoCE v2 GID in 198.51.100.0/24 is 198.51.100.141"))
        );
    }

    #[test]
    fn rails_without_rdma_or_gid_are_warned_and_none_is_an_error() {
        let rdma = Rdma { ports: vec![roce("mlx5_0", "e0", &[])] };
        let env =
            nccl_env(&[rail("e0", "198.51.100.40/24"), rail("eth9", "198.51.100.9/24")], &rdma).unwrap();
        assert_eq!(var(&env, "NCCL_IB_HCA"), Some("=mlx5_0:1"));
        assert!(env.warnings.iter().any(|w| w.starts_with("rail eth9 has no RDMA device")));
        assert!(
            env.warnings
                .iter()
                .any(|w| w.contains("198.51.100.40 on e0 has no RoCE v2 GID on mlx5_0 port 1"))
        );
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), None, "no index for a GID that does not exist");
        let e = nccl_env(&[rail("eth9", "198.51.100.9/24")], &rdma).unwrap_err();
        assert!(e.to_string().starts_with("none of the rails of the config has an RDMA device (eth9)"));
    }

    #[test]
    fn covering_cidr() {
        assert_eq!(covering(&[prefix("198.51.100.0/24")]).unwrap(), prefix("198.51.100.0/24"));
        assert_eq!(
            covering(&[prefix("198.51.100.0/25"), prefix("198.51.100.128/25")]).unwrap(),
            prefix("198.51.100.0/24")
        );
        assert_eq!(
            covering(&[prefix("198.51.100.0/24"), prefix("203.0.113.0/24")]).unwrap(),
            prefix("192.0.0.0/4")
        );
        assert_eq!(covering(&[]), None);
    }
}
