//! The route protocol number roce-route stamps on its entries: which ones
//! are free to take (`[defaults] protocol`, `--protocol`).

/// Protocol numbers 0..=4 belong to the kernel (`rtnetlink.h`).
pub(super) const KERNEL_PROTOCOLS: [&str; 5] = ["unspec", "redirect", "kernel", "boot", "static"];

/// Protocol numbers that routing daemons stamp on their routes (iproute2's
/// rt_protos, the daemons' own sources): roce-route owns every route and
/// rule with its protocol, so it must not share one with them.
const DAEMON_PROTOCOLS: [(u8, u8, &str); 14] = [
    (8, 8, "gated"),
    (9, 9, "ra (IPv6 router advertisements)"),
    (10, 10, "mrt"),
    (11, 11, "zebra"),
    (12, 12, "bird"),
    (13, 13, "dnrouted"),
    (14, 14, "xorp"),
    (15, 15, "ntk"),
    (16, 17, "dhcp / mrouted"),
    (18, 18, "keepalived"),
    (42, 42, "babel"),
    (66, 66, "a cloud networking agent"),
    (99, 99, "openr"),
    (186, 198, "FRR (bgp, isis, ospf, rip, eigrp, ...)"),
];

/// Validates a protocol number for roce-route's own entries, wherever it
/// is given (`[defaults] protocol`, `--protocol`): `Err((what, hint))`.
pub fn check_protocol(n: i64) -> Result<u8, (String, &'static str)> {
    match u8::try_from(n) {
        Ok(p) if usize::from(p) >= KERNEL_PROTOCOLS.len() => match protocol_owner(p) {
            None => Ok(p),
            Some(daemon) => Err((
                format!("protocol = {p} is used by {daemon}"),
                "roce-route treats every route and rule with its protocol as its own; pick a \
                 number no routing daemon uses (default 234)",
            )),
        },
        Ok(p) => Err((
            format!("protocol = {p} is the kernel's own protocol `{}`", KERNEL_PROTOCOLS[usize::from(p)]),
            "protocols 0..=4 mark routes the kernel or an administrator made; roce-route \
             must tell its own routes apart, so pick 5..=255 (default 234)",
        )),
        Err(_) => Err((
            format!("protocol = {n} is out of range"),
            "the route protocol is one byte: pick 5..=255 (default 234)",
        )),
    }
}

/// The daemon that uses protocol number `p`, if one does.
pub fn protocol_owner(p: u8) -> Option<&'static str> {
    DAEMON_PROTOCOLS.iter().find(|(lo, hi, _)| (*lo..=*hi).contains(&p)).map(|(_, _, name)| *name)
}
