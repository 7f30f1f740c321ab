//! Every config in examples/ parses and validates, and says what its
//! comments say it does.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use roce_route::config::{self, Config};
use roce_route::model::SysctlKey;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// Parses one example, failing the test with the config error if invalid.
fn load(name: &str) -> Config {
    let path = examples_dir().join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    config::parse(&path.display().to_string(), &text)
        .unwrap_or_else(|e| panic!("{} is not a valid config:\n{e}", path.display()))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn gateways(cfg: &Config, iface: usize) -> Vec<IpAddr> {
    cfg.interfaces[iface].gateways.iter().map(|g| g.addr).collect()
}

#[test]
fn every_example_is_valid() {
    let mut names: Vec<String> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    names.sort();
    for known in ["dual-stack.toml", "guide-4-rail.toml", "h100-8-rail.toml"] {
        assert!(names.iter().any(|n| n == known), "examples/{known} is missing");
    }
    for name in &names {
        let cfg = load(name);
        assert!(!cfg.interfaces.is_empty(), "{name}: no interfaces");
        assert_eq!(cfg.defaults.protocol, 234, "{name}: protocol");
    }
}

#[test]
fn guide_4_rail() {
    let cfg = load("guide-4-rail.toml");
    assert_eq!(cfg.interfaces.len(), 4);
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        assert_eq!(iface.name, format!("ib{k}"));
        assert_eq!(iface.table, 100 + k as u32);
        assert_eq!(iface.priority, 1000);
        assert_eq!(gateways(&cfg, k), [ip("192.168.1.1")]);
        let addrs: Vec<String> =
            iface.addresses.as_ref().expect("explicit addresses").iter().map(|a| a.to_string()).collect();
        assert_eq!(addrs, [format!("192.168.1.{}/24", 10 + k)]);
        assert_eq!(iface.sysctls[&SysctlKey::ArpIgnore], 1);
        assert_eq!(iface.sysctls[&SysctlKey::ArpAnnounce], 2);
    }
    let tables: Vec<u32> = cfg.interfaces.iter().map(|i| i.table).collect();
    assert_eq!(tables, (100..=103).collect::<Vec<_>>());
}

#[test]
fn h100_8_rail() {
    let cfg = load("h100-8-rail.toml");
    assert_eq!(cfg.interfaces.len(), 8);
    assert_eq!(cfg.defaults.sysctls[&SysctlKey::RpFilter], 2);
    assert_eq!(cfg.interfaces[0].name, "ens1f0np0");
    assert_eq!(cfg.interfaces[7].name, "ens4f1np1");
    for (k, iface) in cfg.interfaces.iter().enumerate() {
        assert_eq!(iface.table, 100 + k as u32, "{}", iface.name);
        assert_eq!(iface.sysctls[&SysctlKey::RpFilter], 2, "{}", iface.name);
        assert_eq!(iface.sysctls[&SysctlKey::ArpIgnore], 1, "{}", iface.name);
        assert_eq!(gateways(&cfg, k), [ip("198.51.100.1")], "{}", iface.name);
    }
}

#[test]
fn dual_stack() {
    let cfg = load("dual-stack.toml");
    let names: Vec<&str> = cfg.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert!(names.contains(&"ib0.100"), "{names:?}");
    let ib0 = &cfg.interfaces[0];
    assert_eq!(ib0.name, "ib0.100");
    let gws = gateways(&cfg, 0);
    assert!(gws.iter().any(|g| g.is_ipv4()), "{gws:?}");
    assert!(gws.contains(&ip("2001:db8:100::1")), "{gws:?}");
    let addrs = ib0.addresses.as_ref().expect("explicit addresses");
    assert!(addrs.iter().any(|a| a.addr.is_ipv6()));
    // A link-local IPv6 gateway, and an interface taking its addresses
    // from the host at apply time.
    assert!(gateways(&cfg, 1).contains(&ip("fe80::1")));
    assert_eq!(cfg.interfaces[1].priority, 1001);
    assert!(cfg.interfaces[2].addresses.is_none());
    assert_eq!(cfg.interfaces[2].sysctls[&SysctlKey::ArpIgnore], 2);
}
