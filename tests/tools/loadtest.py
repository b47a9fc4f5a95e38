# SPDX-License-Identifier: MIT
"""The Python loader (seedfs.load_model, seedfs.safe_open) against the
local files, bit for bit.

    loadtest.py mkmodel DIR           a model with every safetensors dtype,
                                      0-d and empty tensors, a big one
    loadtest.py check SEED DIR FW     FW: numpy or torch

check loads everything (load_model), a subset, then every tensor and
slices of each through safe_open, and what a tensor-parallel rank pulls
for its quarter of the big tensor; prints one line per part and exits 1
at the first difference.
"""
import json
import os
import struct
import sys

import numpy as np

import seedfs

# safetensors dtype -> element size
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
         "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4,
         "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8, "C64": 8}
BIG = "model.layers.0.mlp.down_proj.weight"


def write_st(path, tensors):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, data in tensors:
        header[name] = {"dtype": dt, "shape": list(shape),
                        "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for t in tensors:
            f.write(t[3])


def mkmodel(d):
    rng = np.random.default_rng(7)
    os.makedirs(d, exist_ok=True)
    one, two = [], []
    for i, dt in enumerate(sorted(SIZES)):
        shape = (37 + i, 129)
        n = shape[0] * shape[1] * SIZES[dt]
        data = rng.integers(0, 2, n, dtype=np.uint8) if dt == "BOOL" else \
            rng.integers(0, 256, n, dtype=np.uint8)
        one.append(("t.%s" % dt.lower(), dt, shape, data.tobytes()))
        scalar = rng.integers(0, 2 if dt == "BOOL" else 256, SIZES[dt],
                              dtype=np.uint8).tobytes()
        two.append(("scalar.%s" % dt.lower(), dt, (), scalar))
        two.append(("empty.%s" % dt.lower(), dt, (0, 5), b""))
    big = rng.standard_normal((4096, 1024), dtype=np.float32)
    two.insert(3, (BIG, "F32", big.shape, big.tobytes()))
    write_st(os.path.join(d, "model-00001-of-00002.safetensors"), one)
    write_st(os.path.join(d, "model-00002-of-00002.safetensors"), two)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"torch_dtype": "float32"}\n')


offs = {}  # name -> its offset in its file's data


def local_tensors(d):
    """name -> (dtype, shape, bytes) from the local files."""
    out = {}
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".safetensors"):
            continue
        raw = open(os.path.join(d, fn), "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        h = json.loads(raw[8:8 + n])
        for k, v in h.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            out[k] = (v["dtype"], tuple(v["shape"]), raw[8 + n + a:8 + n + b])
            offs[k] = a
    return out


def bits(x):
    """The bytes of an array or tensor, whatever its dtype."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).tobytes()
    import torch
    x = x.contiguous()
    if x.dtype == torch.bfloat16:
        x = x.view(torch.int16)
    return x.numpy().tobytes()


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(seed, d, fw):
    want = local_tensors(d)
    kind = np.ndarray
    if fw == "torch":
        import torch
        kind = torch.Tensor
    sd = seedfs.load_model(seed, "m", framework=fw)
    if set(sd) != set(want):
        fail("load_model keys differ: %s" % (set(sd) ^ set(want)))
    for k, (dt, shape, data) in want.items():
        v = sd[k]
        if not isinstance(v, kind):
            fail("%s: a %s, not a %s" % (k, type(v), kind))
        if tuple(v.shape) != shape:
            fail("%s: shape %s, want %s" % (k, tuple(v.shape), shape))
        if bits(v) != data:
            fail("%s (%s): bytes differ" % (k, dt))
    # Zero-copy: the tensors of one run are views of one buffer, laid
    # out as in the file.
    def ptr(x):
        return x.ctypes.data if isinstance(x, np.ndarray) else x.data_ptr()
    if ptr(sd["t.f64"]) - ptr(sd["t.f32"]) != offs["t.f64"] - offs["t.f32"]:
        fail("t.f32 and t.f64 are not views of one buffer")
    print("load_model(%s): %d tensors, every dtype (%s), 0-d and empty, "
          "bit-exact; views of one buffer per run; stand-ins %s"
          % (fw, len(sd), " ".join(sorted(SIZES)), seedfs.FALLBACK[fw]))

    sub = ["t.bf16", "scalar.i64", BIG]
    part = seedfs.load_model(seed, "m", framework=fw, tensors=sub)
    if sorted(part) != sorted(sub) or any(bits(part[k]) != want[k][2]
                                          for k in sub):
        fail("load_model(tensors=%s)" % sub)
    try:
        seedfs.load_model(seed, "m", framework=fw, tensors=["nope"])
        fail("an unknown tensor was loaded")
    except KeyError as e:
        print("load_model(tensors=...): 3 tensors bit-exact; unknown: %s" % e)

    with seedfs.safe_open(seed, "m", framework=fw) as f:
        if sorted(f.keys()) != sorted(want):
            fail("safe_open keys")
        for k, (dt, shape, data) in want.items():
            if bits(f.get_tensor(k)) != data:
                fail("get_tensor(%s)" % k)
            s = f.get_slice(k)
            if s.get_shape() != list(shape) or s.get_dtype() != dt:
                fail("get_slice(%s) shape/dtype" % k)
            full = np.frombuffer(data, dtype=np.uint8)
            if not shape:
                if bits(s[...]) != data:
                    fail("get_slice(%s)[...]" % k)
                continue
            rows = shape[0]
            rb = len(data) // rows if rows else 0
            for a, b in ((0, rows), (1, rows // 2), (rows - 1, rows),
                         (3, 3), (-5, None)):
                got = s[a:b]
                lo, hi, _ = slice(a, b).indices(rows)
                hi = max(lo, hi)
                exp = full[lo * rb:hi * rb].tobytes()
                if bits(got) != exp or got.shape[0] != hi - lo:
                    fail("get_slice(%s)[%s:%s]" % (k, a, b))
            if rows:
                if bits(s[rows - 1]) != full[(rows - 1) * rb:].tobytes():
                    fail("get_slice(%s)[-1 row]" % k)
                if len(shape) == 2 and shape[1] > 5:
                    got = s[2:6, 1:4]
                    ref = sd[k][2:6, 1:4]
                    if bits(got) != bits(ref):
                        fail("get_slice(%s)[2:6, 1:4]" % k)
        print("safe_open(%s): keys, get_tensor and get_slice ([a:b], [i], "
              "[-5:], [a:a], [2:6, 1:4]) of every tensor bit-exact" % fw)

    # A tensor-parallel rank's quarter of the big tensor: each rank a
    # client of its own, as each is its own process.
    rows = want[BIG][1][0]
    tb = len(want[BIG][2])
    pulled = []
    for k in range(4):
        with seedfs.safe_open(seed, "m", framework=fw) as f:
            before = f.client.bytes_pulled
            got = f.get_slice(BIG)[k * rows // 4:(k + 1) * rows // 4]
            pulled.append(f.client.bytes_pulled - before)
        if bits(got) != want[BIG][2][k * tb // 4:(k + 1) * tb // 4]:
            fail("TP rank %d slice" % k)
    if True:
        mib = 1 << 20
        # Past its quarter, the most a rank pulled, KiB rounded up: at
        # most 2 MiB (the checksum blocks its ends cut into).  Printed
        # as tests/integration/lib.sh's bound prints it.
        over = max(-((tb // 4 - p) // 1024) for p in pulled)
        print("bound: tp_rank_over_quarter_kib <= 2048: %d" % over)
        if over > 2048:
            fail("a TP=4 rank pulled more than its quarter + 2 MiB: %s"
                 % pulled)
        print("TP=4 ranks of a %d MiB tensor: each read %.1f MiB and "
              "pulled %s MiB" % (tb // mib, tb / 4 / mib,
                                 " ".join("%.2f" % (p / mib)
                                          for p in pulled)))


if __name__ == "__main__":
    if sys.argv[1] == "mkmodel":
        mkmodel(sys.argv[2])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
