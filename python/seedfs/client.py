# SPDX-License-Identifier: MIT
"""Load published tensors straight into memory (libseedfs's engine API).

    import seedfs
    sd = seedfs.load_model("10.0.0.1:7070", "llama-8b", framework="torch")
    with seedfs.safe_open("10.0.0.1:7070", "llama-8b", "torch") as f:
        for k in f.keys():
            t = f.get_tensor(k)
        rows = f.get_slice("model.embed_tokens.weight")[0:1024]

The bytes are one-sided transport reads into memory this process
registered, from every source of the model's content at once; no file,
no FUSE, no second copy.  Arrays and tensors are views over that memory
(torch.frombuffer, numpy views): nothing is copied after the read.

dtypes: every safetensors dtype is returned with its bits unchanged.
Where the framework has no such type the view uses an integer type of
the same width, and says so in `seedfs.FALLBACK`: numpy has no BF16
(uint16) and no F8_* (uint8); torch before 2.1 has no F8_* (uint8),
before 2.3 no U16/U32/U64 (int16, int32, int64 holding the same bits).
C64 is complex64 in both.
"""
import ctypes
import os

from . import _libload

__all__ = ["Client", "load_model", "safe_open", "tensor_view", "FALLBACK",
           "cuda_devices"]

# safetensors dtype -> (numpy name, element size)
_NP = {"BOOL": ("bool", 1), "U8": ("uint8", 1), "I8": ("int8", 1),
       "F8_E5M2": ("uint8", 1), "F8_E4M3": ("uint8", 1),
       "F8_E8M0": ("uint8", 1), "I16": ("int16", 2), "U16": ("uint16", 2),
       "F16": ("float16", 2), "BF16": ("uint16", 2), "I32": ("int32", 4),
       "U32": ("uint32", 4), "F32": ("float32", 4), "F64": ("float64", 8),
       "I64": ("int64", 8), "U64": ("uint64", 8), "C64": ("complex64", 8)}

# Which dtypes no framework type holds natively (filled in lazily).
FALLBACK = {"numpy": {"BF16": "uint16", "F8_E5M2": "uint8",
                      "F8_E4M3": "uint8", "F8_E8M0": "uint8"},
            "torch": {}}


def _torch_dtype(torch, dt):
    """The torch dtype for safetensors dtype @dt (a same-width stand-in
    where this torch has none, recorded in FALLBACK)."""
    native = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16",
              "F16": "float16", "BF16": "bfloat16", "I32": "int32",
              "F32": "float32", "F64": "float64", "I64": "int64",
              "U16": "uint16", "U32": "uint32", "U64": "uint64",
              "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn",
              "F8_E8M0": "float8_e8m0fnu", "C64": "complex64"}
    stand_in = {"U16": "int16", "U32": "int32", "U64": "int64",
                "F8_E5M2": "uint8", "F8_E4M3": "uint8", "F8_E8M0": "uint8"}
    t = getattr(torch, native[dt], None)
    if t is None:
        FALLBACK["torch"][dt] = stand_in[dt]
        t = getattr(torch, stand_in[dt])
    return t


class _CCfg(ctypes.Structure):
    _fields_ = [("seeds", ctypes.c_char_p), ("registry", ctypes.c_char_p),
                ("registry_ca", ctypes.c_char_p),
                ("registry_auth_file", ctypes.c_char_p),
                ("protocol", ctypes.c_char_p), ("timeout_ms", ctypes.c_uint),
                ("cache_size", ctypes.c_uint64), ("no_verify", ctypes.c_int),
                ("log_level", ctypes.c_char_p),
                ("token_file", ctypes.c_char_p),
                ("tls_ca", ctypes.c_char_p), ("tls_pin", ctypes.c_char_p),
                # ABI node SEEDFS_0.3
                ("trust_key", ctypes.c_char_p),
                ("require_signed", ctypes.c_int)]


class _Info(ctypes.Structure):
    _fields_ = [("model", ctypes.c_char_p), ("generation", ctypes.c_uint64),
                ("identity", ctypes.c_char_p), ("protocol", ctypes.c_char_p),
                ("nfiles", ctypes.c_size_t), ("ntensors", ctypes.c_size_t),
                ("bytes", ctypes.c_uint64), ("bytes_pulled", ctypes.c_uint64)]


class _File(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("size", ctypes.c_uint64)]


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p),
                ("ndim", ctypes.c_uint32), ("shape", ctypes.c_uint64 * 16),
                ("file", ctypes.c_size_t), ("off", ctypes.c_uint64),
                ("len", ctypes.c_uint64), ("layout", ctypes.c_char_p)]


class _Rd(ctypes.Structure):
    _fields_ = [("file", ctypes.c_size_t), ("off", ctypes.c_uint64),
                ("len", ctypes.c_uint64), ("dst", ctypes.c_void_p),
                ("mr", ctypes.c_void_p), ("status", ctypes.c_int)]


def _signatures(lib):
    vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    sig = {
        "sfs_client_open": ([ctypes.POINTER(_CCfg), cp, ctypes.POINTER(vp),
                             cp, sz], ctypes.c_int),
        "sfs_client_close": ([vp], None),
        "sfs_client_info": ([vp, ctypes.POINTER(_Info)], None),
        "sfs_client_status": ([vp, cp, sz, ctypes.POINTER(sz)],
                              ctypes.c_int),
        "sfs_client_file": ([vp, sz, ctypes.POINTER(_File)], ctypes.c_int),
        "sfs_client_tensor": ([vp, sz, ctypes.POINTER(_Tensor)],
                              ctypes.c_int),
        "sfs_client_reg": ([vp, vp, sz, ctypes.POINTER(vp), cp, sz],
                           ctypes.c_int),
        "sfs_client_dereg": ([vp], ctypes.c_int),
        "sfs_client_read": ([vp, ctypes.POINTER(_Rd), sz, cp, sz],
                            ctypes.c_int),
    }
    for name, (args, res) in sig.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = res
    if hasattr(lib, "sfs_client_cuda_devices"):  # ABI node SEEDFS_0.2
        lib.sfs_client_cuda_devices.argtypes = [cp, sz]
        lib.sfs_client_cuda_devices.restype = ctypes.c_int


def _open_0_3(lib):
    """sfs_client_open@SEEDFS_0.3, the one that reads trust_key and
    require_signed, or None when this libseedfs predates them (its
    sfs_client_open would take the cfg and ignore both)."""
    try:
        dlvsym = ctypes.CDLL(None).dlvsym
    except AttributeError:  # glibc before 2.34: in libdl
        dlvsym = ctypes.CDLL("libdl.so.2").dlvsym
    dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    dlvsym.restype = ctypes.c_void_p
    addr = dlvsym(lib._handle, b"sfs_client_open", b"SEEDFS_0.3")
    if not addr:
        return None
    vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_CCfg), cp,
                             ctypes.POINTER(vp), cp, sz)
    return proto(addr)


def cuda_devices():
    """How many CUDA devices libseedfs can read into; RuntimeError with
    its one-line reason when none (a build without CUDA, no driver, no
    device)."""
    lib = _libload.lib()
    _signatures(lib)
    if not hasattr(lib, "sfs_client_cuda_devices"):
        raise RuntimeError("this libseedfs predates reads into GPU memory")
    err = ctypes.create_string_buffer(512)
    n = lib.sfs_client_cuda_devices(err, len(err))
    if n <= 0:
        raise RuntimeError(err.value.decode(errors="replace"))
    return n


def _device(device, framework):
    """None for host memory, else the torch.device reads land in: CUDA
    memory needs torch with CUDA and a libseedfs built with it; each
    missing piece is refused in one line."""
    if device in (None, "cpu"):
        return None
    dev = str(device)
    if dev != "cuda" and not (dev.startswith("cuda:") and
                              dev[5:].isdigit()):
        raise ValueError("device %r: 'cpu', 'cuda' or 'cuda:N'" % (device,))
    if framework != "torch":
        raise ValueError("device %r: tensors on a GPU are torch's: use "
                         "framework='pt'" % (device,))
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("device %r: torch %s sees no CUDA device "
                           "(torch.cuda.is_available() is False)"
                           % (device, torch.__version__))
    try:
        cuda_devices()
    except RuntimeError as e:
        raise RuntimeError("device %r: libseedfs cannot read into GPU "
                           "memory: %s" % (device, e)) from None
    return torch.device(dev)


# Where each tensor starts in a device buffer: a multiple of this, so
# that a byte view of it can be viewed as any dtype.
_DEV_ALIGN = 256


def _device_load(client, tis, dev):
    """Tensors @tis read into one buffer on CUDA device @dev, each a
    view of its part: one registration, one batch of reads (through
    libseedfs's page-locked stage, verified on the host, then copied)."""
    import torch
    at, where = 0, []
    for t in tis:
        where.append(at)
        at += (t.len + _DEV_ALIGN - 1) // _DEV_ALIGN * _DEV_ALIGN
    buf = torch.empty(max(at, 1), dtype=torch.uint8, device=dev)
    # The caching allocator may hand back memory that work queued on
    # torch's stream still uses; libseedfs copies on a stream of its own.
    torch.cuda.current_stream(dev).synchronize()
    reads = [(t.file, t.off, t.len, a) for t, a in zip(tis, where) if t.len]
    client.read_into_ptr(buf.data_ptr(), buf.numel(), reads)
    out = []
    for t, a in zip(tis, where):
        dt = _torch_dtype(torch, t.dtype)
        if t.len == 0:
            out.append(torch.empty(t.shape, dtype=dt, device=dev))
        else:
            out.append(buf[a:a + t.len].view(dt).reshape(t.shape))
    return out


class TensorInfo:
    """One tensor as the manifest lists it."""
    __slots__ = ("name", "dtype", "shape", "file", "off", "len", "layout")

    def __init__(self, t):
        self.name = t.name.decode()
        self.dtype = t.dtype.decode()
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        self.file, self.off, self.len = t.file, t.off, t.len
        self.layout = t.layout.decode() if t.layout else ""


class Client(_libload.Closing):
    """One generation of one published model, read with one-sided reads.

    @seed: "[https://]HOST:PORT[,HOST:PORT...]" or
    "etcd://HOST:PORT[/PREFIX]" (the registry).  @token_file: the seeds'
    token (default $SEEDFS_TOKEN_FILE); @tls_ca, @tls_pin: TLS to the
    seeds' control ports (docs/security.md).  @trust_key: a file of PEM
    Ed25519 public keys; the manifest must be signed by one of them and
    every chunk is checked with its SHA-256, as a mount's --trust-key
    (default $SEEDFS_TRUST_KEY_FILE, else unsigned manifests are taken).
    @require_signed=True: no trust key either way is an error raised
    before any source is asked (fail closed).  Thread safe: reads from
    many threads run at once.
    """

    def __init__(self, seed, name, protocol=None, timeout=10.0,
                 cache_size=0, log_level=None, registry_ca=None,
                 registry_auth_file=None, token_file=None, tls_ca=None,
                 tls_pin=None, trust_key=None, require_signed=False):
        from . import SeedfsError
        self._err = SeedfsError
        self._c = ctypes.c_void_p()
        self._lib = _libload.lib()
        _signatures(self._lib)
        open_fn = _open_0_3(self._lib)
        if open_fn is None:
            if trust_key is not None or require_signed:
                raise RuntimeError("this libseedfs predates trust_key and "
                                   "require_signed (ABI node SEEDFS_0.3): "
                                   "it would read unsigned manifests")
            open_fn = self._lib.sfs_client_open
        enc = (lambda s: s.encode() if s is not None else None)
        reg = seed if seed.startswith(("etcd://", "etcds://")) else None
        self._cfg = _CCfg(enc(None if reg else seed), enc(reg),
                          enc(registry_ca), enc(registry_auth_file),
                          enc(protocol), int(timeout * 1000), cache_size, 0,
                          enc(log_level), enc(token_file), enc(tls_ca),
                          enc(tls_pin), enc(trust_key),
                          1 if require_signed else 0)
        err = ctypes.create_string_buffer(512)
        rc = open_fn(ctypes.byref(self._cfg), name.encode(),
                     ctypes.byref(self._c), err, len(err))
        if rc:
            raise self._err("sfs_client_open", rc,
                            err.value.decode(errors="replace"))
        info = self.info()
        self.model, self.generation = info.model.decode(), info.generation
        self.files = []
        for i in range(info.nfiles):
            f = _File()
            self._lib.sfs_client_file(self._c, i, ctypes.byref(f))
            self.files.append((f.path.decode(), f.size))
        self.tensors = {}
        self.tensor_list = []  # every one, in the manifest's order
        for i in range(info.ntensors):
            t = _Tensor()
            self._lib.sfs_client_tensor(self._c, i, ctypes.byref(t))
            ti = TensorInfo(t)
            self.tensor_list.append(ti)
            self.tensors.setdefault(ti.name, ti)

    def _call(self, name, *args):
        err = ctypes.create_string_buffer(512)
        rc = getattr(self._lib, name)(*args, err, len(err))
        if rc:
            raise self._err(name, rc, err.value.decode(errors="replace"))

    def info(self):
        i = _Info()
        self._lib.sfs_client_info(self._c, ctypes.byref(i))
        return i

    @property
    def bytes_pulled(self):
        """Bytes pulled from the sources so far (verified)."""
        return self.info().bytes_pulled

    def status(self):
        """The text a mount shows in .seedfs/status."""
        need = ctypes.c_size_t()
        buf = ctypes.create_string_buffer(1 << 16)
        self._lib.sfs_client_status(self._c, buf, len(buf),
                                    ctypes.byref(need))
        return buf.value.decode(errors="replace")

    def read_into(self, buf, reads):
        """Read every (file, off, len, at) of @reads into the writable
        buffer @buf (a numpy array or bytearray) at byte @at, all at
        once.  @buf is registered for the call."""
        import numpy as np
        arr = np.frombuffer(buf, dtype=np.uint8) if not isinstance(
            buf, np.ndarray) else buf.reshape(-1).view(np.uint8)
        if not reads:
            return
        self.read_into_ptr(arr.ctypes.data, arr.nbytes, reads)

    def read_into_ptr(self, base, nbytes, reads):
        """read_into for memory at address @base of @nbytes bytes: host
        memory, or CUDA device memory (a libseedfs built with CUDA).
        The memory must stay valid for the call."""
        if not reads:
            return
        mr = ctypes.c_void_p()
        self._call("sfs_client_reg", self._c, ctypes.c_void_p(base),
                   max(nbytes, 1), ctypes.byref(mr))
        try:
            rds = (_Rd * len(reads))()
            for k, (f, off, n, at) in enumerate(reads):
                if at < 0 or at + n > nbytes:
                    raise ValueError("read %d runs past the buffer" % k)
                rds[k].file, rds[k].off, rds[k].len = f, off, n
                rds[k].dst, rds[k].mr = base + at, mr.value
            self._call("sfs_client_read", self._c, rds, len(reads))
        finally:
            self._lib.sfs_client_dereg(mr)

    def close(self):
        if self._c:
            self._lib.sfs_client_close(self._c)
            self._c = ctypes.c_void_p()


def tensor_view(buf, offset, dtype, shape, framework="numpy"):
    """The tensor of safetensors @dtype and @shape whose bytes are at
    @offset in @buf (a writable buffer), as a numpy array or torch
    tensor viewing them (no copy), with the stand-ins of FALLBACK."""
    import numpy as np
    npname, esz = _NP[dtype]
    count = 1
    for d in shape:
        count *= d
    if framework == "numpy":
        return np.frombuffer(buf, dtype=npname, count=count,
                             offset=offset).reshape(shape)
    import torch
    dt = _torch_dtype(torch, dtype)
    if count == 0:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(buf, dtype=dt, count=count,
                            offset=offset).reshape(shape)


def _view(framework, buf, at, ti):
    return tensor_view(buf, at, ti.dtype, ti.shape, framework)


# Tensors closer than this in one file are read as one range.
_MERGE_GAP = 1 << 20


def _runs(client, names):
    """Runs of tensors to read together: (file, start, end, [infos])."""
    by_file = {}
    for n in names:
        ti = client.tensors[n]
        by_file.setdefault(ti.file, []).append(ti)
    runs = []
    for f, tis in by_file.items():
        tis.sort(key=lambda t: t.off)
        cur = None
        for t in tis:
            if cur and t.off <= cur[2] + _MERGE_GAP:
                cur[2] = max(cur[2], t.off + t.len)
                cur[3].append(t)
            else:
                cur = [f, t.off, t.off + t.len, [t]]
                runs.append(cur)
    return runs


def _check_framework(framework):
    if framework not in ("numpy", "torch"):
        raise ValueError("framework must be 'numpy' or 'torch', not %r"
                         % (framework,))


def load_model(seed, name, framework="numpy", tensors=None, device="cpu",
               **kw):
    """Every tensor of model @name (or only those named in @tensors) as a
    dict name -> array/tensor.  The bytes land in one buffer per run of
    neighbouring tensors, in one batch of reads, and every tensor is a
    view over its buffer (no copy).  device="cuda" or "cuda:N"
    (framework "torch"): into one buffer in that GPU's memory.  Keywords
    go to Client: trust_key="FILE" (the manifest must be signed by a key
    in it), require_signed=True (refuse to open without a trust key),
    token_file, tls_ca, tls_pin, protocol, timeout, ..."""
    import numpy as np
    framework = _FRAMEWORKS.get(framework, framework)
    _check_framework(framework)
    dev = _device(device, framework)
    with Client(seed, name, **kw) as c:
        names = list(c.tensors) if tensors is None else list(tensors)
        for n in names:
            if n not in c.tensors:
                raise KeyError("%s has no tensor %s" % (name, n))
        if dev is not None:
            tis = [c.tensors[n] for n in names]
            return dict(zip(names, _device_load(c, tis, dev)))
        runs = _runs(c, names)
        total = sum(r[2] - r[1] for r in runs)
        buf = np.empty(max(total, 1), dtype=np.uint8)
        reads, at, out = [], 0, {}
        for f, start, end, tis in runs:
            reads.append((f, start, end - start, at))
            for t in tis:
                out[t.name] = (at + t.off - start, t)
            at += end - start
        c.read_into(buf, reads)
    return {n: _view(framework, buf, a, t) for n, (a, t) in out.items()}


class _Slice:
    """safe_open(...).get_slice(name): index it to read only those rows."""

    def __init__(self, f, ti):
        self._f, self._t = f, ti

    def get_shape(self):
        return list(self._t.shape)

    def get_dtype(self):
        return self._t.dtype

    def __getitem__(self, idx):
        """Rows @idx[0] (an int or a slice of step 1) are read, and only
        they (plus at most two checksum blocks at the ends, through the
        cache); the rest of @idx is applied to those rows in memory.

        What a tensor-parallel rank pulls: for a row-split tensor of R
        rows of B bytes, rank k of 4 reads rows [kR/4, (k+1)R/4), R*B/4
        bytes, and pulls those, the checksum blocks its two ends cut
        into (1 MiB each) whole instead of in part: at most R*B/4 plus
        2 MiB.  Measured (tests/tools/loadtest.py, a 4096 x 1024 F32
        tensor of 16 MiB, a client per rank): each rank read 4 MiB and
        pulled 5.0, 5.0, 5.0 and 4.0 MiB; a whole-model load pulls
        each byte once."""
        t = self._t
        if not isinstance(idx, tuple):
            idx = (idx,)
        if not t.shape:
            if idx not in ((), (Ellipsis,)):
                raise IndexError("a 0-d tensor takes no index")
            return self._f.get_tensor(t.name)
        first, rest = idx[0], idx[1:]
        rows = t.shape[0]
        if isinstance(first, int):
            k = first + rows if first < 0 else first
            if not 0 <= k < rows:
                raise IndexError("row %d of %d" % (first, rows))
            a, b, squeeze = k, k + 1, True
        elif isinstance(first, slice):
            a, b, step = first.indices(rows)
            if step != 1:
                raise IndexError("get_slice takes rows with step 1")
            b = max(a, b)
            squeeze = False
        elif first is Ellipsis:
            a, b, squeeze, rest = 0, rows, False, idx
        else:
            raise IndexError("unsupported index %r" % (first,))
        rowbytes = t.len // rows if rows else 0
        sub = TensorInfo.__new__(TensorInfo)
        sub.name, sub.dtype, sub.file = t.name, t.dtype, t.file
        sub.shape = (b - a,) + tuple(t.shape[1:])
        sub.off, sub.len, sub.layout = t.off + a * rowbytes, (b - a) * \
            rowbytes, t.layout
        v = self._f._read([sub])[0]
        if squeeze:
            return v[0][rest] if rest else v[0]
        return v[(slice(None),) + rest] if rest else v


def _unescape(field):
    """A /proc/self/mountinfo path field: octal escapes decoded."""
    out, k = [], 0
    while k < len(field):
        if field[k] == "\\" and k + 3 < len(field) and \
                field[k + 1:k + 4].isdigit():
            out.append(chr(int(field[k + 1:k + 4], 8)))
            k += 4
        else:
            out.append(field[k])
            k += 1
    return "".join(out)


def _seedfs_root(p):
    """The seedfs mount (fstype fuse.seedfs) that the real path @p is on:
    (its mount point, the uid that mounted it), or None: the longest
    mount point over @p must be one, and @p must be on its device.  The
    uid is the kernel's record (FUSE's user_id, which fusermount sets to
    whoever mounts; a user cannot choose another)."""
    best, fstype, opts = None, None, ""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) < 5 or not right:
                continue
            mp = _unescape(fields[4])
            if (p == mp or p.startswith(mp.rstrip("/") + "/")) and \
                    (best is None or len(mp) >= len(best)):
                r = right.split()
                best, fstype = mp, r[0]
                opts = r[2] if len(r) > 2 else ""
    if best is None or fstype != "fuse.seedfs":
        return None
    if os.stat(p).st_dev != os.stat(best).st_dev:
        return None
    uid = None
    for o in opts.split(","):
        if o.startswith("user_id=") and o[8:].isdigit():
            uid = int(o[8:])
    return best, uid


# Bounds of the question to a mount's daemon (replica/mctl.h).
_ASK_TIMEOUT = 5.0
_ASK_MAX = 1 << 20


def _answered(buf):
    """Whether @buf holds a whole answer: it ends in a "done" or "error"
    line."""
    if not buf.endswith(b"\n"):
        return False
    last = buf[:-1].rsplit(b"\n", 1)[-1]
    return last.startswith((b"done ", b"error "))


def _ask_daemon(path, root, sock):
    """The .seedfs/status of the mount at @root, from its daemon: the
    process answering the control socket @sock must be root's or this
    user's (SO_PEERCRED) and must serve the mount at @root (its device).
    PermissionError in one line when it is not; ValueError when it
    cannot be asked."""
    import socket
    import struct
    me = os.geteuid()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(_ASK_TIMEOUT)
        try:
            s.connect(sock)
        except OSError as e:
            raise ValueError("%s: cannot ask the daemon of the seedfs mount "
                             "at %s (control socket %s): %s" % (
                                 path, root, sock, e.strerror or e)) \
                from None
        pid, uid, _ = struct.unpack("iII", s.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("iII")))
        if uid not in (0, me):
            raise PermissionError(
                "%s: the control socket %s of the seedfs mount at %s is "
                "answered by uid %d (pid %d), not by root or this user "
                "(uid %d): not trusted, nothing sent to the seeds it names"
                % (path, sock, root, uid, pid, me))
        s.sendall(b"identify\n")
        buf = b""
        while not _answered(buf):
            chunk = s.recv(65536)
            if not chunk or len(buf) + len(chunk) > _ASK_MAX:
                raise ValueError("%s: the daemon of the seedfs mount at %s "
                                 "(pid %d) gave no whole answer" % (
                                     path, root, pid))
            buf += chunk
    except socket.timeout:
        raise ValueError("%s: the daemon of the seedfs mount at %s gave no "
                         "answer in %.0f s" % (path, root, _ASK_TIMEOUT)) \
            from None
    finally:
        s.close()
    lines = buf.decode(errors="replace").split("\n")[:-1]
    if lines[-1].startswith("error "):
        raise ValueError("%s: the daemon of the seedfs mount at %s (pid %d) "
                         "says: %s" % (path, root, pid, lines[-1][6:]))
    st = os.stat(root)
    want = "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
    got = lines[0][len("mount "):] if lines[0].startswith("mount ") else "?"
    if got != want:
        raise PermissionError(
            "%s: the daemon answering %s (pid %d) serves the mount of "
            "device %s, not the seedfs mount at %s (device %s): not "
            "trusted, nothing sent to the seeds it names"
            % (path, sock, pid, got, root, want))
    return "\n".join(ln[len("status "):] for ln in lines[1:-1]
                     if ln.startswith("status "))


def _security(line):
    """The mount's control_security text (control/control.c's
    sfs_control_cred_describe) as Client's token_file, tls_ca and
    tls_pin, and whether it uses TLS; None when it does not read back
    to exactly that text (a path with "; " or ", " in it)."""
    auth, sep, tls = line.partition("; ")
    if not sep:
        return None
    kw, https = {}, False
    if auth.startswith("token "):
        kw["token_file"] = auth[len("token "):]
    elif auth != "no token":
        return None
    if tls == "no tls":
        pass
    elif tls == "tls, the system's CAs":
        https = True
    elif tls.startswith("tls"):
        https = True
        rest = tls[len("tls"):]
        if rest.startswith(", ca "):
            ca, _, pin = rest[len(", ca "):].partition(", pin ")
            kw["tls_ca"] = ca
            if pin:
                kw["tls_pin"] = pin
        elif rest.startswith(", pin "):
            kw["tls_pin"] = rest[len(", pin "):]
        else:
            return None
    else:
        return None
    again = "%s; %s" % (
        "token " + kw["token_file"] if "token_file" in kw else "no token",
        "no tls" if not https else
        "tls, ca %s%s" % (kw["tls_ca"], ", pin " + kw["tls_pin"]
                          if "tls_pin" in kw else "")
        if "tls_ca" in kw else
        "tls, pin " + kw["tls_pin"] if "tls_pin" in kw else
        "tls, the system's CAs")
    return (kw, https) if again == line else None


_TRUST_PREFIX = "signed by a key in "
_TRUST_SUFFIX = ", every chunk checked with its SHA-256"


def _mount_of(path):
    """What the seedfs mount that @path is on says of itself: its seeds
    (with https:// when it uses TLS), the protocol, what Client needs of
    its token, TLS and trust settings, its model's generation, and the
    model and file path of @path.  None when @path is on no seedfs
    mount.

    Only a mount made by root or by this user is believed, and only
    what its daemon says over its control socket, once SO_PEERCRED shows
    that process is root's or this user's and it names the mount's
    device as the one it serves: anyone can mount a FUSE filesystem of
    type fuse.seedfs whose .seedfs/status names a token file this user
    can read and seeds of their own.  PermissionError in one line when
    either check fails (nothing is sent anywhere); ValueError when the
    daemon cannot be asked or the mount's security settings cannot all
    be carried over (then the drop-in refuses rather than check less
    than the mount)."""
    p = os.path.realpath(path)
    found = _seedfs_root(p)
    if found is None:
        return None
    root, owner = found
    me = os.geteuid()
    if owner not in (0, me):
        raise PermissionError(
            "%s: the seedfs mount at %s belongs to uid %s, not to root or "
            "this user (uid %d): not trusted, nothing sent to the seeds it "
            "names" % (path, root, "?" if owner is None else owner, me))
    rel = os.path.relpath(p, root).split(os.sep)
    if len(rel) < 2:
        return None
    sock = None
    with open(os.path.join(root, ".seedfs", "status")) as f:
        for line in f:
            if line.startswith("control: "):
                sock = line[len("control: "):].rstrip("\n")
    if sock is None:
        raise ValueError("%s: the seedfs mount at %s names no control "
                         "socket: its daemon cannot confirm it serves it"
                         % (path, root))
    status = _ask_daemon(path, root, sock)
    m = {"seeds": [], "model": rel[0], "path": "/".join(rel[1:]),
         "kw": {}}
    sec = None
    for line in status.splitlines():
        key, _, val = line.partition(": ")
        words = val.split()
        if key == "seed" and words:
            m["seeds"].append(words[0])
        elif key == "protocol" and words:
            m["kw"]["protocol"] = words[0]
        elif key == "control_security":
            sec = _security(val)
            if sec is None:
                raise ValueError("%s: the mount's control security (%s) "
                                 "cannot be carried over" % (path, val))
        elif key == "manifest_trust" and not val.startswith("none"):
            if not (val.startswith(_TRUST_PREFIX) and
                    val.endswith(_TRUST_SUFFIX)):
                raise ValueError("%s: the mount's manifest trust (%s) "
                                 "cannot be carried over" % (path, val))
            m["kw"]["trust_key"] = val[len(_TRUST_PREFIX):
                                       -len(_TRUST_SUFFIX)]
            m["kw"]["require_signed"] = True
        elif key == "model" and len(words) >= 3 and words[0] == rel[0] \
                and words[1] == "generation":
            m["generation"] = words[2]
    if sec is None or not m["seeds"]:
        return None
    m["kw"].update(sec[0])
    if sec[1]:
        m["seeds"] = ["https://" + a for a in m["seeds"]]
    return m


_FRAMEWORKS = {"numpy": "numpy", "np": "numpy", "torch": "torch",
               "pt": "torch"}


class safe_open:
    """Like safetensors.safe_open: keys(), get_tensor(name),
    get_slice(name)[rows], metadata().

    safe_open(seed, name, framework): every tensor of model @name, as
    its seeds publish it.

    safe_open(path, framework="pt"): a drop-in for safetensors'
    safe_open on a file of a seedfs mount: that file's tensors (keys()
    sorted, metadata() the file's own), read with one-sided reads from
    the mount's seeds into this process's memory instead of through
    FUSE, with the mount's token, TLS and trust settings.  Only a mount
    made by root or by this user is used, and only once its daemon has
    confirmed over its control socket that it serves that mount (else
    PermissionError, and nothing is sent: _mount_of).  Where safetensors
    refuses a dtype this numpy or torch lacks, this gives the same bits
    in a type of the same width (FALLBACK).

    Keywords go to Client: token_file, tls_ca, tls_pin, trust_key,
    require_signed=True (refuse to open without a trust key) and the
    rest."""

    def __init__(self, seed, name=None, framework="numpy", device="cpu",
                 **kw):
        self._file = None
        if os.path.exists(seed):
            # safetensors' safe_open(filename, framework, device="cpu")
            if name is not None:
                if framework != "numpy":  # (path, framework, device)
                    if device != "cpu":
                        raise TypeError("safe_open: device given twice")
                    device = framework
                framework, name = name, None
            if framework not in _FRAMEWORKS:
                raise ValueError("framework %r is invalid" % (framework,))
            m = _mount_of(seed)
            if m is None:
                raise ValueError("%s: not a file of a seedfs mount (no "
                                 "fuse.seedfs mount, or its status names "
                                 "no seed)" % seed)
            for k, v in m["kw"].items():
                # What the caller leaves unset (None) is the mount's: a
                # drop-in never checks less than the mount does.
                if kw.get(k) is None or (k == "require_signed" and v):
                    kw[k] = v
            self._path = seed
            seed, name, self._file = ",".join(m["seeds"]), m["model"], m
        elif name is None:
            raise FileNotFoundError("No such file or directory: %s" % seed)
        framework = _FRAMEWORKS.get(framework, framework)
        _check_framework(framework)
        self._dev = _device(device, framework)
        self._fw = framework
        self._c = Client(seed, name, **kw)
        self._tis = self._c.tensors
        if self._file is not None:
            try:
                self._tis = self._file_tensors()
            except BaseException:
                self._c.close()
                raise

    def _file_tensors(self):
        """The drop-in's file: its tensors, by name (a tensor of the
        same name in another file is that file's)."""
        m = self._file
        if "generation" in m and m["generation"] != str(self._c.generation):
            raise ValueError("%s: the mount shows generation %s, its seeds "
                             "serve %s: open it again" % (
                                 self._path, m["generation"],
                                 self._c.generation))
        idx = [i for i, (p, _) in enumerate(self._c.files)
               if p == m["path"]]
        if not idx:
            raise FileNotFoundError("%s: model %s publishes no file %s"
                                    % (self._path, m["model"], m["path"]))
        return {t.name: t for t in sorted(
            (t for t in self._c.tensor_list if t.file == idx[0]),
            key=lambda t: t.name)}

    def _read(self, tis):
        import numpy as np
        if self._dev is not None:
            return _device_load(self._c, tis, self._dev)
        total = sum(t.len for t in tis)
        buf = np.empty(max(total, 1), dtype=np.uint8)
        reads, at, where = [], 0, []
        for t in tis:
            if t.len:
                reads.append((t.file, t.off, t.len, at))
            where.append(at)
            at += t.len
        self._c.read_into(buf, reads)
        return [_view(self._fw, buf, a, t) for a, t in zip(where, tis)]

    def keys(self):
        return list(self._tis)

    def metadata(self):
        """The file's __metadata__ (a drop-in; None when it has none),
        else the model's name and generation."""
        if self._file is None:
            return {"model": self._c.model,
                    "generation": str(self._c.generation)}
        import json
        import struct
        with open(self._path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            if n > 100000000:  # safetensors' own limit
                raise ValueError("%s: a header of %d bytes" % (self._path,
                                                                n))
            h = json.loads(f.read(n))
        if not isinstance(h, dict):
            raise ValueError("%s: the header is not an object" % self._path)
        return h.get("__metadata__")

    def get_tensor(self, name):
        return self._read([self._tis[name]])[0]

    def get_slice(self, name):
        return _Slice(self, self._tis[name])

    @property
    def client(self):
        return self._c

    def close(self):
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
