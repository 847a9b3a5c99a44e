#!/usr/bin/env python3
"""Writes a die_scanner_fuzzer seed from a linked ELF file's DWARF sections.
   make_die_scanner_seed.py ELF OUT"""
import struct
import sys


def sections(path):
    d = open(path, "rb").read()
    shoff = struct.unpack_from("<Q", d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    strtab = struct.unpack_from("<Q", d, shoff + shstrndx * shentsize + 0x18)[0]
    out = {}
    for i in range(shnum):
        sh = shoff + i * shentsize
        name = d[strtab + struct.unpack_from("<I", d, sh)[0]:].split(b"\0")[0].decode()
        off, size = struct.unpack_from("<QQ", d, sh + 0x18)
        out.setdefault(name, d[off:off + size])
    return out


s = sections(sys.argv[1])
ranges = s.get(".debug_rnglists") or s.get(".debug_ranges") or b""
seed = b""
for part in (s[".debug_abbrev"], s.get(".debug_str", b""), s.get(".debug_line_str", b""), ranges):
    seed += struct.pack("<I", len(part)) + part
seed += s[".debug_info"]
open(sys.argv[2], "wb").write(seed)
