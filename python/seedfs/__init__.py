# SPDX-License-Identifier: MIT
"""libseedfs from Python (ctypes; no build step): publish numpy arrays
(Publisher), and load published tensors straight into memory
(load_model, safe_open, Client: see seedfs.client).

    import numpy as np, seedfs
    pub = seedfs.Publisher("tiny", listen="0.0.0.0:7070",
                           token_file="/etc/seedfs/token")
    pub.add_file("config.json", b'{"torch_dtype": "float32"}')
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    pub.add_tensor("model.w", w)
    gen = pub.commit()          # replicas: seedfs mount --seed HOST:7070 /models
    w *= 2                      # update in place ...
    gen = pub.commit()          # ... and publish the next generation
    pub.close()

The arrays are not copied: the publisher keeps a reference to each and
replicas read their memory directly, so an array must stay alive and
C-contiguous while published (the Publisher holds it). libseedfs.so is
found through $SEEDFS_LIB, else next to this package (../build/), else
by the system's loader.
"""
import ctypes

from . import _libload

__all__ = ["Publisher", "SeedfsError", "Client", "load_model", "safe_open",
           "tensor_view", "FALLBACK", "cuda_devices"]

# numpy dtype -> safetensors dtype
_DTYPES = {"float64": "F64", "float32": "F32", "float16": "F16",
           "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8",
           "uint64": "U64", "uint32": "U32", "uint16": "U16", "uint8": "U8",
           "bool": "BOOL"}


class SeedfsError(RuntimeError):
    """A libseedfs call failed; the message is its one-line reason."""

    def __init__(self, call, rc, msg):
        super().__init__("%s: %s (errno %d)" % (call, msg, -rc))
        self.errno = -rc


class _Cfg(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("listen", ctypes.c_char_p),
                ("protocol", ctypes.c_char_p), ("identity", ctypes.c_char_p),
                ("grace_s", ctypes.c_uint), ("shard_max", ctypes.c_uint64),
                ("log_level", ctypes.c_char_p),
                ("token_file", ctypes.c_char_p),
                ("tls_cert", ctypes.c_char_p), ("tls_key", ctypes.c_char_p)]


def _load():
    lib = _libload.lib()
    vp, u64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)
    sig = {
        "sfs_pub_new": [ctypes.POINTER(_Cfg), ctypes.POINTER(vp),
                        ctypes.c_char_p, ctypes.c_size_t],
        "sfs_pub_add_tensor": [vp, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_uint32, u64p, vp, ctypes.c_uint64,
                               ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_size_t],
        "sfs_pub_add_file": [vp, ctypes.c_char_p, ctypes.c_char_p,
                             ctypes.c_size_t, ctypes.c_char_p,
                             ctypes.c_size_t],
        "sfs_pub_commit": [vp, u64p, ctypes.c_char_p, ctypes.c_size_t],
        "sfs_pub_port": [vp],
        "sfs_pub_free": [vp],
    }
    for name, args in sig.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = ctypes.c_int
    lib.sfs_pub_port.restype = ctypes.c_uint
    lib.sfs_pub_free.restype = None
    return lib


_lib = None


class Publisher(_libload.Closing):
    """A seed serving tensors from this process's memory."""

    def __init__(self, name, listen=None, protocol=None, identity=None,
                 grace=0, shard_max=0, log_level=None, token_file=None,
                 tls_cert=None, tls_key=None):
        global _lib
        if _lib is None:
            _lib = _load()
        if isinstance(identity, dict):
            identity = ",".join("%s=%s" % kv for kv in identity.items())
        enc = (lambda s: s.encode() if s is not None else None)
        self._cfg = _Cfg(enc(name), enc(listen), enc(protocol),
                         enc(identity), grace, shard_max, enc(log_level),
                         enc(token_file), enc(tls_cert), enc(tls_key))
        self._p = ctypes.c_void_p()
        self._keep = {}
        self._call("sfs_pub_new", ctypes.byref(self._cfg),
                   ctypes.byref(self._p))

    def _call(self, name, *args):
        err = ctypes.create_string_buffer(512)
        rc = getattr(_lib, name)(*args, err, len(err))
        if rc:
            raise SeedfsError(name, rc, err.value.decode(errors="replace"))

    def add_tensor(self, name, array, layout=None):
        """Stage @array (C-contiguous numpy array, not copied)."""
        dt = _DTYPES.get(array.dtype.name)
        if dt is None:
            raise ValueError("dtype %s has no safetensors name" % array.dtype)
        if not array.flags["C_CONTIGUOUS"]:
            raise ValueError("%s: the array must be C-contiguous" % name)
        shape = (ctypes.c_uint64 * max(array.ndim, 1))(*array.shape)
        self._call("sfs_pub_add_tensor", self._p, name.encode(), dt.encode(),
                   array.ndim, shape,
                   ctypes.c_void_p(array.ctypes.data), array.nbytes,
                   layout.encode() if layout else None)
        self._keep[name] = array

    def add_file(self, path, data):
        """Stage a small file (bytes or str; copied)."""
        if isinstance(data, str):
            data = data.encode()
        self._call("sfs_pub_add_file", self._p, path.encode(), data,
                   len(data))

    def commit(self):
        """Publish what is staged as the next generation; its number."""
        gen = ctypes.c_uint64()
        self._call("sfs_pub_commit", self._p, ctypes.byref(gen))
        return gen.value

    @property
    def port(self):
        """The control port, once committed."""
        return _lib.sfs_pub_port(self._p)

    def close(self):
        if self._p:
            _lib.sfs_pub_free(self._p)
            self._p = ctypes.c_void_p()
            self._keep.clear()


from .client import (Client, load_model, safe_open, tensor_view,  # noqa: E402
                     FALLBACK, cuda_devices)
