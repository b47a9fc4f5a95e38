#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The Python publish round trip, for tests/integration/python.sh.

  pubtest.py serve WORK     publish numpy arrays with the seedfs package;
                            print "ready PORT GENERATION"; then per line
                            on stdin: "update" (change tensors in place,
                            commit, print "gen N"), "quit"; the expected
                            bytes go to WORK/ref<N>.npz
  pubtest.py errors         bad calls raise SeedfsError naming the cause
  pubtest.py check DIR REF  read the mounted model DIR with an independent
                            safetensors reader (struct + json) and compare
                            every tensor with REF
"""
import json
import os
import struct
import sys

import numpy as np

NAME = "pymodel"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def arrays():
    return {
        "model.embed.weight": np.arange(24, dtype=np.float32).reshape(4, 6),
        "model.layers.0.bias": np.array([1, -2, 3, -4, 5], dtype=np.int16),
        "model.layers.0/odd name": (np.arange(12, dtype=np.float16) / 4)
        .reshape(2, 3, 2),
        "model.empty": np.zeros((0, 4), dtype=np.float32),
        "model.big": np.random.default_rng(7).integers(
            0, 255, size=(3 << 20,), dtype=np.uint8),
        "model.flag": np.array([True, False, True]),
    }


def save_ref(work, gen, arrs):
    np.savez(os.path.join(work, "ref%d.npz" % gen),
             **{k.replace("/", "\x01"): v for k, v in arrs.items()})


def serve(work):
    import seedfs
    arrs = arrays()
    pub = seedfs.Publisher(NAME, listen="127.0.0.1:0", grace=0,
                           shard_max=2 << 20,
                           identity={"framework": "pytest", "tp_size": 2,
                                     "tp_rank": 1, "layout": "processed",
                                     "layout_version": 1})
    pub.add_file("config.json", json.dumps({"torch_dtype": "float32"}))
    pub.add_file("tokenizer/tokenizer.json", b'{"version": "1.0"}')
    for k, v in arrs.items():
        pub.add_tensor(k, v, layout="processed:bool-packed"
                       if k == "model.flag" else None)
    gen = pub.commit()
    save_ref(work, gen, arrs)
    print("ready %d %d" % (pub.port, gen), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "update":
            arrs["model.embed.weight"] *= 2          # in place
            arrs["model.layers.0.bias"] += 100       # in place
            arrs["model.big"][:4096] = 1             # in place
            gen = pub.commit()
            save_ref(work, gen, arrs)
            print("gen %d" % gen, flush=True)
        elif cmd == "quit":
            break
    pub.close()


def errors():
    import seedfs
    pub = seedfs.Publisher(NAME, listen="127.0.0.1:0")

    def expect(needle, fn, *a, **kw):
        try:
            fn(*a, **kw)
        except (seedfs.SeedfsError, ValueError) as e:
            if needle not in str(e):
                fail("%r lacks %r" % (str(e), needle))
            return
        fail("no error for %r" % needle)
    expect("has no safetensors name", pub.add_tensor, "c",
           np.zeros(2, dtype=np.complex128))
    expect("must be C-contiguous", pub.add_tensor, "t",
           np.zeros((4, 4), dtype=np.float32).T)
    expect("name the synthesized shards use", pub.add_file,
           "model.safetensors.index.json", b"{}")
    expect("name the synthesized shards use", pub.add_file,
           "model-00001-of-00001.safetensors", b"")
    expect("not 1-63 of", pub.add_tensor, "l",
           np.zeros(2, dtype=np.float32), layout="a/b")
    expect("nothing to publish", pub.commit)
    pub.add_tensor("p", np.zeros(2, dtype=np.float32), layout="processed:x")
    expect("layout 'processed:x' in a model whose layout is checkpoint",
           pub.commit)
    pub.close()
    try:
        seedfs.Publisher("a/b")
    except seedfs.SeedfsError as e:
        if "not a valid model name" not in str(e):
            fail(str(e))
    else:
        fail("a/b accepted as a name")
    print("errors: each refused with its reason")


def read_shard(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack_from("<Q", b)[0]
    if (8 + n) % 8:
        fail("%s: data not 8-byte aligned (header %d)" % (path, n))
    hdr = json.loads(b[8:8 + n])
    meta = hdr.pop("__metadata__")
    data = b[8 + n:]
    end = 0
    for name, t in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"]):
        a, z = t["data_offsets"]
        if a != end:
            fail("%s: %s starts at %d, not %d" % (path, name, a, end))
        end = z
    if end != len(data):
        fail("%s: %d data bytes, tensors cover %d" % (path, len(data), end))
    return meta, hdr, data


def check(d, ref):
    want = {k.replace("\x01", "/"): v for k, v in np.load(ref).items()}
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    wm = idx["weight_map"]
    if set(wm) != set(want):
        fail("weight_map %r" % sorted(wm))
    shards = sorted(set(wm.values()))
    if len(shards) < 2:
        fail("expected several shards (shard_max 2 MiB): %r" % shards)
    total = 0
    dt = {"F32": np.float32, "I16": np.int16, "F16": np.float16,
          "U8": np.uint8, "BOOL": np.bool_}
    for s in shards:
        meta, hdr, data = read_shard(os.path.join(d, s))
        ident = json.loads(meta["seedfs.identity"])
        if ident["framework"] != "pytest" or ident["tp_rank"] != 1 or \
                ident["dtype"] != "float32" or ident["model"] != NAME or \
                ident["layout"] != "processed" or \
                ident["layout_version"] != 1 or "generation" in ident:
            fail("identity in %s: %r" % (s, ident))
        for name, t in hdr.items():
            if wm[name] != s:
                fail("%s is in %s, index says %s" % (name, s, wm[name]))
            a, z = t["data_offsets"]
            got = np.frombuffer(data[a:z], dtype=dt[t["dtype"]]) \
                .reshape(t["shape"])
            exp = want[name]
            if got.dtype != exp.dtype or got.shape != exp.shape or \
                    got.tobytes() != exp.tobytes():
                fail("%s: bytes, dtype or shape differ" % name)
            total += z - a
    if total != idx["metadata"]["total_size"]:
        fail("total_size %d, tensors %d" % (idx["metadata"]["total_size"],
                                              total))
    cfg = json.load(open(os.path.join(d, "config.json")))
    if cfg != {"torch_dtype": "float32"}:
        fail("config.json %r" % cfg)
    print("checked %d tensors in %d shards, byte-exact" % (len(want),
                                                            len(shards)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    elif sys.argv[1:2] == ["errors"]:
        errors()
    elif sys.argv[1:2] == ["check"]:
        check(sys.argv[2], sys.argv[3])
    else:
        fail(__doc__)
