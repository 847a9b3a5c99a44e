#!/usr/bin/env bash
# symdex's x86-64 instruction-length decoder (ingest/x86_insn.h, what `symdex kprobe FUNC+OFFSET`
# decodes a function with) against objdump, over the whole .text of Debian's 6.1 cloud vmlinux:
# both decode it from its first byte; prints how many instruction starts each finds and how many
# are one's only (with the first few, and the function objdump puts them in).
#   tests/bench/x86_decode.sh [VMLINUX]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
if [ $# -ge 1 ]; then
  vml=$1
else
  eval "$(SYMDEX_KERNEL_ARCH=amd64 "$root/tests/corpus/fetch-debian-kernel.sh" dbg)"
  vml=$ROOT/usr/lib/debug/boot/vmlinux-$KREL
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -std=c++20 -O2 -I"$root" -I/usr/include/absl "$here/x86_decode.cc" "$root/server/ingest/x86_insn.cc" \
  -o "$work/x86_decode"
base=$(readelf -SW "$vml" | sed -n 's/.* \.text  *PROGBITS  *\([0-9a-f]*\) .*/\1/p')
objcopy -O binary --only-section=.text "$vml" "$work/text.bin"
"$work/x86_decode" "$work/text.bin" "$base" 2>"$work/err" | sort >"$work/ours"
objdump -d -w -j .text "$vml" | awk -F: '/^ *ffffffff[0-9a-f]+:\t/ {gsub(/ /, "", $1); print $1}' | sort >"$work/theirs"
ours=$(wc -l <"$work/ours") theirs=$(wc -l <"$work/theirs")
only_ours=$(comm -23 "$work/ours" "$work/theirs" | wc -l)
only_theirs=$(comm -13 "$work/ours" "$work/theirs" | wc -l)
echo "x86-64 .text of $(basename "$vml"): symdex $ours instruction starts, objdump $theirs;" \
  "symdex only $only_ours, objdump only $only_theirs; $(cat "$work/err")"
for a in $( (comm -23 "$work/ours" "$work/theirs"; comm -13 "$work/ours" "$work/theirs") | sort | head -8); do
  echo "  0x$a: $(addr2line -f -e "$vml" "0x$a" | head -1)"
done
