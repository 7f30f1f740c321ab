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
