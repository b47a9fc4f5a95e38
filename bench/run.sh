#!/usr/bin/env bash
# make bench: one run, one table.  For a generated model of BENCH_SIZE
# bytes (default 1G) on tmpfs, served by one local seed over every
# protocol of BENCH_PROTOCOLS (default tcp,shm,sockets) on loopback:
#   raw        sfs-rawread: every byte with the transport alone, no FUSE
#   pull       seedfs pull into a directory on tmpfs (verified, written)
#   cold       first sequential read through a fresh mount
# for each protocol, then once (the page cache does not care):
#   warm       the same read again (kernel page cache)
#   tmpfs      the same files read from tmpfs directly
# and the ratios cold/raw (per protocol) and warm/tmpfs.  Each is measured RUNS times
# (default 3; cold on a fresh mount each time) and the median reported
# with the range: on small VMs the first touch of fresh memory makes
# single runs noisy.  No thresholds: numbers.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SIZE=${BENCH_SIZE:-1G}
PROTOS=${BENCH_PROTOCOLS:-tcp,shm,sockets}
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
	--protocol "$PROTOS" --log-level warn >"$WORK/seed.out" 2>"$WORK/seed.err" &
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
mount_it() { # PROTOCOL
	# shellcheck disable=SC2086
	"$SEEDFS" mount --seed "127.0.0.1:$PORT" "$MNT" --protocol "$1" \
		--log-level warn $MOUNT_OPTS
}
pull_it() { # PROTOCOL: seedfs pull to tmpfs, timed here
	rm -rf "$WORK/pulled"
	local t0 t1
	t0=$(date +%s%N)
	"$SEEDFS" pull --seed "127.0.0.1:$PORT" --protocol "$1" model \
		"$WORK/pulled" 2>/dev/null
	t1=$(date +%s%N)
	awk -v b="$(du -sb "$WORK/model" | cut -f1)" -v ns=$((t1 - t0)) \
		'BEGIN { printf "bytes %d seconds %.3f GB/s %.2f\n", b, ns / 1e9, b / ns }'
	rm -rf "$WORK/pulled"
}
cold_read() { # PROTOCOL: a fresh mount, nothing cached
	mount_it "$1"
	"$BUILD/bench/sfs-readall" "$MNT/model"
	fusermount3 -u "$MNT"
}
col() { echo "$1" | awk -v i="$2" '{ print $i }'; }
declare -A raw pull cold
for p in ${PROTOS//,/ }; do
	echo "measuring $p..."
	raw[$p]=$(median_of "$BUILD/bench/sfs-rawread" --seed "127.0.0.1:$PORT" \
		--protocol "$p" --chunk 1M --depth 8)
		pull[$p]=$(median_of pull_it "$p")
	cold[$p]=$(median_of cold_read "$p")
done
first=${PROTOS%%,*}
mount_it "$first"
"$BUILD/bench/sfs-readall" "$MNT/model" >/dev/null
warm=$(median_of "$BUILD/bench/sfs-readall" "$MNT/model")
fusermount3 -u "$MNT"
tmpfs=$(median_of "$BUILD/bench/sfs-readall" "$WORK/model")
bytes=$(col "$warm" 4)
row() { printf '| %-38s | %6s | %11s |\n' "$1" "$(col "$2" 1)" "$(col "$2" 2)-$(col "$2" 3)"; }
printf '\nseedfs bench: %s bytes, %s cores, %s\n\n' \
	"$bytes" "$(nproc)" "$(date -u +%Y-%m-%d)"
printf '| %-38s | %6s | %11s |\n' "read (median of $RUNS)" "GB/s" "range"
printf '|%s|%s|%s|\n' "----------------------------------------" "--------" "-------------"
for p in ${PROTOS//,/ }; do
		row "$p: raw transport (no FUSE)" "${raw[$p]}"
	row "$p: seedfs pull (to tmpfs)" "${pull[$p]}"
	row "$p: mount, cold (fresh mount)" "${cold[$p]}"
done
row "mount, warm (page cache)" "$warm"
row "tmpfs (same files)" "$tmpfs"
printf '\n| %-38s | %6s |\n' "ratio of medians" "x"
printf '|%s|%s|\n' "----------------------------------------" "--------"
for p in ${PROTOS//,/ }; do
	printf '| %-38s | %6s |\n' "$p: pull / raw transport" \
		"$(div "$(col "${pull[$p]}" 1)" "$(col "${raw[$p]}" 1)")"
	printf '| %-38s | %6s |\n' "$p: mount cold / pull" \
		"$(div "$(col "${cold[$p]}" 1)" "$(col "${pull[$p]}" 1)")"
	printf '| %-38s | %6s |\n' "$p: mount cold / raw transport" \
		"$(div "$(col "${cold[$p]}" 1)" "$(col "${raw[$p]}" 1)")"
done
printf '| %-38s | %6s |\n' "mount warm / tmpfs" "$(div "$(col "$warm" 1)" "$(col "$tmpfs" 1)")"
