#!/usr/bin/env python3
"""A slow network in front of a real server (a merely-slow debuginfod, for the fleet tests).

    slow_proxy.py LISTEN_PORT UPSTREAM_HOST:UPSTREAM_PORT [--delay S] [--rate BYTES_PER_S]
                  [--gate FILE [--gate-timeout S]] [--log FILE] [--ready-file F]

Every connection is forwarded to the upstream as is: the request goes through at once, the
answer's first byte is held until DELAY seconds after the request arrived and, with --gate,
until FILE exists (at most --gate-timeout seconds, 600 by default, after the request arrived:
then it goes anyway), and then flows at RATE bytes per second (unlimited when 0). Nothing is
dropped or rewritten, so the client sees a slow server, not a broken one.

The gate lets a test decide when the slow transfer ends: it holds the answers while it checks
what the client does meanwhile, however long that takes on a loaded machine, and then creates
FILE. --log appends "request" when a connection's first request byte arrives and "released"
when its answer is let go, one line each, so a test can tell whether the upstream was asked.
Writes its port to --ready-file once it listens; SIGTERM stops it.
"""
import argparse
import os
import signal
import socket
import sys
import threading
import time

log_lock = threading.Lock()


def note(path, what):
    if not path:
        return
    try:
        with log_lock, open(path, "a") as f:
            f.write(what + "\n")
    except OSError:
        pass  # the test that reads it is gone


def hold(arrived, a):
    """Blocks until the answer to a request that arrived at `arrived` may go."""
    if a.delay > 0:
        wait = arrived + a.delay - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    if a.gate:
        end = arrived + a.gate_timeout
        while not os.path.exists(a.gate) and time.monotonic() < end:
            time.sleep(0.05)


def pump(src, dst, before_first=None, rate=0.0):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if before_first is not None:
                before_first()
                before_first = None
            if rate > 0:
                for i in range(0, len(data), 4096):
                    dst.sendall(data[i:i + 4096])
                    time.sleep(min(4096, len(data) - i) / rate)
            else:
                dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def serve(conn, upstream, a):
    try:
        up = socket.create_connection(upstream)
    except OSError:
        conn.close()
        return
    arrived = []  # when the first request byte came: set before it is sent upstream

    def forward_request():
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                if not arrived:
                    arrived.append(time.monotonic())
                    note(a.log, "request")
                up.sendall(data)
        except OSError:
            pass
        finally:
            try:
                up.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def release():
        # An answer follows a request, so `arrived` is set by now; a server that speaks
        # first (none of ours) is held from the moment its first byte arrives.
        hold(arrived[0] if arrived else time.monotonic(), a)
        note(a.log, "released")

    t = threading.Thread(target=forward_request, daemon=True)
    t.start()
    pump(up, conn, before_first=release, rate=a.rate)
    t.join(timeout=1)
    conn.close()
    up.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("upstream")
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--gate")
    ap.add_argument("--gate-timeout", type=float, default=600)
    ap.add_argument("--log")
    ap.add_argument("--ready-file")
    a = ap.parse_args()
    host, _, port = a.upstream.rpartition(":")
    upstream = (host or "127.0.0.1", int(port))
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", a.port))
    srv.listen(64)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if a.ready_file:
        # Written whole under another name and renamed: a reader never sees a partial port.
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{srv.getsockname()[1]}\n")
        os.replace(tmp, a.ready_file)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, upstream, a), daemon=True).start()


if __name__ == "__main__":
    main()
