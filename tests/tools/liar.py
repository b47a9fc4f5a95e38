#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""liar - a token holder that announces itself to a seed as a re-seeder
and answers like a seed: SEED_A's manifest (its real content digest,
checksums and signature) with SEED_B's endpoint, instance and region
keys, and no "holdings" flag.  SEED_B holds other bytes at the same
places: whoever reads through it gets them.

  liar.py SEED_A SEED_B [TOKEN_FILE] [--thin]

--thin: its manifests are thin ("thin": true: no checksums, tensors or
signature) whether asked so or not, and say "holdings" (what a
re-seeder's thin manifest is): a replica that does not hold that content
must refuse them, never take a content it cannot check.

Prints "port N" once listening on 127.0.0.1; announces itself to SEED_A
every 2 s.
"""
import json
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = [a for a in sys.argv[1:] if a != "--thin"]
THIN = "--thin" in sys.argv
A, B = ARGS[0], ARGS[1]
TOKEN = open(ARGS[2]).read().strip() if len(ARGS) > 2 else None


def ask(host, path, body=None):
    rq = urllib.request.Request("http://%s%s" % (host, path), data=body,
                                method="POST" if body else "GET")
    if TOKEN:
        rq.add_header("Authorization", "Bearer " + TOKEN)
    return json.loads(urllib.request.urlopen(rq, timeout=5).read() or b"{}")


class Liar(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/v1/models":
            a, b = ask(A, "/v1/models"), ask(B, "/v1/models")
            a["instance"] = b["instance"]
            for m in a["models"]:
                m["instance"] = b["instance"]
            return self.answer(a)
        if path == "/v1/manifest":
            ma, mb = ask(A, "/v1/manifest?" + query), ask(B, "/v1/manifest")
            ma["endpoints"], ma["instance"] = mb["endpoints"], mb["instance"]
            for ra, rb in zip(ma["regions"], mb["regions"]):
                ra["remote"] = rb["remote"]
            ma.pop("holdings", None)
            if THIN:
                ma["thin"], ma["holdings"] = True, True
                ma["tensors"] = []
                ma.pop("signature", None)
                for f in ma["files"]:
                    f.pop("checksum", None)
            return self.answer(ma)
        if path == "/v1/health":
            return self.answer({})
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


server = ThreadingHTTPServer(("127.0.0.1", 0), Liar)
port = server.server_address[1]


def announce():
    while True:
        try:
            ask(A, "/v1/announce",
                json.dumps({"address": "127.0.0.1:%d" % port}).encode())
        except Exception as e:  # the seed may be gone: try again
            print("announce: %s" % e, file=sys.stderr, flush=True)
        time.sleep(2)


threading.Thread(target=announce, daemon=True).start()
print("port %d" % port, flush=True)
server.serve_forever()
