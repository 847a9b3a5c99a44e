"""The decode check, run by qemu_kprobes.py: stack traces printed by the guest, decoded.

The guest (guest-init.sh TRACES) ran the function tracer over every copy of many duplicated
names with a stack trace per call, with ftrace's sym-offset and sym-addr options: each frame line
is `=> name_show+0x1e/0x30 [mod] <ffffffff816807fe>` — what a kernel log prints, plus the
address, which is the truth. The addresses are cut out and `symdex decode` is given the text as
a log has it; every frame it pins must be at the address the guest printed, and every frame it
leaves ambiguous must list the copies. The guest's sysrq l/t backtraces (dmesg) and every
/proc/PID/stack are decoded too (no addresses there: counted and checked for names), and on
arm64 its register dumps (regs: sysrq p and l over a serial break, "pc : / lr : / Call trace:").
Every frame pinned there must be an instance of the name it printed with that name at the
pinned address less the printed offset (kallsyms). A "pc :" in a duplicated name whose "lr :"
is unique is checked against the code: the instruction before lr is the call, a BL whose target
(read from the vmlinux file) is the instance pc is in (a leaf function's caller is lr). On
arm64 a frame inside a function's patchable entry (its two NOPs: NAME+0x0, and NAME+0x4, the
address ftrace records and prints for the traced function itself) must have the function's
entry line (the line table gives those NOPs the last row of the function before).
"""
import bisect
import collections
import gzip
import json
import os
import re
import struct
import subprocess

from source_lines import NOP2

ADDR = re.compile(r" <([0-9a-f]{16})>")
FRAME = re.compile(r"^ => (\S+?)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(\S+)\])? <([0-9a-f]{16})>$")


def _decode(symdex, db, env, path):
    r = subprocess.run([symdex, "--db", db, "--json", "decode", path], env=env, capture_output=True, text=True)
    if r.returncode not in (0, 1, 2):
        raise RuntimeError(f"symdex decode {path} exited {r.returncode}: {r.stderr[-2000:]}{r.stdout[-500:]}")
    return json.loads(r.stdout)


def _text_names(sysroot):
    """(name, module) -> count of text symbols in the guest's kallsyms."""
    n = collections.Counter()
    with open(os.path.join(sysroot, "proc/kallsyms")) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[1] in "tT":
                n[(p[2], p[3].strip("[]") if len(p) > 3 else "")] += 1
    return n


def _instances(sysroot):
    """(name, module) -> sorted text addresses in the guest's kallsyms."""
    out = collections.defaultdict(list)
    with open(os.path.join(sysroot, "proc/kallsyms")) as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[1] in "tTwW":
                out[(p[2], p[3].strip("[]") if len(p) > 3 else "")].append(int(p[0], 16))
    for v in out.values():
        v.sort()
    return out


PRINTED = re.compile(r"([A-Za-z0-9_.$]+)\+0x([0-9a-f]+)/0x([0-9a-f]+)(?: \[(\S+)\])?")


def _bl_target(code, addr):
    """The target of an AArch64 BL at runtime address addr (code: (Elf of vmlinux, slide)), or None."""
    elf, slide = code
    w = elf.read(addr - slide, 4)
    if len(w) != 4:
        return None
    insn, = struct.unpack("<I", w)
    if insn & 0xFC000000 != 0x94000000:
        return None
    imm = insn & 0x03FFFFFF
    if imm & 0x02000000:
        imm -= 1 << 26
    return addr + imm * 4


def _consistency(frames, lines, insts):
    """Pinned frames whose printed name+offset is not that name's instance at the pinned
    address: [text]."""
    bad = []
    for fr in frames:
        m = PRINTED.search(fr["text"])
        if not m or "target_address" not in fr or fr.get("candidates"):
            continue
        name, off, mod = m.group(1), int(m.group(2), 16), m.group(4) or ""
        start = int(fr["target_address"], 16) - off
        if start not in insts.get((name, mod), []):
            bad.append(f"line {fr['line']}: {lines[fr['line'] - 1].strip()} pinned at {fr['target_address']}, "
                       f"which is not {name}+{off:#x} [{mod or 'vmlinux'}]")
    return bad


def _pc_by_lr(frames, lines, insts, code):
    """For each 'pc : DUP+off/size' followed by a unique 'lr :' in vmlinux: (frame, address the
    call before lr says pc is at, or None)."""
    by_line = {fr["line"]: fr for fr in frames}
    out = []
    for n, text in enumerate(lines, 1):
        if "pc : " not in text or n + 1 > len(lines) or "lr : " not in lines[n]:
            continue
        pm, lm = PRINTED.search(text.split("pc : ", 1)[1]), PRINTED.search(lines[n].split("lr : ", 1)[1])
        if not pm or not lm or pm.group(4) or lm.group(4) or n not in by_line:
            continue
        pcs = insts.get((pm.group(1), ""), [])
        lrs = insts.get((lm.group(1), ""), [])
        if len(pcs) < 2 or len(lrs) != 1:
            continue
        tgt = _bl_target(code, lrs[0] + int(lm.group(2), 16) - 4)
        want = tgt + int(pm.group(2), 16) if tgt in pcs else None
        out.append((by_line[n], want))
    return out




def _in_patchable_entry(frames, code, entries):
    """Pinned vmlinux frames at +0x0/+0x4 of a function whose code starts with two NOPs, whose
    innermost file:line is not the function's entry line (entries: {address: (file, line)})."""
    bad, n = [], 0
    for fr in frames:
        if "target_address" not in fr or fr.get("candidates") or fr.get("offset") not in (0, 4) \
                or fr.get("module") not in (None, "vmlinux"):
            continue
        start = int(fr["target_address"], 16) - fr["offset"]
        if start not in entries or code[0].read(start - code[1], 8) != NOP2:
            continue
        n += 1
        inner = (fr.get("frames") or [{}])[0]
        if (inner.get("file"), inner.get("line")) != entries[start]:
            bad.append(f"line {fr['line']}: {fr['text'].strip()[:60]} -> {inner.get('function')} at "
                       f"{inner.get('file')}:{inner.get('line')}; its entry line is {entries[start][0]}:{entries[start][1]}")
    return n, bad


def check(symdex, db, env, sysroot, traces, work, log, code=None, entries=None):
    """traces: {"ftrace": gz bytes, "dmesg": gz bytes, "stacks": gz bytes[, "regs": gz bytes]};
    code: (source_lines.Elf of the vmlinux file, KASLR slide) for arm64's pc/lr and patchable
    entry checks; entries: {address: (file, line)}, the entry lines of the live index's symbols
    (checked against llvm-symbolizer by source_lines.py). Returns failures."""
    failures = []
    nop_n, nop_bad = 0, []
    counts = _text_names(sysroot)
    insts = _instances(sysroot)
    ftrace = gzip.decompress(traces["ftrace"]).decode(errors="replace").splitlines()
    truth = {}
    for n, line in enumerate(ftrace):
        m = FRAME.match(line)
        if m:
            truth[n] = (m.group(1), m.group(2) or "", int(m.group(3), 16))
    with open(os.path.join(work, "ftrace.txt"), "w") as f:
        f.write("\n".join(ftrace) + "\n")
    bare = os.path.join(work, "ftrace.decode-input.txt")
    with open(bare, "w") as f:
        f.write("\n".join(ADDR.sub("", ln) for ln in ftrace) + "\n")
    res = _decode(symdex, db, env, bare)
    with open(os.path.join(work, "ftrace.decoded.json"), "w") as f:
        json.dump(res, f, indent=1)
    if code is not None and entries:
        k, b = _in_patchable_entry(res["frames"], code, entries)
        nop_n, nop_bad = nop_n + k, nop_bad + b
    by_line = {fr["line"] - 1: fr for fr in res["frames"]}
    st = collections.Counter()
    wrong, lost, unanswered = [], [], []
    for n, (name, mod, addr) in truth.items():
        dup = counts[(name, mod)] > 1
        key = "dup" if dup else "unique"
        st[key + " frames"] += 1
        fr = by_line.get(n)
        if fr is None:
            lost.append(f"line {n + 1}: {ftrace[n].strip()}")
            continue
        if fr.get("candidates"):
            st[key + " ambiguous"] += 1
            continue
        if "target_address" not in fr:
            unanswered.append(f"line {n + 1}: {ftrace[n].strip()}: {fr.get('note') or fr.get('error')}")
            continue
        got = int(fr["target_address"], 16)
        if got != addr:
            wrong.append(f"line {n + 1}: {ADDR.sub('', ftrace[n]).strip()} is {addr:#x}; symdex: {fr.get('spec')} "
                         f"at {got:#x} ({fr.get('note', '')})")
            continue
        st[key + " pinned"] += 1
        if dup and "call" in fr.get("note", ""):
            st["dup pinned by the code"] += 1
    log(f"decode, ftrace stacks with the guest's addresses as truth: {len(truth)} frames "
        f"in {sum(1 for ln in ftrace if '<stack trace>' in ln)} stacks")
    print(f"\ndecode of the guest's ftrace stacks (truth: the address each frame printed):")
    print(f"  frames in unique names:     {st['unique frames']:6}  pinned right {st['unique pinned']:6}  "
          f"ambiguous {st['unique ambiguous']}")
    print(f"  frames in duplicated names: {st['dup frames']:6}  pinned right {st['dup pinned']:6}  "
          f"ambiguous {st['dup ambiguous']}  (pinned by the code: {st['dup pinned by the code']})")
    print(f"  wrong: {len(wrong)}  not answered: {len(unanswered)}  not found as frames: {len(lost)}")
    for w in (wrong + unanswered + lost)[:15]:
        print("    " + w)
    if wrong:
        failures.append(f"decode: {len(wrong)} ftrace frames pinned to the wrong address, e.g. {wrong[0]}")
    if unanswered:
        failures.append(f"decode: {len(unanswered)} ftrace frames not answered, e.g. {unanswered[0]}")
    if lost:
        failures.append(f"decode: {len(lost)} ftrace frame lines not read as frames, e.g. {lost[0]}")
    if st["dup frames"] == 0:
        failures.append("decode: the guest's ftrace stacks hold no frame in a duplicated name")
    elif st["dup pinned"] == 0:
        failures.append("decode: no frame in a duplicated name was pinned")

    for name in [n for n in ("dmesg", "stacks", "regs") if n in traces]:
        text = gzip.decompress(traces[name]).decode(errors="replace")
        path = os.path.join(work, f"{name}.txt")
        with open(path, "w") as f:
            f.write(text)
        r = _decode(symdex, db, env, path)
        with open(os.path.join(work, f"{name}.decoded.json"), "w") as f:
            json.dump(r, f, indent=1)
        lines = text.splitlines()
        mism = []
        dups = collections.Counter()
        for fr in r["frames"]:
            printed = re.search(r"([A-Za-z0-9_.$]+)\+0x", fr["text"])
            mod = fr["text"].split("[")[1].split()[0].rstrip("]") if "[" in fr["text"] else ""
            if printed and counts[(printed.group(1), mod)] > 1:
                dups["frames"] += 1
                dups["pinned" if "target_address" in fr and not fr.get("candidates") else "ambiguous"] += 1
            if "symbol" in fr and printed and fr["symbol"] != printed.group(1) and not fr["text"].startswith("?"):
                mism.append(f"line {fr['line']}: {lines[fr['line'] - 1].strip()} -> {fr['symbol']}")
        print(f"  {name}: {len(r['frames'])} frames: {r['pinned']} pinned, {r['ambiguous']} ambiguous, "
              f"{r['unanswered']} not answered; in duplicated names {dups['frames']} "
              f"({dups['pinned']} pinned, {dups['ambiguous']} ambiguous)")
        if not r["frames"]:
            failures.append(f"decode: no frames found in the guest's {name}")
        if r["unanswered"]:
            bad = [fr for fr in r["frames"] if "target_address" not in fr and not fr.get("candidates")]
            failures.append(f"decode: {r['unanswered']} {name} frames not answered, e.g. line {bad[0]['line']}: "
                            f"{bad[0]['text']}: {bad[0].get('note') or bad[0].get('error')}")
        if mism:
            failures.append(f"decode: {len(mism)} {name} frames answered with another name, e.g. {mism[0]}")
        if code is not None and entries:
            k, b = _in_patchable_entry(r["frames"], code, entries)
            nop_n, nop_bad = nop_n + k, nop_bad + b
        inconsistent = _consistency(r["frames"], lines, insts)
        if inconsistent:
            print(f"    pinned where the printed name+offset is not: {len(inconsistent)}, e.g. {inconsistent[0]}")
            failures.append(f"decode: {len(inconsistent)} {name} frames pinned where their printed name+offset "
                            f"is not, e.g. {inconsistent[0]}")
        if code is not None:
            for fr, want in _pc_by_lr(r["frames"], lines, insts, code):
                got = fr.get("target_address")
                said = f"line {fr['line']}: {fr['text'].strip()} (lr: {lines[fr['line']].split('lr : ')[1].strip()})"
                if want is None:
                    print(f"    pc in a duplicated name, the call before lr is no BL to one of its copies: {said}")
                elif got and not fr.get("candidates") and int(got, 16) == want:
                    print(f"    pc in a duplicated name pinned where the call before lr says: {said} -> {got}")
                elif got and not fr.get("candidates"):
                    failures.append(f"decode: {said} pinned at {got}; the BL before lr calls the copy it is "
                                    f"in, so it is at {want:#x}")
                else:
                    print(f"    NOT PINNED: {said}: the BL before lr calls the copy at {want - int(PRINTED.search(fr['text']).group(2), 16):#x}, "
                          f"so pc is {want:#x}; symdex: {fr.get('note', '')[:160]}")
    if code is not None and entries:
        print(f"  frames in a function's patchable entry (NAME+0x0/+0x4; ftrace prints +0x4 for the traced "
              f"function): {nop_n}, {nop_n - len(nop_bad)} with the function's entry line")
        for b in nop_bad[:5]:
            print("    " + b)
        if nop_bad:
            failures.append(f"decode: {len(nop_bad)} of {nop_n} frames in a function's patchable entry answered with "
                            f"another line than the function's entry line (the last row of the function before), "
                            f"e.g. {nop_bad[0]}")
    return failures
