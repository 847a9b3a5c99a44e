#!/usr/bin/env python3
"""A man page from its prose (PAGE.in) and the program's own --help: the options and, for symdex,
every verb's --help are inserted where the prose says @OPTIONS@ and @VERBS@, and the text of
`symdex help TOPIC` where it says @TOPIC:TOPIC@, so `man symdex`, `symdex VERB --help` and
`symdex help TOPIC` are one text.

Usage: gen_man.py PROGRAM PAGE.in OUT
"""
import re
import subprocess
import sys


def roff(line):
    """One line of --help as roff text, kept as it is printed."""
    line = line.replace("\\", "\\e").replace("-", "\\-")
    if line.startswith((".", "'")):
        line = "\\&" + line
    return line


def help_of(program, path):
    r = subprocess.run([program, *path, "--help"], capture_output=True, text=True, timeout=60, check=True)
    return r.stdout.rstrip("\n").splitlines()


def sections(lines):
    """CLI11's --help: the text before 'Options:' and each titled section after it."""
    out, title = {"": []}, ""
    for line in lines:
        if re.match(r"^(Usage|Positionals|Options|Subcommands):", line):
            title = line.split(":")[0]
            out[title] = [] if title != "Usage" else [line]
            continue
        if title == "Usage" and line == "":
            title = "After"
            out.setdefault(title, [])
            continue
        if title in ("Options", "Subcommands", "Positionals") and line and not line.startswith(" "):
            title = "After"
            out.setdefault(title, [])
        out.setdefault(title, []).append(line)
    return out


def preformatted(lines):
    body = [roff(l) for l in lines]
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    return [".nf"] + [l if l.strip() else ".sp" for l in body] + [".fi"]


def verbs(program, path, out):
    lines = help_of(program, path)
    subs = []
    for line in sections(lines).get("Subcommands", []):
        m = re.match(r"^  (\S+)", line)
        if m:
            subs.append(m.group(1))
    if path:
        out.append(f'.SS "{" ".join(["symdex", *path])}"')
        out.extend(preformatted(lines))
    for s in subs:
        verbs(program, [*path, s], out)


def main(program, page_in, out_path):
    text = open(page_in).read()
    top = sections(help_of(program, []))
    options = preformatted(top.get("Options", []))
    text = text.replace("@OPTIONS@", "\n".join(options))
    if "@VERBS@" in text:
        out = []
        verbs(program, [], out)
        text = text.replace("@VERBS@", "\n".join(out))
    for topic in sorted(set(re.findall(r"@TOPIC:([a-z-]+)@", text))):
        r = subprocess.run([program, "help", topic], capture_output=True, text=True, timeout=60, check=True)
        text = text.replace(f"@TOPIC:{topic}@", "\n".join(preformatted(r.stdout.splitlines())))
    with open(out_path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
