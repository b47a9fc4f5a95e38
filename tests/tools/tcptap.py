#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tcptap - relay TCP to a target and keep every byte that passes, so a
test can see what crosses the network in clear.

  tcptap.py TARGETHOST:PORT CAPTURE

Prints "port N" once listening on 127.0.0.1; appends the bytes of every
connection, both directions, to CAPTURE.
"""
import socket
import sys
import threading

TARGET, CAPTURE = sys.argv[1], sys.argv[2]
lock = threading.Lock()


def pump(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            with lock, open(CAPTURE, "ab") as f:
                f.write(b)
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(c):
    host, port = TARGET.rsplit(":", 1)
    try:
        t = socket.create_connection((host, int(port)), timeout=10)
    except OSError:
        c.close()
        return
    t.settimeout(None)
    threading.Thread(target=pump, args=(c, t), daemon=True).start()
    pump(t, c)


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", 0))
ls.listen(64)
print("port", ls.getsockname()[1], flush=True)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
