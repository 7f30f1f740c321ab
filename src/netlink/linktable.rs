//! The link table as roce-route knows it: read whole (`linkdump`), and in
//! `watch` kept from link notifications between reads, so that a burst of
//! a rail's events costs no read of a thousand pod veths. Pure.

use std::collections::HashMap;

use super::linkdump::{DevConf, LinkNews, LinkRow};
use crate::model::Link;

/// The links (in the kernel's order: by index since Linux 6.7, by hash
/// bucket before; a learnt new link goes before the first one with a
/// higher index), their names both ways, broadcast addresses and MTUs.
#[derive(Debug, Default)]
pub(super) struct LinkTable {
    links: Vec<Link>,
    by_index: HashMap<u32, String>,
    by_name: HashMap<String, u32>,
    /// Each link's IFLA_BROADCAST (by index), which announcements on
    /// IPoIB are sent to: kept beside `Link` rather than in it, so that
    /// nothing that builds a `Link` changes.
    broadcasts: HashMap<u32, Vec<u8>>,
    /// Each link's MTU (by index), beside `Link` for the same reason.
    mtus: HashMap<u32, u32>,
    /// Each link's IPv4 devconf values (by index) as its message carried
    /// them; `Netlink::devconf` says when they may still be used.
    devconfs: HashMap<u32, DevConf>,
}

impl LinkTable {
    /// The table a read gave.
    pub fn read(rows: Vec<LinkRow>) -> LinkTable {
        let mut table = LinkTable::default();
        table.broadcasts = rows.iter().filter_map(|r| Some((r.link.index, r.broadcast.clone()?))).collect();
        table.mtus = rows.iter().filter_map(|r| Some((r.link.index, r.mtu?))).collect();
        table.devconfs = rows.iter().filter_map(|r| Some((r.link.index, r.devconf?))).collect();
        table.links = rows.into_iter().map(|r| r.link).collect();
        table.by_index = table.links.iter().map(|l| (l.index, l.name.clone())).collect();
        table.by_name = table.links.iter().map(|l| (l.name.clone(), l.index)).collect();
        table
    }

    /// Takes notifications in, in the order they came. Returns false when
    /// one could not be read: the table must be read again.
    pub fn learn(&mut self, news: &[LinkNews]) -> bool {
        for n in news {
            match n {
                LinkNews::Now(row) => self.now(row),
                LinkNews::Gone(index) => self.gone(*index),
                LinkNews::Unreadable => return false,
            }
        }
        true
    }

    fn now(&mut self, row: &LinkRow) {
        let index = row.link.index;
        // A rename: the old name no longer leads here.
        if let Some(old) = self.by_index.insert(index, row.link.name.clone())
            && old != row.link.name
            && self.by_name.get(&old) == Some(&index)
        {
            self.by_name.remove(&old);
        }
        self.by_name.insert(row.link.name.clone(), index);
        match &row.broadcast {
            Some(b) => self.broadcasts.insert(index, b.clone()),
            None => self.broadcasts.remove(&index),
        };
        match row.mtu {
            Some(m) => self.mtus.insert(index, m),
            None => self.mtus.remove(&index),
        };
        match row.devconf {
            Some(c) => self.devconfs.insert(index, c),
            None => self.devconfs.remove(&index),
        };
        match self.links.iter_mut().find(|l| l.index == index) {
            Some(l) => *l = row.link.clone(),
            None => {
                let at = self.links.iter().position(|l| l.index > index).unwrap_or(self.links.len());
                self.links.insert(at, row.link.clone());
            }
        }
    }

    fn gone(&mut self, index: u32) {
        if let Some(name) = self.by_index.remove(&index)
            && self.by_name.get(&name) == Some(&index)
        {
            self.by_name.remove(&name);
        }
        self.broadcasts.remove(&index);
        self.mtus.remove(&index);
        self.devconfs.remove(&index);
        self.links.retain(|l| l.index != index);
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    pub fn name(&self, index: u32) -> Option<&String> {
        self.by_index.get(&index)
    }

    pub fn index(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    pub fn broadcast(&self, index: u32) -> Option<&[u8]> {
        self.broadcasts.get(&index).map(Vec::as_slice)
    }

    pub fn mtu(&self, index: u32) -> Option<u32> {
        self.mtus.get(&index).copied()
    }

    pub fn devconf(&self, index: u32) -> Option<DevConf> {
        self.devconfs.get(&index).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LinkType;

    fn row(index: u32, name: &str, up: bool, mtu: u32) -> LinkRow {
        let link = Link {
            index,
            name: name.into(),
            admin_up: up,
            lower_up: up,
            mac: None,
            link_type: LinkType::Ether,
        };
        LinkRow { link, broadcast: Some(vec![0xff; 6]), mtu: Some(mtu), devconf: Some(DevConf::default()) }
    }

    /// News taken in leave the table as a read of the links after them
    /// would: a change in place, a new link in index order, a rename (the
    /// old name leads nowhere), a link gone (with its MTU and broadcast).
    #[test]
    fn news_leave_the_table_as_a_read_after_them() {
        let mut table = LinkTable::read(vec![
            row(1, "lo", true, 65536),
            row(2, "rail0", true, 1500),
            row(9, "cali9", true, 1500),
        ]);
        let news = [
            LinkNews::Now(row(2, "rail0", false, 1500)),
            LinkNews::Now(row(5, "rail1", true, 9000)),
            LinkNews::Now(row(9, "rail2", true, 1500)),
            LinkNews::Now(row(12, "cali12", true, 1500)),
            LinkNews::Gone(12),
            LinkNews::Gone(1),
        ];
        assert!(table.learn(&news));
        let after = LinkTable::read(vec![
            row(2, "rail0", false, 1500),
            row(5, "rail1", true, 9000),
            row(9, "rail2", true, 1500),
        ]);
        assert_eq!(table.links(), after.links());
        assert_eq!(table.by_name, after.by_name);
        assert_eq!(table.by_index, after.by_index);
        assert_eq!(table.mtus, after.mtus);
        assert_eq!(table.broadcasts, after.broadcasts);
        assert_eq!(table.devconfs, after.devconfs);
        assert_eq!((table.index("cali9"), table.index("rail2"), table.mtu(1)), (None, Some(9), None));
    }

    /// A message that could not be read stops the news: the table must be
    /// read again.
    #[test]
    fn an_unreadable_message_asks_for_a_read() {
        let mut table = LinkTable::read(vec![row(2, "rail0", true, 1500)]);
        assert!(!table.learn(&[LinkNews::Unreadable, LinkNews::Gone(2)]));
        assert!(table.learn(&[]));
    }
}
