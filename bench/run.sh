#!/usr/bin/env bash
# make bench: one run, one table.  For a generated model of BENCH_SIZE
# bytes (default 1G) on tmpfs, served by a local seed over PROTOCOL
# (default tcp) on loopback:
#   raw        sfs-rawread: every byte with the transport alone, no FUSE
#   cold       first sequential read through a fresh mount
#   warm       the same read again (kernel page cache)
#   tmpfs      the same files read from tmpfs directly
# then the ratios cold/raw and warm/tmpfs.  Each is measured RUNS times
# (default 3; cold on a fresh mount each time) and the median reported
# with the range: on small VMs the first touch of fresh memory makes
# single runs noisy.  No thresholds: numbers.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SIZE=${BENCH_SIZE:-1G}
PROTO=${BENCH_PROTOCOL:-tcp}
MOUNT_OPTS=${BENCH_MOUNT_OPTS:-}
RUNS=${BENCH_RUNS:-3}
SEEDFS=$BUILD/seedfs
WORK=$(mktemp -d /dev/shm/seedfs-bench.XXXXXX)
MNT=$(mktemp -d /tmp/seedfs-bench-mnt.XXXXXX)
SEED_PID=

cleanup() {
	if grep -q " $MNT fuse" /proc/mounts; then fusermount3 -u "$MNT" || true; fi
	[ -n "$SEED_PID" ] && { kill "$SEED_PID" && wait "$SEED_PID"; } 2>/dev/null
	rm -rf "$WORK" "$MNT"
}
trap cleanup EXIT

field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "generating a $SIZE model on tmpfs..."
"$BUILD/tests/genmodel" "$WORK/model" --size "$SIZE" --shards 4 >/dev/null
"$SEEDFS" seed --model-dir "$WORK/model" --listen 127.0.0.1:0 \
	--protocol "$PROTO" --log-level warn >"$WORK/seed.out" 2>"$WORK/seed.err" &
SEED_PID=$!
for _ in $(seq 200); do grep -q ready "$WORK/seed.out" && break; sleep 0.05; done
PORT=$(sed -n 's/.*ready on [^ ]*:\([0-9]*\):.*/\1/p' "$WORK/seed.out")
[ -n "$PORT" ] || { cat "$WORK/seed.err"; exit 1; }

# median_of CMD...: run CMD RUNS times; print "median min max bytes"
median_of() {
	local i out v bytes
	local vals=()
	for i in $(seq "$RUNS"); do
		out=$("$@")
		v=$(echo "$out" | field GB/s)
		bytes=$(echo "$out" | field bytes)
		vals+=("$v")
	done
	printf '%s\n' "${vals[@]}" | sort -g | awk -v b="$bytes" \
		'{ a[NR] = $1 } END { print a[int((NR + 1) / 2)], a[1], a[NR], b }'
}
mount_it() {
	# shellcheck disable=SC2086
	"$SEEDFS" mount --seed "127.0.0.1:$PORT" "$MNT" --log-level warn $MOUNT_OPTS
}
cold_read() { # a fresh mount: nothing cached
	mount_it
	"$BUILD/bench/sfs-readall" "$MNT/model"
	fusermount3 -u "$MNT"
}

raw=$(median_of "$BUILD/bench/sfs-rawread" --seed "127.0.0.1:$PORT" --chunk 1M --depth 8)
cold=$(median_of cold_read)
mount_it
"$BUILD/bench/sfs-readall" "$MNT/model" >/dev/null
warm=$(median_of "$BUILD/bench/sfs-readall" "$MNT/model")
fusermount3 -u "$MNT"
tmpfs=$(median_of "$BUILD/bench/sfs-readall" "$WORK/model")

col() { echo "$1" | awk -v i="$2" '{ print $i }'; }
r=$(col "$raw" 1)
c=$(col "$cold" 1)
w=$(col "$warm" 1)
t=$(col "$tmpfs" 1)
bytes=$(col "$cold" 4)
row() { printf '| %-38s | %6s | %11s |\n' "$1" "$(col "$2" 1)" "$(col "$2" 2)-$(col "$2" 3)"; }
printf '\nseedfs bench: %s bytes, protocol %s, %s cores, %s\n\n' \
	"$bytes" "$PROTO" "$(nproc)" "$(date -u +%Y-%m-%d)"
printf '| %-38s | %6s | %11s |\n' "read (median of $RUNS)" "GB/s" "range"
printf '|%s|%s|%s|\n' "----------------------------------------" "--------" "-------------"
row "raw transport (sfs-rawread, no FUSE)" "$raw"
row "mount, cold (fresh mount, first read)" "$cold"
row "mount, warm (page cache)" "$warm"
row "tmpfs (same files)" "$tmpfs"
printf '\n| %-38s | %6s |\n' "ratio of medians" "x"
printf '|%s|%s|\n' "----------------------------------------" "--------"
printf '| %-38s | %6s |\n' "mount cold / raw transport" "$(div "$c" "$r")"
printf '| %-38s | %6s |\n' "mount warm / tmpfs" "$(div "$w" "$t")"
