#!/usr/bin/env bash
# Builds the Debian package and checks it as CI does: the files it installs,
# no lintian error, and the binary runs from an unpacked scratch root.
set -euo pipefail
cd "$(dirname "$0")/.."
deb="$(scripts/build-deb.sh)"
echo "package: $deb"
listing="$(dpkg-deb -c "$deb" | awk '{print $6}')"
for want in ./usr/sbin/roce-route ./lib/systemd/system/roce-route.service \
    ./lib/systemd/system/roce-route-watch.service \
    ./usr/share/doc/roce-route/examples/90-roce-route.conf \
    ./usr/share/doc/roce-route/examples/roce-route-watch.service.d/metrics.conf \
    ./usr/share/doc/roce-route/examples/prometheus/roce-route.rules.yml \
    ./usr/share/doc/roce-route/examples/prometheus/roce-route.rules.test.yml \
    ./etc/roce-route/roce-route.toml.example ./usr/share/man/man8/roce-route.8.gz \
    ./usr/share/man/man5/roce-route.toml.5.gz \
    ./usr/share/doc/roce-route/examples/h100-8-rail.toml \
    ./usr/share/doc/roce-route/examples/conf.d/10-rails.toml \
    ./usr/share/doc/roce-route/docs/guide.md \
    ./usr/share/bash-completion/completions/roce-route \
    ./usr/share/zsh/vendor-completions/_roce-route \
    ./usr/share/fish/vendor_completions.d/roce-route.fish \
    ./usr/share/doc/roce-route/copyright; do
    grep -qxF "$want" <<<"$listing" || { echo "the package lacks $want" >&2; exit 1; }
done
# The drop-in is an example, never installed where networkd reads it.
if grep -q 'networkd.conf.d/' <<<"$(grep -v /usr/share/doc/ <<<"$listing")"; then
    echo "the package installs the networkd drop-in where it takes effect" >&2
    exit 1
fi
dpkg-deb -I "$deb" conffiles | grep -qx /etc/roce-route/roce-route.toml.example ||
    { echo "the example config is not a conffile" >&2; exit 1; }
lint="$(lintian --tag-display-limit 0 "$deb" 2>&1 | grep -v 'root privileges' || true)"
echo "${lint:-lintian: no tags}"
if grep -q '^E:' <<<"$lint"; then echo "lintian reports errors" >&2; exit 1; fi
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
dpkg-deb -x "$deb" "$scratch"
"$scratch/usr/sbin/roce-route" --version
