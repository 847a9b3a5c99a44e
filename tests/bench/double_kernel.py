#!/usr/bin/env python3
"""A second release's modules made to load beside the first's, for a kernel of twice the modules.

usage: double_kernel.py SRC_KERNEL_DIR DST_DIR FIRST_RELEASE

Every module under SRC_KERNEL_DIR (.ko or .ko.xz, e.g. Debian 6.12's lib/modules/R/kernel) is
written uncompressed under DST_DIR at the same relative path with two changes in its .modinfo,
made in place (same length, so nothing else in the file moves; its build-ID note is unchanged,
so its debug file is still found by build-ID):
  name=      the first character's case swapped (a digit becomes A-J): "af_key" -> "Af_key",
             unique among the second set and unlike any module of the first (whose names
             keep their case), so symdex does not take it for a duplicate of one;
  vermagic=  FIRST_RELEASE in place of the module's own release, padded with spaces: the
             modules of one directory agree on the kernel they belong to.
Prints how many modules it wrote.
"""
import lzma
import os
import struct
import sys


def sections(data):
    shoff, = struct.unpack_from('<Q', data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', data, 0x3a)
    hdr = lambda i: struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * shentsize)
    stroff = hdr(shstrndx)[4]
    for i in range(shnum):
        name, _, _, _, off, size, *_ = hdr(i)
        yield bytes(data[stroff + name:data.index(b'\0', stroff + name)]), off, size


def field(blob, key):
    """Offset of KEY=value's value in a NUL-separated .modinfo blob, and its length."""
    at = 0 if blob.startswith(key + b'=') else blob.find(b'\0' + key + b'=') + 1
    if at <= 0 and not blob.startswith(key + b'='):
        return None
    start = at + len(key) + 1
    return start, blob.index(b'\0', start) - start


def main():
    src_root, dst_root, first = sys.argv[1], sys.argv[2], sys.argv[3].encode()
    names, written = set(), 0
    for dirpath, _, files in os.walk(src_root):
        for f in sorted(files):
            if not f.endswith(('.ko', '.ko.xz')):
                continue
            src = os.path.join(dirpath, f)
            data = bytearray(lzma.open(src).read() if f.endswith('.xz') else open(src, 'rb').read())
            info = next(((off, size) for name, off, size in sections(data) if name == b'.modinfo'), None)
            if info is None:
                sys.exit(f'{src}: no .modinfo')
            off, size = info
            blob = bytes(data[off:off + size])
            name = field(blob, b'name')
            if name is None or not chr(blob[name[0]]).isalnum():
                sys.exit(f'{src}: no name= that starts with a letter or digit')
            c = chr(blob[name[0]])
            data[off + name[0]] = ord(c.swapcase() if c.isalpha() else 'ABCDEFGHIJ'[int(c)])
            new_name = bytes(data[off + name[0]:off + name[0] + name[1]])
            if new_name in names:
                sys.exit(f'{src}: {new_name.decode()} twice')
            names.add(new_name)
            magic = field(blob, b'vermagic')
            if magic is not None:
                start, length = magic
                release_end = blob.find(b' ', start, start + length)
                release_end = start + length if release_end < 0 else release_end
                if len(first) > release_end - start:
                    sys.exit(f'{src}: release {first.decode()} is longer than the module\'s own')
                data[off + start:off + release_end] = first.ljust(release_end - start)
            rel = os.path.relpath(src, src_root)
            dst = os.path.join(dst_root, rel[:-3] if rel.endswith('.xz') else rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst + '.tmp', 'wb') as out:
                out.write(data)
            os.replace(dst + '.tmp', dst)
            written += 1
    print(written)


if __name__ == '__main__':
    main()
