//! An address on several configured interfaces: which one owns it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::address_policy::{AddrOrigin, AddrUse, check_unique_addresses};
use super::addresses::{Missing, Resolved, addr_spec};
use crate::config::{ConfigError, Interface, Loc};
use crate::model::Address;

/// One address a source rule is made for by one interface only. Two
/// interfaces that list it are the config's fault (an error; the config
/// check finds it first). Otherwise it is the host's state, and not ready
/// where it is not owned: on the interfaces that found it without listing
/// it when one interface lists it and has it (that one owns it; the others'
/// entries for it go, as a second rule would shadow or be shadowed by its
/// own), on every interface that has it when none lists it (left alone:
/// which one should have it is not for roce-route to guess).
pub(super) fn settle_shared_addresses(rails: &mut [(&Interface, Resolved<'_>)]) -> Result<(), ConfigError> {
    let mut claims: BTreeMap<IpAddr, Vec<Claim<'_>>> = BTreeMap::new();
    for (k, (_, r)) in rails.iter().enumerate() {
        for (a, origin) in &r.found {
            claims.entry(a.addr.addr).or_default().push((k, *a, *origin));
        }
    }
    let uses: Vec<AddrUse<'_>> = claims
        .values()
        .flatten()
        .map(|(k, a, origin)| AddrUse {
            iface: &rails[*k].0.name,
            file: &rails[*k].0.file,
            addr: a.addr.addr,
            origin: *origin,
        })
        .collect();
    check_unique_addresses(&uses)?;
    let mut unready: Vec<(usize, Missing)> = Vec::new();
    for (ip, claimants) in claims.iter().filter(|(_, c)| c.len() > 1) {
        // At most one lists it (checked above); an interface lists its
        // addresses or discovers them, never both.
        let owner = claimants.iter().find_map(|(k, _, o)| match o {
            AddrOrigin::Listed(at) => Some((*k, *at)),
            AddrOrigin::Discovered(_) => None,
        });
        for (k, a, _) in claimants {
            let Some(reason) = not_owned_reason(rails, claimants, owner, *k, a) else { continue };
            if !unready.iter().any(|(j, m)| j == k && m.addr == *ip) {
                unready.push((*k, Missing { addr: *ip, reason, keep: owner.is_none() }));
            }
        }
    }
    for (k, m) in unready {
        let r = &mut rails[k].1;
        r.found.retain(|(a, _)| a.addr.addr != m.addr);
        r.missing.push(m);
    }
    Ok(())
}

/// Which rail (by position in `rails`) has an address, found how.
type Claim<'a> = (usize, &'a Address, AddrOrigin);

/// Why the address `a` of rail `k`, which every one of `claimants` has,
/// is not ready on `k`; `owner` is the rail that lists it (and where).
/// None: `k` is the owner.
fn not_owned_reason(
    rails: &[(&Interface, Resolved<'_>)],
    claimants: &[Claim<'_>],
    owner: Option<(usize, Loc)>,
    k: usize,
    a: &Address,
) -> Option<String> {
    let name = |k: usize| rails[k].0.name.as_str();
    let here = name(k);
    let reason = match owner {
        Some((owner, _)) if owner == k => return None,
        Some((owner, at)) => format!(
            "{here} has it too, but {} lists it ({}:{at}) and has it; {here} lists no \
             `addresses`, so it takes every global address it has, and an address can have \
             one source rule only: remove it from {here} (`ip addr del {} dev {here}`), or list \
             `addresses` for {here} without it",
            name(owner),
            rails[owner].0.file,
            addr_spec(a)
        ),
        _ if claimants.iter().all(|(j, _, _)| *j == k) => {
            let all: Vec<String> = claimants.iter().map(|(_, b, _)| b.addr.to_string()).collect();
            let other = claimants.iter().map(|(_, b, _)| *b).find(|b| *b != a).unwrap_or(a);
            format!(
                "{here} has it {} times ({}), and an address can have one source rule only: \
                 remove all but one (`ip addr del {} dev {here}`), or list it in `addresses` \
                 with the length to use",
                claimants.len(),
                all.join(", "),
                addr_spec(other)
            )
        }
        _ => {
            let others: Vec<(&str, &Address)> =
                claimants.iter().filter(|(j, _, _)| *j != k).map(|(j, b, _)| (name(*j), *b)).collect();
            let names: Vec<&str> = others.iter().map(|(n, _)| *n).collect();
            let (other, b) = others[0];
            format!(
                "is on {} too, and none of them lists it in `addresses` (each takes every \
                 global address it has), and an address can have one source rule only: its \
                 entries are left as they are; remove it from all but one (`ip addr del {} \
                 dev {other}`), or list `addresses` for the ones that must not have it",
                names.join(", "),
                addr_spec(b)
            )
        }
    };
    Some(reason)
}
