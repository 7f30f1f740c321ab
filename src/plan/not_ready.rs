//! What of the config the host is not ready for, and why.

use std::net::IpAddr;

use serde::{Serialize, Serializer};

use crate::model::Op;

/// One part of the config the host is not ready for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotReady {
    pub interface: String,
    /// The part of `interface` concerned. In JSON it is `address`, as text
    /// (`Subject::text`).
    #[serde(rename = "address")]
    pub subject: Subject,
    pub reason: String,
}

/// Which part of an interface is not ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The interface as a whole (missing, down, no usable address).
    Interface,
    /// One of its addresses.
    Address(IpAddr),
    /// One of its gateways.
    Gateway(IpAddr),
}

impl Subject {
    /// How messages and JSON name it: `ADDR`, `gateway ADDR`, or nothing for
    /// the interface as a whole.
    pub fn text(self) -> Option<String> {
        match self {
            Subject::Interface => None,
            Subject::Address(a) => Some(a.to_string()),
            Subject::Gateway(g) => Some(format!("gateway {g}")),
        }
    }
}

/// As `text`: a string, or null for the interface as a whole.
impl Serialize for Subject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.text().serialize(s)
    }
}

impl NotReady {
    pub fn describe(&self) -> String {
        match self.subject.text() {
            Some(a) => format!("{} on {}: {}", a, self.interface, self.reason),
            None => format!("{}: {}", self.interface, self.reason),
        }
    }
}

impl NotReady {
    /// The line a run prints for it once its plan (`ops`) is known.
    /// Usually the part is left alone (`left_alone`: "left alone", "left
    /// alone until it is"); an address of `unkept` (on another interface
    /// now) is not: the line says what this `run` deletes of its entries.
    pub fn line(&self, unkept: &[(String, IpAddr, u32)], ops: &[Op], left_alone: &str, run: &str) -> String {
        let Subject::Address(addr) = self.subject else {
            return format!("not ready, {left_alone}: {}", self.describe());
        };
        let Some(&(_, _, table)) = unkept.iter().find(|(i, a, _)| *i == self.interface && *a == addr) else {
            return format!("not ready, {left_alone}: {}", self.describe());
        };
        let (routes, rules) = deleted_of(addr, table, ops);
        let what = match (routes, rules) {
            (0, 0) => format!("deletes nothing of it (table {table} holds no entry of it)"),
            (n, 0) => format!("deletes its {} in table {table}", count(n, "route", "routes")),
            (0, m) => format!("deletes its {} in table {table}", count(m, "rule", "rules")),
            (n, m) => {
                format!(
                    "deletes its {} and {} in table {table}",
                    count(n, "route", "routes"),
                    count(m, "rule", "rules")
                )
            }
        };
        format!("not ready: {}; this {run} {what}", self.describe())
    }
}

/// How many routes and rules of address `addr` in `table` the plan
/// deletes: the routes it is the source of or whose subnet holds it, its
/// rules.
fn deleted_of(addr: IpAddr, table: u32, ops: &[Op]) -> (usize, usize) {
    let routes = ops
        .iter()
        .filter(|op| match op {
            Op::DelRoute { route: r, .. } => {
                r.table == table
                    && (r.prefsrc == Some(addr) || (!r.dst.is_default() && r.dst.contains(&addr)))
            }
            _ => false,
        })
        .count();
    let rules = ops
        .iter()
        .filter(|op| match op {
            Op::DelRule { rule, .. } => rule.table == table && rule.src.is_some_and(|s| s.addr == addr),
            _ => false,
        })
        .count();
    (routes, rules)
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_rail0(subject: Subject) -> NotReady {
        NotReady { interface: "rail0".into(), subject, reason: "why".into() }
    }

    #[test]
    fn each_subject_is_named_in_words_and_in_json_as_before() {
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        let cases = [
            (Subject::Interface, "rail0: why", r#"{"interface":"rail0","address":null,"reason":"why"}"#),
            (
                Subject::Address(ip),
                "198.51.100.1 on rail0: why",
                r#"{"interface":"rail0","address":"198.51.100.1","reason":"why"}"#,
            ),
            (
                Subject::Gateway(ip),
                "gateway 198.51.100.1 on rail0: why",
                r#"{"interface":"rail0","address":"gateway 198.51.100.1","reason":"why"}"#,
            ),
        ];
        for (subject, words, json) in cases {
            let nr = on_rail0(subject);
            assert_eq!(nr.describe(), words);
            assert_eq!(serde_json::to_string(&nr).unwrap(), json);
            assert_eq!(serde_json::to_value(subject).unwrap(), serde_json::json!(subject.text()));
        }
    }

    /// Issue 27: a part whose entries are not kept never reads "left
    /// alone", and says what the plan deletes of it, counted from the ops.
    #[test]
    fn an_unkept_address_says_what_the_plan_deletes() {
        use crate::model::{Family, Prefix, Rule};
        let ip: IpAddr = "198.51.100.12".parse().unwrap();
        let nr = on_rail0(Subject::Address(ip));
        let unkept = vec![("rail0".to_string(), ip, 102)];
        assert_eq!(
            nr.line(&[], &[], "left alone", "apply"),
            "not ready, left alone: 198.51.100.12 on rail0: why"
        );
        assert_eq!(
            nr.line(&unkept, &[], "left alone", "apply"),
            "not ready: 198.51.100.12 on rail0: why; this apply deletes nothing of it (table 102 holds no entry of it)"
        );
        let rule = |table| Rule {
            src: Some(Prefix { addr: ip, len: 32 }),
            ..Rule::lookup(Family::V4, 1000, table, 234)
        };
        let ops = [
            crate::model::Op::DelRule { rule: rule(102), raw: None },
            crate::model::Op::DelRule { rule: rule(103), raw: None },
        ];
        assert_eq!(
            nr.line(&unkept, &ops, "left alone", "heal"),
            "not ready: 198.51.100.12 on rail0: why; this heal deletes its 1 rule in table 102"
        );
    }
}
