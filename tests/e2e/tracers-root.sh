#!/bin/bash
# Prints the path of a Debian 12 root for the tracer guests (tests/e2e/qemu_tracers.py), as a
# tarball made once and cached beside the kernel corpus: Debian 12 minbase
# (packaging/bookworm-minbase.sh) with the tracers as Debian packages them — linux-perf
# (perf probe, perf stat), bpftrace, and libbpf's library for the loader tests/e2e/qemu_tracers.py
# builds — of the architecture ARCH (amd64, the default).
# Exit: 0 printed, 1 apt failed (its log's last lines on stderr), 2 usage.
set -euo pipefail
arch=${1:-amd64}
[ "$arch" = amd64 ] || { echo "tracers-root.sh: amd64 only so far, not '$arch'" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
cache=${SYMDEX_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus}
PACKAGES=(linux-perf bpftrace libbpf1)
# Named by its package list: another list is another root.
tar=$cache/tracers-root-bookworm-$arch-$(echo "${PACKAGES[*]}" | sha256sum | cut -c1-12).tar
mkdir -p "$cache"
exec 9>"$cache/.tracers-root.lock"
flock 9
if [ ! -s "$tar" ]; then
  # shellcheck source=../../packaging/minbase-root.sh
  . "$here/../../packaging/minbase-root.sh"
  work=$(mktemp -d)
  root=$work/root
  trap 'unmake_root; rm -rf "$work"' EXIT
  make_root "$root"
  install_in_root "${PACKAGES[@]}" >&2
  unmake_root
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
  : >"$root/etc/resolv.conf"
  mkdir -p "$cache"
  tar -C "$root" --numeric-owner -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
fi
echo "$tar"
