#!/usr/bin/env python3
"""The tree's layering, checked: which directory may include which, what the CLI may see, and
what a gRPC handler may do.

  ingest (pure parsers) -> kernel, debuginfo -> store -> indexer (writes) / query (reads)
  -> jit (JIT ingest and files) / fleet (on-demand kernels by build-ID) -> api (gRPC) and client (CLI)

Fails (exit 1, one line per offence: file:line, the include or call, the rule) when
- a directory includes one above it (a parser including the store, the store including query ...);
- a file in client/ reaches, through its includes and theirs, anything below the query API: the
  CLI sees server/query/api.h (the API: questions and answers, no store, libdw or gRPC header —
  checked here too), server/api/remote_query.h (its gRPC implementation, which the CLI opens as
  a module: server/api/remote_plugin.h), server/common/ and the thin headers of the verbs that
  stay in this process (writes, and the JIT verbs that work on local files: LOCAL_WORK, each
  with its reason), which themselves reach nothing but server/common/ and the API's types;
- the gRPC handlers (server/api/services.*) include the store or run SQL or file I/O themselves:
  what they answer must come from the query layer, which the CLI uses too;
- SQL is written outside server/store/ (a statement in a string literal, or a statement prepared
  on the database handle): the schema's one owner is the store;
- a reader of untrusted bytes or a LEB128 decoder is defined outside server/common/ (a class
  named *Cursor / *ByteReader, or a loop shifting 7-bit groups), or a fixed-width value is put
  together from bytes by hand (bytes shifted by multiples of 8, a 2/4/8-byte memcpy into a
  scalar): the family lives in server/common/byte_reader.h (LoadLittle for checked bytes);
- a file in client/ includes SQLite, libelf/libdw or the generated protobuf/gRPC headers itself:
  the CLI reads answers, never the index, a debug file or the wire; in server/, each of those
  belongs to its layer (SYSTEM_HEADER_OWNERS: SQLite to store/, libdw to debuginfo/, the wire to
  api/ and daemon/, libelf to the ELF readers);
- a function in server/ or client/ runs past 120 lines without the comment above it saying why
  ("Long because ...", or "... past 120 lines ..."): split it into steps a reader can hold.

Usage: check_layers.py SOURCE_DIR
"""
import pathlib
import re
import sys

# Directory under server/ -> the server/ directories its files may include (besides its own).
LAYERS = {
    "common": set(),
    "ingest": {"common"},
    "kernel": {"common", "ingest"},
    "debuginfo": {"common", "ingest", "kernel"},
    "store": {"common", "ingest", "debuginfo", "kernel"},
    "indexer": {"common", "ingest", "kernel", "debuginfo", "store"},
    "query": {"common", "ingest", "kernel", "debuginfo", "store"},
    # JIT ingest (a write), the build-ID schemes, the ELF writer, the jitted DSOs on disk and the
    # JIT verbs on local files (jit_files.h; export reads the index through query/jit_query.h).
    "jit": {"common", "ingest", "store", "debuginfo", "query"},
    "metrics": {"common"},
    # Kernels by build-ID indexed on demand (the daemon's --fleet-cache): runs the indexer, hands
    # out the query over each kernel's index.
    "fleet": {"common", "ingest", "kernel", "debuginfo", "store", "indexer", "query", "metrics"},
    "api": {"common", "query", "metrics", "store", "indexer", "jit", "debuginfo", "kernel", "ingest", "fleet"},
    # symdexd's life: the index and its writer, live tracking, the JIT watcher, listeners, drain.
    "daemon": {"common", "query", "metrics", "store", "indexer", "jit", "debuginfo", "kernel", "ingest", "fleet",
               "api"},
}

# A directory split into parts, each including only the parts before it (besides LAYERS' rule):
# the debug files are found and opened, DWARF is read from them, addresses are symbolized with
# what it gives, and the worker process runs the reading and the maps for the indexer.
PARTS = {
    "debuginfo": {"files": set(), "dwarf": {"files"}, "symbolize": {"files", "dwarf"},
                  "worker": {"files", "dwarf", "symbolize"}},
}

# The query API a front end sees: these headers and what they include must stay above the store,
# the parsers and the debug-info readers, and name no SQLite, libdw or gRPC header.
THIN_API = ["server/query/api.h", "server/api/remote_query.h", "server/api/remote_plugin.h"]
THIN_FORBIDDEN_DIRS = {"store", "ingest", "debuginfo", "kernel", "indexer", "jit", "fleet", "metrics"}
THIN_FORBIDDEN_SYSTEM = re.compile(r"^(sqlite3\.h|elfutils/|libelf\.h|gelf\.h|dwarf\.h|grpc|google/protobuf/)")
# What the client's includes may reach in server/ besides THIN_API's closure.
CLIENT_API = [re.compile(p) for p in (r"server/common/[^/]+\.h$",)]
# The verbs that work on this machine's files and the index file itself, not through a daemon:
# each has a thin header of plain requests and answers, which reaches only server/common/ (and
# the query API's value types) -- never the store, the parsers or the debug-info readers.
LOCAL_WORK = {
    "server/indexer/index_request.h": "symdex index writes the index itself: no daemon needed",
    "server/jit/jit_files.h": "jit ingest writes the index, jit export writes ELF files from it, "
                              "jit dsos reads the DSO files here",
}

# The gRPC handlers: no store, no SQL, no file I/O.
HANDLERS = ["server/api/services.h", "server/api/services.cc", "server/api/jit_services.cc",
            "server/api/serve.h", "server/api/verb_service.h"]
# An RPC's handler written by hand (an override of a generated service method) is the one RPC that
# is no read verb: every other is a verb of server/query/verbs.h, served by verb_service.h.
HAND_HANDLER = re.compile(r"\bgrpc::Server\w*Reactor<?[^(]*\*\s*(\w+)\s*\(")
HAND_HANDLERS_ALLOWED = {"Ingest"}
# (metrics: the handlers count their calls; jit/ingest.h: JitService.Ingest, a write the daemon owns.)
HANDLER_INCLUDES = [re.compile(p) for p in (r"server/api/", r"server/query/", r"server/common/", r"symdex/v1/",
                                            r"server/metrics/", r"server/jit/ingest\.h$")]
HANDLER_FORBIDDEN = [
    (re.compile(r"\bPrepare\s*\(|\b(SELECT|INSERT|UPDATE|DELETE)\s+[A-Za-z*]"), "SQL"),
    (re.compile(r"\bOpenIndex\s*\(|\bstore::Db\b|\bsqlite3_"), "opens the index"),
    (re.compile(r"\b(std::)?(i|o)?fstream\b|\bfopen\s*\(|::open\s*\(|\bReadFile(Bounded)?\s*\("), "file I/O"),
]

# What client/ may not include itself (THIN_FORBIDDEN_SYSTEM, and the generated headers).
CLIENT_FORBIDDEN_INCLUDE = re.compile(r"^(sqlite3\.h|elfutils/|libelf\.h|gelf\.h|dwarf\.h|grpc|google/protobuf/)|"
                                      r"\.pb\.h$")
# The system and generated headers of one layer: SQLite is the store's, libdw (DWARF) the debug-info
# readers', the wire's generated and gRPC headers the gRPC layer's and the daemon's; libelf (ELF
# sections and symbols) the ELF readers' below the store. A header elsewhere names the layer's
# owner to ask.
SYSTEM_HEADER_OWNERS = [
    (re.compile(r"^sqlite3\.h$"), {"store"}, "SQLite is the store's (server/store/)"),
    (re.compile(r"^(elfutils/libdw|elfutils/libdwfl|elfutils/debuginfod|dwarf\.h$)"), {"debuginfo"},
     "libdw and DWARF are the debug-info readers' (server/debuginfo/)"),
    (re.compile(r"^(libelf\.h|gelf\.h)$"), {"common", "ingest", "kernel", "debuginfo"},
     "libelf is the ELF readers' (server/common/elf_handle.h, ingest/, kernel/, debuginfo/)"),
    (re.compile(r"^(grpc|google/protobuf/)|\.pb\.h$|^symdex/v1/"), {"api", "daemon"},
     "the wire's generated and gRPC headers are server/api/'s and the daemon's"),
]
MAX_FUNCTION_LINES = 120
LONG_REASON = re.compile(r"Long because|past 120 lines")
# A function definition's first line starts with none of these.
NOT_A_DEFINITION = re.compile(r"^(if|for|while|switch|else|do|return|case|default|namespace|struct|class|enum|union|"
                              r"extern|try|catch)\b|^[}){\]&|+\-*/<>=!?:.,\"]")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s+<([^>]+)>')
# SQL outside the store: a statement in a string literal, or one prepared on the database handle.
SQL_TEXT = re.compile(r'"[^"]*\b(SELECT\s.*\bFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|'
                      r'CREATE\s+(TABLE|INDEX)|PRAGMA)\b')
SQL_CALL = re.compile(r'\bdb_?(\.|->)Prepare\s*\(|\bsqlite3_(prepare|exec)')
# A byte reader or a LEB128 decoder outside server/common/.
BYTE_READER = re.compile(r'^\s*(class|struct)\s+\w*(Cursor|ByteReader)\b[^;]*$|0x7fu?[)}]?\s*<<\s*\(?\s*(\w*shift|7\s*\*)')
# A fixed-width value put together by hand: a byte shifted into place (p[1] << 8, word << 8 | p[i],
# << (8 * i)), or 2, 4 or 8 bytes copied into a scalar.
HAND_DECODED = re.compile(r'\[[^]]*\]\)?\s*<<\s*(8|16|24|32|40|48|56)\b|<<\s*8\s*\|\s*\w+\[|'
                          r'memcpy\(&[^,]+,[^;]*,\s*[248]\s*\)|<<\s*\(\s*8\s*\*')


def includes(path):
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield n, m.group(1)


def reach(root, start, memo):
    """Every project header `start` includes, directly or through others (client/ and server/)."""
    if start in memo:
        return memo[start]
    memo[start] = set()
    out = set()
    path = root / start
    if path.exists():
        for _, inc in includes(path):
            if inc.startswith(("server/", "client/")):
                out.add(inc)
                out |= reach(root, inc, memo)
    memo[start] = out
    return out


def system_includes(path):
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = SYSTEM_INCLUDE.match(line)
        if m:
            yield n, m.group(1)


def code_of(line):
    return line.split("//")[0].rstrip()


def long_functions(lines):
    """(first line, line count) of each function body over MAX_FUNCTION_LINES without a stated reason:
    a definition's line ends with its '{' (its signature may run over several lines), its body ends
    at the '}' indented as the signature's first line."""
    for i, line in enumerate(lines):
        s = code_of(line)
        if not s.endswith("{") or ")" not in s:
            continue
        j = i
        while j > 0:
            prev = lines[j - 1]
            pc = code_of(prev)
            if not pc.strip() or pc.endswith((";", "{", "}", ":")) or prev.lstrip().startswith(("//", "#", "*", "/*")):
                break
            j -= 1
        first = lines[j].strip()
        if NOT_A_DEFINITION.match(first) or "(" not in first or "=" in first.split("(")[0]:
            continue
        close = lines[j][:len(lines[j]) - len(lines[j].lstrip())] + "}"
        for k in range(i + 1, len(lines)):
            if lines[k].startswith(close) and (len(lines[k]) == len(close) or lines[k][len(close)] in " ;/"):
                if k - j + 1 > MAX_FUNCTION_LINES:
                    c = j - 1
                    while c >= 0 and lines[c].lstrip().startswith("//"):
                        c -= 1
                    if not LONG_REASON.search(" ".join(lines[c + 1:j])):
                        yield j + 1, k - j + 1
                break


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
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            code = line.split("//")[0] if not line.lstrip().startswith('"') else line
            if layer != "store" and (SQL_TEXT.search(code) or SQL_CALL.search(code)):
                bad.append(f"{rel}:{n}: SQL outside server/store/: give the store a function for it")
            if layer != "common" and BYTE_READER.search(code):
                bad.append(f"{rel}:{n}: a byte reader or LEB128 decoder outside server/common/: "
                           "use server/common/byte_reader.h (ByteReader, DwarfCursor, DecodeUleb)")
            if layer != "common" and HAND_DECODED.search(code):
                bad.append(f"{rel}:{n}: a fixed-width value decoded by hand outside server/common/: "
                           "use server/common/byte_reader.h (LoadLittle, ByteReader::Int)")
        for n, inc in list(system_includes(p)) + [(n, i) for n, i in includes(p) if i.startswith("symdex/v1/")]:
            for rx, owners, why in SYSTEM_HEADER_OWNERS:
                if rx.search(inc) and layer not in owners:
                    bad.append(f"{rel}:{n}: includes {inc}: {why}, not server/{layer}/'s")
        parts = PARTS.get(layer)
        part = rel.split("/")[2] if parts and rel.count("/") >= 3 else None
        if parts and part not in parts:
            bad.append(f"{rel}: server/{layer}/ is split into {sorted(parts)}: put the file in one of them")
            continue
        for n, inc in includes(p):
            if not inc.startswith("server/"):
                continue
            dep = inc.split("/")[1]
            if dep != layer and dep not in allowed:
                bad.append(f"{rel}:{n}: includes {inc}: server/{layer}/ may include only {sorted(allowed)}")
            elif parts and dep == layer:
                dep_part = inc.split("/")[2] if inc.count("/") >= 3 else None
                if dep_part != part and dep_part not in parts[part]:
                    bad.append(f"{rel}:{n}: includes {inc}: server/{layer}/{part}/ may include only the parts "
                               f"{sorted(parts[part])} of server/{layer}/")
    memo = {}
    thin = set(THIN_API)
    for h in THIN_API:
        thin |= reach(root, h, memo)
    for h in sorted(thin):
        d = h.split("/")[1] if h.startswith("server/") else ""
        if d in THIN_FORBIDDEN_DIRS:
            bad.append(f"{h}: part of the query API a front end sees, and in server/{d}/: "
                       "move the value type it needs to server/query/answers.h or server/common/")
        if h == "server/api/remote_plugin.h" or not (root / h).exists():
            continue
        for n, inc in system_includes(root / h):
            if THIN_FORBIDDEN_SYSTEM.search(inc) and not h.startswith("server/api/"):
                bad.append(f"{h}:{n}: includes <{inc}>: the query API a front end sees names no SQLite, libdw or gRPC")
    local = set(LOCAL_WORK)
    for h in sorted(LOCAL_WORK):
        if not (root / h).exists():
            bad.append(f"{h}: missing (moved? update LOCAL_WORK)")
            continue
        for reached in sorted(reach(root, h, memo)):
            if reached.startswith("server/") and reached not in thin and \
                    not any(r.search(reached) for r in CLIENT_API):
                bad.append(f"{h}: reaches {reached}: a local verb's header holds plain requests and answers "
                           "(server/common/ and the query API's types only)")
    for p in clients:
        rel = p.relative_to(root).as_posix()
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if SQL_TEXT.search(line) or SQL_CALL.search(line):
                bad.append(f"{rel}:{n}: SQL in client/: the CLI asks the query API")
        allowed = thin | local
        for n, inc in includes(p):
            if not inc.startswith(("server/", "client/")):
                continue
            for reached in sorted({inc} | reach(root, inc, memo)):
                if not reached.startswith("server/") or reached in allowed:
                    continue
                if any(r.search(reached) for r in CLIENT_API):
                    continue
                via = "" if reached == inc else f" (through {inc})"
                bad.append(f"{rel}:{n}: reaches {reached}{via}: client/ sees only the query API "
                           "(server/query/api.h), its client (server/api/remote_query.h), the local verbs' "
                           "headers (LOCAL_WORK) and server/common/")
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
    services = root / "server/api/services.h"
    if services.exists():
        for n, line in enumerate(services.read_text(errors="replace").splitlines(), 1):
            m = HAND_HANDLER.search(line.split("//")[0])
            if m and "override" in line and m.group(1) not in HAND_HANDLERS_ALLOWED:
                bad.append(f"server/api/services.h:{n}: {m.group(1)}: an RPC with a handler of its own: declare it "
                           "as a verb in server/query/verbs.h (verb_service.h serves every verb)")
    for p in sources + clients:
        rel = p.relative_to(root).as_posix()
        lines = p.read_text(errors="replace").splitlines()
        for n, count in long_functions(lines):
            bad.append(f"{rel}:{n}: a function of {count} lines: split it into steps, or say in the comment above "
                       f"why it is long ('Long because ...')")
        if rel.startswith("client/"):
            for n, inc in system_includes(p):
                if CLIENT_FORBIDDEN_INCLUDE.search(inc):
                    bad.append(f"{rel}:{n}: includes <{inc}>: client/ asks the query API; SQLite, libdw and the wire "
                               "are the server's")
            for n, inc in includes(p):
                if CLIENT_FORBIDDEN_INCLUDE.search(inc):
                    bad.append(f"{rel}:{n}: includes {inc}: client/ asks the query API; the generated wire headers "
                               "are server/api/'s")
    for b in bad:
        print(b)
    print(f"check_layers: {len(sources)} server files, {len(clients)} client files, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
