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


def rel_line_of(probe):
    """perf's FUNC:RLN: the relative line a probe names, or None."""
    m = re.match(r"[^ :]+:(\d+)(?: |$)", probe)
    return int(m.group(1)) if m else None


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
    # In probe order: the k-th probe of a function takes the k-th line at FUNC+N; a probe on a
    # line (FUNC:RLN, one per function in a batch) takes every line at FUNC+N, one per place.
    taken = {}
    for p in probes:
        f = func_of(p)
        own = [l for l in lines if len(l) > 1 and l[1].startswith(f + "+")]
        if rel_line_of(p) is not None:
            out[p] = "\n".join(" ".join(l) for l in own) if r.returncode == 0 and own else None
            continue
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
    # A variable that is a constant at the entry symdex fetches as an immediate (\\N); perf -V
    # does not list it: left out of the comparison.
    return {v["name"]: v["type"].replace(" *", "*") for v in json.loads(r.stdout)["variables"]
            if v["available"] and not v["fetch"].startswith("\\")}


class StaticNames:
    """perf names static storage by its symbol (@jiffies+0, no type for an array); symdex by
    _text+N (a name that may not be unique): perf's form rewritten to symdex's, from the
    vmlinux symbol table (read once, when first needed)."""

    def __init__(self, vmlinux):
        self.vmlinux, self.addr, self.anchors = vmlinux, None, {}

    def load(self):
        r = subprocess.run(["nm", self.vmlinux], capture_output=True, text=True)
        self.addr = {}
        for l in r.stdout.splitlines():
            f = l.split()
            if len(f) == 3:
                self.addr.setdefault(f[2], []).append(int(f[0], 16))
        # the anchor symdex names vmlinux's static storage by: _text, or _stext (arm64)
        self.anchors = {n: self.addr[n][0] for n in ("_text", "_stext") if n in self.addr}
        self.ambiguous = 0

    def __call__(self, arg, ours=()):
        """perf's fetch arg in symdex's spelling. A static perf names by a symbol several copies
        share (the kernel takes the first: perf reads the wrong copy for all but one) is taken
        as symdex's when symdex's address is one of them; counted in self.ambiguous."""
        m = re.fullmatch(r"([^=]+)=@([A-Za-z_.$][\w.$]*)\+(\d+)(:\w+)?", arg)
        if not m or m.group(2) in ("_text", "_stext"):
            return arg
        if self.addr is None:
            self.load()
        # gcc names a function's static `x` x.N in the symbol table: perf's @x names none of them
        # (the kernel refuses it); symdex's address is taken when it is one of them.
        addrs = self.addr.get(m.group(2), []) or [
            a for n, v in self.addr.items() if re.fullmatch(re.escape(m.group(2)) + r"\.\d+", n) for a in v]
        if not addrs or not self.anchors:
            return arg
        typ = m.group(4) or ":x64"  # kprobe_events' default type on a 64-bit kernel
        forms = [f"{m.group(1)}=@{n}+{a - base + int(m.group(3))}{typ}"
                 for n, base in self.anchors.items() for a in addrs if a >= base]
        mine = [f for f in forms if f in ours]
        if mine:
            if len(addrs) > 1 or not self.addr.get(m.group(2)):
                self.ambiguous += 1
            return mine[0]
        return forms[0] if forms else arg


def untyped(arg):
    """A fetch arg perf leaves without a type (an array's address) has kprobe_events' default,
    x64 on a 64-bit kernel."""
    name, eq, fetch = arg.partition("=")
    if not eq or ":" in fetch or fetch.startswith(("$", "\\")):
        return arg
    return f"{arg}:x64"


def first_op_only(theirs, ours):
    """perf reads a location of several DWARF operations by its first only: for
    `DW_OP_breg0 40; DW_OP_deref; DW_OP_plus_uconst 920` it fetches +40(%ax), the pointer the
    variable is reached through, where the variable is +920(+40(%ax)). True when every fetch arg
    that differs is such a case (symdex's nests perf's under a further offset)."""
    def nests(t, o):
        tn, _, tf = t.partition("=")
        on, _, of = o.partition("=")
        tf, _, tt = tf.partition(":")
        of, _, ot = of.partition(":")
        return tn == on and tt == ot and re.fullmatch(r"[+-]\d+\(" + re.escape(tf) + r"\)", of) is not None
    if len(theirs) != len(ours):
        return False
    diff = [(t, o) for t, o in zip(theirs, ours) if t != o]
    return bool(diff) and all(isinstance(t, str) and nests(t, o) for t, o in diff)


def fetchargs(line):
    """The fetch args of a kprobe_events line, in order; of several lines (a line's places),
    each line's target and fetch args."""
    if "\n" in line:
        return [l.split()[1:] for l in line.splitlines()]
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
    ap.add_argument("--lines", action="store_true",
                    help="probe the sample at a line of their body (FUNC:RLN, RLN 1-12) instead of the entry")
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
        rng = random.Random(a.seed)
        rng.shuffle(names)
        if a.lines:
            probes = [f"{n}:{rng.randint(1, 12)} $vars" for n in names[:a.sample]]
        else:
            probes = [f"{n} $params" for n in names[:a.sample]]

    perf = {}
    perf_secs = 0.0
    for i in range(0, len(probes), a.batch):
        got, secs = perf_definitions(a.vmlinux, probes[i:i + a.batch])
        perf.update(got)
        perf_secs += secs

    statics = StaticNames(a.vmlinux)
    compared = agree = perf_refused = perf_inlined = perf_first_op = symdex_immediates = 0
    symdex_secs = 0.0
    shown = 0
    for p in probes:
        func, _, rest = p.partition(" ")
        ret = func.endswith("%return")
        rln = rel_line_of(p)
        line = ["--rel-line", str(rln)] if rln is not None else []
        argv = [a.symdex, "kprobe", "-n", "--force"] + (["-r"] if ret else []) + line + \
            [func.removesuffix("%return").partition(":")[0]] + (rest.split() if rest else [])
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
        if rln is not None:  # the places: target and fetch args each
            ours = [l.split()[1:] for l in r.stdout.strip().splitlines()] if r.returncode == 0 else None
            flat = {x for l in ours or [] for x in l}
            theirs = [[untyped(statics(x, flat)) for x in l.split()[1:]] for l in pl.splitlines()]
            # perf lists a line's places in line-table order, symdex in address order
            theirs.sort(key=lambda l: int(l[0].rpartition("+")[2]))
        else:
            ours = fetchargs(r.stdout.strip()) if r.returncode == 0 else None
            theirs = [untyped(statics(x, ours or ())) for x in fetchargs(pl)]
        if ours and ("$vars" in p or "$params" in p):
            # A value DWARF gives as a constant at the place (DW_OP_litN; DW_OP_stack_value):
            # symdex fetches it as an immediate, perf 6.1 leaves it out. Compared without them.
            def drop(args, against):
                return [x for x in args if not ("=\\" in x and x not in against)]
            if rln is not None:
                kept = [drop(o, set(t)) if i < len(theirs) else o for i, (o, t) in
                        enumerate(zip(ours, theirs + [[]] * len(ours)))]
            else:
                kept = drop(ours, set(theirs))
            if kept != ours:
                symdex_immediates += 1
                ours = kept
        flat_ours = [x for l in ours for x in l] if ours and rln is not None else ours
        flat_theirs = [x for l in theirs for x in l] if rln is not None else theirs
        if ours == theirs:
            agree += 1
        elif ours and first_op_only(flat_theirs, flat_ours):
            perf_first_op += 1
            if perf_first_op <= a.show:
                print(f"perf reads only the first DWARF operation: {p}\n  perf:   {theirs}\n  symdex: {ours}")
        elif ours and "$vars" in p and len(ours) == len(theirs) and all(
                o[0] == t[0] and set(o[1:]) <= set(t[1:]) for o, t in zip(ours, theirs)):
            # perf's $vars also takes the variables of functions inlined at the place (the same
            # walk as for $params): the function's own are among them, fetched alike.
            agree += 1
            perf_inlined += 1
        elif ours and "$params" in p and len(ours) < len(theirs) and theirs[:len(ours)] == ours:
            # perf's $params also takes the parameters of functions inlined at the probe's
            # address (its die_find_child walks into every scope holding it): the function's own
            # come first, fetched alike.
            agree += 1
            perf_inlined += 1
        elif shown < a.show:
            shown += 1
            print(f"differs: {p}\n  perf:   {theirs}\n  symdex: "
                  f"{ours if ours is not None else 'exit %d: %s' % (r.returncode, r.stderr.strip())}")
    n = len(probes)
    print(f"probes: {n}; perf refused {perf_refused}; compared {compared}; "
          f"fetch args agree with perf probe: {agree} ({100.0 * agree / max(compared, 1):.2f}%; {perf_inlined} of them "
          f"where perf adds the variables of functions inlined at the probe's address to the function's own)")
    if symdex_immediates:
        print(f"  {symdex_immediates} where symdex also fetches a value DWARF gives as a constant there "
              f"(an immediate, \\N), which perf leaves out: compared without those")
    if perf_first_op:
        print(f"  {perf_first_op} differ where perf reads a location of several DWARF operations by its first "
              f"only (the pointer the variable is reached through); symdex reads them all")
    if statics.addr is not None and statics.ambiguous:
        print(f"  {statics.ambiguous} of perf's fetch args name static storage by a symbol several copies share "
              f"(the kernel reads the first) or by a name the symbol table spells NAME.N (the kernel refuses "
              f"it); symdex's _text+N is the copy in scope")
    print(f"time per definition: symdex {1000 * symdex_secs / max(n, 1):.1f} ms (a new CLI process each), "
          f"perf probe -D {1000 * perf_secs / max(n, 1):.1f} ms (batches of {a.batch}); "
          f"ratio {symdex_secs / max(perf_secs, 1e-9):.3f}")
    ok = compared and agree + perf_first_op >= a.min_agree * compared
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
                       "perf_inlined": perf_inlined, "perf_first_op": perf_first_op, "symdex_ms": 1000 * symdex_secs / max(n, 1),
                       "perf_ms": 1000 * perf_secs / max(n, 1), "batch": a.batch, "vars_compared": vc,
                       "vars_agree": va, "vars_types": vt}, f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
