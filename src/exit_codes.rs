//! The exit codes, what each means, and which command can return which:
//! one table for `--help`, the manual page and the docs' tests. (No
//! dependencies, so that the build script can render the page from it.)

/// Every exit code and its meaning.
pub const MEANINGS: [(i32, &str); 7] = [
    (0, "success (or already in sync)"),
    (1, "failed; the host was left as it was"),
    (2, "invalid command line or configuration; nothing touched"),
    (3, "the live state differs from the configuration"),
    (4, "failed, and the rollback failed too: the host is not as it was"),
    (5, "applied what the host is ready for; the rest is not ready (said why) and was left alone"),
    (6, "no problem found, but some pairs could not be verified (said why)"),
];

/// The codes `command` can return (a subcommand's name).
pub fn of(command: &str) -> &'static [i32] {
    match command {
        "apply" => &[0, 1, 2, 4, 5],
        "check" => &[0, 1, 2, 3],
        "probe" => &[0, 1, 2, 6],
        "rollback" | "remove" | "watch" => &[0, 1, 2, 4],
        "completions" | "man" => &[0, 2],
        _ => &[0, 1, 2],
    }
}

/// The "Exit codes:" paragraph of the top-level `--help`.
pub fn overview() -> String {
    let mut out = String::from("Exit codes:\n");
    for (code, meaning) in MEANINGS {
        let only = match code {
            3 => "check: ",
            5 => "apply: ",
            6 => "probe: ",
            _ => "",
        };
        out.push_str(&format!("  {code}  {only}{meaning}\n"));
    }
    out.pop();
    out
}

/// The meaning of `code`.
pub fn meaning(code: i32) -> &'static str {
    MEANINGS.iter().find(|(c, _)| *c == code).map_or("", |(_, m)| m)
}

/// The "Exit codes:" paragraph of a command's `--help`.
pub fn help(command: &str) -> String {
    let mut out = String::from("Exit codes:\n");
    for code in of(command) {
        out.push_str(&format!("  {code}  {}\n", meaning(*code)));
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_code_has_a_meaning() {
        for command in ["apply", "check", "rollback", "remove", "watch", "show", "probe", "man"] {
            for code in of(command) {
                assert!(!meaning(*code).is_empty(), "{command}: {code}");
            }
        }
        assert!(help("check").contains("  3  the live state differs"));
        assert!(!help("show").contains("  3  "), "show never reports drift by its code");
    }
}
