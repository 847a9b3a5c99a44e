#!/bin/bash
# The symdexd container image, built from this repository with buildah and nothing pulled from a
# registry: a Debian 12 minbase root (debootstrap, packaging/bookworm-minbase.sh), the symdex
# .deb of BUILD_DIR installed into it by apt (its libraries from Debian's archive, as any
# installation of the package), CA certificates for https debuginfod servers, and a user 10001
# (symdexd), the uid the Kubernetes manifests run it as. symdexd is the entry point; its
# arguments are the container's command (default: --config /etc/symdex/symdexd.conf).
#   deploy/image/build.sh BUILD_DIR [IMAGE]     IMAGE default: localhost/symdex:VERSION, also :latest
#   deploy/image/build.sh --archive FILE BUILD_DIR   also writes it as an OCI archive (kind load, skopeo)
# Needs root (chroot), debootstrap, buildah. Prints the image's name last.
# Exit: 0 built, 1 failed, 2 usage.
set -euo pipefail
archive=""
if [ "${1:-}" = "--archive" ]; then
  archive=$(realpath -m "${2:?--archive FILE}")
  shift 2
fi
[ $# -ge 1 ] || { echo "usage: $0 [--archive FILE] BUILD_DIR [IMAGE]" >&2; exit 2; }
BUILD=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
version=$("$BUILD/bin/symdexd" --version | awk '{print $2}')
image=${2:-localhost/symdex:$version}

# shellcheck source=../../packaging/minbase-root.sh
. "$here/../../packaging/minbase-root.sh"
work=$(mktemp -d)
root=$work/root
trap 'unmake_root; rm -rf "$work"' EXIT

echo "== the package"
(cd "$BUILD" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$BUILD"/symdex_"$version"_*.deb | tail -1)
echo "$deb"

echo "== the root: Debian 12 minbase + the package"
make_root "$root"
cp "$deb" "$root/tmp/"
install_in_root "/tmp/$(basename "$deb")" ca-certificates
in_root groupadd --gid 10001 symdexd
in_root useradd --uid 10001 --gid 10001 --groups symdex --home-dir /var/lib/symdex --no-create-home \
  --shell /usr/sbin/nologin symdexd
install -d -o 10001 -g 10001 "$root/var/lib/symdex" "$root/var/cache/symdex" "$root/run/symdex"
unmake_root
# What a running container does not need: apt's lists and caches, the package file, logs.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/tmp/* "$root"/var/log/apt "$root"/var/log/dpkg.log "$root/etc/resolv.conf"
: >"$root/etc/resolv.conf"
tar -C "$root" --numeric-owner -cf "$work/root.tar" .
echo "root: $(du -sm "$root" | cut -f1) MB"

echo "== buildah"
ctr=$(buildah from scratch)
buildah add --quiet "$ctr" "$work/root.tar" / >/dev/null
buildah config \
  --entrypoint '["/usr/bin/symdexd"]' --cmd '["--config", "/etc/symdex/symdexd.conf"]' \
  --user 10001:10001 --workingdir /var/lib/symdex \
  --port 7070 --port 9464 \
  --env DEBUGINFOD_CACHE_PATH=/var/cache/symdex/debuginfod \
  --label org.opencontainers.image.title=symdexd \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label org.opencontainers.image.description="symdex: which copy of a duplicated kernel function name is which" \
  "$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
case "$image" in *:"$version") buildah tag "$image" "${image%:*}:latest" ;; esac
if [ -n "$archive" ]; then
  rm -f "$archive"
  buildah push --quiet "$image" "oci-archive:$archive:$image"
  echo "archive: $archive"
fi
echo "$image"
