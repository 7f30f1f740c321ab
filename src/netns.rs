//! Entering a named network namespace and checking privileges.

use std::fs::File;

use crate::error::Error;

/// Enters /run/netns/NAME (what `ip netns add` creates). Must be called
/// before the tokio runtime starts, so that every socket and every
/// /proc/sys/net file opened afterwards belongs to that namespace.
pub fn enter(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::Usage(format!("invalid network namespace name {name:?}")));
    }
    let path = format!("/run/netns/{name}");
    let file = File::open(&path).map_err(|e| {
        Error::Usage(format!(
            "network namespace {name:?} not found ({path}: {e}); list them with `ip netns list`"
        ))
    })?;
    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
        Error::NotPermitted(format!(
            "cannot enter network namespace {name:?}: {e}; run roce-route as root (CAP_SYS_ADMIN)"
        ))
    })?;
    // The sysctls' directory this thread may hold is the old namespace's,
    // and so are the run directory's key and the sysctls read with links.
    crate::sysctl::forget_directory();
    crate::sysctl::new_epoch();
    crate::state::rundir::forget_netns_key();
    Ok(())
}

use caps::{CapSet, Capability};

/// Whether this process may change the network: CAP_NET_ADMIN in its
/// effective set (root has it).
pub fn can_admin_network() -> bool {
    has_capability(Capability::CAP_NET_ADMIN)
}

/// Whether `cap` is in this process's effective set (capget(2); an error
/// is a no).
fn has_capability(cap: Capability) -> bool {
    caps::has_cap(None, CapSet::Effective, cap).unwrap_or(false)
}

pub fn require_admin(command: &crate::cli::Command) -> Result<(), Error> {
    use crate::cli::Command;
    if let Command::Announce(_) = command {
        // It changes nothing on the host, but sends raw frames.
        if has_capability(Capability::CAP_NET_RAW) {
            return Ok(());
        }
        return Err(Error::NotPermitted(
            "announce sends raw frames (AF_PACKET) and needs root (CAP_NET_RAW); run it with sudo".into(),
        ));
    }
    if can_admin_network() {
        return Ok(());
    }
    let preview = match command {
        Command::Apply(_) | Command::Rollback(_) | Command::Remove(_) => {
            ", or add --dry-run to only see the commands it would run"
        }
        _ => "",
    };
    Err(Error::NotPermitted(format!(
        "{} changes the network and needs root (CAP_NET_ADMIN); run it with sudo{preview}",
        command.name()
    )))
}
