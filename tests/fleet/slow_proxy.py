#!/usr/bin/env python3
"""A slow network in front of a real server (a merely-slow debuginfod, for the fleet tests).

    slow_proxy.py LISTEN_PORT UPSTREAM_HOST:UPSTREAM_PORT [--delay S] [--rate BYTES_PER_S]
                  [--ready-file F]

Every connection is forwarded to the upstream as is: the request goes through at once, the
answer's first byte is held until DELAY seconds after the request arrived, and then flows at
RATE bytes per second (unlimited when 0). Nothing is dropped or rewritten, so the client sees a
slow server, not a broken one. Writes its port to --ready-file once it listens; SIGTERM stops it.
"""
import argparse
import signal
import socket
import sys
import threading
import time


def pump(src, dst, hold_until=None, rate=0.0):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if hold_until is not None:
                wait = hold_until[0] - time.monotonic() if hold_until else 0
                if wait > 0:
                    time.sleep(wait)
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


def serve(conn, upstream, delay, rate):
    try:
        up = socket.create_connection(upstream)
    except OSError:
        conn.close()
        return
    hold = []  # set when the first request byte arrives

    def forward_request():
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                if not hold:
                    hold.append(time.monotonic() + delay)
                up.sendall(data)
        except OSError:
            pass
        finally:
            try:
                up.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    t = threading.Thread(target=forward_request, daemon=True)
    t.start()
    pump(up, conn, hold_until=hold, rate=rate)
    t.join(timeout=1)
    conn.close()
    up.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("upstream")
    ap.add_argument("--delay", type=float, default=0)
    ap.add_argument("--rate", type=float, default=0)
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
        with open(a.ready_file, "w") as f:
            f.write(f"{srv.getsockname()[1]}\n")
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, upstream, a.delay, a.rate), daemon=True).start()


if __name__ == "__main__":
    main()
