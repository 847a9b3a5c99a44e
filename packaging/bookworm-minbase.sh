#!/bin/bash
# Prints the path of a Debian 12 minbase root as a tarball (debootstrap --variant=minbase),
# made once and cached in ${XDG_CACHE_HOME:-~/.cache}/symdex-package: the clean system the
# package test installs the .deb into and the container image is built on (no registry pull).
# Exit: 0 printed, 1 debootstrap failed (its log's last lines on stderr).
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/symdex-package
tar=$cache/bookworm-minbase.tar
mkdir -p "$cache"
# One maker at a time (the package test, the image and the tracers' root may ask at once).
exec 9>"$cache/.minbase.lock"
flock 9
if [ ! -s "$tar" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  debootstrap --variant=minbase bookworm "$work/root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  tar -C "$work/root" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
fi
echo "$tar"
