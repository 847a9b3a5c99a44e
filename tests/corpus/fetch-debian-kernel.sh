#!/usr/bin/env bash
# Fetch and unpack the current Debian 12 cloud kernel into a cache dir outside the repo.
#
#   fetch-debian-kernel.sh image   # linux-image-<rel> : boot/System.map-<rel>, boot/vmlinuz-<rel>,
#                                  #                     lib/modules/<rel>/kernel/**.ko
#   fetch-debian-kernel.sh dbg     # linux-image-<rel>-dbg : usr/lib/debug/boot/vmlinux-<rel>,
#                                  #   usr/lib/debug/boot/System.map-<rel> (the real one),
#                                  #   usr/lib/debug/lib/modules/<rel>/kernel/**.ko
#   fetch-debian-kernel.sh busybox # busybox-static of SYMDEX_KERNEL_ARCH: bin/busybox, the
#                                  #   userland of the e2e test's initramfs (tests/e2e)
# NB: the image package's boot/System.map-<rel> is a one-line placeholder
# ("The real System.map is in the linux-image-<version>-dbg package"); image
# modules keep their symbol tables (debug info stripped), so nm works on them.
# The dbg package is ~280 MB to download and ~1.8 GB unpacked.
#
# On success prints, on stdout only (shell-quoted, usable with eval):
#   KREL=<kernel release, e.g. 6.1.0-57-cloud-amd64>   (not for busybox)
#   ROOT=<directory the package was unpacked into>
# All progress and errors go to stderr.
#
# Environment:
#   SYMDEX_CORPUS_DIR    cache dir (default ${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus)
#   SYMDEX_KERNEL_ARCH   Debian architecture of the kernel (default amd64). Another architecture's
#                        kernel (arm64) comes from the same archive once dpkg knows it: this script
#                        runs `dpkg --add-architecture ARCH && apt-get update` when it does not (as
#                        root: the packages are only downloaded and unpacked, never installed).
#   SYMDEX_KERNEL_META   metapackage to resolve (default linux-image-cloud-ARCH)
#
# Idempotent: a finished unpack is marked with .symdex-complete and reused without
# touching the network. Downloads and unpacks go to temp dirs inside the cache and
# are renamed into place, so concurrent runs do not see partial results.
#
# Exit codes: 0 ok, 1 other failure, 2 usage, 3 apt cannot find the package.
set -euo pipefail

PROG=${0##*/}
ARCH=${SYMDEX_KERNEL_ARCH:-amd64}
META=${SYMDEX_KERNEL_META:-linux-image-cloud-$ARCH}
CACHE=${SYMDEX_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus}
MARKER=.symdex-complete

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { local rc=$1; shift; log "error: $*"; exit "$rc"; }
usage() { echo "usage: $PROG image|dbg|busybox" >&2; exit 2; }

[ $# -eq 1 ] || usage
MODE=$1
case $MODE in image|dbg|busybox) ;; *) usage ;; esac

for tool in apt-cache apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || die 1 "'$tool' not found (this script needs a Debian/Ubuntu host)"
done

# --- the architecture -------------------------------------------------------
# Packages of an architecture other than dpkg's own are named PKG:ARCH.
NATIVE=$(dpkg --print-architecture)
QUAL=""
if [ "$ARCH" != "$NATIVE" ]; then
  QUAL=":$ARCH"
  if ! dpkg --print-foreign-architectures | grep -qx "$ARCH"; then
    [ "$(id -u)" -eq 0 ] || die 1 "dpkg does not know architecture $ARCH: run 'dpkg --add-architecture $ARCH && apt-get update' as root"
    log "adding architecture $ARCH to dpkg and updating apt's lists"
    dpkg --add-architecture "$ARCH"
    apt-get update -qq >&2 || die 1 "apt-get update failed after adding architecture $ARCH"
  fi
fi

# --- resolve package names -------------------------------------------------
# "apt-cache depends linux-image-cloud-amd64" prints e.g.
#   linux-image-cloud-amd64
#     Depends: linux-image-6.1.0-57-cloud-amd64
# The metapackage names the signed image; an -unsigned variant with identical
# System.map/modules exists too. Accept either, and derive the release from it.
if [ "$MODE" = busybox ]; then
  # Not a kernel package: no release; the package name carries no architecture, the cache dir does.
  KREL=""
  PKG=busybox-static
else
  deps=$(apt-cache depends "$META$QUAL" 2>/dev/null) ||
    die 3 "apt cannot find '$META' (run 'apt-get update'? is bookworm main in sources.list?)"
  IMAGE_PKG=$(printf '%s\n' "$deps" |
    sed -n 's/^ *|\{0,1\}Depends: *<\{0,1\}\(linux-image-[0-9][^ >]*\)>\{0,1\}$/\1/p' |
    sed 's/:[a-z0-9]*$//' |
    grep -E "^linux-image-[0-9].*-$ARCH(-16k)?(-unsigned)?\$" | head -n1 || true)
  [ -n "$IMAGE_PKG" ] ||
    die 3 "no 'Depends: linux-image-<ver>-...' line in 'apt-cache depends $META':
$deps"
  KREL=${IMAGE_PKG#linux-image-}
  KREL=${KREL%-unsigned}

  case $MODE in
    image) PKG=$IMAGE_PKG ;;
    dbg)   PKG=linux-image-$KREL-dbg ;;
  esac
fi

VERSION=$(apt-cache policy "$PKG$QUAL" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | head -n1)
if [ -z "$VERSION" ] || [ "$VERSION" = "(none)" ]; then
  die 3 "apt has no installable candidate for '$PKG' (release $KREL); run 'apt-get update'?"
fi

ROOT=$CACHE/${PKG}_$VERSION
[ "$MODE" = busybox ] && ROOT=$CACHE/${PKG}_${VERSION//:/%3a}_$ARCH  # no ":" in a path

emit() {
  [ -z "$KREL" ] || printf 'KREL=%q\n' "$KREL"
  printf 'ROOT=%q\n' "$ROOT"
}

if [ -f "$ROOT/$MARKER" ]; then
  log "cached: $PKG $VERSION in $ROOT"
  emit
  exit 0
fi

mkdir -p "$CACHE/debs"
TMP=$(mktemp -d "$CACHE/.tmp.$MODE.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# --- download --------------------------------------------------------------
# apt-get names the file <pkg>_<version with ':' as %3a>_<arch>.deb.
DEB=$(find "$CACHE/debs" -maxdepth 1 -name "${PKG}_*_$ARCH.deb" 2>/dev/null |
  while read -r f; do
    v=$(dpkg-deb -f "$f" Version 2>/dev/null || true)
    [ "$v" = "$VERSION" ] && { echo "$f"; break; }
  done || true)
if [ -n "$DEB" ]; then
  log "reusing $DEB"
else
  size=$(apt-cache show --no-all-versions "$PKG$QUAL=$VERSION" 2>/dev/null | sed -n 's/^Size: *//p' | head -n1)
  log "downloading $PKG=$VERSION (${size:-?} bytes) into $CACHE/debs"
  apt_opts=(-q)
  # As root, apt drops to user _apt, which cannot write into our 0700 temp dir.
  [ "$(id -u)" -eq 0 ] && apt_opts+=(-o APT::Sandbox::User=root)
  mkdir "$TMP/dl"
  if ! out=$(cd "$TMP/dl" && apt-get "${apt_opts[@]}" download "$PKG$QUAL=$VERSION" 2>&1); then
    printf '%s\n' "$out" >&2
    if printf '%s' "$out" | grep -qE 'Unable to locate|has no installation candidate|Version .* was not found'; then
      die 3 "apt cannot find $PKG=$VERSION"
    fi
    die 1 "apt-get download $PKG=$VERSION failed"
  fi
  f=$(find "$TMP/dl" -maxdepth 1 -name '*.deb' | head -n1)
  [ -n "$f" ] || die 1 "apt-get download produced no .deb for $PKG"
  DEB=$CACHE/debs/${f##*/}
  mv -f "$f" "$DEB"
fi

# --- unpack ----------------------------------------------------------------
log "unpacking ${DEB##*/}"
start=$(date +%s)
mkdir "$TMP/root"
dpkg-deb -x "$DEB" "$TMP/root" || die 1 "dpkg-deb -x $DEB failed"

case $MODE in
  image) need=("boot/System.map-$KREL" "boot/vmlinuz-$KREL" "lib/modules/$KREL/kernel") ;;
  dbg)   need=("usr/lib/debug/boot/vmlinux-$KREL" "usr/lib/debug/boot/System.map-$KREL"
               "usr/lib/debug/lib/modules/$KREL/kernel") ;;
  busybox) need=("bin/busybox") ;;
esac
for p in "${need[@]}"; do
  [ -e "$TMP/root/$p" ] || die 1 "$PKG does not contain $p"
done
if [ "$MODE" = image ] && [ "$(wc -l <"$TMP/root/boot/System.map-$KREL")" -le 1 ]; then
  # Debian ships a one-line placeholder here; the real map is in the -dbg package.
  log "note: boot/System.map-$KREL is Debian's placeholder; the real one is" \
      "usr/lib/debug/boot/System.map-$KREL from '$PROG dbg'"
fi
date -u +%FT%TZ >"$TMP/root/$MARKER"
log "unpacked in $(( $(date +%s) - start ))s"

# Atomic publish; if a concurrent run won the race, keep its result.
if ! mv -T "$TMP/root" "$ROOT" 2>/dev/null; then
  [ -f "$ROOT/$MARKER" ] || die 1 "cannot move unpacked tree to $ROOT (stale incomplete dir? remove it)"
  log "another run already published $ROOT"
fi

emit
