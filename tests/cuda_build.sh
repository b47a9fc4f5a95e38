#!/usr/bin/env bash
# The GPU path, built for real: a -DSEEDFS_CUDA=ON build with this
# machine's CUDA toolkit (cuda.h; the driver is opened at
# run time), and in it unit_hmem (the transports' errors without a GPU)
# and gpu (tests/integration/gpu.sh: no driver, no device, then reads
# into device memory through a MOCK driver, and tests/gpu/run.sh from a
# copy of the build tree).  The toolkit is at /usr/local/cuda here and
# on CI (not from packaging/deps.sh): a missing cuda.h is a failure, not
# a skip.  The tree stays in BUILD_DIR/cuda: copy it to a GPU host and
# run its gpu/run.sh there.
# In an ASan+UBSan or a ThreadSanitizer build (BUILD_DIR's CMakeCache
# says which; make test-full runs this in both), the CUDA build is made
# with the same sanitizer, of what the two tests need only: the CUDA
# half of lib/gpu.c and transports/hmem.c then runs under it.
# With --build-only: the build alone, no test (tests/bgbuild.sh makes it
# in the background while make test's normal pass runs; the build holds
# BUILD_DIR/cuda.lock, so this test's build waits for that one and
# finds nothing left to do).
#   cuda_build.sh [--build-only] SOURCE_DIR BUILD_DIR
set -euo pipefail
ONLY=0
[ "${1:-}" != --build-only ] || { ONLY=1; shift; }
SRC=$1
OUT=$(cd "$2" && pwd)/cuda
if [ ! -e /usr/local/cuda/include/cuda.h ] && [ ! -e /usr/include/cuda.h ]; then
	echo "FAIL: no cuda.h (/usr/local/cuda/include or /usr/include): the CUDA toolkit is expected at /usr/local/cuda" >&2
	exit 1
fi
KIND=normal
FLAGS=()

if grep -q '^SEEDFS_SANITIZE:BOOL=ON' "$2/CMakeCache.txt"; then
	KIND=asan
	FLAGS=(-DCMAKE_BUILD_TYPE=Debug -DSEEDFS_SANITIZE=ON)
elif grep -q '^SEEDFS_TSAN:BOOL=ON' "$2/CMakeCache.txt"; then
	KIND=tsan
	FLAGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEEDFS_TSAN=ON)
fi
# What SEEDFS_CUDA changes and what links it: SEEDFS_WITH_CUDA is read
# by transports/hmem.c and unit/test_hmem.c only (every other file
# compiles the same either way), so the binaries that link them, not
# the whole tree (make test's 20 minutes).
TARGETS=(--target seedfs libseedfs genmodel gpuread fakecuda gpu_kit test_hmem)
exec 9>"$OUT.lock"
flock 9
cmake -S "$SRC" -B "$OUT" -DSEEDFS_CUDA=ON "${FLAGS[@]}" >"$OUT.configure.log" 2>&1 ||
	{ echo "FAIL: configure -DSEEDFS_CUDA=ON ${FLAGS[*]}:" >&2; tail -n 30 "$OUT.configure.log" >&2; exit 1; }
cmake --build "$OUT" -j "$(nproc)" "${TARGETS[@]}" >"$OUT.build.log" 2>&1 ||
	{ echo "FAIL: build with CUDA ($KIND):" >&2; tail -n 30 "$OUT.build.log" >&2; exit 1; }
flock -u 9
[ $ONLY = 0 ] || { echo "ok: -DSEEDFS_CUDA=ON ($KIND build) built in $OUT"; exit 0; }
grep -q '^SEEDFS_CUDA:BOOL=ON' "$OUT/CMakeCache.txt" || { echo "FAIL: SEEDFS_CUDA is not ON in $OUT" >&2; exit 1; }
# The sanitizer is in what the tests run.
case $KIND in
asan) want=libasan ;;
tsan) want=libtsan ;;
*) want= ;;
esac
for bin in "$OUT/libseedfs.so" "$OUT/tests/gpuread" "$OUT/tests/fakecuda/libcuda.so.1"; do
	if [ -n "$want" ]; then
		# (Not ldd | grep -q: grep's early exit fails the pipe.)
		[[ $(ldd "$bin") == *"$want"* ]] || { echo "FAIL: $bin is not built with $want" >&2; exit 1; }
	fi
done
# Built with CUDA for real: the driver calls are there.
for lib in "$OUT/libseedfs.so"; do
	strings "$lib" | grep -c '^cuMemcpyHtoDAsync_v2$' >/dev/null ||
		{ echo "FAIL: $lib does not call cuMemcpyHtoDAsync_v2" >&2; exit 1; }
done
cd "$OUT"
st=0
ctest -R '^(unit_hmem|gpu)$' -V >"$OUT.test.log" 2>&1 || st=$?
# (the bound lines too: docs/claims.md states gpu's under cuda_build)
grep -E '^[0-9]+: (ok|FAIL|bound:)' "$OUT.test.log" | sed 's/^[0-9]*: //' || true
grep -q '100% tests passed, 0 tests failed out of 2$' "$OUT.test.log" && [ $st = 0 ] ||
	{ echo "FAIL: the CUDA build's tests (status $st):" >&2; tail -n 40 "$OUT.test.log" >&2; exit 1; }
echo "ok: -DSEEDFS_CUDA=ON ($KIND build) built in $OUT, unit_hmem and gpu passed in it"
