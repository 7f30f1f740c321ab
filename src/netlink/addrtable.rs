//! The addresses as `watch` knows them between reads: read whole
//! (`addrdump`), then kept from address notifications, so that a heal
//! does not read a node's thousand pod veths' addresses again (2 ms of
//! each pass at 1,000). Only the links that are not rails are taken from
//! here: a rail's addresses, whose order makes its plan (the first of a
//! subnet is its connected route's `src`), are read from the kernel at
//! every pass (`Netlink::addresses`). Pure.

use super::addrdump::AddrNews;
use crate::model::{Address, Family};

/// Every address with its link's index, in the order of a dump: IPv4
/// before IPv6, then by link index (the kernel's order since Linux 6.7);
/// a learnt new address goes after the others of its link and family.
#[derive(Debug, Default)]
pub(super) struct AddrTable {
    rows: Vec<(u32, Address)>,
}

/// Where an address goes in a dump: its family, then its link.
pub(super) fn place(index: u32, a: &Address) -> (u8, u32) {
    (u8::from(a.addr.family() == Family::V6), index)
}

/// Whether two messages speak of the same address of link `index`: the
/// kernel tells IPv6 addresses of a link apart by address alone (a new
/// prefix length replaces it), IPv4 ones by local address, prefix length
/// and peer (`find_matching_ifa`).
fn same(index: u32, a: &Address, other: &(u32, Address)) -> bool {
    let (i, b) = other;
    *i == index
        && a.addr.addr == b.addr.addr
        && (a.addr.family() == Family::V6 || (a.addr.len == b.addr.len && a.peer == b.peer))
}

impl AddrTable {
    /// The table a read gave.
    pub fn read(rows: Vec<(u32, Address)>) -> AddrTable {
        AddrTable { rows }
    }

    /// Takes notifications in, in the order they came. Returns false when
    /// one could not be read: the addresses must be read again.
    pub fn learn(&mut self, news: &[AddrNews]) -> bool {
        for n in news {
            match n {
                AddrNews::Now(index, a) => self.now(*index, a),
                AddrNews::Gone(index, a) => self.rows.retain(|r| !same(*index, a, r)),
                AddrNews::Unreadable => return false,
            }
        }
        true
    }

    fn now(&mut self, index: u32, a: &Address) {
        if let Some(r) = self.rows.iter_mut().find(|r| same(index, a, r)) {
            r.1 = a.clone();
            return;
        }
        let at =
            self.rows.iter().position(|(i, b)| place(*i, b) > place(index, a)).unwrap_or(self.rows.len());
        self.rows.insert(at, (index, a.clone()));
    }

    /// The addresses, in a dump's order.
    pub fn rows(&self) -> &[(u32, Address)] {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Prefix;

    fn a(text: &str) -> Address {
        let (ip, len) = text.split_once('/').unwrap();
        Address { addr: Prefix::new(ip.parse().unwrap(), len.parse().unwrap()), ..Address::default() }
    }

    fn shown(t: &AddrTable) -> Vec<String> {
        t.rows()
            .iter()
            .map(|(i, a)| format!("{i} {}{}", a.addr, if a.tentative { " tentative" } else { "" }))
            .collect()
    }

    /// A new address goes after its link's of its family, a change
    /// replaces it in place (IPv6: by address, whatever its length; IPv4:
    /// by address, length and peer), a deletion removes only that one,
    /// and an unreadable message says the table is lost.
    #[test]
    fn notifications_keep_the_order_and_identity_of_a_dump() {
        let mut t = AddrTable::read(vec![
            (1, a("127.0.0.1/8")),
            (3, a("198.51.100.13/24")),
            (1, a("::1/128")),
            (3, a("2001:db8::13/64")),
        ]);
        let tentative = Address { tentative: true, ..a("2001:db8::13/64") };
        assert!(t.learn(&[
            AddrNews::Now(2, a("203.0.113.2/32")),
            AddrNews::Now(3, a("198.51.100.13/25")),
            AddrNews::Now(5, a("fe80::5/64")),
            AddrNews::Now(2, a("fe80::2/64")),
            AddrNews::Now(3, tentative),
            AddrNews::Now(3, a("198.51.100.113/24")),
        ]));
        assert_eq!(
            shown(&t),
            [
                "1 127.0.0.1/8",
                "2 203.0.113.2/32",
                "3 198.51.100.13/24",
                "3 198.51.100.13/25",
                "3 198.51.100.113/24",
                "1 ::1/128",
                "2 fe80::2/64",
                "3 2001:db8::13/64 tentative",
                "5 fe80::5/64",
            ]
        );
        // An IPv6 address is the same whatever the length said; an IPv4
        // one of another length is another.
        assert!(t.learn(&[
            AddrNews::Gone(3, a("2001:db8::13/48")),
            AddrNews::Gone(3, a("198.51.100.13/25")),
            AddrNews::Gone(4, a("203.0.113.2/32")),
        ]));
        assert_eq!(
            shown(&t),
            [
                "1 127.0.0.1/8",
                "2 203.0.113.2/32",
                "3 198.51.100.13/24",
                "3 198.51.100.113/24",
                "1 ::1/128",
                "2 fe80::2/64",
                "5 fe80::5/64",
            ]
        );
        let p2p = Address { peer: Some("198.51.100.1".parse().unwrap()), ..a("198.51.100.0/31") };
        assert!(t.learn(&[AddrNews::Now(6, p2p.clone()), AddrNews::Gone(6, a("198.51.100.0/31"))]));
        assert!(t.rows().iter().any(|(i, b)| *i == 6 && *b == p2p), "another peer is another address");
        assert!(!t.learn(&[AddrNews::Gone(6, p2p), AddrNews::Unreadable]));
    }
}
