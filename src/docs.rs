//! `completions` and `man`: generated from the clap definition
//! (`clap_complete`, and `man` for the pages), so they never drift from the command
//! line. The manual page adds what `--help` does not hold: the config
//! reference, exit status, files and environment.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::commands::Done;
use crate::error::{Error, exit};

/// The completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Done {
    let _ = std::io::stdout().write_all(completion_script(shell).as_bytes());
    Done::new(exit::OK, false, serde_json::json!({}))
}

/// The completion script for `shell`, without the internal command.
pub fn completion_script(shell: clap_complete::Shell) -> String {
    let mut cmd = Cli::command();
    // clap_complete offers hidden subcommands too: the guard is internal.
    cmd = cmd.mut_subcommand("confirm-guard", |c| c.hide(true));
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "roce-route", &mut out);
    let script = String::from_utf8_lossy(&out).into_owned();
    match shell {
        // clap_complete 4.6 names the bash cases of a hyphenated binary's
        // subcommands `roce__subcmd__route__subcmd__X` but sets
        // `roce__route__subcmd__X`, so no subcommand's options would ever
        // complete; the test of `roce-route apply --dr` guards this.
        clap_complete::Shell::Bash => {
            script.replace("roce__subcmd__route", "roce__route").replace(" confirm-guard", "")
        }
        _ => script,
    }
}

/// A manual page on stdout: roce-route(8) or roce-route.toml(5).
pub fn man(page: &str) -> Result<Done, Error> {
    let page = match page {
        "roce-route.toml" => crate::man::page_5(env!("CARGO_PKG_VERSION")).into_bytes(),
        _ => man_page().map_err(|e| Error::Other(anyhow::anyhow!("cannot render the manual page: {e}")))?,
    };
    let _ = std::io::stdout().write_all(&page);
    Ok(Done::new(exit::OK, false, serde_json::json!({})))
}

/// The whole page as roff.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    Ok(crate::man::page_8(&crate::cli::command(), env!("CARGO_PKG_VERSION")).into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_every_command_and_the_extra_sections() {
        let page = String::from_utf8(man_page().unwrap()).unwrap();
        for needle in [
            ".TH ROCE\\-ROUTE 8",
            "apply",
            "rollback",
            "remove",
            "check",
            "show",
            "confirm",
            "announce",
            "discover",
            "nccl\\-env",
        ] {
            assert!(page.contains(needle), "{needle} missing");
        }
        for section in [
            ".SH COMMANDS",
            ".SH EXAMPLES",
            ".SH NOTES",
            ".SH EXIT STATUS",
            ".SH FILES",
            ".SH ENVIRONMENT",
            ".SH SEE ALSO",
        ] {
            assert!(page.contains(section), "{section} missing");
        }
        assert!(!page.contains("confirm-guard"), "the internal command is hidden");
    }
}
