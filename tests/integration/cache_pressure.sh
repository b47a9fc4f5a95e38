#!/usr/bin/env bash
# A cache at its minimum size (16 chunks) under many concurrent readers:
# two mounts of one seed with --cache-size 16M, one -o direct_io, one
# buffered, each read by 8 threads at once (readcheck threads: block
# sizes of 4 KiB to 1 MiB, each thread starting at another file; the
# buffered mount's readers drop what they read from the page cache, so
# every read reaches the mount) through a model four times the cache,
# twice over.  Every byte read must equal the source's: a chunk whose
# pin goes before its reply is copied out is evicted and refilled under
# the reader.  Nothing fails (no error counted), and the cache really
# was refilled (bytes pulled several times the model).
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 64M --shards 2
start_seed "$MODEL"
D=$WORK/dio
B=$WORK/buf
MOUNT_LOG=mount-dio mount_seed "$D" --cache-size 16M -o direct_io
DIO_PID=$MOUNT_PID
MOUNT_LOG=mount-buf mount_seed "$B" --cache-size 16M
BUF_PID=$MOUNT_PID

pairs() {
	local f
	for f in $(cd "$MODEL" && find . -type f -size +1M | sed 's|^\./||' | sort); do
		printf '%s\n%s\n' "$MODEL/$f" "$1/m/$f"
	done
}
mapfile -t dpairs < <(pairs "$D")
mapfile -t bpairs < <(pairs "$B")
[ "${#dpairs[@]}" -ge 4 ] || fail "the model has no two large files: ${dpairs[*]}"
model=$(du -cb "$MODEL" | tail -n 1 | cut -f1)

ROUNDS=2
t0=$(now_ms)
"$READCHECK" threads 8 -r $ROUNDS "${dpairs[@]}" 2>"$WORK/dio.err" &
dpid=$!
PIDS+=("$dpid")
"$READCHECK" threads 8 -u -r $ROUNDS "${bpairs[@]}" 2>"$WORK/buf.err" &
bpid=$!
PIDS+=("$bpid")
drc=0 brc=0
wait "$dpid" || drc=$?
wait "$bpid" || brc=$?
el=$(($(now_ms) - t0))
[ "$drc" = 0 ] && [ "$brc" = 0 ] ||
	fail "-o direct_io readers: exit $drc, $(wc -l <"$WORK/dio.err") threads failed: $(head -n 2 "$WORK/dio.err" | tr '\n' ' '); buffered readers: exit $brc, $(wc -l <"$WORK/buf.err") failed: $(head -n 2 "$WORK/buf.err" | tr '\n' ' ')"

# checked MNT: no error counted, the cache refilled; prints bytes pulled
checked() {
	local S=$1/.seedfs/status k pulled
	[ "$(status_val "$S" cache_size)" = $((16 << 20)) ] || fail "$1: cache_size $(status_val "$S" cache_size)"
	for k in errors_transport errors_timeout errors_checksum errors_unavailable errors_no_chunk; do
		[ "$(status_val "$S" $k)" = 0 ] || fail "$1: $k $(status_val "$S" $k)"
	done
	pulled=$(status_val "$S" bytes_pulled)
	# 8 readers, each at its own place: the cache holds a quarter of
	# the model, so most of it is pulled again and again.
	[ "$pulled" -ge $((model * 3)) ] ||
		fail "$1: $pulled bytes pulled for $((8 * ROUNDS)) reads of $model: the cache was not under pressure"
	echo "$pulled"
}
pd=$(checked "$D") || exit 1
pb=$(checked "$B") || exit 1
ok "16 MiB caches, 8 -o direct_io and 8 buffered readers, $ROUNDS rounds of a $((model >> 20)) MiB model each: byte-exact in $el ms, no error (pulled: direct_io $((pd >> 20)) MiB, buffered $((pb >> 20)) MiB)"
unmount_check "$D" "$DIO_PID"
unmount_check "$B" "$BUF_PID"
sanitizers_clean
