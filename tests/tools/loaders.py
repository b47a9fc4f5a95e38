# SPDX-License-Identifier: MIT
"""The loaders people use, on a seedfs mount, against the same files
read from local disk: every result identical (the same bits, dtypes,
shapes, keys and metadata; the same error where the library refuses a
tensor locally).

    loaders.py mkmodels DIR      DIR/m: every safetensors dtype in two
                                 shards (loadtest.py's), a torch.save zip
                                 and a legacy one; DIR/llama: a small
                                 Llama saved by transformers'
                                 save_pretrained (shards and an index)
    loaders.py safetensors MOUNTED LOCAL
                                 safe_open (numpy, pt: keys, metadata,
                                 get_tensor, get_slice) on every
                                 .safetensors file, load_file (numpy,
                                 torch) and torch.load on every .bin
    loaders.py transformers MOUNTED LOCAL
                                 from_pretrained from both: every
                                 parameter and buffer equal, and the
                                 logits of one fixed prompt
    loaders.py dump MODULE FILE...
                                 what `from MODULE import safe_open`
                                 reads of each FILE (framework pt): a
                                 line per tensor (name, dtype, shape,
                                 SHA-256 of its bytes); MODULE is
                                 safetensors or seedfs (a drop-in)
    loaders.py compare-dumps THEIRS OURS
                                 the two dumps agree

Prints one line per part; exits 1 at the first difference.
"""
import ctypes
import hashlib
import importlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def bits(x):
    """The bytes of an array or tensor, whatever its dtype."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).tobytes()
    x = x.contiguous()
    return ctypes.string_at(x.data_ptr(), x.numel() * x.element_size())


def outcome(fn, where):
    """(value, None) or (None, "Type: message") with @where's path left
    out of the message."""
    try:
        return fn(), None
    except Exception as e:  # the library's own refusal is compared
        return None, "%s: %s" % (type(e).__name__,
                                 str(e).replace(where, "DIR"))


def same(what, mounted, local, a, b):
    """@a and @b (thunks) give the same value or the same error."""
    va, ea = outcome(a, mounted)
    vb, eb = outcome(b, local)
    if ea or eb:
        if ea != eb:
            fail("%s: on the mount %s, locally %s" % (what, ea or "ok",
                                                     eb or "ok"))
        return "refused"
    equal_values(what, va, vb)
    return "equal"


def equal_values(what, va, vb):
    if isinstance(va, dict):
        if list(va) != list(vb):
            fail("%s: keys differ" % what)
        for k in va:
            equal_values("%s[%s]" % (what, k), va[k], vb[k])
        return
    if hasattr(va, "shape"):
        if type(va) is not type(vb) or str(va.dtype) != str(vb.dtype) or \
                tuple(va.shape) != tuple(vb.shape) or bits(va) != bits(vb):
            fail("%s: %s %s %s against %s %s %s" % (
                what, type(va).__name__, va.dtype, tuple(va.shape),
                type(vb).__name__, vb.dtype, tuple(vb.shape)))
        return
    if va != vb:
        fail("%s: %r against %r" % (what, va, vb))


def mkmodels(d):
    import loadtest
    import torch
    m = os.path.join(d, "m")
    loadtest.mkmodel(m)
    g = torch.Generator().manual_seed(3)
    sd = {"a.weight": torch.randn(64, 33, generator=g),
          "a.bias": torch.randn(33, generator=g).half(),
          "b.idx": torch.arange(1000, dtype=torch.int64),
          "b.bf16": torch.randn(17, 5, generator=g).bfloat16()}
    torch.save(sd, os.path.join(m, "pytorch_model.bin"))
    torch.save(sd, os.path.join(m, "legacy.bin"),
               _use_new_zipfile_serialization=False)
    # Tensors of the same names in another file (as diffusers lays out
    # x.safetensors next to x.fp16.safetensors): each file its own.
    import shutil
    shutil.copy(os.path.join(m, "model-00001-of-00002.safetensors"),
                os.path.join(m, "model.fp16.safetensors"))
    llama(os.path.join(d, "llama"))


def llama(d):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=1000, hidden_size=64,
                      intermediate_size=160, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=128)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(d, max_shard_size="300KB", safe_serialization=True)


def st_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))


def check_safetensors(mounted, local):
    from safetensors import safe_open
    import safetensors.numpy
    import safetensors.torch
    import torch
    files = st_files(local)
    if st_files(mounted) != files or not files:
        fail("safetensors files: %s against %s" % (st_files(mounted), files))
    for fw in ("numpy", "pt"):
        n = refused = slices = 0
        for fn in files:
            pm, pl = os.path.join(mounted, fn), os.path.join(local, fn)
            with safe_open(pm, framework=fw) as fm, \
                    safe_open(pl, framework=fw) as fl:
                if fm.keys() != fl.keys() or not fl.keys():
                    fail("%s %s: keys differ" % (fw, fn))
                if fm.metadata() != fl.metadata():
                    fail("%s %s: metadata differ" % (fw, fn))
                for k in fl.keys():
                    what = "%s %s %s" % (fw, fn, k)
                    r = same(what, mounted, local, lambda: fm.get_tensor(k),
                             lambda: fl.get_tensor(k))
                    n += 1
                    refused += r == "refused"
                    sm, sl = fm.get_slice(k), fl.get_slice(k)
                    if sm.get_shape() != sl.get_shape() or \
                            sm.get_dtype() != sl.get_dtype():
                        fail("%s: get_slice shape or dtype" % what)
                    shape = sl.get_shape()
                    idx = [(Ellipsis,)]
                    if shape:
                        idx += [(slice(0, 1),), (slice(1, 3),),
                                (slice(-2, None),), (slice(3, 3),)]
                    if len(shape) > 1:
                        idx += [(slice(None), slice(1, 3)),
                                (slice(2, 6), slice(0, 1))]
                    for ix in idx:
                        same("%s[%s]" % (what, ix), mounted, local,
                             lambda: sm[ix], lambda: sl[ix])
                        slices += 1
        print("safe_open(framework=%s): %d files, %d tensors: %d equal, %d "
              "refused alike (dtypes this numpy or torch lacks), %d slices "
              "equal" % (fw, len(files), n, n - refused, refused, slices))
    for name, load in (("safetensors.numpy.load_file",
                        safetensors.numpy.load_file),
                       ("safetensors.torch.load_file",
                        safetensors.torch.load_file)):
        res = [same("%s(%s)" % (name, fn), mounted, local,
                    lambda: load(os.path.join(mounted, fn)),
                    lambda: load(os.path.join(local, fn))) for fn in files]
        print("%s: %d files, %d equal, %d refused alike" % (
            name, len(files), res.count("equal"), res.count("refused")))
    bins = sorted(f for f in os.listdir(local) if f.endswith(".bin"))
    for fn in bins:
        r = same("torch.load(%s)" % fn, mounted, local,
                 lambda: torch.load(os.path.join(mounted, fn),
                                    map_location="cpu"),
                 lambda: torch.load(os.path.join(local, fn),
                                    map_location="cpu"))
        if r != "equal":
            fail("torch.load(%s) refused" % fn)
    if bins:
        print("torch.load: %s equal" % ", ".join(bins))


def check_transformers(mounted, local):
    import torch
    from transformers import AutoModelForCausalLM
    models = []
    for d in (mounted, local):
        m = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32,
                                                 local_files_only=True)
        m.eval()
        models.append(m)
    pm = dict(models[0].state_dict())
    pl = dict(models[1].state_dict())
    if list(pm) != list(pl) or not pl:
        fail("state_dict keys differ")
    for k in pl:
        equal_values("parameter %s" % k, pm[k], pl[k])
    prompt = torch.tensor([[1, 17, 242, 9, 999, 3, 500, 77]])
    with torch.no_grad():
        lm = models[0](prompt).logits
        ll = models[1](prompt).logits
    if not torch.equal(lm, ll):
        fail("logits differ: max |d| %g" % (lm - ll).abs().max().item())
    shards = st_files(local)
    print("transformers %s from_pretrained: %s, %d safetensors shards and "
          "an index, %d tensors equal, logits of an %d-token prompt equal "
          "(%s)" % (sys.modules["transformers"].__version__,
                    type(models[0]).__name__, len(shards), len(pl),
                    prompt.shape[1], tuple(lm.shape)))


def raw_sums(fn):
    """name -> SHA-256 of the tensor's bytes as the file holds them."""
    import json
    import struct
    with open(fn, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    h = json.loads(data[8:8 + n])
    return {k: hashlib.sha256(data[8 + n + v["data_offsets"][0]:
                                   8 + n + v["data_offsets"][1]]).hexdigest()
            for k, v in h.items() if k != "__metadata__"}


def dump(module, files):
    """What `from MODULE import safe_open` gives of each file: its keys
    in the order given, its metadata, and per tensor its dtype, shape
    and SHA-256 (or "refused" and the SHA-256 of its raw bytes), and of
    its first row through get_slice."""
    import json
    safe_open = importlib.import_module(module).safe_open
    pulled = 0
    for fn in files:
        base = os.path.basename(fn)
        raw = raw_sums(fn)
        with safe_open(fn, framework="pt") as f:
            if module == "seedfs":
                pulled -= f.client.bytes_pulled
            print("%s keys %s" % (base, ",".join(f.keys())))
            print("%s metadata %s" % (base, json.dumps(f.metadata(),
                                                       sort_keys=True)))
            for k in f.keys():
                try:
                    t = f.get_tensor(k)
                    line = "%s %s %s" % (t.dtype, tuple(t.shape),
                                         hashlib.sha256(bits(t)).hexdigest())
                    if t.dim():
                        r = f.get_slice(k)[0:1]
                        line += " row0 %s" % hashlib.sha256(
                            bits(r)).hexdigest()
                except Exception as e:
                    line = "refused %s (%s)" % (raw[k], type(e).__name__)
                print("%s %s %s" % (base, k, line))
            if module == "seedfs":
                pulled += f.client.bytes_pulled
    if module == "seedfs":
        sys.stderr.write("seedfs pulled %d bytes\n" % pulled)


def compare_dumps(theirs, ours):
    """safetensors' dump against seedfs': the same keys in the same
    order, the same metadata, and the same line for every tensor
    safetensors loads; where it refuses a dtype, ours holds the file's
    bytes in a stand-in type of the same width (seedfs.FALLBACK)."""
    def rows(fn):
        out = {}
        for line in open(fn):
            f, k, rest = line.rstrip("\n").split(" ", 2)
            out[(f, k)] = rest
        return out
    a, b = rows(theirs), rows(ours)
    if list(a) != list(b) or not a:
        fail("the tensors differ: %s" % (set(a) ^ set(b)))
    stand_in = loaded = 0
    for key, line in a.items():
        if line.startswith("refused"):
            raw = line.split()[1]
            if b[key].startswith("refused") or \
                    (") %s" % raw) not in b[key]:
                fail("%s %s: %s, the file's bytes %s" % (key + (b[key], raw)))
            stand_in += 1
        elif b[key] != line:
            fail("%s %s: %s, safetensors %s" % (key + (b[key], line)))
        else:
            loaded += key[1] not in ("keys", "metadata")
    print("seedfs.safe_open is a drop-in for safetensors.safe_open: the "
          "same keys in the same order and metadata; %d tensors the same "
          "dtype, shape and bytes (and first row through get_slice); %d "
          "that safetensors refuses (dtypes this torch lacks) given with "
          "the file's bytes in a stand-in type" % (loaded, stand_in))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "mkmodels":
        mkmodels(sys.argv[2])
    elif cmd == "safetensors":
        check_safetensors(sys.argv[2], sys.argv[3])
    elif cmd == "transformers":
        check_transformers(sys.argv[2], sys.argv[3])
    elif cmd == "dump":
        dump(sys.argv[2], sys.argv[3:])
    elif cmd == "compare-dumps":
        compare_dumps(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: see loaders.py's docstring")
