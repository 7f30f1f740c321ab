//! The thin binary: parse the command line, validate, enter the
//! namespace, run one command, report (the JSON envelope with --json) and
//! map errors to exit codes.
// The process starts at `main` below, not at std's runtime start.
#![no_main]

use std::ffi::{c_char, c_int};
use std::time::Duration;

use roce_route::cli::{Cli, Command};
use roce_route::commands::{self, Ctx, Done, Verbosity};
use roce_route::error::{Error, exit};
use roce_route::signals::StopFlag;
use roce_route::{config, netns, tell};

/// The process's entry, in place of std's runtime start (`lang_start`),
/// doing of it what a command needs: standard descriptors that are open
/// and SIGPIPE ignored, as std leaves them (`std_start`); a panic's exit
/// code 101; std's exit (stdout flushed). What it leaves out:
/// std read /proc/self/maps (`pthread_getattr_np`) and set up an
/// alternate signal stack and SIGSEGV and SIGBUS handlers, to say "has
/// overflowed its stack" before aborting on a stack overflow: 15 system
/// calls and 90k instructions of every run, 0.09 ms of a trivial
/// program's 0.9 here (bench/README.md, seventeenth session). A stack
/// overflow is a plain SIGSEGV now, and a panic's message names the
/// thread '<unnamed>', not 'main'. std's arguments come from glibc's init
/// array, as with its own start. (tests/linkage.rs)
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    std_start();
    let code = match std::panic::catch_unwind(run_main) {
        Ok(code) => c_int::from(code),
        // The panic hook has said what; std's start exits so too (and
        // does not drop the payload, whose drop could panic again).
        Err(payload) => {
            std::mem::forget(payload);
            101
        }
    };
    // std's exit, as its start ends: stdout written (without waiting for
    // a thread that holds it), one exit at a time.
    std::process::exit(code)
}

/// What std's start does that a command relies on. A standard
/// descriptor closed by the caller is opened on /dev/null, so that no
/// socket or file of ours gets its number (without it, watch's signal
/// socket pair took fd 1, and what was written to "stdout" went there);
/// SIGPIPE is ignored, so that a write to a closed pipe is an error the
/// writer sees (std's default).
fn std_start() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: poll on a local array of 3; open and fcntl take no memory of
    // ours but a constant C string; signal sets a disposition.
    unsafe {
        let polled = libc::poll(fds.as_mut_ptr(), 3, 0) >= 0;
        let closed = fds.map(|p| {
            if polled { p.revents & libc::POLLNVAL != 0 } else { libc::fcntl(p.fd, libc::F_GETFD) == -1 }
        });
        for _ in closed.into_iter().filter(|c| *c) {
            // The lowest free number: the closed one.
            if libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0) == -1 {
                std::process::abort();
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

fn run_main() -> u8 {
    roce_route::profile::start();
    roce_route::testhooks::panic_if_asked();
    let parsed = {
        let _p = roce_route::profile::phase("arguments");
        parse()
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let name = cli.command.name();
    let json = cli.json;
    let mut ctx = None;
    let result = run(cli, &mut ctx);
    let warnings = ctx.as_ref().map(Ctx::warnings).unwrap_or_default();
    let code = match &result {
        Ok(done) => done.code,
        Err(e) => e.exit_code(),
    };
    // `man` and `completions` print a page or a script: nothing may follow.
    let text_only = cli_text_only(name);
    match result {
        Ok(_) if text_only => {}
        Ok(done) if json => {
            let changed = done.changed;
            print_envelope(name, code, changed, warnings, serde_json::Value::Null, done.doc())
        }
        Ok(_) => {}
        Err(e) => {
            tell!("roce-route: error: {e}");
            if json {
                print_envelope(name, code, e.changed(), warnings, e.json(), serde_json::json!({}));
            }
        }
    }
    roce_route::profile::finish();
    code as u8
}

/// Whether `command` prints a page or a script that nothing may follow.
fn cli_text_only(command: &str) -> bool {
    matches!(command, "man" | "completions")
}

/// The command line, or the exit code of a usage error (said as every
/// other error is: one prefix, and the JSON envelope under --json).
fn parse() -> Result<Cli, u8> {
    let parsed = roce_route::cli::parse(std::env::args_os().collect());
    let e = match parsed {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    if !e.use_stderr() {
        // --help, --version: clap prints them as they are.
        e.exit();
    }
    let text = e.render().to_string();
    let message = text.trim_end().strip_prefix("error: ").unwrap_or(text.trim_end()).to_string();
    tell!("roce-route: error: {message}");
    if std::env::args().any(|a| a == "--json") {
        let first = message.lines().next().unwrap_or_default().to_string();
        let error = serde_json::json!({"message": first, "kind": "usage"});
        // The command, as far as it can be told from the words given.
        let names: Vec<String> =
            roce_route::cli::command().get_subcommands().map(|c| c.get_name().to_string()).collect();
        let command = std::env::args().skip(1).find(|a| names.contains(a)).unwrap_or_default();
        print_envelope(&command, exit::INVALID, false, Vec::new(), error, serde_json::json!({}));
    }
    Err(exit::INVALID as u8)
}

/// The one JSON document every command prints with --json.
fn print_envelope(
    command: &str,
    code: i32,
    changed: bool,
    warnings: Vec<String>,
    error: serde_json::Value,
    body: serde_json::Value,
) {
    let mut doc = serde_json::json!({
        "command": command,
        "ok": code == 0,
        "exit_code": code,
        "changed": changed,
        "warnings": warnings,
        "error": error,
    });
    if let (Some(doc), serde_json::Value::Object(fields)) = (doc.as_object_mut(), body) {
        for (k, v) in fields {
            doc.entry(k).or_insert(v);
        }
    }
    // `watch --json` is one document per line.
    roce_route::output::say_json(&doc, command != "watch");
}

fn run(cli: Cli, ctx_out: &mut Option<Ctx>) -> Result<Done, Error> {
    // Generated from the command line itself: no root, no namespace.
    match &*cli.command {
        Command::Completions(c) => return Ok(roce_route::docs::completions(c.shell)),
        Command::Man(m) => return roce_route::docs::man(&m.page),
        _ => {}
    }
    // A bad config or argument is exit 2 whoever runs it: validate first.
    let (config, config_files) = {
        let _p = roce_route::profile::phase("config files");
        read_config(&cli.command)?
    };
    let protocol = protocol(&cli.command)?;
    if cli.command.changes_network() {
        netns::require_admin(&cli.command)?;
    }
    // The handlers only set a flag: every wait and every step checks it.
    // `confirm` keeps the default (a Ctrl-C simply ends it).
    let start_up = roce_route::profile::phase("signals, namespace, runtime");
    let stop = match &*cli.command {
        Command::Confirm => StopFlag::default(),
        _ => StopFlag::on_signals()
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot install signal handlers: {e}")))?,
    };
    if let Some(name) = &cli.netns {
        netns::enter(name)?;
        roce_route::output::set_netns(name);
    }
    let ctx = ctx_out.insert(context(&cli, stop));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot start the runtime: {e}")))?;
    drop(start_up);
    runtime.block_on(dispatch(ctx, &cli.command, config, config_files, protocol))
}

/// Config files as read: each file's name and text.
type Files = Vec<(String, String)>;

/// The config of a command that takes one, parsed and checked (and, for
/// apply, the files as read, recorded for watch).
fn read_config(command: &Command) -> Result<(Option<config::Config>, Files), Error> {
    let load = roce_route::config_files::load;
    Ok(match command {
        Command::Apply(a) => match &a.install {
            None => {
                let files = roce_route::config_files::read(&a.config)?;
                (Some(config::parse_many(&files)?), files)
            }
            // Checked as the files are now (errors point at the draft),
            // then applied and recorded as they will be in the boot set.
            Some(dir) => {
                let (mut files, target) = roce_route::config_files::read_for_install(&a.config, dir)?;
                config::parse_many(&files)?;
                let draft = a.config[0].display().to_string();
                files
                    .iter_mut()
                    .filter(|(shown, _)| *shown == draft)
                    .for_each(|(shown, _)| *shown = target.clone());
                (Some(config::parse_many(&files)?), files)
            }
        },
        Command::Check(c) => (Some(load(&c.config)?), Vec::new()),
        Command::Announce(a) => (Some(load(&a.config)?), Vec::new()),
        Command::NcclEnv(n) if !n.config.is_empty() => (Some(load(&n.config)?), Vec::new()),
        Command::Probe(p) if !p.config.is_empty() => (Some(load(&p.config)?), Vec::new()),
        _ => (None, Vec::new()),
    })
}

/// `--protocol` of remove and show, validated like `[defaults] protocol`.
fn protocol(command: &Command) -> Result<Option<u8>, Error> {
    match command {
        Command::Remove(r) => r.protocol,
        Command::Show(s) => s.protocol,
        _ => None,
    }
    .map(|p| {
        config::check_protocol(p).map_err(|(what, hint)| Error::Usage(format!("--protocol: {what}; {hint}")))
    })
    .transpose()
}

/// The context of the run, from the global options.
fn context(cli: &Cli, stop: StopFlag) -> Ctx {
    let state_base_given = std::env::var_os(roce_route::cli::STATE_DIR_ENV).is_some()
        || cli.state_dir != std::path::Path::new(roce_route::state::DEFAULT_BASE);
    let mut ctx = Ctx::new(
        cli.netns.clone(),
        cli.state_dir.clone(),
        state_base_given,
        Duration::from_secs(cli.lock_timeout),
        stop,
        cli.json,
    );
    ctx.verbosity = if cli.quiet {
        Verbosity::Quiet
    } else if cli.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    ctx
}

/// Runs the command.
async fn dispatch(
    ctx: &Ctx,
    command: &Command,
    config: Option<config::Config>,
    config_files: Files,
    protocol: Option<u8>,
) -> Result<Done, Error> {
    match (command, config) {
        (Command::Apply(a), Some(cfg)) => commands::apply::run(ctx, a, cfg, config_files).await,
        (Command::Check(c), Some(cfg)) => commands::check::run(ctx, cfg, c).await,
        (Command::Discover(d), _) => commands::discover::run(ctx, d).await,
        (Command::NcclEnv(n), cfg) => commands::nccl_env::run(ctx, n, cfg).await,
        (Command::Probe(p), cfg) => commands::probe::run(ctx, p, cfg).await,
        (Command::Announce(_), Some(cfg)) => commands::announce::run(ctx, cfg).await,
        (Command::Rollback(r), _) => commands::rollback::run(ctx, r.dry_run).await,
        (Command::Remove(r), _) => commands::remove::run(ctx, protocol, r.dry_run).await,
        (Command::Show(s), _) => commands::show::run(ctx, protocol, &s.sysfs).await,
        (Command::Confirm, _) => commands::confirm::run(ctx),
        (Command::Watch(w), _) => commands::watch::run(ctx, w).await,
        (Command::ConfirmGuard(g), _) => {
            commands::guard::run(ctx, g).await.map(|code| Done::new(code, code != 0, serde_json::json!({})))
        }
        _ => unreachable!("apply, check and announce always carry a config"),
    }
}
