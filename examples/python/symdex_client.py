#!/usr/bin/env python3
"""A small symdexd client: the calls a tracing frontend makes, written to be copied.

Generate the stubs once (see README.md next to this file), then:

    symdex_client.py [--connect ADDR] [--target T] [--stubs DIR] COMMAND ...

    targets                      ListTargets
    which NAME [--exact]         Which: every instance of NAME
    resolve SPEC...              Resolve; an ambiguous spec lists every candidate's canonical spec
    symbolize ADDR...            Symbolize a batch of addresses (one RPC)
    probe SPEC [FETCHARG...]     ProbeDefinition: the kprobe_events line for exactly that instance
    demo [NAME]                  all of the above for NAME (default name_show)

ADDR is unix:/path (the default is the daemon's unix:/run/symdex/symdex.sock) or HOST:PORT
(plaintext; symdexd only serves plaintext TCP with --insecure-tcp).
Exit codes: 0 ok, 1 not found, 2 ambiguous or bad argument, 3 no daemon or any other RPC error.
"""

import argparse
import os
import sys

import grpc

# Filled in by load_stubs(): the modules protoc generated (nothing is generated at import time).
pb = pb_grpc = status_pb2 = None


def load_stubs(stubs_dir):
    """Imports symdex/v1/symdex_pb2*.py and google/rpc/status_pb2.py from stubs_dir."""
    global pb, pb_grpc, status_pb2
    sys.path.insert(0, stubs_dir)
    try:
        from google.rpc import status_pb2 as status
        from symdex.v1 import symdex_pb2, symdex_pb2_grpc
    except ImportError as e:
        sys.exit(f"symdex_client: cannot import the generated stubs from {stubs_dir!r} ({e}); "
                 "generate them as examples/python/README.md shows, or pass --stubs DIR")
    pb, pb_grpc, status_pb2 = symdex_pb2, symdex_pb2_grpc, status


# ---------------------------------------------------------------------------------------------
# Formatting helpers


def where(inst):
    """Address of an instance: absolute, or section+offset for an offline module symbol."""
    if inst.HasField("address"):
        return f"{inst.address:#x}"
    return f"{inst.section}+{inst.section_offset:#x}"


def source(inst):
    if inst.HasField("dwarf") and inst.dwarf.entry_file:
        return f"{inst.dwarf.entry_file}:{inst.dwarf.entry_line}"
    return inst.dwarf_note or "-"


def module(inst):
    return inst.module or "vmlinux"


def ambiguity(err):
    """The symdex.v1.Ambiguity an ABORTED Resolve/ProbeDefinition carries, or None.

    gRPC puts the full google.rpc.Status, serialized, in the trailing metadata under
    "grpc-status-details-bin"; its details[0] is a google.protobuf.Any holding the Ambiguity.
    """
    if err.code() != grpc.StatusCode.ABORTED:
        return None
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            amb = pb.Ambiguity()
            if status.details and status.details[0].Unpack(amb):
                return amb
    return None


def exit_code(err):
    return {grpc.StatusCode.NOT_FOUND: 1, grpc.StatusCode.INVALID_ARGUMENT: 2,
            grpc.StatusCode.ABORTED: 2}.get(err.code(), 3)


def report(err, what):
    print(f"{what}: {err.code().name}: {err.details()}", file=sys.stderr)
    amb = ambiguity(err)
    if amb is not None:
        print(f"{amb.spec} is ambiguous: {len(amb.candidates)} candidates")
        for m in amb.candidates:
            print(f"  {m.canonical:<40} {where(m.instance):<20} {source(m.instance)}")
    return exit_code(err)


# ---------------------------------------------------------------------------------------------
# The calls


def list_targets(stub, args):
    for t in stub.ListTargets(pb.ListTargetsRequest()).targets:
        print(f"target {t.name}  {t.kind}  release {t.release}  "
              f"{t.vmlinux_symbols + t.module_symbols} symbols  {t.modules} modules  generation {t.generation}")
    return 0


def which(stub, args):
    r = stub.Which(pb.WhichRequest(target=args.target, name=args.name, exact=args.exact))
    print(f"{args.name}: {len(r.instances)} instances in target '{r.target}'")
    for i in r.instances:
        print(f"  {i.name:<24} {module(i):<12} {where(i):<20} {i.probe or '-':<20} {source(i)}")
    args.instances = r.instances  # for demo()
    return 0 if r.instances else 1


def resolve(stub, args):
    rc = 0
    for spec in args.specs:
        try:
            m = stub.Resolve(pb.ResolveRequest(target=args.target, spec=spec)).match
        except grpc.RpcError as err:
            rc = max(rc, report(err, f"resolve {spec}"))
            continue
        off = f"+{m.offset:#x}" if m.offset else ""
        print(f"{spec} -> {m.canonical}{off}  {where(m.instance)}  {m.instance.probe or '-'}  {source(m.instance)}")
    return rc


def symbolize(stub, args):
    addrs = [int(a, 0) for a in args.addresses]
    r = stub.Symbolize(pb.SymbolizeRequest(target=args.target, addresses=addrs))
    for res in r.results:  # one per address, in order
        if not res.HasField("symbol"):
            print(f"{res.address:#x}: ?? {res.note}")
            continue
        line = f"{res.address:#x}: {res.symbol.name}+{res.offset:#x} [{module(res.symbol)}]"
        for n, f in enumerate(res.frames):  # leaf first, like addr2line -i
            line += f"\n    {'(inlined by) ' if n else ''}{f.function} at {f.file}:{f.line}:{f.column}"
        print(line + (f"\n    note: {res.note}" if res.note else ""))
    return 0


def probe(stub, args):
    req = pb.ProbeDefinitionRequest(target=args.target, spec=args.spec, return_probe=args.ret,
                                    group=args.group, event=args.event, fetchargs=args.fetchargs)
    try:
        r = stub.ProbeDefinition(req)
    except grpc.RpcError as err:
        return report(err, f"probe {args.spec}")
    print(r.kprobe)
    print(f"  ({r.match.canonical} in target '{r.target}'; set_ftrace_filter: {r.ftrace_filter})")
    return 0


def demo(stub, args):
    """Every call above, chained the way a frontend would: name -> instances -> one instance."""
    print("== ListTargets")
    list_targets(stub, args)
    print(f"== Which {args.name}")
    args.exact = True
    which(stub, args)
    print(f"== Resolve {args.name}")
    try:
        m = stub.Resolve(pb.ResolveRequest(target=args.target, spec=args.name)).match
        specs = [m.canonical]
        print(f"{args.name} -> {m.canonical} (unique)")
    except grpc.RpcError as err:
        amb = ambiguity(err)
        if amb is None:
            raise
        report(err, f"resolve {args.name}")
        specs = [c.canonical for c in amb.candidates]
    print("== Symbolize (every instance with an address, +1 byte)")
    addrs = [hex(i.address + 1) for i in args.instances if i.HasField("address")]
    if addrs:
        args.addresses = addrs
        symbolize(stub, args)
    print("== ProbeDefinition (each candidate's canonical spec)")
    for spec in specs:
        probe(stub, argparse.Namespace(target=args.target, spec=spec, ret=False, group="", event="", fetchargs=[]))
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connect", default="unix:/run/symdex/symdex.sock", help="unix:/path or HOST:PORT")
    p.add_argument("--target", default="", help="indexed kernel (default: host, else the only one)")
    p.add_argument("--stubs", default=os.environ.get("SYMDEX_PY_STUBS", os.path.join(here, "gen")),
                   help="directory of the protoc output (default: $SYMDEX_PY_STUBS, else ./gen here)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the daemon")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("targets").set_defaults(fn=list_targets)
    s = sub.add_parser("which")
    s.add_argument("name")
    s.add_argument("--exact", action="store_true", help="no compiler clones (.isra.0, .cold, ...)")
    s.set_defaults(fn=which)
    s = sub.add_parser("resolve")
    s.add_argument("specs", nargs="+", metavar="SPEC")
    s.set_defaults(fn=resolve)
    s = sub.add_parser("symbolize")
    s.add_argument("addresses", nargs="+", metavar="ADDR")
    s.set_defaults(fn=symbolize)
    s = sub.add_parser("probe")
    s.add_argument("spec")
    s.add_argument("fetchargs", nargs="*", metavar="FETCHARG")
    s.add_argument("-r", "--return", dest="ret", action="store_true", help="kretprobe (r:)")
    s.add_argument("--group", default="")
    s.add_argument("--event", default="")
    s.set_defaults(fn=probe)
    s = sub.add_parser("demo")
    s.add_argument("name", nargs="?", default="name_show")
    s.set_defaults(fn=demo)
    args = p.parse_args()

    load_stubs(args.stubs)
    # An ambiguous spec's candidates come back in the status details (trailing metadata): accept
    # more than gRPC's default 8 KiB of it, as the symdex CLI does.
    with grpc.insecure_channel(args.connect, options=[("grpc.max_metadata_size", 1 << 20)]) as channel:
        try:
            grpc.channel_ready_future(channel).result(timeout=args.timeout)
        except grpc.FutureTimeoutError:
            print(f"symdex_client: cannot connect to {args.connect} within {args.timeout:g}s", file=sys.stderr)
            return 3
        stub = pb_grpc.SymbolServiceStub(channel)
        try:
            return args.fn(stub, args)
        except grpc.RpcError as err:
            return report(err, args.cmd)


if __name__ == "__main__":
    sys.exit(main())
