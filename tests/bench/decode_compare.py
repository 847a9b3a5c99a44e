#!/usr/bin/env python3
"""`symdex decode` side by side with the kernel's scripts/decode_stacktrace.sh.

Input: the work dir the qemu e2e test keeps (SYMDEX_E2E_KEEP=1 ctest -R qemu_kprobes): the guest's
ftrace stack traces with every frame's address (ftrace.txt), the guest's capture (sysroot/), and
the index of the live guest (index.db). The addresses are cut out; both tools get the same text —
what a kernel log prints — and each frame's answer is judged against the address the guest
printed: the source line addr2line gives for the true address (the function's own file:line, the
outermost entry of `addr2line -i`), compared with the outermost location each tool printed.

Only stacks with at least one frame in a duplicated name are used, each distinct stack once.

usage: decode_compare.py --work E2E_WORK --symdex BIN --script decode_stacktrace.sh --dbg-root DIR --krel R
Prints a summary and a table of the frames where the two tools differ, with who is right.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import decode_traces  # noqa: E402

FRAME = re.compile(r"^ => (\S+?)\+0x([0-9a-f]+)/0x[0-9a-f]+(?: \[(\S+)\])? <([0-9a-f]{16})>$")
ADDR = re.compile(r" <[0-9a-f]{16}>")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def kallsyms(sysroot):
    """_text of the guest, and (name, module) -> count of text symbols (decode_traces.py's)."""
    with open(os.path.join(sysroot, "proc/kallsyms")) as f:
        text = next(int(ln.split()[0], 16) for ln in f if ln.split()[2:] == ["_text"])
    return {"_text": text}, decode_traces._text_names(sysroot)


def outer_location(addr2line_out):
    """The outermost 'file:line' of addr2line -i output (one location per line)."""
    lines = [ln.strip() for ln in addr2line_out.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    loc = lines[-1].split(" (discriminator")[0]
    return loc


def strip_prefix(path):
    # Build prefixes (/build/reproducible-path/linux-6.1.192/...) off: source-tree relative.
    for pat in (r"/linux-[^/]+/(.*)", r"(?:^|/)debian/build/build_[^/]+/(.*)"):
        m = re.search(pat, path)
        if m:
            return m.group(1)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--symdex", required=True)
    ap.add_argument("--script", required=True)
    ap.add_argument("--dbg-root", required=True)
    ap.add_argument("--krel", required=True)
    a = ap.parse_args()
    debug = os.path.join(a.dbg_root, "usr/lib/debug")
    vmlinux = os.path.join(debug, "boot", f"vmlinux-{a.krel}")
    moddir = os.path.join(debug, "lib/modules", a.krel)
    sysroot = os.path.join(a.work, "sysroot")
    ks, counts = kallsyms(sysroot)
    link_text = int(run(["sh", "-c", f"nm '{vmlinux}' | awk '$3==\"_text\"{{print $1}}'"]).stdout.strip(), 16)
    slide = ks["_text"] - link_text

    # Distinct stacks holding a duplicated name.
    stacks, cur = [], []
    with open(os.path.join(a.work, "ftrace.txt")) as f:
        for line in f:
            line = line.rstrip("\n")
            m = FRAME.match(line)
            if m:
                cur.append((line, m))
                continue
            if cur:
                stacks.append(cur)
            cur = []
    if cur:
        stacks.append(cur)
    seen, chosen = set(), []
    for s in stacks:
        key = tuple(ADDR.sub("", ln) for ln, _ in s)
        if key in seen or not any(counts[(m.group(1), m.group(3) or "")] > 1 for _, m in s):
            continue
        seen.add(key)
        chosen.append(s)
    frames = [fm for s in chosen for fm in s]
    work = os.path.join(a.work, "compare")
    os.makedirs(work, exist_ok=True)
    text = os.path.join(work, "input.txt")
    with open(text, "w") as f:
        for s in chosen:
            f.write("Call Trace:\n")
            for ln, _ in s:
                f.write(ADDR.sub("", ln) + "\n")
            f.write("\n")

    # Truth: the outermost location of the true address.
    mod_files, mod_text = {}, {}
    for _, m in frames:
        mod = m.group(3)
        if mod and mod not in mod_files:
            found = run(["find", moddir, "-name", mod.replace("_", "[-_]") + ".ko"]).stdout.split()
            mod_files[mod] = found[0] if found else None
            try:
                with open(os.path.join(sysroot, "sys/module", mod, "sections/.text")) as sf:
                    mod_text[mod] = int(sf.read().strip(), 16)
            except OSError:
                mod_text[mod] = None
    # One addr2line per file, every address at once (-a: each answer starts with its address).
    queries = collections.defaultdict(list)  # (file, section) -> [(frame index, address)]
    for i, (_, m) in enumerate(frames):
        addr, mod = int(m.group(4), 16), m.group(3)
        if not mod:
            queries[(vmlinux, None)].append((i, addr - slide))
        elif mod_files.get(mod) and mod_text.get(mod) is not None:
            queries[(mod_files[mod], ".text")].append((i, addr - mod_text[mod]))
    truth = [None] * len(frames)
    for (obj, sec), items in queries.items():
        cmd = ["addr2line", "-a", "-i", "-e", obj] + (["-j", sec] if sec else []) + [f"{a:x}" for _, a in items]
        blocks = re.split(r"^0x[0-9a-f]+\n", run(cmd).stdout, flags=re.M)[1:]
        for (i, _), b in zip(items, blocks):
            loc = outer_location(b)
            truth[i] = strip_prefix(loc) if loc else None

    # decode_stacktrace.sh
    t0 = time.monotonic()
    with open(text) as inp:
        r = subprocess.run(["bash", a.script, vmlinux, "auto", moddir], stdin=inp, capture_output=True, text=True)
    script_s = time.monotonic() - t0
    script_lines = [ln for ln in r.stdout.splitlines() if "=>" in ln]
    script_locs = []
    for ln in script_lines:
        m = re.search(r"\(([^()]*)\)\s*(\S*)$", ln)
        locs = m.group(1).split() if m else []
        script_locs.append(strip_prefix(locs[-1]) if locs else None)
    if len(script_lines) != len(frames):
        print(f"decode_stacktrace.sh printed {len(script_lines)} frame lines for {len(frames)} frames", file=sys.stderr)

    # symdex decode (the live guest's index)
    t0 = time.monotonic()
    s = run([a.symdex, "--db", os.path.join(a.work, "index.db"), "--json", "decode", text])
    symdex_s = time.monotonic() - t0
    res = json.loads(s.stdout)
    by_line = {fr["line"]: fr for fr in res["frames"]}
    sym_locs, sym_state = [], []
    n = 0
    line_no = 0
    with open(text) as f:
        for line in f:
            line_no += 1
            if not line.startswith(" => "):
                continue
            fr = by_line.get(line_no, {})
            fs = fr.get("frames") or []
            if fr.get("candidates"):
                sym_locs.append(None)
                sym_state.append("ambiguous: " + " | ".join(fr["candidates"]))
            elif fs:
                sym_locs.append(f"{fs[-1]['file']}:{fs[-1]['line']}")
                sym_state.append("pinned")
            else:
                sym_locs.append(None)
                sym_state.append(fr.get("note", "no answer"))
            n += 1

    def same_function(a_loc, t_loc):
        return a_loc is not None and t_loc is not None and a_loc.split(":")[0] == t_loc.split(":")[0]

    stats = collections.Counter()
    diffs = []
    for i, (_, m) in enumerate(frames):
        dup = counts[(m.group(1), m.group(3) or "")] > 1
        k = "dup" if dup else "unique"
        stats[k] += 1
        sc = script_locs[i] if i < len(script_locs) else None
        sy = sym_locs[i] if i < len(sym_locs) else None
        t = truth[i]
        sc_ok, sy_ok = same_function(sc, t), same_function(sy, t)
        stats[k + " script right"] += sc_ok
        stats[k + " symdex right"] += sy_ok
        stats[k + " symdex ambiguous"] += sym_state[i].startswith("ambiguous") if i < len(sym_state) else 0
        if dup and sc_ok != sy_ok:
            diffs.append((m.group(1) + "+0x" + m.group(2) + (f" [{m.group(3)}]" if m.group(3) else ""), t, sc,
                          sy if sy else (sym_state[i] if i < len(sym_state) else "?"), sy_ok, sc_ok))
    print(f"{len(chosen)} distinct stacks with a duplicated name, {len(frames)} frames "
          f"({stats['dup']} in duplicated names); truth: addr2line at the address the guest printed")
    print(f"{'':34} {'decode_stacktrace.sh':>22} {'symdex decode':>16}")
    print(f"{'frames in unique names, right file':34} {stats['unique script right']:>14}/{stats['unique']:<7} "
          f"{stats['unique symdex right']:>8}/{stats['unique']}")
    print(f"{'frames in duplicated names, right':34} {stats['dup script right']:>14}/{stats['dup']:<7} "
          f"{stats['dup symdex right']:>8}/{stats['dup']}  (symdex ambiguous, with the candidates: "
          f"{stats['dup symdex ambiguous']})")
    print(f"{'time':34} {script_s:>13.1f} s {symdex_s:>14.2f} s   (ratio {script_s / max(symdex_s, 1e-3):.0f}x)")
    print(f"\nframes in duplicated names where the two differ (first 25 of {len(diffs)}):")
    print(f"{'FRAME':40} {'TRUTH (addr2line)':42} {'decode_stacktrace.sh':42} {'symdex':42} RIGHT")
    seen_rows = collections.Counter()
    for d in diffs:
        seen_rows[d[:4]] += 1
    for row, cnt in list(seen_rows.items())[:25]:
        fr, t, sc, sy = row
        ok = [x for x in diffs if x[:4] == row][0]
        who = "symdex" if ok[4] else "decode_stacktrace.sh"
        print(f"{fr[:40]:40} {str(t)[:42]:42} {str(sc)[:42]:42} {str(sy)[:42]:42} {who} (x{cnt})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
