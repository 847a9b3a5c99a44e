#!/usr/bin/python3
"""Routing by build-ID through a real proxy in front of real symdexd replicas.

  routing_test.py --proxy nginx|haproxy --symdexd BIN --src SOURCE_DIR

Starts deploy/fleet-up.sh (a real debuginfod, 3 replicas, the proxy) in a temporary work dir
and calls SymbolService.Status through the proxy. Each replica has its own index file and
StatusResponse.database names it, so every answer says which replica served it. Asserts, as a
fleet operator would notice:
  * one build-ID (gRPC metadata `symdex-build-id`) always lands on the same replica;
  * 40 build-IDs spread over all 3 replicas;
  * requests without the header are spread too (round-robin), not pinned to one replica;
  * after SIGKILL of one replica: every build-ID that mapped to a survivor stays where it was
    (consistent hashing), the dead replica's build-IDs are answered by survivors, and no
    request fails (the proxy retries a refused connection on the next server of the ring).
Exit 0 pass, 1 fail, 77 skip (no python3 grpc/protobuf, no protoc, or the proxy not installed).
"""
import argparse
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
KEYS = 40
# Ceilings, not expectations: a loaded or sanitized machine may be slow, and only a condition
# that never comes (or a call that never returns) should fail the test.
CEILING = 120


def wait_until(done, seconds=CEILING):
    """Polls `done` every 0.1 s until it is true (True) or `seconds` have gone by (False)."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def gone(pid, port):
    """No process `pid` (a zombie has no /proc/PID/exe: fleet-up.sh's spawn leaves it to PID 1
    to reap) and nothing accepting on 127.0.0.1:`port`."""
    try:
        os.readlink(f"/proc/{pid}/exe")
        return False  # still running
    except OSError:
        pass  # no such process, or a zombie
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return False
    except OSError:
        return True


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True, choices=["nginx", "haproxy"])
    ap.add_argument("--symdexd", required=True)
    ap.add_argument("--src", required=True)
    a = ap.parse_args()
    try:
        import grpc  # noqa: F401  (Debian's python3-grpcio)
        import google.protobuf  # noqa: F401
    except ImportError:
        skip("no python3 grpc/protobuf (apt-get install python3-grpcio python3-protobuf)")
    for tool in ("protoc", "/usr/bin/grpc_python_plugin"):
        if not shutil.which(tool):
            skip(f"{tool} missing (apt-get install protobuf-compiler protobuf-compiler-grpc)")
    if not (shutil.which(a.proxy) or os.path.exists(f"/usr/sbin/{a.proxy}")):
        skip(f"{a.proxy} is not installed (scripts/setup-deps.sh installs it)")
    if not os.access(a.symdexd, os.X_OK):
        print(f"FAIL: {a.symdexd} is not built")
        return 1

    work = tempfile.mkdtemp(prefix=f"symdex-fleet-{a.proxy}-")
    fleet_up = os.path.join(a.src, "deploy", "fleet-up.sh")
    try:
        return run(a, work, fleet_up)
    finally:
        subprocess.run([fleet_up, "down", os.path.join(work, "fleet")], check=False)
        shutil.rmtree(work, ignore_errors=True)


def run(a, work, fleet_up):
    import grpc

    gen = os.path.join(work, "gen")
    os.makedirs(gen)
    subprocess.run(["protoc", f"--python_out={gen}", f"--grpc_out={gen}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    "-I", os.path.join(a.src, "proto"),
                    os.path.join(a.src, "proto/symdex/v1/symdex.proto"),
                    os.path.join(a.src, "proto/google/rpc/status.proto")], check=True)
    sys.path.insert(0, gen)
    from symdex.v1 import symdex_pb2, symdex_pb2_grpc

    env = dict(os.environ)
    env.pop("SYMDEX_FLEET_NO_CACHE_FLAGS", None)  # the replicas run as deployed: with the fleet flags
    fleet = os.path.join(work, "fleet")
    t0 = time.monotonic()
    up = subprocess.run([fleet_up, "up", fleet, "--proxy", a.proxy, "--symdexd", a.symdexd,
                         "--timeout", str(CEILING)], env=env, capture_output=True, text=True)
    print(up.stderr, end="")
    if up.returncode != 0:
        print(f"FAIL: fleet-up.sh exited {up.returncode}")
        return 1
    kv = dict(line.split("=", 1) for line in up.stdout.splitlines() if "=" in line)
    print(f"fleet up in {time.monotonic() - t0:.1f}s: proxy {a.proxy} at {kv['SYMDEX_FLEET_PROXY']}")
    replicas = {kv[f"SYMDEX_FLEET_REPLICA_{i}_DB"]: i for i in (1, 2, 3)}

    channel = grpc.insecure_channel(kv["SYMDEX_FLEET_PROXY"])
    stub = symdex_pb2_grpc.SymbolServiceStub(channel)

    def who(key):  # the replica number that answered; raises grpc.RpcError on failure
        md = [("symdex-build-id", key)] if key is not None else []
        resp = stub.Status(symdex_pb2.StatusRequest(), metadata=md, timeout=60)
        return replicas[resp.database]

    failures = []

    def check(cond, what):
        print(("ok    " if cond else "FAIL  ") + what)
        if not cond:
            failures.append(what)

    # Build-IDs as a fleet sends them: 40 hex digits (a SHA-1 note), here made up.
    keys = [hashlib.sha1(f"kernel-{n}".encode()).hexdigest() for n in range(KEYS)]
    owner = {}
    stable = True
    for k in keys:
        seen = {who(k) for _ in range(3)}
        stable &= len(seen) == 1
        owner[k] = seen.pop()
    check(stable, "each build-ID answered 3 times by the same replica")
    share = {r: sum(1 for k in keys if owner[k] == r) for r in (1, 2, 3)}
    check(all(share.values()), f"{KEYS} build-IDs spread over all 3 replicas: {share}")

    headerless = [who(None) for _ in range(12)]
    check(len(set(headerless)) >= 2, f"requests without the header spread: {headerless}")

    # Lose the replica with the most build-IDs: the strongest test of "only its share moves".
    victim = max(share, key=share.get)
    vpid = int(kv[f"SYMDEX_FLEET_REPLICA_{victim}_PID"])
    vport = int(kv[f"SYMDEX_FLEET_REPLICA_{victim}"].rsplit(":", 1)[1])
    os.kill(vpid, signal.SIGKILL)
    # Until the replica is gone (its port refuses connections); the proxy has not noticed yet.
    if not wait_until(lambda: gone(vpid, vport)):
        print(f"FAIL: replica {victim} (pid {vpid}) still runs or accepts {CEILING} s after SIGKILL")
        return 1
    errors = []
    after = {}
    for k in keys:
        try:
            after[k] = who(k)
        except grpc.RpcError as e:
            errors.append(f"{k[:8]}: {e.code().name} {e.details()}")
    check(not errors, f"no request failed after replica {victim} was killed "
          f"({len(errors)} of {KEYS} did{': ' + '; '.join(errors[:3]) if errors else ''})")
    moved = [k for k in keys if owner[k] != victim and after.get(k) != owner[k]]
    check(not moved, f"build-IDs of the survivors stayed where they were ({len(moved)} moved)")
    orphans = [k for k in keys if owner[k] == victim]
    rehomed = {after.get(k) for k in orphans}
    check(all(k in after for k in orphans) and victim not in rehomed,
          f"the {len(orphans)} build-IDs of replica {victim} answered by survivors {sorted(r for r in rehomed if r)}")
    # And they keep their new home (the proxy has now marked the replica down or skips it).
    again = {k: who(k) for k in orphans}
    check(all(again[k] == after[k] for k in orphans), "re-homed build-IDs stay on their new replica")

    print(f"{len(failures) == 0 and 'PASS' or 'FAIL'} ({a.proxy}, {time.monotonic() - t0:.1f}s)")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
