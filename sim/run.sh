#!/usr/bin/env bash
# make sim: the swarm at fleet scale, simulated (sim/sim.c: the cache's
# own policy, cache/swarm.c, over modelled links).  One row per run:
#   fanout  the case bench-fanout measures for real (8 replicas, a
#           69.1 MiB model, 100 Mbit/s links), to hold the model to a
#           real run: README's (b) row, 2026-12-02 06:44, all done in
#           10.1 s, the seed sent 1.17 x the model;
#   N=8, 64, 256, 1000 replicas loading a 140 GB model at 1 MiB chunks
#           on 100 Gbit/s links, all started together, twice:
#           members  lanes as the cache sets them today: the replica
#                    and the (at most 8) re-seeders the seed lists it;
#           fleet    the policy's fleet mode (cache/swarm.c, sw->fleet):
#                    every replica in the lanes, each working with the
#                    replicas at ring offsets -1, -2, -4, ... (what the
#                    seed lists each re-seeder from --fleet-from on, up
#                    to 1,024 of them), a chunk going down a binomial
#                    tree from its owner;
#           both with the queue holding the whole model (prefetch's).
# The goals at N=1000 (issue 26): all done within 1.3 x of one replica
# alone on its link, the seed sends at most 1.5 x the model, control
# bytes at most 1 % of data.  Each is said met or missed.
#
#   sim/run.sh SIM
# Environment: SIM_CHUNKS (the 140 GB model's first this many chunks
# are simulated; 0: all 143,360 (140 GiB); default 16384), SIM_NS ("8 64 256
# 1000"), SIM_STAGGER_MS (0: replicas start this far apart).
set -euo pipefail
SIM=${1:?usage: sim/run.sh SIM}
CHUNKS=${SIM_CHUNKS:-16384}
NS=${SIM_NS:-8 64 256 1000}
STAGGER=${SIM_STAGGER_MS:-0}

printf '%-7s %5s %8s %9s %9s %6s %8s %10s %s\n' run N chunks "done s" \
	"alone s" ratio "seed x" control "bound by"
"$SIM" --label fanout -n 8 --size 69.1M --gbit 0.1 --lat-us 300 2>/dev/null
echo "       (bench-fanout (b), real, 2026-12-02 06:44: 10.1 s, seed 1.17 x)"
q=$CHUNKS
[ "$q" = 0 ] && q=143360
declare -A last why
ERR=$(mktemp)
trap 'rm -f "$ERR"' EXIT
for n in $NS; do
	for lanes in members fleet; do
		opts=(--queue "$q")
		row=$("$SIM" --label $lanes -n "$n" --size 140G --chunk 1M \
			--gbit 100 --lat-us 20 --chunks "$CHUNKS" \
			--stagger-ms "$STAGGER" --lanes $lanes "${opts[@]}" \
			2>"$ERR") || true
		why[$lanes]=$(sed -n 's/^sim: why: //p' "$ERR")
		if [ -n "$row" ]; then
			last[$lanes]=$row
		else
			row="$lanes  $n (no row: the run failed; SIM_CHUNKS smaller?)"
			last[$lanes]="$lanes $n"
		fi
		echo "$row"
	done
done
[ "$CHUNKS" = 0 ] || echo "(the model's first $CHUNKS chunks of 143,360; SIM_CHUNKS=0 runs them all: N=1000 takes about 40 minutes, docs/sim.md)"
# The goals, on each mode's last row.
verdict() { awk -v v="$2" -v b="$3" -v what="$1" 'BEGIN { printf "  %s: %s (%s, goal %s)\n", what, (v + 0 <= b + 0) ? "met" : "missed", v, b }'; }
for lanes in members fleet; do
	set -- ${last[$lanes]}
	ratio=${6:-inf} seedx=${7:-inf} ctl=${8:-inf}
	ctl=${ctl%\%}
	echo "goals at N=$2, $lanes lanes:"
	verdict "all done / alone" "$ratio" 1.3
	verdict "seed sent x model" "$seedx" 1.5
	verdict "control / data %" "$ctl" 1
	[ -z "${why[$lanes]:-}" ] || echo "  why (from this run): ${why[$lanes]}"
done
