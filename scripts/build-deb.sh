#!/usr/bin/env bash
# Builds the Debian package: the release binary, then `cargo deb`. Prints
# the path of the .deb.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
# The pages and completions are committed in dist/generated/ (tests/docs.rs
# keeps them equal to what the binary prints), so plain `cargo deb` works
# too; this script only builds first and prints the path.
cargo deb --no-build --locked --output target/debian/ >&2
ls target/debian/roce-route_*.deb | tail -1
