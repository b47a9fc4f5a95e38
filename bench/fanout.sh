#!/usr/bin/env bash
# make bench-fanout: one seed, N replicas that start at once, each
# reading the whole model through its own mount (cmp against the
# original: byte-exact or the run fails).  Every host is a network
# namespace joined to a bridge (in a namespace of its own) by a veth
# pair; both ends of every pair are limited with tc tbf, so each host
# has RATE up and RATE down.  Measured, from the moment all start until
# the last replica has every byte:
#   (a) seed      every replica reads from the seed only
#   (b) reseed    --reseed --prefetch, each replica told only the seed
#   (c) pairs     the limit: N seeds, one per replica, the same links
#   (k) kill      (b) again, the seed killed -9 once the replicas hold
#                 every chunk among them (and together have received
#                 half of the N models); all must finish
#   (h) kill      (b) again, the seed killed at half of (b)'s time
#                 (once every replica shows the model), whatever the
#                 replicas hold then: each must end, byte-exact or with
#                 EIO, within H_BOUND of the kill (--timeout + 3 s + the
#                 model's time over one link); wrong bytes, any other
#                 error, or a later end fail the run; EIO ones counted
#   (f) fat seed  the seed's link FANOUT_SEED_X (4) times the others':
#                 (b) on it, then (b) again with the seed killed -9 at
#                 half of that time, or later once the replicas hold
#                 every chunk among them; all must finish byte-exact.
#                 (On equal links no swarm can survive a kill at half:
#                 the seed has not sent every chunk once before
#                 size/rate.)
#   striping      one replica with a 4 x RATE link reading from one seed,
#                 then from two seeds of the same model
# Printed: a table (times, the ratios and goals, what the seed sent,
# which bound held: link utilization and CPU), an ASCII plot of
# replicas done over time, and docs/fanout.png when gnuplot is there.
#
#   bench/fanout.sh BUILD
# Environment: FANOUT_N (8), FANOUT_SIZE (64M), FANOUT_RATE (100mbit),
# FANOUT_SCENARIOS ("a b c k h"), FANOUT_RUNS (3: runs of (b) and (c),
# in turn, the order alternating; medians compared), FANOUT_SHORT=1 (no
# plot file, no striping, one run: the make test form), FANOUT_RESULTS=FILE (key value lines
# for tests), FANOUT_H_SLACK_MS ((h)'s slack past --timeout, 3000),
# FANOUT_MOUNT_OPTS (more mount options), FANOUT_SEED_OPTS
# (more seed options, e.g. --checksum-chunk 256K with --chunk-size 256K
# in the mount's), FANOUT_KEEP=1 (keep the logs and status files).
set -euo pipefail

if [ "${1:-}" = --replica ]; then
	# One replica, inside its namespace (its own mount namespace too):
	# mount, read everything, say when, stay a source until told.
	shift
	seedfs=$1 mnt=$2 seeds=$3 model=$4 out=$5 name=$6
	shift 6
	mkdir -p "$mnt"
	"$seedfs" mount --seed "$seeds" "$mnt" --log-file "$out/$name.log" "$@" \
		2>"$out/$name.err" || {
		echo "0 fail mount: $(cat "$out/$name.err")" >"$out/$name.done"
		exit 1
	}
	sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' "$out/$name.log" |
		tail -n 1 >"$out/$name.pid"
	pid=$(cat "$out/$name.pid")
	m=$mnt/$(basename "$model")
	for _ in $(seq 300); do [ -d "$m" ] && break; sleep 0.05; done
	# A re-seeder's control port, for the coverage check.
	awk '$1 == "reseed:" { sub(/.*:/, "", $2); print $2 }' \
		"$mnt/.seedfs/status" >"$out/$name.ctl"
	[ -d "$m" ] && : >"$out/$name.ready" # the model is there: (h) may kill
	# The result: "ok", or the first file that was not: "eio F: ..."
	# (cmp could not read it: Input/output error), "wrong F: ..." (cmp
	# read it and it differs, or ends early), "fail F: ..." (else).
	res=ok
	while read -r f; do
		st=0
		cmp "$model/$f" "$m/$f" >"$out/$name.cmpout" 2>"$out/$name.cmp" || st=$?
		[ $st = 0 ] && continue
		why=$(cat "$out/$name.cmpout" "$out/$name.cmp" | head -c 200)
		if [ $st = 1 ]; then
			res="wrong $f: $why"
		elif [ $st = 2 ] && [ -s "$out/$name.cmp" ] && ! [ -s "$out/$name.cmpout" ] &&
			grep -q "$m/$f: Input/output error$" "$out/$name.cmp"; then
			res="eio $f: $why"
		else
			res="fail $f: $why"
		fi
		break
	done < <(cd "$model" && find . -type f | sort)
	# CPU seconds of the mount daemon, user and system
	awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f %.2f\n", $14 / t, $15 / t }' \
		"/proc/$pid/stat" >"$out/$name.cpu" 2>/dev/null || true
	# The time first, the status next, then .done (what the main loop
	# waits for: the status is there when it looks).
	local_t=$(date +%s%3N)
	cp "$mnt/.seedfs/status" "$out/$name.status" 2>/dev/null || true
	echo "$local_t $res" >"$out/$name.done"
	for _ in $(seq 6000); do [ -e "$out/stop" ] && break; sleep 0.1; done
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null || true
	# Until it exited: gone, or a zombie (kill -0 would wait for its
	# reaping too, up to 2 s here).
	for _ in $(seq 100); do
		case $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) in
		"" | Z | X) break ;;
		esac
		sleep 0.05
	done
	exit 0
fi

BUILD=$(cd "${1:-build}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
SELF=$SRC/bench/$(basename "$0")
SEEDFS=$BUILD/seedfs
N=${FANOUT_N:-8}
SIZE=${FANOUT_SIZE:-64M}
RATE=${FANOUT_RATE:-100mbit}
SHORT=${FANOUT_SHORT:-0}
RUNS=${FANOUT_RUNS:-$([ "$SHORT" = 1 ] && echo 1 || echo 3)}
RESULTS=${FANOUT_RESULTS:-}
read -r -a MOPTS <<<"${FANOUT_MOUNT_OPTS:-}"
read -r -a SOPTS <<<"${FANOUT_SEED_OPTS:-}"
[ "$(id -u)" = 0 ] || { echo "fanout: needs root (network namespaces, FUSE)" >&2; exit 77; }
for t in ip tc jq curl cmp; do
	command -v "$t" >/dev/null || { echo "fanout: needs $t (packaging/deps.sh)" >&2; exit 1; }
done

P=fo$(($$ % 100000))
NET=10.$((150 + $$ % 50)).$(($$ % 250))
WORK=$(mktemp -d /dev/shm/seedfs-fanout.XXXXXX)
NSS=()
PIDS=()

cleanup() {
	local p f
	declare -F reporting_restore >/dev/null && reporting_restore
	touch "$WORK/out/stop" 2>/dev/null || true
	for f in "$WORK"/out/*.pid; do
		[ -s "$f" ] && PIDS+=("$(cat "$f")")
	done
	for p in "${PIDS[@]}"; do
		{ kill -9 "$p" && wait "$p"; } 2>/dev/null || true
	done
	for p in "${NSS[@]}"; do ip netns del "$p" 2>/dev/null || true; done
	if [ "${FANOUT_KEEP:-0}" = 1 ]; then
		echo "fanout: kept $WORK" >&2
		rm -rf "$WORK/m" "$WORK"/mnt-*
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
die() {
	echo "fanout: FAIL: $*" >&2
	local f
	for f in "$WORK"/out/*.err "$WORK"/out/*.log "$WORK"/*.err; do
		[ -s "$f" ] || continue
		echo "--- $f" >&2
		grep -v ' [ID] ' "$f" | tail -n 8 >&2
	done
	exit 1
}
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
# shellcheck source=bench/netns.sh
source "$SRC/bench/netns.sh"
# shellcheck source=bench/reporting.sh
source "$SRC/bench/reporting.sh"
hub || die "ip netns add"
calc() { awk "BEGIN { printf $1 }"; }

# sent NAME: bytes host NAME has sent (its uplink's qdisc)
sent() {
	ip netns exec "$P-$1" tc -s qdisc show dev eth0 |
		awk '$1 == "Sent" { print $2; exit }'
}
# received INDEX: bytes sent to the host of address $NET.INDEX
received() {
	ip netns exec "$HUB" tc -s qdisc show dev "${P}p$1" |
		awk '$1 == "Sent" { print $2; exit }'
}
received_all() {
	local i n=0
	for i in $(seq "$N"); do n=$((n + $(received $((100 + i))))); done
	echo $n
}
# covered: 1 when the re-seeders together hold every chunk of the model
# (each one's /v1/holdings, asked from the seed's host), else 0
# (files wholly inline in the manifest need nobody)
covered() {
	local i port url content= inline=
	for i in $(seq "$N"); do
		port=$(cat "$WORK/out/r$i.ctl" 2>/dev/null) || continue
		[ -n "$port" ] || continue
		url=http://$NET.$((100 + i)):$port
		if [ -z "$content" ]; then
			content=$(ip netns exec "$P-s0" curl -sf -m 2 "$url/v1/models" |
				jq -r '.models[0].content // empty') || continue
			inline=$(ip netns exec "$P-s0" curl -sf -m 2 "$url/v1/manifest?model=m" |
				jq -c '[.files[] | all(.extents[]?; has("inline"))]') || continue
		fi
		ip netns exec "$P-s0" curl -sf -m 2 "$url/v1/holdings?model=m&content=$content" |
			jq -c --argjson m "$inline" '[.files | to_entries[] | .key as $f |
				.value[] | if ($m[$f] or . >= 0) then 1 else 0 end]' || true
	done | jq -s 'if length == 0 then 0 else transpose | map(max) | min end'
}
# cpu_now: "busy total" jiffies from /proc/stat
cpu_now() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8; exit }' /proc/stat; }

seed_start() { # NAME INDEX: a seed of the model on $NET.INDEX:7070
	local ns=$P-$1 out=$WORK/$1.out
	# nsenter --net, not `ip netns exec`: that would give the seed a copy
	# of the host's mount table, FUSE mounts included, which keeps their
	# sessions open after their unmount while the seed runs.
	nsenter "--net=/run/netns/$ns" "$SEEDFS" seed --model-dir "$MODEL" \
		--listen "$NET.$2:7070" --protocol tcp --log-level warn "${SOPTS[@]}" \
		>"$out" 2>"$WORK/$1.err" &
	local pid=$!
	PIDS+=("$pid")
	eval "SEEDPID_$1=$pid"
	for _ in $(seq 600); do
		grep -qE '^seedfs seed: ready on ' "$out" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || die "seed $1 exited: $(cat "$WORK/$1.err")"
		sleep 0.05
	done
	die "seed $1 not ready"
}
seed_stop() {
	local v=SEEDPID_$1
	{ kill "${!v}" && wait "${!v}"; } 2>/dev/null || true
}

echo "fanout: $N replicas, a $SIZE model, every link $RATE each way"
"$BUILD/tests/genmodel" "$WORK/m" --size "$SIZE" --shards 2 >/dev/null
MODEL=$WORK/m
BYTES=$(du -sb "$MODEL" | cut -f1)
CACHE=$((BYTES * 3 / 2 / 1048576 + 64))M
BPS=$(bps "$RATE")
# This VM's first touch of guest memory runs at about 250 MB/s: the
# memory the runs will use (the seed's model, each replica's cache: what
# it holds plus 64 MiB ahead) is touched once, through a tmpfs file,
# before anything is measured (FANOUT_WARM=0, or the short form: not).
if [ "${FANOUT_WARM:-$([ "$SHORT" = 1 ] && echo 0 || echo 1)}" = 1 ]; then
	reporting_hold
	avail=$(($(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo) * 1024))
	want=$(((N + 2) * BYTES + N * (64 << 20)))
	[ "$want" -le $((avail * 7 / 10)) ] || want=$((avail * 7 / 10))
	t0=$(date +%s%N)
	dd if=/dev/zero of="$WORK/warm" bs=1M count=$((want / 1048576)) 2>/dev/null
	rm -f "$WORK/warm"
	t1=$(date +%s%N)
	echo "fanout: warmed $((want / 1048576)) MiB of memory first ($(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }') s)"
fi
mkdir -p "$WORK/out"

host s0 10 "$RATE"
for i in $(seq "$N"); do host "r$i" $((100 + i)) "$RATE"; done

# run NAME SEEDS-OF-REPLICA KILL [mount args]: all replicas at once.
# KILL "half": the seed is killed -9 once the replicas together have
# received half of the N models and hold every chunk among them (before
# that, some bytes exist only in the seed's memory; on equal links the
# second comes late, when they have nearly all of it); KILL a
# number: killed at that many ms, and replicas may fail (counted).
# Sets T_<NAME> (ms until the last has it), DONE_<NAME> (sorted finish
# times, s) and more; fails unless every replica is byte-exact.
run() {
	local name=$1 seeds_of=$2 kill=$3 i
	shift 3
	rm -rf "$WORK/out" && mkdir -p "$WORK/out"
	local rpids=() c0 c1 s0 s1 r0 r1
	c0=$(cpu_now)
	s0=$(sent s0)
	r0=$(received_all)
	local t0
	t0=$(now_ms)
	for i in $(seq "$N"); do
		local seeds
		seeds=$($seeds_of "$i")
		ip netns exec "$P-r$i" bash "$SELF" --replica "$SEEDFS" \
			"$WORK/mnt-r$i" "$seeds" "$MODEL" "$WORK/out" "r$i" \
			--protocol tcp --cache-size "$CACHE" "${MOPTS[@]}" "$@" &
		rpids+=($!)
		PIDS+=($!)
	done
	local killed=0 limit=$((120000 + 40 * BYTES * N * 8 / BPS * 1000))
	KILLED_AT=0
	while :; do
		# (Checked with the shell's own glob, 5 times a second: the
		# replicas' finish times are their own; this loop's processes
		# would take CPU from the hosts it measures.)
		local dn=("$WORK"/out/*.done) ndone=0
		[ -e "${dn[0]}" ] && ndone=${#dn[@]}
		[ "$ndone" -ge "$N" ] && break
		local el=$(($(now_ms) - t0))
		local rd=("$WORK"/out/*.ready)
		if [ $killed = 0 ] && { { [ "$kill" = half ] &&
			[ $(($(received_all) - r0)) -ge $((N * BYTES / 2)) ] &&
			[ "$(covered)" = 1 ]; } ||
			{ [ "${kill#covered:}" != "$kill" ] && [ "$el" -ge "${kill#covered:}" ] &&
				[ "$(covered)" = 1 ]; } ||
			{ [ "$kill" != half ] && [ "${kill#covered:}" = "$kill" ] &&
				[ "$kill" -gt 0 ] && [ "$el" -ge "$kill" ] &&
				[ -e "${rd[0]}" ] && [ "${#rd[@]}" -ge "$N" ]; }; }; then
			kill -9 "$SEEDPID_s0"
			wait "$SEEDPID_s0" 2>/dev/null || true
			killed=1
			KILLED_AT=$el
			KILL_SENT=$(($(sent s0) - s0))
			KILL_RECV=$(($(received_all) - r0))
			# Did the replicas hold every chunk among them then?
			KILL_COVERED=$(covered)
		fi
		[ "$el" -lt "$limit" ] || die "$name: not every replica done in $((limit / 1000)) s"
		# (h): none may still read H_BOUND after the kill.
		[ "$name" = h ] && [ $killed = 1 ] && [ $((el - KILLED_AT)) -gt "$H_BOUND" ] &&
			die "h: $((N - ndone)) replica(s) still reading $(calc "\"%.1f\", ($el - $KILLED_AT) / 1000") s after the kill (bound $(calc "\"%.1f\", $H_BOUND / 1000") s: --timeout $((H_TIMEOUT / 1000)) s + 3 s + the model over one link)"
		sleep 0.2
	done
	local tl=0 times=() failed=0
	[ "$name" = h ] && : >"$WORK/h.outcomes"
	for i in $(seq "$N"); do
		local d res
		read -r d res <"$WORK/out/r$i.done"
		# (h): each replica's end, after the kill (ms; < 0: before)
		[ "$name" = h ] && echo "r$i ${res%% *} $((d - t0 - KILLED_AT))" >>"$WORK/h.outcomes"
		if [ "$name" = h ] && [ $((d - t0 - KILLED_AT)) -gt "$H_BOUND" ]; then
			die "h: replica r$i ended $(calc "\"%.1f\", ($d - $t0 - $KILLED_AT) / 1000") s after the kill, bound $(calc "\"%.1f\", $H_BOUND / 1000") s: $res"
		fi
		if [ "$res" != ok ]; then
			{ [ "$kill" = half ] || [ "$kill" = 0 ]; } && die "$name: replica r$i: $res"
			# Wrong bytes are never a failure to count, nor any
			# error but EIO.
			[ "${res%% *}" = eio ] || die "$name: replica r$i: $res"
			failed=$((failed + 1))
			FAILMSG="r$i at $(calc "\"%.1f\", ($d - $t0) / 1000") s: ${res#eio }"
			continue
		fi
		times+=("$(calc "\"%.2f\", ($d - $t0) / 1000")")
		[ $((d - t0)) -gt "$tl" ] && tl=$((d - t0))
	done
	c1=$(cpu_now)
	if [ $killed = 1 ]; then s1=$KILL_SENT; else s1=$(($(sent s0) - s0)); fi
	r1=$(received_all)
	for i in $(seq "$N"); do
		[ -s "$WORK/out/r$i.status" ] && cp "$WORK/out/r$i.status" "$WORK/$name-r$i.status"
	done
	local mcpu
	mcpu=$(cat "$WORK"/out/r*.cpu 2>/dev/null |
		awk '{ u += $1; s += $2 } END { printf "%.1f user + %.1f sys", u, s }')
	touch "$WORK/out/stop"
	for i in "${rpids[@]}"; do wait "$i" || true; done
	[ "${FANOUT_KEEP:-0}" = 1 ] && cp -r "$WORK/out" "$WORK/out-$name"
	eval "T_$name=$tl"
	eval "FAILED_$name=$failed"
	eval "DONE_$name=\"$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')\""
	eval "SEEDSENT_$name=${s1:-0}"
	eval "RECV_$name=$((r1 - r0))"
	eval "CPU_$name=$(echo "$c0 $c1" | awk '{ printf "%.0f", 100 * ($3 - $1) / ($4 - $2) }')"
	local cpu=CPU_$name
	echo "  $name: $((N - failed)) of $N byte-exact in $(calc "\"%.1f\", $tl / 1000") s" \
		"(mount daemons: $mcpu s of CPU; machine ${!cpu} % busy)"
}
only_s0() { echo "$NET.10:7070"; }
own_seed() { echo "$NET.$((10 + $1)):7070"; }

SCEN=" ${FANOUT_SCENARIOS:-a b c k h f} "
want() { [[ $SCEN == *" $1 "* ]]; }
for v in a b c k h f g; do
	eval "T_$v=0 DONE_$v= SEEDSENT_$v=0 RECV_$v=0 CPU_$v=0 FAILED_$v=0"
done
KILLED_AT=0 KILL_SENT=0 KILL_RECV=0 KILL_COVERED=0 FAILMSG=
K_AT=0 K_SENT=0 K_RECV=0 H_AT=0 H_SENT=0 H_COVERED=0 H_FAILMSG= H_LAST=0
RESEED=(--reseed --listen 0.0.0.0:0 --prefetch)
# (h)'s bound: the mounts' --timeout (FANOUT_MOUNT_OPTS', else the
# default 10 s) + 3 s (noticing the death, a loaded machine) + the whole
# model over one link (a replica that still completes from the others
# is bound by its link, not by the timeout).
H_TIMEOUT=10000
for i in "${!MOPTS[@]}"; do
	[ "${MOPTS[$i]}" = --timeout ] && H_TIMEOUT=$((${MOPTS[$((i + 1))]} * 1000))
done
H_BOUND=$((H_TIMEOUT + ${FANOUT_H_SLACK_MS:-3000} + BYTES * 8 * 1000 / BPS))
# keep NAME R: run R's results of NAME, aside
keep() {
	local v
	for v in T DONE SEEDSENT RECV CPU FAILED; do
		eval "${v}_$1_$2=\"\${${v}_$1}\""
	done
}
# median NAME: NAME's results become those of its median run (by
# time); ALL_NAME lists every run's time
median() {
	local r v pick
	pick=$(for r in $(seq "$RUNS"); do
		v=T_$1_$r
		echo "${!v} $r"
	done | sort -n | awk -v m=$(((RUNS + 1) / 2)) 'NR == m { print $2 }')
	eval "ALL_$1=\"$(for r in $(seq "$RUNS"); do v=T_$1_$r; calc "\"%.1f \", ${!v} / 1000"; done)\""
	for v in T DONE SEEDSENT RECV CPU FAILED; do
		eval "${v}_$1=\"\${${v}_$1_$pick}\""
	done
}

seed_start s0 10
want a && run a only_s0 0
if want c; then
	for i in $(seq "$N"); do host "s$i" $((10 + i)) "$RATE"; done
	for i in $(seq "$N"); do seed_start "s$i" $((10 + i)); done
fi
# (b) and (c), RUNS times each, one after the other: this machine's
# speed drifts from minute to minute, and the medians are compared.
# The order alternates: on this VM memory touched for the first time in
# a while costs more (the host backs it again), so whichever runs first
# after a pause faults its caches in slower (measured: a (c) run first
# took 9.6 s and 9.8 s of system CPU, the two after a (b) 7.3-7.4 s and
# 2.8-3.2 s).
for r in $(seq "$RUNS"); do
	order="b c"
	[ $((r % 2)) = 1 ] || order="c b"
	for v in $order; do
		want "$v" || continue
		case $v in
		b) run b only_s0 0 "${RESEED[@]}" ;;
		c) run c own_seed 0 ;;
		esac
		keep "$v" "$r"
	done
done
want b && median b
want c && median c
want c && for i in $(seq "$N"); do seed_stop "s$i"; done
seed_stop s0

if want k; then
	# The kill's moment (every chunk held among the replicas, half of
	# the N models received) and the end can both fall between two of
	# run's looks (0.2 s apart, plus the look: a curl to each
	# re-seeder) on a slow build (ThreadSanitizer, FANOUT_SHORT's 16
	# MiB): then (k) runs again, at most 3 times in all.
	for try in 1 2 3; do
		seed_start s0 10
		run k only_s0 half "${RESEED[@]}"
		K_AT=$KILLED_AT K_SENT=$KILL_SENT K_RECV=$KILL_RECV
		seed_stop s0
		[ "$K_AT" -gt 0 ] && break
		echo "  k: every replica finished before the seed's kill came (try $try of 3)"
	done
	[ "$K_AT" -gt 0 ] || die "k: all finished before the replicas held every chunk among them, 3 times: the seed was never killed"
fi
if want h && [ "$T_b" -gt 0 ]; then
	seed_start s0 10
	FAILMSG=
	run h only_s0 $((T_b / 2)) "${RESEED[@]}"
	H_AT=$KILLED_AT H_SENT=$KILL_SENT H_COVERED=$KILL_COVERED H_FAILMSG=$FAILMSG
	[ "$H_AT" -gt 0 ] || die "h: every replica ended before the seed was killed"
	H_LAST=$(awk '$3 > m { m = $3 } END { print m + 0 }' "$WORK/h.outcomes")
	seed_stop s0
fi

SEED_X=${FANOUT_SEED_X:-4}
G_AT=0 G_SENT=0 G_COVERED=0
if want f; then
	# The seed's link, both ends, SEED_X times the rate for (f).
	seed_rate() {
		local r=$(($(bps "$RATE") * $1 / 1000))kbit
		shape "$P-s0" eth0 "$r" change
		shape "$HUB" "${P}p10" "$r" change
	}
	seed_rate "$SEED_X"
	seed_start s0 10
	run f only_s0 0 "${RESEED[@]}"
	seed_stop s0
	seed_start s0 10
	FAILMSG=
	# At half of (f)'s time, or later once every chunk is held among
	# the replicas: at half, one chunk had not always left the seed
	# (the last of a lane, behind the members' pulls on its owner's
	# link: 2026-12-04, 15 of 37 runs), and a chunk nobody holds
	# is lost with the seed whatever the swarm does.
	run g only_s0 "covered:$((T_f / 2))" "${RESEED[@]}"
	G_AT=$KILLED_AT G_SENT=$KILL_SENT G_COVERED=$KILL_COVERED
	seed_stop s0
	seed_rate 1
	[ "$FAILED_g" = 0 ] || die "f: the seed on a $SEED_X x link killed at half of (b)'s time there: $FAILED_g of $N failed (last: ${FAILMSG%%: cmp:*})"
fi

STRIPE=""
if [ "$SHORT" != 1 ]; then
	# One replica with a link four times the seeds': one seed, then two.
	host s9 9 "$RATE"
	host x 200 "$(($(bps "$RATE") * 4 / 1000))kbit"
	seed_start s0 10
	seed_start s9 9
	stripe_read() {
		rm -rf "$WORK/out" && mkdir -p "$WORK/out"
		local t0 d res
		t0=$(now_ms)
		ip netns exec "$P-x" bash "$SELF" --replica "$SEEDFS" "$WORK/mnt-x" \
			"$1" "$MODEL" "$WORK/out" x --protocol tcp --cache-size "$CACHE" &
		PIDS+=($!)
		local p=$!
		for _ in $(seq 6000); do [ -e "$WORK/out/x.done" ] && break; sleep 0.05; done
		read -r d res <"$WORK/out/x.done" || die "striping: no answer"
		[ "$res" = ok ] || die "striping: $res"
		cp "$WORK/out/x.status" "$WORK/stripe-$2.status"
		touch "$WORK/out/stop"
		wait "$p" || true
		eval "ST_$2=$((d - t0))"
	}
	stripe_read "$NET.10:7070" one
	stripe_read "$NET.10:7070,$NET.9:7070" two
	share=$(awk '/^seed: / { s = $2 } $1 == "seed_bytes:" { print s, $2 }' "$WORK/stripe-two.status" |
		awk -v t="$BYTES" '{ printf "%s %.0f %%; ", $1, 100 * $2 / t }')
	STRIPE="one seed $(calc "\"%.1f s (%.1f MB/s)\", $ST_one / 1000, $BYTES / $ST_one / 1000"), two seeds $(calc "\"%.1f s (%.1f MB/s)\", $ST_two / 1000, $BYTES / $ST_two / 1000"): $(calc "\"%.2f\", $ST_one / $ST_two") x faster (bytes: ${share%; })"
fi

# The table.
MB=$(calc "\"%.1f\", $BYTES / 1048576")
ideal_c=$(calc "\"%.1f\", $BYTES * 8 / $BPS")
ideal_a=$(calc "\"%.1f\", $N * $BYTES * 8 / $BPS")
s() { calc "\"%.1f\", $1 / 1000"; }
x() { calc "\"%.2f\", $1 / $2"; }
# bound NAME BYTES LINKS: how full the links that bound it were (BYTES
# over LINKS links in its time), and the CPU
bound() {
	local t=T_$1 cpu=CPU_$1 u
	u=$(calc "\"%.0f\", 100 * $2 * 8 / ($3 * $BPS * ${!t} / 1000)")
	if [ "$u" -ge 80 ]; then echo "the links ($u % full; CPU ${!cpu} %)"
	elif [ "${!cpu}" -ge 85 ]; then echo "CPU (${!cpu} % busy; links $u % full)"
	else echo "neither (links $u % full, CPU ${!cpu} %)"; fi
}
okf() { awk -v x="$1" -v g="$2" 'BEGIN { print (x <= g) ? "met" : "MISSED" }'; }
# control NAME: the control bytes each replica received during its load
# (its status when it had every byte), as a share of the model: the
# largest, in %
control() {
	cat "$WORK/$1"-r*.status 2>/dev/null |
		awk -v b="$BYTES" '$1 == "control_bytes:" { v = 100 * $2 / b; if (v > m) m = v }
			END { printf "%.3f", m }'
}
echo
echo "## fan-out: $N replicas, $MB MiB model, $RATE links ($(nproc) cores)"
echo
echo "| scenario | all done | replicas done at (s) | seed sent | control received (largest, % of model) | bound by |"
echo "|---|---|---|---|---|---|"
want a && echo "| (a) seed only | $(s "$T_a") s | ${DONE_a% } | $(x "$SEEDSENT_a" "$BYTES") x model | $(control a) % | $(bound a "$SEEDSENT_a" 1) |"
want b && echo "| (b) --reseed | $(s "$T_b") s | ${DONE_b% } | $(x "$SEEDSENT_b" "$BYTES") x model | $(control b) % | $(bound b "$RECV_b" "$N") |"
want c && echo "| (c) $N pairs | $(s "$T_c") s | ${DONE_c% } | - | $(control c) % | $(bound c "$RECV_c" "$N") |"
want k && echo "| (k) (b), seed killed -9 at $(s "$K_AT") s | $(s "$T_k") s | ${DONE_k% } | $(x "$K_SENT" "$BYTES") x model before | $(control k) % | all $N byte-exact |"
want f && echo "| (f) (b), the seed's link $SEED_X x | $(s "$T_f") s | ${DONE_f% } | $(x "$SEEDSENT_f" "$BYTES") x model | $(control f) % | $(bound f "$RECV_f" "$N") |"
want f && echo "| (f), seed killed -9 at $(s "$G_AT") s | $(s "$T_g") s | ${DONE_g% } | $(x "$G_SENT" "$BYTES") x model before | $(control g) % | all $N byte-exact |"
want h && [ "$T_b" -gt 0 ] && echo "| (h) (b), seed killed -9 at $(s "$H_AT") s | $( [ "$FAILED_h" = "$N" ] && echo - || echo "$(s "$T_h") s") | ${DONE_h% } | $(x "$H_SENT" "$BYTES") x model before | $(control h) % | $((N - FAILED_h)) byte-exact, $FAILED_h failed (EIO) |"
want b && echo "control: HTTP bytes each replica's control client received while it loaded (goal for (b) <= 1 % of the model: $(okf "$(control b)" 1))"
# control_routes NAME: the largest one's bytes by route, in % of the model
control_routes() {
	for f in "$WORK/$1"-r*.status; do
		[ -s "$f" ] || continue
		awk '$1 == "control_bytes:" { print $2, FILENAME }' "$f"
	done | sort -n | tail -n 1 | while read -r _ f; do
		sed -n 's/^control_received_by_route: //p' "$f" | tr ',' '\n' |
			awk -v b="$BYTES" 'NF == 2 { printf "%s%s %.3f %%", sep, $1, 100 * $2 / b; sep = ", " }'
	done
}
want b && echo "control of (b)'s largest, by route: $(control_routes b)"
echo
echo "link bounds: (a) $ideal_a s (the seed's uplink), (c) $ideal_c s (each replica's downlink)"
[ "$RUNS" -gt 1 ] && want b && want c &&
	echo "(b) and (c): the medians of $RUNS runs each, taken in turn: (b) ${ALL_b% } s; (c) ${ALL_c% } s"
if want a && want b && want c; then
	ba=$(x "$T_b" "$T_a")
	bc=$(x "$T_b" "$T_c")
	sx=$(x "$SEEDSENT_b" "$BYTES")
	echo "(b)/(a) = $ba (goal <= 0.35: $(okf "$ba" 0.35)); (b)/(c) = $bc (goal <= 1.5: $(okf "$bc" 1.5)); the seed sent $sx x the model in (b) (goal <= 2: $(okf "$sx" 2))"
fi
want k && echo "(k): the seed was killed as soon as the replicas held every chunk among them (and had received half of what they read): at $(s "$K_AT") s$(want b && echo " ($(calc "\"%.0f\", 100 * $K_AT / $T_b") % of (b)'s time)"), with $(calc "\"%.0f\", 100 * $K_RECV / ($N * $BYTES)") % received; all $N finished byte-exact from each other"
want h && [ "$T_b" -gt 0 ] && echo "(h): killed at half of (b)'s time ($(s "$H_AT") s; the seed had sent $(x "$H_SENT" "$BYTES") x the model; every chunk held among the replicas then: $([ "$H_COVERED" = 1 ] && echo yes || echo no)): $((N - FAILED_h)) of $N finished byte-exact${H_FAILMSG:+; the rest got EIO (last: ${H_FAILMSG%%: cmp:*})}; every one ended $(s "$H_LAST") s after the kill at the latest (bound $(s "$H_BOUND") s: --timeout $(s "$H_TIMEOUT") + 3 s + the model over one link)"
want f && echo "(f): with the seed's link $SEED_X x the others', (b) took $(s "$T_f") s; the seed killed -9 at half of that or once every chunk was held among the replicas ($(s "$G_AT") s, having sent $(x "$G_SENT" "$BYTES") x the model; every chunk held among the replicas then: $([ "$G_COVERED" = 1 ] && echo yes || echo no)): all $N finished byte-exact from each other in $(s "$T_g") s"
[ -n "$STRIPE" ] && echo "striping, a replica with a 4 x $RATE link: $STRIPE"

# Plot: replicas done over time.
echo
echo "replicas done (of $N) over time, a b c k = the scenarios:"
awk -v n="$N" -v a="$DONE_a" -v b="$DONE_b" -v c="$DONE_c" -v k="$DONE_k" 'BEGIN {
	split("a b c k", names, " ")
	v["a"] = a; v["b"] = b; v["c"] = c; v["k"] = k
	max = 0
	for (j = 1; j <= 4; j++) {
		m = split(v[names[j]], tt, " ")
		cnt[names[j]] = m
		for (i = 1; i <= m; i++) {
			t[names[j], i] = tt[i] + 0
			if (tt[i] + 0 > max) max = tt[i] + 0
		}
	}
	if (max == 0) exit
	W = 64
	for (row = n; row >= 1; row--) {
		line = ""
		for (x = 0; x < W; x++) line = line " "
		for (j = 1; j <= 4; j++) {
			if (cnt[names[j]] < row) continue
			x = int(t[names[j], row] / max * (W - 1))
			line = substr(line, 1, x) names[j] substr(line, x + 2)
		}
		printf "%3d |%s\n", row, line
	}
	printf "    +"; for (x = 0; x < W; x++) printf "-"; printf "\n"
	printf "     0%*s%.1f s\n", W - 6, "", max
}'

if [ "$SHORT" != 1 ] && command -v gnuplot >/dev/null; then
	for sc in a b c k; do
		v=DONE_$sc
		i=0
		for t in ${!v}; do i=$((i + 1)); echo "$t $i"; done >"$WORK/plot-$sc"
	done
	gnuplot <<EOF && echo "plot: docs/fanout.png"
set terminal pngcairo size 800,480
set output "$SRC/docs/fanout.png"
set title "$N replicas, $MB MiB, $RATE links: replicas that have the whole model"
set xlabel "seconds since all started"
set ylabel "replicas done"
set key bottom right
set yrange [0:$((N + 1))]
plot "$WORK/plot-a" with steps lw 2 title "(a) seed only", \
     "$WORK/plot-b" with steps lw 2 title "(b) --reseed", \
     "$WORK/plot-c" with steps lw 2 title "(c) $N pairs (limit)", \
     "$WORK/plot-k" with steps lw 2 dt 2 title "(b), seed killed at $(s "$K_AT") s"
EOF
fi

if [ -n "$RESULTS" ]; then
	{
		echo "n $N"
		echo "bytes $BYTES"
		for sc in a b c k h f g; do
			v=T_$sc
			echo "t_$sc ${!v}"
			v=FAILED_$sc
			echo "failed_$sc ${!v}"
		done
		want b && echo "control_max_pct_b $(control b)"
		echo "seed_sent_a $SEEDSENT_a"
		echo "seed_sent_b $SEEDSENT_b"
		echo "killed_at $K_AT"
		echo "killed_at_h $H_AT"
		echo "h_bound_ms $H_BOUND"
		# h_end REPLICA OUTCOME MS: each replica's end in (h), ms
		# after the kill, ok or eio (anything else died above)
		[ -s "$WORK/h.outcomes" ] && sed 's/^/h_end /' "$WORK/h.outcomes"
		echo "killed_at_g $G_AT"
		echo "covered_g $G_COVERED"
		for f in "$WORK"/b-r*.status; do
			[ -e "$f" ] || continue
			awk '/^reseeder: / { on = 1; next } /^seed: / { on = 0 }
				on && $1 == "seed_bytes:" { n += $2 } END { print "reseeder_bytes", n + 0 }' "$f"
		done
	} >"$RESULTS"
fi
