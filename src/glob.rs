//! Shell-style name patterns (`rail*`, `ens?f0np0`, `ib[0-3]`), as
//! `--interfaces` takes them: the whole name must match.

/// Why a pattern is not valid (an unclosed `[`).
pub fn validate(pattern: &str) -> Result<(), String> {
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '[' && !chars.by_ref().any(|c| c == ']') {
            return Err(format!("{pattern:?}: `[` without its `]`"));
        }
    }
    Ok(())
}

/// Whether `name` matches `pattern`: `*` any run, `?` one character,
/// `[abc]`, `[a-z]` and `[!a-z]` one character of (not of) the set.
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

fn go(p: &[char], n: &[char]) -> bool {
    match p.first() {
        None => n.is_empty(),
        Some('*') => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
        Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
        Some('[') => {
            let Some(end) = p.iter().skip(1).position(|c| *c == ']').map(|i| i + 1) else {
                return n.first() == Some(&'[') && go(&p[1..], &n[1..]);
            };
            let Some(c) = n.first() else { return false };
            let (negate, set) = match p[1..end].split_first() {
                Some(('!', rest)) => (true, rest),
                _ => (false, &p[1..end]),
            };
            let mut hit = false;
            let mut i = 0;
            while i < set.len() {
                if i + 2 < set.len() && set[i + 1] == '-' {
                    hit |= set[i] <= *c && *c <= set[i + 2];
                    i += 3;
                } else {
                    hit |= set[i] == *c;
                    i += 1;
                }
            }
            hit != negate && go(&p[end + 1..], &n[1..])
        }
        Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_names_match() {
        assert!(matches("rail*", "rail0"));
        assert!(matches("rail*", "rail"));
        assert!(!matches("rail*", "xrail0"));
        assert!(matches("ens?f0np0", "ens1f0np0"));
        assert!(!matches("ens?f0np0", "ens10f0np0"));
        assert!(matches("ib[0-3]", "ib2"));
        assert!(!matches("ib[0-3]", "ib4"));
        assert!(matches("ib[!0-3]", "ib4"));
        assert!(matches("ib0.8001", "ib0.8001"));
        assert!(!matches("mlx5_1", "mlx5_10"), "no prefix matching");
        assert!(matches("*np*", "ens2f0np0"));
        assert!(validate("ib[0-3").is_err());
        assert!(validate("rail*").is_ok());
    }

    /// The forms `--interfaces` documents (`rail*`, `ens?f0np0`, sets and
    /// ranges), and what is not a pattern: braces, backslashes and `/` are
    /// characters of the name like any other (a netdev name may hold `{`),
    /// so `ib{0,1}` is no alternation, as globset would make it.
    #[test]
    fn only_the_shell_forms_are_special() {
        assert!(matches("ens*np*", "ens1f0np0") && matches("*", "ib0.8001") && matches("**", "a"));
        assert!(matches("ens?f?np?", "ens3f1np1") && !matches("ib?", "ib"));
        assert!(matches("ib[0-37]", "ib7") && !matches("ib[0-37]", "ib5"));
        assert!(matches("ib[!0-3]", "ibx") && !matches("ib[!0-3]", "ib0"));
        assert!(matches("ib[-.]8001", "ib.8001"), "a leading - is itself");
        assert!(matches("ib{0,1}", "ib{0,1}") && !matches("ib{0,1}", "ib0"));
        assert!(matches("a\\b", "a\\b") && !matches("a\\b", "ab"));
        assert!(matches("a*c", "a/b/c"), "names have no path separator");
        assert!(validate("ib{0").is_ok() && validate("[a-]").is_ok());
    }
}
