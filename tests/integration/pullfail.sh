#!/usr/bin/env bash
# A failed pull touches only its own file.  One shard of four truncated
# on the seed's disk (the seed withdraws it) and read in a loop by two
# readers, while three readers read the other shards whole, again and
# again, for 6 s: every read of the withdrawn shard ends in EIO, every
# read of the others is byte-exact (cmp against the source), none of
# them fails or waits long, and the connection is never made anew.  The
# mount's cache (64 MiB) is smaller than the three shards it reads
# (96 MiB) and the files bypass the page cache (direct_io), so the
# readers of the other shards pull all along.
#
# nosums: the seed publishes no chunk checksums (--checksum-chunk 0), so
# it takes the withdrawn shard's keys away and a read of it breaks the
# connection under every pull in flight on it (tcp, sockets).  The mount
# pulls those again alone, fails only the one that fails alone, and
# fails that shard's reads unpulled for a while: the same outcome, with
# a few reconnections.
#   pullfail.sh BUILD_DIR [PROTOCOL [nosums]]
source "$(dirname "$0")/lib.sh" "$1"
PROTO=${2:-tcp}
MODE=${3:-}
SEED_ARGS=()
[ "$MODE" = nosums ] && SEED_ARGS=(--checksum-chunk 0)
RUN_S=6
# The longest one whole read of a 32 MiB shard may take (0.4-1 s here
# under load); a broken neighbour used to cost 0.5-3 s and an EIO.
SLOW_MS=${SLOW_MS:-2500}
# Whole reads each reader makes at least (about 15-45 here).
MIN_READS=3
# The sanitizers' builds run several times slower: the bounds are.
[ "$SFS_BUILD_KIND" = normal ] || { SLOW_MS=8000; MIN_READS=1; }

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 128M --shards 4
cp -a "$MODEL" "$WORK/orig"
F1=model-00001-of-00004.safetensors
F2=model-00002-of-00004.safetensors
F3=model-00003-of-00004.safetensors
F4=model-00004-of-00004.safetensors
start_seed "$MODEL" --protocol "$PROTO" --grace 30 "${SEED_ARGS[@]}"
MNT=$WORK/mnt
mount_seed "$MNT" --protocol "$PROTO" --cache-size 64M -o direct_io
M=$MNT/m
for f in $F1 $F2 $F3 $F4; do
	cmp "$WORK/orig/$f" "$M/$f" || fail "$f before"
done

truncate -s 1M "$MODEL/$F2"
for _ in $(seq 100); do grep -q "$F2 changed on disk under the seed" "$WORK/seed.err" && break; sleep 0.02; done
grep -q "$F2 changed on disk under the seed: its bytes are withdrawn" "$WORK/seed.err" ||
	fail "the seed did not withdraw $F2: $(tail -n 2 "$WORK/seed.err")"

# reader NAME FILE: whole reads of FILE until $WORK/stop exists, one
# line each in $WORK/NAME.res: "ok MS", "eio MS" or "bad MS WHAT".
reader() {
	local name=$1 f=$2 t0 el out=$WORK/$1.res
	: >"$out"
	while [ ! -e "$WORK/stop" ]; do
		t0=$(now_ms)
		if cmp "$WORK/orig/$f" "$M/$f" >"$WORK/$name.cmp" 2>&1; then
			echo "ok $(($(now_ms) - t0))" >>"$out"
		else
			el=$(($(now_ms) - t0))
			if grep -q "Input/output error" "$WORK/$name.cmp"; then
				echo "eio $el" >>"$out"
			else
				echo "bad $el $(head -c 200 "$WORK/$name.cmp" | tr '\n' ' ')" >>"$out"
			fi
		fi
	done
}
rpids=()
for n in 1 2; do
	reader "w$n" "$F2" &
	rpids+=($!)
	PIDS+=($!)
done
for f in $F1 $F3 $F4; do
	reader "r${f:10:1}" "$f" &
	rpids+=($!)
	PIDS+=($!)
done
sleep "$RUN_S"
touch "$WORK/stop"
for p in "${rpids[@]}"; do wait "$p" || fail "reader $p: $?"; done

# The withdrawn shard: EIO every time, never its bytes read whole (a
# truncated shard has no 32 MiB to give; cmp would say EOF or differ).
wn=$(cat "$WORK"/w?.res | wc -l)
weio=$(cat "$WORK"/w?.res | grep -c "^eio " || true)
[ "$wn" -ge "$MIN_READS" ] || fail "the withdrawn shard was read $wn time(s) in $RUN_S s"
bound withdrawn_not_eio = 0 $((wn - weio)) "the withdrawn shard's reads not EIO, of $wn: $(grep -vh "^eio " "$WORK"/w?.res | head -n 3)"
# The others: every read byte-exact and none slow.
for f in $F1 $F3 $F4; do
	r=$WORK/r${f:10:1}.res
	n=$(wc -l <"$r")
	good=$(grep -c "^ok " "$r" || true)
	max=$(awk '{ if ($2 > m) m = $2 } END { print m + 0 }' "$r")
	[ "$n" -ge "$MIN_READS" ] || fail "$f read $n time(s) in $RUN_S s"
	bound others_failed = 0 $((n - good)) "$f beside the withdrawn shard: reads failed of $n: $(grep -v "^ok " "$r" | head -n 3 | tr '\n' ';')"
	bound slowest_read_ms "<=" "$SLOW_MS" "$max" "$f: the slowest whole read beside the withdrawn shard, ms"
	ok "$f: $n whole reads byte-exact beside the withdrawn shard, the slowest $max ms"
done
ok "the withdrawn shard: $wn reads, each EIO"
n=$(grep -c "connected again" "$WORK/mount.log" || true)
if [ "$MODE" = nosums ]; then
	# Each hold of the shard's refusal (1, 2, 4, 5 s) ends in one pull
	# of it beside the others and one alone: two reconnections a hold.
	grep -q "a pull of it failed alone on its connection" "$WORK/mount.log" ||
		fail "no pull failed alone: $(grep -m 3 "W cache" "$WORK/mount.log")"
	bound reconnections_most "<=" 12 "$n" "the connection made anew in $RUN_S s"
	alone=$(status_val "$MNT/.seedfs/status" pulls_retried_alone)
	bound pulls_retried_alone ">=" 1 "${alone:-0}" "pulls_retried_alone in status (${alone:-none})"
	ok "the seed reachable; $n reconnection(s), $alone pull(s) retried alone"
else
	bound reconnections = 0 "$n" "the connection made anew for one withdrawn file"
	ok "no reconnection"
fi
grep -q "^seed: $HOST:$SEED_PORT (reachable)$" "$MNT/.seedfs/status" ||
	fail "status: $(grep ^seed: "$MNT/.seedfs/status")"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
