"""Source lines of the live index against llvm-symbolizer-14, run by qemu_kprobes.py (arm64).

Every text symbol of the guest (`symdex symbols --all-types --json` over the live index: vmlinux
and the loaded modules) is looked up with llvm-symbolizer in its debug file: vmlinux at its
link-time address (the guest's address less the KASLR slide, _stext's), a module's .text symbols
at their offset in the .ko's .text (the guest's address less /sys/module/M/sections/.text).
A function built with -fpatchable-function-entry (arm64: two NOPs at the symbol, which the line
table gives to the function before) is asked at its first instruction after them, as the
kernel's ftrace takes it; the NOPs are read from the debug file itself, not from symdex.

Acceptance: every text symbol llvm-symbolizer finds a line for has one in the live index.
Also reported: symbols symdex leaves without a DWARF function where llvm-symbolizer names the
symbol's own function there, and how often the two entry lines (innermost file:line) agree.
"""
import collections
import json
import os
import re
import struct
import subprocess
import sys

import verdicts

# llvm-symbolizer's paths made source-tree relative, as the offline comparisons do
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from compare_llvm_symbolizer import normalize  # noqa: E402

CODE = ("t", "T", "w", "W")
NOP2 = struct.pack("<II", 0xD503201F, 0xD503201F)  # AArch64 NOP, twice


class Elf:
    """The code sections of an ELF64 little-endian file, to read a few bytes at an address
    (vmlinux: its virtual addresses; a relocatable .ko: offsets in its .text)."""

    def __init__(self, path):
        self.path = path
        self.code = []
        self.text = None
        with open(path, "rb") as f:
            secs = verdicts.elf_sections(f)
        for n, stype, addr, off, size, _link, flags in secs:
            if stype == 1 and flags & 4:  # SHT_PROGBITS, SHF_EXECINSTR
                self.code.append((addr, off, size, n))
                if n == ".text":
                    self.text = (addr, off, size)

    def read(self, addr, n, section=None):
        for a, off, size, name in self.code:
            if (section is None or name == section) and a <= addr and addr + n <= a + size:
                with open(self.path, "rb") as f:
                    f.seek(off + addr - a)
                    return f.read(n)
        return b""


def symbolize(obj, addrs):
    """{addr: [(function, file, line, from DWARF), ...innermost first]} from llvm-symbolizer-14
    --inlining --verbose. A function name from DWARF comes with its "Function start line"; one
    without it is llvm-symbolizer's fallback to the symbol table (no DW_TAG_subprogram there)."""
    if not addrs:
        return {}
    r = subprocess.run(["llvm-symbolizer-14", f"--obj={obj}", "--inlining", "--functions=linkage",
                        "--verbose"], input="".join(f"{a:#x}\n" for a in addrs),
                       capture_output=True, text=True)
    blocks = [b for b in r.stdout.split("\n\n") if b.strip()]
    if len(blocks) != len(addrs):
        raise RuntimeError(f"llvm-symbolizer on {obj}: {len(blocks)} answers for {len(addrs)} addresses: "
                           f"{r.stderr[-500:]}")
    out = {}
    for a, block in zip(addrs, blocks):
        frames = []
        for ln in block.split("\n"):
            if not ln.strip():
                continue
            if not ln.startswith(" "):
                frames.append({"function": ln.strip(), "file": "", "line": 0, "dwarf": False})
                continue
            k, _, v = ln.strip().partition(": ")
            if not frames:
                continue
            if k == "Filename":
                frames[-1]["file"] = normalize(v) if v not in ("", "??") else ""
            elif k.startswith("Line"):
                frames[-1]["line"] = int(v or 0)
            elif k.startswith("Function start line"):
                frames[-1]["dwarf"] = True
        out[a] = [(f["function"], f["file"], f["line"], f["dwarf"]) for f in frames]
    return out


def base_name(name):
    """A kallsyms name without GCC's clone suffixes (foo.isra.0, foo.constprop.0.cold, ...)."""
    return name.split(".")[0]


def _module_bases(sysroot):
    bases = {}
    root = os.path.join(sysroot, "sys/module")
    for m in os.listdir(root):
        p = os.path.join(root, m, "sections", ".text")
        if os.path.exists(p):
            with open(p) as f:
                bases[m] = int(f.read().strip(), 16)
    return bases


def _module_debug_files(debug, krel):
    out = {}
    for dirpath, _dirs, names in os.walk(os.path.join(debug, "lib", "modules", krel)):
        for n in names:
            if n.endswith(".ko"):
                out[n[:-3].replace("-", "_")] = os.path.join(dirpath, n)
    return out


def check(symbols, sysroot, debug, krel, anchor, work, log):
    """symbols: 'symdex --json symbols --all-types' of the live target; anchor: (name, live
    address, link-time address). Returns failures."""
    _name, live, link = anchor
    slide = live - link
    vmlinux = os.path.join(debug, "boot", f"vmlinux-{krel}")
    velf = Elf(vmlinux)
    bases = _module_bases(sysroot)
    kos = _module_debug_files(debug, krel)
    # Extents from the live index: a module symbol is asked only inside its .text.
    todo = collections.defaultdict(list)  # obj -> [(symbol, query address)]
    skipped = collections.Counter()
    melf = {}
    for s in symbols["symbols"]:
        if s.get("type") not in CODE or not s.get("address"):
            continue
        addr = int(s["address"], 16)
        if s["module"] == "vmlinux":
            obj, a, elf, sec = vmlinux, addr - slide, velf, None
        else:
            ko = kos.get(s["module"])
            if ko is None or s["module"] not in bases:
                skipped["module without a debug file or .text base"] += 1
                continue
            if ko not in melf:
                melf[ko] = Elf(ko)
            elf = melf[ko]
            a = addr - bases[s["module"]]
            if elf.text is None or not 0 <= a < elf.text[2]:
                skipped["module symbol outside .text"] += 1
                continue
            obj, sec = ko, ".text"
        size = s.get("size") or 0
        if elf.read(a, 8, sec) == NOP2 and (not size or size > 8):
            a += 8  # the patchable entry: the function's code starts after the two NOPs
        todo[obj].append((s, a))
    answers = {}
    for obj, items in todo.items():
        res = symbolize(obj, sorted({a for _s, a in items}))
        for s, a in items:
            answers[id(s)] = res.get(a, [])
    st = collections.Counter()
    llvm_only, joined_missing, line_diff = [], [], []
    for obj, items in todo.items():
        where = "vmlinux" if obj == vmlinux else "modules"
        for s, _a in items:
            frames = answers[id(s)]
            d = s.get("dwarf") or {}
            ours = bool(d.get("line"))
            theirs = bool(frames) and frames[0][2] > 0 and bool(frames[0][1])
            st[f"{where} text symbols"] += 1
            st[f"{where} symdex line"] += ours
            st[f"{where} llvm line"] += theirs
            if theirs and not ours:
                llvm_only.append(f"{s['name']} [{s['module']}] {s['address']}: llvm {frames[0][1]}:{frames[0][2]}")
            if frames and frames[-1][3] and base_name(frames[-1][0]) == base_name(s["name"]) \
                    and not d.get("function"):
                joined_missing.append(f"{s['name']} [{s['module']}] {s['address']}: llvm names its function "
                                      f"{frames[-1][0]} ({frames[-1][1]}:{frames[-1][2]}); symdex: "
                                      f"{s.get('dwarf_note', 'no function')}")
            if theirs and ours:
                st[f"{where} both"] += 1
                if (normalize(d.get("file", "")), d["line"]) == (frames[0][1], frames[0][2]):
                    st[f"{where} same line"] += 1
                elif len(line_diff) < 2000:
                    line_diff.append(f"{s['name']} [{s['module']}] {s['address']}: symdex {d.get('file')}:{d['line']}, "
                                     f"llvm {frames[0][1]}:{frames[0][2]} ({frames[0][0]})")
    with open(os.path.join(work, "source_lines.txt"), "w") as f:
        f.write("# llvm-symbolizer has a line, symdex none\n" + "\n".join(llvm_only) + "\n")
        f.write("# llvm-symbolizer names the symbol's function, symdex joins no DWARF function\n"
                + "\n".join(joined_missing) + "\n")
        f.write("# entry lines that differ (innermost file:line)\n" + "\n".join(line_diff) + "\n")
    print("\nsource lines of the live index vs llvm-symbolizer-14 (vmlinux at live - slide, modules at "
          ".text offsets; patchable entries asked past their NOPs):")
    for where in ("vmlinux", "modules"):
        n = st[f"{where} text symbols"]
        print(f"  {where}: {n} text symbols; a line: symdex {st[f'{where} symdex line']}, llvm-symbolizer "
              f"{st[f'{where} llvm line']}; same entry line where both have one: "
              f"{st[f'{where} same line']}/{st[f'{where} both']}")
    for k, v in sorted(skipped.items()):
        print(f"  not asked: {v} ({k})")
    print(f"  llvm-symbolizer has a line and symdex none: {len(llvm_only)}; llvm-symbolizer names the "
          f"symbol's own function where symdex joins none: {len(joined_missing)} (details: source_lines.txt)")
    for x in (llvm_only + joined_missing)[:10]:
        print("    " + x[:220])
    log(f"source lines checked against llvm-symbolizer: {sum(len(v) for v in todo.values())} symbols")
    failures = []
    if llvm_only:
        failures.append(f"source lines: {len(llvm_only)} text symbols llvm-symbolizer has a line for have none "
                        f"in the live index, e.g. {llvm_only[0]}")
    return failures
