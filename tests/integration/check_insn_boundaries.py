#!/usr/bin/env python3
"""`symdex kprobe -n FUNC+OFFSET` on x86-64 against objdump's instruction starts (the oracle), on the
index SYMDEX_DB holds and the vmlinux it was made from: for a sample of functions with a unique
name, an offset inside an instruction is refused (exit 2) naming the starts around it, and an
instruction's start is taken (exit 0).

  check_insn_boundaries.py SYMDEX VMLINUX [--sample N] [--seed S]

Exit 1 when symdex disagrees with objdump anywhere, or nothing was checked.
"""
import argparse
import json
import random
import re
import subprocess
import sys


def starts(vmlinux, addr, size):
    """objdump's instruction starts in [addr, addr + size), as offsets from addr."""
    r = subprocess.run(["objdump", "-d", "-w", f"--start-address={addr:#x}", f"--stop-address={addr + size:#x}",
                        vmlinux], capture_output=True, text=True, check=True)
    return [int(m.group(1), 16) - addr for m in re.finditer(r"^\s*([0-9a-f]+):\t", r.stdout, re.M)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("symdex")
    ap.add_argument("vmlinux")
    ap.add_argument("--sample", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    syms = json.loads(subprocess.run([a.symdex, "symbols", "--json"], check=True, capture_output=True,
                                     text=True).stdout)["symbols"]
    count = {}
    for s in syms:
        count[s["name"]] = count.get(s["name"], 0) + 1
    pool = sorted({s["name"] for s in syms if s["module"] == "vmlinux" and count[s["name"]] == 1
                   and s.get("verdict", {}).get("kind") == "traceable" and s.get("size", 0) >= 32
                   and re.fullmatch(r"[A-Za-z_]\w*", s["name"])})
    random.Random(a.seed).shuffle(pool)
    link = json.loads(subprocess.run([a.symdex, "which", "--json", "_text"], check=True, capture_output=True,
                                     text=True).stdout)["instances"][0]
    text = int(link["address"], 16) - link.get("text_offset", 0)
    checked = bad = 0
    for name in pool[:a.sample]:
        w = json.loads(subprocess.run([a.symdex, "which", "--json", name], check=True, capture_output=True,
                                      text=True).stdout)["instances"][0]
        addr = text + w["text_offset"]
        offs = starts(a.vmlinux, addr, w["size"])
        # The first instruction of two bytes or more past the entry's ftrace call.
        pick = next(((o, n - o) for o, n in zip(offs, offs[1:]) if o >= 9 and n - o >= 2), None)
        if pick is None:
            continue
        o, length = pick
        inside = subprocess.run([a.symdex, "kprobe", "-n", f"{name}+{o + 1}"], capture_output=True, text=True)
        at = subprocess.run([a.symdex, "kprobe", "-n", f"{name}+{o}"], capture_output=True, text=True)
        ok = (inside.returncode == 2 and f"probe at +{o} or +{o + length}" in inside.stderr and at.returncode == 0)
        checked += 1
        if not ok:
            bad += 1
            print(f"differs: {name}: objdump's instruction at +{o} is {length} bytes; symdex +{o + 1}: "
                  f"exit {inside.returncode} {inside.stderr.strip()[:200]}; +{o}: exit {at.returncode}")
    print(f"instruction starts: {checked} functions checked against objdump, {checked - bad} agree")
    return 0 if checked and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
