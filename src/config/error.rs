//! Config errors and where they are: file, line and column, the key a
//! TOML error concerns, and the hint for each kind of TOML error.

use std::fmt;

use toml::Spanned;

/// A 1-based position in the config text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    pub line: usize,
    pub col: usize,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    pub file: String,
    pub loc: Option<Loc>,
    pub what: String,
    pub hint: String,
}

impl ConfigError {
    pub fn at(file: &str, loc: Option<Loc>, what: impl Into<String>, hint: impl Into<String>) -> Self {
        ConfigError { file: file.to_string(), loc, what: what.into(), hint: hint.into() }
    }

    fn render(&self) -> String {
        let mut out = match self.loc {
            Some(loc) => format!("{}:{}: {}", self.file, loc, self.what),
            None => format!("{}: {}", self.file, self.what),
        };
        if !self.hint.is_empty() {
            out.push_str("\n  hint: ");
            out.push_str(&self.hint);
        }
        out
    }
}

/// The 1-based line and column (in characters) of a byte offset in `text`.
/// Offsets past the end or inside a character are clamped, never a panic.
pub fn loc_of(text: &str, byte_offset: usize) -> Loc {
    let mut end = byte_offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    // Bytes, not chars: a newline is one byte in UTF-8 (each key's
    // position is asked of the whole text before it: 3.5k instructions a
    // key of 8 rails' config as `matches('\n')`, 1.6k so).
    let newlines = before.bytes().filter(|b| *b == b'\n').count();
    let line_start = before.bytes().rposition(|b| b == b'\n').map_or(0, |i| i + 1);
    Loc { line: newlines + 1, col: before[line_start..].chars().count() + 1 }
}

/// The dotted path (`interface[1].table`) of the key at `offset` or of the
/// innermost key whose value holds it, when `text` is well-formed TOML.
pub(super) fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let mut path = Vec::new();
    path_in_table(doc.get_ref(), offset, &mut path).then(|| path.join("."))
}

fn path_in_table(table: &toml::de::DeTable<'_>, offset: usize, path: &mut Vec<String>) -> bool {
    for (key, value) in table {
        path.push(key.get_ref().to_string());
        if key.span().contains(&offset) || path_in_value(value, offset, path) {
            return true;
        }
        path.pop();
    }
    false
}

fn path_in_value(value: &Spanned<toml::de::DeValue<'_>>, offset: usize, path: &mut Vec<String>) -> bool {
    match value.get_ref() {
        toml::de::DeValue::Table(t) if path_in_table(t, offset, path) => return true,
        toml::de::DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let key = path.pop().unwrap_or_default();
                path.push(format!("{key}[{i}]"));
                if path_in_value(item, offset, path) {
                    return true;
                }
                path.pop();
                path.push(key);
            }
        }
        _ => {}
    }
    value.span().contains(&offset)
}

/// The hint of a TOML error: for an unknown key the closest accepted one
/// (as clap suggests subcommands), for a string where a list is expected
/// the list form of it; `path` is the key's dotted path when known.
pub(super) fn toml_hint(message: &str, path: Option<&str>) -> String {
    if let Some(close) = unknown_key_suggestion(message) {
        return format!("did you mean `{close}`? (or remove the key)");
    }
    if let Some(list) = list_form(message, path) {
        return format!("a list is written in brackets, even of one item: {list}");
    }
    toml_hint_of_kind(message).to_string()
}

/// `unknown field `X`, expected one of `A`, `B``: the accepted key closest
/// to X, if one is close.
fn unknown_key_suggestion(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (wrong, rest) = rest.split_once('`')?;
    let (_, expected) = rest.split_once("expected")?;
    let accepted: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    crate::suggest::closest(wrong, accepted).map(str::to_string)
}

/// `invalid type: string "V", expected a sequence` at key K: `K = ["V"]`.
fn list_form(message: &str, path: Option<&str>) -> Option<String> {
    let rest = message.strip_prefix("invalid type: string ")?;
    let (value, expected) = rest.rsplit_once(", expected ")?;
    if !expected.contains("sequence") {
        return None;
    }
    let key = path?.rsplit('.').next()?;
    let key = key.split('[').next().unwrap_or(key);
    Some(format!("{key} = [{value}]"))
}

fn toml_hint_of_kind(message: &str) -> &'static str {
    if message.starts_with("duplicate key") {
        "a key may appear once per table: remove one of the two"
    } else if message.starts_with("unknown field") {
        "remove the key or fix its spelling; the keys this table accepts are listed above"
    } else if message.starts_with("missing field `address`") {
        "a gateway table needs the router's address: gateway = { address = \"203.0.113.1\", onlink = true }"
    } else if message.starts_with("missing field") {
        "add the key: every [[interface]] and [[arp_only]] needs at least `name`"
    } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
        "check the value's type: numbers are bare (table = 100), names and addresses are \
         quoted strings (name = \"ib0\")"
    } else {
        "fix the TOML syntax at this position"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(line: usize, col: usize) -> Loc {
        Loc { line, col }
    }

    #[test]
    fn display_format() {
        let e = ConfigError::at("/etc/x.toml", Some(loc(3, 7)), "bad thing", "do this");
        assert_eq!(e.to_string(), "/etc/x.toml:3:7: bad thing\n  hint: do this");
        let e = ConfigError::at("/etc/x.toml", None, "bad thing", "");
        assert_eq!(e.to_string(), "/etc/x.toml: bad thing");
    }

    #[test]
    fn loc_of_counts_lines_and_characters() {
        let text = "ab\nçé = 1\n";
        assert_eq!(loc_of(text, 0), loc(1, 1));
        assert_eq!(loc_of(text, 2), loc(1, 3));
        assert_eq!(loc_of(text, 3), loc(2, 1));
        assert_eq!(loc_of(text, 7), loc(2, 3)); // the space after "çé"
        assert_eq!(loc_of(text, 4), loc(2, 1)); // inside 'ç': clamped back
        assert_eq!(loc_of(text, 1000), loc(3, 1));
        assert_eq!(loc_of("", 5), loc(1, 1));
    }
}
