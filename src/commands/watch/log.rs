//! Watch's lines: one line on stderr (journald-friendly), or one JSON
//! document per line on stdout with --json.
//!
//! Not `tracing`: the JSON lines carry nested values (the changes of a
//! heal, the suspects of a fight) that tracing's fields cannot hold
//! without its unstable `valuable` support, and tests/watch.rs reads these
//! exact documents; a layer that rebuilt them would be a formatter of our
//! own behind a subscriber, with nothing gained.

use serde_json::json;

use crate::commands::{Ctx, Verbosity};
use crate::{say, tell};

/// `-q` silences the routine lines (start, stop, heals, passes); what
/// needs an operator (errors, conflicts, parts not ready, a fight with
/// another agent) is always said.
pub(super) fn log(ctx: &Ctx, event: &str, text: &str, fields: serde_json::Value) {
    let routine = matches!(event, "start" | "stop" | "heal" | "pass");
    if routine && ctx.verbosity == Verbosity::Quiet {
        return;
    }
    if ctx.json {
        let mut doc = json!({ "command": "watch", "event": event, "message": text });
        if let (Some(doc), serde_json::Value::Object(f)) = (doc.as_object_mut(), fields) {
            doc.extend(f);
        }
        say!("{doc}");
    } else {
        tell!("roce-route watch: {text}");
    }
}
