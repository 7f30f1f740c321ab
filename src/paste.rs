//! The commands roce-route prints for a person to paste, made right for
//! where they will be pasted. Pure.
//!
//! - `in_netns`: a run under `--netns NS` acts in NS, so every `ip` or
//!   `sysctl` command it prints must too, or pasted as printed it changes
//!   the host's own namespace: `ip -n NS ...`, `ip netns exec NS sysctl ...`.
//!   The commands are found where roce-route puts them: a line that is a
//!   command (the dry-run script, a `fix:` line, a JSON `fix` or `command`
//!   field), and a span in backticks inside a sentence. An entry as `ip`
//!   lists it (`ip -4 rule: priority 1000 ...`) is not a command and stays.
//! - `wrap`: a long message broken at spaces to a terminal's width, never
//!   inside a command in backticks, so a command copied from the screen is
//!   one line.

use crate::render::quote;

/// `text` with every command it prints for pasting made to act in `ns`.
pub fn in_netns(text: &str, ns: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        if line.contains('`') {
            out.push_str(&spans_in_netns(line, ns));
        } else {
            out.push_str(&line_in_netns(line, ns));
        }
    }
    out
}

/// A line without backticks: the command it is (after its indentation and
/// an optional `fix: `), or the line as it is.
fn line_in_netns(line: &str, ns: &str) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let (label, rest) = match body.strip_prefix("fix: ") {
        Some(rest) => ("fix: ", rest),
        None => ("", body),
    };
    if starts_command(rest) {
        format!("{indent}{label}{}", commands_in_netns(rest, ns))
    } else {
        line.to_string()
    }
}

/// Every span in backticks of `line` that holds commands.
fn spans_in_netns(line: &str, ns: &str) -> String {
    let mut out = String::with_capacity(line.len() + 16);
    let parts: Vec<&str> = line.split('`').collect();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('`');
        }
        // Odd parts are inside backticks, but for an unclosed last one.
        let inside = i % 2 == 1 && i + 1 < parts.len();
        if inside && starts_command(part) {
            out.push_str(&commands_in_netns(part, ns));
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Whether `s` begins with an `ip` or `sysctl` command.
fn starts_command(s: &str) -> bool {
    s.starts_with("ip ") || s.starts_with("sysctl ")
}

/// `a; b` with each `ip` and `sysctl` command in it made to act in `ns`.
fn commands_in_netns(seq: &str, ns: &str) -> String {
    seq.split("; ").map(|c| one_in_netns(c, ns)).collect::<Vec<_>>().join("; ")
}

fn one_in_netns(cmd: &str, ns: &str) -> String {
    let ns = quote(ns);
    if let Some(rest) = cmd.strip_prefix("sysctl ") {
        return format!("ip netns exec {ns} sysctl {rest}");
    }
    let Some(rest) = cmd.strip_prefix("ip ") else {
        return cmd.to_string();
    };
    let words: Vec<&str> = rest.split_whitespace().collect();
    let options: Vec<&str> = words.iter().copied().take_while(|w| w.starts_with('-')).collect();
    let object = words.get(options.len()).copied().unwrap_or_default();
    let already = options.iter().any(|o| *o == "-n" || *o == "-netns") || object == "netns";
    // `ip -4 rule: priority ...` is how an entry is shown, not a command.
    if already || object.is_empty() || object.ends_with(':') {
        return cmd.to_string();
    }
    format!("ip -n {ns} {rest}")
}

/// `text` broken at spaces into lines of at most `width` columns, each
/// after the first indented by `indent`; a span in backticks is never
/// broken (a longer one has a line of its own). Lines already in `text`
/// are kept.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let mut col = 0;
        let mut first = true;
        for word in words_outside_backticks(line) {
            let len = word.chars().count();
            if !first && col + 1 + len > width {
                out.push('\n');
                out.push_str(indent);
                col = indent.chars().count();
            } else if !first {
                out.push(' ');
                col += 1;
            }
            out.push_str(word);
            col += len;
            first = false;
        }
    }
    out
}

/// `line` split at the spaces outside backticks.
fn words_outside_backticks(line: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let mut start = 0;
    let mut inside = false;
    for (i, c) in line.char_indices() {
        match c {
            '`' => inside = !inside,
            ' ' if !inside => {
                if i > start {
                    words.push(&line[start..i]);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < line.len() {
        words.push(&line[start..]);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report's lines written at once (`print_lines`) read as each
    /// written by itself: the namespace is put in line by line, whatever
    /// the lines hold.
    #[test]
    fn lines_joined_act_in_the_namespace_as_each_alone() {
        let lines = [
            "roce-route: removed 2 items:",
            "  ip -4 rule del priority 1000 from 198.51.100.12 lookup 102 proto 234",
            "  fix: `ip route add default via 198.51.100.1 dev rail0 table 100`; then `roce-route apply`",
            "  sysctl -w net.ipv4.conf.rail2.arp_ignore=0",
            "an unclosed `ip link set rail0 up",
            "",
            "  traffic from 2001:db8::10 to 2001:db8::2 leaves via rail0 (table 100)",
        ];
        for ns in ["hostA", "a b"] {
            let each: String = lines.iter().map(|l| in_netns(&format!("{l}\n"), ns)).collect();
            assert_eq!(in_netns(&format!("{}\n", lines.join("\n")), ns), each, "{ns}");
        }
    }

    #[test]
    fn script_and_fix_lines_act_in_the_namespace() {
        let script = "# roce-route apply --dry-run: 2 changes\n\
                      ip -4 rule add priority 1000 from 198.51.100.12 lookup 102 proto 234\n\
                      sysctl -w net.ipv4.conf.rail2.arp_ignore=1\n";
        assert_eq!(
            in_netns(script, "hostA"),
            "# roce-route apply --dry-run: 2 changes\n\
             ip -n hostA -4 rule add priority 1000 from 198.51.100.12 lookup 102 proto 234\n\
             ip netns exec hostA sysctl -w net.ipv4.conf.rail2.arp_ignore=1\n"
        );
        assert_eq!(
            in_netns("    fix: ip -4 rule add priority 1000 from 198.51.100.12 lookup 102 proto 234", "h"),
            "    fix: ip -n h -4 rule add priority 1000 from 198.51.100.12 lookup 102 proto 234"
        );
    }

    #[test]
    fn commands_in_backticks_act_in_the_namespace_and_prose_stays() {
        let text = "rail0 does not have it; add it (`ip addr add 198.51.100.99/LEN dev rail0`) or \
                    run `roce-route --netns h apply c.toml` (or set `sysctl -w net.ipv4.conf.rail2.arp_ignore=1` \
                    yourself); re-add it (`ip addr del A dev i; ip addr add A dev i`)";
        assert_eq!(
            in_netns(text, "h"),
            "rail0 does not have it; add it (`ip -n h addr add 198.51.100.99/LEN dev rail0`) or \
             run `roce-route --netns h apply c.toml` (or set `ip netns exec h sysctl -w \
             net.ipv4.conf.rail2.arp_ignore=1` yourself); re-add it (`ip -n h addr del A dev i; ip -n h \
             addr add A dev i`)"
        );
    }

    #[test]
    fn entries_as_ip_lists_them_and_commands_already_in_a_namespace_stay() {
        for text in [
            "the cause is `ip -4 rule: priority 999 from 198.51.100.0/24 lookup 254`",
            "ip -6 route: default via 2001:db8::1 dev rail0 table 100",
            "`ip -n other rule add priority 5 lookup 7`",
            "`ip netns list`",
            "an ip address and sysctl values in prose",
            "unclosed `ip rule add x",
        ] {
            assert_eq!(in_netns(text, "h"), text);
        }
    }

    #[test]
    fn a_namespace_name_that_needs_quoting_is_quoted() {
        assert_eq!(in_netns("ip link set dev r up", "a b"), "ip -n 'a b' link set dev r up");
    }

    #[test]
    fn wrapping_never_breaks_a_command_in_backticks() {
        let text = "interface rail0 was applied from /etc/roce-route/rails.toml, which is not given now: \
                    run `ip -n host -4 rule add priority 1000 from 198.51.100.12 lookup 102 proto 234` to fix it";
        let wrapped = wrap(text, 40, "  ");
        assert!(wrapped.lines().all(|l| l.chars().count() <= 40 || l.contains('`')), "{wrapped}");
        assert!(
            wrapped.lines().any(|l| l.contains("`ip -n host -4 rule add priority 1000 from 198.51.100.12")
                && l.contains("proto 234`")),
            "{wrapped}"
        );
        assert!(wrapped.lines().skip(1).all(|l| l.starts_with("  ")), "{wrapped}");
        assert_eq!(
            wrapped.split_whitespace().collect::<Vec<_>>(),
            text.split_whitespace().collect::<Vec<_>>()
        );
        assert_eq!(wrap("short", 40, "  "), "short");
    }
}
