#!/usr/bin/env python3
"""The tracers attach what `symdex kprobe --format F` prints, in a booted Debian kernel, and the
kernel's own counts judge which copy each one reached.

One qemu boot (TCG) of the corpus's Debian cloud kernel, as tests/e2e/qemu_kprobes.py boots it,
with a Debian 12 root on a virtio disk (tests/e2e/tracers-root.sh: linux-perf, bpftrace, libbpf1 as
Debian packages them; the kernel's debug vmlinux and the loaded modules' debug files in it, where
perf probe looks). The guest's kallsyms and module sections are indexed by symdex (a live-style
sysroot), duplicated names whose copies run when sysfs is read (the *_show functions: vmlinux's
and the loaded modules') are sampled, and for every copy:

- a reference probe: `symdex kprobe -n -e ref/rNN SPEC`, the kprobe_events line the kernel is
  known to place at exactly that copy (tests/e2e/qemu_kprobes.py);
- perf: the command `symdex kprobe -n --format perf SPEC` prints, run as printed (perf probe reads
  the copy's DWARF in the guest), its event's hits traced;
- libbpf: the C `symdex kprobe -n --format libbpf SPEC` prints, compiled as printed into a loader
  (gcc, libbpf-dev) beside a kprobe program a copy (clang -target bpf), run in the guest, which
  has Debian's libbpf1;
- cilium/ebpf: the Go expression `symdex kprobe -n --format cilium SPEC` prints, built as printed
  into a static loader against Debian's cilium/ebpf (0.9.1) beside the same kprobe programs; where
  symdex refuses (a module's copy of a shared name: 0.9.1 names a kprobe by symbol alone), the
  name alone must fail in the kernel;
- fentry: for each sampled name a fentry program attached by the name alone (libbpf,
  SEC("fentry/NAME"), and bpftrace's kfunc:NAME); its hits must equal those of the copy `symdex
  which --fentry` says the name reaches (a reference probe is added there when it had none) and
  differ from the others'; a name symdex says cannot attach must fail;
- arguments by name (bpf-args): bpftrace's program and the C fetch libbpf and cilium/ebpf
  programs share, for each copy's parameters and its first one's kobject name and for
  BPF_ARGS_UNIQUE, each hit's values equal to those of symdex's kprobe_events definition of the
  same probe (perf's: perf-args);
- set_ftrace_filter (ftrace): the line `symdex ftrace-index` gives for each copy in the guest's
  available_filter_functions written to the filter, one copy of each name at a time, the
  function tracer's hits by name equal to that copy's reference count;
- bpftrace: `symdex kprobe -n --format bpftrace SPEC`, every printed probe in one `bpftrace -e`
  program that prints each hit; a form bpftrace refuses is a failure (Debian 12's 0.17 has no
  `kprobe:MOD:NAME`: symdex gives a live module copy by address); where symdex refuses, the
  refusal is checked against bpftrace itself: `kprobe:NAME` must fail in the kernel ("not
  unique").

The workload reads every sysfs attribute (the show functions of many drivers run) between two
trace markers. The reference probes trace into the ring buffer (trace_clock mono), perf's events
too (enabled through tracefs once perf probe has made them), and bpftrace prints each hit with its
nsecs, the same clock: every count is taken over the workload's window only, so what the tools
themselves read while they start (perf stat and bpftrace open the kprobe PMU by its sysfs type
file: kernel/events/core.c's type_show) is not counted. A form is exact for its copy when its count
equals the copy's reference count, in a window where a sibling copy ran too (else the case is
reported as not exercised). Which names are sampled: a reference probe on every copy of up to
CANDIDATES duplicated *_show names, one run of the workload, and the names two or more of whose
copies ran.

  qemu_tracers.py --symdex BIN --image-root DIR --dbg-root DIR --krel REL --busybox BB --root-tar TAR
Exit: 0 pass, 1 fail, 77 skip. Prints one line per copy and tool, then a summary.
"""
import argparse
import base64
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import io

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qemu_kprobes as e2e  # noqa: E402  (the guest, the initramfs, the capture)

# Reading every sysfs attribute: the show functions of the drivers that are there run.
WORKLOAD = r"""T=/sys/kernel/tracing
echo W0 >$T/trace_marker
for f in /sys/class/*/*/* /sys/bus/*/devices/*/* /sys/module/*/* /sys/devices/virtual/*/*/*; do
  [ -f "$f" ] && [ -r "$f" ] && cat "$f" >/dev/null 2>&1
done
echo W1 >$T/trace_marker
"""
EXTRA_MODULES = ["virtio_blk"]  # the root's disk
CANDIDATES = 80  # names whose copies get reference probes in the first run
SAMPLE_NAMES = int(os.environ.get("SYMDEX_TRACERS_NAMES", "12"))  # names the tools are judged on
# The tools judged (default all): perf, perf-args, bpf-args, bpftrace, libbpf, cilium, kprobe_multi, fentry,
# ftrace.
JUDGES = os.environ.get("SYMDEX_TRACERS_JUDGES",
                        "perf,perf-args,bpf-args,bpftrace,libbpf,cilium,kprobe_multi,fentry,ftrace").split(",")


def log(msg):
    e2e.log(msg)


def sh(guest, script, timeout_note=""):
    """Runs `script` in the guest's Debian root; (exit code, output)."""
    guest.send("SH " + base64.b64encode(script.encode()).decode())
    out = guest.file("out").decode(errors="replace")
    rc = int(guest.expect("DONE").split()[1])
    return rc, out


# The loaders' toolchain per guest architecture: the C compiler and its triplet (a cross compiler
# links against the root's own libbpf), Go's GOARCH, qemu's disk device for the root.
TOOLCHAIN = {
    "x86_64": {"cc": "gcc", "triplet": None, "goarch": "amd64"},
    "arm64": {"cc": "aarch64-linux-gnu-gcc", "triplet": "aarch64-linux-gnu", "goarch": "arm64"},
}


def build_disk(work, root_tar, dbg_root, image_root, krel, modules, arch="x86_64"):
    """An ext4 image of the tracers' root plus the debug files perf probe reads: vmlinux where
    perf looks for it (/usr/lib/debug/boot/vmlinux-REL), the loaded modules' debug .ko where perf
    finds a module by name (/lib/modules/REL/kernel/...)."""
    root = os.path.join(work, "troot")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    subprocess.run(["tar", "-C", root, "-xf", root_tar], check=True)
    dst = os.path.join(root, "usr/lib/debug/boot")
    os.makedirs(dst, exist_ok=True)
    link_or_copy(os.path.join(dbg_root, "usr/lib/debug/boot", f"vmlinux-{krel}"), os.path.join(dst, f"vmlinux-{krel}"))
    dbg_mods = os.path.join(dbg_root, "usr/lib/debug/lib/modules", krel)
    for m, path in modules:
        rel = os.path.relpath(path, os.path.join(image_root, "lib/modules", krel))
        src = os.path.join(dbg_mods, rel)
        if os.path.exists(src):
            d = os.path.join(root, "lib/modules", krel, rel)
            os.makedirs(os.path.dirname(d), exist_ok=True)
            link_or_copy(src, d)
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(root) for f in fs
               if not os.path.islink(os.path.join(dp, f)))
    img = os.path.join(work, "troot.img")
    if os.path.exists(img):
        os.unlink(img)
    mb = size * 13 // 10 // (1 << 20) + 64
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "troot", "-d", root, img, f"{mb}M"], check=True)
    triplet = TOOLCHAIN[arch]["triplet"]
    if triplet:
        # A cross-built loader links against the root's libbpf (and what it needs).
        xlib = os.path.join(work, "xlib")
        shutil.rmtree(xlib, ignore_errors=True)
        os.makedirs(xlib)
        libdir = os.path.join(root, "usr/lib", triplet)
        for f in os.listdir(libdir):
            if re.match(r"lib(bpf|elf|z)\.so", f):
                shutil.copy(os.path.join(libdir, f), xlib, follow_symlinks=True)
    shutil.rmtree(root)
    return img, mb


def link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


ARCH = "x86_64"  # the guest's (main sets it)


def c_loader_cmd(src, out):
    """The command that builds a C loader against libbpf for the guest's architecture."""
    tc = TOOLCHAIN[ARCH]
    if not tc["triplet"]:
        return [tc["cc"], "-O1", "-o", out, src, "-lbpf"]
    xlib = os.path.join(tc["work"], "xlib")
    # libbpf's headers are the host's (architecture-independent); its library the root's.
    xinc = os.path.join(tc["work"], "xinc")
    os.makedirs(xinc, exist_ok=True)
    if not os.path.exists(os.path.join(xinc, "bpf")):
        os.symlink("/usr/include/bpf", os.path.join(xinc, "bpf"))
    return [tc["cc"], "-O1", "-I", xinc, "-o", out, src, os.path.join(xlib, "libbpf.so.1"), f"-Wl,-rpath-link={xlib}"]


def write_c_loader(work, name, program, loader, attaches):
    """WORK/NAME/prog.bpf.c (`program`: one counting program a copy) and loader.c (`loader`), whose
    program i is attached by the C line attaches[i], as printed: the directory."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    n = len(attaches)
    with open(os.path.join(d, "prog.bpf.c"), "w") as f:
        f.write(program % {"n": n, "programs": "\n".join(f"P({i})" for i in range(n))})
    code = "".join(
        f"  at = {i}; snprintf(name, sizeof name, \"p%d\", at); prog = bpf_object__find_program_by_name(obj, name);\n"
        f"  {{ {line} }}\n"
        f"  if (!links[{i}]) printf(\"ATTACH-FAILED {i} %d\\n\", errno);\n" for i, line in enumerate(attaches))
    with open(os.path.join(d, "loader.c"), "w") as f:
        f.write(loader % {"n": n, "attaches": code})
    return d


def run_loader(guest, wl, d, what, bpf_src, loader_cmd, prefix, failures, env=None):
    """Builds in `d` the BPF object of `bpf_src` (clang -target bpf) and the loader (`loader_cmd`,
    which writes `loader`), copies both to the guest's /tmp/PREFIX*, runs the loader over the
    workload: (its output, {reference event: hits in the workload's window}, the trace), or None
    when a step failed (said in `failures`)."""
    multiarch = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True).stdout.strip()
    obj = bpf_src[:-2] + ".o"
    for cmd in (["clang-14", "-O2", "-g", "-target", "bpf", f"-I/usr/include/{multiarch}", "-c", bpf_src, "-o", obj],
                loader_cmd):
        r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            failures.append(f"{what}: {' '.join(cmd)} failed: {r.stderr[-600:]}")
            return None
    put_files(guest, d, ("loader", obj), prefix)
    rc, out = sh(guest, wl + TRACE_RUN +
                 f"/tmp/{prefix}loader /tmp/{prefix}{obj} 2>&1\nrc=$?\necho @@TRACE\ncat $T/trace\nexit $rc\n")
    tool, _, trace = out.partition("@@TRACE\n")
    if rc != 0:
        failures.append(f"{what}: the loader failed ({rc}): {tool.strip()[-600:]}")
        return None
    refs, _ = in_window(trace)
    return tool, refs, trace


def put_files(guest, d, names, prefix):
    """Copies the files `names` of the host directory `d` to the guest's /tmp/PREFIXNAME, in pieces
    a control-channel line carries (a static Go loader is megabytes)."""
    for name in names:
        with open(os.path.join(d, name), "rb") as f:
            data = base64.b64encode(f.read()).decode()
        dest = f"/tmp/{prefix}{name}"
        for k in range(0, len(data), PUT_CHUNK):
            rc, out = sh(guest, f"cat {'>>' if k else '>'}{dest}.b64 <<'EOF'\n{data[k:k + PUT_CHUNK]}\nEOF\n")
            if rc != 0:
                raise e2e.Fail(f"copying {name} to the guest: {out[-300:]}")
        rc, out = sh(guest, f"base64 -d <{dest}.b64 >{dest} && rm {dest}.b64 && chmod +x {dest}")
        if rc != 0:
            raise e2e.Fail(f"copying {name} to the guest: {out[-300:]}")


PUT_CHUNK = 48 * 1024


def kprobe_profile(text):
    """{event: hits} from /sys/kernel/tracing/kprobe_profile."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            out[f[0]] = int(f[1])
    return out


def symdex(a, db, *args):
    return e2e.run([a.symdex, "--db", db] + list(args))


def candidates(dups, loaded):
    """Duplicated *_show names with two or more eligible copies in vmlinux or a loaded module
    (NAME@FILE:LINE naming each): [(name, [inst])], at most CANDIDATES names."""
    picked = []
    for name, insts in e2e.choose(dups) + [(g["instances"][0]["name"], g["instances"]) for g in dups["duplicates"]]:
        if len(picked) >= CANDIDATES:
            break
        if not name.endswith("_show") or any(n == name for n, _ in picked):
            continue
        insts = [i for i in insts if e2e.eligible(i) and i["module"] in (["vmlinux"] + loaded)]
        fl = [(i["dwarf"]["file"], i["dwarf"]["line"]) for i in insts]
        insts = [i for i in insts if fl.count((i["dwarf"]["file"], i["dwarf"]["line"])) == 1]
        if len(insts) >= 2:
            picked.append((name, insts[:8]))
    return picked


def main():
    ap = argparse.ArgumentParser()
    for o in ("--symdex", "--image-root", "--dbg-root", "--krel", "--root-tar"):
        ap.add_argument(o, required=True)
    ap.add_argument("--arch", default="x86_64", choices=sorted(TOOLCHAIN))
    ap.add_argument("--busybox", default="/bin/busybox")
    ap.add_argument("--work")
    a = ap.parse_args()
    arch = a.arch
    timeout = float(os.environ.get("SYMDEX_E2E_TIMEOUT", "1500"))
    if not shutil.which("mkfs.ext4"):
        raise e2e.Skip("mkfs.ext4 missing (e2fsprogs)")
    kernel = os.path.join(a.image_root, "boot", f"vmlinuz-{a.krel}")
    moddir = os.path.join(a.image_root, "lib", "modules", a.krel, "kernel")
    debug = os.path.join(a.dbg_root, "usr", "lib", "debug")
    work = a.work or e2e.tempfile.mkdtemp(prefix="symdex-tracers.")
    os.makedirs(work, exist_ok=True)
    log(f"kernel {a.krel}, work dir {work}")

    mods = e2e.module_load_order(moddir, e2e.modules_to_load(moddir, arch) + EXTRA_MODULES)
    img, mb = build_disk(work, a.root_tar, a.dbg_root, a.image_root, a.krel, mods, arch)
    log(f"root disk {mb} MB: Debian 12 + linux-perf + bpftrace + debug vmlinux and modules")
    initrd = os.path.join(work, "initrd.cpio")
    e2e.build_initramfs(initrd, a.busybox, mods, arch, conf_extra="ROOT_DEV=/dev/vda\n")
    disk = (["-drive", f"file={img},if=virtio,format=raw,readonly=on"] if arch == "x86_64" else
            ["-drive", f"file={img},if=none,id=troot,format=raw,readonly=on", "-device", "virtio-blk-pci,drive=troot"])
    guest = e2e.Guest(work, kernel, initrd, timeout, arch, memory="2048", extra=disk)
    TOOLCHAIN[arch]["work"] = work
    global ARCH
    ARCH = arch
    results, failures = [], []
    try:
        rel = guest.expect("BOOTED")
        loaded, (t, rest) = guest.modules()
        if t != "ROOT":
            raise e2e.Fail(f"guest protocol: expected the root, got {t} {rest}")
        log(f"guest {rel}: modules {' '.join(loaded)}; Debian {rest} root")
        capture = guest.file("capture")
        guest.expect("READY")
        sysroot = os.path.join(work, "sysroot")
        shutil.rmtree(sysroot, ignore_errors=True)
        with tarfile.open(fileobj=io.BytesIO(capture)) as tf:
            tf.extractall(sysroot)
        db = os.path.join(work, "index.db")
        r = symdex(a, db, "index", "--sysroot", sysroot, "--debug-dir", debug, "--no-debuginfod",
                   "--kernel-config", os.path.join(a.image_root, "boot", f"config-{a.krel}"), "-q")
        if r.returncode != 0:
            raise e2e.Fail(f"symdex index --sysroot failed: {r.stderr}")
        dups = json.loads(symdex(a, db, "--json", "dups").stdout)
        rc, out = sh(guest, "perf --version; bpftrace --version")
        log("tools: " + out.strip().replace("\n", "; "))

        # A reference probe on every candidate copy (the kprobe_events line the kernel places at
        # exactly that copy), and one run of the workload: the names two or more of whose copies
        # ran are the sample, each of those copies judged.
        copies = []
        for name, insts in candidates(dups, loaded):
            for inst in insts:
                n = len(copies)
                spec = e2e.spec_of(inst)
                r = symdex(a, db, "kprobe", "-n", "-e", f"ref/r{n:03d}", spec)
                if r.returncode != 0:
                    continue  # not probe-able: qemu_kprobes.py judges those refusals
                copies.append({"name": name, "module": inst["module"], "spec": spec, "addr": int(inst["address"], 16),
                               "ref": f"r{n:03d}", "ref_line": r.stdout.strip()})
        setup = "set -e\nT=/sys/kernel/tracing\n" + "".join(
            f"echo '{c['ref_line']}' >>$T/kprobe_events\n" for c in copies) + "echo 1 >$T/events/ref/enable\n"
        rc, out = sh(guest, setup)
        if rc != 0:
            raise e2e.Fail(f"reference probes refused: {out}")
        wl = "cat >/tmp/workload.sh <<'EOF'\n" + WORKLOAD + "EOF\n"
        _, _, refs = counts_around(guest, wl + "sh /tmp/workload.sh")
        ran = {}
        for c in copies:
            if refs.get(c["ref"], 0) > 0:
                ran.setdefault(c["name"], []).append(c)
        names = [n for n, cs in ran.items() if len(cs) >= 2][:SAMPLE_NAMES]
        log(f"reference probes on {len(copies)} copies of {len({c['name'] for c in copies})} names; "
            f"{len(names)} names had two or more copies run by the workload: {' '.join(names)}")
        copies = [c for n in names for c in ran[n]]
        for c in copies:
            c["siblings"] = [o["ref"] for o in copies if o["name"] == c["name"] and o is not c]
            t = "t" + c["ref"][1:]
            for fmt in ("perf", "bpftrace", "libbpf", "cilium", "kprobe_multi"):
                r = symdex(a, db, "kprobe", "-n", "-e", f"symdex/{t}", "--format", fmt, c["spec"])
                c[fmt] = (r.returncode, r.stdout.strip(), r.stderr.strip())

        judges = {
            "perf": lambda: judge_perf(guest, copies, wl, results, failures),
            "perf-args": lambda: judge_perf_args(a, db, guest, copies, wl, results, failures),
            "bpf-args": lambda: judge_bpf_args(a, db, guest, copies, wl, work, results, failures),
            "ftrace": lambda: judge_ftrace(a, db, guest, copies, wl, work, results, failures),
            "bpftrace": lambda: judge_bpftrace(guest, copies, wl, results, failures),
            "libbpf": lambda: judge_libbpf(guest, copies, wl, work, results, failures),
            "cilium": lambda: judge_cilium(guest, copies, wl, work, results, failures),
            "kprobe_multi": lambda: judge_kprobe_multi(guest, copies, wl, work, results, failures),
            "fentry": lambda: judge_fentry(a, db, dups, guest, copies, wl, work, results, failures),
        }
        for name, judge in judges.items():
            if name in JUDGES:
                judge()
                log(f"{name} judged")
        skipped = [n for n in judges if n not in JUDGES]
        if skipped:
            log(f"not judged in this run (SYMDEX_TRACERS_JUDGES): {' '.join(skipped)}")
        guest.send("QUIT")
        guest.expect("BYE")
    except e2e.Fail as e:
        failures.append(str(e))
    finally:
        guest.close()
    for line in results:
        print(line)
    exact = sum(1 for r in results if r.startswith("exact"))
    refused = sum(1 for r in results if r.startswith("refused"))
    idle = sum(1 for r in results if r.startswith("idle"))
    print(f"tracers: {exact} forms exact for their copy, {refused} refusals the tool confirms, "
          f"{idle} copies not exercised by the workload, {len(failures)} failures")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


def counts_around(guest, body):
    """Runs `body` (a script fragment that runs the workload under a tool) between two reads of
    kprobe_profile; (exit code, output, {ref event: hits during the body})."""
    script = ("T=/sys/kernel/tracing\ncat $T/kprobe_profile >/tmp/before\n" + body +
              "\nrc=$?\necho '@@PROFILE'\ncat $T/kprobe_profile\necho '@@BEFORE'\ncat /tmp/before\nexit $rc\n")
    rc, out = sh(guest, script)
    tool_out, _, rest = out.partition("@@PROFILE\n")
    after_text, _, before_text = rest.partition("@@BEFORE\n")
    after, before = kprobe_profile(after_text), kprobe_profile(before_text)
    return rc, tool_out, {e: after[e] - before.get(e, 0) for e in after}


def errors(out):
    """A tool's error lines, joined (what it says is wrong, without the program it echoes)."""
    lines = [x.strip() for x in out.splitlines() if re.search(r"ERROR|[Ee]rror|Invalid|not unique|No such", x)]
    return " | ".join(lines)[:400] or out.strip()[-200:]


def verdict(c, got, refs, tool):
    mine = refs.get(c["ref"], 0)
    others = sum(refs.get(s, 0) for s in c["siblings"])
    what = f"{tool:8s} {c['spec']}"
    if got != mine:
        return "wrong", f"WRONG    {what}: {got} hits, the copy ran {mine} times, its siblings {others}"
    if mine == 0 or others == 0:
        return "idle", f"idle     {what}: the copy ran {mine} times, its siblings {others}"
    if got == mine:
        return "exact", f"exact    {what}: {got} hits = the copy's {mine} (siblings ran {others} times)"
    return "wrong", f"WRONG    {what}: {got} hits, the copy ran {mine} times, its siblings {others}"


def in_window(trace):
    """The reference and perf events' hits in the workload's window (its W0 and W1 trace markers):
    ({event: hits}, (w0, w1) in seconds of the trace clock)."""
    marks = {m.group(2): float(m.group(1)) for m in re.finditer(r"\s(\d+\.\d+): tracing_mark_write: (W[01])", trace)}
    if "W0" not in marks or "W1" not in marks:
        raise e2e.Fail("the workload's trace markers are missing (trace buffer overrun?)")
    hits = {}
    for m in re.finditer(r"\s(\d+\.\d+): ([rt]\d\d\d)\w*:", trace):
        if marks["W0"] <= float(m.group(1)) <= marks["W1"]:
            hits[m.group(2)] = hits.get(m.group(2), 0) + 1
    return hits, (marks["W0"], marks["W1"])


def window_matches(trace, pattern):
    """The matches of `pattern` in the trace whose time (its first group) is in the workload's
    window, with the reference events' hits there and the window: (matches, {event: hits}, (w0, w1))."""
    refs, (w0, w1) = in_window(trace)
    return [m for m in re.finditer(pattern, trace) if w0 <= float(m.group(1)) <= w1], refs, (w0, w1)


TRACE_RUN = "T=/sys/kernel/tracing\necho mono >$T/trace_clock\necho >$T/trace\n"


def printed_forms(copies, fmt, failures):
    """The copies symdex printed a `fmt` form for; a refusal (of a live copy, whose address the
    caller sees) is a failure."""
    for c in copies:
        if c[fmt][0] != 0:
            failures.append(f"{fmt}: symdex refused {c['spec']}: {c[fmt][2]}")
    return [c for c in copies if c[fmt][0] == 0]


def judge_perf(guest, copies, wl, results, failures):
    todo = printed_forms(copies, "perf", failures)
    if not todo:
        return
    # Each command as symdex printed it; the events it made are counted in the trace, beside the
    # reference probes, over the workload's window.
    script = wl + "".join(f"{c['perf'][1].splitlines()[-1]} >/tmp/perf-{c['ref']}.log 2>&1 || "
                          f"{{ echo 'PERF-FAILED {c['ref']}'; cat /tmp/perf-{c['ref']}.log; }}\n" for c in todo)
    script += ("perf probe -l 2>&1\n" + TRACE_RUN + "echo 1 >$T/events/symdex/enable\nsh /tmp/workload.sh\n"
               "echo 0 >$T/events/symdex/enable\necho @@TRACE\ncat $T/trace\n")
    rc, out = sh(guest, script)
    listing, _, trace = out.partition("@@TRACE\n")
    for c in todo:
        if f"PERF-FAILED {c['ref']}" in listing:
            failures.append(f"perf probe refused what symdex printed for {c['spec']}: {c['perf'][1]}\n{listing}")
    hits, _ = in_window(trace)
    for c in todo:
        kind, line = verdict(c, hits.get("t" + c["ref"][1:], 0), hits, "perf")
        results.append(line)
        if kind == "wrong":
            failures.append(line)


def arg_values(text):
    """The fetch args of a trace line ("dev=0xffff... attr=0x... n=12 s=\"x\""), as {name: value},
    numbers compared as numbers whatever base the definition printed them in."""
    out = {}
    for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', text):
        v = m.group(2)
        try:
            out[m.group(1)] = int(v, 0)
        except ValueError:
            out[m.group(1)] = v
    return out


def judge_perf_args(a, db, guest, copies, wl, results, failures):
    """perf's form with arguments by name ($params, which perf compiles itself from the copy's
    DWARF) beside the kprobe_events definition symdex compiles for the same copy and arguments:
    every hit in the workload's window must carry the same values in both."""
    todo, refused = [], []
    for c in copies:
        k = c["ref"][1:]
        ref = symdex(a, db, "kprobe", "-n", "-e", f"refa/a{k}", c["spec"], "$params")
        perf = symdex(a, db, "kprobe", "-n", "-e", f"symdexa/b{k}", "--format", "perf", c["spec"], "$params")
        if ref.returncode != 0:
            failures.append(f"perf arguments: no kprobe_events definition for {c['spec']} $params: {ref.stderr[-300:]}")
            continue
        if perf.returncode != 0:
            # symdex refuses perf's address form with arguments by name: perf must refuse it too.
            refused.append((c, k, f"perf probe -a 'symdexa:b{k}={c['addr']:#x} $params'", perf.stderr.strip()))
            continue
        todo.append((c, k, ref.stdout.strip(), perf.stdout.strip().splitlines()[-1]))
    for c, k, cmd, why in refused:
        rc, out = sh(guest, f"{cmd} 2>&1")
        line = f"refused  perf+args {c['spec']} $params: {cmd} -> {errors(out) if rc != 0 else 'added'}"
        results.append(line if rc != 0 else "WRONG" + line[7:])
        if rc == 0:
            failures.append(f"perf takes the address form with arguments by name, which symdex refused: {why}")
    if not todo:
        return
    script = wl + "T=/sys/kernel/tracing\n" + "".join(f"echo '{r}' >>$T/kprobe_events\n" for _, _, r, _ in todo)
    script += "".join(f"{p} >/tmp/perfa-{k}.log 2>&1 || {{ echo 'PERF-FAILED {k}'; cat /tmp/perfa-{k}.log; }}\n"
                      for _, k, _, p in todo)
    script += (TRACE_RUN + "echo 1 >$T/events/refa/enable\necho 1 >$T/events/symdexa/enable\nsh /tmp/workload.sh\n"
               "echo 0 >$T/events/refa/enable\necho 0 >$T/events/symdexa/enable\necho @@TRACE\ncat $T/trace\n")
    rc, out = sh(guest, script)
    listing, _, trace = out.partition("@@TRACE\n")
    seen = {}
    for m in window_matches(trace, r"\s(\d+\.\d+): ([ab]\d\d\d): \([^)]*\)(.*)")[0]:
        seen.setdefault(m.group(2), []).append(arg_values(m.group(3)))
    for c, k, ref_line, perf_line in todo:
        if f"PERF-FAILED {k}" in listing:
            failures.append(f"perf probe refused what symdex printed for {c['spec']} $params: {perf_line}\n{listing[-400:]}")
            continue
        mine, theirs = seen.get(f"a{k}", []), seen.get(f"b{k}", [])
        what = f"perf+args {c['spec']} $params"
        if not mine and not theirs:
            results.append(f"idle     {what}: the copy did not run in the window")
        elif mine == theirs:
            results.append(f"exact    {what}: {len(mine)} hits, the same values as symdex's kprobe_events "
                           f"definition ({', '.join(sorted(mine[0]))})")
        else:
            line = f"WRONG    {what}: symdex's definition saw {mine[:2]}, perf's {theirs[:2]}"
            results.append(line)
            failures.append(line)


# The array every BPF program of the guest counts its hits in, a slot a program (%(n)d slots).
HITS_MAP = r"""struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, %(n)d);
  __type(key, __u32);
  __type(value, __u64);
} hits SEC(".maps");
"""

# A unique function whose arguments reach through a pointer and read a user string, beside the
# sampled copies' own: every file the workload opens.
BPF_ARGS_UNIQUE = ("do_sys_openat2", "dfd", "filename:ustring", "how->flags")

# One kprobe program a probe: the fetch symdex printed for it, the struct it fills printed into the
# trace buffer (the reference events' own) as one line a hit; the loader's hit counts beside.
BPF_ARGS_PROGRAM = r"""#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
%(hits)s
%(fetches)s
%(programs)s
char LICENSE[] SEC("license") = "GPL";
"""


def args_of(a, db, spec):
    """The arguments a sampled copy is asked for: its parameters, and its first parameter's
    kobject name where it has one (a member chain ending in a kernel string)."""
    first = symdex(a, db, "kprobe", "-n", spec, "$params")
    m = re.search(r" (\w+)=%", first.stdout)
    if m:
        for chain in (f"{m.group(1)}->kobj.name:string", f"{m.group(1)}->name:string"):
            if symdex(a, db, "kprobe", "-n", spec, "$params", chain).returncode == 0:
                return ["$params", chain]
    return ["$params"]


def hit_values(text):
    """A hit's values, comparable: numbers as numbers; a string without its quotes, the kernel's
    "(fault)" (no string read) as the empty string a BPF read leaves."""
    out = []
    for k, v in sorted(arg_values(text).items()):
        if isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] == '"':
            v = v[1:-1]
        out.append((k, "" if v == "(fault)" else v))
    return tuple(out)


def same_hits(mine, theirs):
    """The reference's hits and a tool's, as multisets (hits on two CPUs need not keep their
    order); strings compared over the 63 bytes the BPF forms' 64-byte buffers keep."""
    def cut(hits):
        return sorted(tuple((k, v[:63] if isinstance(v, str) else v) for k, v in h) for h in hits)
    return len(mine) == len(theirs) and cut(mine) == cut(theirs)


def bpf_args_printk(fetch, k):
    """The kprobe program that fills the fetch's struct and prints it, one bpf_printk a hit:
    "@@B K name=value ..." with the kprobe_events definition's number bases."""
    sm = re.search(r"^struct (\w+)_args \{(.*?)^\};", fetch, re.M | re.S)
    fmt, vals = [], []
    for typ, name in re.findall(r"^\t(char|__[us]\d+) (\w+)", sm.group(2), re.M):
        if typ == "char":
            fmt.append(f'{name}=\\"%s\\"')
            vals.append(f"a.{name}")
        elif typ.startswith("__s"):
            fmt.append(f"{name}=%lld")
            vals.append(f"(long long)a.{name}")
        else:
            fmt.append(f"{name}=0x%llx")
            vals.append(f"(unsigned long long)a.{name}")
    return (f'SEC("kprobe") int p{k}(struct pt_regs *ctx)\n{{\n'
            f"\tstruct {sm.group(1)}_args a = {{}};\n\t__u32 slot = {k};\n"
            f"\t__u64 *v = bpf_map_lookup_elem(&hits, &slot);\n\n\tif (v)\n\t\t__sync_fetch_and_add(v, 1);\n"
            f"\t{sm.group(1)}_fetch(ctx, &a);\n"
            f'\tbpf_printk("@@B {k:03d} {" ".join(fmt)}", {", ".join(vals)});\n\treturn 0;\n}}\n')


def judge_bpf_args(a, db, guest, copies, wl, work, results, failures):
    """Arguments by name in bpftrace's program and in the C fetch that libbpf and cilium/ebpf
    programs share, beside the kprobe_events definition symdex compiles for the same probe: every
    hit in the workload's window must carry the same values in the tool and in the reference. The
    probes: each sampled copy with its parameters (and its first one's kobject name), and
    BPF_ARGS_UNIQUE. libbpf attaches each program by the C symdex printed, as judge_libbpf does."""
    probes = [(c["spec"], args_of(a, db, c["spec"])) for c in copies]
    probes.append((BPF_ARGS_UNIQUE[0], list(BPF_ARGS_UNIQUE[1:])))
    todo = []
    for spec, args in probes:
        k = len(todo)
        what = f"{spec} {' '.join(args)}"
        ref = symdex(a, db, "kprobe", "-n", "-e", f"refb/c{k:03d}", spec, *args)
        bt = symdex(a, db, "kprobe", "-n", "--format", "bpftrace", spec, *args)
        lb = symdex(a, db, "kprobe", "-n", "--json", "--format", "libbpf", "-e", f"symdexb/b{k:03d}", spec, *args)
        if ref.returncode or bt.returncode or lb.returncode:
            failures.append(f"bpf arguments: symdex printed no form for {what}: "
                            f"{(ref.stderr or bt.stderr or lb.stderr).strip()[-300:]}")
            continue
        prog = bt.stdout.strip().splitlines()[-1]
        # The program as printed, its printf told which probe and when: "@@A K NSECS " first.
        m = re.search(r'printf\("((?:[^"\\]|\\.)*)"', prog)
        if not m:
            failures.append(f"bpf arguments: bpftrace's program for {what} prints nothing: {prog}")
            continue
        prog = prog[:m.start()] + f'printf("@@A {k:03d} %llu {m.group(1)}", nsecs' + prog[m.end():]
        j = json.loads(lb.stdout)
        todo.append({"k": f"{k:03d}", "what": what, "ref": ref.stdout.strip(), "bpftrace": prog,
                     "fetch": j["fetch"], "attach": j["definition"]})
    if not todo:
        return
    rc, out = sh(guest, "T=/sys/kernel/tracing\necho 32768 >$T/buffer_size_kb\n" +
                 "".join(f"echo '{t['ref']}' >>$T/kprobe_events\n" for t in todo))
    if rc != 0:
        failures.append(f"bpf arguments: the kprobe_events definitions were refused: {out[-400:]}")
        return

    def judge(tool, trace, hits):
        """hits: the tool's (probe, seconds of the trace clock, its values' text)."""
        matches, _, (w0, w1) = window_matches(trace, r"\s(\d+\.\d+): c(\d\d\d): \([^)]*\)(.*)")
        seen, got = {}, {}
        for m in matches:
            seen.setdefault(m.group(2), []).append(hit_values(m.group(3)))
        for k, at, text in hits:
            if w0 <= at <= w1:
                got.setdefault(k, []).append(hit_values(text))
        for t in todo:
            mine, theirs = seen.get(t["k"], []), got.get(t["k"], [])
            what = f"{tool:8s} {t['what']}"
            if not mine and not theirs:
                results.append(f"idle     {what}: the probe did not fire in the window")
            elif same_hits(mine, theirs):
                results.append(f"exact    {what}: {len(mine)} hit{'' if len(mine) == 1 else 's'}, the values of "
                               f"symdex's kprobe_events definition ({', '.join(k for k, _ in mine[0])})")
            else:
                line = (f"WRONG    {what}: the definition saw {len(mine)} hits {list(mine[:2])}, "
                        f"the tool {len(theirs)} {list(theirs[:2])}")
                results.append(line)
                failures.append(line)

    # bpftrace: every program in one run, each hit printed with its nsecs (the trace's mono clock).
    rc, out = sh(guest, wl + TRACE_RUN + "echo 1 >$T/events/refb/enable\nbpftrace --unsafe -e '" +
                 " ".join(t["bpftrace"] for t in todo) + "' -c '/bin/sh /tmp/workload.sh' >/tmp/bpfa.out 2>&1\n"
                 "rc=$?\necho 0 >$T/events/refb/enable\ncat /tmp/bpfa.out\necho @@TRACE\ncat $T/trace\nexit $rc\n")
    tool, _, trace = out.partition("@@TRACE\n")
    if "@@A " not in tool:
        failures.append(f"bpf arguments: bpftrace ran none of the programs symdex printed ({rc}): {errors(tool)}")
    elif re.search(r"Lost \d+ events", tool):
        failures.append(f"bpf arguments: bpftrace lost events; its hits are not all there: {errors(tool)}")
    else:
        judge("bpftrace", trace, [(m.group(1), int(m.group(2)) / 1e9, m.group(3))
                                  for m in re.finditer(r"^@@A (\d\d\d) (\d+) (.*)$", tool, re.M)])

    # libbpf: the fetch as printed, in a kprobe program a probe against the kernel's own vmlinux.h.
    if not shutil.which("bpftool"):
        failures.append("bpf arguments: bpftool missing (scripts/setup-deps.sh): the C fetches not judged")
        return
    vmlinux = os.path.join(a.dbg_root, "usr/lib/debug/boot", f"vmlinux-{a.krel}")
    r = subprocess.run(["bpftool", "btf", "dump", "file", vmlinux, "format", "c"], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"bpf arguments: bpftool read no BTF from {vmlinux}: {r.stderr[-300:]}")
        return
    d = write_c_loader(work, "bpfargs", BPF_PROGRAM, LOADER, [t["attach"] for t in todo])
    with open(os.path.join(d, "vmlinux.h"), "w") as f:
        f.write(r.stdout)
    with open(os.path.join(d, "args.bpf.c"), "w") as f:
        f.write(BPF_ARGS_PROGRAM % {"hits": HITS_MAP % {"n": len(todo)}, "fetches": "\n".join(t["fetch"] for t in todo),
                                    "programs": "\n".join(bpf_args_printk(t["fetch"], i) for i, t in enumerate(todo))})
    ran = run_loader(guest, wl + "echo 1 >/sys/kernel/tracing/events/refb/enable\n", d, "bpf arguments (libbpf)",
                     "args.bpf.c", c_loader_cmd("loader.c", "loader"), "bpfa-", failures)
    sh(guest, "echo 0 >/sys/kernel/tracing/events/refb/enable")
    if ran is None:
        return
    tool, _, trace = ran
    for i, t in enumerate(todo):
        if f"ATTACH-FAILED {i} " in tool:
            failures.append(f"bpf arguments: libbpf refused what symdex printed for {t['what']}: {t['attach']}")
    judge("libbpf", trace, [(m.group(2), float(m.group(1)), m.group(3))
                            for m in re.finditer(r"\s(\d+\.\d+): bpf_trace_printk: @@B (\d\d\d) (.*)", trace)])


def judge_ftrace(a, db, guest, copies, wl, work, results, failures):
    """set_ftrace_filter for one copy: the line `symdex ftrace-index --tracefs` gives for it in the
    guest's available_filter_functions (captured at boot) written to set_ftrace_filter, the
    function tracer run over the workload; each name's function-tracer hits must equal that copy's
    reference count. One copy of each name at a time (the tracer prints the name alone), so a name
    with n copies takes n runs."""
    tracefs = os.path.join(work, "tracefs")
    os.makedirs(tracefs, exist_ok=True)
    shutil.copy(os.path.join(work, "sysroot/verdicts/available_filter_functions"), tracefs)
    line_of = {}
    for c in copies:
        r = symdex(a, db, "ftrace-index", "--tracefs", tracefs, c["spec"])
        if r.returncode != 0 or not r.stdout.strip().isdigit():
            failures.append(f"ftrace-index gave no line for {c['spec']} (exit {r.returncode}): {r.stderr.strip()[-300:]}")
            continue
        line_of[c["ref"]] = int(r.stdout.strip())
    rounds = []
    for c in copies:
        if c["ref"] not in line_of:
            continue
        k = sum(1 for o in copies[:copies.index(c)] if o["name"] == c["name"] and o["ref"] in line_of)
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(c)
    for batch in rounds:
        # The filter first, read back: a line number the kernel refuses leaves it empty, and the
        # function tracer would then trace every function.
        rc, out = sh(guest, "T=/sys/kernel/tracing\necho nop >$T/current_tracer\necho >$T/set_ftrace_filter\n" +
                     "".join(f"echo {line_of[c['ref']]} >>$T/set_ftrace_filter || echo REFUSED {c['ref']}\n"
                             for c in batch) + "cat $T/set_ftrace_filter\n")
        held = sorted(x.split()[0] for x in out.splitlines() if x.strip() and not x.startswith(("REFUSED", "#")))
        if rc != 0 or "REFUSED" in out or held != sorted(c["name"] for c in batch):
            asked = ", ".join(f"{c['spec']}: {line_of[c['ref']]}" for c in batch)
            failures.append(f"set_ftrace_filter did not take the lines ftrace-index gave ({asked}): "
                            f"it holds {held}; {out.strip()[-300:]}")
            sh(guest, "echo >/sys/kernel/tracing/set_ftrace_filter")
            continue
        # The trace read before the tracer is switched back: switching tracers empties the buffer.
        rc, out = sh(guest, wl + TRACE_RUN + "echo function >$T/current_tracer\nsh /tmp/workload.sh\n"
                     "echo 0 >$T/tracing_on\necho @@TRACE\ncat $T/trace\necho nop >$T/current_tracer\n"
                     "echo >$T/set_ftrace_filter\necho 1 >$T/tracing_on\n")
        listing, _, trace = out.partition("@@TRACE\n")
        matches, refs, _ = window_matches(trace, r"\s(\d+\.\d+): (\S+) <-")
        hits = collections.Counter(m.group(2) for m in matches)
        for c in batch:
            kind, line = verdict(c, hits.get(c["name"], 0), refs, "ftrace")
            results.append(line + f" [set_ftrace_filter line {line_of[c['ref']]}]")
            if kind == "wrong":
                failures.append(line + f"; set_ftrace_filter held {held}")


def judge_bpftrace(guest, copies, wl, results, failures):
    printed = [c for c in copies if c["bpftrace"][0] == 0]
    refused = [c for c in copies if c["bpftrace"][0] != 0]
    # Every printed probe in one program (one bpftrace start: its LLVM compile is slow under TCG),
    # each hit printed with its time (nsecs: the mono clock the trace is set to), counted over the
    # workload's window; where bpftrace refuses the program, each probe alone says which.
    probe_of = {c["ref"]: c["bpftrace"][1].splitlines()[-1].strip() for c in printed}

    def count_all(cs):
        prog = " ".join(f"{probe_of[c['ref']]} {{ printf(\"@@H {c['ref']} %llu\\n\", nsecs); }}" for c in cs)
        rc, out = sh(guest, wl + TRACE_RUN + f"bpftrace --unsafe -e '{prog}' -c '/bin/sh /tmp/workload.sh' 2>&1\n"
                     "rc=$?\necho @@TRACE\ncat $T/trace\nexit $rc\n")
        tool, _, trace = out.partition("@@TRACE\n")
        stamps = [(m.group(1), int(m.group(2)) / 1e9) for m in re.finditer(r"@@H (r\d+) (\d+)", tool)]
        if not stamps and rc != 0:
            return False, tool, {}, {}
        refs, (w0, w1) = in_window(trace)
        got = {}
        for ref, t in stamps:
            if w0 <= t <= w1:
                got[ref] = got.get(ref, 0) + 1
        return True, tool, got, refs

    ok, out, got, refs = count_all(printed) if printed else (True, "", {}, {})
    if not ok:
        log(f"bpftrace refused the program of {len(printed)} probes: {errors(out)}; each alone")
        taken = []
        for c in printed:
            rc1, out1 = sh(guest, f"bpftrace --unsafe -e '{probe_of[c['ref']]} {{ }}' -c /bin/true 2>&1")
            if rc1 != 0:
                failures.append(f"bpftrace refused what symdex printed for {c['spec']} "
                                f"({probe_of[c['ref']]}): {errors(out1)}")
            else:
                taken.append(c)
        printed = taken
        ok, out, got, refs = count_all(printed) if printed else (True, "", {}, {})
        if not ok:
            failures.append(f"bpftrace refused the program of the probes it takes one by one: {errors(out)}")
            return
    for c in printed:
        kind, line = verdict(c, got.get(c["ref"], 0), refs, "bpftrace")
        results.append(line + f" [{probe_of[c['ref']]}]")
        if kind == "wrong":
            failures.append(line)

    # A refusal (no address shown to this caller) must be one bpftrace makes too: the name alone is
    # not unique in the kernel.
    seen = set()
    for c in refused:
        if c["name"] in seen or c["module"] != "vmlinux":
            continue
        seen.add(c["name"])
        rc1, out1 = sh(guest, f"bpftrace -e 'kprobe:{c['name']} {{ }}' -c /bin/true 2>&1")
        line = f"refused  bpftrace {c['spec']}: kprobe:{c['name']} -> {errors(out1) or rc1}"
        results.append(line if rc1 != 0 else "WRONG" + line[7:])
        if rc1 == 0:
            failures.append(f"bpftrace attaches what symdex refused for {c['spec']}: {out1}")


# One kprobe program a copy, each counting its hits into its slot of an array.
BPF_PROGRAM = r"""#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
""" + HITS_MAP + r"""#define P(i) SEC("kprobe") int p##i(void *ctx) { __u32 k = i; __u64 *v = bpf_map_lookup_elem(&hits, &k); \
  if (v) __sync_fetch_and_add(v, 1); return 0; }
%(programs)s
char LICENSE[] SEC("license") = "GPL";
"""

# The loader: each copy's attach is the C symdex printed for it, compiled as printed (its call's
# link kept by a macro of the same name); then the workload, and each slot's hits over it.
LOADER = r"""#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
static struct bpf_link *links[%(n)d];
static int at;
#define bpf_program__attach_kprobe_opts(p, f, o) (links[at] = bpf_program__attach_kprobe_opts(p, f, o))
static void counts(int map, unsigned long long *out) {
  for (__u32 k = 0; k < %(n)d; k++) bpf_map_lookup_elem(map, &k, &out[k]);
}
int main(int argc, char **argv) {
  struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
  if (!obj || bpf_object__load(obj)) { printf("LOAD-FAILED %%d\n", errno); return 2; }
  struct bpf_program *prog;
  char name[16];
%(attaches)s
  int map = bpf_object__find_map_fd_by_name(obj, "hits");
  unsigned long long before[%(n)d] = {0}, after[%(n)d] = {0};
  counts(map, before);
  if (system("/bin/sh /tmp/workload.sh") != 0) return 3;
  counts(map, after);
  for (int k = 0; k < %(n)d; k++) printf("@@L %%d %%llu\n", k, after[k] - before[k]);
  return 0;
}
"""


def judge_libbpf(guest, copies, wl, work, results, failures):
    """libbpf: the attach symdex prints for each copy, compiled here into a loader (gcc, libbpf-dev)
    beside a kprobe program a copy (clang -target bpf), both run in the guest; the loader counts
    over the workload alone (its own attaches read the kprobe PMU's sysfs type too)."""
    printed = printed_forms(copies, "libbpf", failures)
    if not printed:
        return
    if not shutil.which("clang-14") or not shutil.which(TOOLCHAIN[ARCH]["cc"]):
        raise e2e.Skip(f"clang-14 or {TOOLCHAIN[ARCH]['cc']} missing (scripts/setup-deps.sh)")
    d = write_c_loader(work, "libbpf", BPF_PROGRAM, LOADER, [c["libbpf"][1].splitlines()[-1] for c in printed])
    ran = run_loader(guest, wl, d, "libbpf", "prog.bpf.c", c_loader_cmd("loader.c", "loader"), "", failures)
    if ran is None:
        return
    tool, refs, _ = ran
    got = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"@@L (\d+) (\d+)", tool)}
    for i, c in enumerate(printed):
        if f"ATTACH-FAILED {i} " in tool:
            failures.append(f"libbpf refused what symdex printed for {c['spec']}: {c['libbpf'][1]}")
            continue
        kind, line = verdict(c, got.get(i, 0), refs, "libbpf")
        results.append(line)
        if kind == "wrong":
            failures.append(line)


# The cilium/ebpf loader (Debian 12's golang-github-cilium-ebpf-dev, 0.9.1): the kprobe programs of
# prog.bpf.o (BPF_PROGRAM), each attached by the Go expression symdex printed for its copy, used as
# printed; then the workload, and each slot's hits over it.
CILIUM_LOADER = r"""package main

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

func counts(m *ebpf.Map) []uint64 {
	out := make([]uint64, %(n)d)
	for k := range out {
		_ = m.Lookup(uint32(k), &out[k])
	}
	return out
}

func main() {
	coll, err := ebpf.LoadCollection(os.Args[1])
	if err != nil {
		fmt.Println("LOAD-FAILED", err)
		os.Exit(2)
	}
	var links []link.Link
	var prog *ebpf.Program
	var l link.Link
%(attaches)s
	before := counts(coll.Maps["hits"])
	if err := exec.Command("/bin/sh", "/tmp/workload.sh").Run(); err != nil {
		os.Exit(3)
	}
	after := counts(coll.Maps["hits"])
	for k := range after {
		fmt.Printf("@@L %%d %%d\n", k, after[k]-before[k])
	}
	for _, l := range links {
		l.Close()
	}
}
"""


def judge_cilium(guest, copies, wl, work, results, failures):
    """cilium/ebpf: the Go expression symdex prints for each copy, built here into a static loader
    (go, golang-github-cilium-ebpf-dev) over a kprobe program a copy (clang -target bpf), run in
    the guest. Where symdex refuses (a module's copy of a shared name), the refusal is checked
    against cilium/ebpf itself: the name alone must fail in the kernel ("not unique")."""
    printed = [c for c in copies if c["cilium"][0] == 0]
    refused = [c for c in copies if c["cilium"][0] != 0]
    if not shutil.which("clang-14") or not shutil.which("go"):
        raise e2e.Skip("clang-14 or go missing (scripts/setup-deps.sh)")
    d = os.path.join(work, "cilium")
    os.makedirs(d, exist_ok=True)
    # The printed forms, then one name-alone attach of each refused name (the refusal's witness).
    witnesses = []
    for c in refused:
        if c["name"] not in [w["name"] for w in witnesses]:
            witnesses.append(c)
    forms = [c["cilium"][1].splitlines()[-1].strip() for c in printed] + \
        [f'link.Kprobe("{c["name"]}", prog, nil)' for c in witnesses]
    n = len(forms)
    if n == 0:
        return
    # cilium/ebpf 0.9.1 types a program by its section's prefix: "kprobe/" (a bare "kprobe" is
    # an unspecified program, which it does not load).
    with open(os.path.join(d, "prog.bpf.c"), "w") as f:
        f.write((BPF_PROGRAM % {"n": n, "programs": "\n".join(f"P({i})" for i in range(n))})
                .replace('SEC("kprobe")', 'SEC("kprobe/symdex")'))
    attaches = "".join(
        f'\tprog = coll.Programs["p{i}"]\n'
        f'\tif l, err = {form}; err != nil {{\n\t\tfmt.Printf("ATTACH-FAILED {i} %v\\n", err)\n'
        f'\t}} else {{\n\t\tlinks = append(links, l)\n\t}}\n' for i, form in enumerate(forms))
    with open(os.path.join(d, "main.go"), "w") as f:
        f.write(CILIUM_LOADER % {"n": n, "attaches": attaches})
    env = dict(os.environ, GOPATH="/usr/share/gocode", GO111MODULE="off", CGO_ENABLED="0",
               GOCACHE=os.path.join(d, "gocache"), GOARCH=TOOLCHAIN[ARCH]["goarch"])
    ran = run_loader(guest, wl, d, "cilium", "prog.bpf.c", ["go", "build", "-ldflags=-s -w", "-o", "loader", "main.go"],
                     "c-", failures, env)
    if ran is None:
        return
    tool, refs, _ = ran
    got = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"@@L (\d+) (\d+)", tool)}
    for i, c in enumerate(printed):
        m = re.search(rf"ATTACH-FAILED {i} (.*)", tool)
        if m:
            failures.append(f"cilium/ebpf refused what symdex printed for {c['spec']} ({forms[i]}): {m.group(1)}")
            continue
        kind, line = verdict(c, got.get(i, 0), refs, "cilium")
        results.append(line + f" [{forms[i]}]")
        if kind == "wrong":
            failures.append(line)
    for j, c in enumerate(witnesses):
        i = len(printed) + j
        m = re.search(rf"ATTACH-FAILED {i} (.*)", tool)
        line = f"refused  cilium   {c['spec']}: link.Kprobe(\"{c['name']}\") -> {m.group(1) if m else 'attached'}"
        # The kernel's refusal of a name that is not unique: EADDRNOTAVAIL.
        if m and re.search(r"cannot assign requested address|not unique", m.group(1)):
            results.append(line)
        else:
            results.append("WRONG" + line[7:])
            failures.append(f"cilium/ebpf: {c['name']} by name, which symdex refused for {c['spec']}, was not refused as "
                            f"not unique: {m.group(1) if m else 'it attached'}")


# kprobe_multi: one kprobe.multi program a copy, each counting into its slot.
KMULTI_PROGRAM = BPF_PROGRAM.replace('SEC("kprobe")', 'SEC("kprobe.multi")')

# The kprobe_multi loader: each copy's attach is the C symdex printed for it, as printed; where
# symdex refused, the same link by the copy's address, to show what the kernel says.
KMULTI_LOADER = LOADER.replace("bpf_program__attach_kprobe_opts(p, f, o) (links[at] = bpf_program__attach_kprobe_opts(p, f, o))",
                               "bpf_program__attach_kprobe_multi_opts(p, f, o) "
                               "(links[at] = bpf_program__attach_kprobe_multi_opts(p, f, o))")


def judge_kprobe_multi(guest, copies, wl, work, results, failures):
    """kprobe_multi: what symdex prints for each copy attached as printed and counted; where it
    refuses (a kernel without CONFIG_FPROBE), the link by the copy's address must fail in the
    kernel too (EOPNOTSUPP)."""
    if not shutil.which("clang-14") or not shutil.which(TOOLCHAIN[ARCH]["cc"]):
        raise e2e.Skip(f"clang-14 or {TOOLCHAIN[ARCH]['cc']} missing (scripts/setup-deps.sh)")
    def attach(c):
        if c["kprobe_multi"][0] == 0:
            return c["kprobe_multi"][1].splitlines()[-1]
        return ("const unsigned long addrs[] = {%#x}; LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, .addrs = addrs, "
                ".cnt = 1); bpf_program__attach_kprobe_multi_opts(prog, NULL, &opts);" % c["addr"])
    # Two controls after the copies: a unique function by its name, as a pattern and in .syms;
    # whether the kernel takes kprobe_multi links at all.
    # Two controls after the copies: a unique function by its name as a pattern, and by its
    # address; whether the kernel takes kprobe_multi links at all.
    vfs_read = 0
    with open(os.path.join(work, "sysroot/proc/kallsyms")) as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[2] == "vfs_read":
                vfs_read = int(p[0], 16)
    controls = ['bpf_program__attach_kprobe_multi_opts(prog, "vfs_read", NULL);',
                f"const unsigned long addrs[] = {{{vfs_read:#x}}}; LIBBPF_OPTS(bpf_kprobe_multi_opts, opts, "
                ".addrs = addrs, .cnt = 1); bpf_program__attach_kprobe_multi_opts(prog, NULL, &opts);"]
    d = write_c_loader(work, "kmulti", KMULTI_PROGRAM, KMULTI_LOADER, [attach(c) for c in copies] + controls)
    ran = run_loader(guest, wl, d, "kprobe_multi", "prog.bpf.c", c_loader_cmd("loader.c", "loader"), "m-", failures)
    if ran is None:
        return
    tool, refs, _ = ran
    got = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"@@L (\d+) (\d+)", tool)}
    for k, how in enumerate(("its name as a pattern", "its address")):
        i = len(copies) + k
        failed = re.search(rf"ATTACH-FAILED {i} (\d+)", tool)
        results.append(f"control  kprobe_multi vfs_read by {how}: "
                       f"{'errno ' + failed.group(1) if failed else f'attached, {got.get(i, 0)} hits'}")
    libbpf_said = " | ".join(x.strip() for x in tool.splitlines() if x.startswith("libbpf:"))[:600]
    for i, c in enumerate(copies):
        failed = re.search(rf"ATTACH-FAILED {i} (\d+)", tool)
        if c["kprobe_multi"][0] != 0:
            # EOPNOTSUPP (95): the kernel has no kprobe_multi links.
            why = c["kprobe_multi"][2].replace("symdex: ", "")[:90]
            line = f"refused  kprobe_multi {c['spec']}: symdex: {why}...; the guest: errno {failed.group(1) if failed else 'none'}"
            if failed and failed.group(1) == "95":
                results.append(line)
            else:
                results.append("WRONG" + line[7:])
                failures.append(f"kprobe_multi: symdex refused {c['spec']}, the kernel: "
                                f"{'errno ' + failed.group(1) if failed else 'attached'}")
            continue
        if failed:
            failures.append(f"kprobe_multi refused what symdex printed for {c['spec']}: errno {failed.group(1)}"
                            f"{' (' + libbpf_said + ')' if libbpf_said else ''}")
            continue
        kind, line = verdict(c, got.get(i, 0), refs, "kmulti")
        results.append(line)
        if kind == "wrong":
            failures.append(line)


# One fentry program a sampled name, attached by the name alone (SEC("fentry/NAME")), each
# counting its hits into its own map.
FENTRY_PROGRAM = r"""#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} hits SEC(".maps");
#define F(i, name) SEC("fentry/" #name) int f##i(void *ctx) { __u32 k = 0; \
  __u64 *v = bpf_map_lookup_elem(&hits, &k); if (v) __sync_fetch_and_add(v, 1); return 0; }
%(programs)s
char LICENSE[] SEC("license") = "GPL";
"""

# The fentry loader: the object opened once a program, that program alone loaded (a name libbpf
# finds in no BTF fails the load of its program only) and attached; then the workload, and each
# program's hits over it. libbpf's own words on a failure go to the output.
FENTRY_LOADER = r"""#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int map[%(n)d];
static unsigned long long count(int m) { __u32 k = 0; unsigned long long v = 0; bpf_map_lookup_elem(m, &k, &v); return v; }
int main(int argc, char **argv) {
  unsigned long long before[%(n)d] = {0};
  for (int i = 0; i < %(n)d; i++) {
    char want[16];
    snprintf(want, sizeof want, "f%%d", i);
    map[i] = -1;
    struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
    if (!obj) { printf("OPEN-FAILED %%d\n", errno); return 2; }
    struct bpf_program *p;
    bpf_object__for_each_program(p, obj) bpf_program__set_autoload(p, strcmp(bpf_program__name(p), want) == 0);
    if (bpf_object__load(obj)) { printf("@@R %%d LOAD-FAILED %%d\n", i, errno); continue; }
    struct bpf_link *l = bpf_program__attach(bpf_object__find_program_by_name(obj, want));
    if (!l) { printf("@@R %%d ATTACH-FAILED %%d\n", i, errno); continue; }
    map[i] = bpf_object__find_map_fd_by_name(obj, "hits");
    printf("@@R %%d ATTACHED\n", i);
  }
  for (int i = 0; i < %(n)d; i++) if (map[i] >= 0) before[i] = count(map[i]);
  if (system("/bin/sh /tmp/workload.sh") != 0) return 3;
  for (int i = 0; i < %(n)d; i++) if (map[i] >= 0) printf("@@F %%d %%llu\n", i, count(map[i]) - before[i]);
  return 0;
}
"""


def fentry_verdicts(a, db, names, copies):
    """symdex's fentry verdict of every sampled copy (c["fentry"]), and per name: (the verdicts its
    function copies have, the copy the name reaches or None)."""
    out = {}
    for name in names:
        r = symdex(a, db, "--json", "which", "--exact", name)
        insts = json.loads(r.stdout)["instances"] if r.returncode == 0 else []
        by_addr = {int(i["address"], 16): i["fentry"] for i in insts if i.get("address")}
        for c in copies:
            if c["name"] == name:
                c["fentry"] = by_addr.get(c["addr"], {"reach": "?", "reason": "not in symdex's answer"})
        reached = next((i for i in insts if i["fentry"]["reach"] == "reaches"), None)
        out[name] = ({i["fentry"]["reach"] for i in insts if i["type"] in "tTwW"}, reached)
    return out


def refusal_names(a, db, dups):
    """One duplicated name of each verdict that says fentry by the name cannot attach anywhere
    (attach-fails: it resolves to a copy without an fentry call; no-btf), for the guest to show the
    tool failing too."""
    want, found = {"attach-fails", "no-btf"}, {}
    for g in dups["duplicates"][:400]:
        name = g["instances"][0]["name"]
        r = symdex(a, db, "--json", "which", "--exact", name)
        if r.returncode != 0:
            continue
        kinds = {i["fentry"]["reach"] for i in json.loads(r.stdout)["instances"] if i["type"] in "tTwW"}
        if len(kinds) == 1 and (k := next(iter(kinds))) in want and k not in found:
            found[k] = name
        if len(found) == len(want):
            break
    return sorted(found.values())


def reached_refs(a, db, guest, copies, verdicts):
    """A reference probe on each copy a name reaches that has none yet (the sample's copies are
    those the workload ran, the copy fentry reaches may not be one): {name: its ref event}."""
    refs, lines = {}, []
    for k, (name, (_, reached)) in enumerate(sorted(verdicts.items())):
        if reached is None or not reached.get("dwarf") or not reached.get("address"):
            continue
        mine = next((c["ref"] for c in copies if c["name"] == name and c["addr"] == int(reached["address"], 16)), None)
        if mine:
            refs[name] = mine
            continue
        ev = f"r{900 + k:03d}"
        r = symdex(a, db, "kprobe", "-n", "-e", f"ref/{ev}", e2e.spec_of(reached))
        if r.returncode == 0:
            lines.append(r.stdout.strip())
            refs[name] = ev
    if lines:
        rc, out = sh(guest, "T=/sys/kernel/tracing\necho 0 >$T/events/ref/enable\n" +
                     "".join(f"echo '{x}' >>$T/kprobe_events\n" for x in lines) + "echo 1 >$T/events/ref/enable\n")
        if rc != 0:
            raise e2e.Fail(f"reference probes on the copies fentry reaches refused: {out}")
    return refs


def judge_fentry(a, db, dups, guest, copies, wl, work, results, failures):
    """fentry by name, judged per copy: each sampled name's program attached by the name alone in
    the guest; its hits over the workload equal the reference count of the copy symdex says the
    name reaches, and of no sibling it says it does not; a name symdex says fails (no BTF function,
    or a copy without an fentry call) must fail in libbpf or the kernel."""
    names = sorted({c["name"] for c in copies}) + refusal_names(a, db, dups)
    verdicts = fentry_verdicts(a, db, names, copies)
    reached_ref = reached_refs(a, db, guest, copies, verdicts)
    if not shutil.which("clang-14") or not shutil.which(TOOLCHAIN[ARCH]["cc"]):
        raise e2e.Skip(f"clang-14 or {TOOLCHAIN[ARCH]['cc']} missing (scripts/setup-deps.sh)")
    n = len(names)
    d = os.path.join(work, "fentry")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "fentry.bpf.c"), "w") as f:
        f.write(FENTRY_PROGRAM % {"programs": "\n".join(f"F({i}, {nm})" for i, nm in enumerate(names))})
    with open(os.path.join(d, "loader.c"), "w") as f:
        f.write(FENTRY_LOADER % {"n": n})
    ran = run_loader(guest, wl, d, "fentry", "fentry.bpf.c", c_loader_cmd("loader.c", "loader"), "f-", failures)
    if ran is None:
        return
    tool, refs, _ = ran
    state = {int(m.group(1)): m.group(2).strip() for m in re.finditer(r"@@R (\d+) (.+)", tool)}
    got = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"@@F (\d+) (\d+)", tool)}
    for i, name in enumerate(names):
        kinds, reached = verdicts[name]
        ref = reached_ref.get(name)
        st = state.get(i, "?")
        mine = [c for c in copies if c["name"] == name]
        if not reached:
            # symdex says no copy is reached: the name must not attach.
            line = f"fentry   {name}: symdex {'/'.join(sorted(kinds))}; the guest: {st}"
            if st == "ATTACHED":
                results.append("WRONG    " + line)
                failures.append(f"fentry/{name} attached where symdex says it cannot: {line}")
            else:
                results.append("refused  " + line)
            continue
        if st != "ATTACHED":
            failures.append(f"fentry/{name}: symdex says it reaches a copy, the guest: {st}\n{errors(tool)}")
            continue
        hits = got.get(i, 0)
        for c in mine:
            says = c["fentry"]["reach"]
            what = f"fentry   {c['spec']} ({says})"
            mine_n = refs.get(c["ref"], 0)
            if says == "reaches":
                kind, line = verdict(c, hits, refs, "fentry")
                results.append(line)
                if kind == "wrong":
                    failures.append(line)
            elif ref is None:
                results.append(f"idle     {what}: the copy the name reaches has no reference probe")
            elif mine_n == refs.get(ref, 0) or refs.get(ref, 0) == 0:
                results.append(f"idle     {what}: this copy ran {mine_n} times, the reached copy {refs.get(ref, 0)}, "
                               f"fentry/{name} {hits}")
            elif hits == refs.get(ref, 0) and hits != mine_n:
                results.append(f"exact    {what}: fentry/{name} {hits} hits = the reached copy's, not this one's {mine_n}")
            else:
                line = f"WRONG    {what}: fentry/{name} {hits} hits, this copy {mine_n}, the reached copy {refs.get(ref, 0)}"
                results.append(line)
                failures.append(line)
    judge_kfunc(a, db, guest, wl, names, verdicts, reached_ref, copies, results, failures)


def judge_kfunc(a, db, guest, wl, names, verdicts, reached_ref, copies, results, failures):
    """bpftrace's kfunc (its fentry), as symdex's fentry form names it for the copy each name
    reaches (kfunc:vmlinux:NAME or kfunc:MOD:NAME): all in one program, each hit printed with its
    nsecs; its hits over the workload's window equal the reached copy's reference count (exact
    where a sibling ran a different number of times); a name symdex says reaches no copy must fail
    in bpftrace."""
    live = []
    for n in names:
        reached = verdicts[n][1]
        if not reached or not reached_ref.get(n):
            continue
        r = symdex(a, db, "kprobe", "-n", "--format", "fentry", e2e.spec_of(reached))
        m = re.search(r"bpftrace (kfunc:\S+?);", r.stderr)
        if r.returncode != 0 or not m:
            failures.append(f"kfunc: symdex printed no bpftrace form for {e2e.spec_of(reached)}: {r.stderr[-300:]}")
            continue
        live.append((n, m.group(1)))
    if live:
        prog = " ".join(f'{probe} {{ printf("@@K {i} %llu\\n", nsecs); }}' for i, (_, probe) in enumerate(live))
        rc, out = sh(guest, wl + TRACE_RUN + f"bpftrace -e '{prog}' -c '/bin/sh /tmp/workload.sh' 2>&1\n"
                     "rc=$?\necho @@TRACE\ncat $T/trace\nexit $rc\n")
        tool, _, trace = out.partition("@@TRACE\n")
        stamps = [(int(m.group(1)), int(m.group(2)) / 1e9) for m in re.finditer(r"@@K (\d+) (\d+)", tool)]
        if not stamps and rc != 0:
            failures.append(f"bpftrace refused the kfunc probes symdex printed ({' '.join(p for _, p in live)}): "
                            f"{errors(tool)}")
        else:
            refs, (w0, w1) = in_window(trace)
            for i, (n, probe) in enumerate(live):
                got = sum(1 for k, t in stamps if k == i and w0 <= t <= w1)
                ref = reached_ref[n]
                want = refs.get(ref, 0)
                others = [refs.get(c["ref"], 0) for c in copies if c["name"] == n and c["ref"] != ref]
                what = f"kfunc    {probe} (reaches {e2e.spec_of(verdicts[n][1])})"
                if got != want:
                    line = f"WRONG    {what}: {got} hits, the reached copy ran {want} times, the others {others}"
                    results.append(line)
                    failures.append(line)
                elif want == 0 or all(o == want for o in others):
                    results.append(f"idle     {what}: the reached copy ran {want} times, the others {others}")
                else:
                    results.append(f"exact    {what}: {got} hits = the reached copy's (the others ran {others} times)")
    for n in names:
        if verdicts[n][1]:
            continue
        rc, out = sh(guest, f"bpftrace -e 'kfunc:vmlinux:{n} {{ }}' -c /bin/true 2>&1")
        line = f"kfunc    {n}: symdex {'/'.join(sorted(verdicts[n][0]))}; bpftrace: {errors(out) if rc else 'attached'}"
        results.append(("refused  " if rc else "WRONG    ") + line)
        if rc == 0:
            failures.append(f"bpftrace attached kfunc:vmlinux:{n}, which symdex says reaches no copy")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except e2e.Skip as e:
        print(f"SKIP: {e}")
        sys.exit(77)
    except e2e.Fail as e:
        print(f"FAIL: {e}")
        sys.exit(1)
