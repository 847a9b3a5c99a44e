# A clean Debian 12 root made from the cached minbase (packaging/bookworm-minbase.sh), for the
# package test (tests/package/deb.sh) and the container image (deploy/image/build.sh), which
# source this file. Needs root. Each function works on the root at $MINBASE_ROOT.
#   make_root DIR            the minbase unpacked at DIR, with this host's resolv.conf and /proc
#   in_root CMD...           CMD run in the root, in a clean environment
#   install_in_root PKG...   apt-get install --no-install-recommends (names, or /tmp/FILE.deb in the
#                            root); on failure the end of apt's log and exit 1
#   unmake_root              /proc unmounted (call it from the script's EXIT trap)
make_root() {
  MINBASE_ROOT=$1
  local base
  base=$("$(dirname "${BASH_SOURCE[0]}")/bookworm-minbase.sh")
  mkdir -p "$MINBASE_ROOT"
  tar -C "$MINBASE_ROOT" -xf "$base"
  cp /etc/resolv.conf "$MINBASE_ROOT/etc/resolv.conf"
  mount -t proc proc "$MINBASE_ROOT/proc"
}
in_root() { chroot "$MINBASE_ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
install_in_root() {
  local log=$MINBASE_ROOT/../apt.log
  { in_root apt-get update -q && in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends "$@"; } >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  echo "installed with $(grep -c '^Setting up' "$log") packages"
}
unmake_root() { [ -n "${MINBASE_ROOT:-}" ] && umount "$MINBASE_ROOT/proc" 2>/dev/null || true; }
