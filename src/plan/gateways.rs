//! The gateways of one interface against its addresses on the host.

use std::net::IpAddr;

use super::address_policy::{off_link_hint, v4_subnet_role};
use super::addresses::addr_spec;
use crate::config::{ConfigError, Gateway, Interface, Loc};
use crate::model::{self, Address, Family, Prefix};

/// An error at `loc` of the file `iface` is configured in.
fn err(iface: &Interface, loc: Loc, what: String, hint: String) -> ConfigError {
    ConfigError::at(&iface.file, Some(loc), what, hint)
}

/// A gateway must be on-link: inside a subnet of the interface's addresses
/// (for a point-to-point address, the peer's), IPv6 link-local, or declared
/// `onlink`; and the interface needs an address of its family.
/// A gateway that could be on-link through an address that is not ready is
/// not ready either, and so is one that is an address of this host now
/// (returned, with the reason), never an error.
pub(super) fn check_gateways(
    iface: &Interface,
    subnets: &[Prefix],
    missing: &[IpAddr],
    host: &[Address],
) -> Result<Vec<(IpAddr, String)>, ConfigError> {
    let mut waiting = Vec::new();
    for gw in &iface.gateways {
        if let Some(reason) = check_gateway(iface, gw, subnets, missing, host)? {
            waiting.push((gw.addr, reason));
        }
    }
    Ok(waiting)
}

/// `check_gateways` for one gateway: Some(reason) when it is not ready.
fn check_gateway(
    iface: &Interface,
    gw: &Gateway,
    subnets: &[Prefix],
    missing: &[IpAddr],
    host: &[Address],
) -> Result<Option<String>, ConfigError> {
    let fail = |what: String, hint: String| Err(err(iface, gw.loc, what, hint));
    let family = Family::of(&gw.addr).name();
    let missing_here: Vec<String> =
        missing.iter().filter(|m| Family::of(m) == Family::of(&gw.addr)).map(|m| m.to_string()).collect();
    let inside = subnets.iter().find(|s| s.contains(&gw.addr));
    let has_family = subnets.iter().any(|s| s.family() == Family::of(&gw.addr));
    let off_link = inside.is_none() && !gw.onlink && !model::is_v6_link_local(gw.addr);
    if !missing_here.is_empty() && (!has_family || off_link) {
        return Ok(Some(format!(
            "its {family} address {} is not ready, so it is not on-link yet",
            missing_here.join(", ")
        )));
    }
    if !has_family {
        return fail(
            format!(
                "gateway {} of {:?} is {family} but the interface has no global {family} address",
                gw.addr, iface.name
            ),
            format!(
                "add one (`ip addr add ADDR/LEN dev {}`) or remove the gateway: no source rule \
                 would ever lead to it",
                iface.name
            ),
        );
    }
    if off_link {
        let subnets: Vec<String> = subnets.iter().map(|a| a.network().to_string()).collect();
        return fail(
            format!(
                "gateway {} of {:?} is outside every subnet of the interface ({})",
                gw.addr,
                iface.name,
                subnets.join(", ")
            ),
            off_link_hint(gw.addr),
        );
    }
    // A link-local address is unique on its link only: the kernel takes
    // another link's fe80::1 (a bridge's, say) as this link's gateway.
    let link_local = model::is_v6_link_local(gw.addr);
    let own = host.iter().find(|a| a.addr.addr == gw.addr && (!link_local || a.ifname == iface.name));
    if let Some(own) = own {
        // The host's state (the config check refuses a gateway it lists
        // as an address): not ready, its route stays as it is.
        return Ok(Some(format!(
            "is this host's own address (on {o}): a gateway is the router on the subnet, not a \
                 local address; its route stays as it is; remove the address (`ip addr del {} dev \
                 {o}`), or fix the gateway at {}:{}",
            addr_spec(own),
            iface.file,
            gw.loc,
            o = own.ifname
        )));
    }
    if let Some(net) = inside
        && let Some(role) = v4_subnet_role(gw.addr, net.len)
    {
        return fail(
            format!("gateway {} of {:?} is the {role} address of {}", gw.addr, iface.name, net.network()),
            "use the router's host address".into(),
        );
    }
    Ok(None)
}
