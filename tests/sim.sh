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
# milli DIR V: V (a decimal the simulator printed, not negative) times
# 1000, rounded down (DIR floor) or up (ceil), from its digits (no
# binary fraction): a bound on it holds exactly when it holds on V.
milli() {
	awk -v d="$1" -v v="$2" 'BEGIN { n = split(v, p, "."); f = (n > 1 ? p[2] : "") "000"
		m = p[1] * 1000 + substr(f, 1, 3); if (d == "ceil" && substr(f, 4) ~ /[1-9]/) m++
		printf "%d", m }'
}
# bound KEY OP LIMIT VALUE WHAT...: as in the integration tests.
# shellcheck source=tests/bound.sh
source "$(dirname "$0")/bound.sh"

set -- $(row -n 1 --size 69.1M --gbit 0.1 --lat-us 300)
bound alone_permille ">=" 950 "$(milli floor "$5")" "one replica alone: $3 s against $4 s over its link, per mille"
bound alone_most_permille "<=" 1050 "$(milli ceil "$5")" "one replica alone: $3 s against $4 s over its link, per mille"
echo "ok: one replica alone in $3 s ($5 x the link's time)"

a=$(row -n 8 --size 69.1M --gbit 0.1 --lat-us 300)
b=$(row -n 8 --size 69.1M --gbit 0.1 --lat-us 300)
[ "$a" = "$b" ] || fail "two runs differ: '$a' and '$b'"
set -- $a
bound fanout_case_ms ">=" 7600 "$(milli floor "$3")" "bench-fanout's case: all done (the real run 10.1 s; 25 %), ms"
bound fanout_case_most_ms "<=" 12600 "$(milli ceil "$3")" "bench-fanout's case: all done (the real run 10.1 s; 25 %), ms"
bound fanout_case_seed_permille "<=" 1460 "$(milli ceil "$6")" "bench-fanout's case: the seed sent (the real run 1.17 x), per mille of the model"
echo "ok: bench-fanout's case all done in $3 s (real 10.1 s), the seed sent $6 x (real 1.17 x)"

out=$("$SIM" -n 64 --size 140G --chunks 1024 2>/dev/null) || fail "64 replicas: $out"
case $out in *UNFINISHED*) fail "64 replicas: $out" ;; esac
echo "ok: 64 replicas of 1024 chunks: $out"

# The policy's fleet mode (lanes of every replica, members at ring
# offsets -1, -2, -4, ...): the seed sends each chunk once.
out=$("$SIM" -n 64 --size 140G --chunks 2048 --queue 2048 --lanes fleet 2>/dev/null) || fail "fleet lanes: $out"
set -- $out
bound fleet_seed_permille ">=" 990 "$(milli floor "$6")" "fleet lanes, 64 replicas: the seed sent, per mille of the model"
bound fleet_seed_most_permille "<=" 1050 "$(milli ceil "$6")" "fleet lanes, 64 replicas: the seed sent, per mille of the model"
# (its time: the tree's depth of hops, each a holdings answer apart,
# over a model of 0.17 s: measured 8.75 x)
bound fleet_alone_permille ">=" 1000 "$(milli floor "$5")" "fleet lanes, 64 replicas: all done, per mille of one alone's time"
bound fleet_alone_most_permille "<=" 12000 "$(milli ceil "$5")" "fleet lanes, 64 replicas: all done, per mille of one alone's time"
echo "ok: fleet lanes, 64 replicas of 2048 chunks: the seed sent $6 x, all done in $5 x alone"
