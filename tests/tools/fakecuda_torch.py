# SPDX-License-Identifier: MIT
"""fakecuda_torch.py - run a Python script whose CUDA tensors live in the
MOCK driver's device memory (tests/tools/fakecuda.c, as libcuda.so.1 on
LD_LIBRARY_PATH): the torch here is Debian's, built without CUDA.

    python3 fakecuda_torch.py SCRIPT|- [ARGS...]

Only torch's CUDA half is stood in for, and only what seedfs's device
path and tests/gpu/compare.py use: torch.cuda.is_available,
current_stream().synchronize, synchronize and get_device_name, and
torch.empty(..., device="cuda[:N]"), which allocates with the mock's
cuMemAlloc and gives a DeviceTensor: data_ptr, numel, 1-d slices,
view(dtype), reshape, .device/.dtype/.shape, and cpu() (the bytes
copied back with cuMemcpyDtoH).  Host access to that memory faults, as
on a GPU: the bytes get there only through the driver's copies, which
libseedfs (the same libcuda.so.1) makes.  seedfs's own code and
safetensors run unchanged.  At exit it prints the mock's counts:
"fakecuda: BYTES bytes in COPIES copies host to device, ...".
"""
import atexit
import ctypes
import runpy
import sys

import torch

_cu = ctypes.CDLL("libcuda.so.1")
_ptr = ctypes.c_ulonglong


def _check(rc, what):
    if rc:
        raise RuntimeError("fakecuda_torch: %s: CUDA error %d" % (what, rc))


def _setup():
    if not hasattr(_cu, "fakecuda_stats"):
        sys.exit("fakecuda_torch: libcuda.so.1 is not the MOCK driver")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    _check(_cu.cuInit(0), "cuInit")
    _check(_cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    _check(_cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
           "cuDevicePrimaryCtxRetain")
    _check(_cu.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")


class _Alloc:
    """One cuMemAlloc, freed when no tensor views it."""

    def __init__(self, nbytes):
        self.ptr = _ptr()
        self.nbytes = max(nbytes, 1)
        _check(_cu.cuMemAlloc_v2(ctypes.byref(self.ptr),
                                 ctypes.c_size_t(self.nbytes)), "cuMemAlloc")
        # Not zero: a read that leaves bytes unwritten shows.
        _check(_cu.cuMemsetD8_v2(self.ptr, ctypes.c_ubyte(0xa5),
                                 ctypes.c_size_t(self.nbytes)), "cuMemsetD8")

    def __del__(self):
        _cu.cuMemFree_v2(self.ptr)


def _esize(dtype):
    return torch.empty((), dtype=dtype).element_size()


class DeviceTensor:
    """A dense tensor in the mock's device memory."""

    def __init__(self, alloc, off, dtype, shape, device):
        self._a, self._off = alloc, off
        self.dtype, self.shape, self.device = dtype, torch.Size(shape), device

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return _esize(self.dtype)

    def dim(self):
        return len(self.shape)

    def data_ptr(self):
        return self._a.ptr.value + self._off

    def __getitem__(self, idx):
        if self.dim() != 1 or not isinstance(idx, slice):
            raise TypeError("fakecuda_torch: only 1-d slices")
        a, b, step = idx.indices(self.shape[0])
        if step != 1:
            raise TypeError("fakecuda_torch: only slices of step 1")
        b = max(a, b)
        return DeviceTensor(self._a, self._off + a * self.element_size(),
                            self.dtype, (b - a,), self.device)

    def view(self, dtype):
        if self.dim() != 1:
            raise TypeError("fakecuda_torch: view of a 1-d tensor only")
        nbytes = self.numel() * self.element_size()
        if nbytes % _esize(dtype):
            raise ValueError("fakecuda_torch: %d bytes as %s" % (nbytes,
                                                                   dtype))
        return DeviceTensor(self._a, self._off, dtype,
                            (nbytes // _esize(dtype),), self.device)

    def reshape(self, shape):
        t = DeviceTensor(self._a, self._off, self.dtype, shape, self.device)
        if t.numel() != self.numel():
            raise ValueError("fakecuda_torch: reshape %s to %s" % (
                tuple(self.shape), tuple(shape)))
        return t

    def cpu(self):
        nbytes = self.numel() * self.element_size()
        host = bytearray(max(nbytes, 1))
        if nbytes:
            buf = (ctypes.c_char * len(host)).from_buffer(host)
            _check(_cu.cuMemcpyDtoH_v2(buf, _ptr(self.data_ptr()),
                                       ctypes.c_size_t(nbytes)),
                   "cuMemcpyDtoH")
        flat = torch.frombuffer(host, dtype=torch.uint8)[:nbytes]
        return flat.view(self.dtype).reshape(self.shape).clone()


class _Stream:
    def synchronize(self):
        pass


def _install():
    real_empty = torch.empty

    def empty(*size, dtype=None, device=None, **kw):
        dev = torch.device(device) if device is not None else None
        if dev is None or dev.type != "cuda":
            return real_empty(*size, dtype=dtype, device=device, **kw)
        if dev.index is None:
            dev = torch.device("cuda", 0)
        shape = tuple(size[0]) if len(size) == 1 and \
            not isinstance(size[0], int) else size
        dtype = dtype or torch.float32
        n = 1
        for d in shape:
            n *= d
        return DeviceTensor(_Alloc(n * _esize(dtype)), 0, dtype, shape, dev)

    torch.empty = empty
    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: 1
    torch.cuda.current_stream = lambda device=None: _Stream()
    torch.cuda.synchronize = lambda device=None: None
    torch.cuda.get_device_name = lambda device=None: "MOCK (fakecuda)"


def _stats():
    v = [ctypes.c_uint64() for _ in range(4)] + \
        [ctypes.c_int() for _ in range(2)]
    _cu.fakecuda_stats(*[ctypes.byref(x) for x in v])
    print("fakecuda: %d bytes in %d copies host to device, %d from pageable "
          "memory" % (v[0].value, v[1].value, v[2].value))
    sys.stdout.flush()


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: fakecuda_torch.py SCRIPT|- [ARGS...]")
    _setup()
    _install()
    atexit.register(_stats)
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    if script == "-":
        code = compile(sys.stdin.read(), "<stdin>", "exec")
        exec(code, {"__name__": "__main__"})
    else:
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
