#!/usr/bin/env bash
# Replicas that seed: a mount with --reseed serves what it holds; a
# replica told only the seed's address finds it (the seed lists it) and
# reads from it; with the seed gone, everything comes from the
# re-seeder; a replica told only the re-seeder reads everything; a
# partial re-seeder serves its part and the seed the rest; a re-seeder
# that unmounts drops out and readers go on from the seed.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 48M --shards 3
F1=model-00001-of-00003.safetensors
SEED_LOG=seed start_seed "$MODEL"
SP=$SEED_PORT
SPID=$SEED_PID

# bytes MNT PREFIX: bytes a mount read from sources whose status line
# starts with PREFIX ("seed: H:P" or "reseeder: "), summed
bytes() {
	awk -v s="$2" 'index($0, s) == 1 { on = 1; next }
		/^(seed|reseeder): / { on = 0 }
		on && $1 == "seed_bytes:" { n += $2 } END { print n + 0 }' "$1/.seedfs/status"
}
total=$(du -sb "$MODEL" | cut -f1)
# reseeder_ready MNT ADDR: wait until MNT calls re-seeder ADDR reachable
# and has taken one answer of its holdings for model m (asked every
# 250 ms: before that it is not read from)
reseeder_ready() {
	local i
	for i in $(seq 200); do
		grep -q "^reseeder: $2 (reachable)$" "$1/.seedfs/status" &&
			awk -v s="reseeder: $2 " 'index($0, s) == 1 { on = 1; next }
				/^(seed|reseeder): / { on = 0 }
				on && $1 == "seed_holdings:" && $2 == "m" && $3 > 0 { f = 1 }
				END { exit !f }' "$1/.seedfs/status" && return 0
		sleep 0.05
	done
	fail "$1 does not use re-seeder $2 in 10 s: $(grep -E '^(seed|reseeder)' "$1/.seedfs/status")"
}

# Replica 1 holds the whole model and serves it.
R1=$WORK/r1
MOUNT_LOG=r1 # replicas run at once: each its own log ($WORK/rN.log)
MOUNT_SEEDS="$HOST:$SP" mount_seed "$R1" --reseed --listen "$HOST:0" --cache-size 128M
R1PID=$MOUNT_PID
"$SEEDFS" prefetch "$R1/m" >/dev/null 2>"$WORK/pf.err" || fail "prefetch: $(cat "$WORK/pf.err")"
R1ADDR=$(awk '$1 == "reseed:" { print $2 }' "$R1/.seedfs/status")
[ -n "$R1ADDR" ] || fail "no reseed line: $(cat "$R1/.seedfs/status")"
# It announced itself: the seed lists it.
for _ in $(seq 100); do
	curl -sf "http://$HOST:$SP/v1/sources" | grep -q "\"$R1ADDR\"" && break
	sleep 0.1
done
curl -sf "http://$HOST:$SP/v1/sources" | grep -q "\"$R1ADDR\"" ||
	fail "the seed does not list $R1ADDR: $(curl -s "http://$HOST:$SP/v1/sources")"
ok "replica 1 holds the model and serves it on $R1ADDR; the seed lists it"

# Replica 2, told only the seed: it finds replica 1.
R2=$WORK/r2
MOUNT_LOG=r2
MOUNT_SEEDS="$HOST:$SP" mount_seed "$R2" --cache-size 128M
R2PID=$MOUNT_PID
reseeder_ready "$R2" "$R1ADDR"
# The seed stops: replica 2 reads everything, byte-exact, from replica 1.
kill -9 "$SPID"
for f in $(cd "$MODEL" && find . -type f | sort); do
	cmp "$MODEL/$f" "$R2/m/$f" || fail "replica 2: $f"
done
b1=$(bytes "$R2" "reseeder: $R1ADDR")
bound reseeder_permille ">=" 900 $((b1 * 1000 / total)) "replica 1 served $b1 of $total bytes, per mille"
ok "seed stopped: replica 2 (told only the seed) read all $total bytes byte-exact, $b1 from replica 1"
unmount_check "$R2" "$R2PID"

# Replica 3, told only replica 1 (the seed is gone): everything.
R3=$WORK/r3
MOUNT_LOG=r3
MOUNT_SEEDS="$R1ADDR" mount_seed "$R3" --cache-size 128M
diff -r "$MODEL" "$R3/m" || fail "replica 3 differs"
# Given as a --seed, it is a re-seeder all the same (its manifest says
# holdings): what it serves is checked against SHA-256, not XXH3 alone.
grep -qx "reseeder: $R1ADDR (reachable)" "$R3/.seedfs/status" ||
	fail "replica 3 does not take $R1ADDR for a re-seeder: $(grep -E '^(seed|reseeder):' "$R3/.seedfs/status")"
grep -qx "seed_checked: SHA-256 (served since its last failure)" "$R3/.seedfs/status" ||
	fail "replica 3 does not check $R1ADDR's chunks against SHA-256: $(grep seed_checked "$R3/.seedfs/status")"
sha=$(status_val "$R3/.seedfs/status" checked_sha256)
[ "${sha:-0}" -gt 0 ] || fail "replica 3 checked no chunk against SHA-256"
ok "replica 3 told only the re-seeder: identical, its $sha chunks checked against SHA-256"
unmount_check "$R3" "$MOUNT_PID"
unmount_check "$R1" "$R1PID"

# A partial re-seeder: replica 4 holds one shard; replica 5 reads the
# whole model, that shard from replica 4 and the rest from the seed.
SEED_LOG=seed2 start_seed "$MODEL"
SP=$SEED_PORT
R4=$WORK/r4
MOUNT_LOG=r4
MOUNT_SEEDS="$HOST:$SP" mount_seed "$R4" --reseed --listen "$HOST:0" --cache-size 128M
R4PID=$MOUNT_PID
"$SEEDFS" prefetch "$R4/m" "$F1" >/dev/null 2>"$WORK/pf.err" || fail "prefetch: $(cat "$WORK/pf.err")"
R4ADDR=$(awk '$1 == "reseed:" { print $2 }' "$R4/.seedfs/status")
R5=$WORK/r5
MOUNT_LOG=r5
MOUNT_SEEDS="$HOST:$SP" mount_seed "$R5" --cache-size 128M
R5PID=$MOUNT_PID
reseeder_ready "$R5" "$R4ADDR"
# Until a pull from it verified, a re-seeder keeps no seed off a chunk a
# reader waits for (docs/security.md): a reader at full speed takes a
# small file from the seed while the first pull from the re-seeder
# connects (on a loaded machine, all but one chunk of this 17 MB file).
# A first read of F1 starts its read-ahead, which the re-seeder holds
# for its first pull; once that verified, it serves the rest.
dd if="$R5/m/$F1" of=/dev/null bs=64k count=4 status=none ||
	fail "replica 5 cannot read $F1"
for i in $(seq 200); do
	awk -v s="reseeder: $R4ADDR " 'index($0, s) == 1 { on = 1; next }
		/^(seed|reseeder): / { on = 0 }
		on && /^seed_checked: SHA-256 \(served since/ { f = 1 }
		END { exit !f }' "$R5/.seedfs/status" && break
	[ "$i" -lt 200 ] || fail "re-seeder $R4ADDR not proven in 10 s: $(grep -A12 "^reseeder: $R4ADDR" "$R5/.seedfs/status")"
	sleep 0.05
done
diff -r "$MODEL" "$R5/m" || fail "replica 5 differs"
f1=$(stat -c %s "$MODEL/$F1")
b4=$(bytes "$R5" "reseeder: $R4ADDR")
bs=$(bytes "$R5" "seed: $HOST:$SP")
# All of F1 but its first chunks (1 MiB each: the seed's while the first
# pull from the re-seeder connects).
bound part_short_kib "<=" 4096 $(((f1 - b4 + 1023) / 1024)) "replica 4 served $b4 bytes of its part ($f1): short by, KiB"
bound part_over_kib "<=" 2048 $(((b4 - f1 + 1023) / 1024)) "replica 4 served $b4 bytes, more than it holds ($f1), by KiB"
bound seed_short_kib "<=" 4096 $(((total - f1 - bs + 1023) / 1024)) "the seed served $bs of the rest ($((total - f1))): short by, KiB"
ok "a partial re-seeder served its part ($b4 bytes of $F1's $f1), the seed the rest ($bs)"
unmount_check "$R5" "$R5PID"

# A re-seeder that unmounts simply drops out: a reader of replica 6,
# reading from both, goes on from the seed.
"$SEEDFS" prefetch "$R4/m" >/dev/null 2>&1 || fail "prefetch all"
R6=$WORK/r6
MOUNT_LOG=r6
MOUNT_SEEDS="$HOST:$SP" mount_seed "$R6" --cache-size 32M --ahead 4M --read-ahead-kb 256
R6PID=$MOUNT_PID
reseeder_ready "$R6" "$R4ADDR"
F2=model-00002-of-00003.safetensors
size=$(stat -c %s "$MODEL/$F2")
# The reader reads 1 MiB at a time; at a third of the file it waits for
# $WORK/go (what it has not read then is more than --ahead: some must
# come after the re-seeder has left).
third=$((size / 3 / 1048576))
(
	for ((i = 0; i * 1048576 < size; i++)); do
		if [ $i = $third ]; then
			: >"$WORK/at-third"
			for _ in $(seq 1200); do [ -e "$WORK/go" ] && break; sleep 0.05; done
			[ -e "$WORK/go" ] || exit 1
		fi
		dd if="$R6/m/$F2" bs=1M skip=$i count=1 status=none || exit 1
		sleep 0.05
	done
) >"$WORK/out" 2>"$WORK/read.err" &
READER=$!
PIDS+=("$READER")
# The re-seeder leaves once the reader is at the third and has read
# from it (its bytes in replica 6's status).
b4=0
for _ in $(seq 400); do
	b4=$(bytes "$R6" "reseeder: $R4ADDR")
	[ -e "$WORK/at-third" ] && [ "$b4" -gt 0 ] && break
	kill -0 "$READER" 2>/dev/null || break
	sleep 0.05
done
[ "$b4" -gt 0 ] || fail "replica 6 read nothing from re-seeder $R4ADDR: $(grep -E '^(seed|reseeder)' "$R6/.seedfs/status")"
[ -e "$WORK/at-third" ] || fail "the reader did not reach a third of $F2: $(cat "$WORK/read.err")"
bs0=$(bytes "$R6" "seed: $HOST:$SP")
unmount_check "$R4" "$R4PID"
: >"$WORK/go"
wait "$READER" || fail "the read failed when the re-seeder left: $(cat "$WORK/read.err")"
cmp "$MODEL/$F2" "$WORK/out" || fail "bytes read across the re-seeder leaving differ"
bs1=$(bytes "$R6" "seed: $HOST:$SP")
[ "$bs1" -gt "$bs0" ] || fail "the seed served nothing after the re-seeder left ($bs0, then $bs1 bytes)"
ok "a re-seeder unmounted mid-read: $b4 bytes from it before; the reader went on from the seed ($bs0 -> $bs1 bytes), byte-exact"
unmount_check "$R6" "$R6PID"
sanitizers_clean
