//! `parse` one file, or `parse_many` merged into one config: each file's
//! TOML read once, the one `[defaults]` among them found, then each file
//! checked with those defaults and the files checked against each other.

use std::collections::BTreeMap;

use super::check::FileChecker;
use super::error::loc_of;
use super::raw::RawConfig;
use super::{Config, ConfigError, Defaults, Interface, Loc};
use crate::reconcile::tables::assign_tables;

/// Parse and validate `text`; `file` is the path shown in messages.
pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
    let cx = FileChecker { file, text };
    let raw = cx.read()?;
    let defaults = cx.defaults(raw.defaults.as_ref())?;
    checked(&cx, raw, defaults)
}

/// Several files merged into one config, in the order given (a directory's
/// `*.toml` in name order, say): their interfaces together; `[defaults]`
/// in at most one of them, applying to all; an interface, an explicit
/// table or a listed address in two files is an error naming both places.
pub fn parse_many(inputs: &[(String, String)]) -> Result<Config, ConfigError> {
    if let [(file, text)] = inputs {
        return parse(file, text);
    }
    let (read, defaults) = read_all(inputs)?;
    let mut merged: Option<Config> = None;
    for (cx, raw) in read {
        let cfg = checked(&cx, raw, defaults.clone())?;
        match merged.as_mut() {
            Some(all) => merge_into(all, cfg)?,
            None => merged = Some(cfg),
        }
    }
    let mut cfg =
        merged.ok_or_else(|| ConfigError::at("(no file)", None, "no config file given", "name one"))?;
    cfg.file = cfg.files.join(" + ");
    provisional_tables(&mut cfg)?;
    Ok(cfg)
}

/// Every file's TOML, read once, and the `[defaults]` that apply to all:
/// those of the one file that has them, or the built-in ones.
fn read_all(
    inputs: &[(String, String)],
) -> Result<(Vec<(FileChecker<'_>, RawConfig)>, Defaults), ConfigError> {
    let mut read = Vec::with_capacity(inputs.len());
    let mut with_defaults: Option<(&str, Defaults)> = None;
    for (file, text) in inputs {
        let cx = FileChecker { file, text };
        let raw = cx.read()?;
        if raw.defaults.is_some() {
            let defaults = cx.defaults(raw.defaults.as_ref())?;
            if let Some((first, _)) = &with_defaults {
                return Err(ConfigError::at(
                    file,
                    text.find("[defaults]").map(|at| loc_of(text, at)),
                    format!("[defaults] is also in {first}"),
                    "[defaults] applies to every file: keep it in one of them",
                ));
            }
            with_defaults = Some((file, defaults));
        }
        read.push((cx, raw));
    }
    Ok((read, with_defaults.map(|(_, d)| d).unwrap_or_default()))
}

/// One file checked with `defaults`, its tables given provisionally.
fn checked(cx: &FileChecker<'_>, raw: RawConfig, defaults: Defaults) -> Result<Config, ConfigError> {
    let mut cfg = cx.config(raw, defaults)?;
    provisional_tables(&mut cfg)?;
    Ok(cfg)
}

/// Tables before the host is read: the lowest free ones.
fn provisional_tables(cfg: &mut Config) -> Result<(), ConfigError> {
    assign_tables(cfg, &BTreeMap::new(), &|_, _| false)
}

/// `cfg`, the config of the next file, added to `all` (the earlier files'):
/// no interface named in both.
fn merge_into(all: &mut Config, cfg: Config) -> Result<(), ConfigError> {
    for iface in cfg.interfaces {
        check_across_files(&all.interfaces, &iface)?;
        if let Some(a) = all.arp_only.iter().find(|a| a.name == iface.name) {
            return Err(ConfigError::at(
                &cfg.file,
                Some(iface.loc),
                format!(
                    "interface \"{}\" is also an [[arp_only]] in an earlier file (at {})",
                    iface.name, a.loc
                ),
                "name each interface once across the files",
            ));
        }
        all.interfaces.push(iface);
    }
    for a in cfg.arp_only {
        if all.interfaces.iter().any(|i| i.name == a.name) || all.arp_only.iter().any(|b| b.name == a.name) {
            return Err(ConfigError::at(
                &cfg.file,
                Some(a.loc),
                format!("arp_only \"{}\" is also named in an earlier file", a.name),
                "name each interface once across the files",
            ));
        }
        all.arp_only.push(a);
    }
    all.files.push(cfg.file);
    Ok(())
}

/// What must hold across files (each file checked these within itself).
fn check_across_files(earlier: &[Interface], iface: &Interface) -> Result<(), ConfigError> {
    let at = |i: &Interface, loc: Loc| format!("{}:{loc}", i.file);
    if let Some(first) = earlier.iter().find(|e| e.name == iface.name) {
        return Err(ConfigError::at(
            &iface.file,
            Some(iface.loc),
            format!("interface \"{}\" is also configured in {}", iface.name, at(first, first.loc)),
            "configure each interface in one file only",
        ));
    }
    if iface.table_explicit
        && let Some(first) = earlier.iter().find(|e| e.table_explicit && e.table == iface.table)
    {
        return Err(ConfigError::at(
            &iface.file,
            Some(iface.table_loc),
            format!(
                "interface \"{}\" uses table {}, as \"{}\" does in {}",
                iface.name,
                iface.table,
                first.name,
                at(first, first.table_loc)
            ),
            "each interface needs its own table: change one, or leave `table` out",
        ));
    }
    for spec in iface.addresses.iter().flatten() {
        let listed = earlier
            .iter()
            .find_map(|e| e.addresses.iter().flatten().find(|a| a.addr == spec.addr).map(|a| (e, a)));
        if let Some((first, a)) = listed {
            return Err(ConfigError::at(
                &iface.file,
                Some(spec.loc),
                format!(
                    "address {} of interface \"{}\" is already listed for interface \"{}\" in {}",
                    spec.addr,
                    iface.name,
                    first.name,
                    at(first, a.loc)
                ),
                "each address belongs to exactly one NIC: remove one of the two",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SysctlKey;

    #[test]
    fn several_files_merge_and_name_both_places() {
        let many = |files: &[(&str, &str)]| {
            let inputs: Vec<(String, String)> =
                files.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect();
            parse_many(&inputs)
        };
        let c = many(&[
            ("a.toml", "[defaults]\narp_ignore = 2\n[[interface]]\nname = \"rail0\"\n"),
            ("b.toml", "[[interface]]\nname = \"rail1\"\n"),
        ])
        .unwrap();
        assert_eq!(c.files, ["a.toml", "b.toml"]);
        assert_eq!(c.file, "a.toml + b.toml");
        let names: Vec<(&str, &str, u32)> =
            c.interfaces.iter().map(|i| (i.name.as_str(), i.file.as_str(), i.table)).collect();
        assert_eq!(names, [("rail0", "a.toml", 100), ("rail1", "b.toml", 101)]);
        assert_eq!(
            c.interfaces[1].sysctls[&SysctlKey::ArpIgnore],
            2,
            "[defaults] of a.toml applies to b.toml"
        );
        let e = many(&[
            ("a.toml", "[[interface]]\nname = \"rail0\"\n"),
            ("b.toml", "\n[[interface]]\nname = \"rail0\"\n"),
        ])
        .unwrap_err();
        assert_eq!((e.file.as_str(), e.loc.map(|l| l.line)), ("b.toml", Some(3)));
        assert!(e.what.contains("also configured in a.toml:2:8"), "{e}");
        let e = many(&[
            ("a.toml", "[[interface]]\nname = \"rail0\"\naddresses = [\"198.51.100.10\"]\n"),
            ("b.toml", "[[interface]]\nname = \"rail1\"\naddresses = [\"198.51.100.10\"]\n"),
        ])
        .unwrap_err();
        assert!(e.what.contains("already listed for interface \"rail0\" in a.toml:3:14"), "{e}");
        let e = many(&[
            ("a.toml", "[[interface]]\nname = \"rail0\"\ntable = 7\n"),
            ("b.toml", "[[interface]]\nname = \"rail1\"\ntable = 7\n"),
        ])
        .unwrap_err();
        assert!(e.what.contains("as \"rail0\" does in a.toml:3:9"), "{e}");
        let e = many(&[
            ("a.toml", "[defaults]\n[[interface]]\nname = \"a\"\n"),
            ("b.toml", "[defaults]\n[[interface]]\nname = \"b\"\n"),
        ])
        .unwrap_err();
        assert!(e.file == "b.toml" && e.what.contains("[defaults] is also in a.toml"), "{e}");
    }
}
