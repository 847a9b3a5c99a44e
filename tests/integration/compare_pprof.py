#!/usr/bin/env python3
"""`symdex pprof` checked by two independent parts: Go's own `go tool pprof` reads the profile
symdex writes, and llvm-symbolizer-14 says what each location should hold.

A profile of COUNT samples, each one random vmlinux text address (the same sampling as
compare_addr_llvm.py), under a [kernel.kallsyms] mapping that carries the target's vmlinux
build-ID when given (written here, by hand-encoded protobuf, as a profiler would: addresses, no functions).
`symdex pprof` symbolizes it; `go tool pprof -raw` prints each location's lines (leaf first), which
must be llvm-symbolizer's inline chain: function (the canonical spec of a duplicated name reduced
to its name), file and line.

--kaslr-offset HEX: the profile holds the addresses of a kernel booted that far from its link-time
addresses (as a profiler on a KASLR host records them), and `symdex pprof` is given the offset.
An address in the patchable-entry NOPs of a function (arm64) is asked of llvm-symbolizer at the
function's first instruction, as compare_addr_llvm.py does.

  compare_pprof.py SYMDEX VMLINUX SYSTEM_MAP [--build-id HEX | --target T] [--kaslr-offset HEX] [--count 3000]
                   [--min-agree 99.5]
"""
import argparse, bisect, collections, json, os, random, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(__file__))
from compare_llvm_symbolizer import normalize, patchable_entries  # noqa: E402
from perf_to_pprof import field_bytes as fb, field_varint as fv, varint  # noqa: E402


KALLSYMS_DROPS = ("__efistub_", "__pi_", "__kvm_nvhe_")


def profile(addrs, build_id):
    strings = ["", "samples", "count", "[kernel.kallsyms]", build_id]
    out = fb(1, fv(1, 1) + fv(2, 2))
    for i in range(len(addrs)):
        out += fb(2, fb(1, varint(i + 1)) + fv(2, 1))
    out += fb(3, fv(1, 1) + fv(5, 3) + fv(6, 4))
    for i, a in enumerate(addrs):
        out += fb(4, fv(1, i + 1) + fv(2, 1) + fv(3, a))
    for s in strings:
        out += fb(6, s.encode())
    return out


def base_name(n):
    """'vmlinux:name_show@card.c' / 'foo.isra.0' -> 'name_show' / 'foo' (what DWARF calls it)."""
    n = re.sub(r"^[A-Za-z0-9_]+:(?=[A-Za-z_])", "", n)
    return re.split(r"[@#]", n)[0].split(".")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("symdex")
    ap.add_argument("vmlinux")
    ap.add_argument("system_map")
    ap.add_argument("--build-id", default="", help="put on the kernel mapping (the target is then found by it)")
    ap.add_argument("--target", default="")
    ap.add_argument("--kaslr-offset", default="", help="hex: the profiled kernel's distance from its link-time addresses")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--min-agree", type=float, default=99.5)
    ap.add_argument("--show", type=int, default=5)
    a = ap.parse_args()
    if not shutil.which("go"):
        print("pprof: SKIP (no 'go' for 'go tool pprof'; scripts/setup-deps.sh installs golang-go)")
        return 0
    # Code a profiler can see: what kallsyms keeps (not the EFI stub's, the early PI code's or the
    # nVHE hypervisor's prefixed copies, which a running arm64 kernel never samples).
    syms = sorted({int(l.split()[0], 16) for l in open(a.system_map)
                   if len(l.split()) >= 3 and l.split()[1] in "tT" and not l.split()[2].startswith(KALLSYMS_DROPS)})
    rnd = random.Random(a.seed)
    addrs = []
    for _ in range(a.count):
        i = rnd.randrange(len(syms) - 1)
        addrs.append(syms[i] + rnd.randrange(max(1, min(syms[i + 1] - syms[i], 4096))))
    work = tempfile.mkdtemp()
    try:
        src, dst = os.path.join(work, "in.pb"), os.path.join(work, "out.pb.gz")
        slide = int(a.kaslr_offset, 16) if a.kaslr_offset else 0
        with open(src, "wb") as f:
            f.write(profile([(x + slide) & (2**64 - 1) for x in addrs], a.build_id))
        r = subprocess.run([a.symdex, "--json", "pprof", src, "-o", dst] + (["-t", a.target] if a.target else [])
                           + (["--kaslr-offset", a.kaslr_offset] if a.kaslr_offset else []),
                           capture_output=True, text=True)
        if r.returncode not in (0, 1):
            print(f"symdex pprof failed ({r.returncode}): {r.stdout}{r.stderr}")
            return 1
        summary = json.loads(r.stdout)
        raw = subprocess.run(["go", "tool", "pprof", "-symbolize=none", "-raw", dst], capture_output=True, text=True,
                             env=dict(os.environ, HOME=work, GOCACHE=os.path.join(work, "gocache")))
        if raw.returncode != 0:
            print(f"go tool pprof could not read symdex's profile: {raw.stderr[-2000:]}")
            return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # Locations: "  ID: 0xADDR M=1 NAME FILE:LINE s=START(SYSNAME)", then one indented
    # "NAME FILE:LINE s=START" line per further (enclosing) frame.
    ours, cur = {}, None
    section = None
    for line in raw.stdout.splitlines():
        if not line.startswith(" "):
            section = line.strip()
            continue
        if section != "Locations":
            continue
        m = re.match(r"^\s+(\d+): 0x([0-9a-f]+) M=\d+ ?(.*)$", line)
        if m:
            cur = int(m.group(2), 16)  # by address: go tool pprof numbers locations its own way
            ours[cur] = []
            rest = m.group(3)
        else:
            rest = line.strip()
        fm = re.match(r"^(\S+) (\S*):(-?\d+) s=", rest)
        if cur is not None and fm:
            ours[cur].append((base_name(fm.group(1)), fm.group(2), int(fm.group(3))))
    code = sorted({int(l.split()[0], 16) for l in open(a.system_map) if len(l.split()) >= 3 and l.split()[1] in "tTwW"})
    starts = {x: code[bisect.bisect_right(code, x) - 1] for x in addrs}
    entry = patchable_entries(a.vmlinux, [f"0x{v:x}" for v in sorted(set(starts.values()))])
    text = "".join((entry[f"0x{starts[x]:x}"] if f"0x{starts[x]:x}" in entry and x - starts[x] < 8 else f"0x{x:x}") + "\n"
                   for x in addrs)
    out = subprocess.run(["llvm-symbolizer-14", "--obj=" + a.vmlinux, "--output-style=JSON"], input=text,
                         capture_output=True, text=True, check=True).stdout
    llvm = [json.loads(l) for l in out.splitlines() if l.strip()]
    agree, causes, ex = 0, collections.Counter(), collections.defaultdict(list)
    for i, (addr, l) in enumerate(zip(addrs, llvm)):
        lf = [(s.get("FunctionName", "").split(".")[0], normalize(s.get("FileName", "")), s.get("Line", 0))
              for s in l.get("Symbol", [])]
        lf = [x for x in lf if x[2] != 0 or x[0] not in ("", "??")]
        of = ours.get((addr + slide) & (2**64 - 1), [])
        if not lf and len(of) == 1 and of[0][2] == 0:
            of = []  # DWARF names no function here; symdex names the symbol
        if [x[1:] for x in of] == [x[1:] for x in lf] and all(o[0] == l2[0] or not l2[0] for o, l2 in zip(of, lf)):
            agree += 1
            continue
        cause = ("inline chain length differs" if len(of) != len(lf) else
                 "function differs" if [x[0] for x in of] != [x[0] for x in lf] else
                 "file differs" if [x[1] for x in of] != [x[1] for x in lf] else "line differs")
        causes[cause] += 1
        if len(ex[cause]) < a.show:
            ex[cause].append(f"0x{addr:x}: go tool pprof reads {of}; llvm {lf}")
    rate = 100.0 * agree / len(addrs)
    print(f"pprof: {summary['symbolized']} of {summary['kernel_locations']} kernel locations symbolized by symdex; "
          f"go tool pprof's reading == llvm-symbolizer-14 (function, file, line, inline chain) for {agree} of "
          f"{len(addrs)} ({rate:.2f}%)")
    for c, n in causes.most_common():
        print(f"  {n:6d}  {c}")
        for e in ex[c]:
            print("            " + e)
    return 0 if rate >= a.min_agree and summary["symbolized"] == summary["kernel_locations"] else 1


if __name__ == "__main__":
    sys.exit(main())
