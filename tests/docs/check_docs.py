#!/usr/bin/env python3
"""The manual checked against the tree and the programs it describes.

Fails (exit 1, one line per problem) when
- README.md is longer than 250 lines, or does not start with its two set-up commands;
- a relative link in README.md or docs/ names a file that does not exist, or an #anchor that is
  not a heading of its page (GitHub's anchors);
- a page under docs/ cannot be reached from README.md by following links;
- a command line quoted in a ```console or ```sh block (`$ symdex ...`, `symdex ...`,
  `build/bin/symdex ...`, the same for symdexd) uses a verb or a flag that the program's own
  `--help` does not list -- the guide and `--help` (and the man pages made from it) agree;
- `symdex help TOPIC` prints text that docs/reference/TOPIC.md does not quote line for line;
- a verb's row in docs/reference/exit-codes.md's per-verb table gives other codes than the
  "Exit:" line of that verb's `--help`;
- an RPC of proto/symdex/v1/symdex.proto has no row in docs/reference/grpc-api.md (or a row names
  no RPC), or a row's *pool* column says heavy where `symdexd --help` (`--max-heavy-per-peer`, made
  from the daemon's own method list) does not, or the other way round;
- README.md, docs/, server/, client/, tests/, scripts/ or deploy/ speak of work items
  (the words issue, session or item followed by a number) instead of what the code does.

Usage: check_docs.py SOURCE_DIR BIN_DIR
"""
import pathlib
import re
import shlex
import subprocess
import sys

MAX_README_LINES = 250
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)\s*$")
WORK_ITEM = re.compile(r"\b(session|issue|item) [0-9]", re.IGNORECASE)
WORK_ITEM_DIRS = ["README.md", "docs", "server", "client", "tests", "scripts", "deploy"]
WORK_ITEM_SUFFIXES = {".md", ".h", ".cc", ".py", ".sh", ".txt", ".cmake", ".proto", ".yaml", ".yml", ".conf",
                      ".service", ".json", ""}


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def headings(page):
    out, fenced = set(), False
    counts = {}
    for line in page.read_text(errors="replace").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(re.sub(r"`", "", m.group(1)))
            n = counts.get(s, 0)
            counts[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(page):
    text, fenced, out = page.read_text(errors="replace").splitlines(), False, []
    for n, line in enumerate(text, 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in LINK.finditer(line):
            out.append((n, m.group(1)))
    return out


def check_links(root, bad):
    pages = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    graph = {}
    for page in pages:
        graph[page] = set()
        for n, target in links(page):
            if re.match(r"^[a-z]+:", target) or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page.resolve()
            rel = page.relative_to(root)
            if not dest.exists():
                bad.append(f"{rel}:{n}: link to {target}: no such file")
                continue
            if dest.suffix == ".md":
                graph[page].add(dest)
                if anchor and anchor not in headings(dest):
                    bad.append(f"{rel}:{n}: link to {target}: no heading #{anchor} in {dest.relative_to(root)}")
    seen, todo = set(), [(root / "README.md").resolve()]
    resolved = {p.resolve(): p for p in pages}
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(graph.get(resolved.get(p, p), ()))
    for p in pages:
        if p.resolve() not in seen:
            bad.append(f"{p.relative_to(root)}: not reachable from README.md")


class Cli:
    """A program's verbs and flags, read from its --help (CLI11's layout)."""

    def __init__(self, binary):
        self.binary = binary
        self.cache = {}
        self.texts = {}

    def text(self, path):
        """`PROGRAM PATH... --help`'s output and whether it succeeded, run once per path."""
        key = tuple(path)
        if key not in self.texts:
            r = subprocess.run([self.binary, *path, "--help"], capture_output=True, text=True, timeout=30)
            self.texts[key] = (r.returncode == 0, r.stdout)
        return self.texts[key]

    def help(self, path):
        key = tuple(path)
        if key not in self.cache:
            ok, text = self.text(path)
            flags, subs, section = {}, set(), None
            for line in text.splitlines():
                if re.match(r"^\S.*:$", line):
                    section = line[:-1]
                    continue
                if section == "Options" and line.startswith("  -"):
                    words = line.split()
                    spec = re.sub(r"\{.*\}$", "", words[0])
                    # "--db TEXT", "--timeout FLOAT:POSITIVE", "--listen TEXT ...": takes a value
                    takes = len(words) > 1 and re.match(r"^[A-Z][A-Z:_]*(:[A-Z_]+)?$", words[1]) is not None
                    for f in spec.split(","):
                        if f.startswith("-"):
                            flags[f] = takes
                elif section == "Subcommands" and re.match(r"^  \S", line):
                    subs.add(line.split()[0])
            self.cache[key] = (ok, flags, subs)
        return self.cache[key]

    def check(self, words):
        """Problems with one command line (words after the program name)."""
        ok, gflags, subs = self.help([])
        if not ok:
            return [f"{self.binary} --help fails"]
        path, flags, i = [], gflags, 0
        problems = []
        while i < len(words):
            w = words[i]
            if w in ("|", "&&", ";", ">", "<", "2>", "||") or w.startswith((">", "<", "2>", "|")):
                break
            if w == "--":
                break
            if w.startswith("-") and w != "-":
                name = w.split("=", 1)[0]
                if re.match(r"^-[A-Za-z]{2,}$", name):  # -nr: short flags together
                    names = [f"-{c}" for c in name[1:]]
                else:
                    names = [name]
                for f in names:
                    known = flags if f in flags else gflags if f in gflags else None
                    if known is None:
                        problems.append(f"{' '.join([self.name(), *path])}: no flag {f}")
                    elif known[f] and "=" not in w and len(names) == 1:
                        i += 1  # its value
            elif subs and w in subs:
                path.append(w)
                ok, flags, subs = self.help(path)
                if not ok:
                    problems.append(f"{' '.join([self.name(), *path])} --help fails")
                    break
            elif subs and not path:
                problems.append(f"{self.name()}: no verb {w}")
                break
            i += 1
        return problems

    def name(self):
        return pathlib.Path(self.binary).name


def command_lines(page):
    """(line number, program, words) of each quoted symdex/symdexd command in code blocks."""
    out, lang, cont = [], None, ""
    for n, line in enumerate(page.read_text(errors="replace").splitlines(), 1):
        m = FENCE.match(line)
        if m:
            lang = None if lang is not None else m.group(1)
            continue
        if lang not in ("console", "sh", "bash", "shell"):
            continue
        text = cont + line.strip()
        cont = ""
        if text.endswith("\\"):
            cont = text[:-1] + " "
            continue
        if lang == "console":
            if not text.startswith(("$ ", "# ")):
                continue
            text = text[2:]
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", text):
            part = re.sub(r"^(sudo|env\s+\S+=\S+|[A-Z_]+=\S+)\s+", "", part.strip())
            m = re.match(r"^(?:\S*/)?(symdexd?)\s+(.*)$", part) or re.match(r"^(?:\S*/)?(symdexd?)$", part)
            if not m:
                continue
            rest = m.group(2) if m.lastindex and m.lastindex >= 2 else ""
            try:
                words = shlex.split(rest, comments=True)
            except ValueError:
                words = rest.split()
            out.append((n, m.group(1), words))
    return out


def check_commands(root, clis, bad):
    pages = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    count = 0
    for page in pages:
        for n, prog, words in command_lines(page):
            count += 1
            for p in clis[prog].check(words):
                bad.append(f"{page.relative_to(root)}:{n}: {p}")
    return count


def check_help_topics(root, symdex, bad):
    """Each `symdex help TOPIC` is quoted whole in docs/reference/TOPIC.md."""
    m = re.search(r"TOPIC TEXT:\{([^}]*)\}|TOPIC TEXT REQUIRED\s+(\S+)", symdex.text(["help"])[1])
    topics = re.split(r"[,\s]+", (m.group(1) or m.group(2)).strip()) if m else []
    if not topics:
        bad.append("symdex help --help: no topics listed")
    for t in topics:
        page = root / "docs" / "reference" / f"{t}.md"
        text = subprocess.run([symdex.binary, "help", t], capture_output=True, text=True, timeout=30).stdout
        if not page.exists():
            bad.append(f"docs/reference/{t}.md: missing (symdex help {t} has a topic page)")
            continue
        lines = page.read_text().splitlines()
        missing = [l for l in text.splitlines() if l.strip() and l not in lines]
        if missing:
            bad.append(f"docs/reference/{t}.md: does not quote `symdex help {t}` line for line "
                       f"({len(missing)} lines differ, the first: {missing[0].strip()!r})")


def check_rpc_table(root, symdexd, bad):
    """Each RPC of the proto has a row in grpc-api.md, marked heavy as symdexd's --help says."""
    page = "docs/reference/grpc-api.md"
    proto = (root / "proto/symdex/v1/symdex.proto").read_text()
    rpcs = set()
    for service, body in re.findall(r"^service (\w+) \{(.*?)^\}", proto, re.M | re.S):
        for name in re.findall(r"^\s*rpc (\w+)\(", body, re.M):
            rpcs.add(name if service == "SymbolService" else f"{service}.{name}")
    rows, service = {}, None
    for line in (root / page).read_text().splitlines():
        if line.startswith("## "):
            m = re.match(r"^## symdex\.v1\.(\w+)", line)
            service = m.group(1) if m else None
            continue
        m = re.match(r"^\| `(\w+)`[^|]*\|[^|]*\|\s*(\w*)\s*\|", line)
        if m and service:
            rows[m.group(1) if service == "SymbolService" else f"{service}.{m.group(1)}"] = m.group(2) == "heavy"
    h = re.search(r"Heavy calls \(([^)]*)\) queued or running per peer", " ".join(symdexd.text([])[1].split()))
    if not h:
        bad.append("symdexd --help: --max-heavy-per-peer names no heavy calls")
        return
    heavy = {x.strip() for x in h.group(1).split(",")}
    for r in sorted(rpcs - rows.keys()):
        bad.append(f"{page}: no row for the RPC {r}")
    for r in sorted(rows.keys() - rpcs):
        bad.append(f"{page}: a row for {r}, which is no RPC of the proto")
    for r in sorted(rows.keys() & rpcs):
        if rows[r] != (r in heavy):
            bad.append(f"{page}: {r} is {'' if rows[r] else 'not '}marked heavy; symdexd --help says it is"
                       f"{'' if r in heavy else ' not'}")
    for r in sorted(heavy - rpcs):
        bad.append(f"symdexd --help: names {r} among the heavy calls, which is no RPC of the proto")


def check_exit_codes(root, symdex, bad):
    """Each verb's row of the per-verb table names the codes its --help's "Exit:" line names."""
    page = root / "docs" / "reference" / "exit-codes.md"
    if not page.exists():
        bad.append("docs/reference/exit-codes.md: missing")
        return
    text = page.read_text()
    table = text[text.find("## Per verb"):]
    compared = 0
    for line in table.splitlines():
        m = re.match(r"^\| `([a-z -]+)` \|(.*)\|\s*$", line)
        if not m:
            continue
        verb, cells = m.group(1), [c.strip() for c in m.group(2).split("|")]
        documented = {code for code, cell in enumerate(cells) if cell}
        exit_line = re.search(r"^Exit:(.*?)(?:\n\n|\Z)", symdex.text(verb.split())[1], re.S | re.M)
        if not exit_line:
            bad.append(f"symdex {verb} --help: no Exit: line (every verb says its exit codes)")
            continue
        helped = {int(c) for c in re.findall(r"(?:^|,)\s*(\d)\s", exit_line.group(1))}
        compared += 1
        if documented != helped:
            bad.append(f"docs/reference/exit-codes.md: `{verb}` lists codes {sorted(documented)}, "
                       f"`symdex {verb} --help` says {sorted(helped)}")
    if not compared:
        bad.append("docs/reference/exit-codes.md: no verb's row compared with its --help (no per-verb table?)")


def check_verb_pages(root, symdex, bad):
    """Every verb `symdex --help` lists has its row in the reference pages that list verbs: the
    per-verb exit codes, the per-verb JSON fields (or the JSON page says it prints none), the
    commands table."""
    listing = symdex.text([])[1]
    verbs = []
    on = False
    for line in listing.splitlines():
        if line.startswith("Subcommands:"):
            on = True
            continue
        if on and re.match(r"^  [a-z]", line):
            verbs.append(line.split()[0])
        elif on and not line.strip():
            break
    if not verbs:
        bad.append("symdex --help: no Subcommands: list")
        return
    exit_text = (root / "docs/reference/exit-codes.md").read_text()
    exit_rows = set(re.findall(r"^\| `([a-z-]+)[ `]", exit_text[exit_text.find("## Per verb"):], re.M))
    json_text = (root / "docs/reference/json.md").read_text()
    json_named = set(re.findall(r"^\| `([a-z-]+)[ `]", json_text, re.M))
    json_named |= set(re.findall(r"^## ([a-z-]+)", json_text, re.M))
    for bullet in re.findall(r"^- (`.*?):", json_text, re.M):  # "- `jit addr`, `buildid`: ..."
        json_named |= set(re.findall(r"`([a-z-]+)[ `]", bullet))
    without = re.search(r"^Without JSON:(.*)$", json_text, re.M)
    json_named |= set(re.findall(r"`([a-z-]+)`", without.group(1))) if without else set()
    commands = (root / "docs/reference/commands.md").read_text()
    for verb in verbs:
        if verb == "help":
            continue
        if verb not in exit_rows:
            bad.append(f"docs/reference/exit-codes.md: no row for `{verb}` in the per-verb table")
        if verb not in json_named:
            bad.append(f"docs/reference/json.md: `{verb}` is in no per-verb row (or the Without JSON: line)")
        if not re.search(rf"^\| `symdex {re.escape(verb)}\b", commands, re.M):
            bad.append(f"docs/reference/commands.md: no row for `symdex {verb}`")


def check_work_items(root, bad):
    for top in WORK_ITEM_DIRS:
        base = root / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []
        for p in files:
            if p.suffix not in WORK_ITEM_SUFFIXES or "corpus" in p.parts:
                continue
            try:
                text = p.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if WORK_ITEM.search(line):
                    bad.append(f"{p.relative_to(root)}:{n}: names a work item: say what the code does instead")


def main(root, bindir):
    root, bindir = pathlib.Path(root), pathlib.Path(bindir)
    bad = []
    readme = (root / "README.md").read_text().splitlines()
    if len(readme) > MAX_README_LINES:
        bad.append(f"README.md: {len(readme)} lines (at most {MAX_README_LINES}: the manual is docs/)")
    head = "\n".join(readme[:6])
    if "scripts/setup-deps.sh" not in head or "scripts/test.sh" not in head:
        bad.append("README.md: does not start with its two set-up commands")
    check_links(root, bad)
    clis = {p: Cli(str(bindir / p)) for p in ("symdex", "symdexd")}
    count = check_commands(root, clis, bad)
    check_help_topics(root, clis["symdex"], bad)
    check_exit_codes(root, clis["symdex"], bad)
    check_verb_pages(root, clis["symdex"], bad)
    check_rpc_table(root, clis["symdexd"], bad)
    check_work_items(root, bad)
    for b in bad:
        print(b)
    print(f"check_docs: {count} command lines checked, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".", sys.argv[2] if len(sys.argv) > 2 else "build/bin"))
