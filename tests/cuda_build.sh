#!/usr/bin/env bash
# The GPU-memory path, built for real: configure a -DSEEDFS_CUDA=ON build
# of the transports and run its unit test (no GPU here: it checks the
# error paths).  The CUDA toolkit is at /usr/local/cuda here and on CI
# (not from packaging/deps.sh): a missing cuda.h is a failure, not a skip.
#   cuda_build.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1
OUT=$2/cuda
if [ ! -e /usr/local/cuda/include/cuda.h ] && [ ! -e /usr/include/cuda.h ]; then
	echo "FAIL: no cuda.h (/usr/local/cuda/include or /usr/include): the CUDA toolkit is expected at /usr/local/cuda" >&2
	exit 1
fi
cmake -S "$SRC" -B "$OUT" -DSEEDFS_CUDA=ON >"$OUT.configure.log" 2>&1 ||
	{ echo "FAIL: configure -DSEEDFS_CUDA=ON:" >&2; tail -n 30 "$OUT.configure.log" >&2; exit 1; }
cmake --build "$OUT" --target test_hmem -j "$(nproc)" >"$OUT.build.log" 2>&1 ||
	{ echo "FAIL: build test_hmem with CUDA:" >&2; tail -n 30 "$OUT.build.log" >&2; exit 1; }
grep -q '^SEEDFS_CUDA:BOOL=ON' "$OUT/CMakeCache.txt" || { echo "FAIL: SEEDFS_CUDA is not ON in $OUT" >&2; exit 1; }
"$OUT/tests/test_hmem"
