"""Probe verdicts against the booted kernel (issue 16): helpers for qemu_kprobes.py.

  sample(...)       duplicated-name instances drawn at random (a seed per run, printed), at
                    least MIN_SAMPLE, with as many refused ones as exist up to a third;
  agreement(...)    symdex's ftrace verdict vs the guest's available_filter_functions, per
                    (name, module) over non-init code symbols, aliases collapsed the way
                    kallsyms names an address (its first symbol there);
  blacklist(...)    symdex's 'blacklisted' vs the guest's /sys/kernel/debug/kprobes/blacklist.
"""

import collections
import random

MIN_SAMPLE = 60
CODE = ("t", "T", "w", "W")


def sample(dups, symbols, loaded, taken, rng: random.Random, n=MIN_SAMPLE):
    """[(instance, refused)]: instances of duplicated text names in vmlinux or a loaded module,
    with an address, drawn at random; refused = symdex's verdict says kprobe events refuse it.
    Plus a few of the rarer verdicts from all symbols (blacklisted, a blacklisted function's
    clone, init text), so every kind meets the kernel. `taken`: addresses probed already."""
    pool = []
    for g in dups["duplicates"]:
        for i in g["instances"]:
            if i.get("type") not in ("t", "T") or not i.get("address") or int(i["address"], 16) in taken:
                continue
            if i["module"] != "vmlinux" and i["module"] not in loaded:
                continue
            v = i.get("verdict") or {}
            if v.get("kind") in (None, "unknown"):
                continue
            pool.append((i, not v.get("kprobe")))
    refused = [p for p in pool if p[1]]
    accepted = [p for p in pool if not p[1]]
    rng.shuffle(refused)
    rng.shuffle(accepted)
    want_refused = min(len(refused), n // 3)
    picked = refused[:want_refused] + accepted[:n - want_refused]
    # at least some module instances when there are any
    mods = [p for p in accepted[n - want_refused:] if p[0]["module"] != "vmlinux"]
    if not any(p[0]["module"] != "vmlinux" for p in picked) and mods:
        picked += mods[:5]
    rare = {"blacklisted": [], "blacklisted-clone": [], "init": []}
    for i in symbols["symbols"]:
        v = i.get("verdict") or {}
        if i.get("type") not in ("t", "T") or not i.get("address") or int(i["address"], 16) in taken:
            continue
        if i["module"] != "vmlinux" and i["module"] not in loaded:
            continue
        kind = v.get("kind")
        if kind == "blacklisted":
            rare["blacklisted-clone" if "." in i["name"] else "blacklisted"].append((i, True))
        elif kind == "init":
            rare["init"].append((i, True))
    have = {int(p[0]["address"], 16) for p in picked}
    for k in sorted(rare):
        rng.shuffle(rare[k])
        picked += [p for p in rare[k] if int(p[0]["address"], 16) not in have][:3]
    rng.shuffle(picked)
    return picked


def kallsyms_order(kallsyms):
    """{(name, module, addr): line number}, and {(module, addr): first name there}."""
    order, first = {}, {}
    for n, ln in enumerate(kallsyms.splitlines()):
        f = ln.split()
        if len(f) < 3:
            continue
        mod = f[3].strip("[]") if len(f) > 3 else "vmlinux"
        addr = int(f[0], 16)
        order.setdefault((f[2], mod, addr), n)
        if f[1] in CODE:
            first.setdefault((mod, addr), f[2])
    return order, first


def agreement(symbols, kallsyms, aff):
    """(stats, disagreements). symbols: 'symdex --json symbols --all-types' of the live target."""
    _order, first = kallsyms_order(kallsyms)
    predicted = collections.Counter()
    universe = collections.Counter()
    why = collections.defaultdict(list)
    per_kind = collections.Counter()
    for i in symbols["symbols"]:
        if i.get("type") not in CODE or not i.get("address"):
            continue
        v = i.get("verdict") or {}
        per_kind[v.get("kind", "unknown")] += 1
        if v.get("kind") == "init":
            continue
        addr = int(i["address"], 16)
        key = (i["name"], i["module"])
        if first.get((i["module"], addr)) != i["name"]:
            continue  # an alias: kallsyms (and so ftrace) names this address by another symbol
        universe[key] += 1
        if v.get("ftrace"):
            predicted[key] += 1
        why[key].append(f"{i['address']} {v.get('kind')}{' ftrace' if v.get('ftrace') else ''}: {v.get('reason', '')}")
    listed = collections.Counter()
    invalid = 0
    for ln in aff.splitlines():
        f = ln.split()
        if not f:
            continue
        if f[0].startswith("__ftrace_invalid_address__"):
            invalid += 1
            continue
        listed[(f[0], f[1].strip("[]") if len(f) > 1 else "vmlinux")] += 1
    total = sum(universe.values())
    bad = []
    errors = 0
    for key in set(listed) | set(predicted):
        d = abs(listed[key] - predicted[key])
        if d:
            errors += d
            bad.append((key, listed[key], predicted[key], why.get(key, ["(not a code symbol symdex knows)"])))
    stats = {"code_symbols_non_init": total, "listed_lines": sum(listed.values()), "predicted": sum(predicted.values()),
             "disagreements": errors, "agreement": 1 - errors / max(total, 1), "invalid_address_lines": invalid,
             "per_verdict": dict(per_kind)}
    return stats, sorted(bad)


def blacklist(symbols, text):
    """(stats, misses): the guest's blacklist ranges vs symdex's 'blacklisted' verdicts (code
    symbols starting in a listed range)."""
    ranges = []
    for ln in text.splitlines():
        f = ln.split()
        if not f or "-" not in f[0]:
            continue
        lo, hi = (int(x, 16) for x in f[0].split("-", 1))
        ranges.append((lo, hi, f[1] if len(f) > 1 else "?"))
    ranges.sort()
    starts = [r[0] for r in ranges]
    import bisect
    ours = {}
    for i in symbols["symbols"]:
        if i.get("type") in CODE and i.get("address") and (i.get("verdict") or {}).get("kind") == "blacklisted":
            ours[int(i["address"], 16)] = i["name"]
    theirs = {}
    for i in symbols["symbols"]:
        if i.get("type") not in CODE or not i.get("address"):
            continue
        a = int(i["address"], 16)
        k = bisect.bisect_right(starts, a) - 1
        if k >= 0 and ranges[k][0] <= a < ranges[k][1]:
            theirs[a] = i["name"]
    missed = sorted(set(theirs) - set(ours))
    # A clone (NAME.part.0, NAME.cold) of a listed function is not in the file, but the kernel
    # refuses it all the same: within_kprobe_blacklist() checks the base name.
    listed_names = set(theirs.values())
    extra_all = sorted(set(ours) - set(theirs))
    extra = [a for a in extra_all if ours[a].split(".")[0] not in listed_names]
    stats = {"kernel_ranges": len(ranges), "kernel_symbols": len(theirs), "symdex_blacklisted": len(ours),
             "clones_of_listed": len(extra_all) - len(extra), "missed": len(missed), "extra": len(extra)}
    return stats, [(hex(a), theirs[a], "kernel only") for a in missed[:20]] + \
        [(hex(a), ours[a], "symdex only") for a in extra[:20]]
