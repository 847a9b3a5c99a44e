#!/usr/bin/env python3
"""The tree's layering, checked: which directory may include which, what the CLI may see, and
what a gRPC handler may do.

  ingest (pure parsers) -> target, debuginfo -> store -> indexer (writes) / query (reads)
  -> fleet (on-demand kernels by build-ID) -> api (gRPC) and client (CLI)

Fails (exit 1, one line per offence: file:line, the include or call, the rule) when
- a directory includes one above it (a parser including the store, the store including query ...);
- a file in client/ includes anything below the query API: the CLI sees server/query/service.h
  (the API), server/api/remote_query.h (its gRPC implementation, which the CLI opens as a module:
  server/api/remote_plugin.h) and server/common/; writes that
  stay local (and the JIT verbs that work on local files) are listed below by file, each with
  its reason;
- the gRPC handlers (server/api/services.*) include the store or run SQL or file I/O themselves:
  what they answer must come from the query layer, which the CLI uses too;
- SQL is written outside server/store/ (a statement in a string literal, or a statement prepared
  on the database handle): the schema's one owner is the store.

Usage: check_layers.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Directory under server/ -> the server/ directories its files may include (besides its own).
LAYERS = {
    "common": set(),
    "ingest": {"common"},
    "target": {"common", "ingest"},
    "debuginfo": {"common", "ingest", "target"},
    "store": {"common", "ingest", "debuginfo", "target"},
    "indexer": {"common", "ingest", "target", "debuginfo", "store"},
    "jit": {"common", "ingest", "store", "debuginfo"},
    "query": {"common", "ingest", "target", "debuginfo", "store", "jit"},
    "metrics": {"common"},
    # Kernels by build-ID indexed on demand (the daemon's --fleet-cache): runs the indexer, hands
    # out the query over each kernel's index.
    "fleet": {"common", "ingest", "target", "debuginfo", "store", "indexer", "query", "metrics"},
    "api": {"common", "query", "metrics", "store", "indexer", "jit", "debuginfo", "target", "ingest", "fleet"},
}

# What client/ may include from server/.
CLIENT_API = [re.compile(p) for p in (r"server/query/service\.h$", r"server/api/remote_query\.h$",
                                      r"server/api/remote_plugin\.h$", r"server/common/[^/]+\.h$")]
# What stays in the CLI process, by file, each with its reason (README "Architecture"):
# writes, and the two JIT verbs that work on files here.
WRITE_OPEN = {"server/indexer/open_index.h", "server/store/sqlite_db.h", "server/store/migrations.h"}
JIT_LOCAL = "jit export writes ELF files here from the code bytes in the index"
CLIENT_LOCAL = {
    "client/cmd_index.cc": ({"server/indexer/indexer.h"},
                            "symdex index writes the index itself: no daemon needed"),
    "client/cli_common.h": (WRITE_OPEN, "the writers' index (index, jit ingest) and " + JIT_LOCAL),
    "client/cli_common.cc": (WRITE_OPEN, "the writers' index (index, jit ingest) and " + JIT_LOCAL),
    "client/cmd_jit.cc": ({"server/jit/ingest.h", "server/jit/jit_elf.h", "server/query/jit_query.h"},
                          "jit ingest writes the index; " + JIT_LOCAL),
    "client/cmd_frames.cc": ({"server/ingest/elf_notes.h", "server/ingest/frame_text.h"},
                             "frames --kernel-notes/--modules-from read a machine's captured sysfs notes here"),
    "client/cmd_jit_dsos.cc": ({"server/ingest/jitted_dso.h", "server/jit/jitted_dso_files.h"},
                               "jit dsos reads the DSO files here (and asks the query API which loads they are)"),
}

# The gRPC handlers: no store, no SQL, no file I/O.
HANDLERS = ["server/api/services.h", "server/api/services.cc", "server/api/frame_services.cc", "server/api/jit_services.cc",
            "server/api/serve.h"]
# (metrics: the handlers count their calls; jit/ingest.h: JitService.Ingest, a write the daemon owns.)
HANDLER_INCLUDES = [re.compile(p) for p in (r"server/api/", r"server/query/", r"server/common/", r"symdex/v1/",
                                            r"server/metrics/", r"server/jit/ingest\.h$")]
HANDLER_FORBIDDEN = [
    (re.compile(r"\bPrepare\s*\(|\b(SELECT|INSERT|UPDATE|DELETE)\s+[A-Za-z*]"), "SQL"),
    (re.compile(r"\bOpenIndex\s*\(|\bstore::Db\b|\bsqlite3_"), "opens the index"),
    (re.compile(r"\b(std::)?(i|o)?fstream\b|\bfopen\s*\(|::open\s*\(|\bReadFile(Bounded)?\s*\("), "file I/O"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# SQL outside the store: a statement in a string literal, or one prepared on the database handle.
SQL_TEXT = re.compile(r'"[^"]*\b(SELECT\s.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|'
                      r'CREATE\s+(TABLE|INDEX)|PRAGMA)\b')
SQL_CALL = re.compile(r'\bdb_?(\.|->)Prepare\s*\(|\bsqlite3_(prepare|exec)')


def includes(path):
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield n, m.group(1)


def main(root):
    root = pathlib.Path(root)
    bad = []
    sources = sorted(p for p in root.glob("server/**/*") if p.suffix in (".h", ".cc"))
    clients = sorted(p for p in root.glob("client/*") if p.suffix in (".h", ".cc"))
    if len(sources) < 20 or not clients:
        print(f"check_layers: too few sources under {root} ({len(sources)} server, {len(clients)} client)")
        return 1
    for p in sources:
        rel = p.relative_to(root).as_posix()
        layer = rel.split("/")[1]
        allowed = LAYERS.get(layer)
        if allowed is None:
            bad.append(f"{rel}: directory server/{layer}/ has no place in the layering (add it to LAYERS with its rule)")
            continue
        if layer != "store":
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                code = line.split("//")[0] if not line.lstrip().startswith('"') else line
                if SQL_TEXT.search(code) or SQL_CALL.search(code):
                    bad.append(f"{rel}:{n}: SQL outside server/store/: give the store a function for it")
        for n, inc in includes(p):
            if not inc.startswith("server/"):
                continue
            dep = inc.split("/")[1]
            if dep != layer and dep not in allowed:
                bad.append(f"{rel}:{n}: includes {inc}: server/{layer}/ may include only {sorted(allowed)}")
    for p in clients:
        rel = p.relative_to(root).as_posix()
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if SQL_TEXT.search(line) or SQL_CALL.search(line):
                bad.append(f"{rel}:{n}: SQL in client/: the CLI asks the query API")
        extra, _ = CLIENT_LOCAL.get(rel, (set(), ""))
        for n, inc in includes(p):
            if not inc.startswith("server/") or inc in extra:
                continue
            if not any(r.search(inc) for r in CLIENT_API):
                bad.append(f"{rel}:{n}: includes {inc}: client/ sees only the query API "
                           "(server/query/service.h), its client (server/api/remote_query.h) and server/common/")
    for h in HANDLERS:
        p = root / h
        if not p.exists():
            bad.append(f"{h}: missing (the gRPC handlers moved? update HANDLERS)")
            continue
        for n, inc in includes(p):
            if not any(r.search(inc) for r in HANDLER_INCLUDES):
                bad.append(f"{h}:{n}: includes {inc}: gRPC handlers answer through the query layer only")
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            code = line.split("//")[0]
            for rx, what in HANDLER_FORBIDDEN:
                if rx.search(code):
                    bad.append(f"{h}:{n}: {what} in a gRPC handler: put it in the query layer, where the CLI gets it too")
    for b in bad:
        print(b)
    print(f"check_layers: {len(sources)} server files, {len(clients)} client files, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
