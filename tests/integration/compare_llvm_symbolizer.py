#!/usr/bin/env python3
"""Compares symdex's entry lines (the line-table row at each text symbol's address) with
llvm-symbolizer-14 --no-inlines on the same vmlinux, for every vmlinux text symbol of a target.

  compare_llvm_symbolizer.py SYMDEX VMLINUX [--target T] [--min-agree 99.5] [--dups-min-agree P] [--show 20]

A function built with -fpatchable-function-entry (arm64) starts with NOPs its line table does not
describe (the rows there are the previous function's): where the vmlinux's code at a symbol starts
with two AArch64 NOPs, llvm-symbolizer is asked at the first instruction after them, as the
kernel's own ftrace code takes them (read here from the ELF file, independently of symdex).

Prints the agreement rate and the disagreements grouped by cause, and the rate over the instances
of duplicated names (`symdex dups`); exits 1 below --min-agree or --dups-min-agree.
"""
import argparse, collections, json, re, struct, subprocess, sys

TOP = ("arch block certs crypto drivers fs include init io_uring ipc kernel lib mm net rust samples "
       "scripts security sound tools usr virt").split()


def normalize(path):
    """Source-tree relative path from whatever prefix llvm-symbolizer prints (independent code:
    cut at the first component that is a kernel top-level directory, after resolving '..')."""
    parts = []
    for p in path.split('/'):
        if p in ('', '.'):
            continue
        if p == '..':
            if parts:
                parts.pop()
            continue
        parts.append(p)
    for i, p in enumerate(parts):
        if p in TOP and i + 1 < len(parts):
            return '/'.join(parts[i:])
    return '/'.join(parts)


def patchable_entries(vmlinux, addrs):
    """{address: entry} for the addresses whose code starts with two AArch64 NOPs (an ELF64
    little-endian AArch64 file; empty for any other)."""
    with open(vmlinux, 'rb') as f:
        data = f.read()
    if data[:4] != b'\x7fELF' or data[4] != 2 or data[5] != 1:
        return {}
    machine = struct.unpack_from('<H', data, 18)[0]
    if machine != 183:  # EM_AARCH64
        return {}
    shoff, = struct.unpack_from('<Q', data, 40)
    shentsize, shnum = struct.unpack_from('<HH', data, 58)
    code = []
    for i in range(shnum):
        _, stype, flags, addr, off, size = struct.unpack_from('<IIQQQQ', data, shoff + i * shentsize)
        if stype == 1 and flags & 4:  # SHT_PROGBITS, SHF_EXECINSTR
            code.append((addr, off, size))
    nop2 = struct.pack('<II', 0xd503201f, 0xd503201f)
    out = {}
    for a in addrs:
        v = int(a, 16)
        for addr, off, size in code:
            if addr <= v and v + 8 <= addr + size:
                if data[off + v - addr:off + v - addr + 8] == nop2:
                    out[a] = f'0x{v + 8:x}'
                break
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('symdex')
    ap.add_argument('vmlinux')
    ap.add_argument('--target', default='')
    ap.add_argument('--min-agree', type=float, default=99.5)
    ap.add_argument('--dups-min-agree', type=float, default=0)
    ap.add_argument('--show', type=int, default=15)
    a = ap.parse_args()

    target = ['-t', a.target] if a.target else []
    cmd = [a.symdex, 'symbols', '-m', 'vmlinux', '--json'] + target
    syms = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)['symbols']
    syms = [s for s in syms if s['type'] in 'tT']
    dups = json.loads(subprocess.run([a.symdex, 'dups', '--json'] + target, check=True, capture_output=True,
                                     text=True).stdout)['duplicates']
    dup_addrs = {i['address'].lower() for g in dups for i in g['instances'] if i['module'] == 'vmlinux' and i['address']}
    addrs = sorted({s['address'] for s in syms})
    entry = patchable_entries(a.vmlinux, addrs)
    asked = [entry.get(x, x) for x in addrs]
    out = subprocess.run(['llvm-symbolizer-14', '--obj=' + a.vmlinux, '--no-inlines', '--output-style=JSON'],
                         input='\n'.join(asked) + '\n', check=True, capture_output=True, text=True).stdout
    answers = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        s = r['Symbol'][0] if r.get('Symbol') else {}
        answers[int(r['Address'], 16)] = (normalize(s.get('FileName', '')), s.get('Line', 0), s.get('FunctionName', ''))
    llvm = {x.lower(): answers.get(int(q, 16), ('', 0, '')) for x, q in zip(addrs, asked)}
    if entry:
        print(f'{len(entry)} symbols start with patchable-entry NOPs: llvm-symbolizer asked 8 bytes on')

    causes = collections.Counter()
    examples = collections.defaultdict(list)
    agree = dup_total = dup_agree = 0
    for s in syms:
        lf, ll, lfn = llvm.get(s['address'].lower(), ('', 0, ''))
        d = s.get('dwarf')
        is_dup = s['address'].lower() in dup_addrs
        dup_total += is_dup
        if (d and d['line'] == ll and d['file'] == lf) or ((not d or not d['line']) and ll == 0):
            agree += 1  # (or both say: no line information here)
            dup_agree += is_dup
            continue
        if not d:
            cause = 'symdex has no DWARF function (' + s.get('dwarf_note', '?') + ')'
        elif ll == 0:
            cause = 'llvm-symbolizer has no line'
        elif d['file'] != lf:
            cause = 'file differs'
        else:
            cause = 'line differs'
        causes[cause] += 1
        if len(examples[cause]) < a.show:
            examples[cause].append(f"{s['name']} @{s['address']}: symdex {d['file'] + ':' + str(d['line']) if d else '-'}"
                                   f"  llvm {lf}:{ll} ({lfn})")
    total = len(syms)
    rate = 100.0 * agree / total if total else 0.0
    dup_rate = 100.0 * dup_agree / dup_total if dup_total else 100.0
    print(f'vmlinux text symbols: {total}; entry file:line agree with llvm-symbolizer-14: {agree} ({rate:.2f}%)')
    print(f'  instances of duplicated names: {dup_total}; agree: {dup_agree} ({dup_rate:.2f}%)')
    for cause, n in causes.most_common():
        print(f'  {n:6d}  {cause}')
        for e in examples[cause]:
            print(f'            {e}')
    failed = 0
    if rate < a.min_agree:
        print(f'FAIL: agreement {rate:.2f}% < {a.min_agree}%')
        failed = 1
    if dup_rate < a.dups_min_agree:
        print(f'FAIL: agreement over duplicated names {dup_rate:.2f}% < {a.dups_min_agree}%')
        failed = 1
    return failed


if __name__ == '__main__':
    sys.exit(main())
