#!/usr/bin/env python3
"""Compares symdex's entry lines (the line-table row at each text symbol's address) with
llvm-symbolizer-14 --no-inlines on the same vmlinux, for every vmlinux text symbol of a target.

  compare_llvm_symbolizer.py SYMDEX VMLINUX [--target T] [--min-agree 99.5] [--show 20]

Prints the agreement rate and the disagreements grouped by cause; exits 1 below --min-agree.
"""
import argparse, collections, json, re, subprocess, sys

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('symdex')
    ap.add_argument('vmlinux')
    ap.add_argument('--target', default='')
    ap.add_argument('--min-agree', type=float, default=99.5)
    ap.add_argument('--show', type=int, default=15)
    a = ap.parse_args()

    cmd = [a.symdex, 'symbols', '-m', 'vmlinux', '--json'] + (['-t', a.target] if a.target else [])
    syms = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)['symbols']
    syms = [s for s in syms if s['type'] in 'tT']
    addrs = sorted({s['address'] for s in syms})
    out = subprocess.run(['llvm-symbolizer-14', '--obj=' + a.vmlinux, '--no-inlines', '--output-style=JSON'],
                         input='\n'.join(addrs) + '\n', check=True, capture_output=True, text=True).stdout
    llvm = {}
    for line in out.splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        s = r['Symbol'][0] if r.get('Symbol') else {}
        llvm[r['Address'].lower()] = (normalize(s.get('FileName', '')), s.get('Line', 0), s.get('FunctionName', ''))

    causes = collections.Counter()
    examples = collections.defaultdict(list)
    agree = 0
    for s in syms:
        lf, ll, lfn = llvm.get(s['address'].lower(), ('', 0, ''))
        d = s.get('dwarf')
        if d and d['line'] == ll and d['file'] == lf:
            agree += 1
            continue
        if (not d or not d['line']) and ll == 0:
            agree += 1  # both say: no line information here
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
    print(f'vmlinux text symbols: {total}; entry file:line agree with llvm-symbolizer-14: {agree} ({rate:.2f}%)')
    for cause, n in causes.most_common():
        print(f'  {n:6d}  {cause}')
        for e in examples[cause]:
            print(f'            {e}')
    if rate < a.min_agree:
        print(f'FAIL: agreement {rate:.2f}% < {a.min_agree}%')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
