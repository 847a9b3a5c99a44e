#!/usr/bin/env bash
# Whole-corpus check (not run in CI): every Debian module debug file (.ko, ET_REL) of the fetched
# -dbg corpus (tests/corpus/fetch-debian-kernel.sh dbg, amd64 and arm64) indexed and mapped twice
# by symdex-debuginfo-worker — relocated and read by symdex (relocated_elf.h), and through
# libdwfl (SYMDEX_MODULES_VIA=libdwfl) — and the index rows' and the maps' digests compared
# file by file. Prints, per architecture, how many files agree, how many symdex read itself,
# and each run's CPU (user+sys) and wall time.
#   tests/bench/relocated_modules.sh WORKER [OUT_DIR]
set -euo pipefail
worker=${1:?usage: $0 path/to/symdex-debuginfo-worker [OUT_DIR]}
out=${2:-$(mktemp -d)}
corpus=${SYMDEX_CORPUS:-$HOME/.cache/symdex-corpus}
status=0
for arch in amd64 arm64; do
  dir=$corpus/linux-image-6.1.0-57-cloud-$arch-dbg_6.1.192-3/usr/lib/debug/lib/modules
  [ -d "$dir" ] || { echo "$arch: no corpus at $dir"; continue; }
  find "$dir" -name '*.ko' | sort >"$out/$arch.list"
  n=$(wc -l <"$out/$arch.list")
  for mode in print print-map; do
    for via in symdex libdwfl; do
      env=()
      [ "$via" = libdwfl ] && env=(SYMDEX_MODULES_VIA=libdwfl)
      /usr/bin/time -f "%U %S %e" -o "$out/$arch.$mode.$via.time" \
        env "${env[@]}" xargs -a "$out/$arch.list" -n 200 "$worker" "--$mode" >"$out/$arch.$mode.$via.out" || true
      read -r user sys wall <"$out/$arch.$mode.$via.time"
      printf '%s --%-9s %-7s cpu %7.1f s  wall %7.1f s\n' "$arch" "$mode" "$via" \
        "$(echo "$user + $sys" | bc)" "$wall"
    done
    # The digest and the counts, not the scanned-units count (it says which reader read).
    strip() { grep -v '^scanner declined' "$1" | sed 's/ scanned=[0-9]*$//'; }
    differ=$(diff <(strip "$out/$arch.$mode.symdex.out") <(strip "$out/$arch.$mode.libdwfl.out") | grep -c '^<' || true)
    ok=$(grep -c '^ok ' "$out/$arch.$mode.symdex.out" || true)
    echo "$arch --$mode: $n files, $ok ok, $differ differ from libdwfl's"
    [ "$differ" = 0 ] || status=1
  done
  own=$(grep -c ' scanned=[1-9][0-9]*$' "$out/$arch.print.symdex.out" || true)
  declined=$(grep -c '^scanner declined' "$out/$arch.print.symdex.out" || true)
  echo "$arch: $own of $n read by symdex; $declined left to libdwfl:"
  grep '^scanner declined' "$out/$arch.print.symdex.out" | head -20 || true
done
echo "outputs in $out"
exit $status
