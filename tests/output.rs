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
    let want = in_netns(tb.host().name(), "ip -4 route add 198.51.100.0/24 dev rail3 table 103");
    assert!(dry.stdout().contains(&want), "{}", dry.report());
}

/// At 32 rails apply prints a line per rail and one line for the
/// announcements (issue 17); -v lists every announced address, a line per
/// rail under the old header. --json lists them all either way.
#[test]
fn apply_at_32_rails_announces_in_one_line_and_lists_the_addresses_with_v() {
    let tb = Testbed::builder().rails(32).ipv6(true).build();
    for r in tb.rails() {
        tb.host().set_sysctl(&format!("net/ipv6/conf/{}/router_solicitations", r.name), "0");
    }
    let cfg = tb.config_for(32, &[]);
    let run = tb.rr(&["apply", &cfg]).expect_code(EXIT_OK);
    let out = run.stdout();
    let announced: Vec<&str> = out.lines().filter(|l| l.contains("announced")).collect();
    assert_eq!(
        announced,
        [
            "roce-route: announced 64 addresses on 32 rails to the peers, each from its own interface (2 times, \
          100 ms apart)"
        ],
        "{}",
        run.report()
    );
    assert_eq!(out.lines().count(), 34, "a header, a line per rail and one for the announcements:\n{out}");

    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    let run = tb.rr(&["-v", "apply", &cfg]).expect_code(EXIT_OK);
    let out = run.stdout();
    assert!(
        out.contains(
            "roce-route: announced 64 addresses to the peers, each from its own interface (2 times, 100 ms apart):\n"
        ),
        "{}",
        run.report()
    );
    for r in tb.rails() {
        let line = format!("  {}: {} {}\n", r.name, r.v4, r.v6.as_deref().unwrap());
        assert!(out.contains(&line), "-v lists {line:?}:\n{out}");
    }

    tb.rr(&["rollback"]).expect_code(EXIT_OK);
    let run = tb.rr(&["--json", "apply", &cfg]).expect_code(EXIT_OK);
    let doc = json_doc(&run);
    assert_eq!(doc["announced"].as_array().map(Vec::len), Some(64), "{}", run.report());
}

/// A dry run with nothing to change because every rail is not ready says
/// so, not "in sync" (issue 18).
#[test]
fn a_dry_run_with_every_rail_not_ready_does_not_say_in_sync() {
    let tb = Testbed::builder().rails(2).build();
    let cfg = tb.config_for(2, &[]);
    tb.ip_host("link set rail0 down");
    tb.ip_host("link set rail1 down");
    let dry = tb.rr(&["apply", "--dry-run", &cfg]).expect_code(5);
    let out = dry.stdout();
    assert!(!out.contains("in sync"), "{}", dry.report());
    assert!(
        out.contains("nothing to change for what is ready; 2 parts are not ready (below)"),
        "{}",
        dry.report()
    );
    tb.ip_host("link set rail0 up");
    tb.ip_host("link set rail1 up");
    tb.rr(&["apply", "--no-announce", &cfg]).expect_code(EXIT_OK);
    let dry = tb.rr(&["apply", "--dry-run", &cfg]).expect_code(EXIT_OK);
    assert!(dry.stdout().contains("in sync, nothing to change"), "{}", dry.report());
}
