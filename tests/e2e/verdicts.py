"""Probe verdicts against the booted kernel: helpers for qemu_kprobes.py.

  sample(...)       duplicated-name instances drawn at random (a seed per run, printed), at
                    least MIN_SAMPLE, with as many refused ones as exist up to a third, plus
                    every loaded module's exit function (cleanup_module);
  agreement(...)    symdex's ftrace verdict vs the guest's available_filter_functions, per
                    (name, module) over non-init code symbols, aliases collapsed the way
                    kallsyms names an address (its first symbol there);
  blacklist(...)    symdex's 'blacklisted' vs the guest's /sys/kernel/debug/kprobes/blacklist;
  orphan_sites(...) (arm64) ftrace sites in no function: the overridden bodies of __weak functions,
                    which the linker keeps without a symbol. x86-64's ftrace lists them as
                    __ftrace_invalid_address__ (FTRACE_MCOUNT_MAX_OFFSET); arm64's, which has no
                    such limit, under the name kallsyms gives their address: the function before
                    them, listed once more per body. Read from the vmlinux file, not from symdex.
"""

import bisect
import collections
import random
import re
import struct

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
    # Every loaded module's exit function (cleanup_module, an alias of its __exit function: no
    # ftrace site, so the kernel refuses it; the last symbol of a module's core text), always.
    have = {int(p[0]["address"], 16) for p in picked}
    for i in symbols["symbols"]:
        if (i["name"] == "cleanup_module" and i["module"] in loaded and i.get("type") in ("t", "T")
                and i.get("address") and int(i["address"], 16) not in taken | have):
            picked.append((i, not (i.get("verdict") or {}).get("kprobe")))
    rng.shuffle(picked)
    return picked


# Mapping symbols ($x, $d, ...: arm64 modules) and local labels: /proc/kallsyms lists a module's,
# but the kernel's lookups (kallsyms_lookup, so ftrace's %ps) skip them.
MAPPING = re.compile(r"^(\$[axtd](\..*)?|\.L.*)$")


def kallsyms_order(kallsyms):
    """{(name, module, addr): line number}, and {(module, addr): first name there}."""
    order, first = {}, {}
    for n, ln in enumerate(kallsyms.splitlines()):
        f = ln.split()
        if len(f) < 3 or MAPPING.match(f[2]):
            continue
        mod = f[3].strip("[]") if len(f) > 3 else "vmlinux"
        addr = int(f[0], 16)
        order.setdefault((f[2], mod, addr), n)
        if f[1] in CODE:
            first.setdefault((mod, addr), f[2])
    return order, first


def agreement(symbols, kallsyms, aff, orphans=None):
    """(stats, disagreements). symbols: 'symdex --json symbols --all-types' of the live target;
    orphans: {(name, module): lines ftrace lists for __weak bodies after it} (orphan_sites)."""
    orphans = orphans or {}
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
    # symdex's own count of each name's lines (its site's and those of the __weak bodies after
    # it, verdict.ftrace_lines), the first name at each address as above: no oracle.
    own = collections.Counter()
    for i in symbols["symbols"]:
        v = i.get("verdict") or {}
        if (i.get("type") in CODE and i.get("address") and v.get("kind") != "init"
                and first.get((i["module"], int(i["address"], 16))) == i["name"]):
            own[(i["name"], i["module"])] += v.get("ftrace_lines", 0)
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
    extra = collections.Counter({k: v for k, v in orphans.items() if k in universe})
    for key in set(listed) | set(predicted) | set(extra):
        d = abs(listed[key] - predicted[key] - extra[key])
        if d:
            errors += d
            reasons = why.get(key, ["(not a code symbol symdex knows)"])
            if extra[key]:
                reasons = reasons + [f"+{extra[key]} orphan __weak bodies after it"]
            bad.append((key, listed[key], predicted[key], reasons))
    own_errors = sum(abs(listed[k] - own[k]) for k in set(listed) | set(own))
    stats = {"code_symbols_non_init": total, "listed_lines": sum(listed.values()), "predicted": sum(predicted.values()),
             "symdex_lines": sum(own.values()), "symdex_lines_disagreements": own_errors,
             "symdex_lines_agreement": 1 - own_errors / max(total, 1),
             "disagreements": errors, "agreement": 1 - errors / max(total, 1), "invalid_address_lines": invalid,
             "orphan_weak_lines": sum(extra.values()), "per_verdict": dict(per_kind)}
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


def elf_sections(f):
    """[(name, type, addr, offset, size, link, flags)] of an ELF64 little-endian file (open, binary)."""
    f.seek(0)
    h = f.read(64)
    if h[:4] != b"\x7fELF" or h[4] != 2 or h[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", h, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", h, 58)
    f.seek(shoff)
    raw = f.read(shentsize * shnum)
    hdrs = [struct.unpack_from("<IIQQQQI", raw, i * shentsize) for i in range(shnum)]
    f.seek(hdrs[shstrndx][4])
    names = f.read(hdrs[shstrndx][5])
    return [(names[n:names.index(b"\0", n)].decode(), t, a, o, sz, lk, fl) for n, t, fl, a, o, sz, lk in hdrs]


def ftrace_sites(vmlinux, pre_words=0):
    """(sites, funcs) of a vmlinux file: the link-time addresses in its mcount_loc table
    (__start_mcount_loc..__stop_mcount_loc; a word the file leaves zero is the addend of its
    R_*_RELATIVE relocation: arm64 links with --no-apply-dynamic-relocs), each moved past the
    `pre_words` NOP words the compiler put before the function (arm64 with
    CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS records the first of two), and its FUNC symbols as
    sorted (value, end) ranges."""
    with open(vmlinux, "rb") as f:
        secs = elf_sections(f)
        byname = {s[0]: s for s in secs}
        _n, _t, _a, off, size, link, _fl = byname[".symtab"]
        f.seek(off)
        symtab = f.read(size)
        f.seek(secs[link][3])
        strtab = f.read(secs[link][4])
        funcs, marks = [], {}
        for name, info, _other, _shndx, value, sz in struct.iter_unpack("<IBBHQQ", symtab):
            if info & 0xF == 2 and sz:  # STT_FUNC
                funcs.append((value, value + sz))
            elif name and strtab[name:name + 18] in (b"__start_mcount_loc", b"__stop_mcount_loc\0"):
                marks[strtab[name:strtab.index(b"\0", name)].decode()] = value
        lo, hi = marks["__start_mcount_loc"], marks["__stop_mcount_loc"]
        sec = next(s for s in secs if s[2] <= lo < s[2] + s[4] and s[1] == 1)
        f.seek(sec[3] + lo - sec[2])
        words = list(struct.unpack(f"<{(hi - lo) // 8}Q", f.read(hi - lo)))
        if not all(words) and ".rela.dyn" in byname:
            f.seek(byname[".rela.dyn"][3])
            rela = f.read(byname[".rela.dyn"][4])
            for r_off, r_info, addend in struct.iter_unpack("<QQq", rela):
                if lo <= r_off < hi and (r_info & 0xFFFFFFFF) in (8, 1027):  # R_X86_64_RELATIVE, R_AARCH64_RELATIVE
                    words[(r_off - lo) // 8] = addend & (2**64 - 1)
    funcs.sort()
    return [w + 4 * pre_words for w in words if w], funcs


def orphan_sites(vmlinux, slide, kallsyms, pre_words=0):
    """{(name, 'vmlinux', runtime address): n}: ftrace sites of the vmlinux file in no FUNC
    symbol's range, by the kallsyms symbol whose name ftrace lists for each (the guest's kallsyms
    symbol before the site's runtime address; the first name there). pre_words: ftrace_sites'."""
    sites, funcs = ftrace_sites(vmlinux, pre_words)
    starts = [a for a, _e in funcs]
    ends = []  # the furthest end of the ranges starting at or before each start (ranges nest)
    for _a, e in funcs:
        ends.append(max(e, ends[-1]) if ends else e)
    ks = []
    for ln in kallsyms.splitlines():
        f = ln.split()
        if len(f) == 3 and f[1] in CODE:
            ks.append((int(f[0], 16), f[2]))
    ks.sort(key=lambda x: x[0])  # stable: the first of several names at one address stays first
    kaddr = [a for a, _n in ks]
    out = collections.Counter()
    for site in sites:
        i = bisect.bisect_right(starts, site) - 1
        if i >= 0 and site < ends[i]:
            continue
        live = site + slide
        k = bisect.bisect_right(kaddr, live) - 1
        if k < 0:
            continue
        first = bisect.bisect_left(kaddr, kaddr[k])
        out[(ks[first][1], "vmlinux", kaddr[k])] += 1
    return out


def by_name(orphans):
    """orphan_sites' counts per (name, module)."""
    out = collections.Counter()
    for (name, mod, _addr), n in orphans.items():
        out[(name, mod)] += n
    return out


def ftrace_index_expected(symbols, kallsyms, aff, orphans, addrs):
    """{address: the available_filter_functions line (1-based) ftrace lists that instance's own
    site on}, for the instances at `addrs` (module-relative order: a name's lines in that module
    follow its instances by address, each with its own line, if ftrace lists it, then one per
    orphan __weak body after it). Instances whose name's lines do not add up are left out."""
    _order, first = kallsyms_order(kallsyms)
    lines = collections.defaultdict(list)
    for n, ln in enumerate(aff.splitlines(), 1):
        f = ln.split()
        if f:
            lines[(f[0], f[1].strip("[]") if len(f) > 1 else "vmlinux")].append(n)
    insts = collections.defaultdict(list)
    for i in symbols["symbols"]:
        if i.get("type") not in CODE or not i.get("address") or (i.get("verdict") or {}).get("kind") == "init":
            continue
        a = int(i["address"], 16)
        if first.get((i["module"], a)) != i["name"]:
            continue
        insts[(i["name"], i["module"])].append((a, bool((i.get("verdict") or {}).get("ftrace"))))
    out = {}
    for key, lst in insts.items():
        if not any(a in addrs for a, _ in lst):
            continue
        lst.sort()
        counts = [int(ft) + orphans.get((key[0], key[1], a), 0) for a, ft in lst]
        if sum(counts) != len(lines.get(key, [])):
            continue
        pos = 0
        for (a, ft), c in zip(lst, counts):
            if a in addrs and ft:
                out[a] = lines[key][pos]
            pos += c
    return out
