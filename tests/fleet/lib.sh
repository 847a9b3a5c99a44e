# Shared by the fleet shell tests: a miniature kernel a real debuginfod can serve by build-ID.
# shellcheck shell=bash

# mini_kernel DIR NAME [SEED]: compiles DIR/NAME (an ET_EXEC with _text first and _etext/_end
# last, as a kernel's linker script places them: an index without them is refused as truncated;
# functions alpha, beta, entry). A different SEED gives a different build-ID. Prints nothing.
mini_kernel() {
  local dir=$1 name=$2 seed=${3:-1} b
  b=$(mktemp -d)
  cat >"$b/k.c" <<C
__attribute__((noinline)) int alpha(int x) { return x * 3 + $seed; }
__attribute__((noinline)) int beta(int x) { return alpha(x) ^ 5; }
int entry(int x) { return beta(x) + alpha(x); }
C
  printf '.section .text,"ax",@progbits\n.globl _text\n_text:\n.section .note.GNU-stack,"",@progbits\n' >"$b/start.s"
  printf '.section .text,"ax",@progbits\n.globl _etext\n_etext:\n.section .bss\n.globl _end\n_end:\n.section .note.GNU-stack,"",@progbits\n' >"$b/end.s"
  gcc -g -O1 -c "$b/k.c" -o "$b/k.o" && gcc -c "$b/start.s" -o "$b/start.o" && gcc -c "$b/end.s" -o "$b/end.o"
  gcc -no-pie -nostartfiles -nostdlib -Wl,-e,entry -Wl,--build-id "$b/start.o" "$b/k.o" "$b/end.o" -o "$dir/$name"
  rm -rf "$b"
}

# build_id FILE: its GNU build-ID (readelf, an independent witness).
build_id() { readelf -n "$1" | awk '/Build ID/ {print $3}'; }

# symbol_addr FILE NAME: 0x + NAME's st_value (nm).
symbol_addr() { echo "0x$(nm "$1" | awk -v n="$2" '$3 == n {print $1}')"; }
