#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""notifysock - a service manager's notification socket, for tests.

  notifysock.py PATH OUT

Binds a datagram socket at PATH (what $NOTIFY_SOCKET names) and appends
each message to OUT, its lines joined by " | ", one message a line.
"""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
print("listening", flush=True)
while True:
    msg = s.recv(65536).decode(errors="replace")
    with open(out, "a") as f:
        f.write(" | ".join(msg.split("\n")) + "\n")
