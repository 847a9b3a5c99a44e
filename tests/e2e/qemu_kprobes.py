#!/usr/bin/python3
"""End-to-end: symdex's kprobe definitions on a real Debian cloud kernel booted under qemu.

In ONE boot (KASLR differs per boot):
  1. build an initramfs: busybox-static, guest-init.sh as /init, a few modules of the image
     package with their dependencies (from each module's .modinfo 'depends=', in load order);
  2. boot it under qemu (TCG); the guest loads the modules and sends back, over the control
     channel (a second UART; on arm64 a virtio-serial port),
     /proc/kallsyms, /proc/modules, osrelease, kptr_restrict, /sys/kernel/notes and every loaded
     module's /sys/module/M/{sections/*,notes/.note.gnu.build-id} (a tar.gz, base64, sha256);
  3. the host rebuilds them as a sysroot and runs 'symdex index --sysroot' with the -dbg
     package's debug files, picks duplicated names (vmlinux and module instances) from
     'symdex dups --json' and asks 'symdex kprobe -n -e GRP/EVENT NAME@FILE:LINE' for each
     (NAME@FILE:LINE#CU where copies share a file:line; MOD: prefix for module instances);
     host-side it also checks that the line's target is the instance's address in the captured
     kallsyms, and that 'symdex resolve' of the spec gives the instance and its canonical spec
     the same kprobe line;
  4. the guest writes every line to tracefs kprobe_events (>>) and reports success with the
     /sys/kernel/debug/kprobes/list entry that write added, or errno + error_log; the host checks
     every line was accepted, each added entry is NAME+0x0 [MOD] at the instance's kallsyms
     address, the final list holds them all, they arm when the group is enabled, and the plain
     'p:t/plain name_show' is refused ("Cannot assign requested address" / error_log
     "The symbol is not unique").

Architectures (--arch): x86_64 (qemu-system-x86_64, the control channel a second UART) and arm64
(qemu-system-aarch64 -M virt: one PL011 UART, so the channel is a virtio-serial port; the console
is a socket the driver drains, which also lets it send a serial break + sysrq keys for register
dumps - "pc : / lr : / Call trace:" - and a source-line check against llvm-symbolizer).

usage: qemu_kprobes.py --symdex BIN --image-root DIR --dbg-root DIR --krel REL [--arch A] [--work DIR]
Exit: 0 all checks passed, 1 a check failed, 77 skipped (qemu/corpus/busybox unavailable).
Env:  SYMDEX_E2E_USE_PROBE_FIELD=1  take each instance's kallsyms-level "probe" field from
      'symdex dups' instead of calling 'symdex kprobe' (development fallback; says so loudly).
      SYMDEX_E2E_KEEP=1  keep the work dir.  SYMDEX_E2E_VERBOSE=1  echo the guest console.
      SYMDEX_E2E_TIMEOUT  seconds for the whole guest session (default 480).
"""

import argparse
import base64
import collections
import gzip
import hashlib
import io
import json
import lzma
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

import decode_traces
import fleet_frames
import probe_values
import source_lines
import verdicts

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
GROUP = "e2e"

# Modules to load: small, load without their hardware, and carry names duplicated with
# vmlinux (uio, mei, virtio: name_show, version_show, modalias_show, ...) or inside
# themselves (virtio_pci: vp_get, setup_vq, ... in both virtio_pci_modern.c and
# virtio_pci_legacy.c -> only an address form identifies them), plus nfnetlink_log
# (seq_show, ...; pulls in nfnetlink as a dependency). arm64 has no mei (x86 only): dax takes
# its place (align_show, id_show, modalias_show, size_show, ... also in vmlinux); virtio_pci and
# virtio_console carry the control channel there, a virtio-serial port on PCI.
# Per architecture: the Debian architecture, qemu and its package, the machine's arguments, the
# console, the control channel, the link-time address of _text (the KASLR slide's base, logged).
ARCHS = {
    "x86_64": {
        "debian": "amd64", "qemu": "qemu-system-x86_64", "qemu_pkg": "qemu-system-x86",
        "machine": ["-cpu", "max"], "console": "ttyS0", "ctl": "uart", "elf_machine": 62,
        "modules": ["uio", "mei", "virtio_pci", "nfnetlink_log"], "substitutes": ["dax"],
    },
    "arm64": {
        # pauth-impdef: Debian's arm64 kernel signs every return address (pac-ret); TCG's
        # emulation of the architected QARMA algorithm makes the boot ~8x slower (~30 s to /init
        # instead of ~4 s), the IMPDEF one is as good for a test (-cpu max all the same).
        "debian": "arm64", "qemu": "qemu-system-aarch64", "qemu_pkg": "qemu-system-arm",
        "machine": ["-M", "virt", "-cpu", "max,pauth-impdef=on"], "console": "ttyAMA0", "ctl": "virtio",
        "elf_machine": 183,
        "modules": ["virtio_pci", "virtio_console", "uio", "dax", "nfnetlink_log"],
    },
}
MODULES = ARCHS["x86_64"]["modules"]
CTL_PORT = "e2e"  # the virtio-serial port's name (arm64)

# Names tried first (in this order); then any other eligible duplicated name fills up.
PREFERRED = ["name_show", "version_show", "vp_get", "vp_set_status", "event_show",
             "map_release", "uuid_show", "device_show", "seq_show", "status_show",
             "features_show", "type_show", "del_vq",
             # file:line shared by several copies -> NAME@FILE:LINE#CU
             "load_elf_binary", "elf_core_dump"]  # fs/binfmt_elf.c, #included by compat_binfmt_elf.c
MIN_NAMES = 10
KERNEL_REGS_TRIES = 20  # sysrq register dumps until one interrupts the kernel (arm64)
MAX_PER_NAME = 9
# Functions the kernel frees after init or cannot probe, whatever symdex says.
NEVER = {"init_module", "cleanup_module"}

T0 = time.monotonic()


def log(msg):
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


class Skip(Exception):
    pass


class Fail(Exception):
    pass


# ------------------------------------------------------------------------------------------
# initramfs
# ------------------------------------------------------------------------------------------

MODULE_SUFFIXES = (".ko", ".ko.xz", ".ko.gz")  # Debian 6.1 ships .ko, 6.12 .ko.xz


def module_bytes(path):
    """The module's ELF bytes: a compressed one (.ko.xz, .ko.gz) decompressed, as busybox's
    insmod needs it."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".xz"):
        return lzma.decompress(data)
    if path.endswith(".gz"):
        return gzip.decompress(data)
    return data


def modinfo(path):
    """Key/value pairs of an ELF64 module's .modinfo section (stdlib only)."""
    data = module_bytes(path)
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise Fail(f"{path}: not a little-endian ELF64 file (compressed module?)")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def sh(i):
        name, _type, _flags, _addr, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, off, size

    _, stroff, _ = sh(shstrndx)
    out = collections.defaultdict(list)
    for i in range(shnum):
        name, off, size = sh(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] == b".modinfo":
            for kv in data[off:off + size].split(b"\0"):
                if b"=" in kv:
                    k, v = kv.decode(errors="replace").split("=", 1)
                    out[k].append(v)
    return out


def module_files(moddir):
    """{module name: path} of every module file under moddir."""
    files = {}
    for dirpath, _dirs, names in os.walk(moddir):
        for n in names:
            suffix = next((x for x in MODULE_SUFFIXES if n.endswith(x)), None)
            if suffix:
                files[n[:-len(suffix)].replace("-", "_")] = os.path.join(dirpath, n)
    return files


def modules_to_load(moddir, arch):
    """The architecture's modules this kernel builds; for each it does not (Debian's 6.12 cloud
    kernel has no mei), the next of its substitutes that it does."""
    have = module_files(moddir)
    wanted = [m for m in ARCHS[arch]["modules"] if m in have]
    spare = [m for m in ARCHS[arch].get("substitutes", []) if m in have and m not in wanted]
    missing = len(ARCHS[arch]["modules"]) - len(wanted)
    return wanted + spare[:missing]


def module_load_order(moddir, wanted):
    """wanted modules plus their dependencies, dependencies first; {name: path}."""
    files = module_files(moddir)
    order, seen = [], set()

    def visit(m, chain):
        if m in seen:
            return
        if m in chain:
            raise Fail(f"module dependency cycle: {' -> '.join(chain + [m])}")
        if m not in files:
            raise Skip(f"module {m} not found under {moddir}")
        deps = [d for v in modinfo(files[m]).get("depends", []) for d in v.split(",") if d]
        for d in deps:
            visit(d.replace("-", "_"), chain + [m])
        seen.add(m)
        order.append(m)

    for m in wanted:
        visit(m, [])
    return [(m, files[m]) for m in order]


def cpio_newc(entries):
    """entries: (path, mode, data bytes or None for dirs). Returns an uncompressed newc archive."""
    out = io.BytesIO()
    ino = 1
    for path, mode, data in entries + [("TRAILER!!!", 0, b"")]:
        data = data or b""
        name = path.encode() + b"\0"
        hdr = b"070701" + b"".join(b"%08X" % v for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name), 0))
        out.write(hdr + name)
        out.write(b"\0" * (-(len(hdr) + len(name)) % 4))
        out.write(data)
        out.write(b"\0" * (-len(data) % 4))
        ino += 1
    return out.getvalue()


def build_initramfs(dst, busybox, modules, arch="x86_64", conf_extra=""):
    with open(busybox, "rb") as f:
        bb = f.read()
    with open(os.path.join(HERE, "guest-init.sh"), "rb") as f:
        init = f.read()
    ents = [(d, 0o040755, None) for d in
            ("bin", "dev", "proc", "sys", "tmp", "lib", "lib/modules")]
    conf = f"CTL_PORT={CTL_PORT}\n" if ARCHS[arch]["ctl"] == "virtio" else "CTL_TTY=/dev/ttyS1\n"
    conf += conf_extra
    ents += [("bin/busybox", 0o100755, bb), ("init", 0o100755, init), ("e2e.conf", 0o100644, conf.encode()),
             ("modules.order", 0o100644, "".join(m + "\n" for m, _ in modules).encode())]
    for m, path in modules:
        ents.append((f"lib/modules/{m}.ko", 0o100644, module_bytes(path)))
    blob = cpio_newc(ents)
    with open(dst, "wb") as f:
        f.write(blob)
    return len(blob)


# ------------------------------------------------------------------------------------------
# the guest session
# ------------------------------------------------------------------------------------------

class Guest:
    """qemu with the console -> console.log and a unix socket carrying the framed protocol:
    x86_64: ttyS0 -> console.log (a file), ttyS1 -> the control socket;
    arm64 (-M virt, one PL011): ttyAMA0 -> a socket (mux: its escape C-a b sends a serial break)
    drained into console.log by a thread, a virtio-serial port named e2e -> the control socket."""

    def __init__(self, work, kernel, initrd, timeout, arch="x86_64", memory="1024", extra=()):
        A = ARCHS[arch]
        self.deadline = time.monotonic() + timeout
        self.console = os.path.join(work, "console.log")
        sock = os.path.join(work, "ctl.sock")
        consock = os.path.join(work, "con.sock")
        for p in (sock, consock):
            if os.path.exists(p):
                os.unlink(p)
        self.cmd = [A["qemu"], "-accel", "tcg"] + A["machine"] + [
            "-m", memory, "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", kernel, "-initrd", initrd,
            "-append", f"console={A['console']} loglevel=4 panic=-1 oops=panic"] + list(extra)
        if A["ctl"] == "uart":
            self.cmd += ["-chardev", f"file,id=con,path={self.console}", "-serial", "chardev:con",
                         "-chardev", f"socket,id=ctl,path={sock},server=on,wait=on", "-serial", "chardev:ctl"]
            socks = [sock]
        else:
            self.cmd += ["-chardev", f"socket,id=con,path={consock},server=on,wait=on,mux=on",
                         "-serial", "chardev:con",
                         "-chardev", f"socket,id=ctl,path={sock},server=on,wait=on",
                         "-device", "virtio-serial-pci,id=vs",
                         "-device", f"virtserialport,bus=vs.0,chardev=ctl,name={CTL_PORT}"]
            socks = [consock, sock]  # qemu waits for them in this order
        self.qemu_log = os.path.join(work, "qemu.log")
        with open(self.qemu_log, "wb") as qlog:  # never a pipe nobody drains
            self.qemu = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=qlog,
                                         stderr=subprocess.STDOUT)
        conns = []
        for path in socks:
            conns.append(self._connect(path))
        self.s = conns[-1]
        self.con = conns[0] if len(conns) > 1 else None
        self.drain = None
        self.seen = b""  # the console so far (arm64), for wait_console
        self.seen_cv = threading.Condition()
        if self.con is not None:
            self.drain = threading.Thread(target=self._drain, daemon=True)
            self.drain.start()
        self.buf = b""
        self.noise = 0

    def _connect(self, path):
        while True:
            if self.qemu.poll() is not None:
                with open(self.qemu_log, errors="replace") as f:
                    raise Fail(f"qemu exited with {self.qemu.returncode} before the guest started:\n"
                               + f.read())
            if time.monotonic() > self.deadline:
                raise Fail(f"qemu did not open its socket {path}")
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(path)
                return s
            except OSError:
                s.close()
                time.sleep(0.05)

    def _drain(self):
        """The console socket into console.log, until qemu closes it."""
        with open(self.console, "ab") as f:
            while True:
                try:
                    b = self.con.recv(1 << 16)
                except OSError:
                    b = b""
                with self.seen_cv:
                    if not b:
                        self.con_closed = True
                        self.seen_cv.notify_all()
                        return
                    self.seen += b
                    self.seen_cv.notify_all()
                f.write(b)
                f.flush()

    def wait_console(self, text, start=0):
        """Until the console shows `text` past offset `start` (a console socket only)."""
        with self.seen_cv:
            while self.seen.find(text, start) < 0:
                left = self.deadline - time.monotonic()
                if left <= 0 or getattr(self, "con_closed", False):
                    raise Fail(f"the guest console never showed {text!r}")
                self.seen_cv.wait(left)

    def sysrq(self, keys):
        """Each key as the kernel's serial console sysrq: a break (the mux's C-a b), then the key.
        Handled in the UART's interrupt, so show_regs() has the interrupted context's registers."""
        if self.con is None:
            raise Fail("no console socket to send a serial break on")
        for k in keys:
            # Apart, not in one write: a 6.12 PL011 that sees the next break before the key takes
            # the break's NUL for the key (and prints the sysrq help instead).
            self.con.sendall(b"\x01b")
            time.sleep(0.2)
            self.con.sendall(k.encode())
            time.sleep(0.2)

    def _line(self):
        while b"\n" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise Fail("timed out waiting for the guest (see console log)")
            self.s.settimeout(left)
            try:
                chunk = self.s.recv(1 << 16)
            except socket.timeout:
                raise Fail("timed out waiting for the guest (see console log)")
            if not chunk:
                raise Fail("guest closed the control channel (see console log)")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.rstrip(b"\r")

    def msg(self):
        """Next '@@E2E ...' message (tag, rest); anything else on the wire is counted as noise."""
        while True:
            line = self._line()
            i = line.find(b"@@E2E ")
            if i < 0:
                self.noise += 1
                continue
            parts = line[i + 6:].decode(errors="replace").split(" ", 1)
            if parts[0] == "FATAL":
                raise Fail(f"guest: {parts[1] if len(parts) > 1 else ''}")
            return parts[0], (parts[1] if len(parts) > 1 else "")

    def expect(self, tag):
        t, rest = self.msg()
        if t != tag:
            raise Fail(f"guest protocol: expected {tag}, got {t} {rest}")
        return rest

    def modules(self):
        """The modules the guest loaded (each must have loaded), and the message after them."""
        loaded = []
        while True:
            t, rest = self.msg()
            if t != "MOD":
                return loaded, (t, rest)
            m, st = rest.split(" ", 1)
            if st != "ok":
                raise Fail(f"insmod {m} failed in the guest: {st}")
            loaded.append(m)

    def file(self, name, got=None):
        got = got if got is not None else self.expect("BEGIN")
        if got != name:
            raise Fail(f"guest protocol: expected file {name}, got {got}")
        chunks = []
        while True:
            line = self._line()
            i = line.find(b"@@E2E END ")
            if i >= 0:
                _n, digest = line[i + 10:].decode().split()
                break
            chunks.append(line.strip())
        data = base64.b64decode(b"".join(chunks))
        if hashlib.sha256(data).hexdigest() != digest:
            raise Fail(f"{name}: checksum mismatch after the serial transfer")
        return data

    def send(self, line):
        self.s.sendall(line.encode() + b"\n")

    def close(self):
        try:
            if self.s:
                self.s.close()
            self.qemu.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.qemu.kill()
            self.qemu.wait()
        if self.drain is not None:
            self.drain.join(timeout=5)
            self.con.close()

    def kill(self):
        if self.qemu.poll() is None:
            self.qemu.kill()
            self.qemu.wait()


# ------------------------------------------------------------------------------------------
# host side: kallsyms, symdex
# ------------------------------------------------------------------------------------------

def parse_kallsyms(text):
    """{(name, module or 'vmlinux'): [addr, ...]}, and the KASLR-proof anchor (name, address):
    _text, or _stext where kallsyms lists no _text (arm64: _text is the image header, outside
    the text range kallsyms keeps without CONFIG_KALLSYMS_ALL)."""
    syms = collections.defaultdict(list)
    for ln in text.splitlines():
        f = ln.split()
        if len(f) < 3:
            continue
        mod = f[3].strip("[]") if len(f) > 3 else "vmlinux"
        syms[(f[2], mod)].append(int(f[0], 16))
    for name in ("_text", "_stext"):
        if syms.get((name, "vmlinux")):
            return syms, (name, syms[(name, "vmlinux")][0])
    return syms, ("_text", 0)


def link_anchor(system_map, name):
    """The link-time address of `name` in the -dbg package's System.map (0 if absent)."""
    try:
        with open(system_map) as f:
            for ln in f:
                p = ln.split()
                if len(p) == 3 and p[2] == name:
                    return int(p[0], 16)
    except OSError:
        pass
    return 0


def elf_machine(path):
    with open(path, "rb") as f:
        h = f.read(20)
    return struct.unpack_from("<H", h, 18)[0] if h[:4] == b"\x7fELF" and len(h) == 20 else None


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def eligible(inst):
    """Instances the kernel lets kprobe_events probe. Functions defined in headers are out: the
    kernel's 'inline' carries 'notrace', and with CONFIG_KPROBE_EVENTS_ON_NOTRACE=n (Debian) a
    probe on a notrace function fails with EINVAL / "Failed to register probe event" (seen here
    for ext4_es_is_delayed and zstd's BIT_initDStream, a MEM_STATIC = static __inline that DWARF
    does not flag as inline). Assembly has no DWARF function; .cold parts and init code neither."""
    d = inst.get("dwarf") or {}
    name = inst["name"]
    return (inst.get("type") in ("t", "T") and d.get("file") and d.get("line")
            and d.get("function") and not name.endswith(".cold") and name not in NEVER
            and d["file"].endswith(".c") and not d.get("inline_copy") and inst.get("address"))


def choose(dups):
    """[(name, [instances])]: >= MIN_NAMES duplicated names. An instance is usable when
    NAME@FILE:LINE names exactly it, or NAME@FILE:LINE#CU does (file:line shared by several
    copies: a header static inline emitted in many CUs, fs/compat_binfmt_elf.c #including
    fs/binfmt_elf.c); such instances get inst["_by_cu"] = True."""
    groups = {}
    for g in dups["duplicates"]:
        fl = collections.Counter((i["dwarf"]["file"], i["dwarf"]["line"])
                                 for i in g["instances"] if i.get("dwarf"))
        flc = collections.Counter((i["dwarf"]["file"], i["dwarf"]["line"], i["dwarf"].get("cu"))
                                  for i in g["instances"] if i.get("dwarf"))
        insts = []
        for i in g["instances"]:
            if not eligible(i):
                continue
            d = i["dwarf"]
            if fl[(d["file"], d["line"])] == 1:
                insts.append(dict(i, _by_cu=False))
            elif d.get("cu") and flc[(d["file"], d["line"], d["cu"])] == 1:
                insts.append(dict(i, _by_cu=True))
        if insts:
            groups.setdefault(g["instances"][0]["name"], insts)
    picked = [n for n in PREFERRED if n in groups]
    # fill up with names that mix vmlinux and module instances, then anything
    mixed = sorted(n for n, v in groups.items() if n not in picked and
                   any(i["module"] == "vmlinux" for i in v) and any(i["module"] != "vmlinux" for i in v))
    rest = sorted(n for n in groups if n not in picked and n not in mixed)
    for n in mixed + rest:
        if len(picked) >= MIN_NAMES + 2:
            break
        picked.append(n)
    return [(n, groups[n][:MAX_PER_NAME]) for n in picked]


def spec_of(inst):
    d = inst["dwarf"]
    s = f"{inst['name']}@{d['file']}:{d['line']}"
    if inst.get("_by_cu"):
        s += f"#{d['cu']}"
    return s if inst["module"] == "vmlinux" else f"{inst['module']}:{s}"


def event_name(i, name):
    return f"p{i:02d}_" + re.sub(r"[^A-Za-z0-9_]", "_", name)[:40]


def target_address(target, syms, text_base):
    """Address a kprobe_events target ([MOD:]SYM[+off] | _text+N | _stext+N | 0xADDR) names, as
    the kernel would resolve it against the captured kallsyms; None if it is not exactly one.
    (_stext, like any symbol, by its kallsyms line: the kernel knows no _text where it lists none.)"""
    m = re.fullmatch(r"(?:([\w.]+):)?([\w.$]+)(?:\+(0x[0-9a-fA-F]+|\d+))?", target)
    if re.fullmatch(r"0x[0-9a-fA-F]+", target):
        return int(target, 16)
    if not m:
        return None
    mod, sym, off = m.group(1), m.group(2), m.group(3)
    off = int(off, 0) if off else 0
    addrs = [a for (n, md), v in syms.items() if n == sym and (mod is None or md == mod) for a in v]
    return addrs[0] + off if len(addrs) == 1 else None


# ------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--symdex", required=True)
    ap.add_argument("--image-root", required=True)
    ap.add_argument("--dbg-root", required=True)
    ap.add_argument("--krel", required=True)
    ap.add_argument("--busybox", default="/bin/busybox")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="x86_64")
    ap.add_argument("--work")
    a = ap.parse_args()
    A = ARCHS[a.arch]
    use_probe_field = os.environ.get("SYMDEX_E2E_USE_PROBE_FIELD") == "1"
    verbose = os.environ.get("SYMDEX_E2E_VERBOSE") == "1"
    timeout = float(os.environ.get("SYMDEX_E2E_TIMEOUT", "480"))

    if not shutil.which(A["qemu"]):
        raise Skip(f"{A['qemu']} not installed (apt-get install {A['qemu_pkg']})")
    kernel = os.path.join(a.image_root, "boot", f"vmlinuz-{a.krel}")
    moddir = os.path.join(a.image_root, "lib", "modules", a.krel, "kernel")
    debug = os.path.join(a.dbg_root, "usr", "lib", "debug")
    for p in (kernel, moddir, os.path.join(debug, "boot", f"vmlinux-{a.krel}")):
        if not os.path.exists(p):
            raise Skip(f"corpus incomplete: {p} missing")
    if not os.path.isfile(a.busybox) or (
            shutil.which("file") and "statically linked" not in run(["file", "-bL", a.busybox]).stdout):
        raise Skip(f"{a.busybox} is not a static busybox (apt-get install busybox-static)")
    if elf_machine(a.busybox) != A["elf_machine"]:
        raise Skip(f"{a.busybox} is not an {a.arch} program (busybox-static:{A['debian']}: "
                   f"SYMDEX_KERNEL_ARCH={A['debian']} tests/corpus/fetch-debian-kernel.sh busybox)")
    if elf_machine(os.path.join(debug, "boot", f"vmlinux-{a.krel}")) != A["elf_machine"]:
        raise Fail(f"vmlinux-{a.krel} is not an {a.arch} kernel")

    if not use_probe_field:
        top = run([a.symdex, "--help"]).stdout
        if not re.search(r"^\s+kprobe\s", top, re.M):
            raise Fail(f"{a.symdex} has no 'kprobe' verb; to exercise the rest of "
                       "the harness with each instance's kallsyms-level 'probe' field from 'symdex dups' "
                       "instead, run with SYMDEX_E2E_USE_PROBE_FIELD=1")

    work = a.work or tempfile.mkdtemp(prefix="symdex-e2e.")
    os.makedirs(work, exist_ok=True)
    log(f"kernel {a.krel} ({a.arch}), work dir {work}")
    if use_probe_field:
        print("*" * 78 + "\n* SYMDEX_E2E_USE_PROBE_FIELD=1: probe lines come from the 'probe' field of\n"
              "* 'symdex dups --json', NOT from 'symdex kprobe' - a development fallback.\n" + "*" * 78,
              flush=True)

    # 1. initramfs
    mods = module_load_order(moddir, modules_to_load(moddir, a.arch))
    initrd = os.path.join(work, "initrd.cpio")
    size = build_initramfs(initrd, a.busybox, mods, a.arch)
    log(f"initramfs {size // 1024} KiB: busybox + modules {' '.join(m for m, _ in mods)}")

    # 2. boot
    guest = Guest(work, kernel, initrd, timeout, a.arch)
    failures = []
    try:
        rel = guest.expect("BOOTED")
        log(f"guest booted: {rel}")
        if rel != a.krel:
            raise Fail(f"guest runs {rel}, expected {a.krel}")
        loaded, (t, rest) = guest.modules()
        log(f"modules loaded: {' '.join(loaded)}")
        if t != "BEGIN" or rest != "capture":
            raise Fail(f"guest protocol: expected the capture, got {t} {rest}")
        capture = guest.file("capture", got=rest)
        guest.expect("READY")
        log(f"capture received: {len(capture) // 1024} KiB tar.gz over the serial line")

        # 3. sysroot + index
        sysroot = os.path.join(work, "sysroot")
        shutil.rmtree(sysroot, ignore_errors=True)
        with tarfile.open(fileobj=io.BytesIO(capture)) as tf:
            tf.extractall(sysroot, filter="data") if hasattr(tarfile, "data_filter") else tf.extractall(sysroot)
        with open(os.path.join(sysroot, "proc/kallsyms")) as f:
            kallsyms = f.read()
        syms, (anchor, text_base) = parse_kallsyms(kallsyms)
        with open(os.path.join(sysroot, "proc/sys/kernel/kptr_restrict")) as f:
            kptr = f.read().strip()
        nmods = len(os.listdir(os.path.join(sysroot, "sys/module")))
        sysmap = os.path.join(debug, "boot", f"System.map-{a.krel}")
        link = link_anchor(sysmap, anchor)
        log(f"sysroot: {len(kallsyms.splitlines())} kallsyms lines, {anchor} {text_base:#x} "
            f"(KASLR slide {(text_base - link) & (2**64 - 1):#x}), kptr_restrict {kptr}, "
            f"{nmods} modules' sections/notes")
        if text_base == 0:
            raise Fail("captured kallsyms has no _text/_stext address (kptr_restrict?)")

        db = os.path.join(work, "index.db")
        env = dict(os.environ)
        env.pop("DEBUGINFOD_URLS", None)
        config = os.path.join(a.image_root, "boot", f"config-{a.krel}")
        r = run([a.symdex, "--db", db, "index", "--sysroot", sysroot, "--debug-dir", debug,
                 "--no-debuginfod", "--kernel-config", config, "--json"], env=env)
        if r.returncode != 0:
            raise Fail(f"symdex index --sysroot failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        log("symdex index --sysroot: " + summarize_index(r.stdout))
        # The entry layout read from vmlinux's records must be the one the kernel's config selects.
        mismatch = [w for w in json.loads(r.stdout).get("warnings", []) if "entry layout" in w]
        if mismatch:
            raise Fail("; ".join(mismatch))
        r = run([a.symdex, "--db", db, "status", "--json"], env=env)
        with open(os.path.join(work, "status.json"), "w") as f:
            f.write(r.stdout)
        try:
            used = {d["module"]: d["status"] for t in json.loads(r.stdout)["targets"]
                    for d in t.get("debuginfo", [])}
        except (ValueError, KeyError, TypeError) as e:
            raise Fail(f"symdex status --json: unexpected output ({e}): {r.stdout[:300]}")
        missing = [m for m in ["vmlinux"] + loaded if used.get(m) != "used"]
        if missing:
            failures.append("no debug file used for: " + ", ".join(f"{m} ({used.get(m)})" for m in missing))
        log(f"debug files used (by build-ID) for vmlinux and {len(loaded)} modules"
            + (f"; MISSING for {missing}" if missing else ""))
        r = run([a.symdex, "--db", db, "dups", "--json"], env=env)
        if r.returncode != 0:
            raise Fail(f"symdex dups failed ({r.returncode}): {r.stderr}")
        dups = json.loads(r.stdout)
        chosen = choose(dups)

        # kprobe lines
        probes = []  # dicts: name, inst, spec, event, line, expect (addr)
        idx = 0
        for name, insts in chosen:
            for inst in insts:
                idx += 1
                ev = event_name(idx, name)
                spec = spec_of(inst)
                expect = int(inst["address"], 16)
                # where symdex says a probe at its entry lands (past an IBT ENDBR64: +0x4)
                landing = 4 if "lands at +0x4" in (inst.get("verdict") or {}).get("reason", "") else 0
                p = {"name": name, "module": inst["module"], "spec": spec, "event": ev,
                     "addr": expect, "expect": expect + landing, "dwarf": inst["dwarf"], "line": None, "err": None,
                     "host_err": None}
                probes.append(p)
                # the instance's address must be what the captured kallsyms says
                if expect not in syms.get((inst["name"], inst["module"]), []):
                    p["err"] = f"symdex address {expect:#x} is not {inst['name']} [{inst['module']}] in kallsyms"
                    continue
                if inst["module"] == "vmlinux" and inst.get("text_offset") is not None \
                        and text_base + inst["text_offset"] != expect:
                    p["err"] = f"text_offset does not match {anchor} + offset"
                    continue
                if use_probe_field:
                    if not inst.get("probe"):
                        p["err"] = "no kallsyms-level probe target"
                        continue
                    p["line"] = f"p:{GROUP}/{ev} {inst['probe']}"
                else:
                    r = run([a.symdex, "--db", db, "kprobe", "-n", "-e", f"{GROUP}/{ev}", spec], env=env)
                    out = r.stdout.strip().splitlines()
                    if r.returncode != 0 or len(out) != 1:
                        p["err"] = (f"symdex kprobe exit {r.returncode}: "
                                    + (r.stdout + r.stderr).strip().replace("\n", " | ")[:300])
                        continue
                    p["line"] = out[0]
                # host-side sanity: the line is for our event, and its target is the instance
                # (still sent to the guest when this fails: the kernel's verdict is reported too)
                m = re.fullmatch(r"p:(\S+)/(\S+) (\S+)(?: .*)?", p["line"])
                if not m or m.group(1) != GROUP or m.group(2) != ev:
                    p["err"] = f"unexpected kprobe line {p['line']!r}"
                    p["line"] = None
                    continue
                tgt = target_address(m.group(3), syms, text_base)
                if tgt != expect:
                    p["host_err"] = (f"host: target {m.group(3)} resolves to "
                                     f"{'nothing unique' if tgt is None else hex(tgt)} in kallsyms, not {expect:#x}")
        canon_note = canonical_roundtrip(a.symdex, db, env, probes, use_probe_field)
        log(canon_note)
        line_probes = add_line_probes(a.symdex, db, env, probes, syms)
        log(f"symdex lines: {len(line_probes)} mid-function module addresses to probe: "
            + ", ".join(f"{p['spec']} -> {p['expect']:#x}" for p in line_probes))
        if not line_probes:
            failures.append("symdex lines gave no mid-function address inside a loaded module's instance")
        names = {p["name"] for p in probes}
        vm = [p for p in probes if p["module"] == "vmlinux"]
        md = [p for p in probes if p["module"] != "vmlinux"]
        log(f"chosen: {len(names)} duplicated names, {len(vm)} vmlinux + {len(md)} module instances")
        if len(names) < MIN_NAMES or not vm or not md:
            failures.append(f"need >= {MIN_NAMES} names with vmlinux and module instances; "
                            f"got {len(names)} names, {len(vm)} vmlinux, {len(md)} module")

        vsample, vsymbols = prepare_verdict_sample(a.symdex, db, env, dups, sysroot, syms,
                                         {p["addr"] for p in probes})

        # 4. in the guest: the plain name first (must fail), then every probe
        plain = f"p:t/plain {PLAIN}"
        guest.send(f"PROBE {plain}")
        t, res = guest.msg()
        plain_res = res.split(" ", 1)[1] if t == "RESULT" else f"{t} {res}"
        # then the verdict sample: symdex's line where it printed one, the raw address where it refused
        for p in [p for p in probes if p["line"]] + vsample:
            guest.send(f"PROBE {p['line']}")
            t, res = guest.msg()
            if t != "RESULT":
                raise Fail(f"guest protocol: expected RESULT, got {t} {res}")
            p["guest"] = res.split(" ", 1)[1]
        log(f"guest: {1 + len([p for p in probes if p['line']]) + len(vsample)} kprobe_events writes done")
        # arguments by name: written, armed, fired by known commands, the trace read back
        value_defs = probe_values.definitions(a.symdex, db, env, AGROUP)
        value_results = {}
        for ln in [ln for d in value_defs for ln in d["lines"]]:
            guest.send(f"PROBE {ln}")
            t, res = guest.msg()
            if t != "RESULT":
                raise Fail(f"guest protocol: expected RESULT, got {t} {res}")
            value_results[ln] = res.split(" ", 1)[1]
        guest.send(f"VALUES {AGROUP}")
        value_trace = guest.file("values").decode(errors="replace")
        values_done = guest.expect("DONE")
        guest.send("LIST")
        events = guest.file("kprobe_events").decode(errors="replace")
        klist = guest.file("kprobes_list").decode(errors="replace")
        guest.expect("DONE")
        guest.send(f"ENABLE {GROUP}")
        enable = guest.expect("DONE")
        guest.send("LIST")
        guest.file("kprobe_events")
        klist_on = guest.file("kprobes_list").decode(errors="replace")
        guest.expect("DONE")
        # stack traces from the guest for 'symdex decode' (decode_traces.py)
        tnames = trace_names(dups)
        log("guest: probes listed and armed; tracing")
        guest.send("TRACES " + " ".join(tnames))
        traces = {n: guest.file(n) for n in ("ftrace", "dmesg", "stacks")}
        guest.expect("DONE")
        if guest.con is not None:
            # Register dumps as an oops prints them (pc : / lr : / registers / Call trace:), of
            # what the CPU was doing when the UART interrupt came: sysrq p (this CPU's registers)
            # and l (its backtrace, with registers in interrupt context), then h, whose help line
            # on the console says the dumps before it are complete (nothing is sent to the guest
            # in between). The registers are of whatever the guest was doing: mostly the task
            # ARMSYSRQ starts, which reads /dev/zero (in the kernel), else its idle loop or its
            # shell in user space (a dump with a raw user pc and no frames): the keys go again
            # until one dump shows a kernel pc ("pc : name+0x..."), at most KERNEL_REGS_TRIES times.
            for tries in range(1, KERNEL_REGS_TRIES + 1):
                guest.send("ARMSYSRQ")
                guest.expect("DONE")
                with guest.seen_cv:
                    mark = len(guest.seen)
                guest.sysrq("plh")
                guest.wait_console(b"sysrq: HELP", mark)
                guest.send("REGS")
                traces["regs"] = guest.file("regs")
                guest.expect("DONE")
                regs = gzip.decompress(traces["regs"])
                if re.search(rb"pc : [A-Za-z_.$][\w.$]*\+0x", regs):
                    break
            else:
                raise Fail(f"{KERNEL_REGS_TRIES} sysrq register dumps, none of kernel context (the last: {regs[:300]!r})")
            if tries > 1:
                log(f"sysrq register dump of kernel context at try {tries} (the earlier ones caught user space)")
        log(f"traces: ftrace over every copy of {len(tnames)} duplicated names, sysrq l/t, /proc/*/stack: "
            + ", ".join(f"{n} {len(v) // 1024} KiB" for n, v in traces.items()))
        guest.send("QUIT")
        guest.expect("BYE")
    except BaseException:
        guest.kill()
        tail_console(guest.console)
        raise
    finally:
        guest.close()
    log(f"guest session done ({guest.noise} noise lines on the control channel)")
    if verbose:
        tail_console(guest.console, 10**6)
    for fn, txt in (("kprobe_events", events), ("kprobes_list", klist), ("kprobes_list.enabled", klist_on)):
        with open(os.path.join(work, fn), "w") as f:
            f.write(txt)

    # 5. checks
    listed = collections.defaultdict(list)  # addr -> [(sym+off, rest)]
    for ln in klist.splitlines():
        f = ln.split()
        if len(f) >= 3 and f[1] in ("k", "r"):
            listed[int(f[0], 16)].append(" ".join(f[2:]))
    listed_on = collections.defaultdict(list)
    for ln in klist_on.splitlines():
        f = ln.split()
        if len(f) >= 3 and f[1] in ("k", "r"):
            listed_on[int(f[0], 16)].append(" ".join(f[2:]))

    # EADDRNOTAVAIL (6.1), EINVAL (6.12): the same refusal, the error_log names it
    ok_plain = (("Cannot assign requested address" in plain_res or "Invalid argument" in plain_res)
                and "not unique" in plain_res)
    print()
    print(f"plain '{plain}': {'REFUSED as expected' if ok_plain else 'NOT refused as expected'}: {plain_res}")
    if not ok_plain:
        failures.append(f"plain {PLAIN} was not refused with 'The symbol is not unique'")
    if not enable.startswith("ENABLE ok"):
        failures.append(f"enabling group {GROUP}: {enable}")
    if a.arch == "arm64" and "FTRACE" in klist_on:
        # arm64 6.1 has no KPROBES_ON_FTRACE: its kprobes are never ftrace-based
        failures.append("kprobes/list shows [FTRACE] probes on arm64, which has no KPROBES_ON_FTRACE")

    print(f"\n{'#':>3} {'EVENT':<22} {'MODULE':<14} {'SPEC':<62} {'CANONICAL':<34} {'KPROBE TARGET':<26} "
          f"{'EXPECTED':<18} {'RESULT'}")
    npass = 0
    for i, p in enumerate(probes, 1):
        tgt = p["line"].split(" ", 2)[1] if p["line"] else "-"
        status = "PASS"
        why = ""
        if p["err"]:
            status, why = "FAIL", p["err"]
        elif p.get("host_err"):
            status, why = "FAIL", f"{p['host_err']}; guest: {p.get('guest')}"
        elif not p.get("guest", "").startswith("OK"):
            status, why = "FAIL", f"kernel refused: {p.get('guest')}"
        elif not own_entry_ok(p):
            status, why = "FAIL", f"the write added kprobes/list entry {p['entry']!r}, not {p['name']} at {p['expect']:#x}"
        else:
            here = listed.get(p["expect"], [])
            if not here:
                status, why = "FAIL", "not in kprobes/list at the expected address"
            elif not any(s.split("+")[0] == p["name"] or s.startswith(p["name"] + "+") for s in here):
                status, why = "FAIL", f"kprobes/list shows {here} at that address"
            elif p["module"] != "vmlinux" and not any(p["module"] in s.split() for s in here):
                status, why = "FAIL", f"kprobes/list shows {here}, not in module {p['module']}"
            else:
                armed = listed_on.get(p["expect"], ["(gone after enable)"])
                why = armed[0]
                if any("DISABLED" in s or "GONE" in s for s in armed) or p["expect"] not in listed_on:
                    status, why = "FAIL", f"not armed after enabling the group: {armed}"
        if status == "PASS":
            npass += 1
        else:
            failures.append(f"{p['event']} {p['spec']}: {why}")
        print(f"{i:>3} {p['event']:<22} {p['module']:<14} {p['spec']:<62} {p.get('canonical') or '-':<34} {tgt:<26} "
              f"{p['expect']:#018x} {status}  {why}")
    print(f"\n{npass}/{len(probes)} probes placed at the intended instance "
          f"({len(names)} names; {len(vm)} vmlinux, {len(md)} module instances); "
          f"kprobes/list has {sum(len(v) for v in listed.values())} entries")
    print(f"probe lines from: {'the dups probe field (SYMDEX_E2E_USE_PROBE_FIELD=1)' if use_probe_field else 'symdex kprobe -n -e GRP/EVENT SPEC'}")
    print(canon_note)
    # arm64's ftrace lists the bodies of overridden __weak functions under the name before them
    # (x86-64's as __ftrace_invalid_address__): from the vmlinux file, to judge verdicts by.
    vmlinux = os.path.join(debug, "boot", f"vmlinux-{a.krel}")
    # The kernel's config says where its records point: CALL_OPS puts two NOP words before each
    # function, the first of them recorded.
    call_ops = "CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS=y" in open(config).read().splitlines()
    orphans = (verdicts.orphan_sites(vmlinux, text_base - link, kallsyms, 2 if call_ops else 0)
               if a.arch == "arm64" else {})
    with open(os.path.join(work, "values.trace"), "w") as f:
        f.write(value_trace)
    if values_done.strip() != "VALUES":
        failures.append(f"arming the arguments' group: {values_done}")
    failures += probe_values.check(value_defs, value_results, value_trace, log)
    failures += report_verdicts(vsymbols, sysroot, kallsyms, vsample, work, orphans)
    failures += report_ftrace_lines(a.symdex, db, env, vsymbols, sysroot, kallsyms, work, orphans,
                                    {p["addr"] for p in probes if not p["err"]})
    code = (source_lines.Elf(vmlinux), text_base - link) if a.arch == "arm64" else None
    entries = {int(i["address"], 16): (i["dwarf"].get("file"), i["dwarf"].get("line"))
               for i in vsymbols["symbols"] if i.get("address") and (i.get("dwarf") or {}).get("line")}
    failures += decode_traces.check(a.symdex, db, env, sysroot, traces, work, log, code, entries)
    if a.arch == "arm64":
        failures += source_lines.check(vsymbols, sysroot, debug, a.krel, (anchor, text_base, link), work, log)
    # The same guest's frames from a fleet replica (an x86_64 symdexd whatever the guest's
    # architecture) fed only by debuginfod -U over this kernel's .debs.
    failures += fleet_frames.check(a.symdex, db, env, sysroot, os.path.join(os.path.dirname(a.dbg_root), "debs"),
                                   work, log, krel=a.krel, link_anchor=(anchor, link),
                                   strict=os.environ.get("SYMDEX_E2E_FLEET_STRICT", "1") != "0")
    elapsed = time.monotonic() - T0
    print(f"total {elapsed:.1f}s")
    if not os.environ.get("SYMDEX_E2E_KEEP") and not a.work and not failures:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work dir kept: {work}")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("e2e PASSED")
    return 0


PLAIN = "name_show"
VGROUP = "e2ev"  # the verdict sample's probes: registered, never enabled
AGROUP = "e2ea"  # definitions with arguments by name: armed while known commands run


def trace_names(dups, limit=150):
    """Duplicated text names the guest's function tracer records every copy of: those of
    fs/binfmt_elf.c first (every exec runs them, and they call one another directly: frames the
    code pins; fs/compat_binfmt_elf.c #includes the file), then sysfs *_show functions (the
    guest reads sysfs attributes), then the rest, vmlinux and module alike."""
    names = sorted({g["instances"][0]["name"] for g in dups["duplicates"]
                    if any(i.get("type") in ("t", "T") for i in g["instances"])})
    names = [n for n in names if re.fullmatch(r"[A-Za-z0-9_]+", n)]
    exec_path = {g["instances"][0]["name"] for g in dups["duplicates"]
                 if any(((i.get("dwarf") or {}).get("file") or "").endswith("fs/binfmt_elf.c") for i in g["instances"])}
    first = [n for n in names if n in exec_path]
    shows = [n for n in names if n.endswith("_show") and n not in exec_path]
    return (first + shows + [n for n in names if not n.endswith("_show") and n not in exec_path])[:limit]


def prepare_verdict_sample(symdex, db, env, dups, sysroot, syms, taken):
    """Duplicated-name instances at random (SYMDEX_E2E_SEED, else a fresh seed, printed): for
    each, its canonical spec, then 'symdex kprobe -n' on it: exit 0 -> the line goes to the
    guest; exit 4 (refused on its verdict) -> the guest gets the raw address instead, which the
    kernel must refuse too."""
    seed = int(os.environ.get("SYMDEX_E2E_SEED") or random.SystemRandom().randrange(1 << 31))
    rng = random.Random(seed)
    loaded = set(os.listdir(os.path.join(sysroot, "sys/module")))
    r = run([symdex, "--db", db, "--json", "symbols", "--all-types"], env=env)
    if r.returncode != 0:
        raise Fail(f"symdex symbols failed ({r.returncode}): {r.stderr[:200]}")
    symbols = json.loads(r.stdout)  # also judged against the whole guest afterwards
    picked = verdicts.sample(dups, symbols, loaded, taken, rng)
    log(f"verdict sample: {len(picked)} instances (seed {seed}; SYMDEX_E2E_SEED={seed} repeats it), "
        f"{sum(1 for _, r in picked if r)} of them refused by symdex")
    out = []
    if not picked:
        return out, symbols
    addrs = [i["address"] for i, _ in picked]
    r = run([symdex, "--db", db, "--json", "resolve"] + addrs, env=env)
    try:
        res = json.loads(r.stdout)["results"]
    except (ValueError, KeyError):
        raise Fail(f"symdex resolve of the sample failed ({r.returncode}): {r.stderr[:300]}")
    for n, ((inst, _refused), rr) in enumerate(zip(picked, res), 1):
        ev = f"v{n:02d}_" + re.sub(r"[^A-Za-z0-9_]", "_", inst["name"])[:40]
        addr = int(inst["address"], 16)
        landing = 4 if "lands at +0x4" in inst["verdict"].get("reason", "") else 0  # past an IBT ENDBR64
        v = {"name": inst["name"], "module": inst["module"], "expect": addr + landing, "event": ev,
             "verdict": inst["verdict"], "canonical": (rr.get("instance") or {}).get("canonical", ""),
             "err": None}
        out.append(v)
        if addr not in syms.get((inst["name"], inst["module"]), []):
            v["err"] = f"{inst['address']} is not {inst['name']} [{inst['module']}] in the guest's kallsyms"
        k = run([symdex, "--db", db, "kprobe", "-n", "-e", f"{VGROUP}/{ev}", v["canonical"] or inst["address"]],
                env=env)
        v["symdex_exit"] = k.returncode
        if k.returncode == 0:
            v["line"] = k.stdout.strip()
        elif k.returncode == 4:
            v["line"] = f"p:{VGROUP}/{ev} {addr:#x}"
            v["reason"] = k.stderr.strip().splitlines()[0] if k.stderr.strip() else ""
        else:
            v["line"] = f"p:{VGROUP}/{ev} {addr:#x}"
            v["err"] = f"symdex kprobe exit {k.returncode}: {(k.stdout + k.stderr).strip()[:200]}"
    return out, symbols


def report_verdicts(symbols, sysroot, kallsyms, vsample, work, orphans=None):
    """The verdict sample's table, then ftrace and blacklist agreement over the whole guest.
    orphans: ftrace's lines for bodies of overridden __weak functions (verdicts.orphan_sites)."""
    failures = []
    print(f"\nverdict sample ({len(vsample)} instances): symdex kprobe -n on each canonical spec; "
          "printed lines must be accepted at the instance, refused instances must be refused by the "
          "kernel when probed by their raw address")
    print(f"{'#':>3} {'MODULE':<14} {'CANONICAL':<48} {'VERDICT':<12} {'SYMDEX':<8} RESULT / KERNEL")
    agree = 0
    for n, v in enumerate(vsample, 1):
        g = v.get("guest", "")
        ok = g.startswith("OK")
        status = "PASS"
        if v["err"]:
            status, why = "FAIL", v["err"]
        elif v["symdex_exit"] == 0:
            added = [e for e in g[3:].split("|") if e.strip()] if ok else []
            at = [int(e.split()[0], 16) for e in added if e.split()]
            if not ok:
                status, why = "FAIL", f"symdex printed it, the kernel refused: {g}"
            elif at != [v["expect"]]:
                status, why = "FAIL", f"landed at {added}, not {v['expect']:#x}"
            else:
                why = f"accepted: {added[0].split()[2]}"
        else:
            if ok:
                status, why = "FAIL", f"symdex refused ({v.get('reason')}) but the kernel accepted the raw address"
            else:
                why = f"both refuse. symdex: {v.get('reason', '').replace('symdex: ', '')[:120]} | kernel: {g[5:][:160]}"
        agree += status == "PASS"
        if status != "PASS":
            failures.append(f"verdict sample {v['event']} {v['canonical']}: {why}")
        print(f"{n:>3} {v['module']:<14} {v['canonical'][:48]:<48} {v['verdict'].get('kind', '?'):<12} "
              f"{'line' if v['symdex_exit'] == 0 else 'refused' if v['symdex_exit'] == 4 else v['symdex_exit']!s:<8} "
              f"{status} {why}")
    print(f"{agree}/{len(vsample)} sampled instances: symdex and the kernel agree "
          f"({sum(1 for v in vsample if v['symdex_exit'] == 4)} refused by both)")
    if len(vsample) < 50:
        failures.append(f"verdict sample has {len(vsample)} instances, fewer than 50")

    with open(os.path.join(sysroot, "verdicts/available_filter_functions")) as f:
        aff = f.read()
    stats, bad = verdicts.agreement(symbols, kallsyms, aff, verdicts.by_name(orphans or {}))
    print(f"\nftrace agreement (available_filter_functions of the guest vs symdex's ftrace verdict, "
          f"non-init code symbols): {json.dumps(stats)}")
    with open(os.path.join(work, "ftrace_disagreements.txt"), "w") as f:
        for key, listed, predicted, why in bad:
            f.write(f"{key[0]} [{key[1]}]: listed {listed}, symdex {predicted}: {' / '.join(why)}\n")
    for key, listed, predicted, why in bad[:30]:
        print(f"  {key[0]} [{key[1]}]: ftrace lists {listed}, symdex says {predicted}: {' / '.join(why)[:200]}")
    if stats["agreement"] < 0.999:
        failures.append(f"ftrace agreement {stats['agreement']:.5f} < 0.999 ({stats['disagreements']} disagreements)")
    if stats["symdex_lines_agreement"] < 0.999:
        failures.append(f"available_filter_functions lines per name from symdex alone (verdict.ftrace_lines) "
                        f"{stats['symdex_lines_agreement']:.5f} < 0.999 ({stats['symdex_lines_disagreements']} lines off)")
    with open(os.path.join(sysroot, "verdicts/kprobes_blacklist")) as f:
        bl = f.read()
    bstats, bmiss = verdicts.blacklist(symbols, bl)
    print(f"kprobe blacklist (guest's kprobes/blacklist vs symdex 'blacklisted'): {json.dumps(bstats)}")
    for m in bmiss:
        print(f"  {m}")
    if bstats["missed"]:
        failures.append(f"{bstats['missed']} functions on the kernel's kprobe blacklist that symdex does not call blacklisted")
    return failures


def report_ftrace_lines(symdex, db, env, symbols, sysroot, kallsyms, work, orphans, probed):
    """'symdex ftrace-index' against the guest's available_filter_functions (a copy as
    --tracefs): for the probed instances (duplicated names) and, on arm64, every function after
    which ftrace lists orphan __weak bodies under its name, the line must be the one of the
    instance's own site (verdicts.ftrace_index_expected)."""
    tracefs = os.path.join(work, "tracefs")
    os.makedirs(tracefs, exist_ok=True)
    shutil.copy(os.path.join(sysroot, "verdicts/available_filter_functions"), tracefs)
    with open(os.path.join(tracefs, "available_filter_functions")) as f:
        aff = f.read()
    if orphans:
        print(f"\nftrace lists {sum(orphans.values())} sites in no function (bodies of overridden __weak "
              f"functions, kept without a symbol) under the name of the function before them: "
              f"{len(orphans)} functions, e.g. "
              + ", ".join(f"{n} (+{c})" for (n, _m, _a), c in sorted(orphans.items(), key=lambda x: -x[1])[:4]))
    want = set(probed) | {a for (_n, _m, a) in orphans}
    expected = verdicts.ftrace_index_expected(symbols, kallsyms, aff, orphans, want)
    names = {int(i["address"], 16): f"{i['name']} [{i['module']}]" for i in symbols["symbols"] if i.get("address")}
    bad = []
    for addr, line in sorted(expected.items()):
        r = run([symdex, "--db", db, "ftrace-index", "--tracefs", tracefs, f"{addr:#x}"], env=env)
        got = r.stdout.strip()
        if r.returncode != 0 or got != str(line):
            why = (r.stdout + r.stderr).strip().replace("\n", " ")[:200]
            tag = "orphan __weak bodies after it" if any(a == addr for (_n, _m, a) in orphans) else "probed"
            bad.append(f"{names.get(addr, hex(addr))} {addr:#x} ({tag}): line {line}, symdex exit {r.returncode}: {why}")
    n_orph = sum(1 for a in expected if any(a == oa for (_n, _m, oa) in orphans))
    print(f"ftrace-index (--tracefs: the guest's available_filter_functions): {len(expected) - len(bad)}/{len(expected)} "
          f"instances given the line of their own site ({len(expected) - n_orph} probed instances, "
          f"{n_orph} functions with orphan __weak bodies after them)")
    for b in bad[:10]:
        print("  " + b)
    with open(os.path.join(work, "ftrace_index_failures.txt"), "w") as f:
        f.write("".join(b + "\n" for b in bad))
    return [f"ftrace-index: {len(bad)} of {len(expected)} instances not given the line of their own site, e.g. {bad[0]}"] \
        if bad else []


def add_line_probes(symdex, db, env, probes, syms, want=3):
    """perf probe's SRC:ALN through `symdex lines FILE:LINE` on module code: for up to `want`
    module instances, the first line after the entry line with code inside that instance at a
    non-zero offset. Each address becomes a raw-address kprobe (what `lines` prints as the probe
    target for module code); the kernel must accept it and list it as NAME+OFF in that module."""
    added = []
    for p in list(probes):
        if len(added) >= want:
            break
        if p["module"] == "vmlinux" or p["err"] or not p["dwarf"]:
            continue
        start = p["addr"]
        for line in range(p["dwarf"]["line"] + 1, p["dwarf"]["line"] + 6):
            where = f"{p['dwarf']['file']}:{line}"
            r = run([symdex, "--db", db, "--json", "lines", where], env=env)
            if r.returncode != 0:
                continue
            hits = [x for x in json.loads(r.stdout)["addresses"]
                    if x["symbol"].startswith(p["name"] + "+") and int(x["address"], 16) > start
                    and int(x["address"], 16) in range(start, start + 0x10000)]
            if not hits:
                continue
            addr = int(hits[0]["address"], 16)
            ev = f"l{len(added) + 1:02d}_" + re.sub(r"[^A-Za-z0-9_]", "_", p["name"])[:40]
            q = {"name": p["name"], "module": p["module"], "spec": f"lines {where}", "event": ev,
                 "addr": addr, "expect": addr, "dwarf": p["dwarf"], "line": f"p:{GROUP}/{ev} {hits[0]['probe']}",
                 "err": None, "host_err": None}
            if hits[0]["probe"] != hits[0]["address"]:
                q["err"] = f"lines gave probe target {hits[0]['probe']!r} for module address {hits[0]['address']}"
            probes.append(q)
            added.append(q)
            break
    return added


def canonical_roundtrip(symdex, db, env, probes, use_probe_field):
    """'symdex resolve' each spec: it must name the instance; then 'symdex kprobe -n' on the
    instance's canonical spec must print the same line as on the full spec. Host-side only (the
    guest sees each instance once, so kprobes/list attribution stays one entry per write)."""
    if use_probe_field:
        return "canonical round-trip: not checked (SYMDEX_E2E_USE_PROBE_FIELD=1)"
    todo = [p for p in probes if p["line"] and not p["err"]]
    if not re.search(r"^\s+resolve\s", run([symdex, "--help"]).stdout, re.M):
        return "canonical round-trip: not checked (symdex has no 'resolve' verb)"
    r = run([symdex, "--db", db, "--json", "resolve"] + [p["spec"] for p in todo], env=env)
    try:
        results = json.loads(r.stdout)["results"]
        assert len(results) == len(todo)
    except (ValueError, KeyError, TypeError, AssertionError):
        for p in todo:
            p["err"] = f"symdex resolve --json: unexpected output (exit {r.returncode}): {(r.stdout + r.stderr)[:200]}"
        return "canonical round-trip: resolve output not understood"
    bad = 0
    for p, res in zip(todo, results):
        inst = res.get("instance") or {}
        addr = inst.get("address")
        if res.get("status") != "ok" or addr is None or int(addr, 16) != p["addr"]:
            p["err"] = f"symdex resolve {p['spec']}: {res.get('status')} -> {addr}, not {p['addr']:#x}"
            bad += 1
            continue
        p["canonical"] = inst.get("canonical") or ""
        spec = p["canonical"]
        k = run([symdex, "--db", db, "kprobe", "-n", "-e", f"{GROUP}/{p['event']}", spec], env=env)
        if k.returncode != 0 or k.stdout.strip() != p["line"]:
            p["err"] = (f"canonical spec {spec!r}: symdex kprobe exit {k.returncode} "
                        f"{(k.stdout + k.stderr).strip()[:200]!r}, not {p['line']!r}")
            bad += 1
    return (f"canonical round-trip: {len(todo) - bad}/{len(todo)} canonical specs resolve back "
            f"to their instance and give the same kprobe line")


def own_entry_ok(p):
    """The kprobes/list line this probe's write added: 'ADDR  k  SYM+0xOFF  [MOD] [FLAGS]'."""
    res = p.get("guest") or ""
    added = res[3:] if res.startswith("OK ") else ""
    entries = [e for e in added.split("|") if e.strip()]
    p["entry"] = " | ".join(entries) or "(none)"
    if len(entries) != 1:
        return False
    f = entries[0].split()
    if len(f) < 3 or f[1] != "k" or int(f[0], 16) != p["expect"]:
        return False
    if f[2].split("+")[0] != p["name"]:
        return False
    if p["module"] == "vmlinux":
        return len(f) == 3 or f[3].startswith("[")
    return len(f) > 3 and f[3] == p["module"]


def summarize_index(out):
    try:
        d = json.loads(out)
    except ValueError:
        return out.strip().replace("\n", " ")[:300]
    keys = ("symbols", "modules", "seconds", "debug", "entry_layout")
    return json.dumps({k: d[k] for k in keys if k in d})[:400] if any(k in d for k in keys) \
        else json.dumps(d)[:400]


def tail_console(path, n=40):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
        print(f"--- last {n} lines of the guest console ({path}) ---")
        print("\n".join(lines[-n:]))
        print("--- end of console ---")
    except OSError:
        pass


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Skip as e:
        print(f"SKIP: {e}", flush=True)
        sys.exit(SKIP)
    except Fail as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)
