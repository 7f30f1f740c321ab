//! The heal under the lock, through the same transaction loop as apply
//! (`converge`), and what a pass that got that far says: the conflicts
//! that stop it, the parts left alone, the end of a fight, the heal.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::announce;
use crate::commands::Change;
use crate::commands::tell::tell_peers;
use crate::config::Config;
use crate::converge::{self, Converged, Request, table_owners};
use crate::error::Error;
use crate::netlink::Netlink;
use crate::reconcile;
use crate::render::{self, count};
use crate::state::Record;

use super::fight::{FIGHT_WINDOW, MAX_FIGHT_HOLD, Started};
use super::log::{Event, log};
use super::outcome::Outcome;
use super::pass::Watcher;
use super::trigger::Trigger;

impl Watcher<'_> {
    /// Plans `record`'s config against the host and makes the difference.
    /// Like apply without --adopt: an entry roce-route does not own in the
    /// place of one of its own stops the heal (`Err`, the conflicts);
    /// watch never takes one over.
    pub(super) async fn converge(
        &mut self,
        nl: &mut Netlink,
        cfg: &Config,
        record: &Record,
    ) -> Result<Result<Converged, Vec<String>>, Error> {
        let ctx = self.ctx;
        // The view every command plans on (`reconcile::read_addresses`):
        // of other links' IPv6 addresses, those the run looks for.
        let given = reconcile::Given {
            addrs: reconcile::read_addresses(nl, cfg, &record.discovered).await?,
            with_record: true,
        };
        let addrs = &given.addrs;
        let req = Request {
            cfg,
            config_files: &record.config_files,
            adopt: false,
            kind: crate::state::RunKind::Heal,
            trial: None,
            notice: &|m| log(ctx, m, Event::Retry {}),
            // Read under the pass's lock just now: not read again.
            addresses: Some(&given),
            // Read under the same lock by the pass.
            record: Some(record),
        };
        let adjust = |r: &mut Record| forget_replaced(r, addrs);
        // The gate stops at conflicts with the error that says so; only
        // that error is turned into the answer, any other stays an error.
        // The last reading, for the metrics of a pass that fails after it.
        let mut reading = None;
        let gate = |_: &Record, desired: &crate::plan::Desired, plan: &crate::diff::Plan| {
            reading = Some((desired.clone(), plan.clone()));
            if plan.conflicts.is_empty() {
                return Ok(());
            }
            let entries = plan.conflicts.iter().map(|c| (c.entry.clone(), c.why.clone())).collect();
            Err(Error::Conflicts { report: "entries roce-route does not own are in the way".into(), entries })
        };
        let converged = converge::converge(self.state, nl, &ctx.stop, &req, gate, adjust).await;
        match converged {
            Err(Error::Conflicts { entries, .. }) => {
                Ok(Err(entries.into_iter().map(|(entry, why)| format!("{entry} ({why})")).collect()))
            }
            Err(e) => {
                if let Some((desired, plan)) = &reading {
                    self.metrics.failed_reading(desired, plan);
                }
                Err(e)
            }
            Ok(converged) => Ok(Ok(converged)),
        }
    }

    /// Conflicts stopped the heal: said once while they stay.
    pub(super) fn conflicts_found(&mut self, conflicts: Vec<String>) -> Outcome {
        self.metrics.conflicts(conflicts.len());
        if conflicts != self.conflicts {
            log(
                self.ctx,
                &format!(
                    "not healing: entries roce-route does not own hold the places of its own: {}; \
                     remove them, or take them over with `{}`",
                    conflicts.join("; "),
                    self.ctx.suggest(&["apply", "--adopt", "CONFIG"])
                ),
                Event::Conflicts { conflicts: &conflicts },
            );
            self.conflicts = conflicts;
        }
        Outcome::Conflicts
    }

    /// After a heal or a reading in sync (the lock released).
    pub(super) async fn report(
        &mut self,
        nl: &Netlink,
        cfg: &Config,
        converged: Converged,
        trigger: &Trigger,
    ) -> Outcome {
        self.conflicts.clear();
        let Converged { desired, plan, header } = converged;
        self.concerned = concerned(cfg, &desired);
        self.say_not_ready(&desired, &plan.ops);
        self.metrics.planned(&desired);
        self.metrics.rdma(&desired, nl.links());
        if header.is_none() {
            self.say_fight_over();
            return Outcome::InSync;
        }
        self.heals += 1;
        let owners = table_owners(&desired, &plan.ops);
        let summary = render::summary(&plan.ops, &owners);
        // A held pass goes on with the fight it was held for.
        let by_agent = match trigger {
            Trigger::Events(_) => self.undone_by_agent,
            Trigger::Retry => self.fight.ongoing(),
            _ => false,
        };
        if by_agent && let Some(started) = self.fight.healed(Instant::now(), &summary) {
            self.say_fight(&started, &summary);
        }
        // One round per heal: the extra rounds of `apply` sleep between
        // sends, and a heal must not hold the event loop for them.
        let rounds = cfg.defaults.announce.min(1);
        let mut announced = Vec::new();
        if rounds > 0 {
            let rails: BTreeSet<String> = announce::touched(&desired, &plan.ops);
            announced = tell_peers(self.ctx, nl, &desired, Some(&rails), rounds).await.announced;
        }
        self.metrics.healed(trigger, &plan.ops, announced.len(), std::time::SystemTime::now());
        let also = if announced.is_empty() {
            String::new()
        } else {
            format!("; announced {}", count(announced.len(), "address", "addresses"))
        };
        log(
            self.ctx,
            &format!(
                "healed {} {}: {}{also}",
                count(plan.ops.len(), "change", "changes"),
                trigger.words(),
                summary.join("; ")
            ),
            Event::Heal {
                pass: self.passes,
                trigger: trigger.metric().label(),
                triggers: trigger.events(),
                changes: plan.ops.iter().map(Change::of).collect(),
                summary: &summary,
                announced: &announced,
            },
        );
        Outcome::Healed
    }

    /// The parts the host is not ready for, each said when it starts.
    fn say_not_ready(&mut self, desired: &crate::plan::Desired, ops: &[crate::model::Op]) {
        let now = &desired.not_ready;
        if *now == self.not_ready {
            return;
        }
        for nr in now.iter().filter(|n| !self.not_ready.contains(n)) {
            log(
                self.ctx,
                &nr.line(&desired.unkept, ops, "left alone until it is", "heal"),
                Event::NotReady(nr),
            );
        }
        self.not_ready = now.to_vec();
    }

    /// The fight is said once, with the suspects.
    fn say_fight(&self, started: &Started, summary: &[String]) {
        let suspects = crate::managers::suspects(&crate::managers::scan());
        let who = if suspects.is_empty() {
            "no known network manager runs here: look for an agent that owns these entries (a CNI plugin, \
             a routing daemon, a script)"
                .to_string()
        } else {
            format!("suspects: {}", suspects.join("; "))
        };
        let Started { same, hold } = started;
        log(
            self.ctx,
            &format!(
                "healed the same entries {same} times within {} s: something undoes them right after each heal \
                 ({who}); each heal now waits {} s more than the last (up to {} s) until they stay: {}",
                FIGHT_WINDOW.as_secs(),
                hold.as_secs(),
                MAX_FIGHT_HOLD.as_secs(),
                summary.join("; ")
            ),
            Event::Fighting { heals: *same, hold_seconds: hold.as_secs(), suspects: &suspects, summary },
        );
    }

    /// Nothing undid the last heal: the fight, if any, is over, with a count.
    fn say_fight_over(&mut self) {
        let Some(over) = self.fight.in_sync() else { return };
        log(
            self.ctx,
            &format!(
                "the entries stayed: the fight is over after {} held back",
                count(over.held_heals as usize, "heal", "heals")
            ),
            Event::FightOver { held_heals: over.held_heals, held_bursts: over.held_bursts },
        );
    }
}

/// A discovered address replaced by another of the same family on the
/// same interface was replaced, not flushed by a flap: it is forgotten
/// (its rule goes), where apply would keep it as not ready.
/// Pure.
pub fn forget_replaced(record: &mut Record, live: &[crate::model::Address]) {
    for (iface, prefixes) in record.discovered.iter_mut() {
        prefixes.retain(|p| {
            !live.iter().any(|a| {
                &a.ifname == iface
                    && a.scope == crate::model::scope::UNIVERSE
                    && a.addr.addr.is_ipv4() == p.addr.is_ipv4()
                    && a.addr.addr != p.addr
            })
        });
    }
}

/// What an address event of a link that is not a rail must be about to
/// get a pass: the subnets the plan's rails reach, their gateways, the
/// addresses not ready (gone from their rail, perhaps moved), and the
/// addresses and gateways the config lists. Without it, a rail's address
/// moved to a pod veth an instant after the pass of its removal read the
/// host was not seen there until the next rail event: its rule stayed.
pub(super) fn concerned(cfg: &Config, desired: &crate::plan::Desired) -> Vec<crate::model::Prefix> {
    use crate::model::Prefix;
    use crate::plan::Subject;
    let mut out: Vec<Prefix> = desired.interfaces.iter().flat_map(|i| i.subnets.iter().copied()).collect();
    out.extend(desired.interfaces.iter().flat_map(|i| i.gateways.iter().copied()).map(Prefix::host));
    out.extend(desired.not_ready.iter().filter_map(|n| match n.subject {
        Subject::Address(ip) | Subject::Gateway(ip) => Some(Prefix::host(ip)),
        Subject::Interface => None,
    }));
    for i in &cfg.interfaces {
        out.extend(i.addresses.iter().flatten().map(|s| Prefix::host(s.addr)));
        out.extend(i.gateways.iter().map(|g| Prefix::host(g.addr)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Address, Prefix};

    /// A pod's address is none of the config's business; one in a rail's
    /// subnet, a listed one and a gateway are.
    #[test]
    fn only_an_address_the_config_reaches_concerns_it() {
        let text = "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10/24\", \"203.0.113.7/32\"]\n\
                    gateway = { address = \"203.0.113.254\", onlink = true }\n";
        let cfg = crate::config::parse("t.toml", text).unwrap();
        let links = [crate::model::Link::up(1, "lo"), crate::model::Link::up(2, "rail0")];
        let host = [addr("rail0", "198.51.100.10")];
        let desired = crate::plan::plan(&cfg, &links, &host).unwrap();
        let c = concerned(&cfg, &desired);
        let concerns = |ip: &str| c.iter().any(|p| p.contains(&ip.parse().unwrap()));
        assert!(concerns("198.51.100.77"), "in rail0's subnet: {c:?}");
        assert!(concerns("203.0.113.7"), "listed, not on rail0 now: {c:?}");
        assert!(concerns("203.0.113.254"), "its gateway: {c:?}");
        assert!(!concerns("10.244.1.5") && !concerns("203.0.113.8"), "{c:?}");
    }

    fn addr(ifname: &str, ip: &str) -> Address {
        Address {
            ifname: ifname.into(),
            addr: Prefix { addr: ip.parse().unwrap(), len: 24 },
            peer: None,
            scope: 0,
            tentative: false,
            deprecated: false,
            temporary: false,
            dad_failed: false,
        }
    }

    #[test]
    fn a_replaced_discovered_address_is_forgotten_a_flushed_one_kept() {
        let p = |ip: &str| Prefix { addr: ip.parse().unwrap(), len: 24 };
        let mut record = Record::default();
        record.discovered.insert("rail0".into(), vec![p("198.51.100.10")]);
        record.discovered.insert("rail1".into(), vec![p("198.51.100.11")]);
        // rail0's address was replaced; rail1's is gone with nothing instead (a flap).
        forget_replaced(&mut record, &[addr("rail0", "198.51.100.20"), addr("rail2", "198.51.100.12")]);
        assert!(record.discovered["rail0"].is_empty());
        assert_eq!(record.discovered["rail1"], vec![p("198.51.100.11")]);
    }
}
