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
    for section in ["EXIT STATUS", "CONFIGURATION", "FILES", "ENVIRONMENT"] {
        assert!(text.contains(section), "{section} not rendered");
    }
}
