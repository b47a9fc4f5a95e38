#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Load a model into torch tensors from a seed, print a checksum per
tensor; with --local, the same from the local safetensors files.  The
two outputs are equal when the seed serves those files.

    load_torch.py --seed HOST:PORT[,HOST:PORT...] NAME
    load_torch.py --seed https://HOST:PORT --token-file FILE --tls-ca CA \
        --trust-key PUB --require-signed NAME
    load_torch.py --local DIR

Each line: name, dtype, shape, and the sha256 of the tensor's bytes.
The security options are Client's keywords (docs/security.md): with
--require-signed, no trust key (--trust-key or $SEEDFS_TRUST_KEY_FILE)
is an error before any seed is asked.
"""
import argparse
import hashlib
import json
import os
import struct

import torch

import seedfs


def digest(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: same bits
        t = t.view(torch.int16)
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()


def from_seed(seed, name, **kw):
    sd = seedfs.load_model(seed, name, framework="torch", **kw)
    with seedfs.Client(seed, name, **kw) as c:  # the dtypes as published
        return {k: (c.tensors[k].dtype, v) for k, v in sd.items()}


def from_local(d):
    out = {}
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".safetensors"):
            continue
        with open(os.path.join(d, fn), "rb") as f:
            raw = bytearray(f.read())
        n = struct.unpack("<Q", raw[:8])[0]
        for k, v in json.loads(raw[8:8 + n]).items():
            if k == "__metadata__":
                continue
            a = v["data_offsets"][0]
            out[k] = (v["dtype"],
                      seedfs.tensor_view(raw, 8 + n + a, v["dtype"],
                                         tuple(v["shape"]), "torch"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed")
    ap.add_argument("--local")
    ap.add_argument("--token-file")
    ap.add_argument("--tls-ca")
    ap.add_argument("--trust-key")
    ap.add_argument("--require-signed", action="store_true")
    ap.add_argument("name", nargs="?")
    a = ap.parse_args()
    if bool(a.seed) == bool(a.local) or (a.seed and not a.name):
        ap.error("--seed HOST:PORT NAME, or --local DIR")
    kw = {"token_file": a.token_file, "tls_ca": a.tls_ca,
          "trust_key": a.trust_key, "require_signed": a.require_signed}
    tensors = (from_seed(a.seed, a.name, **kw) if a.seed
               else from_local(a.local))
    for k in sorted(tensors):
        dt, t = tensors[k]
        print(k, dt, "x".join(map(str, t.shape)) or "-", digest(t))


if __name__ == "__main__":
    main()
