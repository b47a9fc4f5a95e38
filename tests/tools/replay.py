#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""replay - whoever sits on a control channel without TLS, serving a
signed manifest it kept: GET /v1/manifest answers MANIFEST (read again
for every request, so a test may swap it), GET /v1/models names its
model, generation, content and run as a seed would, /v1/sources lists
no re-seeder, /v1/health is fine; anything else is 404.  What the
signature leaves out (endpoints, region keys, instance) is whatever the
test wrote into MANIFEST: the attacker's choice.

  replay.py MANIFEST

Prints "port N" once listening on 127.0.0.1.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MANIFEST = sys.argv[1]


class Replay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        with open(MANIFEST, "rb") as f:
            text = f.read()
        m = json.loads(text)
        if path == "/v1/manifest":
            self.answer(200, text)
        elif path == "/v1/models":
            entry = {"model": m["model"], "generation": m["generation"],
                     "instance": m["instance"], "content": m["content"],
                     "identity_id": m.get("identity_id", ""),
                     "key_epoch": m.get("key_epoch", 1),
                     "served": [{"generation": m["generation"]}]}
            self.answer(200, json.dumps({"instance": m["instance"],
                                         "models": [entry]}).encode())
        elif path == "/v1/sources":
            self.answer(200, b'{"reseeders": [], "live": 0}')
        elif path == "/v1/health":
            self.answer(200, b"ok\n")
        else:
            self.answer(404, b"not here\n")


server = ThreadingHTTPServer(("127.0.0.1", 0), Replay)
print("port", server.server_address[1], flush=True)
server.serve_forever()
