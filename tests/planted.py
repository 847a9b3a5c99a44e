"""What the tests of the tree's checkers share: the checker passes on the tree itself, and on a copy
of the tree with one offence planted it names the offence (exit 1 and a line starting WHERE that
says MESSAGE)."""
import pathlib
import tempfile


def expect_named(name, code, out, where, message):
    """Prints ok or FAIL for the case NAME; True when the checker named the offence."""
    hit = [l for l in out.splitlines() if l.startswith(where) and message in l]
    if code != 1 or not hit:
        print(f"FAIL {name}: exit {code}, expected a line starting {where!r} with {message!r}:\n{out}")
        return False
    print(f"ok   {name}: {hit[0]}")
    return True


def run_cases(run, src, cases, plant):
    """run(tree) -> (exit code, output) of the checker; cases: (name, edits, where, message);
    plant(tree, edits) makes the copy in the empty directory `tree`. Returns the exit code."""
    code, out = run(src)
    if code != 0:
        print("the tree itself fails:\n" + out)
        return 1
    failures = 0
    for name, edits, where, message in cases:
        with tempfile.TemporaryDirectory() as tmp:
            tree = pathlib.Path(tmp)
            plant(tree, edits)
            code, out = run(tree)
            failures += not expect_named(name, code, out, where, message)
    return 1 if failures else 0
