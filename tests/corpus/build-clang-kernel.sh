#!/usr/bin/env bash
# Build a small x86_64 kernel with clang (LLVM=1, DWARF 5) from Debian's linux-source-6.1 and lay
# it out as Debian's packages are, so every tool that takes the Debian corpus takes it too:
#
#   IMAGE/boot/vmlinuz-KREL, IMAGE/boot/System.map-KREL, IMAGE/boot/config-KREL,
#   IMAGE/lib/modules/KREL/kernel/**.ko
#     (modules stripped of their debug info, as the image package ships them)
#   DBG/usr/lib/debug/boot/vmlinux-KREL, DBG/usr/lib/debug/boot/System.map-KREL,
#   DBG/usr/lib/debug/lib/modules/KREL/kernel/**.ko (with debug info)
#
# clang's DWARF 5 is what the kernels of Android, ChromeOS and the distributions that build with
# LLVM carry: DW_FORM_strx*/addrx*/rnglistx/loclistx, .debug_str_offsets, .debug_addr,
# .debug_rnglists. The config is the smallest that the e2e guest (tests/e2e) boots and probes:
# tinyconfig plus serial console, initramfs, proc/sys/debugfs/tracefs, modules, kprobes, ftrace,
# sysrq, the ORC unwinder and KASLR (as distributions build: exact stack traces, a slid _text), and
# the modules the e2e test loads (uio, mei, virtio_pci, nfnetlink_log, dax).
#
# On success prints, on stdout only (shell-quoted, usable with eval):
#   KREL=<kernel release>  IMAGE_ROOT=<dir>  DBG_ROOT=<dir>
# Progress goes to stderr. The build took 675-759 s on 2 cores (clang 14) the first time, then is reused
# (a finished build is marked with .symdex-complete). Not part of CI: tests/bench/kernel_matrix.sh
# and tests/e2e/qemu_kprobes.sh (SYMDEX_KERNEL_BUILD=clang) call it.
#
# Environment: SYMDEX_CORPUS_DIR (cache, default ~/.cache/symdex-corpus), SYMDEX_JOBS (make -j).
# Needs (installed when running as root): linux-source-6.1 (downloaded, not installed), clang,
# lld, llvm, flex, bison, bc, libelf-dev, libssl-dev.
# Exit codes: 0 ok, 1 failure, 3 linux-source-6.1 not found by apt.
set -euo pipefail

PROG=${0##*/}
CACHE=${SYMDEX_CORPUS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/symdex-corpus}
OUT=$CACHE/clang-6.1-amd64
JOBS=${SYMDEX_JOBS:-$(nproc)}
MARKER=.symdex-complete
log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { local rc=$1; shift; log "error: $*"; exit "$rc"; }

report() {
  printf 'KREL=%q IMAGE_ROOT=%q DBG_ROOT=%q\n' "$(cat "$OUT/krel")" "$OUT/image" "$OUT/dbg"
}
if [ -f "$OUT/$MARKER" ]; then report; exit 0; fi

need=()
for t in clang ld.lld llvm-ar flex bison bc; do command -v "$t" >/dev/null || need+=("$t"); done
[ -f /usr/include/libelf.h ] || need+=(libelf-dev)
[ -f /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
if [ ${#need[@]} -gt 0 ]; then
  pkgs=()
  for t in "${need[@]}"; do
    case $t in ld.lld) pkgs+=(lld) ;; llvm-ar) pkgs+=(llvm) ;; *) pkgs+=("$t") ;; esac
  done
  [ "$(id -u)" = 0 ] || die 1 "missing ${need[*]} (apt-get install ${pkgs[*]})"
  log "installing ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${pkgs[@]}" >&2
fi

mkdir -p "$CACHE"
work=$CACHE/clang-6.1-build
mkdir -p "$work"
src=$work/src
if [ ! -f "$src/Makefile" ]; then
  log "fetching linux-source-6.1"
  (cd "$work" && rm -f linux-source-6.1_*.deb && apt-get download -q linux-source-6.1 >&2) ||
    die 3 "apt-get download linux-source-6.1 failed"
  rm -rf "$work/deb" "$src" && mkdir -p "$work/deb"
  dpkg-deb -x "$work"/linux-source-6.1_*.deb "$work/deb"
  tarball=$(ls "$work"/deb/usr/src/linux-source-6.1.tar.xz)
  log "unpacking $(basename "$tarball")"
  mkdir -p "$src.tmp" && tar -xJf "$tarball" -C "$src.tmp" --strip-components=1
  mv "$src.tmp" "$src"
  rm -rf "$work/deb" "$work"/linux-source-6.1_*.deb
fi

mk() { make -C "$src" LLVM=1 -j"$JOBS" "$@" >&2; }
log "configuring (tinyconfig + the e2e guest's needs, DWARF 5)"
mk tinyconfig
frag=$src/symdex.config
cat >"$frag" <<'EOF'
CONFIG_64BIT=y
CONFIG_LOCALVERSION="-symdex-clang"
CONFIG_SMP=y
CONFIG_PRINTK=y
CONFIG_BUG=y
CONFIG_TTY=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CONFIG_BLK_DEV_INITRD=y
CONFIG_BINFMT_ELF=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_PROC_FS=y
CONFIG_SYSFS=y
CONFIG_DEVTMPFS=y
CONFIG_TMPFS=y
CONFIG_DEBUG_FS=y
CONFIG_MULTIUSER=y
CONFIG_FUTEX=y
CONFIG_EPOLL=y
CONFIG_MODULES=y
CONFIG_MODULE_UNLOAD=y
CONFIG_KALLSYMS=y
CONFIG_KALLSYMS_ALL=y
CONFIG_KPROBES=y
CONFIG_FTRACE=y
CONFIG_FUNCTION_TRACER=y
CONFIG_DYNAMIC_FTRACE=y
CONFIG_KPROBE_EVENTS=y
CONFIG_STACKTRACE=y
CONFIG_MAGIC_SYSRQ=y
CONFIG_DEBUG_KERNEL=y
CONFIG_DEBUG_INFO=y
CONFIG_DEBUG_INFO_DWARF5=y
CONFIG_DEBUG_INFO_NONE=n
CONFIG_PCI=y
CONFIG_VIRTIO_MENU=y
CONFIG_VIRTIO_PCI=m
CONFIG_VIRTIO_CONSOLE=m
CONFIG_UIO=m
CONFIG_INTEL_MEI=m
CONFIG_INTEL_MEI_ME=m
CONFIG_DAX=m
CONFIG_NET=y
CONFIG_INET=y
CONFIG_NETFILTER=y
CONFIG_NETFILTER_ADVANCED=y
CONFIG_NETFILTER_NETLINK_LOG=m
CONFIG_HYPERVISOR_GUEST=y
CONFIG_PARAVIRT=y
CONFIG_KVM_GUEST=y
CONFIG_RD_GZIP=y
CONFIG_JUMP_LABEL=y
CONFIG_MODULE_COMPRESS_NONE=y
CONFIG_UNWINDER_ORC=y
CONFIG_RELOCATABLE=y
CONFIG_RANDOMIZE_BASE=y
EOF
(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$frag" >&2)
mk olddefconfig
for opt in DEBUG_INFO_DWARF5 KPROBES KPROBE_EVENTS DYNAMIC_FTRACE MODULES MAGIC_SYSRQ VIRTIO_PCI \
  UIO NETFILTER_NETLINK_LOG SERIAL_8250_CONSOLE UNWINDER_ORC RANDOMIZE_BASE; do
  grep -qE "^CONFIG_$opt=[ym]" "$src/.config" || die 1 "CONFIG_$opt did not survive olddefconfig"
done

log "building with $(clang --version | head -1) on $JOBS jobs"
t0=$(date +%s)
mk bzImage modules
log "built in $(($(date +%s) - t0)) s"
krel=$(make -C "$src" -s LLVM=1 kernelrelease)

stage=$OUT.tmp
rm -rf "$stage" && mkdir -p "$stage/image/boot" "$stage/dbg/usr/lib/debug/boot"
cp "$src/arch/x86/boot/bzImage" "$stage/image/boot/vmlinuz-$krel"
cp "$src/System.map" "$stage/image/boot/System.map-$krel"
cp "$src/.config" "$stage/image/boot/config-$krel"
cp "$src/System.map" "$stage/dbg/usr/lib/debug/boot/System.map-$krel"
cp "$src/vmlinux" "$stage/dbg/usr/lib/debug/boot/vmlinux-$krel"
make -C "$src" LLVM=1 -s INSTALL_MOD_PATH="$stage/image" INSTALL_MOD_STRIP=--strip-debug modules_install >&2
make -C "$src" LLVM=1 -s INSTALL_MOD_PATH="$stage/dbg/usr/lib/debug" modules_install >&2
rm -f "$stage"/image/lib/modules/"$krel"/{build,source} "$stage"/dbg/usr/lib/debug/lib/modules/"$krel"/{build,source}
echo "$krel" >"$stage/krel"
cp "$src/.config" "$stage/config"
touch "$stage/$MARKER"
rm -rf "$OUT" && mv "$stage" "$OUT"
report
