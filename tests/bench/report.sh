#!/usr/bin/env bash
# docs/benchmarks.md's tables, from one run of the benchmarks that have goals: the performance
# table (tests/bench/performance.sh: speed and memory against llvm-symbolizer-14 and gRPC's floor,
# measured in the same run), the kernel matrix (tests/bench/kernel_matrix.sh: every kernel
# build against llvm-symbolizer-14, and the booted guests; then Debian's other flavours) and the whole flavours
# (tests/bench/flavour_index.sh: Debian's generic kernel indexed whole against llvm-symbolizer-14's
# batch over all its functions), and probe arguments by name against perf probe
# (tests/bench/probe_args.sh). Each section's prose stays; its table
# and the line above it (date, machine, commit, the command) are replaced by this run's, so the
# page holds one current run and git holds the ones before.
#
#   tests/bench/report.sh [--runs N] [--no-boot] [--from DIR] [SYMDEX_BIN]
#
# --from DIR  splice the tables the scripts already wrote (DIR/performance.md, DIR/matrix.md,
#             DIR/flavours.md, DIR/flavour-matrix.md (kernel_matrix.sh --only-flavours, its first
#             line's "Kernel matrix, " made "Flavour matrix, "), their --out files) instead of
#             running them; DIR/probe-args.md (tests/bench/probe_args.sh) likewise.
# Takes about two hours on 2 cores with every corpus cached (~/.cache/symdex-corpus; the clang
# kernel is built once, 11-13 min). Exit 1 when a table could not be made or a check failed (the
# tables are written all the same, with the failed rows marked).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=3
BOOT=--boot
FROM=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --no-boot) BOOT=""; shift ;;
    --from) FROM=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "report.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
status=0
if [ -z "$FROM" ]; then
  FROM=$(mktemp -d)
  "$root/tests/bench/performance.sh" --kernels debian-6.1-amd64,debian-6.1-arm64,debian-6.12-amd64,double-amd64 \
    --runs "$RUNS" --out "$FROM/performance.md" "$@" || status=1
  "$root/tests/bench/kernel_matrix.sh" $BOOT --out "$FROM/matrix.md" "$@" || status=1
  # Debian's other flavours (generic, rt, arm64 16k of both releases), the same checks, no guest.
  "$root/tests/bench/kernel_matrix.sh" --only-flavours --out "$FROM/flavour-matrix.md" "$@" || status=1
  sed -i '1s/^Kernel matrix, /Flavour matrix, /' "$FROM/flavour-matrix.md"
  "$root/tests/bench/probe_args.sh" --out "$FROM/probe-args.md" "$@" || status=1
  "$root/tests/bench/flavour_index.sh" --out "$FROM/flavours.md" "$@" || status=1
fi
python3 - "$root/docs/benchmarks.md" "$FROM/performance.md" "$FROM/matrix.md" "$FROM/flavours.md" \
  "$FROM/flavour-matrix.md" "$FROM/probe-args.md" <<'PY'
import pathlib, sys
page = pathlib.Path(sys.argv[1])
lines = page.read_text().splitlines()
for title, path in (("Performance, ", sys.argv[2]), ("Kernel matrix, ", sys.argv[3]),
                    ("Whole flavours, ", sys.argv[4]), ("Flavour matrix, ", sys.argv[5]),
                    ("Probe arguments, ", sys.argv[6])):
    p = pathlib.Path(path)
    if not p.exists() or not p.read_text().startswith(title):
        print(f"report.sh: no {title.rstrip(', ')} table in {path}: that section is left as it was", file=sys.stderr)
        continue
    new = p.read_text().rstrip("\n").splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(title)), None)
    if start is None:
        print(f"report.sh: docs/benchmarks.md has no line starting {title!r} to replace", file=sys.stderr)
        sys.exit(1)
    end = start
    while end < len(lines) and not lines[end].startswith("|"):
        end += 1
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    lines[start:end] = new
page.write_text("\n".join(lines) + "\n")
print(f"report.sh: wrote {page}")
PY
exit $status
