#!/usr/bin/env python3
"""`symdex callers SPEC` against objdump (the oracle), on the index SYMDEX_DB holds, made from a
kernel's System.map, modules and debug package: for a sample of duplicated-name copies in vmlinux
and in modules, every direct call and jump objdump shows landing on the copy's first byte is a
site symdex lists, with the same kind (call or jump), and symdex lists no other. objdump disassembles
the debug files (vmlinux as linked; a module's .ko with its relocations, which name a call's
callee there); a jump from a copy to its own start is a loop and is left out on both sides.

  compare_callers_objdump.py SYMDEX --debug-root DIR --objdump OBJDUMP [--sample N] [--seed S]

DIR is the unpacked -dbg package (usr/lib/debug/...). Prints one line per copy that differs and a
summary with the time symdex's calls and objdump's disassembly took; exit 1 when symdex disagrees
anywhere, or when no copy with callers was checked.
"""
import argparse
import glob
import json
import os
import random
import re
import subprocess
import sys
import time

INSN = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*\t(.*)$")
BRANCH = re.compile(r"(?:^|\s)(call|jmp|j[a-z]{1,4}(?:,p[nt])?|bl|b|b\.[a-z]{2}|cbn?z|tbn?z)\s+"
                    r"(?:[^<]*?,\s*)?([0-9a-f]+) <")
RELOC = re.compile(r"^\s*([0-9a-f]+): (R_\w+)\s+(\S+?)(?:([+-])0x([0-9a-f]+))?\s*$")
SECTION = re.compile(r"^Disassembly of section (\S+):$")
SYMBOL = re.compile(r"^([0-9a-f]+) (.{7}) (\S+)\s+([0-9a-f]+)\s+(\S+)$")


SECONDS = {"symdex": 0.0, "objdump": 0.0}


def symdex_json(symdex, *args):
    t = time.monotonic()
    r = subprocess.run([symdex, "--json", *args], capture_output=True, text=True)
    if args[0] == "callers":
        SECONDS["symdex"] += time.monotonic() - t
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {}


def branches(objdump, path, relocatable):
    """Every direct branch objdump shows: (section, at, is_call, target), target as (section, offset)
    for a relocatable file (by its relocation when the operand has one), else ("", address)."""
    args = [objdump, "-d", "-w"] + (["-r"] if relocatable else []) + [path]
    t = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    SECONDS["objdump"] += time.monotonic() - t
    syms = {}
    if relocatable:
        for line in subprocess.run([objdump, "-t", "-w", path], capture_output=True, text=True,
                                   check=True).stdout.splitlines():
            m = SYMBOL.match(line)
            # A name both a local and a global symbol carry (nfsd's two nfsd_open): a relocation by
            # name from another file's unit is the global's.
            if m and (m.group(5) not in syms or m.group(2)[0] in "gw"):
                syms[m.group(5)] = (m.group(3), int(m.group(1), 16))
    result = []
    section = ""
    for line in out.splitlines():
        m = SECTION.match(line)
        if m:
            section = m.group(1)
            continue
        m = INSN.match(line)
        if not m:
            continue
        # -w -r: a relocation follows its instruction on the line, after a tab.
        text, *rest = re.split(r"\t+(?=[0-9a-f]+: R_)", m.group(3), maxsplit=1)
        reloc = rest[0] if rest else ""
        b = BRANCH.search(text)
        if not b:
            continue
        at = int(m.group(1), 16)
        raw = m.group(2).split()
        nbytes = len(raw) if len(raw) > 1 else len(raw[0]) // 2
        call = b.group(1) in ("call", "bl")
        target = (section, int(b.group(2), 16)) if relocatable else ("", int(b.group(2), 16))
        r = RELOC.match(reloc) if reloc else None
        if r:
            off = int(r.group(1), 16)
            a64 = r.group(2).startswith("R_AARCH64")
            if off == (at if a64 else at + nbytes - 4):
                addend = int(r.group(5), 16) * (-1 if r.group(4) == "-" else 1) if r.group(5) else 0
                name = r.group(3)
                if name in syms and syms[name][0] != "*UND*":
                    target = (syms[name][0], syms[name][1] + addend + (0 if a64 else 4))
                else:
                    target = None  # another file's
        result.append((section, at, call, target))
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("symdex")
    ap.add_argument("--debug-root", required=True)
    ap.add_argument("--objdump", default="objdump")
    ap.add_argument("--sample", type=int, default=20, help="copies of each kind (vmlinux, modules)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    _, dups = symdex_json(a.symdex, "dups")
    copies = [i for g in dups["duplicates"] for i in g["instances"]]
    _, syms = symdex_json(a.symdex, "symbols", "--canonical")
    canonical = {(s["module"], s.get("address"), s.get("section", ""), s.get("section_offset", 0)): s["canonical"]
                 for s in syms["symbols"]}
    vml = glob.glob(os.path.join(a.debug_root, "usr/lib/debug/boot/vmlinux-*"))[0]
    kos = {}
    for p in glob.glob(os.path.join(a.debug_root, "usr/lib/debug/lib/modules/*/kernel/**/*.ko"), recursive=True):
        kos[os.path.basename(p)[:-3].replace("-", "_")] = p
    rng = random.Random(a.seed)
    rng.shuffle(copies)
    picked = [c for c in copies if c["module"] == "vmlinux"][:a.sample]
    picked += [c for c in copies if c["module"] != "vmlinux" and c["module"] in kos][:a.sample]

    dis = {}
    checked = with_callers = sites_total = bad = 0
    for c in picked:
        key = (c["module"], c.get("address"), c.get("section", ""), c.get("section_offset", 0))
        spec = canonical.get(key)
        if not spec:
            continue
        mod = c["module"]
        path = vml if mod == "vmlinux" else kos[mod]
        if path not in dis:
            dis[path] = branches(a.objdump, path, mod != "vmlinux")
        size = c.get("size") or 1
        if mod == "vmlinux":
            start = int(c["address"], 16)
            to = ("", start)
            inside = lambda s, at: start <= at < start + size
        else:
            to = (c["section"], c["section_offset"])
            inside = lambda s, at: s == c["section"] and c["section_offset"] <= at < c["section_offset"] + size
        want = sorted((s, at, call) for s, at, call, t in dis[path] if t == to and (call or not inside(s, at)))
        rc, ans = symdex_json(a.symdex, "callers", spec)
        got = []
        for site in ans.get("sites", []):
            caller = site.get("caller") or {}
            if mod == "vmlinux":
                got.append(("", int(site["address"], 16), not site["tail_call"]))
            else:
                got.append((caller.get("section"), caller.get("section_offset", 0) + site["offset"], not site["tail_call"]))
        if mod == "vmlinux":  # objdump names the section; symdex a vmlinux call by its address
            want = [("", at, call) for _, at, call in want]
        got.sort()
        want.sort()
        checked += 1
        with_callers += bool(want)
        sites_total += len(want)
        if got != want or rc != (0 if want else 1):
            bad += 1
            print(f"DIFFER {spec} ({mod}): exit {rc}; objdump {len(want)} sites, symdex {len(got)}; "
                  f"only objdump: {sorted(set(want) - set(got))[:4]}; only symdex: {sorted(set(got) - set(want))[:4]}")
    print(f"callers: {checked} copies checked ({with_callers} with direct callers, {sites_total} call sites), "
          f"{bad} differ from objdump")
    print(f"time: symdex callers {SECONDS['symdex']:.2f} s for {checked} calls ({SECONDS['symdex'] / max(checked, 1) * 1000:.0f} ms "
          f"each, embedded, every file decoded anew); objdump -d of the {len(dis)} files {SECONDS['objdump']:.2f} s")
    return 1 if bad or with_callers == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
