//! Pure: what `check` says about the rails' MTUs (no packet sent): rails
//! whose MTUs differ from each other (NCCL and RDMA CM need the same
//! MTU end to end, NVIDIA/nccl#1524), and a RoCE rail whose netdev MTU
//! cannot carry its port's active_mtu (RoCE needs the netdev MTU >= the
//! RDMA MTU + its headers: netdev 9000 carries 4096, 1500 carries 1024).

use std::collections::BTreeMap;

use crate::probe::verdict::{RdmaMtu, rdma_mtu_carried};

/// One rail's MTU and RDMA port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RailMtu {
    pub name: String,
    pub mtu: u32,
    pub rdma: Option<RdmaMtu>,
}

/// The warnings, one sentence each.
pub fn warnings(rails: &[RailMtu]) -> Vec<String> {
    let mut out = Vec::new();
    let mut by_mtu: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for r in rails {
        by_mtu.entry(r.mtu).or_default().push(&r.name);
    }
    if by_mtu.len() > 1 {
        let groups: Vec<String> =
            by_mtu.iter().map(|(mtu, names)| format!("{} on {}", mtu, names.join(", "))).collect();
        out.push(format!(
            "the rails' MTUs differ ({}): RDMA and NCCL need one MTU on every rail and every peer; set the same \
             MTU on each (`ip link set dev RAIL mtu N`, and in the host's network configuration)",
            groups.join("; ")
        ));
    }
    for r in rails {
        let Some(port) = r.rdma.as_ref().filter(|p| p.roce) else { continue };
        let Some(active) = port.active_mtu else { continue };
        let carried = rdma_mtu_carried(r.mtu);
        if carried.is_none_or(|c| c < active) {
            out.push(format!(
                "{}'s MTU {} cannot carry the active_mtu {active} of its RDMA port {} (it carries {}): RoCE needs \
                 the netdev MTU at least {active} + 96 bytes of headers; raise it (9000 is usual for 4096)",
                r.name,
                r.mtu,
                port.port,
                carried.map_or("none".to_string(), |c| c.to_string())
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rail(name: &str, mtu: u32, active: Option<u32>) -> RailMtu {
        RailMtu {
            name: name.into(),
            mtu,
            rdma: active.map(|a| RdmaMtu { port: format!("mlx5_{name}:1"), roce: true, active_mtu: Some(a) }),
        }
    }

    #[test]
    fn same_mtus_and_carried_active_mtus_say_nothing() {
        assert!(warnings(&[rail("r0", 9000, Some(4096)), rail("r1", 9000, None)]).is_empty());
        assert!(warnings(&[rail("r0", 1500, Some(1024))]).is_empty());
    }

    #[test]
    fn differing_mtus_and_a_too_small_netdev_mtu_are_warned_about() {
        let w = warnings(&[rail("r0", 9000, None), rail("r1", 1500, None), rail("r2", 9000, None)]);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("the rails' MTUs differ (1500 on r1; 9000 on r0, r2)"), "{}", w[0]);
        let w = warnings(&[rail("r0", 4150, Some(4096))]);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with(
                "r0's MTU 4150 cannot carry the active_mtu 4096 of its RDMA port mlx5_r0:1 (it carries 2048)"
            ),
            "{}",
            w[0]
        );
        // InfiniBand ports are not RoCE: IPoIB's MTU is another matter.
        let mut ib = rail("r0", 2044, Some(4096));
        ib.rdma.as_mut().unwrap().roce = false;
        assert!(warnings(&[ib]).is_empty());
    }
}
