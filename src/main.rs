//! The thin binary: parse the command line, enter the namespace, run.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use roce_route::cli::{Cli, Command};
use roce_route::commands::{self, Ctx};
use roce_route::error::{Error, exit};
use roce_route::executor::StopFlag;
use roce_route::{netns, say, tell};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (json, name) = (cli.command.json(), cli.command.name());
    match run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(e) => {
            tell!("roce-route: error: {e}");
            if json {
                say!("{}", serde_json::to_string_pretty(&e.json(name)).unwrap_or_default());
            }
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn run(cli: Cli) -> Result<i32, Error> {
    // A bad config is exit 2 whoever runs it: validate before anything else.
    let config = match &cli.command {
        Command::Apply(a) => Some(commands::apply::load_config(&a.config)?),
        Command::Check(c) => Some(commands::apply::load_config(&c.config)?),
        _ => None,
    };
    let changes_network = match &cli.command {
        Command::Apply(a) => !a.dry_run,
        Command::Rollback(_) | Command::Remove(_) | Command::Confirm => true,
        Command::Check(_) | Command::Show(_) => false,
    };
    if changes_network {
        netns::require_admin(cli.command.name())?;
    }
    if let Some(name) = &cli.netns {
        netns::enter(name)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let ctx = Ctx {
            netns: cli.netns.clone(),
            state_base: cli.state_dir.clone(),
            lock_timeout: Duration::from_secs(cli.lock_timeout),
            stop: Arc::new(StopFlag::default()),
        };
        watch_signals(ctx.stop.clone())?;
        match (&cli.command, config) {
            (Command::Apply(a), Some(cfg)) => commands::apply::run(&ctx, a, cfg).await.map(|()| exit::OK),
            (Command::Check(c), Some(cfg)) => commands::check::run(&ctx, c, cfg)
                .await
                .map(|in_sync| if in_sync { exit::OK } else { exit::DRIFT }),
            (Command::Rollback(r), _) => commands::rollback::run(&ctx, r.json).await.map(|()| exit::OK),
            (Command::Remove(p), _) => commands::remove::run(&ctx, p.protocol).await.map(|()| exit::OK),
            (Command::Show(s), _) => commands::show::run(s.json, s.protocol).await.map(|()| exit::OK),
            (Command::Confirm, _) => commands::confirm::run(&ctx).map(|()| exit::OK),
            _ => unreachable!("apply and check always carry a config"),
        }
    })
}

/// SIGINT, SIGTERM and SIGHUP do not kill a run half-way: they ask the
/// executor to stop before its next step and roll back.
fn watch_signals(stop: Arc<StopFlag>) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    let kinds = [(SignalKind::interrupt(), 2), (SignalKind::terminate(), 15), (SignalKind::hangup(), 1)];
    for (kind, number) in kinds {
        let mut s =
            signal(kind).map_err(|e| Error::Other(anyhow::anyhow!("cannot watch signal {number}: {e}")))?;
        let stop = stop.clone();
        tokio::spawn(async move {
            while s.recv().await.is_some() {
                stop.request(number);
            }
        });
    }
    Ok(())
}
