//! Where the text a person reads leaves the process: the commands in it
//! are made right for pasting (`paste::in_netns` under `--netns`), and a
//! warning is wrapped to the terminal it goes to. `say!`, `tell!`, the
//! scripts and the JSON envelope all pass through here.

use std::borrow::Cow;
use std::sync::OnceLock;

static NETNS: OnceLock<String> = OnceLock::new();

/// From now on every printed command acts in namespace `name` (`--netns`).
pub fn set_netns(name: &str) {
    let _ = NETNS.set(name.to_string());
}

/// `text` as printed: its commands in the `--netns` namespace, if any.
pub fn localize(text: &str) -> Cow<'_, str> {
    match NETNS.get() {
        Some(ns) => Cow::Owned(crate::paste::in_netns(text, ns)),
        None => Cow::Borrowed(text),
    }
}

/// Every string of a JSON document, as `localize` prints it: a `fix` is
/// pasted from the JSON as much as from the terminal.
pub fn localize_json(doc: &mut serde_json::Value) {
    if NETNS.get().is_none() {
        return;
    }
    match doc {
        serde_json::Value::String(s) => {
            if let Cow::Owned(new) = localize(s) {
                *s = new;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(localize_json),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(localize_json),
        _ => {}
    }
}

/// The width to wrap a message for stderr to: the terminal's, when stderr
/// is one (a log or a pipe keeps each message on one line, for grep).
pub fn stderr_width() -> Option<usize> {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let (terminal_size::Width(w), _) = terminal_size::terminal_size_of(std::io::stderr())?;
    Some(usize::from(w).clamp(40, 120))
}

/// Prints one JSON document on stdout (a line of its own unless `pretty`),
/// its strings localized; never panics.
pub fn say_json(doc: &serde_json::Value, pretty: bool) {
    use std::io::Write as _;
    let mut doc = doc.clone();
    localize_json(&mut doc);
    let text = if pretty { serde_json::to_string_pretty(&doc) } else { serde_json::to_string(&doc) };
    match text {
        Ok(text) => {
            let _ = writeln!(std::io::stdout(), "{text}");
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "roce-route: error: cannot write the JSON report: {e}");
        }
    }
}
