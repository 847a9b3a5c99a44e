#!/usr/bin/env python3
"""symdex kprobe --inlined against `perf probe -k VMLINUX -D 'FUNC ARGS'` (the oracle), on the index
SYMDEX_DB holds and the vmlinux it was made from.

perf puts a probe at each place FUNC was inlined (and at its out-of-line copies), each with the
arguments compiled in that copy; symdex does the same for the inlined places, one definition each.
A place both give — the same caller and offset — must fetch every argument alike. perf takes an
inlined copy's entry address (DW_AT_entry_pc), symdex its first address (where `symdex inlined`
places it): where the two differ the place is counted, not compared. Where a variable has no
location perf fetches a magic number (0xdeade12d) and symdex leaves the place out: counted.

With --module-debug DIR (the debug root holding lib/modules/R/**/M.ko) the places symdex gives in
modules are compared too, each module's against `perf probe -k VMLINUX -m M.ko -D`.

  compare_perf_inlined.py SYMDEX VMLINUX [--name 'FUNC ARGS']... [--sample N] [--seed S]
                          [--module-debug DIR]

Exit 1 when a compared place differs, or nothing was compared.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

from compare_perf_probe import StaticNames, first_op_only, untyped


def perf_places(vmlinux, probe, module=None):
    """{(module, caller, offset): [fetch args]} of perf's definitions for one probe (in vmlinux, or
    with `module` a .ko path in that module); None if refused."""
    r = subprocess.run(["perf", "probe", "-q", "-k", vmlinux] + (["-m", module] if module else []) +
                       ["-D", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    out = {}
    for l in r.stdout.splitlines():
        f = l.split()
        if len(f) < 2 or not l.startswith("p:"):
            continue
        where, _, off = f[1].rpartition("+")
        mod, _, caller = where.rpartition(":")
        out[(mod or "vmlinux", caller, int(off, 0))] = f[2:]
    return out


def symdex_places(symdex, probe):
    """{(module, caller, offset): [fetch args]} of symdex kprobe --inlined; None when it gives none."""
    func, _, rest = probe.partition(" ")
    r = subprocess.run([symdex, "--json", "kprobe", "-n", "--inlined", func] + rest.split(),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    j = json.loads(r.stdout)
    return {(p["caller"]["module"], p["caller"]["name"], p["offset"]): p["kprobe_events"].split()[2:]
            for p in j["probes"]}, f"{len(j['left_out'])} left out"


def module_files(root):
    """{module name: its debug .ko} under a debug root (a module's name: the file's, '-' as '_')."""
    out = {}
    for dirpath, _, files in os.walk(os.path.join(root, "lib", "modules")):
        for f in files:
            if f.endswith(".ko"):
                out.setdefault(f[:-3].replace("-", "_"), os.path.join(dirpath, f))
    return out


class Refusals:
    """Why symdex gives no fetch of one variable at each place: {caller+0xOFF: reason}, from
    `symdex kprobe --inlined FUNC VAR`'s places left out (asked once per function and variable)."""

    def __init__(self, symdex):
        self.symdex, self.cache = symdex, {}

    def __call__(self, func, var, caller, offset):
        if (func, var) not in self.cache:
            r = subprocess.run([self.symdex, "--json", "kprobe", "-n", "--inlined", func, var],
                               capture_output=True, text=True)
            why = {}
            try:
                j = json.loads(r.stdout)
                for l in j.get("left_out", []):
                    where, _, reason = l.partition(": ")
                    why[where] = reason
                if r.returncode == 2:  # refused for every copy (no such variable)
                    why["*"] = j.get("error", {}).get("message", "")
            except ValueError:
                pass
            self.cache[(func, var)] = why
        why = self.cache[(func, var)]
        return why.get(f"{caller}+{offset:#x}", why.get("*", ""))


def explained(func, key, want, got, refusals):
    """Does every fetch arg perf gives that symdex does not have a reason symdex states? perf's
    $params also takes the parameters of functions inlined into the copy at that address (symdex:
    no such variable in the copy's scope), and reads a value DWARF computes from a register
    (DW_OP_bregN K; DW_OP_stack_value: the register plus K; or shifted, masked ...) as the memory at
    K(%reg), its first operation (symdex: a computed value, not a place). symdex's own must be
    perf's, in order."""
    it = iter(want)
    if not all(any(g == w for w in it) for g in got):
        return None
    reasons = set()
    for w in want:
        if w in got:
            continue
        why = refusals(func, w.partition("=")[0], *key)
        if w.partition("=")[2].startswith("\\deade12d") and ("optimized out" in why or "no entry here" in why):
            reasons.add("magic")
        elif "split into pieces" in why:
            reasons.add("pieces")
        elif "no variable" in why or ("kept no location" in why and "\\deade12d" not in w):
            # (A parameter the copy keeps no location for at all: what perf fetches under its name
            # is a nested inlined function's parameter of the same name.)
            reasons.add("nested")
        elif "DW_OP_stack_value" in why or "computed" in why or "has no form for" in why:
            reasons.add("computed")
        else:
            return None
    return reasons


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("symdex")
    ap.add_argument("vmlinux")
    ap.add_argument("--name", action="append", default=[], help="'FUNC ARGS' to compare")
    ap.add_argument("--sample", type=int, default=0,
                    help="also this many functions declared inline (their verdict says so), with $params")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=10)
    ap.add_argument("--summary", help="write the counts as JSON here")
    ap.add_argument("--module-debug", help="debug root with the modules' .ko: compare their places too")
    a = ap.parse_args()

    probes = list(a.name)
    if a.sample:
        syms = json.loads(subprocess.run([a.symdex, "symbols", "--json"], check=True, capture_output=True,
                                         text=True).stdout)["symbols"]
        count = {}
        for s in syms:
            count[s["name"]] = count.get(s["name"], 0) + 1
        # (With --module-debug, modules' functions declared inline too: their places are mostly in
        # the module that has them.)
        names = sorted({s["name"] for s in syms if (s["module"] == "vmlinux" or a.module_debug)
                        and count[s["name"]] == 1
                        and "declared inline" in s.get("verdict", {}).get("reason", "")
                        and s.get("dwarf", {}).get("function") == s["name"]})
        random.Random(a.seed).shuffle(names)
        probes += [f"{n} $params" for n in names[:a.sample]]

    statics = StaticNames(a.vmlinux)
    names = compared = agree = only_perf = only_symdex = refused = own_copy = magic = nested = computed = first_op = magic_here = pieces = 0
    refusals = Refusals(a.symdex)
    shown = 0
    kos = module_files(a.module_debug) if a.module_debug else {}
    module_places = 0
    for p in probes:
        theirs = perf_places(a.vmlinux, p)
        ours, why = symdex_places(a.symdex, p)
        if theirs is not None and ours is not None and kos:
            for mod in sorted({k[0] for k in ours if k[0] != "vmlinux" and k[0] in kos}):
                in_module = perf_places(a.vmlinux, p, kos[mod])
                if in_module:
                    theirs.update(in_module)
                    module_places += sum(1 for k in ours if k[0] == mod and k in in_module)
        if theirs is None or ours is None:
            refused += 1
            if shown < a.show:
                shown += 1
                print(f"no comparison for {p}: perf {'refused' if theirs is None else 'ok'}; "
                      f"symdex {'gave none: ' + why[:200] if ours is None else 'ok'}")
            continue
        names += 1
        for key, args in ours.items():
            if key not in theirs:
                only_symdex += 1
                continue
            compared += 1
            want = [untyped(statics(x, args)) for x in theirs[key]]
            # $params: perf 6.1 leaves out a parameter DWARF gives as a constant there, which
            # symdex fetches as an immediate (\N).
            got = [x for x in args if not ("=\\" in x and x not in want)] if "$params" in p else args
            why = explained(p.partition(" ")[0], key[1:], want, got, refusals) if got != want else None
            # A static perf names by the variable's own name, which no symbol has (the kernel
            # refuses it): symdex's _text+N is where DWARF puts it.
            want = [g if w != g and re.fullmatch(r"(\w+)=@\1\+0(:\w+)?", w) and "=@_" in g else w
                    for w, g in zip(want, got)] + want[len(got):] if len(want) >= len(got) else want
            if got == want:
                agree += 1
            elif first_op_only(want, got):
                agree += 1
                first_op += 1
            elif why is not None:
                agree += 1
                nested += "nested" in why
                computed += "computed" in why
                magic_here += "magic" in why
                pieces += "pieces" in why
            elif shown < a.show:
                shown += 1
                print(f"differs: {p} at {key[0]}:{key[1]}+{key[2]:#x}\n  perf:   {want}\n  symdex: {args}")
        func = p.partition(" ")[0]
        for k, args in theirs.items():
            if k in ours:
                continue
            if k[0] != "vmlinux" and k[0] not in {o[0] for o in ours}:
                continue  # a module symdex gave no place in: not asked of perf
            if k[1] == func or k[1].startswith(func + "."):
                own_copy += 1
            elif any("\\deade12d" in x for x in args):
                magic += 1
            else:
                only_perf += 1
    print(f"inlined functions: {len(probes)}; both gave places for {names}; places at the same address: "
          f"{compared} ({module_places} in modules), fetch args agree at {agree} (of them {nested} where perf adds the parameters of "
          f"functions inlined into the copy there, {computed} where perf reads a value computed from a register "
          f"as memory at an offset from it and symdex refuses it, {first_op} where perf reads a location "
          f"of several operations by its first only, {magic_here} where perf fetches its magic 0xdeade12d for a "
          f"parameter with no location there and symdex leaves it out, {pieces} where perf fetches the first "
          f"register of a value split across several as if it were the whole)")
    print(f"  perf only: {own_copy} at the function's own out-of-line copies (symdex kprobe SPEC names each), "
          f"{magic} where perf fetches its magic number 0xdeade12d for a variable with no location there "
          f"(symdex leaves the place out, saying why), {only_perf} others (an entry address past the copy's "
          f"first address, or a place symdex left out); symdex only: {only_symdex}")
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump({"functions": len(probes), "with_places": names, "compared": compared, "agree": agree,
                       "nested": nested, "computed": computed, "first_op": first_op, "perf_own_copy": own_copy,
                       "perf_magic": magic, "magic_here": magic_here, "pieces": pieces, "perf_only": only_perf, "symdex_only": only_symdex,
                       "module_places": module_places}, f)
    return 0 if compared and agree == compared else 1


if __name__ == "__main__":
    sys.exit(main())
