#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""announcer - a token holder that floods a seed's table of re-seeders:
POST /v1/announce of COUNT addresses a round, half its own address (as
0.0.0.0:PORT, the address it calls from) at COUNT/2 ports, half other
hosts' (10.255.X.Y:7070, which it does not own), for SECONDS.

  announcer.py SEEDHOST:PORT COUNT SECONDS [TOKEN_FILE]

Prints, at the end, one line: "status S: N" for every HTTP status it got
(and "error: N" for requests that failed), so a test can see what was
refused.
"""
import http.client
import json
import sys
import time

SEED, COUNT, SECONDS = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
TOKEN = open(sys.argv[4]).read().strip() if len(sys.argv) > 4 else None
host, port = SEED.rsplit(":", 1)
got = {}
end = time.monotonic() + SECONDS
c = None
while time.monotonic() < end:
    for i in range(COUNT):
        if i % 2:
            addr = "0.0.0.0:%d" % (20000 + i // 2)
        else:
            addr = "10.255.%d.%d:7070" % (i // 512 % 256, i // 2 % 256)
        hdr = {"Content-Type": "application/json"}
        if TOKEN:
            hdr["Authorization"] = "Bearer " + TOKEN
        try:
            if c is None:
                c = http.client.HTTPConnection(host, int(port), timeout=5)
            c.request("POST", "/v1/announce",
                      json.dumps({"address": addr}).encode(), hdr)
            r = c.getresponse()
            r.read()
            k = "status %d" % r.status
            if r.getheader("Connection", "").lower() == "close":
                c.close()
                c = None
        except (OSError, http.client.HTTPException):
            k = "error"
            if c:
                c.close()
            c = None
        got[k] = got.get(k, 0) + 1
        if time.monotonic() >= end:
            break
    time.sleep(0.5)
for k in sorted(got):
    print("%s: %d" % (k, got[k]))
