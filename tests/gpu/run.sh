#!/usr/bin/env bash
# run.sh - seedfs's GPU path on a machine that has a GPU, unattended, in
# under five minutes.  It seeds a generated model over tcp on loopback
# and reads it into GPU memory with the engine API (gpuread: every file,
# every tensor, bad reads; each byte copied back and compared with the
# file) and with the Python loader (seedfs.load_model and safe_open,
# device="cuda"), each tensor, copied back, compared with torch's own
# load of the same file (safetensors.torch.load_file on the CPU).
#
# Run it from a -DSEEDFS_CUDA=ON build tree, or a copy of one (make
# test builds one in build/cuda; copy that directory to the GPU host):
#
#   build/cuda/gpu/run.sh [--size BYTES]      (default 256M)
#
# Needs: the NVIDIA driver (libcuda.so.1) and a GPU; a python3 with
# torch (built with CUDA) and safetensors ($PYTHON names another, e.g.
# a venv's; words, so that it may name a launcher too).
# $GPU_RUN_DEVICE: the device to read into (default cuda:0).  make test
# runs this script from a copy of the build tree with the build and
# source trees hidden, under the MOCK driver, with PYTHON naming
# tests/tools/fakecuda_torch.py (torch's CUDA half stood in for).
# Exit 0: every byte and tensor equal.  1: the first difference or
# failure, in one line starting "run.sh: FAIL".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$HERE/.." && pwd)
SIZE=256M
[ "${1:-}" = --size ] && SIZE=$2
DEVICE=${GPU_RUN_DEVICE:-cuda:0}
PY=${PYTHON:-python3}
START=$(date +%s)
fail() {
	echo "run.sh: FAIL: $*" >&2
	exit 1
}
say() { echo "run.sh: $*"; }
# step SECONDS CMD...: run with a bound, so that nothing waits forever.
step() {
	local s=$1
	shift
	timeout --kill-after=5 "$s" "$@"
}

for f in seedfs libseedfs.so tests/gpuread tests/genmodel gpu/compare.py \
	python/seedfs/__init__.py; do
	[ -e "$BUILD/$f" ] || fail "$BUILD/$f is missing: run this from a -DSEEDFS_CUDA=ON build tree (build/cuda)"
done
export SEEDFS_LIB=$BUILD/libseedfs.so PYTHONPATH=$BUILD/python

WORK=$(mktemp -d "${TMPDIR:-/tmp}/seedfs-gpu.XXXXXX")
SEED_PID=
cleanup() {
	[ -z "$SEED_PID" ] || { kill "$SEED_PID" && wait "$SEED_PID"; } 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

# 1. The driver and a device, as libseedfs sees them.
st=0
step 30 "$BUILD/tests/gpuread" devices >"$WORK/out" 2>&1 || st=$?
[ $st = 0 ] || fail "libseedfs sees no GPU: $(cat "$WORK/out")"
say "$(cat "$WORK/out")"

# 2. Python with torch and safetensors, and the device.
step 60 $PY - "$DEVICE" >"$WORK/out" 2>&1 <<'EOF' || fail "python: $(tail -n 1 "$WORK/out")"
import sys
import safetensors, torch
dev = sys.argv[1]
if dev.startswith("cuda") and not torch.cuda.is_available():
    sys.exit("torch %s sees no CUDA device (torch.cuda.is_available() is False): "
             "PYTHON= a python whose torch has CUDA" % torch.__version__)
print("python %s, torch %s, safetensors %s, device %s%s" % (
    sys.version.split()[0], torch.__version__, safetensors.__version__, dev,
    " (%s)" % torch.cuda.get_device_name(torch.device(dev))
    if dev.startswith("cuda") else ""))
EOF
say "$(cat "$WORK/out")"

# 3. A model, and a seed of it on loopback.
step 120 "$BUILD/tests/genmodel" "$WORK/m" --size "$SIZE" --shards 4 >/dev/null ||
	fail "genmodel $SIZE"
"$BUILD/seedfs" seed --model-dir "$WORK/m" --listen 127.0.0.1:0 --protocol tcp \
	>"$WORK/seed.out" 2>"$WORK/seed.err" &
SEED_PID=$!
for _ in $(seq 600); do
	grep -q '^seedfs seed: ready on ' "$WORK/seed.out" && break
	kill -0 "$SEED_PID" 2>/dev/null || fail "the seed exited: $(tail -n 3 "$WORK/seed.err")"
	sleep 0.1
done
PORT=$(sed -n 's/^seedfs seed: ready on [^ ]*:\([0-9]*\): .*/\1/p' "$WORK/seed.out" | head -n 1)
[ -n "$PORT" ] || fail "the seed did not say it was ready in 60 s"
SEED=127.0.0.1:$PORT
say "seed of $(du -sh "$WORK/m" | cut -f1) at $SEED, pid $SEED_PID"

# 4. The engine API into device memory, byte-exact after a copy back.
for mode in files tensors errors; do
	step 120 "$BUILD/tests/gpuread" "$SEED" m "$WORK/m" $mode >"$WORK/out" 2>&1 ||
		fail "gpuread $mode: $(tail -n 2 "$WORK/out")"
	while read -r l; do say "$l"; done <"$WORK/out"
done

# 5. The Python loader, device="cuda", against torch's own load.
step 180 $PY "$HERE/compare.py" "$SEED" m "$WORK/m" "$DEVICE" >"$WORK/out" 2>&1 ||
	fail "compare: $(tail -n 3 "$WORK/out")"
while read -r l; do say "$l"; done <"$WORK/out"

s=$(($(date +%s) - START))
[ $s -le 300 ] || fail "took $s s, more than 5 minutes"
say "ok: every byte and tensor equal, in $s s"
