"""Issue 14's real-data check, run by qemu_kprobes.py: stack traces printed by the guest, decoded.

The guest (guest-init.sh TRACES) ran the function tracer over every copy of many duplicated
names with a stack trace per call, with ftrace's sym-offset and sym-addr options: each frame line
is `=> name_show+0x1e/0x30 [mod] <ffffffff816807fe>` — what a kernel log prints, plus the
address, which is the truth. The addresses are cut out and `symdex decode` is given the text as
a log has it; every frame it pins must be at the address the guest printed, and every frame it
leaves ambiguous must list the copies. The guest's sysrq l/t backtraces (dmesg) and every
/proc/PID/stack are decoded too (no addresses there: counted and checked for names).
"""
import collections
import gzip
import json
import os
import re
import subprocess

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


def check(symdex, db, env, sysroot, traces, work, log):
    """traces: {"ftrace": gz bytes, "dmesg": gz bytes, "stacks": gz bytes}. Returns failures."""
    failures = []
    counts = _text_names(sysroot)
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

    for name in ("dmesg", "stacks"):
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
    return failures
