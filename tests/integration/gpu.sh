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
#   written, a corrupt seed's block never copied, 16 threads through
#   one stage while reads set stages aside, and tests/gpu/run.sh (its
#   Python part with device="cuda:0", tests/tools/fakecuda_torch.py)
#   from a copy of the build tree with the build and source trees
#   hidden.
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
	# A device's address range (PROT_NONE to the host) is not taken for
	# host memory: refused at registration, not a crash at the read.
	"$GPUREAD" "$HOST:$SEED_PORT" m "$MODEL" protnone >"$WORK/out" 2>&1 ||
		fail "protnone: $(cat "$WORK/out")"
	ok "$(cat "$WORK/out")"
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
	bound pageable_copies = 0 "$(sed -n 's/.*, \([0-9]*\) from pageable memory, .*/\1/p' <<<"$line")" \
		"$mode: copies from pageable memory: $line"
	read -r moved bytes < <(sed -n 's/.* ok \([0-9]*\) bytes in .*mock: \([0-9]*\) bytes in .*/\1 \2/p' <<<"$line")
	[ "$mode" = errors ] || [ "$bytes" = "$moved" ] ||
		fail "$mode: $moved bytes read, $bytes copied to the device"
	{ grep -v '^gpuread: .* ok ' "$WORK/out" || true; } | while read -r l; do ok "$l"; done
	ok "$line"
done

"$GPUREAD" "$HOST:$SEED_PORT" m "$MODEL" protnone >"$WORK/out" 2>&1 ||
	fail "protnone: $(cat "$WORK/out")"
ok "$(cat "$WORK/out")"

# The driver failing, one call at a time (the MOCK driver's
# FAKECUDA_FAIL): never a read that answers 0 with a wrong byte
# (gpuread check fails on one), and the answer each case must give.
# check_case NAME WANT_RC WANT_TEXT [env...]: gpuread check 1 under env.
check_case() {
	local name=$1 want=$2 text=$3
	shift 3
	env "$@" "$GPUREAD" "$HOST:$SEED_PORT" m "$MODEL" check 1 >"$WORK/out" 2>"$WORK/err" ||
		fail "$name: $(cat "$WORK/out" "$WORK/err")"
	grep -q "^gpuread: thread 0: rc $want, .*$text" "$WORK/out" ||
		fail "$name: wanted rc $want and '$text': $(cat "$WORK/out")"
	ok "$name: $(grep '^gpuread: thread 0' "$WORK/out")"
}
check_case "a copy refused" -5 "cuMemcpyHtoDAsync: unknown error" FAKECUDA_FAIL=cuMemcpyHtoDAsync_v2:3
check_case "a wait that fails once (the stream waited for instead)" 0 "exact" FAKECUDA_FAIL=cuEventQuery:2
check_case "waits that fail from the third on (the stream instead)" 0 "exact" FAKECUDA_FAIL=cuEventQuery:3:0
check_case "a wait that fails, and the stream's" -5 "cuStreamQuery: unknown error" FAKECUDA_FAIL=cuEventQuery:2,cuStreamQuery:1:0
check_case "a mark refused (the stream waited for instead)" 0 "exact" FAKECUDA_FAIL=cuEventRecord:1
check_case "a mark refused, and the stream's wait" -5 "cuStreamQuery: unknown error" FAKECUDA_FAIL=cuEventRecord:1,cuStreamQuery:1:0
check_case "no page lock (copies from pageable memory)" 0 "exact" FAKECUDA_FAIL=cuMemHostRegister_v2:1
# A model that fits one part of the stage: the failing wait is the
# last one, after every piece was pulled.
mkdir -p "$WORK/small"
"$GENMODEL" "$WORK/small/m" --size 4M --shards 1 >/dev/null
SEED_LOG=small start_seed "$WORK/small/m" --protocol tcp
SMALL_PORT=$SEED_PORT
BIG_PORT=$(seed_port "$WORK/seed.out")
MODEL_BIG=$MODEL
MODEL=$WORK/small/m
check_case "the last wait fails, and the stream's" -5 "cuStreamQuery: unknown error" FAKECUDA_FAIL=cuEventQuery:1,cuStreamQuery:1:0
MODEL=$MODEL_BIG
SEED_PORT=$BIG_PORT
t0=$(now_ms)
check_case "a device that hangs" -110 "copies to it not done after 1500 ms" FAKECUDA_HANG=1 GPUREAD_TIMEOUT_MS=1500
ms=$(($(now_ms) - t0))
bound hang_answer_ms "<" 15000 "$ms" "a device that hangs: gpuread's answer, ms"
ok "a device that hangs: answered within $ms ms (timeout 1500 ms, then its stage's own wait at close)"

# Four threads at once into the device: every read exact.
"$GPUREAD" "$HOST:$SEED_PORT" m "$MODEL" check 4 >"$WORK/out" 2>"$WORK/err" ||
	fail "4 threads: $(cat "$WORK/out" "$WORK/err")"
[ "$(grep -c '^gpuread: thread [0-3]: rc 0, ' "$WORK/out")" = 4 ] || fail "4 threads: $(cat "$WORK/out")"
ok "4 threads at once: $(grep -c 'rc 0' "$WORK/out") of 4 read every file exact"

# Sixteen threads through one device's stage while reads set stages
# aside under the others (every event wait fails, and the stream's wait
# too for a few: those reads answer -EIO and set their stage aside).  A
# read that waited on a stage set aside takes its successor: it answers
# 0 with exact bytes, never fails because of another read.  10 rounds
# (3 under ThreadSanitizer, whose slowdown would take most of the
# test's 300 s).
ROUNDS=10
[ "$SFS_BUILD_KIND" = tsan ] && ROUNDS=3
races=0
for round in $(seq $ROUNDS); do
	FAKECUDA_FAIL=cuEventQuery:1:0,cuStreamQuery:1:8 "$GPUREAD" "$HOST:$SMALL_PORT" m "$WORK/small/m" check 16 \
		>"$WORK/race.out" 2>"$WORK/race.err" || fail "16 threads, round $round: $(cat "$WORK/race.out" "$WORK/race.err")"
	good=$(grep -c '^gpuread: thread [0-9]*: rc 0, \([0-9]*\) of \1 reads exact$' "$WORK/race.out" || true)
	lost=$(grep -c '^gpuread: thread [0-9]*: rc -5, .*CUDA device 0: cuStreamQuery: unknown error' "$WORK/race.out" || true)
	aside=$(grep -c 'its stage is set aside (a driver error)' "$WORK/race.err" || true)
	# a read neither exact nor failed by its own driver error
	bound race_reads_unexplained = 0 $((16 - good - lost)) \
		"16 threads, round $round: $good exact, $lost -EIO: $(grep -v -E 'rc (0|-5),' "$WORK/race.out" | head -n 3)"
	[ $((good + lost)) = 16 ] && [ "$lost" -ge 1 ] && [ "$lost" -le 8 ] && [ "$good" -ge 8 ] && [ "$aside" = "$lost" ] ||
		fail "16 threads, round $round: $good exact, $lost -EIO, $aside set aside: $(grep -v -E 'rc (0|-5),' "$WORK/race.out" | head -n 3)"
	races=$((races + lost))
done
ok "16 threads through one stage, $ROUNDS rounds: $races reads set their stage aside while others waited on it; every other read exact, none failed for it"

# Two threads whose reads time out together (the seed stopped after
# the client opened): both answer -ETIMEDOUT, the stage is set aside
# once, and the client closes cleanly.
SEED_LOG=seed3 start_seed "$MODEL" --protocol tcp
P3=$SEED_PORT PID3=$SEED_PID
GPUREAD_GO=$WORK/go GPUREAD_TIMEOUT_MS=1500 "$GPUREAD" "$HOST:$P3" m "$MODEL" check 2 \
	>"$WORK/stall.out" 2>"$WORK/stall.err" &
GP=$!
PIDS+=("$GP")
for _ in $(seq 300); do grep -q '^gpuread: opened' "$WORK/stall.out" && break; sleep 0.05; done
grep -q '^gpuread: opened' "$WORK/stall.out" || fail "stall: gpuread did not open: $(cat "$WORK/stall.err")"
kill -STOP "$PID3"
touch "$WORK/go"
STOP_S=60 await_exit "$GP"
kill -CONT "$PID3"
running "$GP" && fail "stall: gpuread still running after 60 s: $(cat "$WORK/stall.out")"
wait "$GP" || fail "stall: gpuread failed: $(cat "$WORK/stall.out" "$WORK/stall.err")"
grep -q '^gpuread: check done$' "$WORK/stall.out" || fail "stall: $(cat "$WORK/stall.out")"
[ "$(grep -c '^gpuread: thread [01]: rc -110, ' "$WORK/stall.out")" = 2 ] ||
	fail "stall: both threads should time out: $(cat "$WORK/stall.out")"
ok "a stalled seed, two threads: $(grep -c 'rc -110' "$WORK/stall.out") timed out, $(grep -c 'stage is set aside' "$WORK/stall.err") stage set aside, closed cleanly"

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
# tree: in a mount namespace of its own where the build tree and the
# source tree are empty directories (the copy must not reach back into
# them: a RUNPATH naming the build tree gave exit 127 on another host),
# under the MOCK driver: the engine API's part on the "device", and the
# Python loader's device="cuda:0" with torch's CUDA half stood in for by
# tests/tools/fakecuda_torch.py (Debian's torch has no CUDA): tensors in
# the MOCK driver's memory, copied back and compared with torch's own
# load.  Not under ThreadSanitizer: Python is not built with it.
if [ "$SFS_BUILD_KIND" = tsan ]; then
	ok "gpu/run.sh from a copy: not under ThreadSanitizer (its Python part cannot load a TSan libseedfs)"
	sanitizers_clean
	exit 0
fi
SRC=$(cd "$(dirname "$0")/../.." && pwd)
COPY=$WORK/copy
mkdir -p "$COPY"
cp -a "$BUILD/." "$COPY/"
rm -rf "$COPY/CMakeFiles" "$COPY/Testing"
cp "$SRC/tests/tools/fakecuda_torch.py" "$WORK/"
case $COPY/ in "$BUILD"/* | "$SRC"/*) fail "the copy $COPY is inside the tree it must not reach" ;; esac
# What run.sh runs names no directory of the build tree to load from.
for f in seedfs libseedfs.so tests/gpuread tests/genmodel tests/fakecuda/libcuda.so.1; do
	rp=$(readelf -d "$COPY/$f" | sed -n 's/.*(RUN\{0,1\}PATH).*\[\(.*\)\]$/\1/p')
	case $rp in *"$BUILD"* | *"$SRC"*) fail "$f: RUNPATH $rp names the build tree" ;; esac
	[ -z "$rp" ] || [[ $rp == '$ORIGIN'* ]] || fail "$f: RUNPATH $rp is not relative to it"
done
ok "gpuread's RUNPATH: $(readelf -d "$COPY/tests/gpuread" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p')"
UNSHARE=(unshare -m --propagation private)
[ "$(id -u)" = 0 ] || UNSHARE=(unshare -r -m --propagation private)
# In the namespace: an empty, read-only directory mounted over each
# argument (the build tree first: it may lie inside the source tree),
# then run.sh from $COPY.
# shellcheck disable=SC2016
HIDE='for d in "$@"; do
	[ -d "$d" ] || continue
	mount -t tmpfs -o size=16k,mode=0555 seedfs-hidden "$d" || exit 99
done
for d in "$@"; do
	[ ! -e "$d" ] || [ -z "$(ls -A "$d")" ] || { echo "run.sh: $d is not hidden"; exit 98; }
done
exec "$COPY/gpu/run.sh" --size 32M'
PYW="$(python_for_build "$PYENV/bin/python") $WORK/fakecuda_torch.py"
st=0
COPY=$COPY GPU_RUN_DEVICE=cuda:0 PYTHON=$PYW TMPDIR=$WORK LD_LIBRARY_PATH=$COPY/tests/fakecuda \
	timeout 330 "${UNSHARE[@]}" bash -c "$HIDE" hide "$BUILD" "$SRC" >"$WORK/run.out" 2>&1 || st=$?
[ $st = 0 ] || fail "gpu/run.sh from a copy, the trees hidden: status $st: $(tail -n 3 "$WORK/run.out")"
grep -q "^run.sh: ok: every byte and tensor equal, in [0-9]* s$" "$WORK/run.out" ||
	fail "gpu/run.sh: $(cat "$WORK/run.out")"
bound run_sh_s "<=" 300 "$(sed -n 's/^run\.sh: ok: every byte and tensor equal, in \([0-9]*\) s$/\1/p' "$WORK/run.out")" \
	"gpu/run.sh from the copy, seconds"
grep -q "^run.sh: python .*, device cuda:0 (MOCK (fakecuda))$" "$WORK/run.out" ||
	fail "gpu/run.sh: not on the MOCK device: $(cat "$WORK/run.out")"
grep -q "^run.sh: load_model(device='cuda:0'): [1-9][0-9]* tensors, " "$WORK/run.out" ||
	fail "gpu/run.sh compared nothing: $(cat "$WORK/run.out")"
grep -q "^run.sh: safe_open(device='cuda:0'): [1-9][0-9]* tensors equal, get_slice too$" "$WORK/run.out" ||
	fail "gpu/run.sh: no safe_open: $(cat "$WORK/run.out")"
# The tensors went to the device through libseedfs's stage: bytes copied
# host to device, none from pageable memory.
read -r pybytes pycopies pypageable < <(sed -n 's/^run\.sh: fakecuda: \([0-9]*\) bytes in \([0-9]*\) copies host to device, \([0-9]*\) from pageable memory$/\1 \2 \3/p' "$WORK/run.out")
[ -n "$pybytes" ] && [ "$pybytes" -gt 0 ] && [ "$pypageable" = 0 ] ||
	fail "gpu/run.sh: Python's device reads did not go through the MOCK driver: $(grep fakecuda "$WORK/run.out")"
while read -r l; do ok "$l"; done <"$WORK/run.out"
sanitizers_clean
