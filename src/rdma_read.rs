//! Reading the RDMA ports a command works with: the sysfs tree of
//! `--sysfs-root` (`rdma::scan`), narrowed to the ports of this network
//! namespace by RDMA netlink when it is the live /sys. The effect behind
//! discover, nccl-env, check, show, apply, probe and watch's metrics.

use crate::error::Error;

/// The sysfs root `--sysfs-root` names, checked: a root that is not a
/// sysfs copy is a bad argument.
pub fn sysfs_dir(arg: &crate::cli::SysfsArg) -> Result<crate::sysfs::Dir, Error> {
    crate::sysfs::Dir::checked(&arg.sysfs_root).map_err(Error::Usage)
}

/// The RDMA ports, read from `--sysfs-root` and mapped to the netdevs of
/// this namespace; any part that cannot be read ends the command.
pub fn read(arg: &crate::cli::SysfsArg, links: &[crate::model::Link]) -> Result<crate::rdma::Rdma, Error> {
    let dir = sysfs_dir(arg)?;
    let mut rdma = crate::rdma::scan(&dir, links)?;
    own(&dir, &mut rdma)?;
    Ok(rdma)
}

/// Keeps only the ports of this namespace (`Rdma::in_namespace`), when
/// `fs` is the live /sys: a copy (`--sysfs-root`, fixtures) describes a
/// host whose RDMA netlink is not this one's, and is taken as it is. RDMA
/// netlink is asked only when a RoCE port is there to be proven. When it
/// cannot be asked, no RoCE port is kept (never another namespace's
/// device), and the error says why.
pub fn own(fs: &dyn crate::sysfs::Sysfs, rdma: &mut crate::rdma::Rdma) -> Result<(), crate::rdma::RdmaError> {
    if !fs.live() || !rdma.needs_owners() {
        return Ok(());
    }
    let owners = crate::netlink::rdma::ports();
    rdma.in_namespace(owners.as_deref().unwrap_or_default());
    owners.map(drop).map_err(|e| crate::rdma::RdmaError::Netlink(e.to_string()))
}

/// `read` for check, show and apply: a part that cannot be read is
/// returned as why (naming the file) rather than ending the command.
pub fn read_lenient(
    arg: &crate::cli::SysfsArg,
    links: &[crate::model::Link],
) -> Result<crate::rdma_check::Observed, Error> {
    let _p = crate::profile::phase("sysfs (RDMA)");
    let dir = sysfs_dir(arg)?;
    let (mut rdma, mut unreadable) = crate::rdma::scan_lenient(&dir, links);
    if let Err(error) = own(&dir, &mut rdma) {
        unreadable.push(crate::rdma::Unreadable {
            part: None,
            error,
            left_out: "the RoCE ports are left out",
        });
    }
    Ok(crate::rdma_check::Observed { rdma, unreadable, root: arg.sysfs_root.to_string_lossy().into_owned() })
}
