//! `apply --install DIR FILE`: FILE enters the boot set (DIR, the
//! directory the boot unit applies) only once its change is in place for
//! good. Without `--confirm` that is once the apply has committed; with
//! `--confirm` once the trial is confirmed. A trial that is reverted
//! leaves DIR as it was, so that no reboot or unit restart applies a
//! config the operator's own trial rejected.
//!
//! With `--confirm`, the file waits in DIR under a name no `*.toml` glob
//! takes (`.NAME.<trial>.staged`), written before the first change; the
//! confirmation renames it over `DIR/NAME` (atomic: one directory), and
//! every revert removes it with `pending`. Between any two steps a kill
//! leaves either the old boot set with a stray staged file that
//! `pending` names (removed by whoever settles the trial), or the new
//! boot set with the change confirmed.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::libc;
use serde::{Deserialize, Serialize};

use super::StateError;

/// Where the config file goes once kept, and where it waits until then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Install {
    /// `DIR/NAME`: the file of the boot set.
    pub to: PathBuf,
    /// `DIR/.NAME.<trial>.staged`: the same text, until it is kept.
    pub staged: PathBuf,
}

impl Install {
    /// The install of a file named `name` into `dir`, for the trial `tag`.
    pub fn new(dir: &Path, name: &str, tag: &str) -> Install {
        Install { to: dir.join(name), staged: dir.join(format!(".{name}.{tag}.staged")) }
    }

    /// Writes `text` where it waits (mode 0644, synced): nothing reads it
    /// until it is kept.
    pub fn stage(&self, text: &str) -> Result<(), StateError> {
        let _ = fs::remove_file(&self.staged);
        let io = |e| StateError::Io { path: self.staged.clone(), source: e };
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&self.staged)
            .map_err(io)?;
        file.write_all(text.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)
    }

    /// Moves the staged file into the boot set, in one rename, and syncs
    /// the directory so that the rename survives a power cut.
    pub fn keep(&self) -> Result<(), StateError> {
        fs::rename(&self.staged, &self.to)
            .map_err(|e| StateError::Io { path: self.to.clone(), source: e })?;
        if let Some(dir) = self.to.parent() {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }

    /// Removes the staged file (gone already is fine): the trial was not kept.
    pub fn discard(&self) -> Result<(), StateError> {
        super::files::remove_if_exists(&self.staged)
    }

    /// Stages and keeps at once: an apply without `--confirm`, once committed.
    pub fn now(&self, text: &str) -> Result<(), StateError> {
        self.stage(text)?;
        self.keep()
    }

    /// Whether the boot set holds exactly `text` (the confirmed config).
    pub fn is_in_place(&self, text: &str) -> bool {
        fs::read_to_string(&self.to).is_ok_and(|t| t == text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "roce-route-install-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_staged_file_is_not_a_toml_file_of_the_boot_set_until_kept() {
        let d = dir();
        let i = Install::new(&d, "rails.toml", "0123456789abcdef");
        i.stage("new").unwrap();
        let tomls = |d: &Path| {
            fs::read_dir(d)
                .unwrap()
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
                .count()
        };
        assert_eq!(tomls(&d), 0, "the staged file must not be taken by the boot unit's *.toml");
        i.keep().unwrap();
        assert_eq!(fs::read_to_string(d.join("rails.toml")).unwrap(), "new");
        assert!(!i.staged.exists());
        assert!(i.is_in_place("new"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_discarded_trial_leaves_the_boot_set_as_it_was() {
        let d = dir();
        fs::write(d.join("rails.toml"), "old").unwrap();
        let i = Install::new(&d, "rails.toml", "t");
        i.stage("new").unwrap();
        i.discard().unwrap();
        i.discard().unwrap();
        assert_eq!(fs::read_to_string(d.join("rails.toml")).unwrap(), "old");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1, "nothing else is left in the directory");
        fs::remove_dir_all(&d).unwrap();
    }
}
