#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""hostile - a seed's control port that answers what a hostile seed would:
deep, wide and huge answers, and a new model name on every question.

  hostile.py SEEDHOST:PORT STATEDIR [--listen HOST] [--reseeder] [--announce]

Prints "port N" once listening on 127.0.0.1 (or HOST).  --reseeder: it is
a re-seeder whatever name it is asked under; --announce: it announces
itself to SEEDHOST:PORT every 2 s (as 0.0.0.0:N: the address it calls
from), as a hostile fleet member would.  It speaks enough of the
control protocol for a mount (replica/source.c): /v1/health, /v1/models,
/v1/manifest, /v1/sources, and as a re-seeder /v1/holdings.  Its models
are the real seed's model "m", renamed: the manifest of SEEDHOST:PORT with
another "model" (its identity left out, so the digest still holds), so a
mount connects to the real seed's memory through them.

Asked as 127.0.0.1:N it is a seed; asked as localhost:N (the re-seeder
its /v1/sources lists) it is a re-seeder of "m" whose holdings are bad.
What it answers follows files in STATEDIR, read at every request:

  names      model names listed (blank-separated); five are special:
             deep (manifest: 1e6 nested arrays), wide (manifest: 25e6
             values, 50 MB), huge (manifest: 300 MiB, over the cap),
             bomb (manifest: 300 KiB gzipped, 300 MiB unpacked,
             whatever was asked), stacked (manifest: gzipped twice,
             said "gzip, gzip")
  models     the /v1/models answer itself: deep, wide (2e6 values in
             4 MB) or absent: the list
  sources    /v1/sources: wide (500e3 values), reseeder [PORT...]
             (lists localhost:N, and localhost:PORT of other hostile.py
             processes on the same STATEDIR), or absent: none
  holdings   the re-seeder's /v1/holdings: wide (10e6 values, 20 MB),
             fat (7.99e6 values in 16 MB: within the JSON limits a
             holdings answer had, about 1 GB to jansson), or absent: it
             lists no model
  churn      K: every /v1/models answer lists K names never listed
             before (c<question>-<i>), besides those of "names"

STATEDIR/count.models counts its /v1/models answers as a seed.
"""
import http.client
import http.server
import json
import os
import sys
import threading
import time
import zlib

SEED, STATE = sys.argv[1], sys.argv[2]
OPTS = sys.argv[3:]
LISTEN = OPTS[OPTS.index("--listen") + 1] if "--listen" in OPTS else "127.0.0.1"
ALWAYS_RESEEDER = "--reseeder" in OPTS

DEEP = b"[" * 1000000
WIDE_MANIFEST = b"[" + b"0," * 24999999 + b"0]"
WIDE_MODELS = (b'{"instance":"0x1","models":[' + b"0," * 1999999 + b"0]}")
WIDE_SOURCES = b'{"reseeders":[' + b"0," * 499999 + b"0]}"
WIDE_HOLDINGS = (b'{"version":1,"chunk_size":1048576,"slab":{"address":'
                 b'"0x1000","key":"0x1"},"files":[[' + b"0," * 9999999 +
                 b"0]]}")
FAT_HOLDINGS = (b'{"version":1,"chunk_size":1048576,"slab":{"address":'
                b'"0x1000","key":"0x1"},"files":[[' + b"0," * 7989999 +
                b"0]]}")
HUGE = 300 << 20
CHUNK = b" " * (1 << 20)
BOMB = None  # HUGE bytes, gzipped: made at the first ask

lock = threading.Lock()
questions = 0
cache = {}


def state(name):
    try:
        with open(os.path.join(STATE, name)) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def seed_get(path):
    """The real seed's answer to @path, asked at most once a second."""
    now = time.monotonic()
    with lock:
        hit = cache.get(path)
    if hit and now - hit[0] < 1:
        return json.loads(hit[1])
    host, port = SEED.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise OSError("%s: %d" % (path, r.status))
    with lock:
        cache[path] = (now, body)
    return json.loads(body)


class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, data):
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def as_json(self, o):
        self.answer(200, json.dumps(o).encode())

    def query(self):
        q = {}
        if "?" in self.path:
            for kv in self.path.split("?", 1)[1].split("&"):
                k, _, v = kv.partition("=")
                q[k] = v
        return q

    def do_GET(self):
        try:
            self.get()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def get(self):
        global questions
        path = self.path.split("?")[0]
        reseeder = (ALWAYS_RESEEDER or
                    self.headers.get("Host", "").startswith("localhost"))
        if path == "/v1/health":
            return self.answer(200, b"ok\n")
        real = seed_get("/v1/models")
        m = [x for x in real["models"] if x["model"] == "m"][0]
        if path == "/v1/models":
            if not reseeder:
                with open(os.path.join(STATE, "count.models"), "a") as f:
                    f.write("x\n")
            mode = state("models")
            if mode == ["deep"]:
                return self.answer(200, DEEP)
            if mode == ["wide"]:
                return self.answer(200, WIDE_MODELS)
            if reseeder:
                names = ["m"] if state("holdings") else []
                inst = "0x%x" % (int(real["instance"], 16) ^ 1)
            else:
                names = list(state("names"))
                churn = state("churn")
                with lock:
                    questions += 1
                    q = questions
                if churn:
                    names += ["c%d-%d" % (q, i) for i in range(int(churn[0]))]
                inst = real["instance"]
            return self.as_json({"instance": inst, "models": [
                dict(m, model=n) for n in names]})
        if path == "/v1/manifest":
            name = self.query().get("model", "")
            if name == "deep":
                return self.answer(200, DEEP)
            if name == "wide":
                return self.answer(200, WIDE_MANIFEST)
            if name == "bomb":
                global BOMB
                with lock:
                    if BOMB is None:
                        c = zlib.compressobj(9, zlib.DEFLATED, 31)
                        BOMB = b"".join([c.compress(CHUNK) for _ in
                                         range(HUGE // len(CHUNK))] +
                                        [c.flush()])
                self.send_response(200)
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(BOMB)))
                self.end_headers()
                self.wfile.write(BOMB)
                return
            if name == "stacked":
                body = json.dumps(seed_get("/v1/manifest?model=m")).encode()
                for _ in range(2):
                    c = zlib.compressobj(1, zlib.DEFLATED, 31)
                    body = c.compress(body) + c.flush()
                self.send_response(200)
                self.send_header("Content-Encoding", "gzip, gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if name == "huge":
                self.send_response(200)
                self.send_header("Content-Length", str(HUGE))
                self.end_headers()
                for _ in range(HUGE // len(CHUNK)):
                    self.wfile.write(CHUNK)
                return
            mf = seed_get("/v1/manifest?model=m")
            if name != "m":
                mf["model"] = name
                mf.pop("identity", None)
                mf.pop("identity_id", None)
            if reseeder:
                mf["holdings"] = True
                mf["instance"] = "0x%x" % (int(mf["instance"], 16) ^ 1)
            return self.as_json(mf)
        if path == "/v1/sources" and not reseeder:
            mode = state("sources")
            if mode == ["wide"]:
                return self.answer(200, WIDE_SOURCES)
            port = self.server.server_address[1]
            ports = [port] + [int(p) for p in mode[1:]]
            return self.as_json({"reseeders": [
                {"address": "localhost:%d" % p} for p in ports]
                if mode else []})
        if path == "/v1/holdings" and reseeder:
            port = self.server.server_address[1]
            with open(os.path.join(STATE, "count.holdings.%d" % port),
                      "a") as f:
                f.write("x\n")
            if state("holdings") == ["fat"]:
                return self.answer(200, FAT_HOLDINGS)
            return self.answer(200, WIDE_HOLDINGS)
        self.answer(404, b"not here\n")


server = http.server.ThreadingHTTPServer((LISTEN, 0), Hostile)
server.daemon_threads = True
print("port", server.server_address[1], flush=True)


def announce():
    host, port = SEED.rsplit(":", 1)
    body = json.dumps({"address": "0.0.0.0:%d" %
                       server.server_address[1]}).encode()
    while True:
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=5)
            c.request("POST", "/v1/announce", body)
            c.getresponse().read()
            c.close()
        except OSError:
            pass  # the seed may be down: again in 2 s
        time.sleep(2)


if "--announce" in OPTS:
    threading.Thread(target=announce, daemon=True).start()
server.serve_forever()
