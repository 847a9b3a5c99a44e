"""Arguments by name judged by a booted kernel: `symdex kprobe` definitions with arguments, compiled
from the guest's own debug files, written to the guest's kprobe_events, armed, and fired by
commands whose values the test knows — a read of 1234 bytes, an open of a file it named, the
device behind the rtc class's copy of the duplicated name_show and the network class's copy of
type_show, the file behind an inlined copy of file_ppos — then the trace the guest
recorded is read: each event must have fired from its trigger with exactly those values.

  definitions(symdex, db, env, group) -> [dict]   the probes (host side)
  check(defs, results, trace, log) -> [failure]   the guest's verdicts and values

The guest side is guest-init.sh's VALUES command: it clears the trace, enables GROUP, runs the
triggers below, disables it and sends the trace back.
"""
import re
import subprocess

# The triggers guest-init.sh runs (kept in step with its VALUES command).
MARKER = "/tmp/symdex-e2e-marker"
READ_SIZE = 1234

# event, symdex kprobe arguments, the command that fires it, what the trace must show for it
PROBES = [
    ("vread", ["vfs_read", "count", "file->f_path.dentry->d_name.name:string"], "dd",
     {"count": f"{READ_SIZE:#x}", "name": '"e2e.conf"'}),
    ("vread_line", ["--rel-line", "11", "vfs_read", "count"], "dd", {"count": f"{READ_SIZE:#x}"}),
    # a user-space string: kprobe_events reads it with ustring (string faults on a user address)
    ("vopen", ["do_sys_openat2", "filename=filename:ustring", "dfd"], "cat",
     {"filename": f'"{MARKER}"', "dfd": "-100"}),
    ("rtcname", ["name_show@drivers/rtc/sysfs.c", "dev->kobj.name:string"], "cat", {"name": '"rtc0"'}),
    # another duplicated name, by copy: the network devices' type_show, fired for the loopback
    ("nettype", ["type_show@net/core/net-sysfs.c", "dev->kobj.name:string"], "cat", {"name": '"lo"'}),
    # every place file_ppos was inlined (ksys_read, ksys_write, do_readv, do_writev), its parameter
    # read as it is in each copy: dd's read of the file fires the copy in ksys_read
    ("vppos", ["--inlined", "file_ppos", "file->f_path.dentry->d_name.name:string"], "dd",
     {"name": '"e2e.conf"'}),
]


def definitions(symdex, db, env, group):
    """Each probe's kprobe_events lines from symdex (several for a line the compiler split)."""
    out = []
    for event, args, comm, want in PROBES:
        r = subprocess.run([symdex, "--db", db, "kprobe", "-n", "-e", f"{group}/{event}"] + args,
                           capture_output=True, text=True, env=env)
        lines = r.stdout.strip().splitlines()
        d = {"event": event, "args": args, "comm": comm, "want": want, "lines": lines, "err": None}
        if r.returncode != 0 or not lines:
            d["err"] = f"symdex kprobe {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[:300]}"
        out.append(d)
    return out


TRACE_LINE = re.compile(r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[\d+\].*?: (?P<event>\w+): \((?P<at>[^)]*)\)(?P<args>.*)$")


def fields(text):
    """name=value pairs of a trace line's arguments (a string value is quoted, may hold blanks)."""
    return dict(re.findall(r'(\w+)=("[^"]*"|\S+)', text))


def check(defs, results, trace, log):
    """results: {kprobe line: guest RESULT}. Every line must be accepted; every event must have
    fired from its trigger with the values wanted."""
    failures = []
    hits = {}
    for ln in trace.splitlines():
        m = TRACE_LINE.match(ln)
        if m:
            hits.setdefault(m.group("event"), []).append((m.group("comm"), m.group("at"), fields(m.group("args"))))
    print(f"\n{'EVENT':<12} {'DEFINITION':<90} RESULT")
    for d in defs:
        if d["err"]:
            failures.append(d["err"])
            print(f"{d['event']:<12} {'-':<90} FAIL {d['err']}")
            continue
        bad = [f"{ln}: {results.get(ln)}" for ln in d["lines"] if not str(results.get(ln, "")).startswith("OK")]
        names = {ln.split()[0].split("/", 1)[1] for ln in d["lines"]}
        mine = [h for e in names for h in hits.get(e, [])]
        from_trigger = [h for h in mine if h[0] == d["comm"]]
        right = [h for h in from_trigger if all(h[2].get(k) == v for k, v in d["want"].items())]
        if bad:
            status = "FAIL kernel refused " + "; ".join(bad)
        elif not right:
            seen = [f"{c}: {f}" for c, _, f in from_trigger[:3]]
            status = (f"FAIL no hit from {d['comm']} with {d['want']} ({len(mine)} hits, "
                      f"{len(from_trigger)} from {d['comm']}: {seen})")
        else:
            status = f"PASS {len(right)} hit(s) from {d['comm']} with {d['want']} at {right[0][1]}"
        if status.startswith("FAIL"):
            failures.append(f"{d['event']}: {status}")
        for ln in d["lines"]:
            print(f"{d['event']:<12} {ln:<90} {status}")
    ok = sum(1 for d in defs) - len(failures)
    log(f"arguments by name in the booted guest: {ok}/{len(defs)} definitions fired with the values their "
        f"triggers give")
    return failures
