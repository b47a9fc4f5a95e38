#!/usr/bin/env bash
# kill -9 the seed: a read of bytes not yet fetched fails with EIO within
# the timeout, later reads fail fast, cached bytes still read, the mount
# stays up and says why in its log, and unmounts cleanly.
#   seed_death.sh BUILD_DIR [PROTOCOL]
source "$(dirname "$0")/lib.sh" "$1"
PROTO=${2:-tcp}

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 12M --shards 3
start_seed "$MODEL" --protocol "$PROTO"
MNT=$WORK/mnt
TIMEOUT=3
mount_seed "$MNT" --timeout $TIMEOUT
M=$MNT/m
F1=model-00001-of-00003.safetensors
F2=model-00002-of-00003.safetensors
F3=model-00003-of-00003.safetensors

sum1=$(sha256sum <"$M/$F1")
[ "$sum1" = "$(sha256sum <"$MODEL/$F1")" ] || fail "sha256 before the kill"
kill -9 "$SEED_PID"
wait "$SEED_PID" 2>/dev/null || true

t0=$(now_ms)
if cat "$M/$F2" >/dev/null 2>"$WORK/cat.err"; then fail "read succeeded"; fi
t1=$(now_ms)
grep -q "Input/output error" "$WORK/cat.err" || fail "not EIO: $(cat "$WORK/cat.err")"
el=$((t1 - t0))
[ $el -le $((TIMEOUT * 1000 + 1500)) ] || fail "EIO after $el ms, bound ${TIMEOUT}s"
ok "read of unfetched bytes: EIO after $el ms (timeout ${TIMEOUT}s)"

t0=$(now_ms)
if dd if="$M/$F3" of=/dev/null bs=4k count=1 skip=100 2>"$WORK/dd.err"; then
	fail "second read succeeded"
fi
t1=$(now_ms)
grep -q "Input/output error" "$WORK/dd.err" || fail "not EIO: $(cat "$WORK/dd.err")"
[ $((t1 - t0)) -le $((TIMEOUT * 1000 + 1500)) ] || fail "second EIO after $((t1 - t0)) ms"
ok "next read: EIO after $((t1 - t0)) ms"

ls "$M" >/dev/null || fail "mount not usable"
[ "$(sha256sum <"$M/$F1")" = "$sum1" ] || fail "cached file changed"
grep -q "is unreachable" "$WORK/mount.log" || fail "cause not logged"
# The cause: the transport's error, or (when the fabric never fails the
# reads: libfabric tcp retries the connection, soft-RoCE under emulation
# never fails reads in flight) the cache's own bound.
grep -Eq "W xport: .*(fi_read|read on QP|ibv_post_send)|no progress for" \
	"$WORK/mount.log" || fail "transport error not logged"
ok "mount stays up, fetched bytes still read, cause logged"
unmount_check "$MNT" "$MOUNT_PID"
ok "unmounted cleanly"
sanitizers_clean
