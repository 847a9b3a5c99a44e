#!/usr/bin/env python3
"""A pprof profile from `perf script` output (-F comm,pid,tid,time,event,ip,sym,symoff,dso), for
testing `symdex pprof` on real samples: one Sample per perf sample (value 1), one Location per
distinct (dso, address) with no functions or lines (what a profiler writes before symbolization),
one Mapping per dso — [kernel.kallsyms] with the kernel's build-ID when given.

usage: perf_to_pprof.py PERF_SCRIPT_TXT OUT.pb [KERNEL_BUILD_ID]
The protobuf encoding is written by hand (profile.proto field numbers), gzip-free.
"""
import sys


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_varint(n, v):
    return varint(n << 3) + varint(v)


def field_bytes(n, b):
    return varint(n << 3 | 2) + varint(len(b)) + b


def main():
    src, dst = sys.argv[1], sys.argv[2]
    kernel_id = sys.argv[3] if len(sys.argv) > 3 else ""
    strings = [""]
    index = {"": 0}

    def s(x):
        if x not in index:
            index[x] = len(strings)
            strings.append(x)
        return index[x]

    mappings, locations, samples = {}, {}, []
    cur = None
    for line in open(src, errors="replace"):
        line = line.rstrip("\n")
        if not line.strip():
            if cur:
                samples.append(cur)
            cur = None
            continue
        if not line.startswith("\t") and not line.startswith(" "):
            if cur:
                samples.append(cur)
            cur = []
            continue
        p = line.split()
        if cur is None or len(p) < 3:
            continue
        dso = p[-1].strip("()")
        try:
            addr = int(p[0], 16)
        except ValueError:
            continue
        if dso == "[unknown]" or addr == 0:
            continue
        if dso not in mappings:
            mappings[dso] = len(mappings) + 1
        key = (dso, addr)
        if key not in locations:
            locations[key] = len(locations) + 1
        cur.append(locations[key])
    if cur:
        samples.append(cur)
    out = bytearray()
    out += field_bytes(1, field_varint(1, s("samples")) + field_varint(2, s("count")))  # sample_type
    for stack in samples:
        if stack:
            packed = b"".join(varint(x) for x in stack)
            out += field_bytes(2, field_bytes(1, packed) + field_varint(2, 1))
    for dso, mid in mappings.items():
        m = field_varint(1, mid) + field_varint(5, s(dso))
        if dso == "[kernel.kallsyms]" and kernel_id:
            m += field_varint(6, s(kernel_id))
        out += field_bytes(3, m)
    for (dso, addr), lid in locations.items():
        out += field_bytes(4, field_varint(1, lid) + field_varint(2, mappings[dso]) + field_varint(3, addr))
    for x in strings:
        out += field_bytes(6, x.encode())
    with open(dst, "wb") as f:
        f.write(out)
    print(f"{len(samples)} samples, {len(locations)} locations, {len(mappings)} mappings")


if __name__ == "__main__":
    main()
