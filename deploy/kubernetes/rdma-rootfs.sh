#!/usr/bin/env bash
# The root file system of the RDMA image (Containerfile.rdma): the
# dynamically linked roce-route and the rdma-core user space that `probe
# --rdma` and `probe --listen` load (librdmacm, libibverbs, the verbs
# providers and their driver files), each with the shared libraries it
# needs, copied from this machine. The DaemonSet's image is the static
# binary alone, which cannot load them.
#
#   deploy/kubernetes/rdma-rootfs.sh DIR [BINARY]   (BINARY: target/release/roce-route)
#   podman build -f deploy/kubernetes/Containerfile.rdma -t roce-route-rdma:0.1.0 DIR
#
# Needs rdma-core's libraries here (Debian: librdmacm1 ibverbs-providers).
set -euo pipefail
root=${1:?usage: rdma-rootfs.sh DIR [BINARY]}
bin=${2:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/roce-route}
[[ -x $bin ]] || { echo "rdma-rootfs.sh: no binary at $bin: cargo build --release --locked" >&2; exit 1; }
libdir=/usr/lib/x86_64-linux-gnu
for f in "$libdir/librdmacm.so.1" "$libdir/libibverbs.so.1" "$libdir/libibverbs"; do
    [[ -e $f ]] || { echo "rdma-rootfs.sh: $f is missing: apt-get install librdmacm1 ibverbs-providers" >&2; exit 1; }
done
mkdir -p "$root/usr/sbin" "$root/etc/libibverbs.d" "$root$libdir/libibverbs"
cp "$bin" "$root/usr/sbin/roce-route"
cp /etc/libibverbs.d/*.driver "$root/etc/libibverbs.d/"
objects=("$bin" "$libdir/librdmacm.so.1" "$libdir/libibverbs.so.1" "$libdir"/libibverbs/*.so)
# Every object and the shared libraries ldd resolves for it, at the path
# the dynamic loader looks for them (symbolic links followed).
{
    printf '%s\n' "${objects[@]:1}"
    for o in "${objects[@]}"; do ldd "$o" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'; done
} | sort -u | while read -r f; do
    mkdir -p "$root$(dirname "$f")"
    cp -L "$f" "$root$f"
done
