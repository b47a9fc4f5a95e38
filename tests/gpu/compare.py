# SPDX-License-Identifier: MIT
"""seedfs's Python loader into a device against torch's own load.

    compare.py SEED MODEL LOCALDIR DEVICE

For every .safetensors file of LOCALDIR: safetensors.torch.load_file
(path) on the CPU is the reference.  seedfs.load_model(SEED, MODEL,
framework="pt", device=DEVICE) and seedfs.safe_open(SEED, MODEL, "pt",
device=DEVICE).get_tensor must give every tensor on DEVICE with the
same dtype and shape, and its bits, copied back to the host, equal.
Prints a line per part and the load rates; exits 1 at the first
difference.  (make test runs it under tests/tools/fakecuda_torch.py:
DEVICE's memory is then the MOCK driver's.)
"""
import glob
import os
import sys
import time

import safetensors.torch
import torch

import seedfs


def raw(t):
    """A tensor's bytes, as uint8 on its device (any dtype)."""
    t = t.contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.view(torch.uint8)


def same(name, ref, got, dev):
    want = torch.device(dev)
    if got.device.type != want.type or (
            want.type == "cuda" and got.device.index != (want.index or 0)):
        sys.exit("%s: on %s, not on %s" % (name, got.device, dev))
    if tuple(got.shape) != tuple(ref.shape):
        sys.exit("%s: shape %s, torch's %s" % (name, tuple(got.shape),
                                               tuple(ref.shape)))
    if got.dtype != ref.dtype:
        # A same-width stand-in where this torch lacks the type
        # (seedfs.FALLBACK); the bits must still be equal.
        print("%s: dtype %s for torch's %s (FALLBACK)" % (name, got.dtype,
                                                          ref.dtype))
    if not torch.equal(raw(got.cpu()), raw(ref)):
        sys.exit("%s: bytes differ from torch's load" % name)


def main():
    seed, model, local, dev = sys.argv[1:5]
    files = sorted(glob.glob(os.path.join(local, "**", "*.safetensors"),
                             recursive=True))
    if not files:
        sys.exit("no .safetensors file under %s" % local)
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (
        lambda: None)
    t0 = time.monotonic()
    ref = {}
    for f in files:
        ref.update(safetensors.torch.load_file(f, device="cpu"))
    t_ref = time.monotonic() - t0
    nbytes = sum(t.numel() * t.element_size() for t in ref.values())

    t0 = time.monotonic()
    got = seedfs.load_model(seed, model, framework="pt", device=dev)
    sync()
    t_got = time.monotonic() - t0
    if set(got) != set(ref):
        sys.exit("load_model: tensors %s, torch's %s" % (
            sorted(set(got) ^ set(ref))[:5], len(ref)))
    for name in sorted(ref):
        same(name, ref[name], got[name], dev)
    print("load_model(device=%r): %d tensors, %d bytes, equal to torch's "
          "load_file (%.2f GB/s; torch's load_file from local disk to "
          "the CPU %.2f GB/s)" % (
              dev, len(ref), nbytes, nbytes / max(t_got, 1e-9) / 1e9,
              nbytes / max(t_ref, 1e-9) / 1e9))
    del got

    with seedfs.safe_open(seed, model, "pt", device=dev) as f:
        keys = sorted(f.keys())
        for name in keys:
            same(name, ref[name], f.get_tensor(name), dev)
        # A slice of the first 2-d tensor's rows.
        for name in keys:
            if ref[name].dim() == 2 and ref[name].shape[0] >= 4:
                sl = f.get_slice(name)[1:3]
                same(name + "[1:3]", ref[name][1:3], sl, dev)
                print("get_slice(%r)[1:3]: equal" % name)
                break
    print("safe_open(device=%r): %d tensors equal, get_slice too"
          % (dev, len(keys)))


if __name__ == "__main__":
    main()
