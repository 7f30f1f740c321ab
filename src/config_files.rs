//! Reading the config: files and directories named on the command line
//! (a directory stands for its `*.toml` files in name order, e.g.
//! `/etc/roce-route/conf.d/`), merged by `config::parse_many`.

use std::path::{Path, PathBuf};

use crate::config::{self, Config, ConfigError};
use crate::error::Error;

/// Reads and validates the config (exit 2 on any problem).
pub fn load(paths: &[PathBuf]) -> Result<Config, Error> {
    Ok(config::parse_many(&read(paths)?)?)
}

/// Every file's name (as shown) and text, in merge order: what apply
/// records for `watch`.
pub fn read(paths: &[PathBuf]) -> Result<Vec<(String, String)>, Error> {
    let mut inputs = Vec::new();
    for path in paths {
        for file in expand(path)? {
            let shown = file.display().to_string();
            let text = std::fs::read_to_string(&file)
                .map_err(|e| unreadable(&shown, format!("cannot read the config: {e}"), "check the path"))?;
            inputs.push((shown, text));
        }
    }
    Ok(inputs)
}

/// `apply --install DIR FILE`: the files the boot unit will apply once
/// FILE is installed (DIR's `*.toml` files, FILE in place of the one of
/// its name), in name order, and the file's name there. FILE's entry
/// still shows its own path, so that an error points at the file the
/// operator edits.
pub fn read_for_install(paths: &[PathBuf], dir: &Path) -> Result<(Vec<(String, String)>, String), Error> {
    let usage = |what: String| Error::Usage(format!("--install {}: {what}", dir.display()));
    let [file] = paths else {
        return Err(usage(
            "give one config file to install (the other files of the directory are applied with it)".into(),
        ));
    };
    if file.is_dir() {
        return Err(usage(format!(
            "{} is a directory; give the one config file to install there",
            file.display()
        )));
    }
    if !dir.is_dir() {
        return Err(usage(
            "not a directory; create it first (`mkdir -p`; the package makes /etc/roce-route/)".into(),
        ));
    }
    let name = match file.file_name().and_then(|n| n.to_str()) {
        Some(n) if n.ends_with(".toml") && !n.starts_with('.') => n.to_string(),
        _ => {
            return Err(usage(format!(
                "{}: the file's name must end in .toml, as the boot unit reads only those",
                file.display()
            )));
        }
    };
    let mut inputs = read(std::slice::from_ref(file))?;
    let target = dir.join(&name);
    let same = |p: &Path| std::fs::canonicalize(p).ok() == std::fs::canonicalize(file).ok();
    for other in expand(dir).unwrap_or_default() {
        if other.file_name() != target.file_name() && !same(&other) {
            inputs.extend(read(&[other])?);
        }
    }
    // Name order of the files as they will be in DIR.
    let base = |shown: &str| Path::new(shown).file_name().map(|n| n.to_os_string());
    inputs.sort_by_key(|(shown, _)| base(shown));
    Ok((inputs, target.display().to_string()))
}

/// A file as is; a directory as its `*.toml` files, in name order.
fn expand(path: &Path) -> Result<Vec<PathBuf>, Error> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let shown = path.display().to_string();
    let entries = std::fs::read_dir(path)
        .map_err(|e| unreadable(&shown, format!("cannot read the directory: {e}"), "check the path"))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(unreadable(
            &shown,
            "the directory holds no *.toml file".into(),
            "put the config in NAME.toml files there, or name the files",
        ));
    }
    Ok(files)
}

fn unreadable(shown: &str, what: String, hint: &str) -> Error {
    Error::Config(ConfigError::at(shown, None, what, hint))
}
