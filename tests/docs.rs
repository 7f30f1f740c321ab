//! `completions` and `man`, generated from the command line: the bash
//! completion completes in a real bash, the page renders without a warning.

use std::process::Command;

fn rr(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_roce-route")).args(args).output().unwrap();
    assert!(out.status.success(), "roce-route {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// What bash's completion for `roce-route` offers for the words typed: the
/// script is loaded as a user's shell would, and the function it registers
/// with `complete -F` is called the way readline calls it.
fn bash_complete(words: &[&str]) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("roce-route-completion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("roce-route.bash");
    std::fs::write(&script, rr(&["completions", "bash"])).unwrap();
    let line = words.join(" ");
    let program = format!(
        "source {script}\n\
         func=$(complete -p roce-route | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
         COMP_WORDS=({line}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         \"$func\" roce-route '{cur}' '{prev}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script = script.display(),
        cword = words.len() - 1,
        cur = words.last().unwrap(),
        prev = words[words.len() - 2],
    );
    let out = Command::new("bash").arg("-c").arg(program).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().filter(|l| !l.is_empty()).map(str::to_string).collect()
}

#[test]
fn bash_completes_commands_and_options() {
    assert_eq!(bash_complete(&["roce-route", "ap"]), ["apply"]);
    assert!(bash_complete(&["roce-route", "apply", "--dr"]).contains(&"--dry-run".to_string()));
    let all = bash_complete(&["roce-route", ""]);
    assert_eq!(bash_complete(&["roce-route", "ncc"]), ["nccl-env"]);
    assert!(bash_complete(&["roce-route", "nccl-env", "--fo"]).contains(&"--format".to_string()));
    assert!(bash_complete(&["roce-route", "discover", "--sy"]).contains(&"--sysfs-root".to_string()));
    for c in ["apply", "check", "show", "rollback", "remove", "confirm", "announce", "discover", "nccl-env"] {
        assert!(all.contains(&c.to_string()), "{c} not offered: {all:?}");
    }
    assert!(!all.iter().any(|c| c == "confirm-guard"), "the internal command is offered: {all:?}");
    for shell in ["zsh", "fish"] {
        assert!(rr(&["completions", shell]).contains("apply"), "{shell}");
    }
}

#[test]
fn the_manual_page_renders_without_warnings() {
    let page = rr(&["man"]);
    let path = std::env::temp_dir().join(format!("roce-route-{}.8", std::process::id()));
    std::fs::write(&path, &page).unwrap();
    let groff = Command::new("groff").args(["-ww", "-mandoc", "-Tutf8"]).arg(&path).output().unwrap();
    let man = Command::new("man").arg("-l").arg(&path).env("MANPAGER", "cat").output();
    let _ = std::fs::remove_file(&path);
    assert!(groff.status.success(), "groff failed");
    assert!(groff.stderr.is_empty(), "groff -ww warns:\n{}", String::from_utf8_lossy(&groff.stderr));
    let man = man.expect("man (man-db) is installed");
    assert!(man.status.success(), "man -l: {}", String::from_utf8_lossy(&man.stderr));
    let text = String::from_utf8_lossy(&man.stdout);
    for section in ["COMMANDS", "EXIT STATUS", "FILES", "ENVIRONMENT", "SEE ALSO"] {
        assert!(text.contains(section), "{section} not rendered");
    }
}

/// `man -l` of a page, as text (no formatting), and groff's warnings.
fn render(page: &str, name: &str) -> (String, String) {
    let path = std::env::temp_dir().join(format!("roce-route-{}-{name}", std::process::id()));
    std::fs::write(&path, page).unwrap();
    let groff = Command::new("groff").args(["-ww", "-mandoc", "-Tutf8"]).arg(&path).output().unwrap();
    let man = Command::new("man").arg("-l").arg(&path).env("MANPAGER", "cat").env("MANWIDTH", "200").output();
    let _ = std::fs::remove_file(&path);
    let man = man.expect("man (man-db) is installed");
    assert!(man.status.success(), "man -l {name}: {}", String::from_utf8_lossy(&man.stderr));
    (String::from_utf8_lossy(&man.stdout).into_owned(), String::from_utf8_lossy(&groff.stderr).into_owned())
}

/// The subcommands `--help` lists, and the long options of each one's help.
fn help_options() -> Vec<(String, Vec<String>)> {
    let top = rr(&["--help"]);
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description goes on deeper than a command's name.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 10, "{top}");
    commands
        .into_iter()
        .map(|c| {
            let help = rr(&[&c, "--help"]);
            let longs = help
                .split(|ch: char| ch.is_whitespace() || ch == ',')
                .filter(|w| {
                    w.starts_with("--")
                        && w.len() > 2
                        && w[2..].chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
                })
                .filter(|w| *w != "--help")
                .map(str::to_string)
                .collect();
            (c, longs)
        })
        .collect()
}

#[test]
fn every_option_of_every_command_is_in_its_section_of_the_manual_page() {
    let (text, warnings) = render(&rr(&["man"]), "roce-route.8");
    assert!(warnings.is_empty(), "groff -ww warns:\n{warnings}");
    let commands = help_options();
    let start = text.find("COMMANDS").expect("a COMMANDS section");
    let end = text[start..].find("\nEXAMPLES").map(|e| start + e).expect("EXAMPLES after COMMANDS");
    // A command's section runs from its heading (indented 3) to the next.
    let is_heading = |l: &str| l.starts_with("   ") && !l.starts_with("    ");
    let section_of = |c: &str| {
        let lines: Vec<&str> = text[start..end].lines().collect();
        let at = lines
            .iter()
            .position(|l| *l == format!("   {c}"))
            .unwrap_or_else(|| panic!("no section for {c}"));
        let to = lines[at + 1..].iter().position(|l| is_heading(l)).map_or(lines.len(), |n| at + 1 + n);
        lines[at..to].join("\n")
    };
    let global: Vec<&str> =
        ["--netns", "--state-dir", "--lock-timeout", "--json", "--verbose", "--quiet"].into();
    let globals_section = &text[..start];
    for (c, longs) in &commands {
        let section = &section_of(c);
        assert!(section.contains(&format!("roce-route {c}")), "{c}: no synopsis:\n{section}");
        assert!(section.contains("Exit status: 0"), "{c}: no exit status:\n{section}");
        for long in longs {
            if global.contains(&long.as_str()) {
                assert!(globals_section.contains(long.as_str()), "global {long} missing");
            } else {
                assert!(
                    section.contains(long.as_str()),
                    "{c} {long} is in --help but not in the page:\n{section}"
                );
            }
        }
    }
    // SEE ALSO names only pages that exist: this one's sibling, or ones on the system.
    let see_also: String = text[text.find("SEE ALSO").unwrap()..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with(' ') || l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    for page in
        see_also.split([',', ' ', '\n']).map(|p| p.trim().trim_end_matches('.')).filter(|p| p.contains('('))
    {
        let name = page.split('(').next().unwrap().trim();
        if name == "roce-route.toml" {
            continue;
        }
        let found = Command::new("man").args(["-w", name]).output().unwrap();
        assert!(found.status.success(), "SEE ALSO names {page}, which is not installed");
    }
}

#[test]
fn the_configuration_page_renders_and_documents_every_key() {
    let (text, warnings) = render(&roce_route::man::page_5(env!("CARGO_PKG_VERSION")), "roce-route.toml.5");
    assert!(warnings.is_empty(), "groff -ww warns:\n{warnings}");
    // serde names the keys a table takes when it meets an unknown one.
    for (table, doc) in [
        ("[defaults]\n", "[defaults]"),
        ("[[interface]]\nname = \"a\"\n", "[[interface]]"),
        ("[[arp_only]]\nname = \"a\"\n", "[[arp_only]]"),
    ] {
        let e =
            roce_route::config::parse("x.toml", &format!("{table}zz_unknown = 1\n")).unwrap_err().to_string();
        let listed = e.split("expected one of").nth(1).unwrap_or_else(|| panic!("{e}"));
        let keys: Vec<&str> = listed.split('`').skip(1).step_by(2).collect();
        assert!(keys.len() >= 3, "{table}: keys not found in {e:?}");
        let section = &text[text.find(&format!("\n{doc}")).unwrap_or_else(|| panic!("no {doc} section"))..];
        for key in keys {
            let words = section.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            assert!(words.clone().any(|w| w == key), "{doc} {key} is not documented");
        }
    }
}

fn rr_out(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_roce-route")).args(args).output().unwrap()
}

#[test]
fn help_lists_discover_first_globals_apart_and_each_commands_own_exit_codes() {
    let top = rr(&["--help"]);
    let first = top.lines().skip_while(|l| !l.starts_with("Commands:")).nth(1).unwrap();
    assert!(first.trim_start().starts_with("discover "), "{top}");
    assert!(top.contains("Global options:"), "{top}");
    for (command, has_3, has_5) in [("check", true, false), ("apply", false, true), ("show", false, false)] {
        let help = rr(&[command, "--help"]);
        let codes: Vec<&str> = help
            .lines()
            .skip_while(|l| !l.starts_with("Exit codes:"))
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(codes.contains(&"3"), has_3, "{command}: {codes:?}");
        assert_eq!(codes.contains(&"5"), has_5, "{command}: {codes:?}");
        assert!(codes.contains(&"0"), "{command}: {codes:?}");
    }
    for command in ["completions", "man"] {
        let help = rr(&[command, "--help"]);
        assert!(
            !help.contains("--netns") && !help.contains("--state-dir"),
            "{command} shows globals:\n{help}"
        );
    }
}

#[test]
fn usage_errors_have_the_one_prefix_and_the_json_envelope() {
    let out = rr_out(&["--json", "apply", "--bogus", "x.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("roce-route: error: unexpected argument '--bogus'"), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON document on stdout");
    assert_eq!((doc["command"].as_str(), doc["exit_code"].as_i64()), (Some("apply"), Some(2)));
    assert_eq!(doc["error"]["kind"], "usage", "{doc}");
    // Without --json: the message only.
    let out = rr_out(&["check"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("roce-route: error: "));
}

#[test]
fn json_never_follows_a_page_or_a_script() {
    let page = rr_out(&["--json", "man"]);
    assert!(page.status.success());
    assert_eq!(page.stdout, rr(&["man"]).into_bytes(), "--json man appends nothing");
    let toml = rr(&["man", "roce-route.toml"]);
    assert!(toml.starts_with(".TH ROCE\\-ROUTE.TOML 5"), "{}", &toml[..80]);
    let script = rr_out(&["--json", "completions", "bash"]);
    assert_eq!(
        script.stdout,
        rr(&["completions", "bash"]).into_bytes(),
        "--json completions appends nothing"
    );
}

/// What `cargo deb` ships from dist/generated/ is what this binary prints,
/// so that the package builds on a fresh clone and never drifts.
/// `ROCE_ROUTE_BLESS=1` rewrites the files (gzip -9n for the pages).
#[test]
fn the_committed_pages_and_completions_are_what_the_binary_prints() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("dist/generated");
    let bless = std::env::var_os("ROCE_ROUTE_BLESS").is_some();
    let gzip = |data: &str, path: &std::path::Path| {
        use std::io::Write;
        let mut child = Command::new("gzip")
            .arg("-9n")
            .stdin(std::process::Stdio::piped())
            .stdout(std::fs::File::create(path).unwrap())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(data.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success());
    };
    for (file, args, zipped) in [
        ("roce-route.8.gz", &["man"][..], true),
        ("roce-route.toml.5.gz", &["man", "roce-route.toml"][..], true),
        ("roce-route.bash", &["completions", "bash"][..], false),
        ("_roce-route", &["completions", "zsh"][..], false),
        ("roce-route.fish", &["completions", "fish"][..], false),
    ] {
        let want = rr(args);
        let path = dir.join(file);
        if bless {
            if zipped { gzip(&want, &path) } else { std::fs::write(&path, &want).unwrap() }
        }
        let have = if zipped {
            let out = Command::new("gzip").arg("-dc").arg(&path).output().unwrap();
            String::from_utf8(out.stdout).unwrap()
        } else {
            std::fs::read_to_string(&path).unwrap_or_default()
        };
        assert!(
            have == want,
            "dist/generated/{file} is not what `roce-route {}` prints: run the docs test with ROCE_ROUTE_BLESS=1",
            args.join(" ")
        );
    }
}
