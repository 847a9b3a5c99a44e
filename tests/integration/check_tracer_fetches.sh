#!/usr/bin/env bash
# The bpftrace and libbpf forms of probes with arguments by name, taken by the real tools, on one
# Debian vmlinux already indexed in $SYMDEX_DB:
#   - libbpf: the C struct of fetches compiled by `clang -target bpf` against the vmlinux.h that
#     bpftool writes from that kernel's own BTF (its struct pt_regs / user_pt_regs), inside a
#     kprobe program that fills and prints the struct; each fetch arg of the kprobe_events
#     definition has its block;
#   - bpftrace: the program compiled by bpftrace's own analyser and code generator
#     (`bpftrace --emit-elf`, which loads nothing) — on the machine's own architecture only:
#     bpftrace checks register names against the architecture it runs on.
# No kernel runs here: that the reads fire with the right values is the booted guests' part.
#   check_tracer_fetches.sh SYMDEX VMLINUX DEBIAN_ARCH
set -uo pipefail
SYMDEX=$1 VMLINUX=$2 ARCH=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
for tool in bpftool clang python3; do
  command -v "$tool" >/dev/null || { echo "SKIP tracer fetches: $tool is not installed"; exit 0; }
done
[ -f /usr/include/bpf/bpf_helpers.h ] || { echo "SKIP tracer fetches: libbpf-dev is not installed"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
# bpftrace runs as root only, even to compile a program it will not load.
bpftrace_ok=0
if command -v bpftrace >/dev/null && [ "$(id -u)" -eq 0 ]; then bpftrace_ok=1; else
  echo "note: bpftrace's compile not checked here (bpftrace missing, or not root)"
fi
case $ARCH in
  amd64) target_arch=x86 host=x86_64 ;;
  arm64) target_arch=arm64 host=aarch64 ;;
  *) echo "unknown architecture $ARCH"; exit 1 ;;
esac

bpftool btf dump file "$VMLINUX" format c >"$work/vmlinux.h" || { echo "FAIL $ARCH: bpftool read no BTF"; exit 1; }

# Each probe: symdex's arguments after the spec (a unique function: offline, both tracers name it).
probes=(
  "vfs_read|file->f_path.dentry->d_name.name:string|count|pos"
  "do_sys_openat2|dfd|filename:string|how->flags|how->mode:u16"
  "tcp_sendmsg|size|sk->__sk_common.skc_family|sk->sk_userlocks"
  "vfs_read|\$params|\$comm|t=@_text+64"
  "-r|vfs_read|\$retval:s64"
)
n=0
for p in "${probes[@]}"; do
  IFS='|' read -r -a args <<<"$p"
  n=$((n + 1))
  out=$("$SYMDEX" kprobe -n --format libbpf --json -e "symdex/p$n" "${args[@]}" 2>"$work/err")
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL $ARCH libbpf ${args[*]}: exit $rc: $(head -c 300 "$work/err")"
    fail=1
    continue
  fi
  printf '%s' "$out" | python3 -c '
import json, re, sys
j = json.load(sys.stdin)
fetch, kp = j["fetch"], j["kprobe_events"]
m = re.search(r"^struct (\w+)_args \{", fetch, re.M)
decl = fetch[m.end():fetch.index("};", m.end())]
fields = re.findall(r"^\t(?:char|__[us]\d+) (\w+)", decl, re.M)
nargs = len(kp.split(" ")) - 2
blocks = len(re.findall(r"^\t/\* ", fetch, re.M))
if blocks != nargs:
    sys.exit(f"{blocks} fetch blocks for {nargs} fetch args of {kp}")
prefix = m.group(1)
body = "\n".join(f"\tbpf_printk(\"{f}\", sizeof(a.{f}));" for f in fields)
open(sys.argv[1], "w").write(f"""#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

{fetch}
SEC("kprobe")
int probe(struct pt_regs *ctx)
{{
\tstruct {prefix}_args a = {{}};

\t{prefix}_fetch(ctx, &a);
{body}
\treturn 0;
}}

char LICENSE[] SEC("license") = "GPL";
""")
' "$work/p$n.c" || { echo "FAIL $ARCH libbpf ${args[*]}: the fetch does not match its definition"; fail=1; continue; }
  if clang -target bpf -O2 -g -Wall -Werror -D__TARGET_ARCH_$target_arch -I"$work" -c "$work/p$n.c" \
    -o "$work/p$n.o" 2>"$work/cc"; then
    echo "ok   $ARCH libbpf: ${args[*]}: compiled ($(grep -c '^	/\* ' "$work/p$n.c") fetches)"
  else
    echo "FAIL $ARCH libbpf: ${args[*]}: clang refused it:"
    head -20 "$work/cc"
    sed -n 1,60p "$work/p$n.c"
    fail=1
  fi

  bt=$("$SYMDEX" kprobe -n --format bpftrace -e "symdex/p$n" "${args[@]}" 2>"$work/err")
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL $ARCH bpftrace ${args[*]}: exit $rc: $(head -c 300 "$work/err")"
    fail=1
    continue
  fi
  if [ "$(uname -m)" != "$host" ] || [ "$bpftrace_ok" = 0 ]; then
    continue
  fi
  # kaddr() is resolved against this machine's kallsyms, which may list no data symbol: _text
  # (the anchor a static's fetch arg is written from) is in every kernel's.
  if bpftrace --emit-elf "$work/b$n.o" -e "$bt" >"$work/bt" 2>&1 && [ -s "$work/b$n.o" ]; then
    echo "ok   $ARCH bpftrace: ${args[*]}: compiled"
  else
    echo "FAIL $ARCH bpftrace: ${args[*]}: bpftrace refused it:"
    grep -v "not traceable\|~~~\|RLIMIT" "$work/bt" | head -10
    echo "$bt"
    fail=1
  fi
done

# A probe in the body (a line): bpftrace names the place by its offset; libbpf by name + offset.
bt=$("$SYMDEX" kprobe -n --format bpftrace --rel-line 5 tcp_sendmsg size 2>"$work/err")
check_eq "$ARCH: bpftrace at a line in the body" "0" "$?"
lb=$("$SYMDEX" kprobe -n --format libbpf --rel-line 5 tcp_sendmsg size 2>"$work/err")
check_eq "$ARCH: libbpf at a line in the body names the function and the offset" "1" \
  "$(printf '%s' "$lb" | grep -c 'bpf_program__attach_kprobe_opts(prog, "tcp_sendmsg", &opts)')"
if [ "$(uname -m)" = "$host" ] && [ "$bpftrace_ok" = 1 ]; then
  bpftrace --emit-elf "$work/line.o" -e "$bt" >"$work/bt" 2>&1 && [ -s "$work/line.o" ]
  check_eq "$ARCH: bpftrace compiles the line's probe" "0" "$?"
fi
# A register the other architecture has: refused by name, exit 4.
other=$([ "$ARCH" = amd64 ] && echo '%x0' || echo '%di')
"$SYMDEX" kprobe -n --format bpftrace vfs_read "$other" >/dev/null 2>"$work/err"
check_eq "$ARCH: a register of the other architecture: exit 4" "4 1" "$? $(grep -c 'has no register' "$work/err")"
exit $fail
