//! What of the config the host is not ready for, and why.

use serde::Serialize;

/// One part of the config the host is not ready for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotReady {
    pub interface: String,
    /// The address (or gateway) concerned; None: the whole interface.
    pub address: Option<String>,
    pub reason: String,
}

impl NotReady {
    pub fn describe(&self) -> String {
        match &self.address {
            Some(a) => format!("{} on {}: {}", a, self.interface, self.reason),
            None => format!("{}: {}", self.interface, self.reason),
        }
    }
}
