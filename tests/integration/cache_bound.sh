#!/usr/bin/env bash
# The cache never exceeds --cache-size: read a model four times its size
# through the mount; the mount's peak RSS stays within the cache size +
# 64 MiB, the bytes are right, and .seedfs/status says what happened.
# And it grows only as it needs: with the default size (1/16 of RAM), a
# mount of a 40 MB model is ready at most 0.3 s after its transport
# started, uses almost no CPU while idle, prefetches it within 4 s,
# stays under 128 MiB of RSS while it reads every byte, and commits at
# most what it holds + 64 MiB.  And it shrinks: once a generation it
# held (160 MB, prefetched) is replaced, the memory past 64 MiB of free
# slots goes back to the kernel (RSS drops); the next generation, read
# once, commits at most 128 MiB + a segment, not its size.
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
bound peak_rss_over_cache_mib "<=" 64 $((hwm_kb / 1024 - CACHE_MB)) "peak RSS over the ${CACHE_MB} MiB cache, MiB"
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

MODEL40=$WORK/m40
mkdir -p "$MODEL40"
"$GENMODEL" "$MODEL40/m" --size 40M --shards 2 >/dev/null
SEED_LOG=seed40 start_seed "$MODEL40/m"
MNT40=$WORK/mnt40
MOUNT_LOG=mount40 mount_seed "$MNT40" --cache-idle 2
S=$MNT40/.seedfs/status
rest=$(sed -n 's/.* ready in [0-9.]* s (transport start-up [0-9.]* s, the rest \([0-9.]*\) s)$/\1/p' "$WORK/mount40.log" | tail -n 1)
[ -n "$rest" ] || fail "no ready line: $(cat "$WORK/mount40.log")"
awk -v r="$rest" 'BEGIN { exit !(r <= 0.30) }' ||
	fail "ready $rest s after the transport started (bound 0.3 s): $(grep ' ready in ' "$WORK/mount40.log")"
ok "default cache of $(val cache_size) bytes: $(grep -o 'ready in .*' "$WORK/mount40.log" | tail -n 1)"
ticks() { awk '{ print $14 + $15 }' "/proc/$MOUNT_PID/stat"; }
rss_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$MOUNT_PID/status"; }
t0=$(ticks)
sleep 3
t1=$(ticks)
hz=$(getconf CLK_TCK)
idle_ms=$(((t1 - t0) * 1000 / hz))
bound idle_cpu_ms "<=" 500 $idle_ms "CPU the mount used in 3 idle seconds, ms"
[ "$(val cache_ready)" -le $((64 << 20)) ] || fail "idle: $(val cache_ready) bytes ready"
# --cache-idle 2: after 2 s without a pull, the free slots past 32 MiB
# went back to the kernel (in whole huge pages: up to 2 MiB more).
for _ in $(seq 100); do
	[ "$(val cache_ready)" -le $(($(val cache_used) + (34 << 20))) ] && break
	sleep 0.05
done
[ "$(val cache_ready)" -le $(($(val cache_used) + (34 << 20))) ] ||
	fail "idle 3 s (--cache-idle 2): $(($(val cache_ready) >> 20)) MiB ready for $(($(val cache_used) >> 20)) MiB held"
ok "idle 3 s (--cache-idle 2): $idle_ms ms of CPU, RSS $(($(rss_kb VmRSS) / 1024)) MiB, $(($(val cache_ready) >> 20)) MiB of the cache ready"
# A prefetch asks the cache to grow ahead of what it queues: it does not
# wait for growth that only its own pulls would start (10 s, its
# timeout, before the cache asked).
t0=$(now_ms)
"$SEEDFS" prefetch "$MNT40/m" 2>"$WORK/prefetch40.err" || fail "prefetch: $(cat "$WORK/prefetch40.err")"
ms=$(($(now_ms) - t0))
[ $ms -lt 4000 ] || fail "prefetch of a 40 MB model took $ms ms: $(tail -n 1 "$WORK/prefetch40.err")"
[ "$(val cache_used)" -ge 40000000 ] || fail "prefetch: $(val cache_used) bytes held"
ok "prefetch of a 40 MB model in $ms ms: $(($(val cache_used) >> 20)) MiB held, $(($(val cache_ready) >> 20)) MiB of the cache ready"
for f in $(cd "$MODEL40/m" && find . -type f | sed 's|^\./||' | sort); do
	cmp "$MODEL40/m/$f" "$MNT40/m/$f" || fail "bytes of $f"
done
hwm=$(rss_kb VmHWM)
bound peak_rss_40mb_model_mib "<=" 128 $((hwm / 1024)) "reading a 40 MB model: peak RSS, MiB"
ready=$(val cache_ready) used=$(val cache_used)
[ "$ready" -le $((used + (64 << 20))) ] ||
	fail "$((ready >> 20)) MiB of the cache ready for $((used >> 20)) MiB held"
ok "read every byte of a 40 MB model: peak RSS $((hwm / 1024)) MiB, $((ready >> 20)) MiB of the cache ready for $((used >> 20)) MiB held"
unmount_check "$MNT40" "$MOUNT_PID"

# It shrinks: a 160 MB model read whole, then replaced by a generation
# of other bytes; once the old one is retired (--grace 1), its slots are
# freed and all but 64 MiB of them given back.
MODEL160=$WORK/m160
mkdir -p "$MODEL160"
"$GENMODEL" "$MODEL160/m" --size 160M --shards 4 >/dev/null
SEED_LOG=seed160 start_seed "$MODEL160/m" --grace 1
MNT160=$WORK/mnt160
MOUNT_LOG=mount160 mount_seed "$MNT160"
S=$MNT160/.seedfs/status
# Its files read at once (a loader's threads): a read-ahead keeps its
# chunks until they are read (a pull takes the slots of chunks read
# already), so each byte is pulled about once: 5 % more at most (a
# reader that outruns the grower may take an unread chunk's slot; 0.6
# and 2.5 % measured).
pulled0=$(val bytes_pulled) total2=0 pids=()
for f in $(cd "$MODEL160/m" && find . -type f | sed 's|^\./||' | sort); do
	total2=$((total2 + $(stat -c %s "$MODEL160/m/$f")))
	cmp "$MODEL160/m/$f" "$MNT160/m/$f" >"$WORK/cmp.$(basename "$f")" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "generation 1: $(cat "$WORK"/cmp.* | head -n 3)"; done
pulled=$(($(val bytes_pulled) - pulled0))
[ "$pulled" -le $((total2 + total2 / 20)) ] ||
	fail "generation 1 read at once: $pulled bytes pulled for $total2 (chunks pulled twice)"
ok "generation 1 (160 MB), its files read at once: $pulled bytes pulled for $total2"
"$SEEDFS" prefetch "$MNT160/m" 2>"$WORK/prefetch160.err" || fail "prefetch: $(cat "$WORK/prefetch160.err")"
for f in $(cd "$MODEL160/m" && find . -type f | sed 's|^\./||' | sort); do
	cmp "$MODEL160/m/$f" "$MNT160/m/$f" || fail "bytes of $f"
done
held=$(val cache_used) ready=$(val cache_ready) rss=$(rss_kb VmRSS)
[ "$held" -ge $((150 << 20)) ] || fail "160 MB prefetched: $((held >> 20)) MiB held"
"$GENMODEL" "$WORK/m160b" --size 320M --shards 4 --seed 7 >/dev/null
for f in $(cd "$WORK/m160b" && find . -type f); do
	cp "$WORK/m160b/$f" "$MODEL160/m/$f.tmp" && mv "$MODEL160/m/$f.tmp" "$MODEL160/m/$f"
done
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "published model m generation 2 " "$WORK/seed160.out" && break; sleep 0.05; done
grep -q "published model m generation 2 " "$WORK/seed160.out" || fail "no generation 2: $(tail -n 3 "$WORK/seed160.out")"
cat "$MNT160/m/config.json" >/dev/null # an open: the mount adopts it
gone="generation 1 of m is no longer served"
for _ in $(seq 100); do grep -q "$gone" "$WORK/mount160.log" && break; sleep 0.05; done
grep -q "$gone" "$WORK/mount160.log" || fail "generation 1 not retired: $(tail -n 3 "$WORK/mount160.log")"
t0=$(now_ms)
for _ in $(seq 100); do
	[ "$(val cache_ready)" -le $(($(val cache_used) + (64 << 20))) ] && break
	sleep 0.05
done
ms=$(($(now_ms) - t0))
ready2=$(val cache_ready) used2=$(val cache_used) rss2=$(rss_kb VmRSS)
[ "$ready2" -le $((used2 + (64 << 20))) ] ||
	fail "generation 1 gone: $((ready2 >> 20)) MiB of the cache ready for $((used2 >> 20)) MiB held, $ms ms after"
# The RSS goes down by what was given back (16 MiB of slack: the
# allocator's own pages).
gave_kb=$(((ready - ready2) >> 10))
[ $((rss - rss2)) -ge $((gave_kb - 16 * 1024)) ] ||
	fail "$((gave_kb >> 10)) MiB given back, RSS $((rss >> 10)) -> $((rss2 >> 10)) MiB"
ok "generation 1 ($((held >> 20)) MiB of 160 MB held) retired: $((ready >> 20)) -> $((ready2 >> 20)) MiB ready within $ms ms, RSS $((rss >> 10)) -> $((rss2 >> 10)) MiB"
# Generation 2 (320 MB) read once, not prefetched: the cache reuses the
# slots of chunks read already rather than grow to the model's size (the
# page cache holds what was read): 128 MiB free or read already, what
# is pulled ahead and not read yet (--ahead, 64 MiB), the kernel's
# reads in flight (32 MiB) and a segment at most: 232 MiB, not the
# model's 305 (176-200 measured).
for f in $(cd "$MODEL160/m" && find . -type f | sed 's|^\./||' | sort); do
	cmp "$MODEL160/m/$f" "$MNT160/m/$f" || fail "generation 2: bytes of $f"
done
[ "$(val cache_ready)" -gt "$ready2" ] || fail "the cache did not grow again after giving back"
bound read_once_ready_mib "<=" 232 $(($(val cache_ready) >> 20)) "320 MB read once: MiB of the cache ready"
ok "generation 2 (320 MB) read once, not prefetched: $(($(val cache_ready) >> 20)) MiB of the cache ready, $(($(val cache_used) >> 20)) MiB held, RSS $(($(rss_kb VmRSS) >> 10)) MiB"
unmount_check "$MNT160" "$MOUNT_PID"
