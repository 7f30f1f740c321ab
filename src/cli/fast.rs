//! `apply`'s command line read without clap: the line a provisioning
//! script or the boot unit runs, on every host and every boot. clap's
//! building and matching was a fifth of a no-op apply's instructions
//! (bench/README.md, twenty-fourth session). It takes only the plainest
//! lines: `apply`, its flags, its options and the global ones, each given
//! once, a value as the next word, configs after `--` too (as Ansible's
//! module puts them); anything else (another command, help,
//! `--opt=value`, a short flag group, a word starting with `-` where a
//! value or a config goes, a value out of its range, two options that
//! conflict, ROCE_ROUTE_STATE_DIR set) is clap's, with its errors. What it
//! takes, it reads as clap does (`tests`: the two agree on 6,000 generated
//! lines of such words); the defaults are the ones the derive names.

use std::ffi::OsString;
use std::path::PathBuf;

use super::{ApplyArgs, Cli, Command, Deferred, Given, SysfsArg};

/// `args` (the program's name first) as clap would parse them, when the
/// line is one of those this reads; else `None`, for clap.
/// `state_dir_env`: ROCE_ROUTE_STATE_DIR, which clap reads for
/// `--state-dir`.
pub fn parse(args: &[OsString], state_dir_env: Option<&OsString>) -> Option<Cli> {
    let mut words = args.iter().skip(1).map(|w| w.to_str());
    let mut global = Global::default();
    let mut apply = Apply::default();
    let mut in_apply = false;
    // After `--`, every word is a config.
    let mut escaped = false;
    while let Some(word) = words.next() {
        let word = word?;
        if escaped {
            apply.config.push(config(word)?.into());
            continue;
        }
        if in_apply && word == "--" {
            escaped = true;
            continue;
        }
        let mut value = || words.next().flatten().filter(|v| !v.is_empty() && !v.starts_with('-'));
        if global.take(word, &mut value)? {
            continue;
        }
        if !in_apply {
            // The first word that is not a global option must be the command.
            in_apply = word == "apply";
            if !in_apply {
                return None;
            }
        } else if !apply.take(word, &mut value)? {
            return None;
        }
    }
    if !in_apply || apply.config.is_empty() || global.verbose && global.quiet {
        return None;
    }
    if apply.confirm.is_some() && apply.dry_run || apply.not_ready_ok && apply.strict {
        return None;
    }
    let state_dir = match (global.state_dir, state_dir_env) {
        (Some(dir), _) => dir,
        (None, Some(_)) => return None,
        (None, None) => PathBuf::from(crate::state::DEFAULT_BASE),
    };
    Some(Cli {
        netns: global.netns,
        state_dir,
        lock_timeout: global.lock_timeout.unwrap_or(super::LOCK_TIMEOUT),
        json: global.json,
        verbose: global.verbose,
        quiet: global.quiet,
        command: Given(Command::Apply(Deferred(ApplyArgs {
            config: apply.config,
            dry_run: apply.dry_run,
            adopt: apply.adopt,
            confirm: apply.confirm,
            install: apply.install,
            strict: apply.strict,
            not_ready_ok: apply.not_ready_ok,
            settle: apply.settle.unwrap_or(super::SETTLE),
            no_announce: apply.no_announce,
            sysfs: SysfsArg {
                sysfs_root: apply.sysfs_root.unwrap_or_else(|| crate::sysfs::DEFAULT_ROOT.into()),
            },
        }))),
    })
}

/// The global options seen so far.
#[derive(Default)]
struct Global {
    netns: Option<String>,
    state_dir: Option<PathBuf>,
    lock_timeout: Option<u64>,
    json: bool,
    verbose: bool,
    quiet: bool,
}

impl Global {
    /// Takes `word` (and its value) if it is a global option: `Some(true)`;
    /// `Some(false)` if it is not one; `None` for clap (given twice, no
    /// plain value).
    fn take<'a>(&mut self, word: &str, value: &mut impl FnMut() -> Option<&'a str>) -> Option<bool> {
        match word {
            "--netns" => set(&mut self.netns, value()?.to_string())?,
            "--state-dir" => set(&mut self.state_dir, value()?.into())?,
            "--lock-timeout" => set(&mut self.lock_timeout, number(value()?)?)?,
            "--json" => flag(&mut self.json)?,
            "--verbose" | "-v" => flag(&mut self.verbose)?,
            "--quiet" | "-q" => flag(&mut self.quiet)?,
            _ => return Some(false),
        }
        Some(true)
    }
}

/// `apply`'s own options seen so far, and its configs.
#[derive(Default)]
struct Apply {
    config: Vec<PathBuf>,
    dry_run: bool,
    adopt: bool,
    confirm: Option<u64>,
    install: Option<PathBuf>,
    strict: bool,
    not_ready_ok: bool,
    settle: Option<u64>,
    no_announce: bool,
    sysfs_root: Option<PathBuf>,
}

impl Apply {
    /// As `Global::take`, for apply's options and configs.
    fn take<'a>(&mut self, word: &str, value: &mut impl FnMut() -> Option<&'a str>) -> Option<bool> {
        match word {
            "--dry-run" => flag(&mut self.dry_run)?,
            "--adopt" => flag(&mut self.adopt)?,
            "--strict" => flag(&mut self.strict)?,
            "--not-ready-ok" => flag(&mut self.not_ready_ok)?,
            "--no-announce" => flag(&mut self.no_announce)?,
            "--confirm" => {
                set(&mut self.confirm, number(value()?).filter(|s| (1..=super::CONFIRM_MAX).contains(s))?)?
            }
            "--settle" => set(&mut self.settle, number(value()?).filter(|s| *s <= super::SETTLE_MAX)?)?,
            "--install" => set(&mut self.install, value()?.into())?,
            "--sysfs-root" => set(&mut self.sysfs_root, value()?.into())?,
            other => match config(other) {
                Some(path) => self.config.push(path.into()),
                None => return Some(false),
            },
        }
        Some(true)
    }
}

/// `word` as a config: any word but one that clap could read as an option
/// ("-", "-x", "--x") or as a request for help, and the empty one. (After
/// `--` clap takes those for configs too: they are left to it.)
fn config(word: &str) -> Option<&str> {
    (!word.is_empty() && !word.starts_with('-') && word != "help").then_some(word)
}

/// Sets an option given once; `None` the second time.
fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.is_none().then(|| *slot = Some(value))
}

/// Sets a flag given once; `None` the second time.
fn flag(slot: &mut bool) -> Option<()> {
    (!*slot).then(|| *slot = true)
}

/// A number of plain digits (clap's parser takes a sign too: that is its).
fn number(word: &str) -> Option<u64> {
    word.bytes().all(|b| b.is_ascii_digit()).then(|| word.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use clap::FromArgMatches;

    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        std::iter::once("roce-route").chain(words.iter().copied()).map(Into::into).collect()
    }

    /// clap's reading of `args`, with every command and help text.
    fn clap(args: &[OsString]) -> Result<Cli, clap::Error> {
        super::super::command().try_get_matches_from(args).and_then(|m| Cli::from_arg_matches(&m))
    }

    /// What this takes, clap reads the same; what clap refuses, this
    /// leaves to it.
    fn agrees(args: &[OsString]) -> Result<bool, String> {
        let env = std::env::var_os(super::super::STATE_DIR_ENV);
        let Some(fast) = parse(args, env.as_ref()) else { return Ok(false) };
        match clap(args) {
            Ok(full) if format!("{full:?}") == format!("{fast:?}") => Ok(true),
            Ok(full) => Err(format!("{args:?}: read as {fast:?}, clap reads {full:?}")),
            Err(e) => Err(format!("{args:?}: taken, but clap says {e}")),
        }
    }

    /// The pieces of a line: every option of apply and every global one
    /// with a value (`V`: one of `VALUES`), configs, and words clap reads
    /// otherwise or refuses.
    const PIECES: &[&[&str]] = &[
        &["--netns", "n"],
        &["--netns", "V"],
        &["--state-dir", "/tmp/s"],
        &["--lock-timeout", "V"],
        &["--json"],
        &["-v"],
        &["--verbose"],
        &["-q"],
        &["--quiet"],
        &["--dry-run"],
        &["--adopt"],
        &["--strict"],
        &["--not-ready-ok"],
        &["--no-announce"],
        &["--confirm", "V"],
        &["--settle", "V"],
        &["--install", "/etc/roce-route"],
        &["--install", "V"],
        &["--sysfs-root", "/tmp/sys"],
        &["rails.toml"],
        &["rails.toml"],
        &["rails.toml"],
        &["b.toml"],
        &["check"],
        &["apply"],
    ];
    const VALUES: &[&str] = &["0", "7", "07", "600", "601", "86400", "86401", "+7", "-1", "x", "", "apply"];
    /// Words after a `--` that ends some lines.
    const AFTER_ESCAPE: &[&str] = &["rails.toml", "b.toml", "check", "help", "-x", "--netns", "--", ""];
    /// Words put in place of one of a line's.
    const ODD: &[&str] = &[
        "help",
        "--help",
        "-h",
        "-V",
        "--",
        "-",
        "-vq",
        "--netns=n",
        "--dry",
        "-x",
        "--no-such-option",
        "check",
        "",
        "rails.toml",
        "--json",
        "-q",
    ];

    /// Lines of global options, `apply`, then its options, configs and
    /// global options in any order, one in four ending with `--` and some
    /// words, one word in three replaced by an odd one: each line this takes is read as clap reads it, and it takes
    /// one in ten or more (so the comparison is made).
    #[test]
    fn every_line_taken_reads_as_clap_reads_it() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            // xorshift64: the same lines every run.
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut lines, mut taken) = (0, 0);
        for _ in 0..6000 {
            let mut words = Vec::new();
            let piece = |words: &mut Vec<&str>, next: &mut dyn FnMut(usize) -> usize| {
                for w in PIECES[next(PIECES.len())] {
                    words.push(if *w == "V" { VALUES[next(VALUES.len())] } else { w });
                }
            };
            for _ in 0..next(3) {
                piece(&mut words, &mut next);
            }
            words.push("apply");
            for _ in 0..next(7) {
                piece(&mut words, &mut next);
            }
            if next(4) == 0 {
                words.push("--");
                for _ in 0..next(3) {
                    words.push(AFTER_ESCAPE[next(AFTER_ESCAPE.len())]);
                }
            }
            if next(3) == 0 {
                let at = next(words.len());
                words[at] = ODD[next(ODD.len())];
            }
            lines += 1;
            taken += usize::from(agrees(&os(&words)).unwrap_or_else(|e| panic!("{e}")));
        }
        assert!(taken * 10 > lines, "{taken} of {lines} lines taken");
    }

    /// Lines this must take, each read as clap reads it: what bench/ and
    /// the boot unit run, the docs' examples, every option once.
    #[test]
    fn the_plain_lines_are_taken_as_clap_reads_them() {
        for words in [
            &["--state-dir", "/tmp/s", "--netns", "n", "apply", "--no-announce", "rails.toml"][..],
            &["apply", "/etc/roce-route/"],
            &["apply", "--dry-run", "rails.toml"],
            &["apply", "--confirm", "60", "rails.toml", "--json"],
            &["-q", "apply", "a.toml", "b.toml", "--netns", "n"],
            &["apply", "rails.toml", "--install", "/etc/roce-route", "--strict", "-v"],
            &[
                "--lock-timeout",
                "5",
                "apply",
                "--adopt",
                "--not-ready-ok",
                "--settle",
                "0",
                "--sysfs-root",
                "/tmp/sys",
                "check",
            ],
            // A namespace named like the command, a config named like another.
            &["--netns", "apply", "apply", "check"],
            // The boot unit's (dist/systemd/roce-route.service) and the
            // Ansible module's (configs after `--`).
            &["apply", "--settle", "10", "/etc/roce-route/"],
            &[
                "--json",
                "--netns",
                "n",
                "--state-dir",
                "/tmp/s",
                "apply",
                "--adopt",
                "--dry-run",
                "--",
                "rails.toml",
            ],
            &["apply", "a.toml", "--", "b.toml", "check"],
        ] {
            let args = os(words);
            assert!(agrees(&args).unwrap(), "{words:?} is taken");
        }
    }

    /// Lines that clap reads, or refuses, in a way this does not: each is
    /// left to clap.
    #[test]
    fn the_other_lines_are_left_to_clap() {
        for words in [
            &["apply"][..],
            &["check", "rails.toml"],
            &["apply", "--help"],
            &["apply", "rails.toml", "--netns=n"],
            &["apply", "rails.toml", "-vq"],
            &["apply", "rails.toml", "-v", "-q"],
            &["--", "apply", "rails.toml"],
            &["apply", "--"],
            &["apply", "--", "-rails.toml"],
            &["apply", "--", "rails.toml", "--netns", "n"],
            &["apply", "--", "--", "rails.toml"],
            &["apply", "--dry-run", "--confirm", "9", "rails.toml"],
            &["apply", "--strict", "--not-ready-ok", "rails.toml"],
            &["apply", "--confirm", "0", "rails.toml"],
            &["apply", "--settle", "601", "rails.toml"],
            &["apply", "--lock-timeout", "+5", "rails.toml"],
            &["apply", "--netns", "--json", "rails.toml"],
            &["apply", "--json", "--json", "rails.toml"],
            &["apply", "--netns", "a", "--netns", "b", "rails.toml"],
            &["rails.toml", "apply"],
            &["apply", "rails.toml", "--netns"],
        ] {
            assert!(parse(&os(words), None).is_none(), "{words:?} is clap's");
        }
        // Not UTF-8: clap's (a config may be; a namespace name may not).
        use std::os::unix::ffi::OsStringExt;
        let mut args = os(&["apply"]);
        args.push(OsString::from_vec(b"r\xffils.toml".to_vec()));
        assert!(parse(&args, None).is_none());
    }

    /// ROCE_ROUTE_STATE_DIR is clap's to read (it takes it for
    /// --state-dir); --state-dir given wins over it in both.
    #[test]
    fn the_state_directory_from_the_environment_is_left_to_clap() {
        let env = OsString::from("/tmp/from-env");
        assert!(parse(&os(&["apply", "rails.toml"]), Some(&env)).is_none());
        let given = parse(&os(&["--state-dir", "/tmp/s", "apply", "rails.toml"]), Some(&env)).unwrap();
        assert_eq!(given.state_dir, PathBuf::from("/tmp/s"));
    }
}
