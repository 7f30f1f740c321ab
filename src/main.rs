//! The thin binary: parse the command line, enter the namespace, run.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use roce_route::cli::{Cli, Command};
use roce_route::error::{Error, exit};
use roce_route::executor::StopFlag;
use roce_route::{apply, netns};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::from(exit::OK as u8),
        Err(e) => {
            eprintln!("roce-route: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn run(cli: Cli) -> Result<(), Error> {
    let Command::Apply(args) = &cli.command;
    // Validate before anything else: a bad config is exit 2, whoever runs it.
    let cfg = apply::load_config(&args.config)?;
    if !args.dry_run {
        netns::require_admin("apply")?;
    }
    if let Some(name) = &cli.netns {
        netns::enter(name)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Other(anyhow::anyhow!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let stop = Arc::new(StopFlag::default());
        watch_signals(stop.clone())?;
        apply::run(args, cfg, stop).await
    })
}

/// SIGINT, SIGTERM and SIGHUP do not kill an apply half-way: they ask the
/// executor to stop before its next step and roll back.
fn watch_signals(stop: Arc<StopFlag>) -> Result<(), Error> {
    use tokio::signal::unix::{SignalKind, signal};
    for (kind, number) in [
        (SignalKind::interrupt(), 2),
        (SignalKind::terminate(), 15),
        (SignalKind::hangup(), 1),
    ] {
        let mut s = signal(kind)
            .map_err(|e| Error::Other(anyhow::anyhow!("cannot watch signal {number}: {e}")))?;
        let stop = stop.clone();
        tokio::spawn(async move {
            while s.recv().await.is_some() {
                stop.request(number);
            }
        });
    }
    Ok(())
}
