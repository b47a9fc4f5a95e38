#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ctlproxy - a seed's control port, relayed, counted, and broken on
demand, so a test can see what a mount asks and how often.

  ctlproxy.py SEEDHOST:PORT STATEDIR

Prints "port N" once listening on 127.0.0.1.  Every request is relayed
to the seed; STATEDIR/count.PATH gets one line per request of PATH
(/v1/manifest -> count.manifest).  While STATEDIR/fail-manifest exists,
GET /v1/manifest answers 500 instead.
"""
import http.client
import http.server
import os
import sys

SEED, STATE = sys.argv[1], sys.argv[2]


class Relay(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self, method):
        path = self.path.split("?")[0]
        name = path.rsplit("/", 1)[-1] or "root"
        with open(os.path.join(STATE, "count." + name), "a") as f:
            f.write("x\n")
        body = None
        if method == "POST":
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if path == "/v1/manifest" and os.path.exists(
                os.path.join(STATE, "fail-manifest")):
            self.answer(500, b"broken on purpose\n")
            return
        host, port = SEED.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=10)
        c.request(method, self.path, body=body,
                  headers={"Content-Type": "application/octet-stream"})
        r = c.getresponse()
        self.answer(r.status, r.read())
        c.close()

    def answer(self, status, data):
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.relay("GET")

    def do_POST(self):
        self.relay("POST")


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
print("port", server.server_address[1], flush=True)
server.serve_forever()
