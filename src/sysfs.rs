//! Reading sysfs (or a copy of it: `--sysfs-root`), through a small trait
//! so that tests can make a read fail as sysfs does and a plain file
//! cannot: the attributes of an empty GID slot, and `ndevs` of every
//! native InfiniBand port, exist and their `read()` fails with EINVAL.
//!
//! Absence is not an error here: a file that does not exist, and a read
//! that fails with EINVAL (sysfs's "this attribute has no value"), are
//! `None`. Anything else (EACCES, EIO, ...) is an error naming the path.

use std::cmp::Ordering;
use std::io;

use nix::libc;
use std::path::{Path, PathBuf};

/// Where the sysfs copy is: `/sys` unless `--sysfs-root` says otherwise.
pub const DEFAULT_ROOT: &str = "/sys";

#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {source}", path.display())]
pub struct SysfsError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Paths are relative to the root: `class/infiniband/mlx5_0/ports/1/state`.
pub trait Sysfs {
    /// The value of an attribute, without its trailing newline; None when
    /// it does not exist or has no value (EINVAL).
    fn read(&self, rel: &str) -> Result<Option<String>, SysfsError>;
    /// The names in a directory, sorted; None when there is no such
    /// directory.
    fn list(&self, rel: &str) -> Result<Option<Vec<String>>, SysfsError>;
    /// How messages name a path.
    fn path(&self, rel: &str) -> PathBuf;
    /// Whether this is the live /sys (not a copy): its class/net then
    /// describes the namespace that mounted it.
    fn live(&self) -> bool {
        false
    }
}

/// sysfs, or a copy of it, on disk.
#[derive(Clone, Debug)]
pub struct Dir {
    pub root: PathBuf,
}

impl Dir {
    pub fn new(root: impl Into<PathBuf>) -> Dir {
        Dir { root: root.into() }
    }

    /// The root as `--sysfs-root` gives it, checked: it exists, is a
    /// directory and looks like sysfs (has `class/net` or
    /// `class/infiniband`). The error says which.
    pub fn checked(root: &Path) -> Result<Dir, String> {
        let what = |why: &str| {
            format!(
                "--sysfs-root {}: {why}; give the directory that holds `class/infiniband` and `class/net` \
                 (/sys, or a copy of it such as a support bundle's)",
                root.display()
            )
        };
        match std::fs::metadata(root) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(what("no such directory")),
            Err(e) => return Err(what(&format!("cannot read it ({e})"))),
            Ok(m) if !m.is_dir() => return Err(what("not a directory")),
            Ok(_) => {}
        }
        if !root.join("class/net").is_dir() && !root.join("class/infiniband").is_dir() {
            return Err(what("not a copy of sysfs (it has neither class/net nor class/infiniband)"));
        }
        Ok(Dir::new(root))
    }
}

/// EINVAL and ENOENT (and ENOTDIR: a file where a directory was expected)
/// mean "no value"; the rest is an error.
fn absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
        || matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOTDIR) | Some(libc::ENODEV))
}

impl Sysfs for Dir {
    fn read(&self, rel: &str) -> Result<Option<String>, SysfsError> {
        let path = self.root.join(rel);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                Ok(Some(text.trim_end_matches(['\n', '\0']).to_string()))
            }
            Err(e) if absent(&e) => Ok(None),
            Err(source) => Err(SysfsError { path, source }),
        }
    }

    fn list(&self, rel: &str) -> Result<Option<Vec<String>>, SysfsError> {
        let path = self.root.join(rel);
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(e) if absent(&e) => return Ok(None),
            Err(source) => return Err(SysfsError { path, source }),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| SysfsError { path: path.clone(), source })?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort_by(|a, b| natural_cmp(a, b));
        Ok(Some(names))
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn live(&self) -> bool {
        std::fs::canonicalize(&self.root).is_ok_and(|p| p == Path::new(DEFAULT_ROOT))
    }
}

/// `mlx5_2` before `mlx5_10`: runs of digits compare by value.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<(bool, String)> {
        let mut out: Vec<(bool, String)> = Vec::new();
        for c in s.chars() {
            let digit = c.is_ascii_digit();
            match out.last_mut() {
                Some((d, run)) if *d == digit => run.push(c),
                _ => out.push((digit, c.to_string())),
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = match (x, y) {
            ((true, m), (true, n)) => {
                let (m, n) = (m.trim_start_matches('0'), n.trim_start_matches('0'));
                m.len().cmp(&n.len()).then_with(|| m.cmp(n))
            }
            ((_, m), (_, n)) => m.cmp(n),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

/// Tests only: the product reads sysfs through `Dir`.
#[cfg(test)]
pub use memory::Memory;

#[cfg(test)]
mod memory {
    use super::*;

    /// A sysfs in memory, for tests: files with contents, files whose read
    /// fails with an errno (EINVAL as sysfs does, EACCES), directories implied
    /// by the paths.
    #[derive(Clone, Debug, Default)]
    pub struct Memory {
        files: std::collections::BTreeMap<String, Result<String, i32>>,
    }

    impl Memory {
        pub fn file(&mut self, rel: &str, text: &str) -> &mut Memory {
            self.files.insert(rel.to_string(), Ok(format!("{text}\n")));
            self
        }
        pub fn failing(&mut self, rel: &str, errno: i32) -> &mut Memory {
            self.files.insert(rel.to_string(), Err(errno));
            self
        }
        pub fn remove(&mut self, rel: &str) -> &mut Memory {
            self.files.remove(rel);
            self
        }
    }

    impl Sysfs for Memory {
        fn read(&self, rel: &str) -> Result<Option<String>, SysfsError> {
            match self.files.get(rel) {
                None => Ok(None),
                Some(Ok(text)) => Ok(Some(text.trim_end_matches('\n').to_string())),
                Some(Err(errno)) => {
                    let e = io::Error::from_raw_os_error(*errno);
                    if absent(&e) { Ok(None) } else { Err(SysfsError { path: self.path(rel), source: e }) }
                }
            }
        }

        fn list(&self, rel: &str) -> Result<Option<Vec<String>>, SysfsError> {
            let dir = format!("{}/", rel.trim_end_matches('/'));
            let mut names: Vec<String> = self
                .files
                .keys()
                .filter_map(|k| k.strip_prefix(&dir))
                .map(|rest| rest.split('/').next().unwrap_or(rest).to_string())
                .collect();
            names.dedup();
            if names.is_empty() {
                return Ok(None);
            }
            names.sort_by(|a, b| natural_cmp(a, b));
            names.dedup();
            Ok(Some(names))
        }

        fn path(&self, rel: &str) -> PathBuf {
            Path::new("/sys").join(rel)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn einval_and_missing_are_no_value_eacces_is_an_error() {
        let mut m = Memory::default();
        m.file("class/infiniband/d/ports/1/gids/0", "fe80:0000:0000:0000:0000:0000:0000:0001");
        m.failing("class/infiniband/d/ports/1/gid_attrs/ndevs/0", libc::EINVAL);
        m.failing("class/infiniband/d/ports/1/rate", libc::EACCES);
        assert!(m.read("class/infiniband/d/ports/1/gids/0").unwrap().unwrap().starts_with("fe80"));
        assert_eq!(m.read("class/infiniband/d/ports/1/gid_attrs/ndevs/0").unwrap(), None);
        assert_eq!(m.read("class/infiniband/d/ports/1/nothing").unwrap(), None);
        let e = m.read("class/infiniband/d/ports/1/rate").unwrap_err();
        assert!(e.to_string().starts_with("cannot read /sys/class/infiniband/d/ports/1/rate: "), "{e}");
        assert_eq!(m.list("class/infiniband").unwrap().unwrap(), ["d"]);
        assert_eq!(m.list("class/net").unwrap(), None);
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_1", "ibp12s0", "ibp138s0", "ibp42s0"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["ibp12s0", "ibp42s0", "ibp138s0", "mlx5_1", "mlx5_2", "mlx5_10"]);
        let mut rails: Vec<String> = (0..16).rev().map(|i| format!("rail{i}")).collect();
        rails.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(rails, (0..16).map(|i| format!("rail{i}")).collect::<Vec<_>>());
        let mut v = vec!["ens10f0np0", "ens2f0np0", "ens1f1np1", "ens1f0np0", "rocep193s0f0", "rocep65s0f1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["ens1f0np0", "ens1f1np1", "ens2f0np0", "ens10f0np0", "rocep65s0f1", "rocep193s0f0"]);
    }

    /// A run of digits compares by its value, leading zeros or not
    /// (strnatcmp, and so the natord crate, compares a run that starts
    /// with 0 digit by digit: eth09 before eth1); equal values fall back
    /// to the bytes, so that different names never compare equal.
    #[test]
    fn natural_order_is_by_value_and_total() {
        let mut v = vec!["eth10", "eth09", "eth1", "eth001"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["eth001", "eth1", "eth09", "eth10"]);
        assert_eq!(natural_cmp("mlx5_01", "mlx5_1"), Ordering::Less);
        assert_eq!(natural_cmp("mlx5_1", "mlx5_01"), Ordering::Greater);
        assert_eq!(natural_cmp("a b", "ab"), Ordering::Less, "spaces count");
        assert_eq!(natural_cmp("mlx5_1", "mlx5_1"), Ordering::Equal);
    }

    #[test]
    fn lists_sort_numbers_by_value() {
        let mut m = Memory::default();
        for i in [10, 2, 1, 0] {
            m.file(&format!("p/gids/{i}"), "x");
        }
        assert_eq!(m.list("p/gids").unwrap().unwrap(), ["0", "1", "2", "10"]);
    }

    #[test]
    fn a_directory_on_disk_reads_like_sysfs() {
        let dir = std::env::temp_dir().join(format!("roce-route-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("class/net/eth0")).unwrap();
        std::fs::write(dir.join("class/net/eth0/type"), "1\n").unwrap();
        let d = Dir::checked(&dir).unwrap();
        assert_eq!(d.read("class/net/eth0/type").unwrap().as_deref(), Some("1"));
        assert_eq!(d.read("class/net/eth0/type/x").unwrap(), None, "ENOTDIR is no value");
        assert_eq!(d.list("class/net").unwrap().unwrap(), ["eth0"]);
        let e = Dir::checked(&dir.join("class/net/eth0/type")).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
        let e = Dir::checked(&dir.join("class")).unwrap_err();
        assert!(e.contains("not a copy of sysfs"), "{e}");
        let e = Dir::checked(&dir.join("nope")).unwrap_err();
        assert!(e.contains("no such directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
