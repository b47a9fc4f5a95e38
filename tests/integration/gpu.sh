#!/usr/bin/env bash
# Reads into CUDA device memory through the engine API (sfs_client_*)
# and the Python loader's device="cuda".  There is no GPU here:
# - in a build without CUDA, asking for one gives one clear line (C and
#   Python);
# - in a -DSEEDFS_CUDA=ON build (cuda_build runs this in it), without
#   a driver and with a driver but no device: one clear line each; then
#   against the MOCK driver tests/tools/fakecuda.c (device memory no host
#   access can touch, copies that run only when waited for): every file
#   and every tensor byte-exact on the "device" after a copy back, every
#   byte through a page-locked stage, bad reads refused without a byte
#   written, and a corrupt seed's block never copied.
source "$(dirname "$0")/lib.sh" "$1"
GPUREAD=$BUILD/tests/gpuread
PY=$(python_for_build)
export SEEDFS_LIB=$BUILD/libseedfs.so
PYTHONPATH=$(cd "$(dirname "$0")/../../python" && pwd)
export PYTHONPATH

# one_line FILE: FILE holds exactly one line
one_line() { [ "$(wc -l <"$1")" = 1 ]; }

if ! grep -q '^SEEDFS_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt"; then
	st=0
	"$GPUREAD" devices >/dev/null 2>"$WORK/err" || st=$?
	[ $st = 3 ] && one_line "$WORK/err" &&
		grep -q "built without CUDA support; build it with cmake -DSEEDFS_CUDA=ON" "$WORK/err" ||
		fail "no CUDA build: status $st: $(cat "$WORK/err")"
	ok "a build without CUDA: $(cat "$WORK/err")"
	# Python: the device is refused in one line, naming what is missing.
	MODEL=$WORK/m
	"$GENMODEL" "$MODEL" --size 4M --shards 1 >/dev/null
	start_seed "$MODEL" --protocol tcp
	$PY - "$HOST:$SEED_PORT" >"$WORK/py.out" 2>&1 <<'EOF' || fail "python: $(cat "$WORK/py.out")"
import sys, seedfs
seed = sys.argv[1]
try:
    seedfs.cuda_devices()
    sys.exit("cuda_devices() answered without CUDA")
except RuntimeError as e:
    assert "built without CUDA support" in str(e), e
    print("cuda_devices:", e)
for kw, want in ((dict(framework="numpy", device="cuda"), "framework='pt'"),
                 (dict(framework="torch", device="gpu"), "'cpu', 'cuda' or 'cuda:N'"),
                 (dict(framework="torch", device="cuda:0"), "")):
    try:
        seedfs.load_model(seed, "m", **kw)
        sys.exit("load_model(%s) answered" % kw)
    except (ValueError, RuntimeError) as e:
        msg = str(e)
        assert "\n" not in msg, msg
        if want:
            assert want in msg, msg
        else:
            # No GPU here: torch (Debian's, CPU only) says so first; with
            # a CUDA torch, libseedfs's build would.
            assert "sees no CUDA device" in msg or \
                "built without CUDA support" in msg, msg
        print("load_model(%s):" % ", ".join("%s=%s" % kv for kv in kw.items()), msg)
EOF
	while read -r l; do ok "python: $l"; done <"$WORK/py.out"
	sanitizers_clean
	exit 0
fi

FAKE=$BUILD/tests/fakecuda
[ -e "$FAKE/libcuda.so.1" ] || fail "no MOCK driver at $FAKE/libcuda.so.1"

# No driver at all (unless this host has a real one).
if ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
	st=0
	env -u LD_LIBRARY_PATH "$GPUREAD" devices >/dev/null 2>"$WORK/err" || st=$?
	[ $st = 3 ] && one_line "$WORK/err" &&
		grep -q "no CUDA driver (dlopen libcuda.so.1: " "$WORK/err" ||
		fail "no driver: status $st: $(cat "$WORK/err")"
	ok "no driver: $(cat "$WORK/err")"
fi
# A driver, no device.
st=0
FAKECUDA_DEVICES=0 LD_LIBRARY_PATH=$FAKE "$GPUREAD" devices >/dev/null 2>"$WORK/err" || st=$?
[ $st = 3 ] && one_line "$WORK/err" &&
	grep -q "no usable GPU (cuInit: no CUDA-capable device is detected (mock driver), CUDA error 100)" "$WORK/err" ||
	fail "no device: status $st: $(cat "$WORK/err")"
ok "MOCK driver, no device: $(cat "$WORK/err")"

export LD_LIBRARY_PATH=$FAKE
"$GPUREAD" devices >"$WORK/out" 2>&1 || fail "MOCK driver: $(cat "$WORK/out")"
grep -q "^gpuread: 1 CUDA devices$" "$WORK/out" || fail "MOCK driver: $(cat "$WORK/out")"
ok "MOCK driver: $(cat "$WORK/out")"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 48M --shards 3 >/dev/null
start_seed "$MODEL" --protocol tcp
for mode in files tensors errors; do
	"$GPUREAD" "$HOST:$SEED_PORT" m "$MODEL" $mode >"$WORK/out" 2>"$WORK/err" ||
		fail "$mode: $(cat "$WORK/out" "$WORK/err")"
	line=$(grep "^gpuread: $mode ok " "$WORK/out") || fail "$mode: $(cat "$WORK/out")"
	# Every byte went through the page-locked stage, asynchronously.
	[[ $line == *", 0 from pageable memory, "* ]] || fail "$mode: copies from pageable memory: $line"
	read -r moved bytes < <(sed -n 's/.* ok \([0-9]*\) bytes in .*mock: \([0-9]*\) bytes in .*/\1 \2/p' <<<"$line")
	[ "$mode" = errors ] || [ "$bytes" = "$moved" ] ||
		fail "$mode: $moved bytes read, $bytes copied to the device"
	{ grep -v '^gpuread: .* ok ' "$WORK/out" || true; } | while read -r l; do ok "$l"; done
	ok "$line"
done

# A corrupt seed: -EBADMSG, and the flipped block never reaches the
# device (gpuread checks every byte is the file's or what was there).
F=model-00002-of-00003.safetensors
SEED_LOG=seed2 start_seed "$MODEL" --protocol tcp --test-corrupt "$F:5000000"
"$GPUREAD" "$HOST:$SEED_PORT" m "$MODEL" corrupt "$F" 5000000 >"$WORK/out" 2>"$WORK/err" ||
	fail "corrupt: $(cat "$WORK/out" "$WORK/err")"
grep -q "$F bytes \[0, +[0-9]*): bytes do not match the seed's checksum" "$WORK/out" ||
	fail "corrupt: $(cat "$WORK/out")"
while read -r l; do ok "$l"; done <"$WORK/out"

# tests/gpu/run.sh, the script for a GPU host, from a copy of this build
# tree, under the MOCK driver: the engine API's part on the "device",
# the Python part on the CPU (torch has no CUDA here), all of it bounded
# by its five minutes.
mkdir -p "$WORK/copy"
cp -a "$BUILD/." "$WORK/copy/"
rm -rf "$WORK/copy/CMakeFiles" "$WORK/copy/Testing"
GPU_RUN_DEVICE=cpu PYTHON=$PYENV/bin/python TMPDIR=$WORK \
	timeout 330 "$WORK/copy/gpu/run.sh" --size 32M >"$WORK/run.out" 2>&1 ||
	fail "gpu/run.sh: $(tail -n 3 "$WORK/run.out")"
grep -q "^run.sh: ok: every byte and tensor equal, in [0-9]* s$" "$WORK/run.out" ||
	fail "gpu/run.sh: $(cat "$WORK/run.out")"
grep -q "^run.sh: load_model(device='cpu'): [0-9]* tensors, " "$WORK/run.out" ||
	fail "gpu/run.sh compared nothing: $(cat "$WORK/run.out")"
while read -r l; do ok "$l"; done <"$WORK/run.out"
sanitizers_clean
