#!/usr/bin/env bash
# The symdexd container image (deploy/image/build.sh), run by podman and asked as a host daemon is:
# the Debian cloud kernel of the corpus indexed by this build, served by the image's symdexd in
# a container (as its own user, 10001, over a Unix socket in a mounted directory) and by this
# build's symdexd on the host, both on copies of that index; every question below is asked of
# both with `symdex --connect` and the outputs must be the same bytes. Also: the image carries
# the license and the package's programs, and runs as the manifests' user.
#   tests/package/image.sh BUILD_DIR
# Exit: 0 pass, 1 fail, 77 skip (not root; no podman, buildah or debootstrap; no corpus).
set -euo pipefail
BUILD=$(realpath "${1:-build}")
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (chroot, podman)"
for t in podman buildah debootstrap; do command -v $t >/dev/null || skip "no $t (scripts/setup-deps.sh installs it)"; done
eval "$("$here/../corpus/fetch-debian-kernel.sh" dbg 2>/dev/null)" || skip "no Debian kernel corpus"
DBG=$ROOT
eval "$("$here/../corpus/fetch-debian-kernel.sh" image 2>/dev/null)" || skip "no Debian kernel corpus"
IMG=$ROOT

# podman on a machine whose cgroups are v1 and whose root may not raise its hard limits (a
# container sandbox): runc with cgroupfs, and limits within the ones it has. Elsewhere the same
# flags work unchanged.
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
RUN_LIMITS=(--ulimit "nofile=4096:$(ulimit -Hn)" --ulimit nproc=16384:16384)

work=$(mktemp -d)
name=symdex-image-test-$$
cleanup() {
  "${PODMAN[@]}" rm -f "$name" >/dev/null 2>&1 || true
  [ -n "${host_pid:-}" ] && kill "$host_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== the image"
image=$("$here/../../deploy/image/build.sh" "$BUILD" | tail -1)
echo "$image"

echo "== the index (this build, the Debian kernel of the corpus)"
# Read through links in the work directory: the paths the index records are then ones the
# container can be given (the corpus may be under /root, which user 10001 cannot enter there).
chmod 755 "$work"
ln -s "$DBG" "$work/dbg"
ln -s "$IMG" "$work/img"
"$BUILD/bin/symdex" --db "$work/index.db" index -q --system-map "$work/dbg/usr/lib/debug/boot/System.map-$KREL" \
  --modules-dir "$work/img/lib/modules/$KREL" --debug-dir "$work/dbg/usr/lib/debug" --no-debuginfod --name debian \
  --kernel-config "$work/img/boot/config-$KREL"
mkdir -p "$work/host" "$work/ctr"
for d in host ctr; do cp -a "$work/index.db" "$work/index.db-addrmaps" "$work/$d/"; done
chown -R 10001:10001 "$work/ctr"

echo "== the daemons"
"$BUILD/bin/symdexd" --listen "unix:$work/host/symdex.sock" --db "$work/host/index.db" --no-index-live \
  --modules-poll 0 >"$work/host.log" 2>&1 &
host_pid=$!
# The debug files and modules the index names, where it names them (a fleet replica fetches its
# own into /var/cache/symdex).
mounts=(-v "$DBG:$work/dbg:ro" -v "$IMG:$work/img:ro")
"${PODMAN[@]}" run -d --name "$name" "${RUN_LIMITS[@]}" --network none -v "$work/ctr:/var/lib/symdex" \
  "${mounts[@]}" "$image" \
  --listen unix:/var/lib/symdex/symdex.sock --db /var/lib/symdex/index.db --no-index-live --modules-poll 0 >/dev/null
for _ in $(seq 100); do
  [ -S "$work/host/symdex.sock" ] && [ -S "$work/ctr/symdex.sock" ] && break
  sleep 0.2
done
[ -S "$work/ctr/symdex.sock" ] || { echo "FAIL: the container's symdexd did not listen"; "${PODMAN[@]}" logs "$name"; exit 1; }

fail=0
check() {  # check WHAT OUTPUT WANT: OUTPUT must hold WANT
  if [[ "$2" == *"$3"* ]]; then echo "ok    $1: $3"; else echo "FAIL  $1: wanted '$3', got '$2'"; fail=1; fi
}
in_image() { "${PODMAN[@]}" run --rm "${RUN_LIMITS[@]}" --network none --entrypoint "$1" "$image" "${@:2}" 2>&1 || true; }
check "runs as the manifests' user" "$("${PODMAN[@]}" exec "$name" id 2>&1)" "uid=10001(symdexd)"
check "the license" "$(in_image grep -m1 '^License:' /usr/share/doc/symdex/copyright)" "License: Apache-2.0"
check "symdex" "$(in_image symdex --version)" "symdex $("$BUILD/bin/symdex" --version | awk '{print $2}')"
check "the debug-file worker" "$(in_image ls -l /usr/lib/symdex/symdex-debuginfo-worker)" "rwx"

echo "== the same questions of both"
ask() {  # ask ARGS...: the container's answer must be the host daemon's, byte for byte
  local a b
  a=$("$BUILD/bin/symdex" --connect "unix:$work/host/symdex.sock" "$@" 2>&1; echo "exit $?")
  b=$("$BUILD/bin/symdex" --connect "unix:$work/ctr/symdex.sock" "$@" 2>&1; echo "exit $?")
  if [ "$a" = "$b" ]; then
    echo "same  symdex $* ($(printf '%s\n' "$a" | wc -l) lines, ${a##*exit })"
  else
    echo "DIFF  symdex $*"
    diff <(printf '%s\n' "$a") <(printf '%s\n' "$b") | head -10 || true
    fail=1
  fi
}
spec=$("$BUILD/bin/symdex" --db "$work/index.db" --json symbols --canonical |
  python3 -c 'import json,sys; print(next(s["canonical"] for s in json.load(sys.stdin)["symbols"] if s["name"]=="name_show" and "@" in s["canonical"]))')
addr=$("$BUILD/bin/symdex" --db "$work/index.db" --json which vfs_read |
  python3 -c 'import json,sys; print(hex(int(json.load(sys.stdin)["instances"][0]["address"],16)+0x10))')
ask which name_show
ask --json which name_show
ask resolve "$spec"
ask kprobe -n "$spec"
ask kprobe -n --format perf "$spec"
ask vars "$spec"
ask callers vfs_read
ask inlined cpumask_weight
ask addr "$addr"
ask --json addr "$addr"
ask lines fs/read_write.c:470
ask frames "vfs_read+0x10/0x190"
ask --json dups
ask buildid 0000000000000000000000000000000000000000
[ $fail = 0 ] && echo "image PASSED"
exit $fail
