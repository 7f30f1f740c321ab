//! Two hosts, A and B, each with N rails (veth ends), joined by a switch
//! namespace, for `probe`:
//!
//! - `OneBridge`: one bridge `br0` for every rail of both hosts, all in
//!   one subnet (198.51.100.0/24, 2001:db8:1::/64): A rail k has .10+k,
//!   B rail k .110+k (IPv6 ::10+k, ::110+k). A broadcast from any rail
//!   reaches every rail, so ARP flux and wrong-NIC replies are real.
//! - `RailOptimized`: one bridge per rail (`br<k>` holds A rail k and B
//!   rail k only), each rail its own subnet: rail k in
//!   198.51.100.32k/27 (A .32k+10, B .32k+20) and 2001:db8:1:k::/64 (A
//!   ::10, B ::20).
//! - `Routed31`, `RoutedSubnets`: the switch is a router, every peer is
//!   off-link behind the rail's gateway (see the variants).
//!
//! Every rail, veth end and bridge carries MTU 9000. DAD is off and the
//! ARP sysctls start at the kernel's defaults (0), as in `Testbed`. The
//! three namespaces and the temp dir go on drop, also while a test panics.
//! (tests/probe.rs and tests/probe_routed.rs each use part of it.)

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{
    Netns, Run, TempDir, poll_until, require_root, require_tools, roce_route_command, toml_list, toml_str,
};

pub const JUMBO: u32 = 9000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    OneBridge,
    RailOptimized,
    /// Routed rails: the switch namespace is a router (forwarding on, no
    /// bridge) with a port per host rail; each rail is its own /31 to the
    /// router's port (the leaf), IPv6 a /64 per rail, and each host's
    /// config names that port as the rail's gateway. A's rail k is
    /// 203.0.113.(4k+1)/31 (leaf .4k), B's 203.0.113.(4k+3)/31 (leaf
    /// .4k+2): every peer is off-link, reached through the leaf.
    Routed31,
    /// Routed rails, a subnet per rail and host side with the router's
    /// port as gateway: A's rail k 198.51.100.(32k+10)/27 (gateway
    /// .32k+1), B's rail k 203.0.113.(32k+20)/27 (gateway .32k+1).
    RoutedSubnets,
}

impl Topology {
    pub fn routed(self) -> bool {
        matches!(self, Topology::Routed31 | Topology::RoutedSubnets)
    }
}

/// One rail of one host.
#[derive(Clone, Debug)]
pub struct HostRail {
    pub name: String,
    /// Its veth peer in the switch namespace.
    pub port: String,
    pub v4: String,
    pub v4_len: u8,
    pub v6: Option<String>,
    pub mac: String,
    /// Routed topologies: the router's port addresses, the rail's
    /// gateways (IPv4, and IPv6 when the rail has it).
    pub gateways: Vec<String>,
}

impl HostRail {
    pub fn cidrs(&self) -> Vec<String> {
        let mut c = vec![format!("{}/{}", self.v4, self.v4_len)];
        c.extend(self.v6.iter().map(|a| format!("{a}/64")));
        c
    }
}

pub struct TwoHosts {
    pub a: Netns,
    pub b: Netns,
    pub sw: Netns,
    dir: TempDir,
    pub topology: Topology,
    pub a_rails: Vec<HostRail>,
    pub b_rails: Vec<HostRail>,
}

fn next_tag() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("rp-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

impl TwoHosts {
    pub fn build(topology: Topology, rails: usize, ipv6: bool) -> TwoHosts {
        require_root();
        require_tools();
        let tag = next_tag();
        let mut t = TwoHosts {
            a: Netns::create(format!("{tag}-a")),
            b: Netns::create(format!("{tag}-b")),
            sw: Netns::create(format!("{tag}-s")),
            dir: TempDir::create(&format!("roce-route-{tag}")),
            topology,
            a_rails: Vec::new(),
            b_rails: Vec::new(),
        };
        for h in [&t.a, &t.b, &t.sw] {
            h.disable_dad();
        }
        for h in [&t.a, &t.b] {
            h.reset_arp_sysctls();
            // No router solicitations: the rails send only what is probed.
            for conf in ["all", "default"] {
                h.set_sysctl(&format!("net/ipv6/conf/{conf}/router_solicitations"), "0");
            }
        }
        let bridges: Vec<String> = match topology {
            Topology::OneBridge => vec!["br0".into()],
            Topology::RailOptimized => (0..rails).map(|k| format!("br{k}")).collect(),
            Topology::Routed31 | Topology::RoutedSubnets => {
                for key in ["net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"] {
                    t.sw.set_sysctl(key, "1");
                }
                Vec::new()
            }
        };
        for br in &bridges {
            t.sw.ip(&format!("link add {br} type bridge mcast_snooping 0"));
            t.sw.ip(&format!("link set {br} mtu {JUMBO} up"));
        }
        for k in 0..rails {
            // One bridge for all rails, one per rail, or none (routed).
            let br = match topology {
                Topology::OneBridge => "br0",
                _ => bridges.get(k).map_or("", String::as_str),
            };
            let a = t.add_rail("a", k, br, ipv6);
            t.a_rails.push(a);
            let b = t.add_rail("b", k, br, ipv6);
            t.b_rails.push(b);
        }
        for br in &bridges {
            t.sw.ip(&format!("link set {br} mtu {JUMBO}"));
        }
        t.wait_ready();
        t
    }

    /// Host rail k of `side` ("a" or "b") on `bridge`.
    fn add_rail(&self, side: &str, k: usize, bridge: &str, ipv6: bool) -> HostRail {
        let host = if side == "a" { &self.a } else { &self.b };
        let name = format!("rail{k}");
        let port = format!("{side}{k}");
        host.ip(&format!("link add {name} type veth peer name {port} netns {}", self.sw.name()));
        host.ip(&format!("link set {name} mtu {JUMBO}"));
        if bridge.is_empty() {
            self.sw.ip(&format!("link set {port} mtu {JUMBO} up"));
        } else {
            self.sw.ip(&format!("link set {port} mtu {JUMBO} master {bridge} up"));
        }
        let side_n = usize::from(side != "a");
        let mut gateways = Vec::new();
        let (v4, v4_len, v6) = match (self.topology, side) {
            (Topology::Routed31, _) => {
                let leaf = format!("203.0.113.{}", 4 * k + 2 * side_n);
                let v6_net = format!("2001:db8:{side}:{k}");
                self.sw.ip(&format!("addr add {leaf}/31 dev {port}"));
                self.sw.ip(&format!("addr add {v6_net}::ff/64 dev {port} nodad"));
                gateways = vec![leaf, format!("{v6_net}::ff")];
                (format!("203.0.113.{}", 4 * k + 2 * side_n + 1), 31, format!("{v6_net}::1"))
            }
            (Topology::RoutedSubnets, _) => {
                let net = if side == "a" { "198.51.100" } else { "203.0.113" };
                let v6_net = format!("2001:db8:{side}:{k}");
                self.sw.ip(&format!("addr add {net}.{}/27 dev {port}", 32 * k + 1));
                self.sw.ip(&format!("addr add {v6_net}::1/64 dev {port} nodad"));
                gateways = vec![format!("{net}.{}", 32 * k + 1), format!("{v6_net}::1")];
                (
                    format!("{net}.{}", 32 * k + 10 + 10 * side_n),
                    27,
                    format!("{v6_net}::{}", 10 + 10 * side_n),
                )
            }
            (Topology::OneBridge, "a") => {
                (format!("198.51.100.{}", 10 + k), 24, format!("2001:db8:1::{}", 10 + k))
            }
            (Topology::OneBridge, _) => {
                (format!("198.51.100.{}", 110 + k), 24, format!("2001:db8:1::{}", 110 + k))
            }
            (Topology::RailOptimized, "a") => {
                (format!("198.51.100.{}", 32 * k + 10), 27, format!("2001:db8:1:{k}::10"))
            }
            (Topology::RailOptimized, _) => {
                (format!("198.51.100.{}", 32 * k + 20), 27, format!("2001:db8:1:{k}::20"))
            }
        };
        host.ip(&format!("addr add {v4}/{v4_len} dev {name}"));
        let v6 = ipv6.then_some(v6);
        if let Some(v6) = &v6 {
            host.ip(&format!("addr add {v6}/64 dev {name} nodad"));
        }
        gateways.truncate(if ipv6 { 2 } else { 1 });
        host.ip(&format!("link set {name} up"));
        let mac = host.read_file(&format!("/sys/class/net/{name}/address"));
        HostRail { name, port, v4, v4_len, v6, mac, gateways }
    }

    fn wait_ready(&self) {
        poll_until("the two hosts' rails to come up", Duration::from_secs(10), || {
            let ports: Vec<String> = self
                .a_rails
                .iter()
                .chain(&self.b_rails)
                .map(|r| format!("/sys/class/net/{}/brport/state", r.port))
                .collect();
            let up = |h: &Netns, rails: &[HostRail]| {
                let paths: Vec<String> =
                    rails.iter().map(|r| format!("/sys/class/net/{}/operstate", r.name)).collect();
                h.read_files(&paths).iter().all(|s| s == "up")
            };
            up(&self.a, &self.a_rails)
                && up(&self.b, &self.b_rails)
                && if self.topology.routed() {
                    let ports: Vec<String> = self
                        .a_rails
                        .iter()
                        .chain(&self.b_rails)
                        .map(|r| format!("/sys/class/net/{}/operstate", r.port))
                        .collect();
                    self.sw.read_files(&ports).iter().all(|s| s == "up")
                } else {
                    self.sw.read_files(&ports).iter().all(|s| s == "3")
                }
        });
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The standard config of a host's rails (table 100+k).
    pub fn config(&self, rails: &[HostRail], extra: &[&str]) -> PathBuf {
        let mut text = String::new();
        for (k, r) in rails.iter().enumerate() {
            text.push_str(&format!(
                "[[interface]]\nname = {}\naddresses = {}\ntable = {}\n",
                toml_str(&r.name),
                toml_list(&r.cidrs()),
                100 + k
            ));
            if !r.gateways.is_empty() {
                text.push_str(&format!("gateway = {}\n", toml_list(&r.gateways)));
            }
            for e in extra {
                text.push_str(e);
                text.push('\n');
            }
            text.push('\n');
        }
        let path = self.dir().join(format!("config-{}.toml", next_tag()));
        std::fs::write(&path, text).expect("write the config");
        path
    }

    pub fn a_config(&self) -> PathBuf {
        self.config(&self.a_rails, &[])
    }

    pub fn b_config(&self) -> PathBuf {
        self.config(&self.b_rails, &[])
    }

    /// `roce-route --netns <host> ARGS` with that host's own state base.
    pub fn rr(&self, host: &Netns, args: &[&str]) -> Run {
        let base = self.dir().join(format!("state-{}", host.name()));
        Run::of(roce_route_command(host.name(), &base, self.dir(), args))
    }

    /// `rr`, with the profile on (`profile_count` reads its counts).
    pub fn rr_profiled(&self, host: &Netns, args: &[&str]) -> Run {
        let base = self.dir().join(format!("state-{}", host.name()));
        let mut cmd = roce_route_command(host.name(), &base, self.dir(), args);
        cmd.env("ROCE_ROUTE_PROFILE", "1");
        Run::of(cmd)
    }

    /// roce-route applied on both hosts (arp_ignore 1, arp_announce 2, a
    /// table and source rule per rail).
    pub fn apply_both(&self) {
        for (h, cfg) in [(&self.a, self.a_config()), (&self.b, self.b_config())] {
            let cfg = cfg.to_string_lossy().into_owned();
            self.rr(h, &["apply", "--no-announce", &cfg]).expect_code(0);
        }
    }

    /// B's `probe --self --json`, written to a file for A's --peers.
    pub fn b_self_file(&self) -> PathBuf {
        let cfg = self.b_config().to_string_lossy().into_owned();
        let run = self.rr(&self.b, &["--json", "probe", &cfg, "--self"]).expect_code(0);
        let path = self.dir().join(format!("b-self-{}.json", next_tag()));
        std::fs::write(&path, run.stdout()).expect("write B's --self document");
        path
    }

    /// `probe --json` on A with A's config and `args`, parsed.
    pub fn probe_a(&self, args: &[&str]) -> (Run, serde_json::Value) {
        self.probe_a_with(args, &[])
    }

    /// `probe_a` with these variables in its environment.
    pub fn probe_a_with(&self, args: &[&str], env: &[(&str, &str)]) -> (Run, serde_json::Value) {
        let cfg = self.a_config().to_string_lossy().into_owned();
        let mut all = vec!["--json", "probe", cfg.as_str()];
        all.extend(args);
        let base = self.dir().join(format!("state-{}", self.a.name()));
        let mut cmd = roce_route_command(self.a.name(), &base, self.dir(), &all);
        cmd.envs(env.iter().copied());
        let run = Run::of(cmd);
        run.expect_no_panic();
        let doc: serde_json::Value = serde_json::from_str(&run.stdout())
            .unwrap_or_else(|e| panic!("probe --json is not JSON ({e}):\n{}", run.report()));
        (run, doc)
    }

    /// tx_packets of A's rails, read at one moment.
    pub fn a_tx(&self) -> Vec<u64> {
        let paths: Vec<String> =
            self.a_rails.iter().map(|r| format!("/sys/class/net/{}/statistics/tx_packets", r.name)).collect();
        self.a.read_files(&paths).iter().map(|v| v.parse().expect("tx_packets")).collect()
    }
}
