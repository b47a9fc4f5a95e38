#!/usr/bin/env bash
# A source that stalls without dying, on a real mount of two seeds of
# one model: SIGSTOP one of them while a reader (one open, 1 MiB reads)
# is going and it has served bytes.  The reader gets every byte right
# and no error; the reads that were on it move to the other seed within
# --timeout (README: a read fails only when the seed "made no progress
# for --timeout"; here another source has the chunks, so they move
# instead) plus a margin; failovers and its stalls are counted.  Then
# SIGCONT: a source that comes back is used again (its hold is 1 s,
# doubling, at most --timeout): its seed_bytes move within a bound.
#   stall.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 12M --shards 3
head -c 48M /dev/urandom >"$MODEL/big.bin"
SEED_LOG=seed1 start_seed "$MODEL"
P1=$SEED_PORT
PID1=$SEED_PID
SEED_LOG=seed2 start_seed "$MODEL"
P2=$SEED_PORT
PID2=$SEED_PID

MNT=$WORK/mnt
S=$MNT/.seedfs/status
TIMEOUT=2
# Margin over --timeout for a stalled read to move and complete: one
# pull from the other seed and the reader's next block, on a loaded
# 2-core machine under ASan.
MARGIN_MS=1500
# block PORT KEY: a field of that seed's status block (seed_bytes: the
# bytes it served; seed_errors: its stalls are the 6th word)
block() { seed_stat "$S" "$1" "$2" "$([ "$2" = seed_errors ] && echo 7 || echo 2)"; }
val() { status_val "$S" "$1"; }

MOUNT_SEEDS="$HOST:$P1,$HOST:$P2" mount_seed "$MNT" --timeout $TIMEOUT \
	--cache-size 32M --ahead 4M --read-ahead-kb 256
F=big.bin
size=$(stat -c %s "$MODEL/$F")
# One open for the whole read (an open asks a seed for its generation);
# each 1 MiB block's completion time goes to times.out.
(
	exec 3<"$MNT/m/$F"
	for ((i = 0; i * 1048576 < size; i++)); do
		dd bs=1M count=1 iflag=fullblock status=none <&3 || exit 1
		echo "$i $(now_ms)" >>"$WORK/times.out"
		sleep 0.05
	done
) >"$WORK/copy" 2>"$WORK/read.err" &
READER=$!
PIDS+=("$READER")

# Seed 1 has served bytes, and the reader is a quarter in.
for _ in $(seq 400); do
	b1=$(block "$P1" seed_bytes)
	[ "${b1:-0}" -gt 0 ] && [ "$(stat -c %s "$WORK/copy")" -ge $((size / 4)) ] && break
	kill -0 "$READER" 2>/dev/null || break
	sleep 0.05
done
b1=$(block "$P1" seed_bytes)
[ "${b1:-0}" -gt 0 ] || fail "seed 1 served nothing before the stall: $(grep ^seed "$S")"
got=$(stat -c %s "$WORK/copy")
[ "$got" -lt $((size / 2)) ] || fail "the reader was past half ($got bytes) before the stall"
fo0=$(val failovers)
st0=$(block "$P1" seed_errors)
t0=$(now_ms)
kill -STOP "$PID1"
b1stop=$(block "$P1" seed_bytes)
ok "seed 1 served $b1 bytes; stopped (SIGSTOP) with the reader at $got of $size bytes"

# A failover is counted, and seed 1's stall, within --timeout + margin.
for _ in $(seq 200); do
	[ "$(val failovers)" -gt "$fo0" ] && [ "$(block "$P1" seed_errors)" -gt "$st0" ] && break
	[ $(($(now_ms) - t0)) -le $((TIMEOUT * 1000 + MARGIN_MS)) ] || break
	sleep 0.05
done
tf=$(($(now_ms) - t0))
[ "$(val failovers)" -gt "$fo0" ] || fail "no failover counted $tf ms after the stall: $(grep -E '^(failovers|seed: )' "$S" | tr '\n' ' ')"
[ "$(block "$P1" seed_errors)" -gt "$st0" ] || fail "seed 1's stall not counted after $tf ms: $(grep ^seed_errors "$S")"
bound failover_ms "<=" $((TIMEOUT * 1000 + MARGIN_MS)) "$tf" "failover and seed 1's stall counted after the stall (--timeout $TIMEOUT s + $MARGIN_MS ms), ms"
ok "failover counted $tf ms after the stall ($(val failovers) pulls moved; seed 1: $(grep -m1 "^seed: $HOST:$P1 " "$S"))"

wait "$READER" || fail "the read failed across the stall: $(cat "$WORK/read.err")"
[ -s "$WORK/read.err" ] && fail "reader errors: $(cat "$WORK/read.err")"
cmp "$MODEL/$F" "$WORK/copy" || fail "bytes read across the stall differ"
[ "$(block "$P1" seed_bytes)" = "$b1stop" ] || fail "a stopped seed served bytes: $b1stop, then $(block "$P1" seed_bytes)"
for k in errors_timeout errors_unavailable errors_checksum errors_transport; do
	[ "$(val $k)" = 0 ] || fail "$k $(val $k): $(grep ^errors "$S" | tr '\n' ' ')"
done
# The longest wait of the reader for one block after the stall: the
# reads on seed 1 moved within --timeout + margin.
gap=$(awk -v t0="$t0" 'NR > 1 && $2 > t0 { g = $2 - (prev > t0 ? prev : t0); if (g > m) m = g }
	{ prev = $2 } END { print m + 0 }' "$WORK/times.out")
[ "$gap" -gt 0 ] || fail "no block read after the stall: $(tail -n 3 "$WORK/times.out")"
bound block_wait_ms "<=" $((TIMEOUT * 1000 + MARGIN_MS)) "$gap" "the reader's longest wait for a block after the stall (--timeout $TIMEOUT s + $MARGIN_MS ms)"
ok "byte-exact, no error; the reader's longest wait for a block after the stall: $gap ms (bound $((TIMEOUT * 1000 + MARGIN_MS)) ms)"

# SIGCONT: seed 1 is used again once its hold ends (1 s, doubling, at
# most --timeout; a failed reconnection holds it again).  Reads that
# miss keep probing: big.bin again, its page cache dropped first (the
# mount's 32 MiB cache no longer holds its first 16 MiB).
kill -CONT "$PID1"
t0=$(now_ms)
b1=$(block "$P1" seed_bytes)
BOUND=$((TIMEOUT * 1000 + 3000))
while [ "$(block "$P1" seed_bytes)" -le "$b1" ] && [ $(($(now_ms) - t0)) -le $BOUND ]; do
	dd if="$MNT/m/$F" iflag=nocache count=0 status=none || fail "dd nocache"
	cmp "$MODEL/$F" "$MNT/m/$F" || fail "after SIGCONT: $F differs"
done
tb=$(($(now_ms) - t0))
b1now=$(block "$P1" seed_bytes)
bound back_bytes ">" 0 $((b1now - b1)) "seed 1 served after SIGCONT, in $tb ms ($(grep -A8 "^seed: $HOST:$P1 " "$S" | tr '\n' ' ')), bytes"
bound back_ms "<=" "$BOUND" "$tb" "seed 1 used again after SIGCONT (--timeout $TIMEOUT s + 3 s), ms"
ok "SIGCONT: seed 1 served again ($((b1now - b1)) bytes) within $tb ms (bound $BOUND ms); $(grep -m1 "^seed: $HOST:$P1 " "$S")"

unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
