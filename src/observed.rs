//! What was read from the host, as the pure core sees it: the input of
//! `diff` (what to change) and of `risks` (what breaks RDMA that no change
//! fixes). Its own file so that neither of the two imports the other.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{Address, Link, Live, Route, Rule, SysctlKey};
use crate::plan::Desired;
use crate::state::Origins;

/// What was read from the host, limited to what roce-route needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    pub rules: Vec<Live<Rule>>,
    /// Routes of the tables concerned (configured tables and tables that
    /// our own rules point to).
    pub routes: Vec<Live<Route>>,
    /// Current values of `conf/<iface>/<key>` for the desired sysctls,
    /// the recorded ones, and the ARP sysctls of `risks::arp_candidates`.
    pub sysctls: BTreeMap<(String, SysctlKey), u32>,
    /// `conf/all/<key>`.
    pub all: BTreeMap<SysctlKey, u32>,
    /// Values recorded before roce-route first changed a sysctl.
    pub origins: Origins,
    /// Protocol numbers roce-route recorded as its own besides the
    /// config's (an earlier `[defaults] protocol`).
    pub owned_protocols: BTreeSet<u8>,
    /// Every link (admin state and carrier).
    pub links: Vec<Link>,
    /// The addresses of the interfaces, as `Netlink::run_addresses` reads
    /// them: every IPv4 address, the rails' IPv6 ones and another link's
    /// only when the run looks for it; one of a link outside the config
    /// that the run does not compare has an empty `ifname`.
    pub addresses: Vec<Address>,
}

impl Observed {
    /// Whether an entry with protocol `p` is roce-route's own.
    pub fn owns(&self, desired: &Desired, p: u8) -> bool {
        p == desired.protocol || self.owned_protocols.contains(&p)
    }
}
