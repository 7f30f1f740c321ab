//! What roce-route remembers across runs about what it changed
//! (`record.json`): the sysctl values it found before it first changed
//! them, the tables it put routes in and the protocol numbers it stamped.
//!
//! `Origins` owns the bookkeeping of original sysctl values: which values a
//! run records, which it gives back, and how a commit, an undo and a
//! `remove` change the record. It is pure and tested here.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::journal::{JournalHeader, RunKind};
use crate::model::{Op, SysctlKey};

/// One sysctl of one interface.
pub type SysctlId = (String, SysctlKey);

/// Sysctl values as they were before roce-route first changed them. The
/// first value seen is the one to restore.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origins(BTreeMap<SysctlId, u32>);

/// How one run changes the origins: the values it records first and the
/// recorded values it writes back (so they are roce-route's no longer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOrigins {
    pub recorded: Vec<(String, SysctlKey, u32)>,
    pub released: Vec<(String, SysctlKey, u32)>,
}

impl Origins {
    pub fn get(&self, iface: &str, key: SysctlKey) -> Option<u32> {
        self.0.get(&(iface.to_string(), key)).copied()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&SysctlId, &u32)> {
        self.0.iter()
    }
    pub fn keys(&self) -> impl Iterator<Item = &SysctlId> {
        self.0.keys()
    }
    /// Whether a value of `iface` is recorded.
    pub fn has_iface(&self, iface: &str) -> bool {
        self.0.keys().any(|(i, _)| i == iface)
    }

    /// Moves the values of each renamed interface (old name -> name now)
    /// to its name now; a value the name now holds already stays.
    pub fn rename(&mut self, renamed: &BTreeMap<String, String>) {
        if renamed.is_empty() {
            return;
        }
        let moved: Vec<SysctlId> = self.0.keys().filter(|(i, _)| renamed.contains_key(i)).cloned().collect();
        for (old, key) in moved {
            let value = self.0.remove(&(old.clone(), key)).expect("listed above");
            self.0.entry((renamed[&old].clone(), key)).or_insert(value);
        }
    }

    /// What a run of `ops` does to the record: a sysctl changed for the
    /// first time records its value before the change; one written back to
    /// its recorded original is released.
    pub fn run_of(&self, ops: &[Op]) -> RunOrigins {
        let mut run = RunOrigins::default();
        for op in ops {
            if let Op::SetSysctl { iface, key, old, new } = op {
                match self.get(iface, *key) {
                    None if !run.recorded.iter().any(|(i, k, _)| i == iface && k == key) => {
                        run.recorded.push((iface.clone(), *key, *old))
                    }
                    Some(original) if original == *new => run.released.push((iface.clone(), *key, *new)),
                    _ => {}
                }
            }
        }
        run
    }

    /// What `remove` does: every recorded value is written back or already
    /// there, and all of them are released.
    pub fn removal(&self) -> RunOrigins {
        let released = self.0.iter().map(|((i, k), v)| (i.clone(), *k, *v)).collect();
        RunOrigins { recorded: Vec::new(), released }
    }

    /// Before a run's first step: its first-seen values are recorded (a
    /// crash at any later point leaves them known).
    pub fn on_start(&mut self, run: &RunOrigins) {
        for (iface, key, value) in &run.recorded {
            self.0.entry((iface.clone(), *key)).or_insert(*value);
        }
    }

    /// Once every step of the run is made: the values it wrote back are
    /// released.
    pub fn on_commit(&mut self, run: &RunOrigins) {
        for (iface, key, _) in &run.released {
            self.0.remove(&(iface.clone(), *key));
        }
    }

    /// Once a run is undone: what it recorded is forgotten (its sysctls
    /// are back to those values) and what it released is recorded again.
    pub fn on_undo(&mut self, run: &RunOrigins) {
        for (iface, key, value) in &run.recorded {
            if self.get(iface, *key) == Some(*value) {
                self.0.remove(&(iface.clone(), *key));
            }
        }
        for (iface, key, value) in &run.released {
            self.0.entry((iface.clone(), *key)).or_insert(*value);
        }
    }
}

impl FromIterator<(SysctlId, u32)> for Origins {
    fn from_iter<I: IntoIterator<Item = (SysctlId, u32)>>(iter: I) -> Self {
        Origins(iter.into_iter().collect())
    }
}

/// On disk: `{"<iface>/<sysctl>": value}` (interface names never hold '/').
impl Serialize for Origins {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let named: BTreeMap<String, u32> =
            self.0.iter().map(|((iface, key), v)| (format!("{iface}/{}", key.name()), *v)).collect();
        named.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Origins {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let named = BTreeMap::<String, u32>::deserialize(d)?;
        named
            .into_iter()
            .map(|(name, value)| {
                let id = name
                    .rsplit_once('/')
                    .and_then(|(iface, key)| Some((iface.to_string(), SysctlKey::from_name(key)?)))
                    .filter(|(iface, _)| !iface.is_empty())
                    .ok_or_else(|| {
                        serde::de::Error::custom(format!("{name:?} is not \"<interface>/<sysctl>\""))
                    })?;
                Ok((id, value))
            })
            .collect()
    }
}

/// `record.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Sysctl values before roce-route first changed them.
    #[serde(default)]
    pub origins: Origins,
    /// Tables roce-route has put routes in since the last `remove`: read
    /// for stale owned routes (a run killed half-way, a dropped interface).
    #[serde(default)]
    pub tables: BTreeSet<u32>,
    /// Protocol numbers roce-route stamped on its routes and rules since
    /// the last `remove`: entries with any of them are roce-route's own,
    /// also after `[defaults] protocol` changed.
    #[serde(default)]
    pub protocols: BTreeSet<u8>,
    /// The table each interface got (without an explicit `table`): it
    /// keeps it across config edits.
    #[serde(default)]
    pub assigned: BTreeMap<String, u32>,
    /// The addresses found at the last apply on interfaces that list no
    /// `addresses`: one that is gone later is reported, not forgotten.
    #[serde(default)]
    pub discovered: BTreeMap<String, Vec<crate::model::Prefix>>,
    /// The config file each interface of the last apply came from: an
    /// apply without that file says it removes the interface.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// The config of the last apply (each file's name and text): what
    /// `watch` heals toward; none after a `remove`.
    #[serde(default)]
    pub config_files: Vec<(String, String)>,
    /// The index each interface of `origins` had when a run last changed
    /// it: an interface renamed since (it keeps its sysctls) is found by
    /// it (`Record::renames`). Absent in records written before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub links: BTreeMap<String, u32>,
}

impl Record {
    /// The interfaces of `origins` renamed since a run last changed them
    /// (old name -> name now), as `renamed_now(name, index)` says of each
    /// (`Netlink::renamed`). A name now that already has recorded values,
    /// or that two recorded interfaces would take, is left out: those
    /// values stay where they are. Pure but for `renamed_now`.
    pub fn renames(&self, renamed_now: impl Fn(&str, u32) -> Option<String>) -> BTreeMap<String, String> {
        let mut found: BTreeMap<String, String> = (self.links.iter())
            .filter(|(name, _)| self.origins.has_iface(name))
            .filter_map(|(name, index)| Some((name.clone(), renamed_now(name, *index)?)))
            .filter(|(_, now)| !self.origins.has_iface(now))
            .collect();
        let mut taken: BTreeMap<String, usize> = BTreeMap::new();
        found.values().for_each(|now| *taken.entry(now.clone()).or_default() += 1);
        found.retain(|_, now| taken[now.as_str()] == 1);
        found
    }

    /// Moves the recorded values of renamed interfaces (old name -> name
    /// now) to their names now: what a run that found them renamed
    /// records (`JournalHeader::renamed`), and plans with.
    pub fn rename(&mut self, renamed: &BTreeMap<String, String>) {
        self.origins.rename(renamed);
        for (old, now) in renamed {
            if let Some(index) = self.links.remove(old) {
                self.links.entry(now.clone()).or_insert(index);
            }
        }
    }

    /// Follows the renames `renamed_now` finds (see `renames`) and returns
    /// them, for the run's header.
    pub fn follow_renames(
        &mut self,
        renamed_now: impl Fn(&str, u32) -> Option<String>,
    ) -> BTreeMap<String, String> {
        let renamed = self.renames(renamed_now);
        self.rename(&renamed);
        renamed
    }

    /// The indexes of a run's links, for the interfaces with recorded
    /// values; and only those interfaces keep one.
    fn note_links(&mut self, links: &BTreeMap<String, u32>) {
        for (name, index) in links {
            if self.origins.has_iface(name) {
                self.links.insert(name.clone(), *index);
            }
        }
        self.forget_links_without_values();
    }

    /// Only an interface with recorded values keeps an index.
    fn forget_links_without_values(&mut self) {
        let origins = &self.origins;
        self.links.retain(|name, _| origins.has_iface(name));
    }

    /// Before a run's first step.
    pub fn on_start(&mut self, header: &JournalHeader) {
        self.rename(&header.renamed);
        self.origins.on_start(&run_origins(header));
        self.note_links(&header.links);
        self.tables.extend(&header.tables);
        self.protocols.extend(owned_by(header));
        self.assigned.extend(header.assigned.iter().map(|(i, t)| (i.clone(), *t)));
        match header.kind {
            RunKind::Apply => {
                self.discovered = header.discovered.clone();
                self.sources = header.sources.clone();
                self.config_files = header.config_files.clone();
            }
            // A heal follows the recorded config; it only learns addresses.
            RunKind::Heal => self.discovered = header.discovered.clone(),
            RunKind::Remove => {}
        }
    }

    /// Once every step of the run is made.
    pub fn on_commit(&mut self, header: &JournalHeader) {
        self.origins.on_commit(&run_origins(header));
        self.forget_links_without_values();
        if header.kind == RunKind::Remove {
            // Nothing of roce-route's is left.
            self.tables.clear();
            self.protocols.clear();
            self.assigned.clear();
            self.discovered.clear();
            self.sources.clear();
            self.config_files.clear();
        }
    }

    /// Once the run is undone (rollback, a failed step, no confirmation).
    pub fn on_undo(&mut self, header: &JournalHeader) {
        self.origins.on_undo(&run_origins(header));
        // Values given back under the names the run used, then to the
        // names they had before it followed a rename.
        self.note_links(&header.links);
        let back: BTreeMap<String, String> =
            header.renamed.iter().map(|(old, now)| (now.clone(), old.clone())).collect();
        self.rename(&back);
        self.tables.extend(&header.tables);
        self.protocols.extend(owned_by(header));
        self.assigned.extend(header.assigned.iter().map(|(i, t)| (i.clone(), *t)));
        match header.kind {
            RunKind::Apply | RunKind::Remove => {
                self.config_files = header.replaced_config_files.clone();
                self.discovered = header.replaced_discovered.clone();
                self.sources = header.replaced_sources.clone();
            }
            RunKind::Heal => self.discovered = header.replaced_discovered.clone(),
        }
    }
}

/// The protocols a run's entries carry: an apply's own, and those a
/// remove took out (never a protocol only given on a command line).
fn owned_by(header: &JournalHeader) -> Vec<u8> {
    let mut all = header.protocols.clone();
    if matches!(header.kind, RunKind::Apply | RunKind::Heal) {
        all.push(header.protocol);
    }
    all
}

/// The origins part of a journal header.
pub fn run_origins(header: &JournalHeader) -> RunOrigins {
    RunOrigins { recorded: header.sysctl_origins.clone(), released: header.released_origins.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(iface: &str, old: u32, new: u32) -> Op {
        Op::SetSysctl { iface: iface.into(), key: SysctlKey::ArpIgnore, old, new }
    }
    fn id(iface: &str) -> SysctlId {
        (iface.to_string(), SysctlKey::ArpIgnore)
    }

    #[test]
    fn a_run_records_first_changes_and_releases_returns() {
        let known: Origins = [(id("rail3"), 0), (id("rail1"), 0)].into_iter().collect();
        let run = known.run_of(&[
            set("rail0", 0, 1), // never changed before: its original is 0
            set("rail3", 1, 0), // back to its recorded original: released
            set("rail1", 1, 2), // changed before, not to its original
        ]);
        assert_eq!(run.recorded, [("rail0".to_string(), SysctlKey::ArpIgnore, 0)]);
        assert_eq!(run.released, [("rail3".to_string(), SysctlKey::ArpIgnore, 0)]);
    }

    #[test]
    fn the_first_value_seen_is_kept() {
        let mut o = Origins::default();
        o.on_start(&RunOrigins {
            recorded: vec![("rail0".into(), SysctlKey::ArpIgnore, 0)],
            released: vec![],
        });
        o.on_start(&RunOrigins {
            recorded: vec![("rail0".into(), SysctlKey::ArpIgnore, 1)],
            released: vec![],
        });
        assert_eq!(o.get("rail0", SysctlKey::ArpIgnore), Some(0));
    }

    #[test]
    fn commit_then_undo_restores_the_record() {
        let before: Origins = [(id("rail3"), 0)].into_iter().collect();
        let run = before.run_of(&[set("rail0", 0, 1), set("rail3", 1, 0)]);
        let mut o = before.clone();
        o.on_start(&run);
        assert_eq!(o.get("rail0", SysctlKey::ArpIgnore), Some(0), "recorded before the first step");
        assert_eq!(o.get("rail3", SysctlKey::ArpIgnore), Some(0), "released only at commit");
        o.on_commit(&run);
        assert_eq!(o.get("rail3", SysctlKey::ArpIgnore), None);
        o.on_undo(&run);
        assert_eq!(o, before);
    }

    #[test]
    fn an_undo_after_a_crash_before_commit_restores_the_record() {
        let before: Origins = [(id("rail3"), 0)].into_iter().collect();
        let run = before.run_of(&[set("rail0", 0, 1), set("rail3", 1, 0)]);
        let mut o = before.clone();
        o.on_start(&run);
        o.on_undo(&run);
        assert_eq!(o, before);
    }

    #[test]
    fn removal_releases_everything_and_its_undo_brings_it_back() {
        let before: Origins = [(id("rail0"), 0), (id("rail1"), 2)].into_iter().collect();
        let run = before.removal();
        let mut o = before.clone();
        o.on_start(&run);
        o.on_commit(&run);
        assert_eq!(o, Origins::default());
        o.on_undo(&run);
        assert_eq!(o, before);
    }

    /// A record of rail0 (index 5) and rail1 (index 6), arp_ignore 0 each.
    fn two_rails() -> Record {
        Record {
            origins: [(id("rail0"), 0), (id("rail1"), 0)].into_iter().collect(),
            links: [("rail0".to_string(), 5), ("rail1".to_string(), 6)].into(),
            ..Record::default()
        }
    }
    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn renames_follow_the_recorded_index_unless_the_name_now_is_taken() {
        let r = two_rails();
        let now = |names: &'static [(&str, u32, &str)]| {
            move |name: &str, index: u32| {
                names.iter().find(|(n, i, _)| *n == name && *i == index).map(|(_, _, now)| now.to_string())
            }
        };
        assert_eq!(r.renames(now(&[("rail0", 5, "gpu0")])), map(&[("rail0", "gpu0")]));
        // A name now that has recorded values of its own keeps them.
        assert_eq!(r.renames(now(&[("rail0", 5, "rail1")])), map(&[]));
        // Two recorded interfaces cannot both be one link now.
        assert_eq!(r.renames(now(&[("rail0", 5, "gpu0"), ("rail1", 6, "gpu0")])), map(&[]));
        // An index recorded for an interface without values is not followed.
        let mut stale = r.clone();
        stale.links.insert("gone".into(), 7);
        assert_eq!(stale.renames(now(&[("gone", 7, "gpu0")])), map(&[]));
    }

    #[test]
    fn a_run_that_followed_a_rename_moves_the_values_and_its_undo_moves_them_back() {
        let before = two_rails();
        let mut r = before.clone();
        let renamed = r.follow_renames(|name, _| (name == "rail0").then(|| "gpu0".to_string()));
        assert_eq!(r.origins.get("gpu0", SysctlKey::ArpIgnore), Some(0));
        assert_eq!(r.links.get("gpu0"), Some(&5));
        // The run sets gpu0 back to its original: released at commit.
        let run = r.origins.run_of(&[set("gpu0", 1, 0), set("rail1", 0, 1)]);
        assert!(run.recorded.is_empty(), "a renamed rail's original is not recorded again: {run:?}");
        let mut h = JournalHeader::new(RunKind::Apply, None, 234);
        (h.sysctl_origins, h.released_origins) = (run.recorded, run.released);
        h.renamed = renamed;
        h.links = [("gpu0".to_string(), 5), ("rail1".to_string(), 6)].into();
        let mut stored = before.clone();
        stored.on_start(&h);
        assert_eq!(stored.origins.get("gpu0", SysctlKey::ArpIgnore), Some(0), "moved when the run starts");
        assert_eq!(stored.origins.get("rail0", SysctlKey::ArpIgnore), None);
        stored.on_commit(&h);
        assert_eq!(stored.origins.get("gpu0", SysctlKey::ArpIgnore), None);
        assert_eq!(
            stored.links,
            [("rail1".to_string(), 6)].into(),
            "an interface without values keeps no index"
        );
        stored.on_undo(&h);
        let undone = (&stored.origins, &stored.links);
        assert_eq!(
            undone,
            (&before.origins, &before.links),
            "undone: the values and indexes under the names before"
        );
    }

    #[test]
    fn an_undone_remove_gives_back_every_recorded_index() {
        let before = two_rails();
        let mut r = before.clone();
        let renamed = r.follow_renames(|name, _| (name == "rail1").then(|| "gpu1".to_string()));
        let mut h = crate::transaction::header_for(RunKind::Remove, None, 0, &[], &r);
        h.renamed = renamed;
        let mut stored = before.clone();
        stored.on_start(&h);
        stored.on_commit(&h);
        assert_eq!(stored, Record::default());
        stored.on_undo(&h);
        assert_eq!(stored, before);
    }

    #[test]
    fn a_run_notes_the_index_of_interfaces_with_values_only() {
        let mut r = Record::default();
        let mut h = JournalHeader::new(RunKind::Apply, None, 234);
        h.sysctl_origins = vec![("rail0".into(), SysctlKey::ArpIgnore, 0)];
        h.links = [("rail0".to_string(), 5), ("rail9".to_string(), 9)].into();
        r.on_start(&h);
        assert_eq!(r.links, [("rail0".to_string(), 5)].into());
        // A later run that names rail0, re-created with another index.
        let mut later = JournalHeader::new(RunKind::Apply, None, 234);
        later.links = [("rail0".to_string(), 12)].into();
        r.on_start(&later);
        assert_eq!(r.links, [("rail0".to_string(), 12)].into());
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""links":{"rail0":12}"#), "{text}");
        let without: Record = serde_json::from_str(r#"{"origins":{"rail0/arp_ignore":0}}"#).unwrap();
        assert!(without.links.is_empty(), "a record written before has no indexes");
        assert!(!serde_json::to_string(&Record::default()).unwrap().contains("links"));
    }

    #[test]
    fn record_file_round_trip_and_bad_keys() {
        let mut r = Record { origins: [(id("ib0.100"), 0)].into_iter().collect(), ..Record::default() };
        r.tables.insert(100);
        r.protocols.insert(234);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"ib0.100/arp_ignore\":0"), "{text}");
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        for bad in [
            r#"{"origins":{"rail0":1}}"#,
            r#"{"origins":{"/arp_ignore":1}}"#,
            r#"{"origins":{"rail0/bogus":1}}"#,
        ] {
            assert!(serde_json::from_str::<Record>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_config_is_replaced_by_apply_cleared_by_remove_and_given_back_on_undo() {
        let old = vec![("a.toml".to_string(), "old".to_string())];
        let new = vec![("b.toml".to_string(), "new".to_string())];
        let mut r = Record { config_files: old.clone(), ..Record::default() };
        let mut h = JournalHeader::new(RunKind::Apply, None, 234);
        h.config_files = new.clone();
        h.replaced_config_files = r.config_files.clone();
        r.on_start(&h);
        assert_eq!(r.config_files, new);
        r.on_undo(&h);
        assert_eq!(r.config_files, old, "an undone apply gives the earlier config back");
        let mut remove = JournalHeader::new(RunKind::Remove, None, 234);
        remove.replaced_config_files = r.config_files.clone();
        r.on_start(&remove);
        r.on_commit(&remove);
        assert!(r.config_files.is_empty(), "nothing to heal toward after remove");
        r.on_undo(&remove);
        assert_eq!(r.config_files, old, "a rolled-back remove gives it back");
    }

    #[test]
    fn an_undone_run_gives_back_discovered_addresses_and_sources() {
        let p = |s: &str| crate::model::Prefix { addr: s.parse().unwrap(), len: 24 };
        let mut r = Record::default();
        r.discovered.insert("rail0".into(), vec![p("198.51.100.10")]);
        r.sources.insert("rail0".into(), "a.toml".into());
        let before = r.clone();
        let mut apply = JournalHeader::new(RunKind::Apply, None, 234);
        apply.discovered.insert("rail1".into(), vec![p("198.51.100.11")]);
        apply.sources.insert("rail1".into(), "b.toml".into());
        apply.replaced_discovered = r.discovered.clone();
        apply.replaced_sources = r.sources.clone();
        r.on_start(&apply);
        r.on_commit(&apply);
        assert_eq!(r.sources["rail1"], "b.toml");
        let mut heal = JournalHeader::new(RunKind::Heal, None, 234);
        heal.discovered.insert("rail1".into(), vec![p("198.51.100.21")]);
        heal.replaced_discovered = r.discovered.clone();
        heal.sources.insert("rail9".into(), "ignored.toml".into());
        r.on_start(&heal);
        r.on_commit(&heal);
        assert_eq!(r.discovered["rail1"], vec![p("198.51.100.21")], "a heal learns addresses");
        assert!(!r.sources.contains_key("rail9"), "a heal never changes where interfaces come from");
        r.on_undo(&heal);
        assert_eq!(r.discovered["rail1"], vec![p("198.51.100.11")]);
        r.on_undo(&apply);
        assert_eq!(r.discovered, before.discovered);
        assert_eq!(r.sources, before.sources);
    }

    #[test]
    fn remove_commit_forgets_tables_and_protocols() {
        let mut r = Record::default();
        let mut h = JournalHeader::new(RunKind::Apply, None, 234);
        h.tables = vec![100, 101];
        r.on_start(&h);
        assert_eq!(r.protocols, BTreeSet::from([234]));
        r.on_commit(&h);
        let remove = JournalHeader::new(RunKind::Remove, None, 234);
        r.on_start(&remove);
        r.on_commit(&remove);
        assert!(r.tables.is_empty() && r.protocols.is_empty());
    }
}
