//! Neighbour entries: the dump `probe --rdma` takes before and after the
//! RDMA CM resolves its peers, and the removal of the entries it left.

use std::net::IpAddr;

use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};

use super::{Netlink, NlError, af};
use crate::model::Family;

/// One neighbour entry: its interface, its address, whether an admin
/// made it (permanent or noarp, never removed here).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Neighbour {
    pub ifindex: u32,
    pub dest: IpAddr,
    pub fixed: bool,
}

impl Netlink {
    /// Every IPv4 and IPv6 neighbour entry of this namespace.
    pub async fn neighbours(&self) -> Result<Vec<Neighbour>, NlError> {
        let mut out = Vec::new();
        for family in [Family::V4, Family::V6] {
            let mut msg = NeighbourMessage::default();
            msg.header.family = af(family);
            for m in self.dump(RouteNetlinkMessage::GetNeighbour(msg)).await? {
                let RouteNetlinkMessage::NewNeighbour(n) = m else { continue };
                let dest = n.attributes.iter().find_map(|a| match a {
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => Some(IpAddr::V4(*v4)),
                    NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => Some(IpAddr::V6(*v6)),
                    _ => None,
                });
                if let Some(dest) = dest {
                    out.push(Neighbour {
                        ifindex: n.header.ifindex,
                        dest,
                        fixed: matches!(n.header.state, NeighbourState::Permanent | NeighbourState::Noarp),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Removes one entry (`ip neigh del DEST dev IF`).
    pub async fn delete_neighbour(&self, n: &Neighbour) -> Result<(), NlError> {
        let mut msg = NeighbourMessage::default();
        msg.header.family = af(Family::of(&n.dest));
        msg.header.ifindex = n.ifindex;
        msg.attributes.push(NeighbourAttribute::Destination(match n.dest {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
        self.request(RouteNetlinkMessage::DelNeighbour(msg), 0).await.map(|_| ())
    }
}

/// The entries `after` has and `before` had not, on one of `ifindexes`,
/// for one of `dests`, that no admin made: what a probe's resolutions
/// left behind.
pub fn left_behind(
    before: &[Neighbour],
    after: &[Neighbour],
    ifindexes: &[u32],
    dests: &[IpAddr],
) -> Vec<Neighbour> {
    after
        .iter()
        .filter(|n| !n.fixed && ifindexes.contains(&n.ifindex) && dests.contains(&n.dest))
        .filter(|n| !before.iter().any(|b| b.ifindex == n.ifindex && b.dest == n.dest))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(ifindex: u32, dest: &str, fixed: bool) -> Neighbour {
        Neighbour { ifindex, dest: dest.parse().unwrap(), fixed }
    }

    #[test]
    fn only_new_learned_entries_of_the_rails_for_the_peers_are_left_behind() {
        let before = vec![n(3, "198.51.100.20", false), n(4, "198.51.100.1", true)];
        let after = vec![
            n(3, "198.51.100.20", false), // was there
            n(3, "198.51.100.21", false), // new: ours
            n(4, "198.51.100.21", false), // new on another rail: ours
            n(4, "198.51.100.1", true),   // an admin's
            n(9, "198.51.100.21", false), // not a rail
            n(3, "198.51.100.99", false), // not a peer
            n(3, "2001:db8::21", false),  // new, IPv6 peer
        ];
        let peers: Vec<IpAddr> = ["198.51.100.20", "198.51.100.21", "198.51.100.1", "2001:db8::21"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let left = left_behind(&before, &after, &[3, 4], &peers);
        assert_eq!(
            left,
            vec![n(3, "198.51.100.21", false), n(4, "198.51.100.21", false), n(3, "2001:db8::21", false)]
        );
    }
}
