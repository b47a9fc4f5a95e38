#!/usr/bin/env bash
# The cache never exceeds --cache-size: read a model four times its size
# through the mount; the mount's peak RSS stays within the cache size +
# 64 MiB, the bytes are right, and .seedfs/status says what happened.
source "$(dirname "$0")/lib.sh" "$1"

CACHE_MB=64
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size $((CACHE_MB * 4))M --shards 4
start_seed "$MODEL"
MNT=$WORK/mnt
mount_seed "$MNT" --cache-size ${CACHE_MB}M
files=$(cd "$MODEL" && find . -type f | sed 's|^\./||' | sort)
total=0
for f in $files; do
	cmp "$MODEL/$f" "$MNT/m/$f" || fail "bytes of $f"
	total=$((total + $(stat -c %s "$MODEL/$f")))
done
hwm_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$MOUNT_PID/status")
limit_kb=$(((CACHE_MB + 64) * 1024))
[ "$hwm_kb" -le "$limit_kb" ] || fail "peak RSS $hwm_kb kB > $limit_kb kB"
ok "read $total bytes through a ${CACHE_MB} MiB cache: peak RSS $((hwm_kb / 1024)) MiB (limit $((limit_kb / 1024)))"

S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }
[ "$(val cache_size)" -eq $((CACHE_MB << 20)) ] || fail "status cache_size: $(cat "$S")"
[ "$(val cache_used)" -le $((CACHE_MB << 20)) ] || fail "status cache_used"
pulled=$(val bytes_pulled)
# Every remote byte once (small files travel inline in the manifest).
[ "$pulled" -le "$total" ] && [ "$pulled" -ge $((total - (1 << 20))) ] ||
	fail "bytes_pulled $pulled for $total bytes"
[ "$(val errors_transport)" -eq 0 ] || fail "pull errors"
grep -q "^seed: $HOST:$SEED_PORT (reachable)$" "$S" || fail "status seed line"
grep -q "^protocol: tcp (tcp;ofi_rxm)$" "$S" || fail "status protocol line"
grep -q "^model: m generation 1 files" "$S" || fail "status model line"
ok "status: $(grep -E '^(cache_used|bytes_pulled|pull_rate_avg):' "$S" | tr '\n' ' ')"
unmount_check "$MNT" "$MOUNT_PID"
