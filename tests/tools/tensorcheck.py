#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Independent checks of the tensor view, for tests/integration/tensors.sh.

Reads safetensors files with its own parser (struct + json; nothing of
seedfs), escapes names by the rule in docs/tensors.md written again here,
and compares with what a mount shows.

  tensorcheck.py awkward DIR      write DIR/awkward.safetensors: tensors
                                  whose names need escaping
  tensorcheck.py gguf DIR         write DIR/tiny.gguf (GGUF v3: metadata of
                                  several types, alignment 64, F32, F16,
                                  BF16, Q8_0 and Q4_K tensors)
  tensorcheck.py check MODEL VIEW compare every tensor of every
                                  *.safetensors and *.gguf under MODEL with
                                  VIEW (= MOUNT/NAME/.seedfs/tensors)
"""
import json
import os
import struct
import sys

import xxhash  # python3-xxhash: the digest computed here, not by seedfs

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def escape(name):
    b = name.encode()
    out = []
    for i, c in enumerate(b):
        dot_json = c == 0x2E and i == len(b) - 5 and b.endswith(b".json")
        if c in (0x25, 0x2F) or c < 0x20 or c == 0x7F or \
                (c == 0x2E and i == 0) or dot_json:
            out.append(b"%%%02X" % c)
        else:
            out.append(bytes([c]))
    return b"".join(out).decode()


def unescape(fname):
    b = fname.encode()
    out = bytearray()
    i = 0
    while i < len(b):
        if b[i] == 0x25:
            out.append(int(b[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(b[i])
            i += 1
    return out.decode()


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    return 8 + n, hdr


# ggml type number -> (name, elements per block, bytes per block), as the
# GGUF format defines them (the subset this test writes and reads).
GGML = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 8: ("Q8_0", 32, 34),
        12: ("Q4_K", 256, 144), 30: ("BF16", 1, 2)}


def gguf_write(d):
    """A GGUF v3 file with metadata of several types, alignment 64."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    kv = [s("general.architecture") + struct.pack("<I", 8) + s("llama"),
          s("general.alignment") + struct.pack("<II", 4, 64),
          s("llama.context_length") + struct.pack("<IQ", 10, 4096),
          s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 3) +
          s("<s>") + s("a") + s("b"),
          s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 2) +
          struct.pack("<ff", 0.5, -1.0)]
    # name, ggml type, ne (innermost first)
    tensors = [("token_embd.weight", 8, [64, 3]),
               ("blk.0.ffn_up.weight", 12, [256, 2]),
               ("output_norm.weight", 0, [7]),
               ("blk.0.attn_k.weight", 1, [5, 2, 2]),
               ("a/odd name", 30, [3])]
    infos, blob = b"", b""
    for k, (name, ty, ne) in enumerate(tensors):
        _, blk, bsz = GGML[ty]
        n = 1
        for x in ne[1:]:
            n *= x
        size = ne[0] // blk * bsz * n
        blob += b"\0" * ((64 - len(blob) % 64) % 64)
        infos += s(name) + struct.pack("<I", len(ne)) + \
            b"".join(struct.pack("<Q", x) for x in ne) + \
            struct.pack("<IQ", ty, len(blob))
        blob += bytes((k * 31 + j) % 253 for j in range(size))
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)) + \
        b"".join(kv) + infos
    head += b"\0" * ((64 - len(head) % 64) % 64)
    with open(os.path.join(d, "tiny.gguf"), "wb") as f:
        f.write(head + blob)


def gguf_read(path):
    """name -> (dtype, row-major shape, absolute start, end)."""
    with open(path, "rb") as f:
        b = f.read()
    pos = [24]
    nt, nkv = struct.unpack_from("<QQ", b, 8)

    def u(fmt):
        v = struct.unpack_from(fmt, b, pos[0])
        pos[0] += struct.calcsize(fmt)
        return v[0]

    def string():
        n = u("<Q")
        pos[0] += n
        return b[pos[0] - n:pos[0]].decode()
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8,
             12: 8}

    def skip(t):
        if t == 8:
            string()
        elif t == 9:
            et, n = u("<I"), u("<Q")
            for _ in range(n):
                skip(et)
        else:
            pos[0] += sizes[t]
    align = 32
    for _ in range(nkv):
        k, t = string(), u("<I")
        if k == "general.alignment":
            align = u("<I")
        else:
            skip(t)
    out = {}
    for _ in range(nt):
        name = string()
        ne = [u("<Q") for _ in range(u("<I"))]
        ty, off = u("<I"), u("<Q")
        dt, blk, bsz = GGML[ty]
        n = 1
        for x in ne[1:]:
            n *= x
        out[name] = (dt, list(reversed(ne)), off, off + ne[0] // blk * bsz * n)
    data = (pos[0] + align - 1) // align * align
    return {k: (v[0], v[1], data + v[2], data + v[3]) for k, v in out.items()}


def model_tensors(model):
    """(relative file, name, dtype, shape, start, end) of every tensor."""
    for root, _, files in os.walk(model):
        for fn in sorted(files):
            path = os.path.join(root, fn)
            rel = os.path.relpath(path, model)
            if fn.endswith(".safetensors"):
                base, hdr = read_header(path)
                for name, t in hdr.items():
                    a, b = t["data_offsets"]
                    yield rel, name, t["dtype"], t["shape"], base + a, base + b
            elif fn.endswith(".gguf"):
                for name, (dt, shape, a, b) in gguf_read(path).items():
                    yield rel, name, dt, shape, a, b


def awkward(d):
    names = ["a/b/c", ".hidden", "x.json", "100%", "tab\tname",
             "\u00fcn\u00ef/\u03c9", "..", "plain"]
    hdr, blob, off = {}, b"", 0
    for k, name in enumerate(names):
        data = bytes((k * 7 + j) % 251 for j in range(4 * (k + 3)))
        hdr[name] = {"dtype": "F32", "shape": [k + 3],
                     "data_offsets": [off, off + len(data)]}
        blob += data
        off += len(data)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(d, "awkward.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def check(model, view):
    listed = set(os.listdir(view))
    want = set()
    count = 0
    wholes = {}
    for rel, name, dtype, shape, a, b in model_tensors(model):
        if rel not in wholes:
            with open(os.path.join(model, rel), "rb") as f:
                wholes[rel] = f.read()
        esc = escape(name)
        if unescape(esc) != name:
            fail("escape round trip of %r" % name)
        want.add(esc)
        want.add(esc + ".json")
        tp = os.path.join(view, esc)
        st = os.stat(tp)
        if st.st_size != b - a:
            fail("%s: ls size %d, tensor %d bytes" % (name, st.st_size, b - a))
        with open(tp, "rb") as f:
            got = f.read()
        if got != wholes[rel][a:b]:
            fail("%s: bytes differ from %s" % (name, rel))
        with open(tp + ".json", "rb") as f:
            text = f.read()
        if os.stat(tp + ".json").st_size != len(text):
            fail("%s.json: ls size %d, read %d bytes" %
                 (esc, os.stat(tp + ".json").st_size, len(text)))
        meta = json.loads(text)
        exp = {"name": name, "dtype": dtype, "shape": shape, "file": rel,
               "byte_range": [a, b], "length": b - a,
               "layout": "checkpoint"}
        for k, v in exp.items():
            if meta.get(k) != v:
                fail("%s.json: %s is %r, want %r" % (esc, k, meta.get(k), v))
        for k in ("seed", "generation", "checksum", "cached_bytes"):
            if k not in meta:
                fail("%s.json: no %s" % (esc, k))
        if meta["cached_bytes"] != b - a:
            fail("%s.json: cached_bytes %d after a full read of %d"
                 % (esc, meta["cached_bytes"], b - a))
        x = "0x%016x" % xxhash.xxh3_64_intdigest(wholes[rel][a:b])
        if meta["checksum"] != {"algorithm": "xxh3-64", "value": x}:
            fail("%s.json: checksum %r, the tensor's XXH3-64 is %s"
                 % (esc, meta["checksum"], x))
        xa = {k: os.getxattr(tp, k).decode() for k in os.listxattr(tp)}
        exp = {"user.seedfs.dtype": dtype,
               "user.seedfs.shape": "[" + ", ".join(map(str, shape)) + "]",
               "user.seedfs.layout": "checkpoint",
               "user.seedfs.generation": str(meta["generation"]),
               "user.seedfs.seed": meta["seed"],
               "user.seedfs.file": rel,
               "user.seedfs.xxh3": x}
        if xa != exp:
            fail("%s: xattrs %r, want %r" % (esc, xa, exp))
        count += 1
    if listed != want:
        fail("listing differs: extra %r, missing %r" %
             (sorted(listed - want)[:5], sorted(want - listed)[:5]))
    print("checked %d tensors" % count)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "awkward":
        awkward(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "gguf":
        gguf_write(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        fail(__doc__)
