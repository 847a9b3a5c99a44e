#!/usr/bin/python3
"""Fleet traffic for tests/bench/fleet.sh: SymbolizeFrames requests through a proxy, for a mix
of kernels, with or without the `symdex-build-id` routing header (consistent hashing vs the
proxy's round-robin), from C concurrent clients.

  fleet_traffic.py --proxy HOST:PORT --src SRC --addrs K1=FILE,K2=FILE,... --requests N
                   --frames M [--concurrency C] [--no-header] [--seed S]

Each request: one kernel (drawn from the mix), M of its link-time text addresses (kaslr_offset
0). Prints one JSON line: requests, frames, seconds, frames_per_second, errors, by_kernel.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--addrs", required=True)
    ap.add_argument("--requests", type=int, default=60)
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--no-header", action="store_true")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--deadline", type=float, default=900)
    a = ap.parse_args()
    import grpc

    gen = tempfile.mkdtemp(prefix="symdex-traffic-")
    subprocess.run(["protoc", f"--python_out={gen}", f"--grpc_out={gen}",
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", "-I", os.path.join(a.src, "proto"),
                    os.path.join(a.src, "proto/symdex/v1/symdex.proto"),
                    os.path.join(a.src, "proto/google/rpc/status.proto")], check=True)
    sys.path.insert(0, gen)
    from symdex.v1 import symdex_pb2, symdex_pb2_grpc

    kernels = {}
    for kv in a.addrs.split(","):
        k, f = kv.split("=", 1)
        kernels[k] = [int(x, 16) for x in open(f).read().split()]
    rnd = random.Random(a.seed)
    plan = []
    names = sorted(kernels)
    for i in range(a.requests):
        k = names[i % len(names)] if i < len(names) else rnd.choice(names)
        plan.append((k, rnd.sample(kernels[k], min(a.frames, len(kernels[k])))))
    lock = threading.Lock()
    stats = {"requests": 0, "frames": 0, "errors": [], "by_kernel": {k: 0 for k in names}}
    nxt = [0]

    def worker():
        ch = grpc.insecure_channel(a.proxy, options=[("grpc.max_receive_message_length", 256 << 20)])
        stub = symdex_pb2_grpc.SymbolServiceStub(ch)
        while True:
            with lock:
                if nxt[0] >= len(plan):
                    return
                k, addrs = plan[nxt[0]]
                nxt[0] += 1
            req = symdex_pb2.SymbolizeFramesRequest(kernel_build_id=k, kaslr_offset=0,
                                                    frames=[symdex_pb2.FrameInput(address=x) for x in addrs])
            md = [] if a.no_header else [("symdex-build-id", k)]
            try:
                resp = stub.SymbolizeFrames(req, metadata=md, timeout=a.deadline)
                found = sum(1 for f in resp.frames if f.result.HasField("symbol"))
                with lock:
                    stats["requests"] += 1
                    stats["frames"] += found
                    stats["by_kernel"][k] += 1
            except grpc.RpcError as e:
                with lock:
                    stats["errors"].append(f"{e.code().name}: {e.details()[:200]}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - t0
    stats["seconds"] = round(secs, 3)
    stats["frames_per_second"] = round(stats["frames"] / secs, 1) if secs > 0 else 0
    stats["errors"] = stats["errors"][:5] + ([f"... {len(stats['errors']) - 5} more"] if len(stats["errors"]) > 5 else [])
    print(json.dumps(stats))
    return 0 if not stats["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
