#!/usr/bin/env bash
# One model, many sources: two seeds of the same files striped (each
# serves at least 30 %, byte-exact), one killed mid-read (the read goes
# on from the other, no error, status shows it), a third with one file
# changed (refused, named in status), two directories from one seed,
# pull from two seeds.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 96M --shards 3
F=model-00002-of-00003.safetensors
head -c 80M /dev/urandom >"$MODEL/big.bin"
SEED_LOG=seed1 start_seed "$MODEL"
P1=$SEED_PORT
PID1=$SEED_PID
SEED_LOG=seed2 start_seed "$MODEL"
P2=$SEED_PORT
PID2=$SEED_PID

# bytes PORT: what the mount read from that seed (its status block)
bytes() {
	awk -v s="seed: $HOST:$1 " 'index($0, s) == 1 { on = 1; next }
		/^seed: / { on = 0 }
		on && $1 == "seed_bytes:" { print $2 }' "$MNT/.seedfs/status"
}

MNT=$WORK/mnt
MOUNT_SEEDS="$HOST:$P1,$HOST:$P2" mount_seed "$MNT"
M=$MNT/m
for f in "$MODEL"/*.safetensors; do
	cmp "$f" "$M/$(basename "$f")" || fail "striped read of $(basename "$f")"
done
b1=$(bytes "$P1")
b2=$(bytes "$P2")
total=$((b1 + b2))
[ "$total" -gt 0 ] || fail "no bytes counted: $(cat "$MNT/.seedfs/status")"
# 49-50 % each on an idle machine; pulls are taken, not assigned, so the
# seed that gets the CPU serves more: 38-61 % seen with four other
# builds and tests on these 2 cores.  At least 30 % each; under
# AddressSanitizer (2-3 x slower) 15 % each (70/29 seen in CI, with the
# other tests of its pass beside it); under ThreadSanitizer (5-15 x
# slower, scheduling decides) 5 % each (87/12 seen in a CI-like run).
want=30
[ "$SFS_BUILD_KIND" = asan ] && want=15
[ "$SFS_BUILD_KIND" = tsan ] && want=5
lo=$((b1 < b2 ? b1 : b2))
bound share_pct ">=" $want $((lo * 100 / total)) "not striped: seed 1 served $b1, seed 2 $b2 bytes; the smaller share, %"
ok "striped over two seeds: byte-exact; seed 1 served $((b1 * 100 / total))%, seed 2 $((b2 * 100 / total))%"
grep -q "^model: m generation 1 .* sources 2 " "$MNT/.seedfs/status" ||
	fail "status: $(grep ^model: "$MNT/.seedfs/status")"
unmount_check "$MNT" "$MOUNT_PID"

# Kill -9 one of them mid-read: a slow reader (1 MiB at a time, a small
# cache and read-ahead, the kernel's too) is a third of the way into
# the largest file when seed 1 stops, then dies.
MOUNT_SEEDS="$HOST:$P1,$HOST:$P2" mount_seed "$MNT" --cache-size 32M --ahead 4M \
	--read-ahead-kb 256
F=big.bin
size=$(stat -c %s "$MODEL/$F")
# Each 1 MiB block's completion time goes to times.out.
(
	for ((i = 0; i * 1048576 < size; i++)); do
		dd if="$M/$F" bs=1M skip=$i count=1 status=none || exit 1
		echo "$i $(now_ms)" >>"$WORK/times.out"
		sleep 0.05
	done
) >"$WORK/out" 2>"$WORK/read.err" &
READER=$!
PIDS+=("$READER")
for _ in $(seq 200); do
	[ "$(stat -c %s "$WORK/out" 2>/dev/null || echo 0)" -ge $((size / 3)) ] && break
	sleep 0.05
done
[ "$(stat -c %s "$WORK/out")" -ge $((size / 3)) ] ||
	fail "the reader did not reach a third of $F in 10 s: $(stat -c %s "$WORK/out") bytes; $(cat "$WORK/read.err")"
# unread: connections to seed 1 holding bytes it has not read (a request
# to its control port, accepted or not, or pulls on its fabric endpoint)
unread() {
	{
		ss -Htn state established "( sport = :$P1 )"
		ss -Htnp state established | awk -v me="pid=$PID1," 'index($0, me)'
	} | awk '$1 > 0 { n++ } END { print n + 0 }'
}
# Stopped first, and killed once the mount waits on it: the reader's
# next open asks it (the leader) for its generation, or pulls are out.
before2=$(bytes "$P2")
t0=$(now_ms)
kill -STOP "$PID1"
for _ in $(seq 200); do
	[ "$(unread)" -gt 0 ] && break
	sleep 0.05
done
if [ "$(unread)" = 0 ]; then
	kill -9 "$PID1"
	fail "nothing waits on the stopped seed 1 after 10 s: $(ss -Htn state established "( sport = :$P1 )"; ss -Htnp | awk -v me="pid=$PID1," 'index($0, me)')"
fi
echo "the mount waits on the stopped seed 1 after $(($(now_ms) - t0)) ms: $(unread) connection(s) with unread bytes"
kill -9 "$PID1"
wait "$READER" || fail "the read failed after seed 1 died: $(cat "$WORK/read.err")"
cmp "$MODEL/$F" "$WORK/out" || fail "bytes read across the failover differ"
F=model-00002-of-00003.safetensors
[ -s "$WORK/read.err" ] && fail "errors: $(cat "$WORK/read.err")"
el=$(($(now_ms) - t0))
fo=$(awk '$1 == "failovers:" { print $2 }' "$MNT/.seedfs/status")
after2=$(bytes "$P2")
# Two thirds of the file came after seed 1 stopped: from seed 2.
[ $((after2 - before2)) -ge $((size / 2)) ] ||
	fail "seed 2 served $((after2 - before2)) of $size bytes after seed 1 died"
errs=$(awk '$1 ~ /^errors_(timeout|unavailable|checksum):$/ { n += $2 } END { print n + 0 }' "$MNT/.seedfs/status")
bound errors_after_stop = 0 "$errs" "errors counted after seed 1 stopped: $(grep ^errors "$MNT/.seedfs/status" | tr '\n' ' ')"
grep -q "^seed: $HOST:$P1 (\(unreachable\|reconnecting\)" "$MNT/.seedfs/status" ||
	fail "status does not show seed 1 gone: $(grep "^seed: $HOST:$P1" "$MNT/.seedfs/status")"
grep -q "^seed: $HOST:$P2 (reachable)$" "$MNT/.seedfs/status" || fail "seed 2 not reachable"
# The reader's longest wait for one block after seed 1 stopped: a
# stalled source's pulls move within 2 s (docs/usage.md, the default
# --timeout 10 being longer), plus the margin of stall.sh (one pull from
# the other seed and the reader's next block, a loaded machine, ASan).
MOVE_MS=2000 MARGIN_MS=1500
gap=$(awk -v t0="$t0" 'NR > 1 && $2 > t0 { g = $2 - (prev > t0 ? prev : t0); if (g > m) m = g }
	{ prev = $2 } END { print m + 0 }' "$WORK/times.out")
[ "$gap" -gt 0 ] || fail "no block read after seed 1 stopped: $(tail -n 3 "$WORK/times.out")"
bound block_wait_ms "<=" $((MOVE_MS + MARGIN_MS)) "$gap" "the reader's longest wait for a block after seed 1 stopped, ms"
ok "seed 1 stopped and killed a third into an 80 MiB read: the rest ($((after2 - before2)) bytes) came from seed 2 in $el ms, byte-exact, no error, the longest wait for a block $gap ms (bound $((MOVE_MS + MARGIN_MS)) ms); $fo pulls moved; status: $(grep "^seed: $HOST:$P1" "$MNT/.seedfs/status")"
unmount_check "$MNT" "$MOUNT_PID"

# A third seed with one file changed: refused, and status names the
# file and the field.
cp -r "$MODEL" "$WORK/m3"
printf 'x' | dd of="$WORK/m3/$F" bs=1 seek=100000 conv=notrunc status=none
SEED_LOG=seed3 start_seed "$WORK/m3" --name m
P3=$SEED_PORT
MOUNT_SEEDS="$HOST:$P2,$HOST:$P3" mount_seed "$MNT"
cmp "$MODEL/$F" "$M/$F" || fail "read with a refused source"
line=$(awk -v s="seed: $HOST:$P3 " 'index($0, s) == 1 { on = 1; next }
	/^seed: / { on = 0 } on && /^seed_model:/' "$MNT/.seedfs/status")
echo "$line" | grep -q "^seed_model: m generation 1 refused: files: $F: xxh3 0x[0-9a-f]* here, 0x[0-9a-f]* there$" ||
	fail "status: $line"
bound refused_seed_bytes = 0 "$(bytes "$P3")" "the refused seed was read, bytes"
grep -q "not reading m from $HOST:$P3: files: $F: xxh3" "$WORK/mount.log" || fail "not logged"
ok "a seed with one file changed is refused, never read: $line"
unmount_check "$MNT" "$MOUNT_PID"

# seedfs pull from two seeds, one of them refused.
"$SEEDFS" pull --seed "$HOST:$P2,$HOST:$P3" m "$WORK/copy" 2>"$WORK/pull.err" ||
	fail "pull: $(cat "$WORK/pull.err")"
diff -r "$MODEL" "$WORK/copy" || fail "pull is not identical"
ok "pull --seed with two seeds: identical"

# Two directories from one seed: the weights and an engine's caches.
mkdir -p "$WORK/jit/triton/abc"
head -c 3000000 /dev/urandom >"$WORK/jit/triton/abc/kernel.cubin"
echo '{"k": 1}' >"$WORK/jit/triton/abc/kernel.json"
SEED_LOG=seed4 start_seed "$MODEL" --model-dir "jit=$WORK/jit"
MOUNT_SEEDS="$HOST:$SEED_PORT" mount_seed "$MNT"
[ "$(ls "$MNT")" = "$(printf 'jit\nm')" ] || fail "listing: $(ls "$MNT")"
diff -r "$WORK/jit" "$MNT/jit" || fail "the second directory differs"
cmp "$MODEL/$F" "$MNT/m/$F" || fail "the weights beside it"
grep -q "^model: jit generation 1 " "$MNT/.seedfs/status" || fail "status: no jit model"
ok "two directories from one seed: $(ls "$MNT" | tr '\n' ' ')byte-exact"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
