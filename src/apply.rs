//! `roce-route apply`: load, plan, read, diff, then print or execute.

use std::sync::Arc;

use anyhow::Context;

use crate::cli::ApplyArgs;
use crate::config;
use crate::diff::{self, Plan};
use crate::error::Error;
use crate::executor::{self, StopFlag};
use crate::host::{self, Kernel};
use crate::netlink::Netlink;
use crate::plan;
use crate::render;

/// Reads and validates the config file (exit 2 on any problem).
pub fn load_config(path: &std::path::Path) -> Result<config::Config, Error> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::Config(config::ConfigError::at(
            &shown,
            None,
            format!("cannot read the config: {e}"),
            "check the path",
        ))
    })?;
    Ok(config::parse(&shown, &text)?)
}

/// Everything up to the plan: what `apply`, `apply --dry-run` share.
pub async fn make_plan(nl: &Netlink, cfg: &config::Config, adopt: bool) -> Result<Plan, Error> {
    let addrs = nl
        .addresses()
        .await
        .context("cannot read the interface addresses")?;
    let desired = plan::plan(cfg, nl.links(), &addrs)?;
    let observed = host::observe(nl, &desired).await?;
    Ok(diff::diff(&desired, &observed, adopt))
}

pub async fn run(args: &ApplyArgs, cfg: config::Config, stop: Arc<StopFlag>) -> Result<(), Error> {
    let nl = Netlink::connect()
        .await
        .context("cannot talk to the kernel over rtnetlink")?;
    let plan = make_plan(&nl, &cfg, args.adopt).await?;
    for w in &plan.warnings {
        eprintln!("roce-route: warning: {w}");
    }
    if !plan.conflicts.is_empty() && !args.adopt {
        return Err(Error::Conflicts(conflict_report(&plan)));
    }
    if args.dry_run {
        print!("{}", dry_run_script(&plan));
        return Ok(());
    }
    if plan.ops.is_empty() {
        println!("roce-route: in sync, nothing changed");
        return Ok(());
    }
    let made = executor::run(&mut Kernel::new(&nl), &plan.ops, &stop, &mut ()).await?;
    println!("roce-route: applied {made} change(s):");
    for op in &plan.ops {
        println!("  {}", render::command(op));
    }
    Ok(())
}

fn dry_run_script(plan: &Plan) -> String {
    let mut comments = vec![if plan.ops.is_empty() {
        "roce-route apply --dry-run: in sync, nothing to change".to_string()
    } else {
        format!(
            "roce-route apply --dry-run: {} change(s); nothing was changed on the host",
            plan.ops.len()
        )
    }];
    comments.extend(plan.warnings.iter().map(|w| format!("warning: {w}")));
    comments.extend(
        plan.conflicts
            .iter()
            .map(|c| format!("adopting: {} ({})", c.entry, c.why)),
    );
    render::script(&comments, &plan.ops)
}

fn conflict_report(plan: &Plan) -> String {
    let mut s = format!(
        "{} entr(y/ies) not owned by roce-route are in the way; nothing was changed:\n",
        plan.conflicts.len()
    );
    for c in &plan.conflicts {
        s.push_str(&format!("  {}\n    ({})\n", c.entry, c.why));
    }
    s.push_str("re-run with --adopt to take them over (replaced or deleted as part of the transaction), or remove them yourself");
    s
}
