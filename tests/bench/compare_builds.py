#!/usr/bin/env python3
"""Two builds of symdex asked the same questions of one index: every output compared byte for byte.

What a refactoring that must not change behaviour is checked with: the CLI of each build
embedded (--local), each through its own symdexd, and each CLI through the *other* build's
daemon (the wire is a contract: an older client must read a newer daemon's answers, and the
other way round). The questions come from the index: sampled duplicated names (which, resolve
by name, by canonical spec, by address; kprobe in every form, with arguments by name and at a
line; vars; callers; lines; inlined), what has a build-ID, frames in each form and the same frames
as a log to decode, and the whole listings (dups, symbols, kallsyms), text and --json.

  tests/bench/compare_builds.py --old OLD/bin --new build/bin --db INDEX [--sample 40] [--seed 1]

Prints one line per difference (command, mode, what differs) and a summary; exit 1 on any. A verb
only the new build has is left out, and named.
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time


def run(bindir, args, timeout=600):
    r = subprocess.run([os.path.join(bindir, "symdex")] + args, capture_output=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


LOG_FILE = os.path.join(tempfile.gettempdir(), f"compare_builds.{os.getpid()}.log")


def commands(new, db, sample, seed):
    rc, out, err = run(new, ["--db", db, "--json", "dups"])
    if rc != 0:
        sys.exit(f"compare_builds: dups failed: {err.decode()}")
    groups = json.loads(out)["duplicates"]
    rng = random.Random(seed)
    picked = rng.sample(groups, min(sample, len(groups)))
    cmds = ["dups", "--json dups", "dups --traceable", "symbols", "--json symbols --canonical",
            "kallsyms --aliases", "status", "--json status"]
    # What has a build-ID: the debug files' (sampled), one nothing has, one that is no build-ID.
    rc, out, _ = run(new, ["--db", db, "--json", "status"])
    ids = sorted({d["build_id"] for t in json.loads(out)["targets"] for d in t.get("debuginfo", [])
                  if d.get("build_id")}) if rc == 0 else []
    for bid in random.Random(seed).sample(ids, min(8, len(ids))) + ["00" * 20, "not-hex"]:
        cmds += [f"buildid {bid}", f"--json buildid {bid}"]
    for g in picked:
        name = g["name"]
        q = shlex.quote
        cmds += [f"which {q(name)}", f"--json which {q(name)}", f"resolve {q(name)}", f"--json resolve {q(name)}",
                 f"kprobe -n {q(name)}", f"inlined {q(name)}", f"--json inlined {q(name)}"]
        for i, inst in enumerate(g["instances"][:3]):
            dw = inst.get("dwarf") or {}
            spec = f"{name}@{dw['file']}:{dw['line']}" if dw.get("file") else None
            if inst.get("address"):
                cmds.append(f"resolve {q(inst['address'])}")
                cmds.append(f"--json addr {q(inst['address'])}")
            if not spec:
                continue
            if inst.get("module"):
                spec = f"{inst['module']}:{spec}"
            cmds += [f"resolve {q(spec)}", f"--json resolve {q(spec)}", f"kprobe -n {q(spec)}",
                     f"kprobe -n {q(spec)} '$params'", f"--json kprobe -n {q(spec)} '$params'",
                     f"kprobe -n -r {q(spec)} '$retval'", f"kprobe -n --rel-line 1 {q(spec)}",
                     f"kprobe -n --format perf {q(spec)}", f"kprobe -n --format bpftrace {q(spec)} '$params'",
                     f"kprobe -n --format libbpf {q(spec)} '$params'", f"--json kprobe -n --format libbpf {q(spec)}",
                     f"kprobe -n -e grp/ev {q(spec)} 'x=%di:u64'", f"vars {q(spec)}", f"--json vars {q(spec)}",
                     f"callers {q(spec)}", f"--json callers {q(spec)}",
                     f"lines {q(dw['file'] + ':' + str(dw['line']))}",
                     f"--json lines {q(dw['file'] + ':' + str(dw['line']))}"]
            if i == 0:
                cmds.append(f"kprobe -n --inlined {q(name)}")
    # Frames from another machine, each form: a printed symbol+offset/size (in its module), a
    # link-time address; and the same frames as a log to decode.
    frames, log = [], []
    for g in picked:
        for inst in g["instances"][:2]:
            size = inst.get("size") or 0
            mod = inst.get("module") or "vmlinux"
            printed = f"{g['name']}+0x4/{size:#x}" + ("" if mod == "vmlinux" else f" [{mod}]")
            frames.append(printed)
            if inst.get("address"):
                frames.append(inst["address"][2:])
                log.append(f" [<{inst['address'][2:]}>] {printed}")
            else:
                log.append(f" {printed}")
    if frames:
        q = shlex.quote
        cmds += ["frames " + " ".join(q(f) for f in frames), "--json frames " + " ".join(q(f) for f in frames)]
        with open(LOG_FILE, "w") as f:
            f.write("Call Trace:\n <TASK>\n" + "\n".join(log) + "\n </TASK>\n")
        cmds += [f"decode {LOG_FILE}", f"--json decode {LOG_FILE}", f"decode --frames-only {LOG_FILE}"]
    return cmds


class Daemon:
    def __init__(self, bindir, db, work, tag):
        self.sock = os.path.join(work, f"{tag}.sock")
        self.log = open(os.path.join(work, f"{tag}.log"), "w")
        self.p = subprocess.Popen([os.path.join(bindir, "symdexd"), "--listen", f"unix:{self.sock}", "--db", db,
                                   "--no-index-live", "--modules-poll", "0"], stdout=self.log, stderr=self.log)
        for _ in range(600):
            if os.path.exists(self.sock):
                return
            time.sleep(0.1)
        sys.exit(f"compare_builds: {bindir}/symdexd did not start")

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=60)


def verbs(bindir):
    """The verbs a build's `symdex --help` lists."""
    out = run(bindir, ["--help"])[1].decode(errors="replace")
    listed = out.split("Subcommands:", 1)[-1].split("\n\n", 1)[0]
    return {line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.split()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-daemon", action="store_true")
    a = ap.parse_args()
    cmds = commands(a.new, a.db, a.sample, a.seed)
    # A verb the old build does not have yet has nothing to be compared with.
    added = verbs(a.new) - verbs(a.old)
    if added:
        cmds = [c for c in cmds if not added & set(shlex.split(c))]
        print(f"compare_builds: verbs only the new build has, not compared: {', '.join(sorted(added))}")
    work = tempfile.mkdtemp(prefix="compare_builds.")
    modes = [("embedded", a.old, a.new, ["--local", "--db", a.db], ["--local", "--db", a.db])]
    daemons = []
    if not a.no_daemon:
        old_d, new_d = Daemon(a.old, a.db, work, "old"), Daemon(a.new, a.db, work, "new")
        daemons = [old_d, new_d]
        for tag, cli_old, cli_new, d_old, d_new in [("daemon", a.old, a.new, old_d, new_d),
                                                   ("old CLI, new daemon", a.old, a.old, old_d, new_d),
                                                   ("new CLI, old daemon", a.new, a.new, old_d, new_d)]:
            modes.append((tag, cli_old, cli_new, ["--connect", f"unix:{d_old.sock}"],
                          ["--connect", f"unix:{d_new.sock}"]))
    diffs, asked, found = 0, 0, 0
    try:
        for c in cmds:
            words = shlex.split(c)
            for tag, cli_a, cli_b, pre_a, pre_b in modes:
                ra = run(cli_a, pre_a + words)
                rb = run(cli_b, pre_b + words)
                asked += 1
                found += ra[0] == 0
                # The daemon's own socket path differs between the two; nothing else may.
                norm = lambda r, pre: tuple(x.replace(pre[-1].encode(), b"SOCK") if isinstance(x, bytes) else x
                                            for x in r)
                ra, rb = norm(ra, pre_a), norm(rb, pre_b)
                for what, x, y in (("exit code", ra[0], rb[0]), ("stdout", ra[1], rb[1]), ("stderr", ra[2], rb[2])):
                    if x != y:
                        diffs += 1
                        print(f"DIFF [{tag}] symdex {c}: {what}")
                        if what != "exit code":
                            print("  old: " + x.decode(errors="replace")[:600].replace("\n", "\n       "))
                            print("  new: " + y.decode(errors="replace")[:600].replace("\n", "\n       "))
                        else:
                            print(f"  old {x}, new {y}")
    finally:
        for d in daemons:
            d.stop()
    print(f"compare_builds: {len(cmds)} commands x {len(modes)} modes = {asked} comparisons "
          f"({found} answered with exit 0), {diffs} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
