#!/usr/bin/env bash
# The GPU-memory path, built for real: configure a -DSEEDFS_CUDA=ON build
# of the transports and run its unit test (no GPU here: it checks the
# error paths).  Skipped (77) where no cuda.h is installed.
#   cuda_build.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$1
OUT=$2/cuda
if [ ! -e /usr/local/cuda/include/cuda.h ] && [ ! -e /usr/include/cuda.h ]; then
	echo "no cuda.h on this host: the CUDA build is skipped"
	exit 77
fi
cmake -S "$SRC" -B "$OUT" -DSEEDFS_CUDA=ON >/dev/null
cmake --build "$OUT" --target test_hmem -j "$(nproc)" >/dev/null
"$OUT/tests/test_hmem"
