#!/bin/bash
# Prints the path of a Debian 12 root for the tracer guests (tests/e2e/qemu_tracers.py), as a
# tarball made once and cached beside the kernel corpus: Debian 12 minbase
# (packaging/bookworm-minbase.sh) with the tracers as Debian packages them — linux-perf
# (perf probe, perf stat), bpftrace, and libbpf's library for the loader tests/e2e/qemu_tracers.py
# builds — of the architecture ARCH (amd64, the default, or arm64). Another architecture's root is
# made by mmdebstrap, whose maintainer scripts run under qemu-user (qemu-user-static, through
# binfmt_misc): installed here when missing (they stay out of scripts/setup-deps.sh, whose suite
# needs no foreign root), binfmt_misc mounted and the emulator enabled when they are not.
# Exit: 0 printed, 1 apt or mmdebstrap failed (its log's last lines on stderr), 2 usage.
set -euo pipefail
arch=${1:-amd64}
case $arch in amd64 | arm64) ;; *) echo "tracers-root.sh: amd64 or arm64, not '$arch'" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
cache=${SYMDEX_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus}
PACKAGES=(linux-perf bpftrace libbpf1)
# Named by its package list: another list is another root.
tar=$cache/tracers-root-bookworm-$arch-$(echo "${PACKAGES[*]}" | sha256sum | cut -c1-12).tar
mkdir -p "$cache"
exec 9>"$cache/.tracers-root.lock"
flock 9
if [ ! -s "$tar" ] && [ "$arch" != "$(dpkg --print-architecture)" ]; then
  [ -e /proc/sys/fs/binfmt_misc/status ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  if [ ! -x /usr/bin/qemu-aarch64-static ] || ! command -v mmdebstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap qemu-user-static binfmt-support >&2 ||
      { echo "tracers-root.sh: a $arch root needs mmdebstrap and qemu-user-static" >&2; exit 1; }
  fi
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mmdebstrap --variant=minbase --architectures="$arch" --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/archives/*.deb; : >"$1"/etc/resolv.conf' \
    bookworm "$work/root.tar" http://deb.debian.org/debian >"$work/mmdebstrap.log" 2>&1 ||
    { tail -30 "$work/mmdebstrap.log" >&2; exit 1; }
  mv "$work/root.tar" "$tar"
fi
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
