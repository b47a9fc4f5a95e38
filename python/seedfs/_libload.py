# SPDX-License-Identifier: MIT
"""Find and load libseedfs.so once: $SEEDFS_LIB, else next to this
package (../../build/), else the system's loader."""
import ctypes
import os

_lib = None


def lib():
    global _lib
    if _lib is not None:
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("SEEDFS_LIB"),
                 os.path.join(here, "..", "..", "build", "libseedfs.so"),
                 "libseedfs.so.0"):
        if not path:
            continue
        try:
            _lib = ctypes.CDLL(path)
            return _lib
        except OSError:
            continue
    raise OSError("libseedfs.so not found: set SEEDFS_LIB or build it")


class Closing:
    """with-statement and garbage collection both end in close()."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
