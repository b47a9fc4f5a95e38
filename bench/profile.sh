#!/usr/bin/env bash
# make profile: where the mount daemon's CPU goes on the cold path.  A
# generated model of PROFILE_SIZE bytes (default 1G) on tmpfs, one local
# seed over PROFILE_PROTOCOL (default tcp), a fresh mount, every file
# read once with cat while perf samples the mount daemon (call graphs).
# Prints GB/s, each process's CPU seconds per GB, and the daemon's CPU
# per GB split by what its samples were doing (each sample counted once,
# by the first of these its stack shows):
#   cache memory   faulting in and zeroing the pages the cache grows into
#   FUSE replies   the kernel copying replies into the reader's pages
#   FUSE requests  reading requests from /dev/fuse
#   transport rx   the transport receiving chunk bytes (tcp: recv)
#   transport tx   the transport sending (read requests, acks)
#   checksums      xxHash verifying each chunk
#   wake and wait  futexes, scheduling (threads handing work on)
#   other
# Memory is warmed right before the read, as make bench does (this VM's
# first touch of guest memory is slow; docs/bench.md).
#
# Usage: bench/profile.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SEEDFS=$BUILD/seedfs
SIZE=${PROFILE_SIZE:-1G}
PROTO=${PROFILE_PROTOCOL:-tcp}
command -v perf >/dev/null || { echo "profile: perf is missing (packaging/deps.sh --bench installs linux-perf)"; exit 1; }

WORK=$(mktemp -d /dev/shm/seedfs-profile.XXXXXX)
SEED_PID= MNT=$WORK/mnt
cleanup() {
	declare -F reporting_restore >/dev/null && reporting_restore
	mountpoint -q "$MNT" 2>/dev/null && fusermount3 -u "$MNT"
	[ -z "$SEED_PID" ] || kill "$SEED_PID" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=bench/reporting.sh
source "$(dirname "$0")/reporting.sh"
reporting_hold

"$BUILD/tests/genmodel" "$WORK/model" --size "$SIZE" --shards 4 >/dev/null
"$SEEDFS" seed --model-dir "$WORK/model" --listen 127.0.0.1:0 --protocol "$PROTO" \
	--log-level warn >"$WORK/seed.out" 2>"$WORK/seed.err" &
SEED_PID=$!
for _ in $(seq 1000); do grep -q '^seedfs seed: ready on ' "$WORK/seed.out" && break; sleep 0.01; done
PORT=$(sed -n 's/.*ready on [^ ]*:\([0-9]*\):.*/\1/p' "$WORK/seed.out")
[ -n "$PORT" ] || { cat "$WORK/seed.err"; exit 1; }
mkdir "$MNT"
"$SEEDFS" mount --seed "127.0.0.1:$PORT" "$MNT" --protocol "$PROTO" --log-level warn
MOUNT_PID=$(pgrep -n -f -- "seedfs mount .* $MNT( |\$)")

hz=$(getconf CLK_TCK)
secs() { awk -v hz="$hz" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }
m0=$(secs "$MOUNT_PID") s0=$(secs "$SEED_PID")
# Memory is warmed right before the read: this VM hands free memory
# back to its host within seconds (free page reporting), so memory
# warmed any earlier is slow to touch again (docs/bench.md).
want=$(($(numfmt --from=iec "$SIZE") * 2))
dd if=/dev/zero of="$WORK/warm" bs=1M count=$((want / 1048576)) 2>/dev/null
rm -f "$WORK/warm"
perf record -q -F 1999 -g -p "$MOUNT_PID" -o "$WORK/perf.data" 2>/dev/null &
PERF_PID=$!
sleep 0.5
t0=$(date +%s%N)
bytes=$(find "$MNT/model" -type f -print0 | sort -z | xargs -0 cat | wc -c)
t1=$(date +%s%N)
m1=$(secs "$MOUNT_PID") s1=$(secs "$SEED_PID")
kill -INT "$PERF_PID"
wait "$PERF_PID" || true

# PROFILE_DATA=FILE: keep perf's data there (perf report -i FILE).
[ -z "${PROFILE_DATA:-}" ] || cp "$WORK/perf.data" "$PROFILE_DATA"
mcpu=$(awk -v a="$m1" -v b="$m0" 'BEGIN { print a - b }')
awk -v b="$bytes" -v ns=$((t1 - t0)) -v m="$mcpu" -v s="$(awk -v a="$s1" -v b="$s0" 'BEGIN { print a - b }')" \
	'BEGIN { printf "cold read of %.2f GB over '"$PROTO"': %.2f GB/s; CPU-s per GB: mount daemon %.2f, seed %.2f (perf sampling adds to the daemon)\n", b / 1e9, b / ns, m * 1e9 / b, s * 1e9 / b }'
perf script -i "$WORK/perf.data" 2>/dev/null | awk -v cpu="$mcpu" -v b="$bytes" '
function classify(st) {
	if (st ~ /faultin_page|folio_zero_user|clear_page|__madvise/) return "cache memory"
	if (st ~ /fuse_dev_do_write|fuse_dev_write/) return "FUSE replies"
	if (st ~ /fuse_dev_do_read|fuse_dev_read|fuse_dev_splice_read/) return "FUSE requests"
	if (st ~ /tcp_recvmsg|__libc_recv|recvmsg|process_vm_readv|ibv_poll_cq/) return "transport rx"
	if (st ~ /tcp_sendmsg|__libc_send|sendmsg|__send/) return "transport tx"
	if (st ~ /XXH|libxxhash/) return "checksums"
	if (st ~ /futex|schedule|__lll_lock|pthread_cond/) return "wake and wait"
	return "other"
}
/^[^ \t]/ { if (st != "") { n[classify(st)]++; total++ } st = " "; next }
/^[ \t]/ { st = st " " $2 " " $3; next }
END {
	if (st != "") { n[classify(st)]++; total++ }
	split("cache memory,FUSE replies,FUSE requests,transport rx,transport tx,checksums,wake and wait,other", order, ",")
	printf "  %-16s %7s %10s\n", "mount daemon", "share", "CPU-s/GB"
	for (i = 1; i <= 8; i++) {
		k = order[i]
		printf "  %-16s %6.1f%% %10.2f\n", k, 100 * n[k] / total, n[k] / total * cpu * 1e9 / b
	}
	printf "  (%d samples)\n", total
}'
