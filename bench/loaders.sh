#!/usr/bin/env bash
# make bench, the loaders' part: a loader that reads every tensor of a
# model (bench/tensorread.py: read() or mmap, into one buffer), in file
# order and shuffled (modules load in module order, not file order), on
# a fresh mount of a local seed over tcp each time, with the mount's
# read-ahead to a tensor's end and without it (--no-tensor-ahead), and
# the same from tmpfs (the local limit).  Issue 27's goal: shuffled at
# least 0.8 x in file order, with the tensor read-ahead.  Then the
# peers side by side (bench/peers.py): the model into process memory
# by seedfs's engine API, by safetensors through the mount and from
# tmpfs, and by runai-model-streamer from tmpfs.  Each number is
# the median of RUNS (default 3).
#   bench/loaders.sh BUILD
# Environment: BENCH_LOADERS_MIB (the model, default 1024; tensors of
# 2-32 MiB in 4 shards), BENCH_RUNS.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
MIB=${BENCH_LOADERS_MIB:-1024}
RUNS=${BENCH_RUNS:-3}
SEEDFS=$BUILD/seedfs
TR=$SRC/bench/tensorread.py
WORK=$(mktemp -d /dev/shm/seedfs-bench-loaders.XXXXXX)
MNT=$(mktemp -d /tmp/seedfs-bench-loaders-mnt.XXXXXX)
SEED_PID=
PYENV=${SEEDFS_PYENV:-/opt/seedfs/pyenv}
[ -x "$PYENV/bin/python" ] || { echo "bench-loaders: no venv at $PYENV (packaging/deps.sh)" >&2; exit 1; }
export PYTHONNOUSERSITE=1

cleanup() {
	declare -F reporting_restore >/dev/null && reporting_restore
	if grep -q " $MNT fuse" /proc/mounts; then fusermount3 -u "$MNT" || true; fi
	[ -n "$SEED_PID" ] && { kill "$SEED_PID" && wait "$SEED_PID"; } 2>/dev/null
	rm -rf "$WORK" "$MNT"
}
trap cleanup EXIT
# shellcheck source=bench/reporting.sh
source "$SRC/bench/reporting.sh"
# As make bench: free page reporting held off, and twice the model's
# memory touched right before every timed run (BENCH_WARM=0: neither).
WARM_MIB=$((MIB * 2))
avail_mib=$(($(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) / 1024))
[ "$WARM_MIB" -le $((avail_mib * 7 / 10)) ] || WARM_MIB=$((avail_mib * 7 / 10))
if [ "${BENCH_WARM:-1}" != 0 ]; then reporting_hold; fi
warm_run() {
	[ "${BENCH_WARM:-1}" != 0 ] || return 0
	dd if=/dev/zero of="$WORK/warm" bs=1M count="$WARM_MIB" 2>/dev/null
	rm -f "$WORK/warm"
}

echo "bench-loaders: a model of $MIB MiB on tmpfs (tensors of 2-32 MiB)..."
python3 "$TR" mkmodel "$WORK/m" "$MIB"
"$SEEDFS" seed --model-dir "$WORK/m" --listen 127.0.0.1:0 --protocol tcp \
	--log-level warn >"$WORK/seed.out" 2>"$WORK/seed.err" &
SEED_PID=$!
for _ in $(seq 2000); do grep -qE '^seedfs seed: ready on ' "$WORK/seed.out" && break; sleep 0.01; done
PORT=$(sed -n 's/.*ready on [^ ]*:\([0-9]*\):.*/\1/p' "$WORK/seed.out")
[ -n "$PORT" ] || { cat "$WORK/seed.err"; exit 1; }

gbs() { awk '{ printf "%.2f\n", $2 / $4 / 1e9 }'; } # bytes N seconds S
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# once MODE ORDER [mount options]: GB/s on a fresh mount
once() {
	local mode=$1 order=$2
	shift 2
	warm_run
	"$SEEDFS" mount --seed "127.0.0.1:$PORT" "$MNT" --protocol tcp \
		--log-level warn "$@"
	python3 "$TR" "$mode" "$order" "$MNT"/m/*.safetensors | gbs
	fusermount3 -u "$MNT"
}
# on_mounts MODE ORDER: "WITH WITHOUT", the medians of RUNS fresh mounts
# with the tensor read-ahead and without, taken in turn (so that what
# drifts over a run, the page cache, the VM, weighs on both alike)
on_mounts() {
	local i w=() s=()
	for i in $(seq "$RUNS"); do
		w+=("$(once "$1" "$2")")
		s+=("$(once "$1" "$2" --no-tensor-ahead)")
	done
	echo "$(printf '%s\n' "${w[@]}" | median) $(printf '%s\n' "${s[@]}" | median)"
}
on_tmpfs() {
	local i
	for i in $(seq "$RUNS"); do
		warm_run
		python3 "$TR" "$1" "$2" "$WORK"/m/*.safetensors | gbs
	done | median
}
# A run to warm memory and the page cache of the seed's files, untimed.
on_tmpfs read file >/dev/null

printf '\n%-6s %-9s %8s %12s %12s\n' loader order tmpfs "mount" "mount, seq."
printf '%-6s %-9s %8s %12s %12s\n' "" "" GB/s "GB/s" "ahead only"
declare -A r
for mode in read mmap; do
	for order in file shuffled; do
		t=$(on_tmpfs $mode $order)
		read -r m s < <(on_mounts $mode $order)
		r[$mode.$order]=$m
		r[$mode.$order.seq]=$s
		printf '%-6s %-9s %8s %12s %12s\n' $mode $order "$t" "$m" "$s"
	done
done
echo
for mode in read mmap; do
	awk -v m="$mode" -v a="${r[$mode.shuffled]}" -v b="${r[$mode.file]}" \
		-v c="${r[$mode.shuffled.seq]}" -v d="${r[$mode.file.seq]}" 'BEGIN {
		x = a / b
		printf "%s: shuffled / in file order %.2f with the tensor read-ahead (goal >= 0.8: %s), %.2f without\n",
			m, x, (x >= 0.8 ? "met" : "missed"), c / d }'
done

# The peers, side by side: the same model into process memory.
PEERS=$SRC/bench/peers.py
PY=$PYENV/bin/python
peer() { # WHAT [ARGS...]: GB/s, the median of RUNS
	local i
	for i in $(seq "$RUNS"); do
		warm_run
		PYTHONPATH=$SRC/python SEEDFS_LIB=$BUILD/libseedfs.so \
			"$PY" "$PEERS" "$@" | gbs
	done | median
}
peer_mount() { # WHAT: on a fresh mount each run
	local i
	for i in $(seq "$RUNS"); do
		warm_run
		"$SEEDFS" mount --seed "127.0.0.1:$PORT" "$MNT" --protocol tcp \
			--log-level warn
		"$PY" "$PEERS" "$1" "$MNT"/m/*.safetensors | gbs
		fusermount3 -u "$MNT"
	done | median
}
api=$(SEEDFS_PROTOCOL=tcp peer api "127.0.0.1:$PORT" m)
stm=$(peer_mount safetensors)
stt=$(peer safetensors "$WORK"/m/*.safetensors)
run=$(peer runai "$WORK"/m/*.safetensors)
echo
echo "the model into process memory (GB/s, median of $RUNS; ratio to safetensors from tmpfs):"
for row in "seedfs engine API (tcp, loopback)|$api" \
	"safetensors through the mount (tcp)|$stm" \
	"safetensors from tmpfs (the local limit)|$stt" \
	"runai-model-streamer $("$PY" -c 'import importlib.metadata as m; print(m.version("runai-model-streamer"))') from tmpfs|$run"; do
	awk -v n="${row%%|*}" -v v="${row##*|}" -v l="$stt" \
		'BEGIN { printf "  %-48s %6.2f  %5.2f x\n", n, v, v / l }'
done

