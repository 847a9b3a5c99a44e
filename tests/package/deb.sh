#!/usr/bin/env bash
# The Debian package. Builds it (CPack, from the default build), checks it with lintian (no
# error, no warning), installs it into a clean Debian 12 chroot (packaging/bookworm-minbase.sh)
# with apt resolving its dependencies, and runs the installed programs there: --version, man
# pages, an index of a small sysroot and a query on it.
#   tests/package/deb.sh BUILD_DIR
# Exit: 0 pass, 1 fail, 77 skip (not root, or no debootstrap/lintian).
set -euo pipefail
BUILD=$(realpath "${1:-build}")
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (chroot, mounts)"
command -v lintian >/dev/null || skip "no lintian (scripts/setup-deps.sh installs it)"
command -v debootstrap >/dev/null || skip "no debootstrap (scripts/setup-deps.sh installs it)"
# shellcheck source=../../packaging/minbase-root.sh
. "$(dirname "$0")/../../packaging/minbase-root.sh"
work=$(mktemp -d)
trap 'unmake_root; rm -rf "$work"' EXIT

echo "== cpack"
(cd "$BUILD" && cpack -G DEB >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$BUILD"/symdex_*.deb | tail -1)
echo "package: $deb ($(du -k "$deb" | cut -f1) KiB)"
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$deb" | awk '{print $6}' | grep -v '/$'

echo "== lintian"
lintian --tag-display-limit 0 --suppress-tags-from-file /dev/null "$deb" >"$work/lintian.log" 2>&1 || true
cat "$work/lintian.log"
if grep -qE '^(E|W):' "$work/lintian.log"; then
  echo "FAIL: lintian reports errors or warnings"
  exit 1
fi

echo "== a clean Debian 12 chroot"
make_root "$work/root"
cp "$deb" "$work/root/tmp/"
install_in_root "/tmp/$(basename "$deb")"

fail=0
check() {  # check WHAT COMMAND...
  local what=$1
  shift
  if out=$(in_root "$@" 2>&1); then echo "ok    $what"; else echo "FAIL  $what: $out"; fail=1; fi
}
check "symdex --version" sh -c 'symdex --version | grep -q "symdex 0.1.0 (index schema"'
check "symdexd --version" sh -c 'symdexd --version | grep -q "symdexd 0.1.0 (index schema"'
check "the group symdex (postinst, sysusers.d)" getent group symdex
check "man pages" sh -c 'test -s /usr/share/man/man1/symdex.1.gz && test -s /usr/share/man/man8/symdexd.8.gz'
check "bash completion" test -s /usr/share/bash-completion/completions/symdex
check "systemd unit names the installed symdexd" \
  sh -c 'grep -q "^ExecStart=/usr/bin/symdexd " /lib/systemd/system/symdexd.service /usr/lib/systemd/system/symdexd.service 2>/dev/null'
check "configuration" test -s /etc/symdex/symdexd.conf
# A small live sysroot: two name_show copies, one module.
in_root sh -c 'mkdir -p /tmp/sr/proc/sys/kernel /tmp/sr/sys/kernel &&
  printf "ffffffff81000000 T _text\nffffffff81000100 t name_show\nffffffff81000200 t name_show\nffffffff81000300 T _etext\nffffffffc0000000 t name_show\t[pnp]\n" >/tmp/sr/proc/kallsyms &&
  printf "pnp 16384 0 - Live 0xffffffffc0000000\n" >/tmp/sr/proc/modules && echo 6.1.0-test >/tmp/sr/proc/sys/kernel/osrelease &&
  echo 1 >/tmp/sr/proc/sys/kernel/kptr_restrict'
check "symdex index of a sysroot (the installed worker and libraries)" \
  symdex --db /tmp/i.db index -q --sysroot /tmp/sr --no-debuginfod
check "symdex which name_show: 3 instances" sh -c 'symdex --db /tmp/i.db --json which name_show | grep -q "\"count\": 3"'
check "symdex decode" sh -c 'printf " name_show+0x4/0x100 [pnp]\n" | symdex --db /tmp/i.db decode --frames-only | grep -q "{"'
[ $fail = 0 ] && echo "package PASSED"
exit $fail
