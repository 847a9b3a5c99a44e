#!/usr/bin/env python3
"""Which symbol `symdex addr` names where several vmlinux code symbols share an address, compared
with the one llvm-symbolizer-14 picks from the ELF symbol table (a --strip-debug copy of the
debug vmlinux, so that llvm answers from .symtab alone and not from DWARF).

Every address of the System.map where two or more code symbols (t/T/w/W/i) start is asked, at
offset 0 (the start, where the choice among aliases is all there is to decide) and, when the
next symbol is further, at +1 (inside: the same choice, through the containment rule).

  compare_alias_llvm.py SYMDEX VMLINUX_NODEBUG SYSTEM_MAP [--slide N] [--max-differ 0] [--show 20]

--slide: add N to every address before asking symdex (a live-style target whose kallsyms were
made from the System.map with a KASLR slide); llvm is asked the link-time address.
llvm-symbolizer-14 ranks the symbols at an address by size alone (the largest; among equal
sizes the last in symbol-table order). Each difference is classified by the ELF symbol table
(readelf -sW of VMLINUX): "same size" when symdex's symbol is as large as llvm's (symdex then
decides by type, binding and name: __x64_sys_fork rather than __ia32_sys_fork, where llvm's
pick is the order of the table), "labels only" when every symbol there is a size-0 label
(symdex: an end-of-region label holds nothing), otherwise "smaller": symdex names a symbol
smaller than llvm's, or none. Exits 1 when more than --max-differ are "smaller".
"""
import argparse, collections, json, subprocess, sys

CODE = set('tTwWi')


def elf_facts(vmlinux):
    """(address, name) -> (size > 0, type, binding), and -> size, from the ELF symbol table."""
    out, size = {}, {}
    for line in subprocess.run(['readelf', '-sW', vmlinux], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(':'):
            continue
        try:
            out[(int(f[1], 16), f[7])] = (int(f[2], 0) > 0, f[3], f[4])
            size[(int(f[1], 16), f[7])] = int(f[2], 0)
        except ValueError:
            pass
    return out, size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('symdex')
    ap.add_argument('vmlinux')
    ap.add_argument('system_map')
    ap.add_argument('--slide', type=lambda s: int(s, 0), default=0)
    ap.add_argument('--max-differ', type=int, default=0)
    ap.add_argument('--show', type=int, default=20)
    ap.add_argument('--symdex-args', default='', help='extra arguments before "addr" (e.g. "--db X")')
    a = ap.parse_args()
    at = collections.defaultdict(list)
    for line in open(a.system_map):
        f = line.split()
        if len(f) >= 3 and f[1] in CODE:
            at[int(f[0], 16)].append(f[2])
    addrs = sorted(at)
    shared = [x for x in addrs if len(at[x]) > 1]
    nxt = {x: y for x, y in zip(addrs, addrs[1:])}
    asks = []
    for x in shared:
        asks.append(x)
        if nxt.get(x, x) > x + 1:
            asks.append(x + 1)
    text = ''.join(f'0x{x + a.slide:x}\n' for x in asks)
    cmd = [a.symdex] + a.symdex_args.split() + ['addr', '--json', '-']
    ours = json.loads(subprocess.run(cmd, input=text, capture_output=True, text=True).stdout)['results']
    out = subprocess.run(['llvm-symbolizer-14', '--obj=' + a.vmlinux, '--output-style=JSON'],
                         input=''.join(f'0x{x:x}\n' for x in asks), capture_output=True, text=True, check=True).stdout
    llvm = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(ours) == len(llvm) == len(asks), (len(ours), len(llvm), len(asks))
    facts, size = elf_facts(a.vmlinux)
    differ, pairs, kinds = [], collections.Counter(), collections.Counter()
    for x, o, l in zip(asks, ours, llvm):
        ln = next((s.get('FunctionName', '') for s in l.get('Symbol', [])), '')
        on = o.get('symbol', '')
        if ln in ('', '??') or on == ln:
            continue
        start = x if x in at else x - 1
        if all(facts.get((start, n), (False, 'NOTYPE'))[:2] == (False, 'NOTYPE') for n in at[start]):
            kind = 'labels only'
        elif on and size.get((start, on), -1) >= size.get((start, ln), 0):
            kind = 'same size'
        else:
            kind = 'smaller'
        kinds[kind] += 1
        differ.append((x, on, ln, kind))
        pairs[(on or '(none)', ln, kind)] += 1
    starts = sum(1 for x in asks if x in at)
    print(f'{len(shared)} vmlinux addresses where 2+ code symbols start ({sum(len(at[x]) for x in shared)} symbols); '
          f'{len(asks)} asked ({starts} starts, {len(asks) - starts} at +1)')
    print(f'symdex addr names a different symbol than llvm-symbolizer-14 (.symtab) at {len(differ)} of them '
          f'({len({d[0] if d[0] in at else d[0] - 1 for d in differ})} addresses)')
    print('  by kind: ' + ', '.join(f'{k} {n}' for k, n in sorted(kinds.items())))
    for (on, ln, kind), n in sorted(pairs.items(), key=lambda kv: (kv[0][2] != 'smaller', -kv[1]))[:a.show]:
        print(f'  {n:4d}  {kind:11s}  symdex {on:42s} llvm {ln}')
    return 0 if kinds['smaller'] <= a.max_differ else 1


if __name__ == '__main__':
    sys.exit(main())
