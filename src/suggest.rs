//! "did you mean ...?": the closest of some names to a misspelt one, by
//! edit distance (as clap suggests subcommands). Pure.

/// The Levenshtein distance of `a` and `b`, in characters.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != *cb)).min(row[j] + 1).min(up + 1);
            diag = up;
        }
    }
    row[b.len()]
}

/// The candidate closest to `wrong`, if one is close enough to be a
/// misspelling of it: at most a third of its characters differ (at least
/// one may). The first of equally close ones.
pub fn closest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let most = (wrong.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != wrong)
        .map(|c| (distance(wrong, c), c))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_are_levenshtein_s() {
        assert_eq!(distance("rail9", "rail1"), 1);
        assert_eq!(distance("adresses", "addresses"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("ib0", "ib0"), 0);
    }

    #[test]
    fn only_a_close_name_is_suggested() {
        assert_eq!(closest("rail9", ["lo", "rail0", "rail1"]), Some("rail0"));
        assert_eq!(closest("adresses", ["name", "addresses", "table"]), Some("addresses"));
        assert_eq!(closest("ib0", ["lo", "eth0"]), None, "eth0 is three edits from ib0: too far");
        assert_eq!(closest("rail1", ["rail1"]), None, "not the name itself");
    }
}
