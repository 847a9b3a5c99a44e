# shellcheck shell=bash
# Shared preamble for the benchmark scripts (sourced, not run).
#
#   . "$here/lib.sh"; bench_corpus
#
# bench_corpus fetches (once; cached) and unpacks the Debian 12 cloud kernel's image and -dbg
# packages with tests/corpus/fetch-debian-kernel.sh and sets:
#   KREL  kernel release             DBG  the unpacked -dbg package   IMG  the unpacked image package
#   MAP   the real System.map        VML  vmlinux with DWARF          MODS lib/modules/KREL of the image
#   DEBUG_DIR  DBG/usr/lib/debug (what `symdex index --debug-dir` takes)
# bench_index DB builds the index the DWARF benchmark builds for "vmlinux + all modules":
#   System.map + every module's symbol table + the -dbg package's DWARF.
# now / median / best: timing helpers (best: the smallest).
_bench_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# shellcheck disable=SC2034  # the variables are for the scripts that source this
bench_corpus() {
  local fetch=$_bench_lib_dir/../corpus/fetch-debian-kernel.sh out
  out=$("$fetch" dbg) || return
  eval "$out"
  DBG=$ROOT
  out=$("$fetch" image) || return
  eval "$out"
  IMG=$ROOT
  MAP=$DBG/usr/lib/debug/boot/System.map-$KREL
  VML=$DBG/usr/lib/debug/boot/vmlinux-$KREL
  MODS=$IMG/lib/modules/$KREL
  DEBUG_DIR=$DBG/usr/lib/debug
}

bench_index() {  # bench_index SYMDEX DB [extra index flags...]
  local symdex=$1 db=$2
  shift 2
  "$symdex" --db "$db" index -q --json --system-map "$MAP" --modules-dir "$MODS" --debug-dir "$DEBUG_DIR" "$@"
}

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
best() { sort -n | head -1; }
