#!/usr/bin/env bash
# make sim's short form: the simulator (sim/sim.c, the cache's own
# policy over modelled links) holds to a real run, and runs clean.
#   - one replica alone takes the model's time over its link (within 5 %);
#   - the case bench-fanout measures for real (8 replicas, 69.1 MiB,
#     100 Mbit/s; README's (b): all done in 10.1 s, the seed sent
#     1.17 x the model) within 25 %: all done in 7.6-12.6 s, the seed
#     sent at most 1.46 x;
#   - the same run twice prints the same row (no state from outside);
#   - 64 replicas of the 140 GB model's first 1024 chunks all finish;
#   - the policy's fleet mode sends each chunk from the seed once.
#   sim.sh SIM
set -euo pipefail
SIM=$1
fail() { echo "FAIL: $*"; exit 1; }
row() { "$SIM" "$@" 2>/dev/null; }
check() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v + 0 >= lo + 0 && v + 0 <= hi + 0) }'; }

set -- $(row -n 1 --size 69.1M --gbit 0.1 --lat-us 300)
check "$5" 0.95 1.05 || fail "one replica alone: $3 s against $4 s over its link (ratio $5)"
echo "ok: one replica alone in $3 s ($5 x the link's time)"

a=$(row -n 8 --size 69.1M --gbit 0.1 --lat-us 300)
b=$(row -n 8 --size 69.1M --gbit 0.1 --lat-us 300)
[ "$a" = "$b" ] || fail "two runs differ: '$a' and '$b'"
set -- $a
check "$3" 7.6 12.6 || fail "bench-fanout's case: all done in $3 s, the real run 10.1 s (25 %: 7.6-12.6)"
check "$6" 0 1.46 || fail "bench-fanout's case: the seed sent $6 x, the real run 1.17 x (at most 1.46)"
echo "ok: bench-fanout's case all done in $3 s (real 10.1 s), the seed sent $6 x (real 1.17 x)"

out=$("$SIM" -n 64 --size 140G --chunks 1024 2>/dev/null) || fail "64 replicas: $out"
case $out in *UNFINISHED*) fail "64 replicas: $out" ;; esac
echo "ok: 64 replicas of 1024 chunks: $out"

# The policy's fleet mode (lanes of every replica, members at ring
# offsets -1, -2, -4, ...): the seed sends each chunk once.
out=$("$SIM" -n 64 --size 140G --chunks 2048 --queue 2048 --lanes fleet 2>/dev/null) || fail "fleet lanes: $out"
set -- $out
check "$6" 0.99 1.05 || fail "fleet lanes, 64 replicas: the seed sent $6 x the model (at most 1.05)"
# (its time: the tree's depth of hops, each a holdings answer apart,
# over a model of 0.17 s: measured 8.75 x)
check "$5" 1 12 || fail "fleet lanes, 64 replicas: all done in $5 x alone (at most 12)"
echo "ok: fleet lanes, 64 replicas of 2048 chunks: the seed sent $6 x, all done in $5 x alone"
