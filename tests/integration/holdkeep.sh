#!/usr/bin/env bash
# A re-seeder keeps the slots a holdings list named for as long as a
# replica goes on with that list: every "unchanged" answer keeps them
# keep_ms again (and says so). Played here by asking its /v1/holdings
# as a replica does, every 250 ms with since=, while the re-seeder's
# cache fills with another model's chunks once the first list's keep_ms
# has passed: it evicts those, never a listed one, and the list stays
# "unchanged". (Before, only a full answer kept its chunks: keep_ms
# after it, they were evicted and their slots reused while replicas
# still read them at the slots the list named.)
source "$(dirname "$0")/lib.sh" "$1"

A=$WORK/a
B=$WORK/b
"$GENMODEL" "$A" --size 1M --shards 1
"$GENMODEL" "$B" --size 24M --shards 2 --seed 7
start_seed a="$A" --model-dir b="$B"

# The re-seeder: 16 chunks of 1 MiB, --timeout 1 (keep_ms 4 s), small
# kernel reads (a model read through it pins a few chunks at a time).
R=$WORK/r
MOUNT_LOG=r
mount_seed "$R" --reseed --listen "$HOST:0" --cache-size 16M --timeout 1 \
	--read-ahead-kb 128
RADDR=$(awk '$1 == "reseed:" { print $2 }' "$R/.seedfs/status")
[ -n "$RADDR" ] || fail "no reseed line: $(cat "$R/.seedfs/status")"
for f in $(cd "$A" && find . -type f | sort); do
	cmp "$A/$f" "$R/a/$f" || fail "re-seeder: a/$f"
done

# jget JSON EXPR: a Python expression over the answer o
jget() { python3 -c 'import json,sys; o=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }
C=$(jget "$(curl -sf "http://$RADDR/v1/models")" \
	'[m["content"] for m in o["models"] if m["model"] == "a"][0]')
full=$(curl -sf "http://$RADDR/v1/holdings?model=a&content=$C") ||
	fail "holdings of a: $(curl -s "http://$RADDR/v1/holdings?model=a&content=$C")"
# The re-seeder answered before this: what that list named is kept
# until keep_ms after it, no later than keep_ms after LISTED.
LISTED=$(now_ms)
V=$(jget "$full" 'o["version"]')
K=$(jget "$full" 'o["keep_ms"]')
held=$(jget "$full" 'sum(1 for f in o["files"] for s in f if s >= 0)')
[ "$held" -ge 4 ] || fail "the re-seeder lists $held chunks of a: $full"
ok "the re-seeder lists $held chunks of a (version $V, keep_ms $K)"

# A replica goes on with that list: asks every 250 ms with since=V.
ask() { curl -sf "http://$RADDR/v1/holdings?model=a&content=$C&since=$V"; }
(
	while :; do
		ask >"$WORK/last.json.new" && mv "$WORK/last.json.new" "$WORK/last.json"
		sleep 0.25
	done
) &
POLLER=$!
PIDS+=("$POLLER")
# past_keep T: wait until the keep of a list answered before T (ms)
# has ended (a margin of one poll, 250 ms, past T + keep_ms)
past_keep() {
	while [ "$(now_ms)" -lt $(($1 + K + 250)) ]; do sleep 0.05; done
	echo "$(($(now_ms) - $1)) ms after the list (keep_ms $K)"
}
# Past the first list's keep, then another model through the same
# cache: 25 MiB through 16 slots, 4 of them listed.
past_keep "$LISTED"
for f in $(cd "$B" && find . -type f | sort); do
	cmp "$B/$f" "$R/b/$f" || fail "re-seeder: b/$f"
done
kill "$POLLER"
wait "$POLLER" 2>/dev/null || true
now=$(ask) || fail "holdings of a since $V: $(curl -s "http://$RADDR/v1/holdings?model=a&content=$C&since=$V")"
[ "$(jget "$now" 'o.get("unchanged", False)')" = True ] ||
	fail "past keep_ms, with a replica still asking since $V, the listed chunks of a were evicted for b's: $(echo "$now" | cut -c1-300)"
ev=$(status_val "$R/.seedfs/status" export_evictions)
[ "${ev:-0}" -eq 0 ] || fail "$ev exported chunks evicted early"
[ "$(jget "$now" 'o.get("keep_ms")')" = "$K" ] ||
	fail "an unchanged answer does not say it kept them keep_ms again: $now"
ok "past keep_ms, and b read through the same cache: a's list unchanged, none of its chunks evicted"
RPID=$MOUNT_PID

# A replica that reads from the re-seeder: it reads a list's slots only
# until the keep it was given ends, and every "unchanged" answer renews
# that, so well past keep_ms it still reads a from the re-seeder.
M=$WORK/m
MOUNT_LOG=m
mount_seed "$M" --timeout 1 --cache-size 16M
for _ in $(seq 200); do
	awk -v s="reseeder: $RADDR " 'index($0, s) == 1 { on = 1; next }
		/^(seed|reseeder): / { on = 0 }
		on && $1 == "seed_holdings:" && $2 == "a" && $3 > 0 { f = 1 }
		END { exit !f }' "$M/.seedfs/status" && break
	sleep 0.05
done
# Its first list of a came before this.
LISTED=$(now_ms)
# It proves itself to this replica first (docs/security.md: until a
# pull from it verified, a re-seeder keeps no seed off a chunk a reader
# waits for): a prefetch of one small file, read-ahead it probes with.
"$SEEDFS" prefetch "$M/a" tokenizer.json >/dev/null 2>&1 || fail "prefetch of a/tokenizer.json"
past_keep "$LISTED"
for f in $(cd "$A" && find . -type f | sort); do
	cmp "$A/$f" "$M/a/$f" || fail "replica: a/$f"
done
got=$(awk -v s="reseeder: $RADDR " 'index($0, s) == 1 { on = 1; next }
	/^(seed|reseeder): / { on = 0 }
	on && $1 == "seed_bytes:" { n += $2 } END { print n + 0 }' "$M/.seedfs/status")
[ "$got" -ge $((2 << 20)) ] ||
	fail "past keep_ms the replica read $got bytes of a from the re-seeder: $(grep -E '^(seed|reseeder)|seed_' "$M/.seedfs/status" | head -20)"
! grep -q "not renewed within their keep" "$WORK/m.log" ||
	fail "the replica's list expired: $(grep "not renewed" "$WORK/m.log" | head -3)"
ok "past keep_ms a replica reads a from the re-seeder ($got bytes): its list renewed by every unchanged answer"
unmount_check "$M" "$MOUNT_PID"
unmount_check "$R" "$RPID"
