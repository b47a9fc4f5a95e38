# SPDX-License-Identifier: MIT
"""A loader's reads, timed: every tensor of the .safetensors files
given, in file order or shuffled, with read() or through mmap, into one
buffer (what a loader does before it hands the bytes to torch).

    tensorread.py mkmodel DIR SIZE_MIB   a model of 4 shards whose
                                         tensors are 2-32 MiB (F16)
    tensorread.py read|mmap file|shuffled FILE...

Prints "bytes N seconds S tensors T".
"""
import json
import mmap
import os
import random
import struct
import sys
import time


def header(fn):
    with open(fn, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return 8 + n, json.loads(f.read(n))


def mkmodel(d, size_mib):
    rng = random.Random(5)
    os.makedirs(d, exist_ok=True)
    left = size_mib << 20
    per_shard = left // 4
    for s in range(4):
        tensors, total = [], 0
        while total < per_shard:
            n = min(rng.randint(2, 32) << 20, per_shard - total)
            n -= n % 2
            if n <= 0:
                break
            tensors.append(("layers.%d.t%d.weight" % (s, len(tensors)),
                            n // 2))
            total += n
        h, off = {"__metadata__": {"format": "pt"}}, 0
        for name, count in tensors:
            h[name] = {"dtype": "F16", "shape": [count],
                       "data_offsets": [off, off + 2 * count]}
            off += 2 * count
        hb = json.dumps(h).encode()
        hb += b" " * (-len(hb) % 8)
        with open(os.path.join(d, "model-%05d-of-00004.safetensors"
                               % (s + 1)), "wb") as f:
            f.write(struct.pack("<Q", len(hb)) + hb)
            block = os.urandom(1 << 20)
            for i in range(off >> 20):
                f.write(block)
            f.write(block[:off & ((1 << 20) - 1)])


def run(mode, order, files):
    spans = []
    for fn in files:
        base, h = header(fn)
        for k, v in h.items():
            if k != "__metadata__":
                a, b = v["data_offsets"]
                spans.append((fn, base + a, b - a))
    if order == "shuffled":
        random.Random(1).shuffle(spans)
    biggest = max(n for _, _, n in spans)
    buf = bytearray(biggest)
    view = memoryview(buf)
    fds, maps = {}, {}
    for fn in files:
        fds[fn] = os.open(fn, os.O_RDONLY)
        if mode == "mmap":
            maps[fn] = mmap.mmap(fds[fn], 0, prot=mmap.PROT_READ)
    total = 0
    t0 = time.monotonic()
    for fn, off, n in spans:
        if mode == "read":
            got = 0
            while got < n:
                k = os.preadv(fds[fn], [view[got:n]], off + got)
                if k <= 0:
                    sys.exit("short read of %s at %d" % (fn, off + got))
                got += k
        else:
            view[:n] = maps[fn][off:off + n]
        total += n
    secs = time.monotonic() - t0
    for fn in files:
        if mode == "mmap":
            maps[fn].close()
        os.close(fds[fn])
    print("bytes %d seconds %.3f tensors %d" % (total, secs, len(spans)))


if __name__ == "__main__":
    if sys.argv[1] == "mkmodel":
        mkmodel(sys.argv[2], int(sys.argv[3]))
    else:
        run(sys.argv[1], sys.argv[2], sys.argv[3:])
