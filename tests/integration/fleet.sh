#!/usr/bin/env bash
# The fleet's lanes on real mounts: the fan-out bench's (b) with 5
# replicas in network namespaces on 200 Mbit/s links and a 16 MiB model,
# the seed told to give each re-seeder its place in the fleet from 2 of
# them on (--fleet-from 2; by default 9, more than a replica's peers).
# Each replica must say it was given its place among 5 and works with
# 3 peers (places -1, -2 and -4), read every byte exact (bench/fanout.sh
# fails otherwise), and read from the others; the seed must send at
# most 1.5 x the model (each chunk about once, not once a replica).
source "$(dirname "$0")/lib.sh" "$1"
[ "$(id -u)" = 0 ] || { echo "skip: network namespaces need root"; exit 77; }

R=$WORK/results
FANOUT_N=5 FANOUT_SIZE=16M FANOUT_RATE=200mbit FANOUT_SHORT=1 FANOUT_KEEP=1 \
	FANOUT_SCENARIOS="b" FANOUT_SEED_OPTS="--fleet-from 2" \
	FANOUT_MOUNT_OPTS="--timeout 5" FANOUT_RESULTS=$R \
	bash "$(dirname "$0")/../../bench/fanout.sh" "$BUILD" >"$WORK/fanout.out" 2>&1 ||
	fail "bench/fanout.sh: $(grep -v '^20' "$WORK/fanout.out" | tail -n 20)"
kept=$(sed -n 's/^fanout: kept //p' "$WORK/fanout.out")
[ -d "$kept" ] || fail "no logs kept: $(tail -n 5 "$WORK/fanout.out")"
cp -r "$kept/out-b" "$WORK/logs" && rm -rf "$kept"
[ -n "${FLEET_KEEP:-}" ] && cp -r "$WORK/logs" "$FLEET_KEEP"
val() { awk -v k="$1" '$1 == k { print $2 }' "$R"; }
bytes=$(val bytes)
placed=$( (grep -l "fleet lanes: 5 replicas, this one the [0-4]-th: .* from 3 peers" "$WORK"/logs/*.log 2>/dev/null || true) | wc -l)
[ "$placed" = 5 ] || fail "$placed of 5 replicas were given their place in the fleet: $(grep -h 'lanes' "$WORK"/logs/*.log | head)"
places=$(grep -ho "5 replicas, this one the [0-4]-th" "$WORK"/logs/*.log | sort -u | wc -l)
[ "$places" = 5 ] || fail "the replicas' places are not 0 to 4: $(grep -ho 'this one the [0-9]*-th' "$WORK"/logs/*.log | sort | uniq -c)"
n=$(awk '$1 == "reseeder_bytes" && $2 > 0' "$R" | wc -l)
bound from_others ">=" 4 "$n" "replicas that read from the others ($(tr '\n' ' ' <"$R"))"
sent=$(val seed_sent_b)
bound seed_sent_pct "<=" 150 $(((sent * 100 + bytes - 1) / bytes)) "the seed sent $sent bytes for a model of $bytes, % of the model"
sanitizers_clean
ok "fleet lanes, 5 replicas: $(grep -E '^\| \(b\)' "$WORK/fanout.out" |
	awk -F'|' '{ printf "all done %s, seed sent %s", $3, $5 }'); $n of 5 read from the others"
