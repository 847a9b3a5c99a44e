#!/usr/bin/env python3
"""check_docs.py must fail on each kind of problem: a copy of README.md and docs/ with one planted
at a time (a flag `--help` does not list, a verb that does not exist, a broken link, a missing
anchor, a page nothing links to, a work-item number in a source file, a reference page that no
longer quotes its help topic, a verb's exit codes the table and --help disagree on, an RPC the
gRPC reference has no row for, a heavy mark the daemon disagrees with, a README over its length, a
verb the JSON, exit-code or commands reference has no row for), each expected by its message.

Usage: check_docs_test.py SOURCE_DIR BIN_DIR
"""
import pathlib
import shutil
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from planted import run_cases  # noqa: E402


def run(tree, bindir):
    r = subprocess.run([sys.executable, str(HERE / "check_docs.py"), str(tree), str(bindir)], capture_output=True,
                       text=True)
    return r.returncode, r.stdout


def main(src, bindir):
    src, bindir = pathlib.Path(src), pathlib.Path(bindir).resolve()
    guide = "docs/planted.md"
    cases = [
        ("a flag --help does not list", [(guide, "```console\n$ symdex kprobe -n --no-such-flag name_show\n```\n")],
         guide, "symdex kprobe: no flag --no-such-flag"),
        ("a verb that does not exist", [(guide, "```sh\nsymdex probe-everything name_show\n```\n")],
         guide, "symdex: no verb probe-everything"),
        ("a daemon flag that does not exist", [(guide, "```sh\nsymdexd --listen unix:/x --no-such\n```\n")],
         guide, "symdexd: no flag --no-such"),
        ("a broken link", [(guide, "[gone](reference/gone.md)\n")], guide, "no such file"),
        ("a missing anchor", [(guide, "[x](../README.md#no-such-heading)\n")], guide, "no heading #no-such-heading"),
        ("a page nothing links to", [("docs/orphan.md", "# Orphan\n")], "docs/orphan.md", "not reachable"),
        ("a work item in a source file", [("server/planted.h", "// added for " + "issue" + " 12\n")], "server/planted.h",
         "names a work item"),
        ("a reference page that no longer quotes its help topic",
         [("docs/reference/specs.md", "")], "docs/reference/specs.md", "does not quote `symdex help specs`"),
        ("a verb's exit codes that its --help does not give",
         [("docs/reference/exit-codes.md", "")], "docs/reference/exit-codes.md", "`which` lists codes [0, 1, 2]"),
        ("an RPC the gRPC reference has no row for", [("docs/reference/grpc-api.md", "Decode")],
         "docs/reference/grpc-api.md", "no row for the RPC Decode"),
        ("a heavy mark the daemon disagrees with", [("docs/reference/grpc-api.md", "Which")],
         "docs/reference/grpc-api.md", "Which is marked heavy; symdexd --help says it is not"),
        ("a README over its length", [("README.md", "\n" * 300)], "README.md", "lines (at most 250"),
        ("a verb the JSON reference has no row for", [("docs/reference/json.md", "callers")],
         "docs/reference/json.md", "`callers` is in no per-verb row"),
        ("a verb the exit-code table has no row for", [("docs/reference/exit-codes.md", "callers")],
         "docs/reference/exit-codes.md", "no row for `callers` in the per-verb table"),
        ("a verb the commands table has no row for", [("docs/reference/commands.md", "callers")],
         "docs/reference/commands.md", "no row for `symdex callers`"),
    ]
    def plant(tree, edits):
        shutil.copy(src / "README.md", tree / "README.md")
        shutil.copytree(src / "docs", tree / "docs")
        shutil.copytree(src / "proto", tree / "proto")
        for d in ("server", "client", "tests", "scripts", "deploy"):
            (tree / d).mkdir()
        for rel, text in edits:
            p = tree / rel
            if rel == guide:
                # linked from a page the README links to, so only the planted problem is new
                arch = tree / "docs/architecture.md"
                arch.write_text(arch.read_text() + "\n[planted](planted.md)\n")
                p.write_text("# Planted\n\n" + text)
            elif rel == "README.md":
                p.write_text(p.read_text() + text)
            elif rel == "docs/reference/specs.md":
                p.write_text(p.read_text().replace("SPEC     :=", "SPEC :="))
            elif rel == "docs/reference/grpc-api.md" and text == "Decode":
                p.write_text("".join(l for l in p.read_text().splitlines(True) if not l.startswith("| `Decode`")))
            elif rel == "docs/reference/grpc-api.md":
                p.write_text(p.read_text().replace("| `Which` | `which` | |", "| `Which` | `which` | heavy |"))
            elif text == "callers":  # the verb's row taken out of a page that lists verbs
                p.write_text("".join(l for l in p.read_text().splitlines(True)
                                     if not l.startswith(("| `callers`", "| `symdex callers"))))
            elif rel == "docs/reference/exit-codes.md":
                p.write_text(p.read_text().replace("| `which` | found | no such symbol | usage | no index |",
                                                   "| `which` | found | no such symbol | usage | |"))
            else:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)

    return run_cases(lambda tree: run(tree, bindir), src, cases, plant)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".", sys.argv[2] if len(sys.argv) > 2 else "build/bin"))
