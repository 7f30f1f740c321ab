//! What of the config the host is not ready for, and why.

use std::net::IpAddr;

use serde::{Serialize, Serializer};

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
}
