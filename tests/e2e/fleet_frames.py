"""Issue 13's real-data check, run by qemu_kprobes.py after the guest has been captured.

A fleet replica with nothing local — `symdexd --fleet-cache`, fed only by a real `debuginfod -U`
over the Debian -dbg and image .deb files — is asked for frames of the guest that just ran: its
vmlinux build-ID and _text (KASLR) from the capture, and for at least 3 loaded modules their
build-ID (/sys/module/M/notes) and .text base (/sys/module/M/sections/.text). Every answer must be
what the live-indexed target (symdex index --sysroot over the same capture) says for the same
runtime address: symbol, offset, module and the whole inline chain with file:line:column.
"""
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import time
import urllib.request


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _note_build_id(path):
    """The desc of an NT_GNU_BUILD_ID note file (/sys/module/M/notes/.note.gnu.build-id)."""
    with open(path, "rb") as f:
        data = f.read()
    off = 0
    while off + 12 <= len(data):
        namesz, descsz, typ = struct.unpack_from("<III", data, off)
        name_end = off + 12 + ((namesz + 3) & ~3)
        desc = data[name_end:name_end + descsz]
        if typ == 3 and data[off + 12:off + 12 + namesz].rstrip(b"\0") == b"GNU":
            return desc.hex()
        off = name_end + ((descsz + 3) & ~3)
    return ""


def _kallsyms(path):
    out = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 3:
                continue
            mod = p[3].strip("[]") if len(p) > 3 else ""
            out.append((int(p[0], 16), p[1], p[2], mod))
    return out


def check(symdex, db, env, sysroot, debs, work, log, seed=13):
    """Returns a list of failure strings (empty: passed); prints what it did."""
    symdexd = os.path.join(os.path.dirname(symdex), "symdexd")
    if os.environ.get("SYMDEX_E2E_FLEET") == "0":
        print("fleet: SKIP (SYMDEX_E2E_FLEET=0)")
        return []
    for tool in ("debuginfod", "bsdtar"):
        if shutil.which(tool) is None:
            print(f"fleet: SKIP ({tool} not installed; scripts/setup-deps.sh installs it)")
            return []
    if not os.path.isdir(debs) or not any(n.endswith(".deb") for n in os.listdir(debs)):
        print(f"fleet: SKIP (no .deb files in {debs})")
        return []
    t0 = time.monotonic()
    fw = os.path.join(work, "fleet")
    shutil.rmtree(fw, ignore_errors=True)
    os.makedirs(fw)
    kbid = _note_build_id(os.path.join(sysroot, "sys/kernel/notes"))
    syms = _kallsyms(os.path.join(sysroot, "proc/kallsyms"))
    text = next(a for a, t, n, m in syms if n == "_text" and not m)
    etext = next(a for a, t, n, m in syms if n == "_etext" and not m)
    # Modules with a build-ID note and a .text base; their .text extent is up to the next section.
    mods = {}
    for m in sorted(os.listdir(os.path.join(sysroot, "sys/module"))):
        sec = os.path.join(sysroot, "sys/module", m, "sections")
        note = os.path.join(sysroot, "sys/module", m, "notes/.note.gnu.build-id")
        if not os.path.exists(os.path.join(sec, ".text")) or not os.path.exists(note):
            continue
        bases = {}
        for s in os.listdir(sec):
            try:
                bases[s] = int(open(os.path.join(sec, s)).read().strip(), 16)
            except ValueError:
                pass
        base = bases[".text"]
        above = [b for b in bases.values() if b > base]
        mods[m] = (_note_build_id(note), base, min(above) if above else base + (1 << 20))
    rnd = random.Random(seed)
    vm = [a for a, t, n, m in syms if not m and t in "tT" and text <= a < etext]
    sample = [a + rnd.choice((0, 1, 3)) for a in rnd.sample(vm, min(400, len(vm)))]
    by_mod = {}
    for a, t, n, m in syms:
        if m in mods and t in "tT" and mods[m][1] <= a < mods[m][2]:
            by_mod.setdefault(m, []).append(a)
    # Three modules (the issue asks for at least 3): each is one more extraction from the .deb.
    chosen = sorted(by_mod, key=lambda m: -len(by_mod[m]))[:3]
    if len(chosen) < 3:
        return [f"fleet: only {len(chosen)} loaded modules with build-ID notes and .text symbols (need 3)"]
    for m in chosen:
        sample += [a + 1 for a in rnd.sample(by_mod[m], min(80, len(by_mod[m])))]

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    dlog = open(os.path.join(fw, "debuginfod.log"), "w")
    # The first request (the readiness probe below) has debuginfod extract the whole -dbg archive and
    # keep every member in its prefetch cache: a module request then costs no second pass over the
    # xz stream (25-31 s each here without it, for members that sit mid-archive). --fdcache-mintmp=0:
    # the cache stays on whatever the disk's free share (it flushes below 25% free by default).
    tmp = os.path.join(fw, "tmp")
    os.makedirs(tmp)
    server = subprocess.Popen(["debuginfod", "-U", debs, "-p", str(port), "-d", os.path.join(fw, "server.sqlite"),
                               "-t0", "-g0", "--fdcache-mintmp=0", "--fdcache-prefetch=2000",
                               "--fdcache-prefetch-fds=2000", "--fdcache-prefetch-mbs=4000"],
                              stdout=dlog, stderr=subprocess.STDOUT, env=dict(os.environ, TMPDIR=tmp))
    daemon = None
    failures = []
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                # debuginfod 0.188 answers GET only; the body is not read (closing drops it).
                req = urllib.request.Request(f"{url}/buildid/{kbid}/debuginfo", headers={"Range": "bytes=0-0"})
                with urllib.request.urlopen(req, timeout=600) as resp:
                    if resp.status in (200, 206):
                        break
            except Exception:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                return [f"fleet: debuginfod -U {debs} never served vmlinux {kbid} (log {dlog.name})"]
            time.sleep(1)
        scanned = time.monotonic() - t0
        sock = os.path.join(fw, "s.sock")
        denv = dict(env)
        denv["DEBUGINFOD_CACHE_PATH"] = os.path.join(fw, "dcache")
        daemon = subprocess.Popen([symdexd, "--listen", f"unix:{sock}", "--db", os.path.join(fw, "own.db"),
                                   "--no-index-live", "--modules-poll", "0", "--fleet-cache",
                                   os.path.join(fw, "cache"), "--debuginfod-urls", url],
                                  env=denv, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(fw, "symdexd.log"), "w"))
        for _ in range(300):
            if os.path.exists(sock):
                break
            time.sleep(0.1)
        stdin = "\n".join(f"{a:#x}" for a in sample) + "\n"
        args = [symdex, "--connect", f"unix:{sock}", "--json", "frames", "--kernel-build-id", kbid,
                "--kernel-text", f"{text:#x}"]
        for m in chosen:
            args += ["--module", f"{m}={mods[m][0]}@{mods[m][1]:#x}"]
        t1 = time.monotonic()
        r = subprocess.run(args + ["-"], input=stdin, capture_output=True, text=True, env=env, timeout=900)
        cold = time.monotonic() - t1
        if r.returncode not in (0, 1):
            return [f"fleet: symdex frames failed ({r.returncode}): {r.stdout[:500]}{r.stderr[:500]}"]
        fleet = json.loads(r.stdout)["results"]
        t2 = time.monotonic()
        r2 = subprocess.run(args + ["-"], input=stdin, capture_output=True, text=True, env=env, timeout=300)
        warm = time.monotonic() - t2
        if r2.stdout != r.stdout:
            failures.append("fleet: a second (warm) request answered differently from the first")
        ref = subprocess.run([symdex, "--db", db, "--json", "addr", "-"], input=stdin, capture_output=True,
                             text=True, env=env)
        local = json.loads(ref.stdout)["results"]
        same = exact = 0
        diffs = []
        for a, f, l in zip(sample, fleet, local):
            exact += bool(f.get("exact"))
            want = (l.get("symbol"), l.get("module"), l.get("offset"), l.get("frames"))
            got = (f.get("symbol"), f.get("module"), f.get("offset"), f.get("frames"))
            if want == got:
                same += 1
            elif len(diffs) < 10:
                diffs.append(f"{a:#x}: local {want[:3]} {want[3][:1]} / fleet {got[:3]} {got[3][:1]} "
                             f"{f.get('note', '')}")
        nmod = sum(1 for f in fleet if f.get("module") not in (None, "vmlinux"))
        print(f"fleet: debuginfod -U over {len(os.listdir(debs))} .debs served vmlinux {kbid} after {scanned:.0f} s; "
              f"a replica with nothing local answered {len(sample)} frames ({nmod} in modules "
              f"{', '.join(chosen)}) cold in {cold:.1f} s (fetch + index), warm in {warm:.2f} s; "
              f"{same}/{len(sample)} identical to the live-indexed target, {exact} exact")
        for d in diffs:
            print("  differs: " + d)
        if same != len(sample):
            failures.append(f"fleet: {len(sample) - same} of {len(sample)} frames differ from the live-indexed target")
        if exact != len(sample):
            failures.append(f"fleet: {len(sample) - exact} of {len(sample)} frames not exact")
        if nmod < 3 * 10:
            failures.append(f"fleet: only {nmod} module frames answered")
    finally:
        for p in (daemon, server):
            if p is None:
                continue
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        dlog.close()
    return failures
