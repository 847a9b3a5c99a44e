# shellcheck shell=bash
# The kernels the benchmarks run over, by name (sourced, not run):
#   debian-6.1-amd64   Debian 12's cloud kernel (gcc 12, DWARF 5)
#   debian-6.1-arm64   the same release for arm64
#   debian-6.12-amd64  Debian 12's 6.12 cloud kernel (__pfx_ padding, IBT, .ko.xz modules)
#   clang-6.1-amd64    linux-source-6.1 built with LLVM=1 (clang's DWARF 5; tests/corpus/build-clang-kernel.sh)
#   zlib-6.1-amd64     debian-6.1-amd64 with vmlinux's debug sections compressed by objcopy (zlib)
#   zstd-6.1-amd64     the same with zstd
#   debian-6.12-arm64  Debian 12's 6.12 cloud kernel for arm64 (CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS)
#   debian-R-A-F       Debian's other flavours of release R (6.1, 6.12) for A (amd64, arm64): F is
#                      generic (what most non-cloud machines run: 6.1 amd64 has 4,022 modules and
#                      5.4 GB of debug files), rt (PREEMPT_RT), or 16k (arm64 6.12, 16 KiB pages).
#                      Several GB each: bench runs only (tests/bench/kernel_matrix.sh --kernels).
#   double-amd64       debian-6.1-amd64 with Debian 6.12's modules beside its own (renamed so they
#                      load as other modules: tests/bench/double_kernel.py): twice the modules and
#                      their debug files, for what an index run holds as the kernel grows
# `kernel K` fetches (or builds) it once into $CACHE and sets KREL, DBG (DBG/usr/lib/debug is the
# debug tree), IMG, MAP, VML, MODS, ARCH, BOOTENV (what tests/e2e/qemu_kprobes.sh needs to boot
# it; "none": it does not boot), PEER_VML / PEER_NOTE (the file llvm-symbolizer-14 reads).
# Needs: root (the repository), work (a scratch directory), CACHE, log.
# kernel K -> KREL DBG (the debug root: DBG/usr/lib/debug) IMG MAP VML MODS ARCH BOOTENV
fetch() {  # fetch ARCH META MODE
  SYMDEX_KERNEL_ARCH=$1 SYMDEX_KERNEL_META=$2 "$root/tests/corpus/fetch-debian-kernel.sh" "$3"
}
kernel() {
  local k=$1 base
  ARCH=x86_64 BOOTENV=""
  case $k in
    debian-6.1-amd64|zlib-6.1-amd64|zstd-6.1-amd64)
      eval "$(fetch amd64 linux-image-cloud-amd64 dbg)"; DBG=$ROOT
      eval "$(fetch amd64 linux-image-cloud-amd64 image)"; IMG=$ROOT ;;
    debian-6.1-arm64)
      eval "$(fetch arm64 linux-image-cloud-arm64 dbg)"; DBG=$ROOT
      eval "$(fetch arm64 linux-image-cloud-arm64 image)"; IMG=$ROOT
      ARCH=arm64 ;;
    debian-6.12-amd64)
      eval "$(fetch amd64 linux-image-6.12-cloud-amd64 dbg)"; DBG=$ROOT
      eval "$(fetch amd64 linux-image-6.12-cloud-amd64 image)"; IMG=$ROOT
      BOOTENV="SYMDEX_KERNEL_META=linux-image-6.12-cloud-amd64" ;;
    debian-6.12-arm64)
      eval "$(fetch arm64 linux-image-6.12-cloud-arm64 dbg)"; DBG=$ROOT
      eval "$(fetch arm64 linux-image-6.12-cloud-arm64 image)"; IMG=$ROOT
      ARCH=arm64 BOOTENV="SYMDEX_KERNEL_META=linux-image-6.12-cloud-arm64" ;;
    debian-6.1-amd64-*|debian-6.1-arm64-*|debian-6.12-amd64-*|debian-6.12-arm64-*)
      # Debian's metapackages: linux-image-[6.12-][FLAVOUR-]ARCH, the generic flavour unnamed,
      # 16k after the architecture (linux-image-6.12-arm64-16k).
      local rel=${k#debian-} flav=${k##*-} a meta
      a=${rel#*-}; a=${a%%-*}; rel=${rel%%-*}
      local pre=""; [ "$rel" = 6.12 ] && pre="6.12-"
      case $flav in
        generic) meta=linux-image-$pre$a ;;
        rt) meta=linux-image-${pre}rt-$a ;;
        16k) meta=linux-image-$pre$a-16k ;;
        *) echo "kernel_matrix: unknown flavour $flav in $k" >&2; exit 2 ;;
      esac
      eval "$(fetch "$a" "$meta" dbg)"; DBG=$ROOT
      eval "$(fetch "$a" "$meta" image)"; IMG=$ROOT
      [ "$a" = arm64 ] && ARCH=arm64
      BOOTENV=none ;;
    double-amd64)
      eval "$(fetch amd64 linux-image-6.12-cloud-amd64 dbg)"; local dbg2=$ROOT
      eval "$(fetch amd64 linux-image-6.12-cloud-amd64 image)"; local img2=$ROOT krel2=$KREL
      eval "$(fetch amd64 linux-image-cloud-amd64 dbg)"; DBG=$ROOT
      eval "$(fetch amd64 linux-image-cloud-amd64 image)"; IMG=$ROOT
      BOOTENV=none ;;
    clang-6.1-amd64)
      eval "$("$root/tests/corpus/build-clang-kernel.sh")"
      DBG=$DBG_ROOT IMG=$IMAGE_ROOT BOOTENV="SYMDEX_KERNEL_BUILD=clang" ;;
    *) echo "kernel_matrix: unknown kernel $k" >&2; exit 2 ;;
  esac
  MAP=$DBG/usr/lib/debug/boot/System.map-$KREL
  VML=$DBG/usr/lib/debug/boot/vmlinux-$KREL
  MODS=$IMG/lib/modules/$KREL
  case $k in
    zlib-*|zstd-*)
      # A debug tree whose vmlinux is the compressed copy; the modules' debug files as they are.
      local how=${k%%-*} packed=$CACHE/compressed/vmlinux-$KREL-${k%%-*}
      if [ ! -s "$packed" ]; then
        mkdir -p "$CACHE/compressed"
        log "compressing $(basename "$VML") with $how"
        objcopy --compress-debug-sections="$how" "$VML" "$packed.tmp" && mv "$packed.tmp" "$packed"
      fi
      base=$work/dbg-$how
      rm -rf "$base" && mkdir -p "$base/usr/lib/debug/boot" "$base/usr/lib/debug/lib"
      ln -s "$packed" "$base/usr/lib/debug/boot/vmlinux-$KREL"
      cp "$MAP" "$base/usr/lib/debug/boot/"
      ln -s "$DBG/usr/lib/debug/lib/modules" "$base/usr/lib/debug/lib/modules"
      PLAIN=$VML DBG=$base VML=$packed BOOTENV=none ;;
  esac
  if [ "$k" = double-amd64 ]; then
    # Built once into the cache: the first release's module tree (symlinks) plus the second's
    # modules under 6.12/; a debug root with the first's vmlinux and both releases' module debug
    # files (the second's found by build-ID under any release directory).
    base=$CACHE/double-$KREL+$krel2
    if [ ! -e "$base/done" ]; then
      log "making the double kernel in $base"
      rm -rf "$base" && mkdir -p "$base/lib/modules/$KREL" "$base/usr/lib/debug/lib/modules"
      cp -rs "$MODS/kernel" "$base/lib/modules/$KREL/kernel"
      python3 "$root/tests/bench/double_kernel.py" "$img2/lib/modules/$krel2/kernel" \
        "$base/lib/modules/$KREL/6.12" "$KREL" >/dev/null
      ln -s "$DBG/usr/lib/debug/boot" "$base/usr/lib/debug/boot"
      ln -s "$DBG/usr/lib/debug/lib/modules/$KREL" "$base/usr/lib/debug/lib/modules/$KREL"
      ln -s "$dbg2/usr/lib/debug/lib/modules/$krel2" "$base/usr/lib/debug/lib/modules/$krel2"
      touch "$base/done"
    fi
    DBG=$base IMG=$base MODS=$base/lib/modules/$KREL
  fi
  # The peer reads the same file, except zstd sections, which llvm-symbolizer-14 cannot
  # decompress ("unsupported compression type"): it reads the plain file there, whose answers the
  # compressed copy must give.
  PEER_VML=$VML PEER_NOTE=""
  case $k in zstd-*) PEER_VML=$PLAIN PEER_NOTE=" (llvm-symbolizer-14 reads no zstd: it reads the plain file)" ;; esac
}

