# SPDX-License-Identifier: MIT
"""One model into this process's memory, timed (after the imports):

    peers.py api SEED NAME         seedfs's engine API (seedfs.load_model)
    peers.py safetensors FILE...   safetensors.safe_open, every tensor
    peers.py runai FILE...         runai-model-streamer's
                                   SafetensorsStreamer (CPU)

Prints "bytes N seconds S".
"""
import sys
import time


def size(t):
    return t.nbytes if hasattr(t, "nbytes") else t.numel() * t.element_size()


def main():
    how, args = sys.argv[1], sys.argv[2:]
    total = 0
    if how == "api":
        import seedfs
        t0 = time.monotonic()
        sd = seedfs.load_model(args[0], args[1], framework="numpy")
        total = sum(size(t) for t in sd.values())
    elif how == "safetensors":
        from safetensors import safe_open
        import numpy as np
        t0 = time.monotonic()
        for fn in args:
            with safe_open(fn, framework="numpy") as f:
                for k in f.keys():
                    # get_tensor copies out of the file's mapping
                    total += size(np.asarray(f.get_tensor(k)))
    elif how == "runai":
        from runai_model_streamer import SafetensorsStreamer
        t0 = time.monotonic()
        with SafetensorsStreamer() as s:
            s.stream_files(list(args))
            for _, t in s.get_tensors():
                total += size(t)
    else:
        sys.exit("usage: see peers.py's docstring")
    print("bytes %d seconds %.3f" % (total, time.monotonic() - t0))


if __name__ == "__main__":
    main()
