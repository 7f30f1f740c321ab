//! The RDMA devices of the host, read from sysfs (`class/infiniband`), and
//! which netdev each port is, mapped as Mellanox's `ibdev2netdev` does:
//!
//! - RoCE (`link_layer` Ethernet): the netdevs named by the port's GID
//!   table (`gid_attrs/ndevs/<i>`; index 0 is the port's own netdev, VLANs
//!   follow with their addresses' GIDs);
//! - InfiniBand: the IPoIB netdevs whose 20-byte hardware address ends with
//!   the port GUID (the last 8 bytes of `gids/0`), pkey children included;
//! - otherwise the PCI function's `device/net/` (with `dev_port` telling
//!   the ports of a two-port function apart).
//!
//! Device names are never assumed (`mlx5_0`, `rocep193s0f0`, `ibp12s0` all
//! occur). GID indices are read each time they are needed and never
//! stored: the kernel gives a new entry the first free slot, so they move.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use serde::Serialize;

use crate::model::{HwAddr, Link, LinkType};
use crate::sysfs::{Sysfs, SysfsError};
#[cfg(test)]
use nix::libc;

#[derive(Debug, thiserror::Error)]
pub enum RdmaError {
    #[error(transparent)]
    Read(#[from] SysfsError),
    /// A file whose contents are not in the kernel's format.
    #[error("{path}: {what}; this is not what the kernel writes there (a damaged or hand-made sysfs copy?)")]
    Malformed { path: String, what: String },
    /// RDMA netlink, asked which ports are this namespace's, did not answer.
    #[error(
        "cannot ask RDMA netlink which RDMA ports have their netdev in this network namespace: {0}; \
         RoCE ports cannot be told from other namespaces' devices of the same netdev names (is ib_core loaded?)"
    )]
    Netlink(String),
}

/// A port's `link_layer`, as link_layer_show() (drivers/infiniband/core/
/// sysfs.c) writes it; a port without the file is InfiniBand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum LinkLayer {
    InfiniBand,
    /// RoCE.
    Ethernet,
    /// IB_LINK_LAYER_UNSPECIFIED.
    Unknown,
}

impl LinkLayer {
    /// The text sysfs holds.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Unknown => "Unknown",
        }
    }
    pub fn parse(text: &str) -> Option<LinkLayer> {
        [LinkLayer::InfiniBand, LinkLayer::Ethernet, LinkLayer::Unknown]
            .into_iter()
            .find(|l| l.as_str() == text)
    }
}

impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A port state as sysfs writes it (`N: NAME`): one variant per code the
/// kernel names, `Other` for a code it has no name for (printed `UNKNOWN`
/// or `<unknown>`). Never build `Other` of a named code: `from_code` does
/// the mapping. Serialized as the name.
macro_rules! kernel_state {
    ($(#[$doc:meta])* $name:ident, unnamed: $unnamed:literal, $($code:literal => $variant:ident $text:literal),+ $(,)?) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $($variant,)+
            /// A code the kernel has no name for.
            Other(u32),
        }

        impl $name {
            pub fn from_code(code: u32) -> $name {
                match code {
                    $($code => $name::$variant,)+
                    c => $name::Other(c),
                }
            }
            pub fn code(self) -> u32 {
                match self {
                    $($name::$variant => $code,)+
                    $name::Other(c) => c,
                }
            }
            /// The kernel's name (`ACTIVE`, `LinkUp`).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                    $name::Other(_) => $unnamed,
                }
            }
            /// `N: NAME` where NAME is the kernel's name of N; a code the
            /// kernel has no name for reads `N: UNKNOWN` or `N: <unknown>`.
            pub fn parse(text: &str) -> Option<$name> {
                let (code, name) = text.split_once(": ")?;
                let state = $name::from_code(code.trim().parse().ok()?);
                let name = name.trim();
                let ok = match state {
                    $name::Other(_) => matches!(name, "UNKNOWN" | "<unknown>"),
                    known => known.name() == name,
                };
                ok.then_some(state)
            }
            /// The kernel's table, by code, as messages list it.
            fn names() -> String {
                let max = [$($code),+].into_iter().max().unwrap_or(0);
                let names: Vec<&str> = (0..=max).map(|c| $name::from_code(c).name()).collect();
                names.join(", ")
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    };
}

kernel_state! {
    /// `ports/<p>/state`: ib_port_state_to_str().
    PortState, unnamed: "UNKNOWN",
    0 => Nop "NOP",
    1 => Down "DOWN",
    2 => Init "INIT",
    3 => Armed "ARMED",
    4 => Active "ACTIVE",
    5 => ActiveDefer "ACTIVE_DEFER",
}

kernel_state! {
    /// `ports/<p>/phys_state`: phys_state_to_str() (code 0, "no state
    /// change", is `<unknown>` there too).
    PhysState, unnamed: "<unknown>",
    1 => Sleep "Sleep",
    2 => Polling "Polling",
    3 => Disabled "Disabled",
    4 => PortConfigurationTraining "PortConfigurationTraining",
    5 => LinkUp "LinkUp",
    6 => LinkErrorRecovery "LinkErrorRecovery",
    7 => PhyTest "Phy Test",
}

/// What a port is, in one line: "InfiniBand, 400 Gb/sec (4X NDR), ACTIVE,
/// LinkUp". Carried as these facts and rendered where it is printed
/// (discover's comments, show); discover's JSON has them as fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub link_layer: LinkLayer,
    /// `400 Gb/sec (4X NDR)`.
    pub rate: Option<String>,
    pub state: PortState,
    pub phys_state: PhysState,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.link_layer {
            LinkLayer::Ethernet => f.write_str("RoCE (Ethernet)")?,
            other => write!(f, "{other}")?,
        }
        if let Some(rate) = &self.rate {
            write!(f, ", {rate}")?;
        }
        write!(f, ", {}, {}", self.state, self.phys_state)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum GidKind {
    #[serde(rename = "IB/RoCE v1")]
    V1,
    #[serde(rename = "RoCE v2")]
    V2,
}

/// One used slot of a port's GID table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Gid {
    pub index: u32,
    pub gid: Ipv6Addr,
    /// None on native InfiniBand (reading it fails with EINVAL there).
    pub kind: Option<GidKind>,
    /// The netdev the entry belongs to; None on native InfiniBand.
    pub ndev: Option<String>,
}

impl Gid {
    /// The IP address the entry stands for: IPv4 is stored as
    /// `::ffff:a.b.c.d`.
    pub fn ip(&self) -> IpAddr {
        match self.gid.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(self.gid),
        }
    }
}

/// How a port's netdev was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// `gid_attrs/ndevs` (RoCE).
    GidTable,
    /// The IPoIB hardware address ends with the port GUID.
    PortGuid,
    /// The PCI function's `device/net/`.
    PciFunction,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Netdev {
    pub name: String,
    pub via: Via,
    /// An IPoIB netdev's partition key (`0x8001` for `ib0.8001`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkey: Option<String>,
    /// The parent of an IPoIB pkey child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub device: String,
    pub port: u32,
    pub link_layer: LinkLayer,
    pub state: PortState,
    pub phys_state: PhysState,
    /// `400 Gb/sec (4X NDR)`.
    pub rate: Option<String>,
    pub gids: Vec<Gid>,
    pub netdevs: Vec<Netdev>,
}

impl Port {
    pub fn is_roce(&self) -> bool {
        self.link_layer == LinkLayer::Ethernet
    }
    /// `4: ACTIVE`: NCCL uses only active ports.
    pub fn active(&self) -> bool {
        self.state == PortState::Active
    }
    /// `5: LinkUp`.
    pub fn link_up(&self) -> bool {
        self.phys_state == PhysState::LinkUp
    }
    /// `mlx5_0:1`, as NCCL_IB_HCA names it.
    pub fn hca(&self) -> String {
        format!("{}:{}", self.device, self.port)
    }
    /// "mlx5_0 port 1".
    pub fn label(&self) -> String {
        format!("{} port {}", self.device, self.port)
    }
    /// "InfiniBand, 400 Gb/sec (4X NDR), ACTIVE, LinkUp".
    pub fn summary(&self) -> Summary {
        Summary {
            link_layer: self.link_layer,
            rate: self.rate.clone(),
            state: self.state,
            phys_state: self.phys_state,
        }
    }
    pub fn serves(&self, netdev: &str) -> bool {
        self.netdevs.iter().any(|n| n.name == netdev)
    }
    /// The RoCE v2 entries of `ip` that belong to `netdev`, lowest index
    /// first.
    pub fn v2_gids_of<'a>(&'a self, ip: &IpAddr, netdev: &'a str) -> impl Iterator<Item = &'a Gid> + 'a {
        let ip = *ip;
        self.gids
            .iter()
            .filter(move |g| g.kind == Some(GidKind::V2) && g.ip() == ip && g.ndev.as_deref() == Some(netdev))
    }
    /// Every RoCE v2 entry of an IPv4 address, lowest index first (what
    /// NCCL's automatic selection chooses from).
    pub fn v2_ipv4_gids(&self) -> impl Iterator<Item = &Gid> {
        self.gids.iter().filter(|g| g.kind == Some(GidKind::V2) && g.ip().is_ipv4())
    }
}

/// The RDMA side of the host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rdma {
    pub ports: Vec<Port>,
}

impl Rdma {
    /// The port whose netdev `name` is.
    pub fn port_of(&self, netdev: &str) -> Option<&Port> {
        self.ports.iter().find(|p| p.serves(netdev))
    }
    pub fn netdev(&self, name: &str) -> Option<&Netdev> {
        self.ports.iter().flat_map(|p| &p.netdevs).find(|n| n.name == name)
    }
}

/// One RDMA port as RDMA netlink reports it to this namespace
/// (`netlink::rdma::ports`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NsPort {
    pub device: String,
    pub port: u32,
    /// The port's netdev (ifindex, name) when it is in this namespace;
    /// None: it has none, or it is in another namespace.
    pub netdev: Option<(u32, String)>,
}

impl Rdma {
    /// Whether a port's netdev must be proven to be in this namespace:
    /// RoCE (and iWARP) ports name their netdev in `gid_attrs/ndevs` by name
    /// only, whichever namespace it is in. InfiniBand ports are matched to
    /// IPoIB netdevs by the hardware address of this namespace's links
    /// already.
    fn needs_owner(port: &Port) -> bool {
        port.link_layer != LinkLayer::InfiniBand
    }

    /// Whether any port needs RDMA netlink's word (`in_namespace`).
    pub fn needs_owners(&self) -> bool {
        self.ports.iter().any(Rdma::needs_owner)
    }

    /// Only this namespace's ports: a RoCE port is kept when RDMA netlink
    /// names its netdev to this namespace (`owners`) and that netdev is one
    /// its GID table names. In the kernel's shared RDMA netns mode
    /// every namespace sees every device; another namespace's device whose
    /// netdev has a name this one also has (`rail0` in two containers) is
    /// not this host's. A port netlink does not list (made since) is left
    /// out too: never claimed without proof. Returns the ports left out.
    pub fn in_namespace(&mut self, owners: &[NsPort]) -> Vec<Port> {
        let (mine, other): (Vec<Port>, Vec<Port>) =
            std::mem::take(&mut self.ports).into_iter().partition(|p| {
                !Rdma::needs_owner(p)
                    || owners.iter().any(|o| {
                        o.device == p.device
                            && o.port == p.port
                            && o.netdev.as_ref().is_some_and(|(_, n)| p.netdevs.iter().any(|d| &d.name == n))
                    })
            });
        self.ports = mine;
        other
    }
}

/// Reads every device and port and maps the ports to netdevs. `links`:
/// the netdevs of the namespace concerned (over rtnetlink); an IPoIB
/// netdev there is matched by its hardware address like the ones sysfs
/// lists, since `class/net` shows the namespace that mounted sysfs.
pub fn scan(fs: &dyn Sysfs, links: &[Link]) -> Result<Rdma, RdmaError> {
    scan_with(fs, links, &mut |u| Err(u.error))
}

/// `scan` for the commands that must go on when part of sysfs cannot be
/// read (check, show and apply still handle the routing): what could be
/// read, and each part that could not.
pub fn scan_lenient(fs: &dyn Sysfs, links: &[Link]) -> (Rdma, Vec<Unreadable>) {
    let mut unreadable = Vec::new();
    let rdma = scan_with(fs, links, &mut |u| {
        unreadable.push(u);
        Ok(())
    });
    // It only fails when `problem` does, which this one never does.
    (rdma.unwrap_or_default(), unreadable)
}

/// A part of sysfs that could not be read; rendered (naming the file and
/// what is left out) where it is printed.
#[derive(Debug)]
pub struct Unreadable {
    /// "RDMA device mlx5_0", "netdev ib0"; None: a listing (the path in
    /// the error says which).
    pub part: Option<String>,
    pub error: RdmaError,
    /// What is left out because of it.
    pub left_out: &'static str,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(part) = &self.part {
            write!(f, "{part}: ")?;
        }
        write!(f, "{}; {}", self.error, self.left_out)
    }
}

/// What the scan does with an unreadable part: returning the error stops
/// it; Ok goes on without that part.
type Problem<'a> = dyn FnMut(Unreadable) -> Result<(), RdmaError> + 'a;

fn unreadable(part: Option<String>, error: impl Into<RdmaError>, left_out: &'static str) -> Unreadable {
    Unreadable { part, error: error.into(), left_out }
}

fn scan_with(fs: &dyn Sysfs, links: &[Link], problem: &mut Problem) -> Result<Rdma, RdmaError> {
    let devices = match fs.list("class/infiniband") {
        Ok(devices) => devices.unwrap_or_default(),
        Err(e) => {
            problem(unreadable(None, e, "no RDMA device is read"))?;
            Vec::new()
        }
    };
    // Without an RDMA device there is no port to match a netdev to: the
    // netdevs (every one of them, a Kubernetes node's pod veths included)
    // are not read.
    if devices.is_empty() {
        return Ok(Rdma::default());
    }
    // Only an InfiniBand port is matched to netdevs by hardware address: on
    // a RoCE host the netdevs (`class/net`, a pod veth each on a Kubernetes
    // node) and the links are not read.
    let ipoib = if infiniband_port(fs, &devices) {
        match ipoib_netdevs(fs, links, problem) {
            Ok(ipoib) => ipoib,
            Err(e) => {
                problem(unreadable(None, e, "no netdev is matched to an InfiniBand port"))?;
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let mut ports = Vec::new();
    for dev in devices {
        match device(fs, &dev, &ipoib) {
            Ok(p) => ports.extend(p),
            Err(e) => {
                problem(unreadable(Some(format!("RDMA device {dev}")), e, "its ports and GIDs are not read"))?
            }
        }
    }
    Ok(Rdma { ports })
}

/// Whether the scan needs the namespace's links (`scan`'s `links`): only
/// when a port is InfiniBand (`infiniband_port`).
pub fn needs_links(fs: &dyn Sysfs) -> bool {
    let devices = fs.list("class/infiniband").ok().flatten().unwrap_or_default();
    infiniband_port(fs, &devices)
}

/// Whether a port of `devices` has a link layer other than Ethernet, as
/// `device` reads it: those ports are matched to IPoIB netdevs. A port
/// whose link layer (or a device whose ports) cannot be read counts, and
/// its error is reported where `device` reads it.
fn infiniband_port(fs: &dyn Sysfs, devices: &[String]) -> bool {
    devices.iter().any(|dev| {
        let base = format!("class/infiniband/{dev}/ports");
        match fs.list(&base) {
            Ok(ports) => ports.unwrap_or_default().iter().any(|p| {
                read_link_layer(fs, &format!("{base}/{p}/link_layer"))
                    .map_or(true, |l| l != LinkLayer::Ethernet)
            }),
            Err(_) => true,
        }
    })
}

/// The ports of one device.
fn device(fs: &dyn Sysfs, dev: &str, ipoib: &[Ipoib]) -> Result<Vec<Port>, RdmaError> {
    let mut ports = Vec::new();
    let base = format!("class/infiniband/{dev}");
    let port_numbers = fs.list(&format!("{base}/ports"))?.unwrap_or_default();
    let single_port = port_numbers.len() == 1;
    for p in port_numbers {
        let dir = format!("{base}/ports/{p}");
        let port: u32 = p.parse().map_err(|_| {
            malformed(fs, &format!("{base}/ports"), &format!("port directory {p:?} is not a number"))
        })?;
        let link_layer = read_link_layer(fs, &format!("{dir}/link_layer"))?;
        let state = read_state(fs, &format!("{dir}/state"), PortState::parse, &PortState::names())?;
        let phys_state = read_state(fs, &format!("{dir}/phys_state"), PhysState::parse, &PhysState::names())?;
        let rate = fs.read(&format!("{dir}/rate"))?.filter(|r| !r.is_empty());
        let gids = read_gids(fs, &dir)?;
        let mut netdevs = Vec::new();
        if link_layer == LinkLayer::Ethernet {
            let mut seen = BTreeSet::new();
            for g in &gids {
                if let Some(n) = &g.ndev
                    && seen.insert(n.clone())
                {
                    netdevs.push(Netdev { name: n.clone(), via: Via::GidTable, pkey: None, parent: None });
                }
            }
        } else if let Some(guid) = gids.iter().find(|g| g.index == 0).map(|g| g.gid.octets()[8..].to_vec()) {
            netdevs.extend(ipoib.iter().filter(|i| i.hw.bytes().ends_with(&guid)).map(|i| Netdev {
                name: i.name.clone(),
                via: Via::PortGuid,
                pkey: i.pkey.clone(),
                parent: i.parent.clone(),
            }));
        }
        if netdevs.is_empty() {
            netdevs = pci_netdevs(fs, &base, port, single_port)?;
        }
        ports.push(Port {
            device: dev.to_string(),
            port,
            link_layer,
            state,
            phys_state,
            rate,
            gids,
            netdevs,
        });
    }
    Ok(ports)
}

fn malformed(fs: &dyn Sysfs, rel: &str, what: &str) -> RdmaError {
    RdmaError::Malformed { path: fs.path(rel).display().to_string(), what: what.to_string() }
}

/// `4: ACTIVE`: the number, then a name the kernel uses for it (`names`,
/// the kernel's table, for the message).
fn read_state<S>(
    fs: &dyn Sysfs,
    rel: &str,
    parse: fn(&str) -> Option<S>,
    names: &str,
) -> Result<S, RdmaError> {
    let Some(text) = fs.read(rel)? else {
        return Err(malformed(fs, rel, "missing (every port has it)"));
    };
    parse(&text).ok_or_else(|| {
        malformed(fs, rel, &format!("{text:?} is not \"N: NAME\" with a state the kernel knows ({names})"))
    })
}

/// `InfiniBand` when the file is missing (as before kernels had it).
fn read_link_layer(fs: &dyn Sysfs, rel: &str) -> Result<LinkLayer, RdmaError> {
    match fs.read(rel)? {
        None => Ok(LinkLayer::InfiniBand),
        Some(text) => LinkLayer::parse(&text).ok_or_else(|| {
            malformed(fs, rel, &format!("{text:?} is none of \"InfiniBand\", \"Ethernet\" and \"Unknown\""))
        }),
    }
}

/// Exactly 8 groups of 4 hex digits, as `%pI6` prints.
pub fn parse_gid(text: &str) -> Option<Ipv6Addr> {
    let groups: Vec<&str> = text.split(':').collect();
    if groups.len() != 8 || groups.iter().any(|g| g.len() != 4 || !g.bytes().all(|b| b.is_ascii_hexdigit())) {
        return None;
    }
    text.parse().ok()
}

/// Every used slot: the zero GID and bare `fe80::` are empty (their
/// attributes read EINVAL and are never touched), and holes do not end the
/// table.
fn read_gids(fs: &dyn Sysfs, dir: &str) -> Result<Vec<Gid>, RdmaError> {
    let mut out = Vec::new();
    for i in fs.list(&format!("{dir}/gids"))?.unwrap_or_default() {
        let rel = format!("{dir}/gids/{i}");
        let Ok(index) = i.parse::<u32>() else { continue };
        let Some(text) = fs.read(&rel)? else { continue };
        let gid = parse_gid(&text).ok_or_else(|| {
            malformed(
                fs,
                &rel,
                &format!("{text:?} is not a GID (8 groups of 4 hex digits, as the kernel writes it)"),
            )
        })?;
        if gid.is_unspecified() || gid == Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0) {
            continue;
        }
        let kind_rel = format!("{dir}/gid_attrs/types/{i}");
        let kind = match fs.read(&kind_rel)?.as_deref() {
            None | Some("") => None,
            Some("IB/RoCE v1") => Some(GidKind::V1),
            Some("RoCE v2") => Some(GidKind::V2),
            Some(other) => {
                return Err(malformed(
                    fs,
                    &kind_rel,
                    &format!("{other:?} is neither \"IB/RoCE v1\" nor \"RoCE v2\""),
                ));
            }
        };
        let ndev = fs.read(&format!("{dir}/gid_attrs/ndevs/{i}"))?.filter(|n| !n.is_empty());
        out.push(Gid { index, gid, kind, ndev });
    }
    Ok(out)
}

/// An IPoIB netdev: its 20-byte hardware address (flags + QPN, subnet
/// prefix, port GUID).
struct Ipoib {
    name: String,
    hw: HwAddr,
    pkey: Option<String>,
    parent: Option<String>,
}

/// The IPoIB netdevs sysfs lists and the ones rtnetlink shows; a netdev
/// whose files cannot be read goes to `problem`.
fn ipoib_netdevs(fs: &dyn Sysfs, links: &[Link], problem: &mut Problem) -> Result<Vec<Ipoib>, RdmaError> {
    let mut out: Vec<Ipoib> = Vec::new();
    // rtnetlink's view of the namespace wins: sysfs's class/net is the
    // namespace that mounted it, where a netdev of the same name may be
    // another one. Its sysfs facts (pkey, parent) count only when the
    // namespace's netdev of that name is not a different IPoIB netdev
    // and, on the live /sys, is IPoIB at all. (A sysfs copy's class/net
    // stands for its host: its netdevs may be stand-ins.)
    let link = |name: &str| links.iter().find(|l| l.name == name);
    let rtnl_hw = |name: &str| link(name).and_then(|l| l.mac.as_ref()).filter(|h| h.ipoib().is_some());
    for name in fs.list("class/net")?.unwrap_or_default() {
        let read = |attr: &str| fs.read(&format!("class/net/{name}/{attr}"));
        let hw = match read("address") {
            Ok(a) => a.and_then(|a| a.parse::<HwAddr>().ok()),
            Err(e) => {
                problem(unreadable(Some(format!("netdev {name}")), e, NOT_MATCHED))?;
                continue;
            }
        };
        let Some(hw) = hw.filter(|h| h.ipoib().is_some()) else { continue };
        if rtnl_hw(&name).is_some_and(|h| *h != hw)
            || (fs.live() && link(&name).is_some_and(|l| l.link_type != LinkType::Infiniband))
        {
            continue;
        }
        let (pkey, parent) = match (read("pkey"), read("parent")) {
            (Ok(pkey), Ok(parent)) => (pkey, parent),
            (Err(e), _) | (_, Err(e)) => {
                problem(unreadable(Some(format!("netdev {name}")), e, NOT_MATCHED))?;
                continue;
            }
        };
        let pkey = pkey.filter(|p| !p.is_empty());
        let parent = parent.filter(|p| !p.is_empty() && *p != name);
        out.push(Ipoib { name, hw, pkey, parent });
    }
    for l in links {
        if let Some(hw) = l.mac.clone()
            && hw.ipoib().is_some()
            && !out.iter().any(|i| i.name == l.name)
        {
            out.push(Ipoib { name: l.name.clone(), hw, pkey: None, parent: None });
        }
    }
    Ok(out)
}

const NOT_MATCHED: &str = "it is not matched to an InfiniBand port";

/// One used slot of a port's partition key table (`ports/<p>/pkeys/<i>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PkeyEntry {
    pub index: u32,
    /// The 16-bit value: the partition in the low 15 bits, full
    /// membership in the top bit (0xffff: the default partition, full).
    pub pkey: u16,
}

/// A pkey as sysfs writes it (`0x%04x`: `0x8001`), or as IPoIB's `pkey`
/// attribute holds it.
pub fn parse_pkey(text: &str) -> Option<u16> {
    let hex = text.trim().strip_prefix("0x")?;
    (!hex.is_empty() && hex.len() <= 4).then(|| u16::from_str_radix(hex, 16).ok()).flatten()
}

/// The pkey table of `port` of `device`, lowest index first; empty
/// slots (0x0000, the kernel's "no entry") are left out, and a port
/// without a `pkeys` directory has an empty table.
pub fn pkey_table(fs: &dyn Sysfs, device: &str, port: u32) -> Result<Vec<PkeyEntry>, RdmaError> {
    let dir = format!("class/infiniband/{device}/ports/{port}/pkeys");
    let mut out = Vec::new();
    for i in fs.list(&dir)?.unwrap_or_default() {
        let rel = format!("{dir}/{i}");
        let Ok(index) = i.parse::<u32>() else { continue };
        let Some(text) = fs.read(&rel)? else { continue };
        let pkey = parse_pkey(&text).ok_or_else(|| {
            malformed(
                fs,
                &rel,
                &format!("{text:?} is not a pkey (0x and 4 hex digits, as the kernel writes it)"),
            )
        })?;
        if pkey & 0x7fff != 0 {
            out.push(PkeyEntry { index, pkey });
        }
    }
    out.sort_by_key(|e| e.index);
    Ok(out)
}

/// The index of `pkey`'s partition in `table`, chosen as the kernel's
/// `ib_find_pkey()` chooses it (the index an IPoIB child uses for its own
/// QPs): the partition is the low 15 bits; the first full-member entry
/// wins, else the first limited one.
pub fn find_pkey(table: &[PkeyEntry], pkey: u16) -> Option<u32> {
    let same = || table.iter().filter(|e| e.pkey & 0x7fff == pkey & 0x7fff);
    same().find(|e| e.pkey & 0x8000 != 0).or_else(|| same().next()).map(|e| e.index)
}

/// The PCI function's netdevs; of a function with several ports, the one
/// whose `dev_port` (0-based) is this port.
fn pci_netdevs(fs: &dyn Sysfs, base: &str, port: u32, single_port: bool) -> Result<Vec<Netdev>, RdmaError> {
    let mut out = Vec::new();
    for name in fs.list(&format!("{base}/device/net"))?.unwrap_or_default() {
        let dev_port =
            fs.read(&format!("{base}/device/net/{name}/dev_port"))?.and_then(|p| p.parse::<u32>().ok());
        if single_port || dev_port.is_none_or(|d| d + 1 == port) {
            out.push(Netdev { name, via: Via::PciFunction, pkey: None, parent: None });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysfs::Memory;

    const GID0_ROCE: &str = "fe80:0000:0000:0000:ec0d:9aff:fe7d:7d1a";

    fn roce_port(m: &mut Memory, dev: &str, netdev: &str) {
        let d = format!("class/infiniband/{dev}/ports/1");
        m.file(&format!("{d}/link_layer"), "Ethernet")
            .file(&format!("{d}/state"), "4: ACTIVE")
            .file(&format!("{d}/phys_state"), "5: LinkUp")
            .file(&format!("{d}/rate"), "200 Gb/sec (4X HDR)");
        for (i, gid, kind) in [
            (0, GID0_ROCE, "IB/RoCE v1"),
            (1, GID0_ROCE, "RoCE v2"),
            (2, "0000:0000:0000:0000:0000:0000:0000:0000", ""),
            (3, "0000:0000:0000:0000:0000:0000:0000:0000", ""),
            (4, "0000:0000:0000:0000:0000:ffff:c633:640a", "IB/RoCE v1"),
            (5, "0000:0000:0000:0000:0000:ffff:c633:640a", "RoCE v2"),
        ] {
            m.file(&format!("{d}/gids/{i}"), gid);
            if kind.is_empty() {
                // An empty slot: sysfs fails these reads with EINVAL; here
                // they fail with EACCES, an error, so reading them at all
                // (instead of skipping the zero GID first) fails the scan.
                m.failing(&format!("{d}/gid_attrs/types/{i}"), libc::EACCES);
                m.failing(&format!("{d}/gid_attrs/ndevs/{i}"), libc::EACCES);
            } else {
                m.file(&format!("{d}/gid_attrs/types/{i}"), kind);
                m.file(&format!("{d}/gid_attrs/ndevs/{i}"), netdev);
            }
        }
    }

    #[test]
    fn roce_port_maps_by_the_gid_table_through_holes_never_touching_empty_slots() {
        let mut m = Memory::default();
        roce_port(&mut m, "rocep193s0f0", "ens1f0np0");
        let r = scan(&m, &[]).unwrap();
        assert_eq!(r.ports.len(), 1);
        let p = &r.ports[0];
        assert_eq!(p.hca(), "rocep193s0f0:1");
        assert!(p.is_roce() && p.active() && p.link_up());
        assert_eq!(
            p.netdevs,
            [Netdev { name: "ens1f0np0".into(), via: Via::GidTable, pkey: None, parent: None }]
        );
        let gids: Vec<u32> = p.gids.iter().map(|g| g.index).collect();
        assert_eq!(gids, [0, 1, 4, 5], "empty slots skipped, the table read past the hole");
        let a: IpAddr = "198.51.100.10".parse().unwrap();
        assert_eq!(p.v2_gids_of(&a, "ens1f0np0").map(|g| g.index).collect::<Vec<_>>(), [5]);
        assert_eq!(p.v2_gids_of(&a, "other").count(), 0);
        assert_eq!(r.port_of("ens1f0np0").unwrap().device, "rocep193s0f0");
    }

    fn owner(device: &str, netdev: Option<&str>) -> NsPort {
        NsPort { device: device.into(), port: 1, netdev: netdev.map(|n| (5, n.into())) }
    }

    #[test]
    fn only_the_roce_ports_whose_netdev_netlink_puts_in_this_namespace_are_kept() {
        // Shared RDMA netns mode: host A sees its own rxa0 and host B's rxb0,
        // both on a netdev named rail0.
        let mut m = Memory::default();
        roce_port(&mut m, "rxa0", "rail0");
        roce_port(&mut m, "rxb0", "rail0");
        roce_port(&mut m, "rxnew", "rail1");
        let mut r = scan(&m, &[]).unwrap();
        assert!(r.needs_owners());
        let dropped = r.in_namespace(&[owner("rxa0", Some("rail0")), owner("rxb0", None)]);
        let kept: Vec<&str> = r.ports.iter().map(|p| p.device.as_str()).collect();
        assert_eq!(kept, ["rxa0"], "B's device and the one netlink did not list are not A's");
        let left: Vec<&str> = dropped.iter().map(|p| p.device.as_str()).collect();
        assert_eq!(left, ["rxb0", "rxnew"]);
        assert_eq!(r.port_of("rail0").unwrap().device, "rxa0");

        // A netdev of this namespace that is not the one the GID table names.
        let mut r = scan(&m, &[]).unwrap();
        r.in_namespace(&[owner("rxb0", Some("eth9"))]);
        assert!(r.ports.is_empty());
    }

    #[test]
    fn infiniband_ports_need_no_owner_from_netlink() {
        let mut m = Memory::default();
        let d = "class/infiniband/ibp12s0/ports/1";
        m.file(&format!("{d}/link_layer"), "InfiniBand")
            .file(&format!("{d}/state"), "4: ACTIVE")
            .file(&format!("{d}/phys_state"), "5: LinkUp")
            .file(&format!("{d}/gids/0"), "fe80:0000:0000:0000:0002:c903:00a1:b2c3");
        let mut r = scan(&m, &[]).unwrap();
        assert!(!r.needs_owners());
        assert!(r.in_namespace(&[]).is_empty());
        assert_eq!(r.ports.len(), 1);
    }

    #[test]
    fn infiniband_port_maps_by_guid_with_pkey_children() {
        let mut m = Memory::default();
        let d = "class/infiniband/ibp12s0/ports/1";
        m.file(&format!("{d}/link_layer"), "InfiniBand")
            .file(&format!("{d}/state"), "4: ACTIVE")
            .file(&format!("{d}/phys_state"), "5: LinkUp")
            .file(&format!("{d}/gids/0"), "fe80:0000:0000:0000:f452:1403:007b:cba1")
            .failing(&format!("{d}/gid_attrs/ndevs/0"), libc::EINVAL)
            .file(&format!("{d}/gid_attrs/types/0"), "IB/RoCE v1");
        let addr = "80:00:02:00:fe:80:00:00:00:00:00:00:f4:52:14:03:00:7b:cb:a1";
        m.file("class/net/ib0/address", addr).file("class/net/ib0/pkey", "0xffff");
        m.file("class/net/ib0.8001/address", &addr.replace("80:00:02:00", "80:00:02:48"))
            .file("class/net/ib0.8001/pkey", "0x8001")
            .file("class/net/ib0.8001/parent", "ib0");
        m.file("class/net/ib1/address", "80:00:02:00:fe:80:00:00:00:00:00:00:f4:52:14:03:00:7b:cb:a2");
        m.file("class/net/eno1/address", "52:54:00:12:34:56");
        let r = scan(&m, &[]).unwrap();
        let names: Vec<&str> = r.ports[0].netdevs.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["ib0", "ib0.8001"]);
        let child = r.netdev("ib0.8001").unwrap();
        assert_eq!((child.pkey.as_deref(), child.parent.as_deref()), (Some("0x8001"), Some("ib0")));
        assert_eq!(r.ports[0].gids[0].kind, Some(GidKind::V1));
        assert_eq!(r.ports[0].gids[0].ndev, None, "ndevs reads EINVAL on InfiniBand: no value");
        // A netdev sysfs does not list (another namespace) but rtnetlink does.
        let mut m2 = m.clone();
        m2.remove("class/net/ib0/address").remove("class/net/ib0/pkey");
        let link = Link {
            index: 9,
            name: "ib0".into(),
            admin_up: true,
            lower_up: true,
            mac: Some(addr.parse().unwrap()),
            link_type: crate::model::LinkType::Infiniband,
        };
        let r = scan(&m2, std::slice::from_ref(&link)).unwrap();
        assert!(r.ports[0].serves("ib0"));
        // sysfs shows another namespace's ib0 (another port's GUID): the
        // namespace's own ib0, as rtnetlink shows it, wins.
        let mut m3 = m.clone();
        m3.file("class/net/ib0/address", "80:00:02:00:fe:80:00:00:00:00:00:00:f4:52:14:03:00:7b:cb:ff");
        let r = scan(&m3, &[link]).unwrap();
        assert!(r.ports[0].serves("ib0"), "{:?}", r.ports[0].netdevs);
        assert_eq!(r.netdev("ib0").unwrap().pkey, None, "the other netdev's sysfs facts are not taken");
    }

    #[test]
    fn falls_back_to_the_pci_function() {
        let mut m = Memory::default();
        let d = "class/infiniband/mlx5_3";
        for port in [1, 2] {
            m.file(&format!("{d}/ports/{port}/link_layer"), "Ethernet")
                .file(&format!("{d}/ports/{port}/state"), "1: DOWN")
                .file(&format!("{d}/ports/{port}/phys_state"), "3: Disabled");
        }
        m.file(&format!("{d}/device/net/enp1s0f0/dev_port"), "0");
        m.file(&format!("{d}/device/net/enp1s0f1/dev_port"), "1");
        let r = scan(&m, &[]).unwrap();
        assert_eq!(r.ports[0].netdevs[0].name, "enp1s0f0");
        assert_eq!(r.ports[1].netdevs[0].name, "enp1s0f1");
        assert_eq!(r.ports[1].netdevs[0].via, Via::PciFunction);
        assert!(!r.ports[0].active());
    }

    #[test]
    fn malformed_contents_name_the_path() {
        let mut m = Memory::default();
        roce_port(&mut m, "mlx5_0", "ens1f0np0");
        m.file("class/infiniband/mlx5_0/ports/1/gids/5", "0000:0000:0000:0000:0000:ffff:c633:640");
        let e = scan(&m, &[]).unwrap_err().to_string();
        assert!(e.starts_with("/sys/class/infiniband/mlx5_0/ports/1/gids/5: \"0000:"), "{e}");
        assert!(e.contains("is not a GID"), "{e}");
        let mut m = Memory::default();
        roce_port(&mut m, "mlx5_0", "ens1f0np0");
        m.file("class/infiniband/mlx5_0/ports/1/state", "4: WOBBLY");
        let e = scan(&m, &[]).unwrap_err().to_string();
        assert!(e.contains("ports/1/state: \"4: WOBBLY\" is not"), "{e}");
        let mut m = Memory::default();
        roce_port(&mut m, "mlx5_0", "ens1f0np0");
        m.failing("class/infiniband/mlx5_0/ports/1/rate", libc::EACCES);
        let e = scan(&m, &[]).unwrap_err().to_string();
        assert!(e.starts_with("cannot read /sys/class/infiniband/mlx5_0/ports/1/rate"), "{e}");
    }

    #[test]
    fn gid_format_is_exact() {
        assert_eq!(
            parse_gid("0000:0000:0000:0000:0000:ffff:c633:640a")
                .unwrap()
                .to_ipv4_mapped()
                .unwrap()
                .to_string(),
            "198.51.100.10"
        );
        for bad in [
            "::ffff:198.51.100.10",
            "fe80::1",
            "0000:0000:0000:0000:0000:ffff:c633",
            "000g:0000:0000:0000:0000:ffff:c633:640a",
            "",
        ] {
            assert!(parse_gid(bad).is_none(), "{bad}");
        }
        assert_eq!(PortState::parse("4: ACTIVE"), Some(PortState::Active));
        assert!(PortState::parse("ACTIVE").is_none());
        assert!(PortState::parse("1: ACTIVE").is_none(), "the name must be the number's");
        assert_eq!(PortState::parse("9: UNKNOWN"), Some(PortState::Other(9)), "as the kernel prints it");
        assert!(PortState::parse("4: UNKNOWN").is_none(), "4 has a name: ACTIVE");
        assert_eq!(PhysState::parse("0: <unknown>").map(PhysState::code), Some(0));
        assert_eq!(PhysState::parse("7: Phy Test").unwrap().name(), "Phy Test");
    }

    /// Each code maps to its variant and back, with the kernel's name;
    /// the message lists the kernel's tables as they are.
    #[test]
    fn port_states_are_the_kernels_codes_and_names() {
        for code in 0..10 {
            assert_eq!(PortState::from_code(code).code(), code);
            assert_eq!(PhysState::from_code(code).code(), code);
        }
        assert_eq!((PortState::from_code(4), PortState::from_code(1)), (PortState::Active, PortState::Down));
        assert_eq!(
            (PhysState::from_code(5), PhysState::from_code(3)),
            (PhysState::LinkUp, PhysState::Disabled)
        );
        assert_eq!(PortState::from_code(9).to_string(), "UNKNOWN");
        assert_eq!(
            (PhysState::from_code(0).name(), PhysState::from_code(8).name()),
            ("<unknown>", "<unknown>")
        );
        assert_eq!(PortState::names(), "NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER");
        assert_eq!(
            PhysState::names(),
            "<unknown>, Sleep, Polling, Disabled, PortConfigurationTraining, LinkUp, LinkErrorRecovery, Phy Test"
        );
        assert_eq!(serde_json::to_string(&PortState::ActiveDefer).unwrap(), "\"ACTIVE_DEFER\"");
        assert_eq!(serde_json::to_string(&LinkLayer::Ethernet).unwrap(), "\"Ethernet\"");
        for l in [LinkLayer::InfiniBand, LinkLayer::Ethernet, LinkLayer::Unknown] {
            assert_eq!(LinkLayer::parse(&l.to_string()), Some(l));
        }
        assert_eq!(LinkLayer::parse("ethernet"), None, "the kernel's spelling only");
    }

    /// The line discover and show print, from the typed facts.
    #[test]
    fn a_summary_renders_the_port_as_before() {
        let mut s = Summary {
            link_layer: LinkLayer::Ethernet,
            rate: Some("200 Gb/sec (4X HDR)".into()),
            state: PortState::Active,
            phys_state: PhysState::LinkUp,
        };
        assert_eq!(s.to_string(), "RoCE (Ethernet), 200 Gb/sec (4X HDR), ACTIVE, LinkUp");
        s.link_layer = LinkLayer::InfiniBand;
        s.rate = None;
        s.state = PortState::Down;
        s.phys_state = PhysState::Polling;
        assert_eq!(s.to_string(), "InfiniBand, DOWN, Polling");
    }

    /// The lenient scan goes on past a device it cannot read, and says
    /// which part, the error and what is left out, in that order.
    #[test]
    fn an_unreadable_part_is_kept_as_facts_and_rendered_as_a_sentence() {
        let mut m = Memory::default();
        roce_port(&mut m, "mlx5_0", "ens1f0np0");
        roce_port(&mut m, "mlx5_1", "ens2f0np0");
        m.failing("class/infiniband/mlx5_0/ports/1/rate", libc::EACCES);
        let (rdma, unreadable) = scan_lenient(&m, &[]);
        assert_eq!(rdma.ports.len(), 1, "mlx5_1 is read");
        let parts: Vec<Option<&str>> = unreadable.iter().map(|u| u.part.as_deref()).collect();
        assert_eq!(parts, [Some("RDMA device mlx5_0")]);
        assert_eq!(unreadable[0].left_out, "its ports and GIDs are not read");
        assert!(matches!(unreadable[0].error, RdmaError::Read(_)));
        assert_eq!(
            unreadable[0].to_string(),
            format!(
                "RDMA device mlx5_0: cannot read /sys/class/infiniband/mlx5_0/ports/1/rate: {}; its ports and GIDs \
                 are not read",
                std::io::Error::from_raw_os_error(libc::EACCES)
            )
        );
        assert!(scan(&m, &[]).is_err(), "the strict scan stops at the first");
    }

    /// Netdevs are read only to match an InfiniBand port: without a
    /// device, or with RoCE ports only, a node with a thousand pod veths
    /// pays nothing for them on every apply (a read would report this
    /// failing one), and `needs_links` says the links are not needed.
    #[test]
    fn only_an_infiniband_port_reads_the_netdevs() {
        let mut m = Memory::default();
        m.failing("class/net/ib0/address", libc::EIO);
        m.file("class/net/cali0123456789a/address", "02:00:00:00:00:01");
        let parts = |m: &Memory| {
            let (_, unreadable) = scan_lenient(m, &[]);
            unreadable.iter().map(|u| u.part.clone()).collect::<Vec<_>>()
        };
        assert!(scan_lenient(&m, &[]).0.ports.is_empty());
        assert_eq!(parts(&m), [] as [Option<String>; 0], "no device");
        assert!(!needs_links(&m));
        roce_port(&mut m, "mlx5_0", "ens1f0np0");
        assert_eq!(parts(&m), [] as [Option<String>; 0], "a RoCE port");
        assert!(!needs_links(&m));
        m.file("class/infiniband/mlx5_1/ports/1/link_layer", "InfiniBand")
            .file("class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE");
        assert!(needs_links(&m));
        assert_eq!(parts(&m).first().cloned().flatten().as_deref(), Some("netdev ib0"), "an InfiniBand port");
        m.file("class/infiniband/mlx5_1/ports/1/link_layer", "Ethernet");
        assert!(!needs_links(&m));
        m.remove("class/infiniband/mlx5_1/ports/1/link_layer");
        assert!(needs_links(&m), "no link_layer file is InfiniBand");
        m.failing("class/infiniband/mlx5_1/ports/1/link_layer", libc::EIO);
        assert!(needs_links(&m), "an unreadable one may be");
    }

    /// A link layer the kernel does not write is a damaged copy; no file
    /// at all is InfiniBand.
    #[test]
    fn link_layer_is_read_once_and_checked() {
        let mut m = Memory::default();
        roce_port(&mut m, "mlx5_0", "ens1f0np0");
        assert_eq!(scan(&m, &[]).unwrap().ports[0].link_layer, LinkLayer::Ethernet);
        m.remove("class/infiniband/mlx5_0/ports/1/link_layer");
        assert_eq!(scan(&m, &[]).unwrap().ports[0].link_layer, LinkLayer::InfiniBand);
        m.file("class/infiniband/mlx5_0/ports/1/link_layer", "Ether");
        let e = scan(&m, &[]).unwrap_err().to_string();
        assert!(e.contains("ports/1/link_layer: \"Ether\" is none of"), "{e}");
        m.file("class/infiniband/mlx5_0/ports/1/phys_state", "5: Up");
        m.file("class/infiniband/mlx5_0/ports/1/link_layer", "Unknown");
        let e = scan(&m, &[]).unwrap_err().to_string();
        assert!(e.contains("(<unknown>, Sleep, Polling, Disabled,"), "{e}");
    }

    /// The table as the kernel's show_port_pkey() writes it (`0x%04x`),
    /// with holes and empty slots; the index is the kernel's choice.
    #[test]
    fn pkey_tables_read_and_search_as_ib_find_pkey() {
        let mut m = Memory::default();
        let dir = "class/infiniband/ibp59s0/ports/1/pkeys";
        for (i, v) in
            [(0, "0xffff"), (1, "0x0000"), (2, "0x0001"), (3, "0x8001"), (10, "0x8002"), (4, "0x7fff")]
        {
            m.file(&format!("{dir}/{i}"), v);
        }
        let t = pkey_table(&m, "ibp59s0", 1).unwrap();
        let got: Vec<(u32, u16)> = t.iter().map(|e| (e.index, e.pkey)).collect();
        assert_eq!(
            got,
            [(0, 0xffff), (2, 0x0001), (3, 0x8001), (4, 0x7fff), (10, 0x8002)],
            "0x0000 is no entry"
        );
        // The full member wins over an earlier limited entry of the partition.
        assert_eq!(find_pkey(&t, 0x8001), Some(3));
        assert_eq!(find_pkey(&t, 0x0001), Some(3), "the child's own membership bit does not matter");
        assert_eq!(find_pkey(&t, 0x8002), Some(10));
        // The default partition: 0xffff full at 0 before the limited 0x7fff.
        assert_eq!(find_pkey(&t, 0xffff), Some(0));
        assert_eq!(find_pkey(&t, 0x8003), None);
        // Only a limited entry: taken.
        assert_eq!(find_pkey(&[PkeyEntry { index: 5, pkey: 0x0004 }], 0x8004), Some(5));
        assert_eq!(pkey_table(&m, "ibp59s0", 2).unwrap(), [], "no pkeys directory");
        m.file(&format!("{dir}/5"), "8001");
        let e = pkey_table(&m, "ibp59s0", 1).unwrap_err().to_string();
        assert!(e.contains("pkeys/5: \"8001\" is not a pkey"), "{e}");
        assert_eq!(parse_pkey("0x8001\n"), Some(0x8001));
        assert_eq!((parse_pkey("0x"), parse_pkey("0x18001"), parse_pkey("ffff")), (None, None, None));
    }
}
