#!/usr/bin/env python3
"""symdex kprobe's arguments by name against `perf probe -k VMLINUX -D` (the oracle), on the
index SYMDEX_DB holds and the vmlinux it was made from.

For a sample of vmlinux functions whose name is unique (perf's `FUNC` is then exactly symdex's
copy) and that kprobe events accept, both are asked for the same probe — `FUNC $params` by default,
or each of --probe 'FUNC ARGS' — and every fetch arg compared: name, place, width and signedness.
perf runs once per batch of probes (it reads the DWARF once per run), symdex once per probe (a new
CLI process each time, as a script would call it); the time per definition of each is printed.

  compare_perf_probe.py SYMDEX VMLINUX [--sample N] [--seed S] [--probe 'FUNC ARGS']... [--min-agree F]

Exit 1 when fewer than --min-agree (default 1.0) of the compared probes agree.
"""
import argparse
import json
import random
import re
import subprocess
import sys
import time


def func_of(probe):
    """The function a probe names ('name_show@drivers/pnp/card.c x' -> 'name_show')."""
    return re.split(r"[@%: ]", probe, maxsplit=1)[0]


def perf_definitions(vmlinux, probes):
    """perf probe -D for each probe (a list of 'FUNC ARGS'): {probe: line or None}. perf prints a
    line for the function's own code and one for each place it was inlined: the one at FUNC+N is
    the out-of-line copy's."""
    out = {}
    args = ["perf", "probe", "-q", "-k", vmlinux]
    for p in probes:
        args += ["-D", p]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True)
    secs = time.monotonic() - t0
    if r.returncode != 0 and len(probes) > 1:  # one probe perf refuses fails its whole run
        for p in probes:
            one, s = perf_definitions(vmlinux, [p])
            out.update(one)
            secs += s
        return out, secs
    lines = [l.split() for l in r.stdout.splitlines() if l.startswith(("p:", "r:"))]
    # In probe order: the k-th probe of a function takes the k-th line at FUNC+N.
    taken = {}
    for p in probes:
        f = func_of(p)
        own = [l for l in lines if len(l) > 1 and l[1].startswith(f + "+")]
        k = taken.get(f, 0)
        taken[f] = k + 1
        n_same = sum(1 for q in probes if func_of(q) == f)
        out[p] = " ".join(own[k]) if r.returncode == 0 and len(own) == n_same else None
    return out, secs


def perf_vars(vmlinux, func):
    """perf probe -V FUNC: {name: type} of the variables it lists at the entry, or None."""
    r = subprocess.run(["perf", "probe", "-q", "-k", vmlinux, "-V", func], capture_output=True, text=True)
    if r.returncode != 0 or "@<" not in r.stdout:
        return None
    out = {}
    for l in r.stdout.splitlines():
        if l.startswith("\t\t"):
            typ, _, name = l.strip().rpartition("\t")
            out[name] = typ.strip()
    return out


def same_type(perfs, ours):
    """perf spells a type without its qualifiers ("char*" for const char *), an array as a
    pointer to its element, void * as (unknown_type) and a function pointer as (function_type)*."""
    ours = re.sub(r"\b(const|volatile) ", "", ours)
    ours = re.sub(r"\[\d*\]$", "*", ours)
    return (perfs == ours or (perfs == "(unknown_type)" and ours == "void*") or
            (perfs == "(function_type)*" and "(*)(" in ours))


def symdex_vars(symdex, func):
    r = subprocess.run([symdex, "--json", "vars", func], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    return {v["name"]: v["type"].replace(" *", "*") for v in json.loads(r.stdout)["variables"] if v["available"]}


def fetchargs(line):
    """The fetch args of a kprobe_events line, as {name: fetch}, in order."""
    parts = line.split()
    return [a for a in parts[2:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("symdex")
    ap.add_argument("vmlinux")
    ap.add_argument("--sample", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--probe", action="append", default=[])
    ap.add_argument("--min-agree", type=float, default=1.0)
    ap.add_argument("--show", type=int, default=10)
    ap.add_argument("--summary", help="write the counts and times as JSON here")
    ap.add_argument("--vars", type=int, default=0, help="also compare `symdex vars` with `perf probe -V` on this many")
    a = ap.parse_args()

    probes = list(a.probe)
    if not probes:
        syms = json.loads(subprocess.run([a.symdex, "symbols", "--all-types", "--json"], check=True,
                                         capture_output=True, text=True).stdout)["symbols"]
        count = {}
        for s in syms:
            count[s["name"]] = count.get(s["name"], 0) + 1
        names = sorted({s["name"] for s in syms
                        if s["module"] == "vmlinux" and count[s["name"]] == 1 and s["type"] in "tT"
                        and s.get("verdict", {}).get("kind") == "traceable"
                        and s.get("dwarf", {}).get("function") == s["name"]})
        random.Random(a.seed).shuffle(names)
        probes = [f"{n} $params" for n in names[:a.sample]]

    perf = {}
    perf_secs = 0.0
    for i in range(0, len(probes), a.batch):
        got, secs = perf_definitions(a.vmlinux, probes[i:i + a.batch])
        perf.update(got)
        perf_secs += secs

    compared = agree = perf_refused = perf_inlined = 0
    symdex_secs = 0.0
    shown = 0
    for p in probes:
        func, _, rest = p.partition(" ")
        ret = func.endswith("%return")
        argv = [a.symdex, "kprobe", "-n", "--force"] + (["-r"] if ret else []) + \
            [func.removesuffix("%return")] + (rest.split() if rest else [])
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True)
        symdex_secs += time.monotonic() - t0
        pl = perf.get(p)
        if pl is None:
            perf_refused += 1
            if perf_refused <= a.show:
                print(f"perf probe gave no definition: {p} (symdex: exit {r.returncode}: "
                      f"{(r.stdout.strip() or r.stderr.strip())[:200]})")
            continue
        compared += 1
        ours = fetchargs(r.stdout.strip()) if r.returncode == 0 else None
        theirs = fetchargs(pl)
        if ours == theirs:
            agree += 1
        elif ours and "$params" in p and len(ours) < len(theirs) and theirs[:len(ours)] == ours:
            # perf's $params also takes the parameters of functions inlined at the probe's
            # address (its die_find_child walks into every scope holding it): the function's own
            # come first, fetched alike.
            agree += 1
            perf_inlined += 1
        elif shown < a.show:
            shown += 1
            print(f"differs: {p}\n  perf:   {' '.join(theirs)}\n  symdex: "
                  f"{' '.join(ours) if ours is not None else 'exit %d: %s' % (r.returncode, r.stderr.strip())}")
    n = len(probes)
    print(f"probes: {n}; perf refused {perf_refused}; compared {compared}; "
          f"fetch args agree with perf probe: {agree} ({100.0 * agree / max(compared, 1):.2f}%; {perf_inlined} of them "
          f"where perf adds the parameters of functions inlined at the entry after the function's own)")
    print(f"time per definition: symdex {1000 * symdex_secs / max(n, 1):.1f} ms (a new CLI process each), "
          f"perf probe -D {1000 * perf_secs / max(n, 1):.1f} ms (batches of {a.batch}); "
          f"ratio {symdex_secs / max(perf_secs, 1e-9):.3f}")
    ok = compared and agree >= a.min_agree * compared
    vc = va = vt = 0
    if a.vars:
        for p in probes[:a.vars]:
            func = func_of(p)
            theirs, ours = perf_vars(a.vmlinux, func), symdex_vars(a.symdex, func)
            if theirs is None:
                continue
            vc += 1
            # perf -V also lists what functions inlined at the entry declare: every one of the
            # function's own must be among perf's, with the same type.
            if ours is not None and set(ours) <= set(theirs):
                va += 1
                vt += all(same_type(theirs[n], t) for n, t in ours.items())
            elif shown < a.show:
                shown += 1
                print(f"vars differ: {func}\n  perf -V: {theirs}\n  symdex:  {ours}")
        print(f"variables available at the entry: {vc} functions compared with perf probe -V; symdex's are "
              f"among perf's for {va}, with the same types (less qualifiers, which perf does not print) for {vt}")
        ok = ok and vc and va == vc and vt == vc
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump({"probes": n, "perf_refused": perf_refused, "compared": compared, "agree": agree,
                       "perf_inlined": perf_inlined, "symdex_ms": 1000 * symdex_secs / max(n, 1),
                       "perf_ms": 1000 * perf_secs / max(n, 1), "batch": a.batch, "vars_compared": vc,
                       "vars_agree": va, "vars_types": vt}, f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
