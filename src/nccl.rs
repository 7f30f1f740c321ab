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
//! - InfiniBand ports use GID 0 and ignore the index;
//! - `NCCL_IB_PKEY` is not a partition key but an *index* into each
//!   port's pkey table (`net_ib/connect.cc` puts it in the QPs'
//!   `pkey_index`; default 0, normally the default partition 0xffff), one
//!   for every HCA. A rail on a partition child (`ib0.8001`) needs the
//!   index of its partition, found as the kernel finds it for the child
//!   itself (`ib_find_pkey()`); without it NCCL's traffic leaves the
//!   rail's partition.
//!
//! GID indices move (the kernel gives a new entry the first free slot), so
//! they are computed now, never stored: run `nccl-env` where the job starts.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::model::{self, Family, Prefix};
use crate::rdma::{GidKind, LinkLayer, PkeyEntry, Port, Rdma, find_pkey, parse_pkey};

/// The pkey table of each port (by `Port::hca`), or why it could not be
/// read; a port not in it was not read.
pub type PkeyTables = BTreeMap<String, Result<Vec<PkeyEntry>, String>>;

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
    pub link_layer: Option<LinkLayer>,
    /// The configured IPv4 address NCCL should use (RoCE), and its RoCE v2
    /// GID index now.
    pub address: Option<IpAddr>,
    pub gid_index: Option<u32>,
    /// An InfiniBand rail's partition key (its IPoIB netdev's `pkey`), and
    /// that partition's index in its port's pkey table now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkey: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkey_index: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "none of the rails of the config has an RDMA device ({0}); NCCL would not use them for RDMA. \
     `roce-route discover` lists the RDMA devices and their netdevs"
)]
pub struct NoRdmaRail(pub String);

/// The GID a RoCE port should be used with: that of its rail's first
/// IPv4 address (NCCL's default family), else its first IPv6 one.
struct Intended<'a> {
    port: &'a Port,
    rail: &'a str,
    addr: Prefix,
    /// The index of its RoCE v2 GID now; None: it has none.
    index: Option<u32>,
}

/// An InfiniBand rail's partition: its pkey, at `index` of its port's table.
struct Partition<'a> {
    port: &'a Port,
    rail: &'a str,
    pkey: u16,
    index: u32,
}

/// What the rails with an RDMA port select, gathered rail by rail.
#[derive(Default)]
struct Gathered<'a> {
    /// NCCL_IB_HCA, in the rails' order.
    hcas: Vec<String>,
    intended: Vec<Intended<'a>>,
    partitions: Vec<Partition<'a>>,
}

pub fn nccl_env(rails: &[RailAddrs], rdma: &Rdma, pkeys: &PkeyTables) -> Result<NcclEnv, NoRdmaRail> {
    let mut env = NcclEnv::default();
    let mut gathered = Gathered::default();
    for rail in rails {
        let shown = match rdma.port_of(&rail.name) {
            Some(port) => take_rail(&mut env, &mut gathered, rail, port, pkeys),
            None => {
                env.warnings.push(format!(
                    "rail {} has no RDMA device: it is not in NCCL_IB_HCA, and NCCL does no RDMA over it",
                    rail.name
                ));
                NcclRail::named(&rail.name)
            }
        };
        env.rails.push(shown);
    }
    let Gathered { hcas, intended, partitions } = gathered;
    let names: Vec<&str> = rails.iter().map(|r| r.name.as_str()).collect();
    if hcas.is_empty() {
        return Err(NoRdmaRail(names.join(", ")));
    }
    env.variables.push(Variable { name: "NCCL_IB_HCA", value: format!("={}", hcas.join(",")) });
    env.variables.push(Variable { name: "NCCL_SOCKET_IFNAME", value: format!("={}", names.join(",")) });
    gid_selection(&mut env, &intended);
    pkey_selection(&mut env, &partitions, rdma, &hcas, pkeys);
    Ok(env)
}

impl NcclRail {
    /// A rail without RDMA device (and the start of one with).
    fn named(name: &str) -> NcclRail {
        NcclRail {
            name: name.to_string(),
            hca: None,
            link_layer: None,
            address: None,
            gid_index: None,
            pkey: None,
            pkey_index: None,
        }
    }
}

/// A rail whose netdev is `port`'s: what it shows, and what it adds to
/// NCCL's selection (a port already taken by an earlier rail adds nothing).
fn take_rail<'a>(
    env: &mut NcclEnv,
    gathered: &mut Gathered<'a>,
    rail: &'a RailAddrs,
    port: &'a Port,
    pkeys: &PkeyTables,
) -> NcclRail {
    let mut shown =
        NcclRail { hca: Some(port.hca()), link_layer: Some(port.link_layer), ..NcclRail::named(&rail.name) };
    let pkey = (!port.is_roce())
        .then(|| port.netdevs.iter().find(|n| n.name == rail.name))
        .flatten()
        .and_then(|n| n.pkey.as_deref())
        .and_then(parse_pkey);
    shown.pkey = pkey.map(|p| format!("{p:#06x}"));
    if gathered.hcas.contains(&port.hca()) {
        // A VLAN beside its parent, a pkey child beside its parent.
        let warning = shared_port(&env.rails, rail, port, shown.pkey.as_deref());
        env.warnings.push(warning);
        return shown;
    }
    gathered.hcas.push(port.hca());
    if let Some(pkey) = pkey {
        shown.pkey_index = partition_of(env, port, &rail.name, pkey, pkeys);
        if let Some(index) = shown.pkey_index {
            gathered.partitions.push(Partition { port, rail: &rail.name, pkey, index });
        }
    }
    if !port.active() {
        env.warnings.push(format!(
            "{} (rail {}) is {} ({}): NCCL skips ports that are not ACTIVE, silently",
            port.label(),
            rail.name,
            port.state,
            port.phys_state
        ));
    }
    if port.is_roce()
        && let Some(intended) = roce_gid(env, rail, port)
    {
        shown.address = Some(intended.addr.addr);
        shown.gid_index = intended.index;
        gathered.intended.push(intended);
    }
    shown
}

/// The warning about `rail` on a port an earlier rail (of `shown`) has:
/// NCCL uses a port once.
fn shared_port(shown: &[NcclRail], rail: &RailAddrs, port: &Port, pkey: Option<&str>) -> String {
    let first_rail = shown.iter().find(|r| r.hca.as_deref() == Some(&port.hca()));
    let first = first_rail.map_or("?", |r| r.name.as_str());
    // A pkey child beside its parent (or a sibling) on another
    // partition: the port's QPs are in one partition only.
    let partition = match (first_rail.and_then(|r| r.pkey.as_deref()), pkey) {
        (Some(theirs), Some(ours)) if theirs != ours => format!(
            ", and in one partition: NCCL_IB_PKEY follows {first}'s ({theirs}), so NCCL's traffic does not stay \
             in {}'s partition {ours}",
            rail.name
        ),
        _ => String::new(),
    };
    let gid = if port.is_roce() { format!(" (the one of {first}'s address)") } else { String::new() };
    format!(
        "rails {first} and {} share {}: NCCL uses the port once, not once per netdev, with one GID{gid}{partition}",
        rail.name,
        port.label()
    )
}

/// The GID a RoCE rail should be used with, or a warning why it has none.
fn roce_gid<'a>(env: &mut NcclEnv, rail: &'a RailAddrs, port: &'a Port) -> Option<Intended<'a>> {
    let addr = rail
        .addresses
        .iter()
        .find(|a| a.addr.is_ipv4())
        .or_else(|| rail.addresses.iter().find(|a| a.addr.is_ipv6()));
    let Some(a) = addr else {
        env.warnings.push(format!(
            "rail {} ({}) has no address: RoCE needs a GID of an address of the rail",
            rail.name,
            port.label()
        ));
        return None;
    };
    let index = port.v2_gids_of(&a.addr, &rail.name).next().map(|g| g.index);
    if index.is_none() {
        env.warnings.push(format!(
            "{} on {} has no RoCE v2 GID on {}: RDMA cannot use this address (`roce-route check` says more)",
            a.addr,
            rail.name,
            port.label()
        ));
    }
    Some(Intended { port, rail: &rail.name, addr: *a, index })
}

/// The index of `pkey` in `port`'s table, or a warning why there is none.
fn partition_of(env: &mut NcclEnv, port: &Port, rail: &str, pkey: u16, pkeys: &PkeyTables) -> Option<u32> {
    let problem = match pkeys.get(&port.hca()) {
        Some(Ok(table)) if table.is_empty() => "has no pkey table in sysfs".to_string(),
        Some(Ok(table)) => match find_pkey(table, pkey) {
            Some(index) => return Some(index),
            None => {
                let have: Vec<String> =
                    table.iter().map(|e| format!("{:#06x} at {}", e.pkey, e.index)).collect();
                format!(
                    "has no entry for partition {pkey:#06x} (its table: {}): the subnet manager has not given the \
                     port this partition, so neither IPoIB nor NCCL can use it there",
                    have.join(", ")
                )
            }
        },
        Some(Err(e)) => format!("has a pkey table that cannot be read ({e})"),
        None => "has a pkey table that was not read".to_string(),
    };
    env.warnings.push(format!(
        "rail {rail} is on partition {pkey:#06x}, but {} {problem}; NCCL_IB_PKEY cannot be worked out for it",
        port.label()
    ));
    None
}

/// NCCL_IB_PKEY: the one index that puts every InfiniBand rail's QPs in
/// the rail's partition, when there is one and it is not NCCL's default 0.
fn pkey_selection(
    env: &mut NcclEnv,
    partitions: &[Partition],
    rdma: &Rdma,
    hcas: &[String],
    pkeys: &PkeyTables,
) {
    let Some(first) = partitions.first() else { return };
    let each: Vec<String> = partitions
        .iter()
        .map(|p| format!("{} {:#06x} at index {} of {}", p.rail, p.pkey, p.index, p.port.hca()))
        .collect();
    if partitions.iter().any(|p| p.index != first.index) {
        let displaced: Vec<&str> = partitions.iter().filter(|p| p.index != 0).map(|p| p.rail).collect();
        env.warnings.push(format!(
            "the InfiniBand rails' partitions are at different indices of their ports' pkey tables ({}), and \
             NCCL takes one NCCL_IB_PKEY, an index, for every HCA: none is given, so NCCL uses index 0 everywhere \
             and the traffic of {} leaves its partition; have the subnet manager put the partition at the same \
             index on every port",
            each.join(", "),
            displaced.join(", ")
        ));
        return;
    }
    let index = first.index;
    if index == 0 {
        return;
    }
    env.variables.push(Variable { name: "NCCL_IB_PKEY", value: index.to_string() });
    env.notes.push(format!(
        "NCCL_IB_PKEY is an index into each port's pkey table, not a pkey: every InfiniBand rail's partition is at \
         index {index} ({}); the tables are the subnet manager's, so run nccl-env where the job starts",
        each.join(", ")
    ));
    // The index applies to every HCA NCCL is given: RoCE ones, and
    // InfiniBand ones whose rail's partition is not known.
    let others = rdma
        .ports
        .iter()
        .filter(|p| hcas.contains(&p.hca()) && !partitions.iter().any(|q| q.port.hca() == p.hca()));
    for port in others {
        if let Some(Ok(table)) = pkeys.get(&port.hca())
            && !table.is_empty()
            && !table.iter().any(|e| e.index == index)
        {
            env.warnings.push(format!(
                "NCCL_IB_PKEY={index} applies to every HCA, and {}{} has no pkey at index {index} (its table \
                 has {}): NCCL cannot set up its connections there",
                port.label(),
                if port.is_roce() { " (RoCE)" } else { "" },
                table.len()
            ));
        }
    }
}

fn gid_selection(env: &mut NcclEnv, intended: &[Intended]) {
    if intended.is_empty() {
        if env.rails.iter().any(|r| r.link_layer == Some(LinkLayer::InfiniBand)) {
            env.notes.push(
                "no RoCE rail: InfiniBand ports use GID index 0, and NCCL ignores NCCL_IB_GID_INDEX for them"
                    .into(),
            );
        }
        return;
    }
    let missing: Vec<&Intended> = intended.iter().filter(|i| i.index.is_none()).collect();
    let found: Vec<(&Intended, u32)> = intended.iter().filter_map(|i| i.index.map(|x| (i, x))).collect();
    let mut indices: Vec<u32> = found.iter().map(|(_, x)| *x).collect();
    indices.sort_unstable();
    indices.dedup();
    if missing.is_empty() && indices.len() == 1 {
        let index = indices[0];
        env.variables.push(Variable { name: "NCCL_IB_GID_INDEX", value: index.to_string() });
        env.notes.push(format!(
            "the RoCE v2 GID of every RoCE rail's address is at index {index} now; indices move when addresses \
             change or links flap, so run nccl-env where the job starts"
        ));
        for (i, _) in &found {
            several_v4(env, i, true);
        }
        return;
    }
    let why = no_single_index(&missing, &found);
    env.notes.push(format!(
        "no single NCCL_IB_GID_INDEX fits: {why}; so NCCL (2.21 or later) selects per device by address family \
         and range instead"
    ));
    if !found.is_empty() {
        by_family(env, &found);
    }
}

/// Why the rails' GIDs have no one index: some have none, or they differ.
fn no_single_index(missing: &[&Intended], found: &[(&Intended, u32)]) -> String {
    if missing.is_empty() {
        let per_device: Vec<String> =
            found.iter().map(|(i, x)| format!("{} {} at {x}", i.port.hca(), i.addr.addr)).collect();
        format!(
            "the RoCE v2 GIDs of the rails' addresses are at different indices ({}), and NCCL takes one index for \
             every HCA",
            per_device.join(", ")
        )
    } else {
        let lacking: Vec<String> = missing.iter().map(|i| format!("{} on {}", i.addr.addr, i.rail)).collect();
        format!(
            "{} {} no RoCE v2 GID (see the warnings)",
            lacking.join(", "),
            if lacking.len() == 1 { "has" } else { "have" }
        )
    }
}

/// NCCL_IB_ADDR_FAMILY and NCCL_IB_ADDR_RANGE for the rails whose GID was
/// `found`, and where NCCL's choice differs from the config.
fn by_family(env: &mut NcclEnv, found: &[(&Intended, u32)]) {
    // One family for all HCAs: IPv4 where any rail has it.
    let family = if found.iter().any(|(i, _)| i.addr.addr.is_ipv4()) { "AF_INET" } else { "AF_INET6" };
    let in_family = |(i, _): &&(&Intended, u32)| Family::of(&i.addr.addr).af_name() == family;
    let chosen: Vec<&(&Intended, u32)> = found.iter().filter(in_family).collect();
    let other: Vec<&(&Intended, u32)> = found.iter().filter(|f| !in_family(f)).collect();
    if !other.is_empty() {
        let names: Vec<&str> = other.iter().map(|(i, _)| i.rail).collect();
        env.warnings.push(format!(
            "NCCL_IB_ADDR_FAMILY is one family for every HCA: {family} is given, so {} (IPv6 only) get no GID from \
             NCCL's selection; give them an IPv4 address",
            names.join(", ")
        ));
    }
    env.variables.push(Variable { name: "NCCL_IB_ADDR_FAMILY", value: family.into() });
    let subnets: Vec<Prefix> = chosen.iter().map(|(i, _)| i.addr.network()).collect();
    let range = covering(&subnets).filter(|r| r.len > 0);
    match range {
        Some(r) => env.variables.push(Variable { name: "NCCL_IB_ADDR_RANGE", value: r.to_string() }),
        None => env.notes.push(
            "no NCCL_IB_ADDR_RANGE: the rails' subnets have no common prefix, and NCCL takes one range only"
                .into(),
        ),
    }
    for (i, index) in &chosen {
        several_v4(env, i, false);
        let lowest = i
            .port
            .gids
            .iter()
            // NCCL skips link-local GIDs (the default fe80:: ones).
            .filter(|g| {
                g.kind == Some(GidKind::V2)
                    && Family::of(&g.ip()).af_name() == family
                    && !model::is_v6_link_local(g.ip())
            })
            .find(|g| range.is_none_or(|r| r.contains(&g.ip())));
        if let Some(g) = lowest.filter(|g| g.index != *index) {
            env.warnings.push(format!(
                "on {} the lowest-index {family} RoCE v2 GID{} is {} (index {}), not the configured {} ({index}): \
                 NCCL will use that one",
                i.port.label(),
                range.map(|r| format!(" in {r}")).unwrap_or_default(),
                g.ip(),
                g.index,
                i.addr.addr
            ));
        }
    }
}

/// The warning about a port with several IPv4 RoCE v2 GIDs.
fn several_v4(env: &mut NcclEnv, i: &Intended, index_given: bool) {
    let v4: Vec<_> = i.port.v2_ipv4_gids().collect();
    if v4.len() < 2 {
        return;
    }
    let list: Vec<String> = v4.iter().map(|g| format!("{} at {}", g.ip(), g.index)).collect();
    let consequence = if v4[0].ip() == i.addr.addr {
        format!("the configured {} has the lowest index, so NCCL takes it", i.addr.addr)
    } else if index_given {
        format!(
            "NCCL_IB_GID_INDEX selects the configured {}; without it NCCL would take the lowest index, {} ({})",
            i.addr.addr,
            v4[0].index,
            v4[0].ip()
        )
    } else {
        format!(
            "NCCL's automatic selection takes the lowest index in its range, which may not be the configured {}",
            i.addr.addr
        )
    };
    env.warnings.push(format!(
        "{} has {} IPv4 RoCE v2 GIDs ({}): {consequence}",
        i.port.label(),
        v4.len(),
        list.join(", ")
    ));
}

/// The smallest CIDR holding all of `subnets` (all of one family).
pub fn covering(subnets: &[Prefix]) -> Option<Prefix> {
    let first = subnets.first()?;
    let nets: Vec<ipnet::IpNet> =
        subnets.iter().filter(|p| p.family() == first.family()).map(Prefix::ipnet).collect();
    let mut net = first.ipnet().trunc();
    while !nets.iter().all(|n| net.contains(n)) {
        net = net.supernet()?;
    }
    Some(Prefix::new(net.addr(), net.prefix_len()))
}

/// `export NAME=VALUE` lines, shell-quoted, with the notes as comments.
pub fn shell(env: &NcclEnv) -> String {
    let mut out: Vec<String> = env.notes.iter().map(|n| format!("# {n}")).collect();
    // A leading `=` is quoted too: zsh's EQUALS option would expand
    // `NAME==mlx5_0:1` as a command path.
    let quote = |v: &str| {
        if v.starts_with('=') {
            format!("'{}'", v.replace('\'', "'\\''"))
        } else {
            crate::render::quote(v).into_owned()
        }
    };
    out.extend(env.variables.iter().map(|v| format!("export {}={}", v.name, quote(&v.value))));
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
    use crate::rdma::{Gid, Netdev, PhysState, PortState, Via};

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
            link_layer: LinkLayer::Ethernet,
            state: PortState::Active,
            phys_state: PhysState::LinkUp,
            rate: None,
            gids,
            netdevs: vec![Netdev { name: netdev.into(), via: Via::GidTable, pkey: None, parent: None }],
        }
    }

    /// No pkey table read (RoCE-only cases).
    fn none() -> PkeyTables {
        PkeyTables::new()
    }

    /// An InfiniBand port whose IPoIB netdev is `netdev`, on partition
    /// `pkey` (a child of `ib0` unless it is the default 0xffff).
    fn ib(device: &str, netdev: &str, pkey: &str) -> Port {
        let gid0 = Gid {
            index: 0,
            gid: "fe80::ec0d:9a03:a4:3b5e".parse().unwrap(),
            kind: Some(GidKind::V1),
            ndev: None,
        };
        let parent = (pkey != "0xffff").then(|| "ib0".to_string());
        Port {
            device: device.into(),
            port: 1,
            link_layer: LinkLayer::InfiniBand,
            state: PortState::Active,
            phys_state: PhysState::LinkUp,
            rate: None,
            gids: vec![gid0],
            netdevs: vec![Netdev {
                name: netdev.into(),
                via: Via::PortGuid,
                pkey: Some(pkey.into()),
                parent,
            }],
        }
    }

    /// Pkey tables by HCA: `(hca, [(index, pkey)])`.
    fn tables(t: &[(&str, &[(u32, u16)])]) -> PkeyTables {
        t.iter()
            .map(|(hca, entries)| {
                (
                    hca.to_string(),
                    Ok(entries.iter().map(|&(index, pkey)| PkeyEntry { index, pkey }).collect()),
                )
            })
            .collect()
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
            nccl_env(&[rail("ens1", "198.51.100.11/24"), rail("ens10", "198.51.100.20/24")], &rdma, &none())
                .unwrap();
        assert_eq!(var(&env, "NCCL_IB_HCA"), Some("=mlx5_1:1,mlx5_10:1"));
        assert_eq!(var(&env, "NCCL_SOCKET_IFNAME"), Some("=ens1,ens10"));
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), Some("3"));
        assert_eq!(var(&env, "NCCL_IB_ADDR_RANGE"), None);
        assert!(env.warnings.is_empty(), "{:?}", env.warnings);
        assert_eq!(shell(&env).lines().filter(|l| l.starts_with("export")).count(), 3);
        assert!(shell(&env).contains("export NCCL_IB_HCA='=mlx5_1:1,mlx5_10:1'\n"), "{}", shell(&env));
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
        let env = nccl_env(&[rail("e0", "198.51.100.40/24"), rail("e1", "198.51.100.41/24")], &rdma, &none())
            .unwrap();
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
        let env = nccl_env(&[rail("e0", "198.51.100.40/24"), rail("e1", "198.51.100.41/24")], &rdma, &none())
            .unwrap();
        assert!(
            env.warnings.iter().any(|w| w.contains("not the configured 198.51.100.41 (7)")),
            "{:?}",
            env.warnings
        );
        assert!(
            env.warnings
                .iter()
                .any(|w| w.contains("lowest-index AF_INET RoCE v2 GID in 198.51.100.0/24 is 198.51.100.141"))
        );
    }

    #[test]
    fn rails_without_rdma_or_gid_are_warned_and_none_is_an_error() {
        let rdma = Rdma { ports: vec![roce("mlx5_0", "e0", &[])] };
        let env =
            nccl_env(&[rail("e0", "198.51.100.40/24"), rail("eth9", "198.51.100.9/24")], &rdma, &none())
                .unwrap();
        assert_eq!(var(&env, "NCCL_IB_HCA"), Some("=mlx5_0:1"));
        assert!(env.warnings.iter().any(|w| w.starts_with("rail eth9 has no RDMA device")));
        assert!(
            env.warnings
                .iter()
                .any(|w| w.contains("198.51.100.40 on e0 has no RoCE v2 GID on mlx5_0 port 1"))
        );
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), None, "no index for a GID that does not exist");
        let e = nccl_env(&[rail("eth9", "198.51.100.9/24")], &rdma, &none()).unwrap_err();
        assert!(e.to_string().starts_with("none of the rails of the config has an RDMA device (eth9)"));
    }

    fn with_v6(mut p: Port, netdev: &str, v6: &[(&str, u32)]) -> Port {
        for (a, i) in v6 {
            p.gids.push(gid(*i - 1, a, GidKind::V1, netdev));
            p.gids.push(gid(*i, a, GidKind::V2, netdev));
        }
        p.gids.sort_by_key(|g| g.index);
        p
    }

    /// RoCE rails with IPv6 only: their GIDs, in family AF_INET6 when the
    /// indices differ; never "no RoCE rail".
    #[test]
    fn ipv6_only_rails() {
        let rdma = Rdma {
            ports: vec![
                with_v6(roce("m0", "e0", &[]), "e0", &[("2001:db8:1::10", 3)]),
                with_v6(roce("m1", "e1", &[]), "e1", &[("2001:db8:1::11", 5)]),
            ],
        };
        let env =
            nccl_env(&[rail("e0", "2001:db8:1::10/64"), rail("e1", "2001:db8:1::11/64")], &rdma, &none())
                .unwrap();
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), None);
        assert_eq!(var(&env, "NCCL_IB_ADDR_FAMILY"), Some("AF_INET6"));
        assert_eq!(var(&env, "NCCL_IB_ADDR_RANGE"), Some("2001:db8:1::/64"));
        assert!(!env.notes.iter().any(|n| n.contains("no RoCE rail")), "{:?}", env.notes);
        // The same index on both: the index, whatever the family.
        let rdma = Rdma {
            ports: vec![
                with_v6(roce("m0", "e0", &[]), "e0", &[("2001:db8:1::10", 3)]),
                roce("m1", "e1", &[("198.51.100.11", 3)]),
            ],
        };
        let env =
            nccl_env(&[rail("e0", "2001:db8:1::10/64"), rail("e1", "198.51.100.11/24")], &rdma, &none())
                .unwrap();
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), Some("3"));
        // Different indices and families: one family for all, said.
        let rdma = Rdma {
            ports: vec![
                with_v6(roce("m0", "e0", &[]), "e0", &[("2001:db8:1::10", 5)]),
                roce("m1", "e1", &[("198.51.100.11", 3)]),
            ],
        };
        let env =
            nccl_env(&[rail("e0", "2001:db8:1::10/64"), rail("e1", "198.51.100.11/24")], &rdma, &none())
                .unwrap();
        assert_eq!(var(&env, "NCCL_IB_ADDR_FAMILY"), Some("AF_INET"));
        assert_eq!(var(&env, "NCCL_IB_ADDR_RANGE"), Some("198.51.100.0/24"));
        assert!(
            env.warnings.iter().any(|w| w.contains("so e0 (IPv6 only) get no GID")),
            "{:?}",
            env.warnings
        );
    }

    /// NCCL skips link-local GIDs: the default fe80:: GIDs at 0/1 are not
    /// "the lowest AF_INET6 GID" it would take.
    #[test]
    fn ipv6_selection_ignores_link_local_gids() {
        let rdma = Rdma {
            ports: vec![
                with_v6(roce("m0", "e0", &[]), "e0", &[("2001:db8:1::10", 3)]),
                // A unique local address: no prefix in common with
                // 2001:db8::, so no range narrows the choice (a pure test:
                // nothing is configured anywhere).
                with_v6(roce("m1", "e1", &[]), "e1", &[("fd00:db8::11", 5)]),
            ],
        };
        let env = nccl_env(&[rail("e0", "2001:db8:1::10/64"), rail("e1", "fd00:db8::11/64")], &rdma, &none())
            .unwrap();
        assert_eq!(var(&env, "NCCL_IB_ADDR_FAMILY"), Some("AF_INET6"));
        assert_eq!(var(&env, "NCCL_IB_ADDR_RANGE"), None);
        assert!(env.warnings.is_empty(), "{:?}", env.warnings);
    }

    /// A VLAN beside its parent on one port: one HCA, one GID, a warning;
    /// not "different indices" of one device.
    #[test]
    fn two_rails_on_one_port() {
        let mut p = roce("mlx5_2", "e2", &[("198.51.100.12", 3)]);
        p.gids.push(gid(4, "198.51.100.112", GidKind::V1, "e2.100"));
        p.gids.push(gid(5, "198.51.100.112", GidKind::V2, "e2.100"));
        p.netdevs.push(Netdev { name: "e2.100".into(), via: Via::GidTable, pkey: None, parent: None });
        let rdma = Rdma { ports: vec![p, roce("mlx5_3", "e3", &[("198.51.100.13", 3)])] };
        let env = nccl_env(
            &[
                rail("e2", "198.51.100.12/24"),
                rail("e2.100", "198.51.100.112/24"),
                rail("e3", "198.51.100.13/24"),
            ],
            &rdma,
            &none(),
        )
        .unwrap();
        assert_eq!(var(&env, "NCCL_IB_HCA"), Some("=mlx5_2:1,mlx5_3:1"));
        assert_eq!(var(&env, "NCCL_IB_GID_INDEX"), Some("3"));
        assert!(
            env.warnings.iter().any(|w| w.starts_with("rails e2 and e2.100 share mlx5_2 port 1")),
            "{:?}",
            env.warnings
        );
    }

    #[test]
    fn no_range_without_a_common_prefix() {
        let rdma = Rdma {
            ports: vec![roce("m0", "e0", &[("10.0.0.1", 3)]), roce("m1", "e1", &[("198.51.100.11", 5)])],
        };
        let env =
            nccl_env(&[rail("e0", "10.0.0.1/8"), rail("e1", "198.51.100.11/24")], &rdma, &none()).unwrap();
        assert_eq!(var(&env, "NCCL_IB_ADDR_RANGE"), None);
        assert!(env.notes.iter().any(|n| n.starts_with("no NCCL_IB_ADDR_RANGE")), "{:?}", env.notes);
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
        assert_eq!(
            covering(&[prefix("2001:db8:1::/64"), prefix("2001:db8:2::/64")]).unwrap(),
            prefix("2001:db8::/46")
        );
    }

    // --- NCCL_IB_PKEY ---

    /// Partition children whose partition is at index 1 of both ports'
    /// tables: NCCL_IB_PKEY is 1 (the index), not 0x8001 (the pkey); found
    /// as ib_find_pkey finds it (the full member at 1, not the limited
    /// entry of the same partition at 3, nor the default at 0).
    #[test]
    fn partition_children_give_the_index_of_their_pkey() {
        let rdma =
            Rdma { ports: vec![ib("ibp59s0", "ib0.8001", "0x8001"), ib("ibp60s0", "ib1.8001", "0x8001")] };
        let t = tables(&[
            ("ibp59s0:1", &[(0, 0xffff), (1, 0x8001), (3, 0x0001)]),
            ("ibp60s0:1", &[(0, 0xffff), (1, 0x8001)]),
        ]);
        let rails = [rail("ib0.8001", "198.51.100.30/24"), rail("ib1.8001", "198.51.100.31/24")];
        let env = nccl_env(&rails, &rdma, &t).unwrap();
        assert_eq!(var(&env, "NCCL_IB_PKEY"), Some("1"));
        assert!(env.warnings.is_empty(), "{:?}", env.warnings);
        assert!(
            env.notes.iter().any(|n| n.contains("ib0.8001 0x8001 at index 1 of ibp59s0:1")),
            "{:?}",
            env.notes
        );
        assert_eq!((env.rails[0].pkey.as_deref(), env.rails[0].pkey_index), (Some("0x8001"), Some(1)));
        assert!(nccl_conf(&env).contains("\nNCCL_IB_PKEY=1\n"), "{}", nccl_conf(&env));
        // The pkey table decides, not the pkey: at index 4, 4 is given.
        let t =
            tables(&[("ibp59s0:1", &[(0, 0xffff), (4, 0x8001)]), ("ibp60s0:1", &[(0, 0xffff), (4, 0x8001)])]);
        assert_eq!(var(&nccl_env(&rails, &rdma, &t).unwrap(), "NCCL_IB_PKEY"), Some("4"));
    }

    /// Rails on the default partition need nothing: NCCL's default is index 0.
    #[test]
    fn the_default_partition_at_index_0_gives_no_variable() {
        let rdma = Rdma { ports: vec![ib("mlx5_0", "ib0", "0xffff")] };
        let t = tables(&[("mlx5_0:1", &[(0, 0xffff), (1, 0x8001)])]);
        let env = nccl_env(&[rail("ib0", "198.51.100.10/24")], &rdma, &t).unwrap();
        assert_eq!(var(&env, "NCCL_IB_PKEY"), None);
        assert!(env.warnings.is_empty(), "{:?}", env.warnings);
        assert_eq!(env.rails[0].pkey_index, Some(0));
    }

    /// Partitions at different indices: NCCL has one NCCL_IB_PKEY, so no
    /// value fits, none is given, and the warning says which rails leave
    /// their partition. (Also when the pkeys differ: what counts is the index.)
    #[test]
    fn partitions_at_different_indices_are_a_warning_and_no_variable() {
        let rdma =
            Rdma { ports: vec![ib("ibp59s0", "ib0.8001", "0x8001"), ib("ibp60s0", "ib1.8002", "0x8002")] };
        let t = tables(&[
            ("ibp59s0:1", &[(0, 0xffff), (1, 0x8001)]),
            ("ibp60s0:1", &[(0, 0xffff), (1, 0x8001), (2, 0x8002)]),
        ]);
        let rails = [rail("ib0.8001", "198.51.100.30/24"), rail("ib1.8002", "198.51.100.31/24")];
        let env = nccl_env(&rails, &rdma, &t).unwrap();
        assert_eq!(var(&env, "NCCL_IB_PKEY"), None);
        assert_eq!(env.warnings.len(), 1, "{:?}", env.warnings);
        let w = &env.warnings[0];
        assert!(
            w.contains("ib0.8001 0x8001 at index 1 of ibp59s0:1, ib1.8002 0x8002 at index 2 of ibp60s0:1"),
            "{w}"
        );
        assert!(w.contains("the traffic of ib0.8001, ib1.8002 leaves its partition"), "{w}");
        // A child beside its parent on one port: one partition only.
        let mut port = ib("ibp59s0", "ib0", "0xffff");
        port.netdevs.push(Netdev {
            name: "ib0.8001".into(),
            via: Via::PortGuid,
            pkey: Some("0x8001".into()),
            parent: None,
        });
        let shared = Rdma { ports: vec![port] };
        let t0 = tables(&[("ibp59s0:1", &[(0, 0xffff), (1, 0x8001)])]);
        let env =
            nccl_env(&[rail("ib0", "198.51.100.10/24"), rail("ib0.8001", "198.51.100.30/24")], &shared, &t0)
                .unwrap();
        assert_eq!(var(&env, "NCCL_IB_PKEY"), None, "ib0's default partition, index 0");
        assert!(
            env.warnings[0].ends_with(
                "with one GID, and in one partition: NCCL_IB_PKEY follows ib0's (0xffff), so NCCL's traffic does not \
                 stay in ib0.8001's partition 0x8001"
            ),
            "{:?}",
            env.warnings
        );
        // Different pkeys at the same index are fine: each port uses its own.
        let t =
            tables(&[("ibp59s0:1", &[(0, 0xffff), (1, 0x8001)]), ("ibp60s0:1", &[(0, 0xffff), (1, 0x8002)])]);
        let env = nccl_env(&rails, &rdma, &t).unwrap();
        assert_eq!(var(&env, "NCCL_IB_PKEY"), Some("1"));
        assert!(env.warnings.is_empty(), "{:?}", env.warnings);
    }

    /// A partition missing from the port's table, a table that cannot be
    /// read, and a RoCE port that has no entry at the index: each a warning.
    #[test]
    fn a_missing_partition_an_unreadable_table_and_a_roce_port_without_the_index() {
        let rdma = Rdma { ports: vec![ib("ibp59s0", "ib0.8001", "0x8001")] };
        let rails = [rail("ib0.8001", "198.51.100.30/24")];
        let env = nccl_env(&rails, &rdma, &tables(&[("ibp59s0:1", &[(0, 0xffff)])])).unwrap();
        assert_eq!(var(&env, "NCCL_IB_PKEY"), None);
        assert!(
            env.warnings[0]
                .contains("ibp59s0 port 1 has no entry for partition 0x8001 (its table: 0xffff at 0)"),
            "{:?}",
            env.warnings
        );
        let mut t = PkeyTables::new();
        t.insert("ibp59s0:1".into(), Err("cannot read /sys/...: Permission denied".into()));
        let env = nccl_env(&rails, &rdma, &t).unwrap();
        assert!(
            env.warnings[0].contains("a pkey table that cannot be read (cannot read /sys/"),
            "{:?}",
            env.warnings
        );

        let rdma = Rdma {
            ports: vec![ib("ibp59s0", "ib0.8001", "0x8001"), roce("mlx5_8", "ens5", &[("203.0.113.10", 3)])],
        };
        let t = tables(&[("ibp59s0:1", &[(0, 0xffff), (1, 0x8001)]), ("mlx5_8:1", &[(0, 0xffff)])]);
        let env = nccl_env(&[rails[0].clone(), rail("ens5", "203.0.113.10/24")], &rdma, &t).unwrap();
        assert_eq!(var(&env, "NCCL_IB_PKEY"), Some("1"));
        assert!(
            env.warnings
                .iter()
                .any(|w| w.contains("mlx5_8 port 1 (RoCE) has no pkey at index 1 (its table has 1)")),
            "{:?}",
            env.warnings
        );
    }
}
