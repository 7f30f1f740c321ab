//! Output at scale (issue 8, section 6): apply prints a summary per
//! interface by default, every command with -v, nothing but errors with
//! -q; --dry-run keeps printing the exact script.

mod common;

use common::*;

#[test]
fn apply_summarises_per_interface_lists_with_v_and_is_silent_with_q() {
    let tb = Testbed::builder().rails(4).build();
    let cfg = tb.config_for(4, &[]);
    let run = tb.rr(&["apply", "--no-announce", &cfg]).expect_code(EXIT_OK);
    let out = run.stdout();
    assert_eq!(out.lines().count(), 5, "a header and one line per rail:\n{out}");
    for k in 0..4 {
        assert!(out.contains(&format!("  rail{k}: 1 route added, 1 rule added, 2 sysctls set")), "{out}");
    }
    assert!(!out.contains("ip -4 route add"), "commands are listed only with -v:\n{out}");

    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    let run = tb.rr(&["-v", "apply", "--no-announce", &cfg]).expect_code(EXIT_OK);
    let commands =
        run.stdout().lines().filter(|l| l.trim_start().starts_with("ip ") || l.contains("sysctl -w")).count();
    assert_eq!(commands, 16, "{}", run.report());

    // -q: nothing but errors, even with a warning to give (rail3 down: not
    // ready, exit 5 tells it).
    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    tb.ip_host("link set rail3 down");
    let run = tb.rr(&["-q", "apply", "--no-announce", &cfg]).expect_code(5);
    assert!(run.stdout().is_empty() && run.stderr().is_empty(), "{}", run.report());
    let bad = tb.write_config("[[interface]]\nname = \"rail0\"\ntable = 0\n");
    let run = tb.rr(&["-q", "apply", path_str(&bad)]).expect_code(EXIT_INVALID);
    run.expect_stderr(&["table = 0 is reserved"]);
    // A dry run prints its script whatever the verbosity.
    tb.ip_host("link set rail3 up");
    let dry = tb.rr(&["-q", "apply", "--dry-run", &cfg]).expect_code(EXIT_OK);
    assert!(dry.stdout().contains("ip -4 route add 198.51.100.0/24 dev rail3 table 103"), "{}", dry.report());
}
