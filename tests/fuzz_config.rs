//! Fuzz target of the config loader (`roce_route::config::parse`), run
//! briefly in CI.
//!
//! Properties, from the least to the most structured input:
//!
//! - arbitrary bytes and strings never make `parse` panic, and every error
//!   is shown starting with the file name, with a position and a hint;
//! - configs built from pieces (valid and invalid names, addresses,
//!   gateways, numbers, unknown and duplicate keys, with or without
//!   [defaults]) never panic; what is accepted satisfies the invariants the
//!   rest of roce-route relies on; what is rejected has a position; and a
//!   config holding a piece that is invalid on its own is always rejected;
//! - configs that are valid by construction are accepted and read back as
//!   written;
//! - byte-level mutations (flip, insert, delete) of valid configs never
//!   panic, and what they break is reported with a position;
//! - the real binary, given an invalid config, exits 2 naming the file and
//!   never panics.
//!
//! PROPTEST_CASES sets the number of cases per property (default 256; the
//! CLI property runs at most 16, as each case starts a process). Failing
//! inputs are printed, not persisted.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

use common::{TempDir, toml_list, toml_str};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use roce_route::config::{self, Config, ConfigError};
use roce_route::model::{RESERVED_TABLES, SysctlKey};
use roce_route::sysctl;

/// The name the errors must start with.
const FILE: &str = "/etc/roce-route/fuzz.toml";
const DEFAULT_CASES: u32 = 256;
const CLI_CASES: u32 = 16;
const MAX_PRIORITY: u32 = 32765;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_CASES)
}

fn proptest_config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Tests own no regression file: the failing input is printed.
        failure_persistence: None,
        max_global_rejects: 100_000,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Checking an outcome

/// What every outcome must satisfy, whatever the input.
fn check_any(text: &str, result: &Result<Config, ConfigError>) -> Result<(), TestCaseError> {
    match result {
        Ok(cfg) => check_accepted(text, cfg),
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(!shown.trim().is_empty(), "empty error for:\n{text:?}");
            prop_assert!(
                shown.starts_with(FILE),
                "the error does not start with the file name:\n{shown}\nfor:\n{text:?}"
            );
            prop_assert_eq!(&e.file, FILE);
            prop_assert!(!e.what.trim().is_empty(), "empty `what`: {shown}");
            if let Some(loc) = e.loc {
                let lines = text.split('\n').count();
                prop_assert!(
                    loc.line >= 1 && loc.line <= lines && loc.col >= 1,
                    "position {loc} outside the text ({lines} lines):\n{shown}\nfor:\n{text:?}"
                );
                prop_assert!(
                    shown.starts_with(&format!("{FILE}:{loc}: ")),
                    "the position is not shown after the file name:\n{shown}"
                );
            }
            Ok(())
        }
    }
}

/// The invariants of an accepted config (what plan/diff/sysctl rely on).
fn check_accepted(text: &str, cfg: &Config) -> Result<(), TestCaseError> {
    let why = || format!("accepted:\n{text}\n=> {cfg:#?}");
    prop_assert_eq!(&cfg.file, FILE);
    prop_assert!(!cfg.interfaces.is_empty(), "no interface: {}", why());
    prop_assert!(cfg.defaults.protocol >= 5, "kernel protocol {}: {}", cfg.defaults.protocol, why());
    prop_assert!(
        config::protocol_owner(cfg.defaults.protocol).is_none(),
        "a daemon's protocol {}: {}",
        cfg.defaults.protocol,
        why()
    );
    prop_assert!(
        (1..=MAX_PRIORITY).contains(&cfg.defaults.priority),
        "default priority {}: {}",
        cfg.defaults.priority,
        why()
    );
    check_sysctls(&cfg.defaults.sysctls, &why)?;

    let mut names = HashSet::new();
    let mut tables = HashSet::new();
    let mut addrs: HashMap<IpAddr, &str> = HashMap::new();
    for i in &cfg.interfaces {
        prop_assert_eq!(
            sysctl::ifname_problem(&i.name),
            None,
            "interface name {:?} accepted: {}",
            i.name,
            why()
        );
        prop_assert!(sysctl::path(&i.name, SysctlKey::ArpIgnore).is_ok());
        prop_assert!(names.insert(i.name.as_str()), "name {:?} twice: {}", i.name, why());
        prop_assert!(!RESERVED_TABLES.contains(&i.table), "reserved table {}: {}", i.table, why());
        prop_assert!(tables.insert(i.table), "table {} twice: {}", i.table, why());
        prop_assert!((1..=MAX_PRIORITY).contains(&i.priority), "priority {}: {}", i.priority, why());
        check_sysctls(&i.sysctls, &why)?;
        if let Some(list) = &i.addresses {
            prop_assert!(!list.is_empty(), "empty address list accepted: {}", why());
            for a in list {
                prop_assert!(
                    addrs.insert(a.addr, &i.name).is_none(),
                    "address {} listed twice: {}",
                    a.addr,
                    why()
                );
                prop_assert!(
                    !a.addr.is_multicast() && !a.addr.is_unspecified() && !a.addr.is_loopback(),
                    "special address {}: {}",
                    a.addr,
                    why()
                );
                if let Some(len) = a.len {
                    let max = if a.addr.is_ipv4() { 32 } else { 128 };
                    prop_assert!(len >= 1 && len <= max, "prefix /{len}: {}", why());
                }
            }
        }
        prop_assert!(i.gateways.len() <= 2, "{}", why());
        if let [a, b] = i.gateways.as_slice() {
            prop_assert!(a.addr.is_ipv4() != b.addr.is_ipv4(), "two gateways of a family: {}", why());
        }
        for g in &i.gateways {
            prop_assert!(
                !g.addr.is_multicast() && !g.addr.is_unspecified() && !g.addr.is_loopback(),
                "special gateway {}: {}",
                g.addr,
                why()
            );
        }
    }
    // A gateway is never one of the host's own configured addresses.
    for i in &cfg.interfaces {
        for g in &i.gateways {
            prop_assert!(!addrs.contains_key(&g.addr), "gateway {} is local: {}", g.addr, why());
        }
    }
    Ok(())
}

fn check_sysctls(values: &BTreeMap<SysctlKey, u32>, why: &dyn Fn() -> String) -> Result<(), TestCaseError> {
    for (key, v) in values {
        prop_assert!(key.valid(*v), "{} = {v} accepted: {}", key.name(), why());
    }
    Ok(())
}

/// Every rejection carries a position and a hint (the loader's promise),
/// except the one about the config as a whole (no [[interface]]).
fn check_located(text: &str, result: &Result<Config, ConfigError>) -> Result<(), TestCaseError> {
    if let Err(e) = result {
        if e.loc.is_none() {
            prop_assert!(
                e.what.contains("no [[interface]]"),
                "an error without a position:\n{e}\nfor:\n{text}"
            );
        }
        prop_assert!(!e.hint.trim().is_empty(), "an error without a hint:\n{e}\nfor:\n{text}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Structured configs: pieces that know whether they are invalid on their own

/// A TOML value as written, and whether it alone makes any config invalid
/// (`bad`). Pieces that are only invalid in context (a duplicate table, a
/// gateway off-link, ...) are not `bad`.
#[derive(Clone, Debug)]
struct Val {
    toml: String,
    bad: bool,
}

fn good(toml: impl Into<String>) -> Val {
    Val { toml: toml.into(), bad: false }
}

fn bad(toml: impl Into<String>) -> Val {
    Val { toml: toml.into(), bad: true }
}

/// A `key = value` line.
#[derive(Clone, Debug)]
struct Line {
    key: String,
    val: Val,
}

impl Line {
    fn new(key: &str, val: Val) -> Line {
        Line { key: key.to_string(), val }
    }
    fn render(&self) -> String {
        format!("{} = {}", self.key, self.val.toml)
    }
}

/// One table ([defaults] or [[interface]]): its lines in the order
/// written, and a line written twice (a duplicate key).
#[derive(Clone, Debug)]
struct Table {
    header: &'static str,
    lines: Vec<Line>,
    repeat: Option<usize>,
}

impl Table {
    fn bad(&self) -> bool {
        self.lines.iter().any(|l| l.val.bad) || (self.repeat.is_some() && !self.lines.is_empty())
    }
    fn render(&self, out: &mut String) {
        out.push_str(self.header);
        out.push('\n');
        for l in &self.lines {
            out.push_str(&l.render());
            out.push('\n');
        }
        if let Some(i) = self.repeat
            && !self.lines.is_empty()
        {
            out.push_str(&self.lines[i % self.lines.len()].render());
            out.push('\n');
        }
    }
}

#[derive(Clone, Debug)]
struct Doc {
    defaults: Option<Table>,
    interfaces: Vec<Table>,
}

impl Doc {
    /// Whether some piece makes the config invalid whatever the rest is.
    fn surely_invalid(&self) -> bool {
        self.interfaces.is_empty()
            || self.defaults.as_ref().is_some_and(Table::bad)
            || self.interfaces.iter().any(Table::bad)
    }
    fn render(&self) -> String {
        let mut out = String::new();
        if let Some(d) = &self.defaults {
            d.render(&mut out);
            out.push('\n');
        }
        for i in &self.interfaces {
            i.render(&mut out);
            out.push('\n');
        }
        out
    }
}

// Every strategy below takes `noise`: the weight of the invalid variants
// against about 100 for the valid ones. Documents are drawn either almost
// clean (noise 1: often accepted, so that the invariants of accepted configs
// are exercised, and rejected mostly for context errors such as duplicates)
// or noisy (noise 40).

fn name_val(noise: u32) -> impl Strategy<Value = Val> {
    // A small pool, so that names repeat across interfaces now and then.
    let pool = prop::sample::select(vec![
        "ib0",
        "ib1",
        "ib2",
        "ib3",
        "rail0",
        "rail1",
        "mlx5_0",
        "mlx5_1",
        "eth0",
        "ib0.100",
        "abcdefghijklmno",
        "all",
        "default",
        "lo",
        "é",
        "-",
        "ib0-",
        "ib_0.1",
        "enp1s0f0",
        "bond0",
        "...",
        ".x",
        "x.",
    ])
    .prop_map(|n| good(toml_str(n)));
    let generated = "[a-z][a-z0-9_.-]{0,14}".prop_map(|n| good(toml_str(&n)));
    let invalid = prop::sample::select(vec![
        "",
        ".",
        "..",
        "a/b",
        "x y",
        "0123456789abcdefg",
        "../all",
        "all/../x",
        "/",
        "ib0:1",
        "ib\t0",
        "ib\n0",
        "ib\u{0}0",
        " ib0",
        "ib0 ",
        "ib\u{a0}0",
        "ib\u{2028}0",
        "ééééééééé",
    ])
    .prop_map(|n| bad(toml_str(n)));
    let long = "[a-z0-9.]{16,40}".prop_map(|n| bad(toml_str(&n)));
    let not_a_string = prop::sample::select(vec!["0", "true", "[\"ib0\"]", "{ x = 1 }", "1.5"]).prop_map(bad);
    prop_oneof![
        40 => pool,
        60 => generated,
        2 * noise => invalid,
        noise => long,
        noise => not_a_string,
    ]
}

/// An integer: `typical` values (judged by `ok` like all others) most of
/// the time, edge values, other TOML spellings, and non-integers (`bad`).
fn int_val(
    ok: fn(i128) -> bool,
    typical: impl Strategy<Value = i64>,
    noise: u32,
) -> impl Strategy<Value = Val> {
    let judge = move |n: i128, text: String| if ok(n) { good(text) } else { bad(text) };
    let edges = prop::sample::select(vec![
        0i128,
        1,
        -1,
        -5,
        5,
        8,
        253,
        254,
        255,
        256,
        32765,
        32766,
        32767,
        65535,
        4_294_967_295,
        4_294_967_296,
        i64::MAX as i128,
        i64::MIN as i128,
    ]);
    // TOML spellings of integers: all read as the number they denote.
    let spelled = prop::sample::select(vec![
        ("0x64", 100i128),
        ("0o144", 100),
        ("0b1100100", 100),
        ("+100", 100),
        ("1_000", 1000),
        ("-0", 0),
        ("+0", 0),
        ("0x1", 1),
        ("+2", 2),
    ]);
    let not_an_int = prop::sample::select(vec![
        "\"100\"",
        "1.5",
        "1e2",
        "nan",
        "inf",
        "true",
        "[100]",
        "{}",
        "1979-05-27",
        "1.0",
    ])
    .prop_map(bad);
    prop_oneof![
        100 => typical.prop_map(move |n| judge(n as i128, n.to_string())),
        2 * noise => edges.prop_map(move |n| judge(n, n.to_string())),
        5 => spelled.prop_map(move |(t, n)| judge(n, t.to_string())),
        noise => not_an_int,
    ]
}

fn table_val(noise: u32) -> impl Strategy<Value = Val> {
    fn ok(n: i128) -> bool {
        (1..=u32::MAX as i128).contains(&n) && !(253..=255).contains(&n)
    }
    // Sometimes near 100, to collide with the computed tables.
    let typical = prop_oneof![4 => 1i64..=100_000, 1 => 98i64..=108];
    int_val(ok, typical, noise)
}

fn priority_val(noise: u32) -> impl Strategy<Value = Val> {
    fn ok(n: i128) -> bool {
        (1..=MAX_PRIORITY as i128).contains(&n)
    }
    int_val(ok, 1i64..=MAX_PRIORITY as i64, noise)
}

fn protocol_val(noise: u32) -> impl Strategy<Value = Val> {
    fn ok(n: i128) -> bool {
        (5..=255).contains(&n) && config::protocol_owner(n as u8).is_none()
    }
    int_val(ok, 5i64..=255, noise)
}

fn table_base_val(noise: u32) -> impl Strategy<Value = Val> {
    // Any u32 may be a base: whether base + position is usable depends on
    // the interfaces (context), so only out-of-range values are `bad`.
    fn ok(n: i128) -> bool {
        (0..=u32::MAX as i128).contains(&n)
    }
    let typical = prop_oneof![6 => 1i64..=240, 1 => 241i64..=300, 1 => 4_294_967_290i64..=4_294_967_295];
    int_val(ok, typical, noise)
}

fn sysctl_val(key: SysctlKey, noise: u32) -> BoxedStrategy<Val> {
    let ok: fn(i128) -> bool = match key {
        SysctlKey::ArpIgnore => |n| matches!(n, 0..=3 | 8),
        SysctlKey::ArpAnnounce => |n| (0..=2).contains(&n),
        SysctlKey::RpFilter => |n| (0..=2).contains(&n),
        SysctlKey::ArpFilter => |n| (0..=1).contains(&n),
    };
    let valid: Vec<i64> = (0..=8).filter(|&v| key.valid(v as u32)).collect();
    let typical = prop_oneof![
        50 => prop::sample::select(valid),
        noise => -1i64..=9,
    ];
    int_val(ok, typical, noise).boxed()
}

/// Optional sysctl lines, in key order.
fn sysctl_lines(p: f64, noise: u32) -> impl Strategy<Value = Vec<Line>> {
    let per_key: Vec<_> = SysctlKey::ALL
        .into_iter()
        .map(|k| prop::option::weighted(p, sysctl_val(k, noise)).prop_map(move |v| (k, v)))
        .collect();
    per_key.prop_map(|all| all.into_iter().filter_map(|(k, v)| v.map(|v| Line::new(k.name(), v))).collect())
}

/// Whether an IPv4 address is the network or broadcast address of its
/// subnet (an independent model of the loader's rule).
fn v4_role(addr: std::net::Ipv4Addr, len: u8) -> bool {
    if len >= 31 {
        return false;
    }
    let host_bits = u32::MAX >> len;
    let h = u32::from(addr) & host_bits;
    h == 0 || h == host_bits
}

/// One element of `addresses`, `bad` when no host may use it.
fn address_item(noise: u32) -> impl Strategy<Value = Val> {
    let len = prop_oneof![
        30 => Just(None),
        50 => Just(Some(24u8)),
        15 => prop::sample::select(vec![Some(8u8), Some(16), Some(31), Some(32)]),
        noise => prop::sample::select(vec![Some(0u8), Some(30), Some(25)]),
    ];
    let v4 = (0u8..4, 0u8..=255, len).prop_map(|(a, b, len)| {
        let ip = std::net::Ipv4Addr::new(10, 0, a, b);
        let text = match len {
            Some(l) => format!("{ip}/{l}"),
            None => ip.to_string(),
        };
        let is_bad = len == Some(0) || len.is_some_and(|l| v4_role(ip, l));
        Val { toml: toml_str(&text), bad: is_bad }
    });
    let v6 = (
        prop::sample::select(vec!["2001:db8::", "2001:db8:0:0::", "fe80::", "fd00::"]),
        1u16..40,
        prop::option::of(prop::sample::select(vec![48u8, 64, 127, 128])),
    )
        .prop_map(|(net, x, len)| {
            let text = match len {
                Some(l) => format!("{net}{x:x}/{l}"),
                None => format!("{net}{x:x}"),
            };
            good(toml_str(&text))
        });
    let invalid = prop::sample::select(vec![
        "10.0.0.x",
        "10.0.0.1/33",
        "10.0.0.1/-1",
        "10.0.0.1/",
        "10.0.0.1/abc",
        "10.0.0.1/+8",
        "10.0.0.1/ 8",
        "10.0.0.1/256",
        "10.0.0.1/99999999999999999999",
        "2001:db8::1/129",
        "10.0.0.0/24",
        "10.0.0.255/24",
        "224.0.0.1",
        "ff02::1/64",
        "0.0.0.0",
        "::",
        "::/0",
        "127.0.0.1/8",
        "::1",
        "10.0.0.1/0",
        "255.255.255.255",
        "",
        " 10.0.0.1",
        "10.0.0.1 ",
        "10.0.0.1/24/24",
        "ib0",
    ])
    .prop_map(|t| bad(toml_str(t)));
    let not_a_string = prop::sample::select(vec!["1", "true", "[\"10.0.0.1\"]"]).prop_map(bad);
    prop_oneof![60 => v4, 30 => v6, 2 * noise => invalid, noise => not_a_string]
}

fn addresses_val(noise: u32) -> impl Strategy<Value = Val> {
    let list = prop::collection::vec(address_item(noise), 1..4).prop_map(|items| Val {
        bad: items.iter().any(|v| v.bad),
        toml: format!("[{}]", items.iter().map(|v| v.toml.as_str()).collect::<Vec<_>>().join(", ")),
    });
    let malformed = prop::sample::select(vec!["[]", "\"10.0.0.1/24\"", "1", "{ a = 1 }"]).prop_map(bad);
    prop_oneof![100 => list, noise => malformed]
}

/// (text, the address when it may be a gateway at all)
fn gateway_item(v4: bool, noise: u32) -> impl Strategy<Value = (String, Option<IpAddr>)> {
    let usable = if v4 {
        prop_oneof![
            Just("10.0.0.254".to_string()),
            (0u8..4, 1u8..=254).prop_map(|(a, b)| format!("10.0.{a}.{b}")),
            Just("192.0.2.1".to_string()),
        ]
        .boxed()
    } else {
        prop::sample::select(vec!["2001:db8::fe", "2001:db8::1", "fe80::1", "fd00::1"])
            .prop_map(str::to_string)
            .boxed()
    };
    let usable = usable.prop_map(|t| {
        let ip = t.parse().ok();
        (t, ip)
    });
    let unusable = prop::sample::select(vec![
        "10.0.0.x",
        "10.0.0.1/24",
        "224.0.0.1",
        "ff02::2",
        "0.0.0.0",
        "::",
        "127.0.0.1",
        "::1",
        "255.255.255.255",
        "",
    ])
    .prop_map(|t| (t.to_string(), None));
    prop_oneof![100 => usable, noise => unusable]
}

fn gateway_val(noise: u32) -> impl Strategy<Value = Val> {
    let judge = |items: Vec<(String, Option<IpAddr>)>| {
        let unusable = items.iter().any(|(_, ip)| ip.is_none());
        let v4 = items.iter().filter(|(_, ip)| ip.is_some_and(|i| i.is_ipv4())).count();
        let v6 = items.iter().filter(|(_, ip)| ip.is_some_and(|i| i.is_ipv6())).count();
        let texts: Vec<&str> = items.iter().map(|(t, _)| t.as_str()).collect();
        Val { toml: toml_list(&texts), bad: unusable || v4 > 1 || v6 > 1 }
    };
    let one = prop_oneof![gateway_item(true, noise), gateway_item(false, noise)]
        .prop_map(|(t, ip)| Val { toml: toml_str(&t), bad: ip.is_none() });
    // At most one per family, in either order.
    let pair = (
        prop::option::of(gateway_item(true, noise)),
        prop::option::of(gateway_item(false, noise)),
        any::<bool>(),
    )
        .prop_map(move |(a, b, swap)| {
            let mut items: Vec<_> = a.into_iter().chain(b).collect();
            if swap {
                items.reverse();
            }
            judge(items)
        });
    let any_list =
        prop::collection::vec(prop_oneof![gateway_item(true, noise), gateway_item(false, noise)], 0..4)
            .prop_map(judge);
    let not_a_string = prop::sample::select(vec!["5", "[1]", "{}", "true"]).prop_map(bad);
    prop_oneof![50 => one, 50 => pair, noise => any_list, noise => not_a_string]
}

fn unknown_line(keys: Vec<&'static str>) -> impl Strategy<Value = Line> {
    prop::sample::select(keys).prop_map(|k| Line::new(k, bad("1")))
}

/// The probability of an invalid optional part (unknown key, ...).
fn rare(noise: u32) -> f64 {
    f64::from(noise) / 1000.0
}

fn interface_table(noise: u32) -> impl Strategy<Value = Table> {
    let lines = (
        prop::option::weighted(1.0 - rare(noise), name_val(noise)),
        prop::option::weighted(0.6, addresses_val(noise)),
        prop::option::weighted(0.3, gateway_val(noise)),
        prop::option::weighted(0.4, table_val(noise)),
        prop::option::weighted(0.2, priority_val(noise)),
        sysctl_lines(0.12, noise),
        prop::option::weighted(
            rare(noise),
            unknown_line(vec!["protocol", "foo", "Name", "table_base", "gateways", "address"]),
        ),
    )
        .prop_map(|(name, addresses, gateway, table, priority, sysctls, unknown)| {
            let mut lines = Vec::new();
            match name {
                Some(v) => lines.push(Line::new("name", v)),
                // `name` is required: its absence alone is an error. (The
                // key makes the line a comment.)
                None => lines.push(Line::new("#name", bad("\"missing\""))),
            }
            let optional =
                [("addresses", addresses), ("gateway", gateway), ("table", table), ("priority", priority)];
            lines.extend(optional.into_iter().filter_map(|(k, v)| v.map(|v| Line::new(k, v))));
            lines.extend(sysctls);
            lines.extend(unknown);
            lines
        });
    (lines, prop::option::weighted(rare(noise) / 2.0, any::<usize>())).prop_flat_map(|(lines, repeat)| {
        Just(lines).prop_shuffle().prop_map(move |lines| Table { header: "[[interface]]", lines, repeat })
    })
}

fn defaults_table(noise: u32) -> impl Strategy<Value = Table> {
    (
        prop::option::weighted(0.4, table_base_val(noise)),
        prop::option::weighted(0.3, priority_val(noise)),
        prop::option::weighted(0.3, protocol_val(noise)),
        sysctl_lines(0.25, noise),
        prop::option::weighted(rare(noise), unknown_line(vec!["table", "name", "foo", "addresses"])),
        prop::option::weighted(rare(noise) / 2.0, any::<usize>()),
    )
        .prop_map(|(base, priority, protocol, sysctls, unknown, repeat)| {
            let optional = [("table_base", base), ("priority", priority), ("protocol", protocol)];
            let mut lines: Vec<Line> =
                optional.into_iter().filter_map(|(k, v)| v.map(|v| Line::new(k, v))).collect();
            lines.extend(sysctls);
            lines.extend(unknown);
            Table { header: "[defaults]", lines, repeat }
        })
}

fn doc_with(noise: u32) -> impl Strategy<Value = Doc> {
    (prop::option::weighted(0.4, defaults_table(noise)), prop::collection::vec(interface_table(noise), 1..10))
        .prop_map(|(defaults, interfaces)| Doc { defaults, interfaces })
}

/// 0..10 interfaces, almost clean or noisy.
fn doc() -> impl Strategy<Value = Doc> {
    let empty = prop::option::of(defaults_table(1)).prop_map(|defaults| Doc { defaults, interfaces: vec![] });
    prop_oneof![10 => doc_with(1), 10 => doc_with(40), 1 => empty]
}

// ---------------------------------------------------------------------------
// Configs valid by construction, with what the loader must read back

#[derive(Clone, Debug)]
struct ValidIface {
    name: String,
    /// (as written, address, prefix length)
    addresses: Vec<(String, IpAddr, Option<u8>)>,
    gateways: Vec<IpAddr>,
    table: Option<u32>,
    priority: Option<u32>,
    sysctls: Vec<(SysctlKey, u32)>,
}

#[derive(Clone, Debug)]
struct ValidDoc {
    table_base: Option<u32>,
    priority: Option<u32>,
    protocol: Option<u8>,
    sysctls: Vec<(SysctlKey, u32)>,
    interfaces: Vec<ValidIface>,
}

fn valid_sysctls(p: f64) -> impl Strategy<Value = Vec<(SysctlKey, u32)>> {
    let per_key: Vec<_> = SysctlKey::ALL
        .into_iter()
        .map(move |k| {
            let values: Vec<u32> = (0..=8).filter(|&v| k.valid(v)).collect();
            prop::option::weighted(p, prop::sample::select(values)).prop_map(move |v| (k, v))
        })
        .collect();
    per_key.prop_map(|all| all.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect())
}

/// Interface `i` of a valid config: its addresses are in 10.i.0.0/24 and
/// 2001:db8:i::/64, so no two interfaces share one.
fn valid_iface(i: usize, prefix: String) -> impl Strategy<Value = ValidIface> {
    let hosts = prop::sample::subsequence((1u8..=200).collect::<Vec<_>>(), 0..3);
    (
        hosts,
        prop::collection::vec((any::<bool>(), any::<bool>()), 3),
        any::<bool>(),
        prop::option::weighted(0.3, 1u32..=MAX_PRIORITY),
        valid_sysctls(0.3),
    )
        .prop_map(move |(hosts, shapes, with_gateway, priority, sysctls)| {
            let addresses: Vec<(String, IpAddr, Option<u8>)> = hosts
                .iter()
                .zip(shapes)
                .map(|(&h, (v6, with_len))| {
                    let (ip, len): (IpAddr, u8) = if v6 {
                        (format!("2001:db8:{i}::{h}").parse().unwrap(), 64)
                    } else {
                        (format!("10.{i}.0.{h}").parse().unwrap(), 24)
                    };
                    let len = with_len.then_some(len);
                    let text = match len {
                        Some(l) => format!("{ip}/{l}"),
                        None => ip.to_string(),
                    };
                    (text, ip, len)
                })
                .collect();
            // On-link and not local: .254 of the /24, when the interface
            // lists an IPv4 address or no address at all.
            let has_v4 = addresses.iter().any(|(_, ip, _)| ip.is_ipv4());
            let gateways = if with_gateway && (addresses.is_empty() || has_v4) {
                vec![format!("10.{i}.0.254").parse().unwrap()]
            } else {
                vec![]
            };
            ValidIface { name: format!("{prefix}{i}"), addresses, gateways, table: None, priority, sysctls }
        })
}

fn valid_doc() -> impl Strategy<Value = ValidDoc> {
    (1usize..=10, "[a-z][a-z_]{0,5}", any::<bool>()).prop_flat_map(|(n, prefix, explicit)| {
        let ifaces: Vec<_> = (0..n).map(|i| valid_iface(i, prefix.clone())).collect();
        let usable: Vec<u32> = (1..=252).chain(256..=400).collect();
        // Either every interface names its table (all different), or none
        // does and table_base + position stays clear of 253..=255.
        let tables = prop::sample::subsequence(usable, n).prop_shuffle();
        let base = prop_oneof![1u32..=243, 256u32..=100_000];
        (
            ifaces,
            tables,
            prop::option::weighted(0.5, base),
            prop::option::weighted(0.3, 1u32..=MAX_PRIORITY),
            prop::option::weighted(
                0.3,
                (5u8..=255).prop_filter("a daemon's protocol", |p| config::protocol_owner(*p).is_none()),
            ),
            valid_sysctls(0.3),
        )
            .prop_map(move |(mut interfaces, tables, base, priority, protocol, sysctls)| {
                if explicit {
                    for (iface, t) in interfaces.iter_mut().zip(tables) {
                        iface.table = Some(t);
                    }
                }
                ValidDoc {
                    table_base: if explicit { None } else { base },
                    priority,
                    protocol,
                    sysctls,
                    interfaces,
                }
            })
    })
}

impl ValidDoc {
    fn render(&self) -> String {
        let mut out = String::new();
        let mut defaults = Vec::new();
        if let Some(b) = self.table_base {
            defaults.push(format!("table_base = {b}"));
        }
        if let Some(p) = self.priority {
            defaults.push(format!("priority = {p}"));
        }
        if let Some(p) = self.protocol {
            defaults.push(format!("protocol = {p}"));
        }
        for (k, v) in &self.sysctls {
            defaults.push(format!("{} = {v}", k.name()));
        }
        if !defaults.is_empty() {
            out.push_str("[defaults]\n");
            out.push_str(&defaults.join("\n"));
            out.push_str("\n\n");
        }
        for i in &self.interfaces {
            out.push_str(&format!("[[interface]]\nname = {}\n", toml_str(&i.name)));
            if !i.addresses.is_empty() {
                let texts: Vec<&str> = i.addresses.iter().map(|(t, _, _)| t.as_str()).collect();
                out.push_str(&format!("addresses = {}\n", toml_list(&texts)));
            }
            match i.gateways.as_slice() {
                [] => {}
                [g] => out.push_str(&format!("gateway = {}\n", toml_str(&g.to_string()))),
                many => {
                    let texts: Vec<String> = many.iter().map(|g| g.to_string()).collect();
                    out.push_str(&format!("gateway = {}\n", toml_list(&texts)));
                }
            }
            if let Some(t) = i.table {
                out.push_str(&format!("table = {t}\n"));
            }
            if let Some(p) = i.priority {
                out.push_str(&format!("priority = {p}\n"));
            }
            for (k, v) in &i.sysctls {
                out.push_str(&format!("{} = {v}\n", k.name()));
            }
            out.push('\n');
        }
        out
    }

    /// Checks that `cfg` says what this document says.
    fn check(&self, text: &str, cfg: &Config) -> Result<(), TestCaseError> {
        let mut defaults: BTreeMap<SysctlKey, u32> = config::DEFAULT_SYSCTLS.into_iter().collect();
        defaults.extend(self.sysctls.iter().copied());
        prop_assert_eq!(&cfg.defaults.sysctls, &defaults, "{}", text);
        let base = self.table_base.unwrap_or(config::DEFAULT_TABLE_BASE);
        let priority = self.priority.unwrap_or(config::DEFAULT_PRIORITY);
        prop_assert_eq!(cfg.defaults.table_base, base);
        prop_assert_eq!(cfg.defaults.priority, priority);
        prop_assert_eq!(cfg.defaults.protocol, self.protocol.unwrap_or(config::DEFAULT_PROTOCOL));
        prop_assert_eq!(cfg.interfaces.len(), self.interfaces.len());
        for (pos, (got, want)) in cfg.interfaces.iter().zip(&self.interfaces).enumerate() {
            prop_assert_eq!(&got.name, &want.name);
            prop_assert_eq!(got.table, want.table.unwrap_or(base + pos as u32), "{}", text);
            prop_assert_eq!(got.priority, want.priority.unwrap_or(priority));
            let mut sysctls = defaults.clone();
            sysctls.extend(want.sysctls.iter().copied());
            prop_assert_eq!(&got.sysctls, &sysctls, "{}", text);
            let addrs: Option<Vec<(IpAddr, Option<u8>)>> =
                got.addresses.as_ref().map(|l| l.iter().map(|a| (a.addr, a.len)).collect());
            let want_addrs: Option<Vec<(IpAddr, Option<u8>)>> = (!want.addresses.is_empty())
                .then(|| want.addresses.iter().map(|(_, ip, len)| (*ip, *len)).collect());
            prop_assert_eq!(addrs, want_addrs, "{}", text);
            let gws: Vec<IpAddr> = got.gateways.iter().map(|g| g.addr).collect();
            prop_assert_eq!(&gws, &want.gateways);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Byte-level mutations

/// Valid configs to mutate: every key, both gateway forms, dotted names,
/// comments and non-ASCII text.
const SEEDS: [&str; 3] = [
    // The full example, shared with the unit tests in src/config.rs.
    include_str!("fixtures/full.toml"),
    "[[interface]]\nname = \"ib0.100\" # é\n[[interface]]\nname = \"mlx5_1\"\naddresses = [\"10.0.0.2/31\"]\ngateway = \"10.0.0.3\"\n",
    "interface = [{ name = \"rail0\", table = 0x64 }, { name = \"rail1\", priority = 1_000 }]\n",
];

#[derive(Clone, Debug)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, u8),
    Delete(prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Bytes that matter to TOML and to the loader, plus any byte.
    let byte = prop_oneof![
        3 => prop::sample::select(b"[]{}\"'=,./:#\n\r\t \\0123456789-+_xeE.\x00\x7f\xc3\xa9\xff".to_vec()),
        1 => any::<u8>(),
    ];
    prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, bit)| Mutation::Flip(i, 1 << bit)),
        (any::<prop::sample::Index>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<prop::sample::Index>().prop_map(Mutation::Delete),
    ]
}

fn mutate(seed: &str, mutations: &[Mutation]) -> String {
    let mut b = seed.as_bytes().to_vec();
    for m in mutations {
        match m {
            Mutation::Flip(i, bit) if !b.is_empty() => {
                let at = i.index(b.len());
                b[at] ^= bit;
            }
            Mutation::Insert(i, byte) => {
                let at = i.index(b.len() + 1);
                b.insert(at, *byte);
            }
            Mutation::Delete(i) if !b.is_empty() => {
                let at = i.index(b.len());
                b.remove(at);
            }
            _ => {}
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

// ---------------------------------------------------------------------------
// Properties

/// TOML-looking text: tokens the grammar cares about, in any order.
fn token_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "[[interface]]",
        "[defaults]",
        "[",
        "]",
        "[[",
        "]]",
        "{",
        "}",
        "=",
        ",",
        ".",
        "\"",
        "'",
        "\"\"\"",
        "'''",
        "\n",
        " ",
        "#",
        "name",
        "addresses",
        "gateway",
        "table",
        "priority",
        "protocol",
        "table_base",
        "arp_ignore",
        "arp_filter",
        "rp_filter",
        "arp_announce",
        "interface",
        "defaults",
        "\"ib0\"",
        "\"10.0.0.1/24\"",
        "\"fe80::1\"",
        "0",
        "1",
        "-1",
        "254",
        "4294967296",
        "9223372036854775808",
        "true",
        "1.5",
        "\\",
        "\\u0000",
        "é",
    ]);
    prop::collection::vec(token, 0..60).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(proptest_config(cases()))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1024)) {
        let text = String::from_utf8_lossy(&bytes);
        let result = config::parse(FILE, &text);
        check_any(&text, &result)?;
        check_located(&text, &result)?;
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>()) {
        let result = config::parse(FILE, &text);
        check_any(&text, &result)?;
        check_located(&text, &result)?;
    }

    #[test]
    fn toml_like_text_never_panics(text in token_soup()) {
        let result = config::parse(FILE, &text);
        check_any(&text, &result)?;
        check_located(&text, &result)?;
    }

    #[test]
    fn structured_configs_are_validated(doc in doc()) {
        let text = doc.render();
        let result = config::parse(FILE, &text);
        check_any(&text, &result)?;
        check_located(&text, &result)?;
        if doc.surely_invalid() {
            prop_assert!(
                result.is_err(),
                "a config with an invalid piece was accepted:\n{text}\n=> {:#?}",
                result.unwrap()
            );
        }
    }

    #[test]
    fn valid_configs_are_read_back_as_written(doc in valid_doc()) {
        let text = doc.render();
        match config::parse(FILE, &text) {
            Ok(cfg) => {
                check_accepted(&text, &cfg)?;
                doc.check(&text, &cfg)?;
            }
            Err(e) => prop_assert!(false, "a valid config was rejected:\n{e}\n--- config ---\n{text}"),
        }
    }

    #[test]
    fn byte_mutations_of_valid_configs_never_panic(
        seed in prop::sample::select(SEEDS.to_vec()),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let text = mutate(seed, &mutations);
        let result = config::parse(FILE, &text);
        check_any(&text, &result)?;
        check_located(&text, &result)?;
    }
}

#[test]
fn the_seeds_are_valid() {
    for seed in SEEDS {
        if let Err(e) = config::parse(FILE, seed) {
            panic!("seed rejected:\n{e}\n{seed}");
        }
    }
}

/// The structured generator is neither too weak nor too strong: both
/// accepted and rejected configs come out of it in useful numbers, and the
/// rejections cover more than one kind of error.
#[test]
fn the_structured_generator_yields_both_outcomes() {
    let mut runner = TestRunner::deterministic();
    let strategy = doc();
    let (mut accepted, mut rejected) = (0, 0);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..2000 {
        let text = strategy.new_tree(&mut runner).unwrap().current().render();
        match config::parse(FILE, &text) {
            Ok(_) => accepted += 1,
            Err(e) => {
                rejected += 1;
                *kinds.entry(error_kind(&e)).or_default() += 1;
            }
        }
    }
    assert!(
        accepted >= 150 && rejected >= 500 && kinds.len() >= 30,
        "generator balance off: {accepted} accepted, {rejected} rejected, by kind:\n{kinds:#?}"
    );
}

/// An error message without its values: "interface  is listed twice".
fn error_kind(e: &ConfigError) -> String {
    let mut kind = String::new();
    let mut quoted = false;
    for c in e.what.chars() {
        match c {
            '"' | '`' => quoted = !quoted,
            c if quoted || c.is_ascii_digit() => {}
            c => kind.push(c),
        }
    }
    kind.split_whitespace().take(8).collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------------------
// The real binary

/// A scratch directory for this test process, removed on drop.
fn scratch_dir(tag: &str) -> TempDir {
    TempDir::create(&format!("roce-route-fuzz-{}-{tag}", std::process::id()))
}

/// Runs `roce-route apply --dry-run FILE` on an invalid config: exit 2, the
/// error on stderr as the loader shows it, nothing created.
fn assert_cli_rejects(
    scratch: &Path,
    n: usize,
    text: &[u8],
    expected: Option<&ConfigError>,
) -> Result<(), TestCaseError> {
    let file = scratch.join(format!("bad-{n}.toml"));
    fs::write(&file, text).unwrap();
    let state = scratch.join("state");
    let out = Command::new(env!("CARGO_BIN_EXE_roce-route"))
        .args(["apply", "--dry-run"])
        .arg(&file)
        .env("ROCE_ROUTE_STATE_DIR", &state)
        .env_remove("ROCE_ROUTE_STEP_DELAY_MS")
        .env_remove("ROCE_ROUTE_CRASH_AT")
        .output()
        .expect("run roce-route");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = file.display().to_string();
    let report = format!(
        "status {}\n--- stderr ---\n{stderr}\n--- stdout ---\n{}\n--- config ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(text)
    );
    prop_assert!(!stderr.contains("panicked"), "roce-route panicked:\n{report}");
    prop_assert_eq!(out.status.code(), Some(2), "expected exit 2:\n{}", report);
    prop_assert!(stderr.contains(&shown), "stderr does not name {shown}:\n{report}");
    if let Some(e) = expected {
        let rendered = config::parse(&shown, &String::from_utf8_lossy(text)).unwrap_err();
        prop_assert!(
            stderr.contains(&rendered.to_string()),
            "stderr lacks the loader's message {e:?}:\n{report}"
        );
    }
    prop_assert!(out.stdout.is_empty(), "a rejected config printed commands:\n{report}");
    prop_assert!(!state.exists(), "a rejected config created the state dir:\n{report}");
    Ok(())
}

#[test]
fn cli_rejects_invalid_configs_with_exit_2() {
    let scratch = scratch_dir("cli");
    let counter = std::cell::Cell::new(0usize);
    let cfg = proptest_config(cases().min(CLI_CASES));
    let mut runner = TestRunner::new(cfg);
    let result = runner.run(&doc(), |doc| {
        let text = doc.render();
        let Err(e) = config::parse(FILE, &text) else {
            return Err(TestCaseError::reject("valid config"));
        };
        counter.set(counter.get() + 1);
        assert_cli_rejects(scratch.path(), counter.get(), text.as_bytes(), Some(&e))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Inputs that break naive parsers: deep nesting (stack depth), huge and
/// non-UTF-8 files. The binary must refuse them cleanly, not crash.
#[test]
fn cli_survives_pathological_files() {
    let scratch = scratch_dir("patho");
    let depth = 100_000;
    let cases: Vec<Vec<u8>> = vec![
        format!("a = {}{}\n", "[".repeat(depth), "]".repeat(depth)).into_bytes(),
        format!("a = {}1{}\n", "{ b = ".repeat(depth), " }".repeat(depth)).into_bytes(),
        "[".repeat(depth).into_bytes(),
        format!("[{}]\n", vec!["a"; depth].join(".")).into_bytes(),
        vec![0xff, 0xfe, 0x00, b'[', 0x80],
        {
            let mut big = b"[[interface]]\nname = \"ib0\"\n".to_vec();
            big.extend(std::iter::repeat_n(b"# padding padding padding\n".as_slice(), 200_000).flatten());
            big.extend_from_slice(b"table = 254\n");
            big
        },
        // 5000 interfaces (given tables skip the reserved 253..=255), the
        // last with a reserved explicit table.
        {
            let mut many = Vec::new();
            for i in 0..5000 {
                many.extend_from_slice(format!("[[interface]]\nname = \"ib{i}\"\n").as_bytes());
            }
            many.extend_from_slice(b"table = 255\n");
            many
        },
    ];
    for (n, text) in cases.iter().enumerate() {
        if let Err(e) = assert_cli_rejects(scratch.path(), n, text, None) {
            panic!("pathological case {n}: {e}");
        }
    }
}

/// A config path that is not a readable file is a config error too.
#[test]
fn cli_rejects_unreadable_config_paths() {
    let scratch = scratch_dir("paths");
    let dir = scratch.path().join("a-directory.toml");
    fs::create_dir(&dir).unwrap();
    for path in [scratch.path().join("missing.toml"), dir] {
        let out = Command::new(env!("CARGO_BIN_EXE_roce-route"))
            .args(["apply", "--dry-run"])
            .arg(&path)
            .env("ROCE_ROUTE_STATE_DIR", scratch.path().join("state"))
            .output()
            .expect("run roce-route");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", path.display());
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
