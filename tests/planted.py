"""What the tests of the tree's checkers share: after a checker ran on a copy of the tree with one
offence planted, was the offence named (exit 1 and a line starting WHERE that says MESSAGE)?"""


def expect_named(name, code, out, where, message):
    """Prints ok or FAIL for the case NAME; True when the checker named the offence."""
    hit = [l for l in out.splitlines() if l.startswith(where) and message in l]
    if code != 1 or not hit:
        print(f"FAIL {name}: exit {code}, expected a line starting {where!r} with {message!r}:\n{out}")
        return False
    print(f"ok   {name}: {hit[0]}")
    return True
