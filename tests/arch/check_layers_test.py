#!/usr/bin/env python3
"""check_layers.py must fail on each kind of offence: a copy of the tree with one planted at a
time (a client file reaching the store through a header of its own, the query API header reaching
SQLite, SQL in the query layer, a parser including the store, a client file including SQLite, libdw
or the wire's generated headers, a server layer including another layer's system or generated
headers, a long function without its reason, a fixed-width value decoded by hand, an RPC with a
handler of its own), each expected by its message.

Usage: check_layers_test.py SOURCE_DIR
"""
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from planted import run_cases  # noqa: E402


def run(tree):
    r = subprocess.run([sys.executable, str(HERE / "check_layers.py"), str(tree)], capture_output=True, text=True)
    return r.returncode, r.stdout


def plant(tree, rel, after, text):
    p = tree / rel
    s = p.read_text()
    i = s.index(after) + len(after)
    p.write_text(s[:i] + text + s[i:])


def main(src):
    src = pathlib.Path(src)
    cases = [
        ("a client header that reaches the store",
         [("client/json_text.h", "#pragma once\n", '#include "server/jit/ingest.h"\n')],
         "client/cmd_addr.cc", "reaches server/store/sqlite_db.h (through client/"),
        ("a local verb's header that reaches the parsers",
         [("server/jit/jit_files.h", "#pragma once\n", '#include "server/ingest/jitted_dso.h"\n')],
         "server/jit/jit_files.h", "reaches server/ingest/jitted_dso.h: a local verb's header"),
        ("the query API header reaching SQLite",
         [("server/query/answers.h", "#pragma once\n", '#include "server/store/sqlite_db.h"\n')],
         "server/store/sqlite_db.h", "part of the query API a front end sees"),
        ("SQL in the query layer",
         [("server/query/spec.cc", "\n", 'const char* kQ = "SELECT id FROM targets";\n')],
         "server/query/spec.cc", "SQL outside server/store/"),
        ("a LEB128 decoder in a parser",
         [("server/ingest/kallsyms.cc", "\n",
           "static unsigned long Leb(const unsigned char* p) {\n  unsigned long v = 0; int shift = 0;\n"
           "  v |= (unsigned long)(p[0] & 0x7f) << shift;\n  return v;\n}\n")],
         "server/ingest/kallsyms.cc", "LEB128 decoder outside server/common/"),
        ("bytes shifted into a value by hand",
         [("server/ingest/kallsyms.cc", "\n",
           "static unsigned Word(const unsigned char* p) { return p[0] | p[1] << 8; }\n")],
         "server/ingest/kallsyms.cc", "a fixed-width value decoded by hand"),
        ("a 4-byte memcpy into a scalar",
         [("server/ingest/kallsyms.cc", "\n",
           "static int Rel(const char* p) { int v; memcpy(&v, p + 1, 4); return v; }\n")],
         "server/ingest/kallsyms.cc", "a fixed-width value decoded by hand"),
        ("a cursor class in the debug-info readers",
         [("server/debuginfo/dwarf/line_table.cc", "namespace {\n", "class LineCursor {\n};\n")],
         "server/debuginfo/dwarf/line_table.cc", "a byte reader or LEB128 decoder outside"),
        ("the DWARF readers including the symbolizer",
         [("server/debuginfo/dwarf/line_table.h", "#pragma once\n",
           '#include "server/debuginfo/symbolize/addr_map.h"\n')],
         "server/debuginfo/dwarf/line_table.h", "server/debuginfo/dwarf/ may include only the parts"),
        ("a client file including SQLite itself",
         [("client/json_text.cc", "\n", "#include <sqlite3.h>\n")],
         "client/json_text.cc", "includes <sqlite3.h>: client/ asks the query API"),
        ("a client file including libdw itself",
         [("client/json_text.cc", "\n", "#include <elfutils/libdw.h>\n")],
         "client/json_text.cc", "includes <elfutils/libdw.h>: client/ asks the query API"),
        ("a client file including the generated wire headers",
         [("client/json_text.cc", "\n", '#include "symdex/v1/symdex.pb.h"\n')],
         "client/json_text.cc", "the generated wire headers are server/api/'s"),
        ("a function past 120 lines without a reason",
         [("server/ingest/kallsyms.cc", "\n",
           "static int Planted(int x) {\n" + "  x += 1;\n" * 125 + "  return x;\n}\n")],
         "server/ingest/kallsyms.cc", "a function of 128 lines: split it into steps"),
        ("an RPC with a handler written by hand",
         [("server/api/services.h", "  JitServiceImpl(SymbolServiceImpl& symbols, jit::Ingester& ingester);\n",
           "  grpc::ServerUnaryReactor* Addr(grpc::CallbackServerContext* ctx, const ::symdex::v1::JitAddrRequest* req,"
           " ::symdex::v1::JitAddrResponse* resp) override;\n")],
         "server/api/services.h", "Addr: an RPC with a handler of its own"),
        ("the query layer including SQLite itself",
         [("server/query/spec.cc", "\n", "#include <sqlite3.h>\n")],
         "server/query/spec.cc", "includes sqlite3.h: SQLite is the store's"),
        ("the query layer including the wire's generated header",
         [("server/query/spec.cc", "\n", '#include "symdex/v1/symdex.pb.h"\n')],
         "server/query/spec.cc", "includes symdex/v1/symdex.pb.h: the wire's generated and gRPC headers"),
        ("the query layer including gRPC",
         [("server/query/spec.cc", "\n", "#include <grpcpp/grpcpp.h>\n")],
         "server/query/spec.cc", "includes grpcpp/grpcpp.h: the wire's generated and gRPC headers"),
        ("the indexer including libdw",
         [("server/indexer/indexer.cc", "\n", "#include <elfutils/libdw.h>\n")],
         "server/indexer/indexer.cc", "includes elfutils/libdw.h: libdw and DWARF are the debug-info readers'"),
        ("the store including libelf",
         [("server/store/index_store.cc", "\n", "#include <gelf.h>\n")],
         "server/store/index_store.cc", "includes gelf.h: libelf is the ELF readers'"),
        ("a parser including the store",
         [("server/ingest/kallsyms.h", "#pragma once\n", '#include "server/store/index_store.h"\n')],
         "server/ingest/kallsyms.h", "server/ingest/ may include only"),
    ]
    def plant_edits(tree, edits):
        for d in ("server", "client"):
            shutil.copytree(src / d, tree / d, ignore=shutil.ignore_patterns("*.txt", "*.md"))
        for rel, after, text in edits:
            plant(tree, rel, after, text)

    return run_cases(run, src, cases, plant_edits)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
