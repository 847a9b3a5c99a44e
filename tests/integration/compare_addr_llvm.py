#!/usr/bin/env python3
"""Compares `symdex addr` (function, file, line and the inline chain) with llvm-symbolizer-14 on
N random addresses inside vmlinux text symbols (seeded, reproducible), function padding
(`__pfx_NAME`, `__cfi_NAME`: no function's code) excepted.

An address in the patchable-entry NOPs of a function (arm64: their line-table rows are the
function before's) is its function's first instruction to symdex: llvm-symbolizer is asked there
(8 bytes after the symbol) for those.

  compare_addr_llvm.py SYMDEX VMLINUX SYSTEM_MAP [--count 5000] [--seed 1] [--min-agree 99.5]
"""
import argparse, bisect, collections, json, random, subprocess, sys

sys.path.insert(0, __import__('os').path.dirname(__file__))
from compare_llvm_symbolizer import normalize, patchable_entries  # noqa: E402


# Objects linked into their own namespace with `objcopy --prefix-symbols` (arm64: the nVHE
# hypervisor's __kvm_nvhe_, the EFI stub's __efistub_, the early position-independent code's
# __pi_): their DWARF keeps the source name, llvm-symbolizer prints the prefixed ELF symbol.
PREFIXES = ('__kvm_nvhe_', '__efistub_', '__pi_')


def unprefixed(name):
    for p in PREFIXES:
        while name.startswith(p):
            name = name[len(p):]
    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('symdex')
    ap.add_argument('vmlinux')
    ap.add_argument('system_map')
    ap.add_argument('--count', type=int, default=5000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--min-agree', type=float, default=99.5)
    ap.add_argument('--show', type=int, default=8)
    a = ap.parse_args()
    syms, code, padding = [], [], set()
    addr_of = collections.defaultdict(set)  # name -> addresses (aliases share one)
    for line in open(a.system_map):
        f = line.split()
        if len(f) >= 3 and f[1] in 'tT':
            syms.append(int(f[0], 16))
            # Function padding (6.2+: the NOPs before each function that call thunks patch,
            # __pfx_NAME and CFI's __cfi_NAME) is no function: no address is taken there.
            if f[2].startswith(('__pfx_', '__cfi_')):
                padding.add(int(f[0], 16))
        if len(f) >= 3 and f[1] in 'tTwW':
            code.append(int(f[0], 16))
            addr_of[f[2]].add(int(f[0], 16))
    syms = sorted(set(syms))
    code = sorted(set(code))
    functions = [i for i in range(len(syms) - 1) if syms[i] not in padding]
    rnd = random.Random(a.seed)
    addrs = []
    for _ in range(a.count):
        i = functions[rnd.randrange(len(functions))]
        lo, hi = syms[i], syms[i + 1]
        addrs.append(lo + rnd.randrange(max(1, min(hi - lo, 4096))))
    text = ''.join(f'0x{x:x}\n' for x in addrs)
    ours = json.loads(subprocess.run([a.symdex, 'addr', '--json', '-'], input=text, capture_output=True, text=True).stdout)['results']
    starts = {x: code[bisect.bisect_right(code, x) - 1] for x in addrs}
    entry = patchable_entries(a.vmlinux, [f'0x{v:x}' for v in sorted(set(starts.values()))])
    asked = [entry[f'0x{starts[x]:x}'] if f'0x{starts[x]:x}' in entry and x - starts[x] < 8 else f'0x{x:x}'
             for x in addrs]
    print(f'{sum(1 for x, q in zip(addrs, asked) if q != f"0x{x:x}")} addresses in patchable-entry NOPs: '
          'llvm-symbolizer asked at their function\'s first instruction')
    out = subprocess.run(['llvm-symbolizer-14', '--obj=' + a.vmlinux, '--output-style=JSON'],
                         input=''.join(q + '\n' for q in asked), capture_output=True, text=True, check=True).stdout
    llvm = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(ours) == len(llvm) == len(addrs)
    agree, causes, ex = 0, collections.Counter(), collections.defaultdict(list)
    for addr, o, l in zip(addrs, ours, llvm):
        lf = [(unprefixed(s.get('FunctionName', '')), normalize(s.get('FileName', '')), s.get('Line', 0))
              for s in l.get('Symbol', [])]
        lf = [x for x in lf if x[2] != 0 or x[0] not in ('', '??')]
        # No line on either side: llvm-symbolizer names the unit's file, symdex nothing.
        lf = [(x[0], '', 0) if x[2] == 0 else x for x in lf]
        of = [(unprefixed(f['function']), f['file'] if f['line'] else '', f['line']) for f in o['frames']]
        # Where DWARF names no function, llvm-symbolizer prints none ("" / no frame) and symdex
        # names the containing symbol: compare only what llvm knows.
        if not lf and len(of) == 1 and of[0][2] == 0:
            of = []
        # Where DWARF names no function and no line, llvm-symbolizer may still print the nearest
        # symbol-table label (__kprobes_text_end, ...): no function to compare.
        if not of and len(lf) == 1 and lf[0][2] == 0:
            lf = []
        of = [(lfn[0] if lfn[0] == '' else f[0],) + f[1:] if lfn else f for f, lfn in zip(of, lf + [()] * len(of))]
        # The outermost function under another name of the same code: llvm-symbolizer prints the
        # symbol table's name for a function whose DWARF has no linkage name, and where that code
        # has several names (__alias: __x64_sys_getuid for DWARF's __do_sys_getuid, the weak
        # crc32_le for crc32_le_base) it may print another than DWARF's: the same function if
        # it is the symbol symdex found the address in, or an alias of the same address.
        if of and lf and len(of) == len(lf) and of[-1][0] != lf[-1][0] and of[-1][1:] == lf[-1][1:] and (
                lf[-1][0] == unprefixed(o.get('symbol', '')) or
                addr_of.get(of[-1][0], set()) & addr_of.get(lf[-1][0], set())):
            of = of[:-1] + [lf[-1]]
        if of == lf:
            agree += 1
            continue
        if len(of) != len(lf):
            cause = 'inline chain length differs'
        elif [x[0] for x in of] != [x[0] for x in lf]:
            cause = 'function differs'
        elif [x[1] for x in of] != [x[1] for x in lf]:
            cause = 'file differs'
        else:
            cause = 'line differs'
        causes[cause] += 1
        if len(ex[cause]) < a.show:
            ex[cause].append(f'0x{addr:x}: symdex {of} llvm {lf}')
    rate = 100.0 * agree / len(addrs)
    print(f'{len(addrs)} random vmlinux text addresses: symdex addr == llvm-symbolizer-14 (function, file, line, '
          f'inline chain) for {agree} ({rate:.2f}%)')
    for c, n in causes.most_common():
        print(f'  {n:6d}  {c}')
        for e in ex[c]:
            print('            ' + e)
    return 0 if rate >= a.min_agree else 1


if __name__ == '__main__':
    sys.exit(main())
