#!/usr/bin/env bash
# make chaos: a seed and CHAOS_HOSTS-1 re-seeding replicas, each a
# network namespace (bench/netns.sh: one bridge, tc-shaped links), every
# replica reading the whole model in a loop (-o direct_io, a cache of
# half the model, 16M at least: reads keep crossing the network) and checking every
# byte, while faults are injected one after another for CHAOS_S seconds:
#   seed_kill   the seed killed -9, restarted on its port 1-6 s later
#   mount_kill  a replica's mount killed -9, mounted again 1-6 s later
#   stop        SIGSTOP of the seed or a replica's mount, SIGCONT 1-8 s later
#   cut         a host's link down, up again 1-8 s later
#   republish   a file of the model changed, the seed's SIGHUP
#   remount     a replica unmounted (fusermount3 -u) and mounted again
# Kinds come in rounds, each round every kind once in a random order, on
# a random target, with 1-3 s of calm between faults and --timeout + 5 s
# after each round; the first round is always whole.
#
# Beside them, a hostile fleet member (CHAOS_HOSTILE=1, the default): one
# more host, x1, a token holder whose role changes every CHAOS_ROLE_S
# (12) seconds, in turn:
#   forger     a re-seeding mount holding all of the model that serves
#              wrong bytes (--test-corrupt-slab)
#   staller    an honest re-seeding mount that holds all of it, serves a
#              while, then drops every packet its fabric endpoints send
#              (its control port answers on, its holdings claim all)
#   announcer  1,024 announcements every half second: its own address
#              at 512 ports, and 512 addresses of other hosts
#   fat        a re-seeder (tests/tools/hostile.py) whose holdings are
#              16 MB, within the JSON limits such an answer once had
# It is no fault: a read it makes fail is an EIO outside every fault's
# window, and fails the run (docs/security.md: a member costs time,
# never a byte or a read); the replicas' RSS and fds are bounded as
# ever.  Its roles are printed with the table.
#
# Every read is classified: byte-exact; EIO (allowed from a fault's
# start until --timeout + 3 s after its end); wrong bytes (chaos.txt:
# anything but exactly one published generation's line); "gone" (its
# own mount killed or unmounted: allowed within that window only);
# anything else.  A read taking longer than HANG_S (--timeout + the
# longest fault + 10 s; while its own mount was up) is a hang; so is one
# still running at the end for longer, and a host or daemon that does
# not end when told.  Mounts run in the foreground of their host's
# script: one that exits unasked, or with another status than the one
# asked for (kill -9: 137, unmount: 0), is a crash (mounted again, so
# the run goes on); so is a seed that dies unasked or ends badly on
# SIGTERM.  After the last fault's window every host reads the whole
# model once more: each read exact, chaos.txt the last generation.  Each
# mount's RSS and fds are sampled after its first whole byte-exact pass
# and at the end.
#
# Printed: per fault kind, how many were injected and what the reads
# whose end fell in its windows got (the latest fault's window that
# holds a read's end counts it); the totals; each mount's RSS and fds.
# r1's mount is never killed or remounted: it lives the whole run.
# Fails on any wrong byte, crash, hang, late EIO, unexplained error,
# inexact read after the faults, or a last mount not sampled or grown
# past CHAOS_RSS_GROW (MiB), or past 16 fds over the most any mount had
# after its first exact pass (fds follow the peers that are up).
#
#   bench/chaos.sh BUILD
# Environment: CHAOS_S (600), CHAOS_HOSTS (8), CHAOS_SIZE (48M),
# CHAOS_RATE (1gbit), CHAOS_TIMEOUT (5), CHAOS_RSS_GROW (48),
# CHAOS_CACHE (each mount's --cache-size; default half the model),
# CHAOS_SEED (random: the faults' RANDOM seed, printed),
# CHAOS_MOUNT_OPTS, CHAOS_SEED_OPTS (more options for each),
# CHAOS_HOSTILE (1; 0: no hostile member), CHAOS_ROLE_S (12),
# CHAOS_RESULTS=FILE (key value lines for tests), CHAOS_KEEP=1.
set -euo pipefail
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
# bound_held KEY OP LIMIT VALUE: whether VALUE OP LIMIT, printing
# "bound: KEY OP LIMIT: VALUE" (docs/claims.md states the bounds for the
# chaos test, which passes these lines on).
# shellcheck source=tests/bound.sh
source "$(dirname "$0")/../tests/bound.sh"
alive() { # PID: running (not gone, not a zombie: kill -0 says yes to those)
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

if [ "${1:-}" = --host ]; then
	# One replica, in its network namespace: keeps a re-seeding mount
	# up (in the foreground, a child: its exit status is ours to see),
	# reads the model in a loop, and takes its faults from
	# $out/$name.cmd ("kill9 SEQ MS", "remount SEQ MS").
	shift
	seedfs=$1 mnt=$2 seeds=$3 model=$4 out=$5 name=$6
	shift 6
	ev=$out/$name.events
	pid=0
	mkdir -p "$mnt"
	reap() { # PID WANT...: wait up to 20 s for it; a crash unless it
		# ended the way we ended it (WANT: exit statuses)
		local p=$1 st=0 w
		shift
		for _ in $(seq 400); do alive "$p" || break; sleep 0.05; done
		if alive "$p"; then
			echo "$(now_ms) hang $p (still running 20 s after it was ended)" >>"$ev"
			kill -9 "$p" 2>/dev/null || true
		fi
		wait "$p" 2>/dev/null || st=$?
		for w in "$@"; do [ "$st" = "$w" ] && return 0; done
		echo "$(now_ms) crash $p (exit status $st)" >>"$ev"
	}
	mount_up() { # mounted, and the model shown (retried: the seed may be down)
		local t
		for t in $(seq 120); do
			"$seedfs" mount -f --seed "$seeds" "$mnt" --log-file "$out/$name.log" \
				"$@" 2>>"$out/$name.err" &
			pid=$!
			echo "$pid" >>"$out/$name.pids"
			for _ in $(seq 600); do
				[ -d "$mnt/m" ] && alive "$pid" && break
				alive "$pid" || break
				sleep 0.05
			done
			if alive "$pid" && [ -d "$mnt/m" ]; then
				echo "$pid" >"$out/$name.pid.new"
				mv "$out/$name.pid.new" "$out/$name.pid"
				echo "$(now_ms) mounted $pid" >>"$ev"
				return 0
			fi
			# Refused (the seed down, say): its one line is in .err.
			alive "$pid" && kill "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null || true
			fusermount3 -u -z "$mnt" 2>/dev/null || true
			sleep 0.5
		done
		echo "$(now_ms) nomount" >>"$ev"
		return 1
	}
	reader() {
		local files f st t0 t1 res k g
		mapfile -t files < <(cd "$model" && find . -type f | sort | sed 's|^\./||')
		while [ ! -e "$out/stop" ]; do
			local p all=1 ps
			p=$(cat "$out/$name.pid" 2>/dev/null || echo 0)
			ps=$(now_ms)
			for f in "${files[@]}"; do
				[ -e "$out/stop" ] && break
				t0=$(now_ms)
				echo "$t0 $f" >"$out/$name.cur"
				st=0 g=-
				if [ "$f" = chaos.txt ]; then
					# Changed by each republish: exactly one
					# generation's line, not a later one than
					# published.
					cat "$mnt/m/$f" >"$out/$name.got" 2>"$out/$name.cmp" || st=2
					if [ $st = 0 ]; then
						k=$(sed -n '1s/^generation \([0-9]\{1,9\}\)$/\1/p' "$out/$name.got")
						if [ -n "$k" ] && printf 'generation %s\n' "$k" | cmp -s - "$out/$name.got" &&
							[ "$k" -le "$(cat "$out/gen")" ]; then
							g=$k
						else
							st=1
						fi
					fi
				else
					cmp "$model/$f" "$mnt/m/$f" >"$out/$name.got" 2>"$out/$name.cmp" || st=$?
				fi
				t1=$(now_ms)
				res=ok
				if [ $st = 1 ]; then
					res=wrong
				elif [ $st != 0 ]; then
					case "$(cat "$out/$name.cmp")" in
					*"Input/output error"*) res=eio ;;
					*"Stale file handle"*) res=estale ;;
					*"not connected"* | *"No such file"* | *"connection abort"*) res=gone ;;
					*) res=other ;;
					esac
				fi
				[ $res = ok ] || all=0
				[ $res = ok ] || [ $res = gone ] ||
					echo "$t0 $t1 $res $f $(head -c 200 "$out/$name.got" "$out/$name.cmp" | tr '\n' ' ')" >>"$out/$name.bad"
				echo "$t0 $t1 $res $f $g" >>"$out/$name.reads"
				# Its mount is down: not a busy loop meanwhile.
				[ $res != gone ] || sleep 0.1
			done
			# A whole pass: when (for the calm at the end), and on a
			# mount's first byte-exact one, its start sample.
			[ -e "$out/stop" ] || echo "$ps $(now_ms) $all" >>"$out/$name.passes"
			if [ $all = 1 ] && [ "$p" != 0 ] && ! grep -q "^$p " "$out/$name.start" 2>/dev/null &&
				[ "$(cat "$out/$name.pid" 2>/dev/null)" = "$p" ]; then
				echo "$p $(sample "$p")" >>"$out/$name.start"
			fi
			sleep 0.5
		done
		rm -f "$out/$name.cur"
	}
	sample() { # PID: "RSS-KiB FDS"
		echo "$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0)" \
			"$(find "/proc/$1/fd" -mindepth 1 2>/dev/null | wc -l)"
	}
	mount_up "$@" || exit 1
	reader &
	rpid=$!
	while [ ! -e "$out/stop" ]; do
		if [ -s "$out/$name.cmd" ]; then
			read -r cmd seq ms <"$out/$name.cmd" || true
			rm -f "$out/$name.cmd"
			echo "$(now_ms) start $seq $cmd" >>"$ev"
			old=$pid
			if [ "$cmd" = kill9 ]; then
				kill -9 "$old" 2>/dev/null || true
				reap "$old" 137
				fusermount3 -u -z "$mnt" 2>/dev/null || true
			else
				# A reader may have a file open: lazily, as an
				# admin would; the daemon must still exit, 0.
				fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null || true
				reap "$old" 0
			fi
			sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
			mount_up "$@" || true
			echo "$(now_ms) end $seq $cmd" >>"$ev"
		elif [ "$pid" != 0 ] && ! alive "$pid"; then
			reap "$pid" # a crash, whatever its status
			fusermount3 -u -z "$mnt" 2>/dev/null || true
			mount_up "$@" || true
			echo "$(now_ms) recovered $pid" >>"$ev"
		fi
		sleep 0.2
	done
	if alive "$pid"; then
		echo "$pid $(sample "$pid")" >"$out/$name.end"
	else
		echo "$(now_ms) crash $pid (gone at the end)" >>"$ev"
	fi
	# The reader ends after its read: one longer than the bound hangs.
	for _ in $(seq $((CHAOS_HANG_MS / 100))); do alive "$rpid" || break; sleep 0.1; done
	if alive "$rpid"; then
		echo "$(now_ms) hang reader ($(cat "$out/$name.cur" 2>/dev/null))" >>"$ev"
		pkill -9 -P "$rpid" 2>/dev/null || true
		kill -9 "$rpid" 2>/dev/null || true
	fi
	wait "$rpid" 2>/dev/null || true
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -u -z "$mnt" 2>/dev/null || true
	reap "$pid" 0
	exit 0
fi

BUILD=$(cd "${1:-build}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
SELF=$SRC/bench/$(basename "$0")
SEEDFS=$BUILD/seedfs
DUR=${CHAOS_S:-600}
HOSTS=${CHAOS_HOSTS:-8}
N=$((HOSTS - 1))
SIZE=${CHAOS_SIZE:-48M}
RATE=${CHAOS_RATE:-1gbit}
TIMEOUT=${CHAOS_TIMEOUT:-5}
HOSTILE=${CHAOS_HOSTILE:-1}
ROLE_S=${CHAOS_ROLE_S:-12}
RSS_GROW=${CHAOS_RSS_GROW:-48}
RESULTS=${CHAOS_RESULTS:-}
read -r -a MOPTS <<<"${CHAOS_MOUNT_OPTS:-}"
read -r -a SOPTS <<<"${CHAOS_SEED_OPTS:-}"
SEED=${CHAOS_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$SEED
MAXF=8000 # the longest fault, ms
HANG_MS=$((TIMEOUT * 1000 + MAXF + 10000))
EIO_MS=$((TIMEOUT * 1000 + 3000))
[ "$(id -u)" = 0 ] || { echo "chaos: needs root (network namespaces, FUSE)" >&2; exit 77; }
for t in ip tc cmp fusermount3; do
	command -v "$t" >/dev/null || { echo "chaos: needs $t (packaging/deps.sh)" >&2; exit 1; }
done

P=ch$(($$ % 100000))
NET=10.$((200 + $$ % 50)).$(($$ % 250))
WORK=$(mktemp -d /dev/shm/seedfs-chaos.XXXXXX)
OUT=$WORK/out
NSS=()
PIDS=()
SEEDPID=0
cleanup() {
	local p f
	touch "$OUT/stop" 2>/dev/null || true
	# Whatever a fault left stopped goes on first, then every daemon
	# any host started (remounts too), the hosts and their readers.
	for f in "$OUT"/*.pids; do
		[ -s "$f" ] && mapfile -t -O "${#PIDS[@]}" PIDS <"$f"
	done
	for p in "${PIDS[@]}" "$SEEDPID"; do
		[ "$p" != 0 ] && kill -CONT "$p" 2>/dev/null || true
	done
	for p in "${HPIDS[@]}"; do
		for _ in $(seq 100); do alive "$p" || break; sleep 0.1; done
	done
	for p in "${HPIDS[@]}"; do
		pkill -9 -P "$p" 2>/dev/null || true
	done
	[ -s "$OUT/x1.pids" ] && mapfile -t -O "${#PIDS[@]}" PIDS <"$OUT/x1.pids"
	for p in "${PIDS[@]}" "${HPIDS[@]}" "$SEEDPID" "$XPID"; do
		[ "$p" != 0 ] || continue
		{ kill -9 "$p" && wait "$p"; } 2>/dev/null || true
	done
	for f in "$WORK"/mnt-*; do
		[ -d "$f" ] && { fusermount3 -u -z "$f" 2>/dev/null || true; }
	done
	for p in "${NSS[@]}"; do ip netns del "$p" 2>/dev/null || true; done
	if [ "${CHAOS_KEEP:-0}" = 1 ]; then
		echo "chaos: kept $WORK" >&2
		rm -rf "$WORK/m" "$WORK"/mnt-*
	else
		rm -rf "$WORK"
	fi
}
HPIDS=()
XPID=0
trap cleanup EXIT
die() {
	echo "chaos: FAIL: $*" >&2
	exit 1
}
# shellcheck source=bench/netns.sh
source "$SRC/bench/netns.sh"
hub || die "ip netns add"

"$BUILD/tests/genmodel" "$WORK/m" --size "$SIZE" --shards 2 >/dev/null
MODEL=$WORK/m
GEN=1
echo "generation $GEN" >"$MODEL/chaos.txt"
mkdir -p "$WORK/out"
echo "$GEN" >"$WORK/out/gen" # the last published: none later may be read
BYTES=$(du -sb "$MODEL" | cut -f1)
CACHE=$((BYTES / 2 / 1048576 + 1))
[ "$CACHE" -ge 16 ] || CACHE=16 # the least a mount takes
CACHE=${CHAOS_CACHE:-${CACHE}M}
mkdir -p "$OUT"

host s0 10 "$RATE"
for i in $(seq "$N"); do host "r$i" $((100 + i)) "$RATE"; done
[ "$HOSTILE" = 0 ] || host x1 200 "$RATE"
SEEDADDR=$NET.10:7070

seed_start() {
	# nsenter --net, not `ip netns exec`: the seed must not hold a copy
	# of the host's mount table (FUSE mounts included).
	nsenter "--net=/run/netns/$P-s0" "$SEEDFS" seed --model-dir "$MODEL" \
		--listen "$SEEDADDR" --protocol tcp --log-level warn --grace 1 "${SOPTS[@]}" \
		>"$WORK/seed.out" 2>>"$WORK/seed.err" &
	SEEDPID=$!
	for _ in $(seq 600); do
		grep -qE '^seedfs seed: ready on ' "$WORK/seed.out" 2>/dev/null && return 0
		alive "$SEEDPID" || break
		sleep 0.05
	done
	return 1
}
seed_start || die "the seed did not start: $(tail -n 5 "$WORK/seed.err")"

echo "chaos: $HOSTS hosts (a seed, $N re-seeding replicas), a $SIZE model," \
	"links $RATE, --timeout $TIMEOUT, ${DUR} s, faults' seed $SEED"
# nsenter --net, not `ip netns exec`: a host's mount stays in this mount
# namespace (cleanup unmounts it) and holds no copy of other mounts.
export CHAOS_HANG_MS=$HANG_MS
for i in $(seq "$N"); do
	nsenter "--net=/run/netns/$P-r$i" bash "$SELF" --host "$SEEDFS" "$WORK/mnt-r$i" \
		"$SEEDADDR" "$MODEL" "$OUT" "r$i" --protocol tcp --reseed \
		--listen "$NET.$((100 + i)):7070" --cache-size "$CACHE" \
		--timeout "$TIMEOUT" -o direct_io "${MOPTS[@]}" 2>"$OUT/r$i.sh.err" &
	HPIDS+=($!)
done
for i in $(seq "$N"); do
	for _ in $(seq 600); do grep -q mounted "$OUT/r$i.events" 2>/dev/null && break; sleep 0.1; done
	grep -q mounted "$OUT/r$i.events" 2>/dev/null ||
		die "r$i did not mount: $(tail -n 5 "$OUT/r$i.err" 2>/dev/null)"
done

# The hostile member (see the top): its roles in turn until the stop,
# each logged in $OUT/x1.roles ("MS ROLE start|end").
XNS=$P-x1
XADDR=$NET.200
XM=0
x_mount() { # [ARGS...]: a re-seeding mount in x1 holding all of the model
	mkdir -p "$WORK/mnt-x1"
	nsenter "--net=/run/netns/$XNS" "$SEEDFS" mount -f --seed "$SEEDADDR" \
		"$WORK/mnt-x1" --protocol tcp --reseed --listen "$XADDR:7070" \
		--cache-size "$CACHE" --timeout "$TIMEOUT" --log-file "$OUT/x1.log" \
		"$@" 2>>"$OUT/x1.err" &
	XM=$!
	echo "$XM" >>"$OUT/x1.pids"
	for _ in $(seq 300); do
		[ -d "$WORK/mnt-x1/m" ] && break
		alive "$XM" || return 0
		sleep 0.1
	done
	"$SEEDFS" prefetch "$WORK/mnt-x1/m" >/dev/null 2>>"$OUT/x1.err" || true
}
x_unmount() {
	[ "$XM" != 0 ] || return 0
	fusermount3 -u "$WORK/mnt-x1" 2>/dev/null || fusermount3 -u -z "$WORK/mnt-x1" 2>/dev/null || true
	for _ in $(seq 200); do alive "$XM" || break; sleep 0.1; done
	alive "$XM" && kill -9 "$XM" 2>/dev/null
	wait "$XM" 2>/dev/null || true
	XM=0
}
# x_drop on|off: every packet x1's mount sends from its fabric
# endpoints (every port it listens on but its control port) dropped, or
# its link as it was.
x_drop() {
	ip netns exec "$XNS" tc qdisc del dev eth0 root 2>/dev/null || true
	if [ "$1" = off ]; then
		shape "$XNS" eth0 "$RATE" add
		return 0
	fi
	ip netns exec "$XNS" tc qdisc add dev eth0 root handle 1: htb default 1
	ip netns exec "$XNS" tc class add dev eth0 parent 1: classid 1:1 htb rate "$RATE" quantum 60000
	ip netns exec "$XNS" tc class add dev eth0 parent 1: classid 1:2 htb rate "$RATE" quantum 60000
	ip netns exec "$XNS" tc qdisc add dev eth0 parent 1:2 tbf rate 1kbit burst 10 limit 10
	local p
	for p in $(ip netns exec "$XNS" ss -ltnpH | grep "pid=$XM," | awk '{ print $4 }' |
		sed 's/.*://' | grep -vx 7070); do
		ip netns exec "$XNS" tc filter add dev eth0 parent 1: protocol ip u32 \
			match ip sport "$p" 0xffff flowid 1:2
	done
}
hostile_loop() {
	local roles=(forger staller fat announcer) k=0 role end xh=0
	mkdir -p "$WORK/x1-state"
	echo fat >"$WORK/x1-state/holdings"
	while [ ! -e "$OUT/stop" ]; do
		role=${roles[$((k % 4))]}
		k=$((k + 1))
		echo "$(now_ms) $role start" >>"$OUT/x1.roles"
		end=$(($(now_ms) + ROLE_S * 1000))
		case $role in
		forger) x_mount --test-corrupt-slab ;;
		staller)
			x_mount
			sleep 3 # it serves a while: the replicas see it prove itself
			x_drop on
			;;
		fat | announcer)
			if [ "$role" = fat ]; then
				nsenter "--net=/run/netns/$XNS" python3 "$SRC/tests/tools/hostile.py" \
					"$SEEDADDR" "$WORK/x1-state" --listen "$XADDR" --reseeder \
					--announce >"$OUT/x1.fat" 2>>"$OUT/x1.err" &
			else
				nsenter "--net=/run/netns/$XNS" python3 "$SRC/tests/tools/announcer.py" \
					"$SEEDADDR" 1024 $((ROLE_S - 2)) >>"$OUT/x1.announced" 2>>"$OUT/x1.err" &
			fi
			xh=$!
			echo "$xh" >>"$OUT/x1.pids"
			;;
		esac
		while [ "$(now_ms)" -lt "$end" ] && [ ! -e "$OUT/stop" ]; do sleep 0.2; done
		case $role in
		forger) x_unmount ;;
		staller)
			x_drop off
			x_unmount
			;;
		announcer) wait "$xh" 2>/dev/null || true ;; # it prints what it got
		*)
			kill "$xh" 2>/dev/null || true
			wait "$xh" 2>/dev/null || true
			;;
		esac
		echo "$(now_ms) $role end" >>"$OUT/x1.roles"
	done
}
if [ "$HOSTILE" != 0 ]; then
	hostile_loop &
	XPID=$!
fi

FAULTS=$WORK/faults # KIND TARGET START END (ms)
: >"$FAULTS"
: >"$WORK/crashes"
: >"$WORK/hangs"
KINDS=(seed_kill mount_kill stop cut republish remount)
seq_no=0
t_start=$(now_ms)
t_end=$((t_start + DUR * 1000))
seed_check() { # the seed alive, unless we stopped it; a crash restarts it
	if ! alive "$SEEDPID"; then
		local st=0
		wait "$SEEDPID" 2>/dev/null || st=$?
		echo "$(now_ms) seed $SEEDPID (exit status $st)" >>"$WORK/crashes"
		seed_start || die "the seed did not start again"
	fi
}
pause() { # MS, watching the seed meanwhile
	local until=$(($(now_ms) + $1))
	while [ "$(now_ms)" -lt "$until" ]; do
		seed_check
		sleep 0.1
	done
}
inject() { # KIND TARGET: one fault, to its end
	local kind=$1 r=$2 ms=$((1000 + RANDOM % 7000)) t0 target
	seed_check
	seq_no=$((seq_no + 1))
	t0=$(now_ms)
	case $kind in
	seed_kill)
		target=s0
		ms=$((1000 + RANDOM % 5000))
		kill -9 "$SEEDPID" 2>/dev/null || true
		wait "$SEEDPID" 2>/dev/null || true
		sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
		seed_start || die "the seed did not start again after its kill"
		;;
	mount_kill | remount)
		# Never r1: its mount lives the whole run, the witness of
		# what the rest does to a long-lived mount (its RSS and fds).
		[ "$N" -lt 2 ] || [ "$r" != r1 ] || r=r$((2 + RANDOM % (N - 1)))
		target=$r
		ms=$((1000 + RANDOM % 5000))
		echo "$([ "$kind" = mount_kill ] && echo kill9 || echo remount) $seq_no $ms" \
			>"$OUT/$r.cmd.new"
		mv "$OUT/$r.cmd.new" "$OUT/$r.cmd"
		local e=$(($(now_ms) + 60000))
		until grep -q " end $seq_no " "$OUT/$r.events" 2>/dev/null; do
			[ "$(now_ms)" -lt "$e" ] || die "$r: its $kind did not end in 60 s"
			seed_check
			sleep 0.1
		done
		;;
	stop)
		local p
		if [ $((RANDOM % 2)) = 0 ]; then
			target=s0 p=$SEEDPID
		else
			target=$r p=$(cat "$OUT/$r.pid")
		fi
		# Not counted unless it stopped something of ours.
		alive "$p" && kill -STOP "$p" 2>/dev/null || return 0
		sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
		kill -CONT "$p" 2>/dev/null || true
		;;
	cut)
		target=$([ $((RANDOM % 3)) = 0 ] && echo s0 || echo "$r")
		ip -n "$P-$target" link set eth0 down
		sleep "$(awk -v m="$ms" 'BEGIN { printf "%.3f", m / 1000 }')"
		ip -n "$P-$target" link set eth0 up
		;;
	republish)
		target=s0
		GEN=$((GEN + 1))
		echo "$GEN" >"$OUT/gen.new"
		mv "$OUT/gen.new" "$OUT/gen"
		echo "generation $GEN" >"$MODEL/chaos.txt.new"
		mv "$MODEL/chaos.txt.new" "$MODEL/chaos.txt"
		kill -HUP "$SEEDPID" 2>/dev/null || true
		;;
	esac
	echo "$kind $target $t0 $(now_ms)" >>"$FAULTS"
}

# Rounds: every kind once, in a random order (shuffled here, not in a
# subshell: bash reseeds RANDOM there, and CHAOS_SEED would not
# reproduce a run), the first round always whole; after each round a
# calm longer than a fault's EIO window, whose reads must all be exact.
round=0
while [ $round = 0 ] || [ "$(now_ms)" -lt "$t_end" ]; do
	order=("${KINDS[@]}")
	for ((j = ${#order[@]} - 1; j > 0; j--)); do
		x=$((RANDOM % (j + 1)))
		tmp=${order[j]} order[j]=${order[x]} order[x]=$tmp
	done
	for k in "${order[@]}"; do
		[ $round = 0 ] || [ "$(now_ms)" -lt "$t_end" ] || break
		pause $((1000 + RANDOM % 2000))
		inject "$k" "r$((1 + RANDOM % N))"
		printf '\r%4d s: %d faults' $((($(now_ms) - t_start) / 1000)) "$seq_no" >&2
	done
	round=$((round + 1))
	pause $((EIO_MS + 2000))
done
echo >&2
# The end: after the last fault's window, every host reads the whole
# model once more (each read exact: the faults are over).
t_quiet=$(now_ms)
for i in $(seq "$N"); do
	e=$(($(now_ms) + 120000))
	until awk -v q="$t_quiet" '$1 >= q { f = 1 } END { exit !f }' "$OUT/r$i.passes" 2>/dev/null; do
		[ "$(now_ms)" -lt "$e" ] || { echo "r$i: no whole pass in 120 s after the faults" >>"$WORK/hangs"; break; }
		seed_check
		sleep 0.2
	done
done
t_stop=$(now_ms)
# Reads still running this long are hangs.
for i in $(seq "$N"); do
	if [ -s "$OUT/r$i.cur" ]; then
		read -r c0 cf <"$OUT/r$i.cur" || true
		[ -n "${c0:-}" ] && [ $((t_stop - c0)) -gt "$HANG_MS" ] &&
			echo "r$i $c0 $t_stop hang $cf" >>"$WORK/hangs"
	fi
done
touch "$OUT/stop"
if [ "$XPID" != 0 ]; then
	# The hostile member's last role ends within its length.
	for _ in $(seq $(((ROLE_S + 30) * 10))); do alive "$XPID" || break; sleep 0.1; done
	alive "$XPID" && echo "the hostile member's loop still running $((ROLE_S + 30)) s after the stop" >>"$WORK/hangs"
	wait "$XPID" 2>/dev/null || true
	XPID=0
fi
# Each host ends (its reader within the hang bound, its mount unmounted)
# with status 0.
for i in $(seq "$N"); do
	p=${HPIDS[$((i - 1))]}
	for _ in $(seq $(((HANG_MS + 30000) / 100))); do alive "$p" || break; sleep 0.1; done
	if alive "$p"; then
		echo "host r$i still running $(((HANG_MS + 30000) / 1000)) s after the stop" >>"$WORK/hangs"
	else
		st=0
		wait "$p" 2>/dev/null || st=$?
		[ $st = 0 ] || echo "$(now_ms) host r$i exited $st" >>"$WORK/crashes"
	fi
done
seed_check
kill "$SEEDPID" 2>/dev/null || true
st=0
wait "$SEEDPID" 2>/dev/null || st=$?
[ $st = 0 ] || [ $st = 143 ] || echo "$(now_ms) seed $SEEDPID: SIGTERM, exit status $st" >>"$WORK/crashes"
SEEDPID=0

# The reads, each with the host it ran on.
for i in $(seq "$N"); do
	[ -s "$OUT/r$i.reads" ] && sed "s/^/r$i /" "$OUT/r$i.reads"
done >"$WORK/reads"
# Windows in which a host's own mount was down (killed, unmounted, crashed).
for i in $(seq "$N"); do
	awk -v h="r$i" '$2 == "start" { s = $1 } $2 == "end" && s { print h, s, $1; s = 0 }
		$2 == "crash" { c = $1 } $2 == "recovered" && c { print h, c, $1; c = 0 }
		END { if (s) print h, s, 9e15; if (c) print h, c, 9e15 }' "$OUT/r$i.events"
done >"$WORK/down"
for i in $(seq "$N"); do
	awk -v h="r$i" '$2 == "crash" || $2 == "nomount" { print h, $0 }' "$OUT/r$i.events" >>"$WORK/crashes"
	awk -v h="r$i" '$2 == "hang" { print h, $0 }' "$OUT/r$i.events" >>"$WORK/hangs"
done

# Classify: every read, against the faults and its host's down windows.
awk -v eio_ms="$EIO_MS" -v hang_ms="$HANG_MS" -v res="$WORK/class" \
	-v quiet="$t_quiet" -v gen="$GEN" '
	FILENAME ~ /faults$/ { nf++; fk[nf] = $1; fs[nf] = $3; fe[nf] = $4; inj[$1]++; next }
	FILENAME ~ /down$/ { nd++; dh[nd] = $1; ds[nd] = $2; de[nd] = $3; next }
	{
		h = $1; t0 = $2; t1 = $3; r = $4
		# The fault this read is in: the latest begun whose window
		# (start to end + eio_ms) holds its end.
		k = "none"; late = -1
		for (i = nf; i >= 1; i--)
			if (fs[i] <= t1 && t1 <= fe[i] + eio_ms) { k = fk[i]; late = t1 - fe[i]; break }
		# Its own mount down meanwhile: not an error to read nothing;
		# a hang counts until the mount went down.
		down = 0; until = t1
		for (i = 1; i <= nd; i++)
			if (dh[i] == h && ds[i] <= t1 && t0 <= de[i] + 2000) {
				down = 1
				if (ds[i] < until) until = ds[i] > t0 ? ds[i] : t0
			}
		# After the faults and their windows: exact, and the last
		# generation of chaos.txt.
		if (t0 >= quiet && (r != "ok" || ($5 == "chaos.txt" && $6 != gen))) {
			after++; print "after the faults: " $0 " (generation " gen " published)" > "/dev/stderr"
		}
		n[k]++; total++
		if (r == "ok") { ok[k]++; oks++ }
		else if (r == "wrong") { wrong[k]++; wrongs++ }
		else if (r == "eio" || r == "estale") {
			if (k == "none") { lateeio++; print "late EIO: " $0 > "/dev/stderr" }
			else { eio[k]++; eios++; if (late > maxlate[k]) maxlate[k] = late }
			if (r == "estale") estales++
		} else if (r == "gone") {
			if (down) gones++
			else { others++; print "gone, its mount up: " $0 > "/dev/stderr" }
		} else { others++; print "error: " $0 > "/dev/stderr" }
		if (until - t0 > hang_ms) { hangs++; print "hang: " $0 > "/dev/stderr" }
	}
	END {
		printf "| %-10s | %8s | %10s | %6s | %17s | %5s |\n", "fault", "injected", "byte-exact", "EIO", "last EIO after (s)", "wrong"
		printf "|------------|----------|------------|--------|--------------------|-------|\n"
		split("seed_kill mount_kill stop cut republish remount none", kinds, " ")
		for (j = 1; j <= 7; j++) {
			k = kinds[j]
			printf "| %-10s | %8s | %10d | %6d | %18s | %5d |\n", k,
				k == "none" ? "-" : inj[k] + 0, ok[k], eio[k],
				eio[k] ? sprintf("%.1f", maxlate[k] / 1000) : "-", wrong[k]
		}
		printf "reads %d byte_exact %d eio %d estale %d late_eio %d wrong %d gone %d other %d hangs %d after %d\n",
			total, oks, eios, estales, lateeio, wrongs, gones, others, hangs, after > res
	}' "$FAULTS" "$WORK/down" "$WORK/reads" >"$WORK/table" 2>"$WORK/why"
[ -s "$WORK/hangs" ] && cat "$WORK/hangs" >>"$WORK/why"
read -r _ reads _ exact _ eios _ estales _ late _ wrong _ gonec _ others _ hangs _ after <"$WORK/class"
hangs=$((hangs + $(wc -l <"$WORK/hangs")))
crashes=$(grep -c . "$WORK/crashes" || true)

echo
echo "seedfs chaos: $HOSTS hosts, a $SIZE model ($BYTES bytes), links $RATE," \
	"--timeout $TIMEOUT s, $(((t_stop - t_start) / 1000)) s, $seq_no faults (seed $SEED)"
echo
cat "$WORK/table"
echo
if [ "$HOSTILE" != 0 ]; then
	echo "hostile member x1: $(awk '$3 == "start" { n[$2]++ } END { for (r in n) printf "%s %d, ", r, n[r] }' \
		"$OUT/x1.roles" 2>/dev/null)announcements $(tr '\n' ' ' <"$OUT/x1.announced" 2>/dev/null)"
	echo
fi
echo "reads $reads: byte-exact $exact, EIO $eios (ESTALE $estales among them)," \
	"EIO outside a fault's window $late, wrong $wrong, own mount down $gonec," \
	"other errors $others, hangs (> $((HANG_MS / 1000)) s) $hangs, crashes $crashes;" \
	"after the faults (from $(((t_quiet - t_start) / 1000)) s) not exact: $after"
echo
printf '| %-5s | %-9s | %9s | %9s | %7s | %7s |\n' mount pid "RSS start" "RSS end" "fds" "fds end"
printf '|-------|-----------|-----------|-----------|---------|---------|\n'
grown=0
# A mount's fds follow its peers: one sampled while others were down
# (killed, unmounted, cut off) starts low.  Growth is counted from the
# most any mount had after its first exact pass (a mount with all its
# peers), or its own start if higher.
fd_top=$(cat "$OUT"/r*.start 2>/dev/null | awk '$3 > m { m = $3 } END { print m + 0 }')
for i in $(seq "$N"); do
	read -r ep erss efd <"$OUT/r$i.end" 2>/dev/null || { ep=- erss=0 efd=0; }
	read -r _ srss sfd < <(awk -v p="$ep" '$1 == p' "$OUT/r$i.start" 2>/dev/null | head -n 1) || true
	printf '| %-5s | %-9s | %7s MB | %7s MB | %7s | %7s |\n' "r$i" "$ep" \
		"$([ -n "${srss:-}" ] && echo $((srss / 1024)) || echo -)" $((erss / 1024)) "${sfd:--}" "$efd"
	# Every host's last mount read a whole pass exact (the calm at the
	# end) and was alive at the end: both samples, or it fails.
	if [ -z "${srss:-}" ] || [ "$erss" = 0 ]; then
		grown=$((grown + 1))
		echo "r$i: its last mount ($ep) not sampled after a whole exact pass and at the end" >>"$WORK/why"
	elif ! {
		# both checked (and printed), RSS in MiB rounded up
		bound_held rss_grow_mib "<=" "$RSS_GROW" $(((erss - srss + 1023) / 1024))
		rss_held=$?
		bound_held fds_grow "<=" 16 $((efd - (sfd > fd_top ? sfd : fd_top))) && [ "$rss_held" = 0 ]
	}; then
		grown=$((grown + 1))
		echo "r$i grew: RSS $srss -> $erss KiB, fds $sfd -> $efd (the most any mount had after its first exact pass: $fd_top)" >>"$WORK/why"
	fi
	srss=""
done
if [ -n "$RESULTS" ]; then
	{
		echo "reads $reads"
		echo "byte_exact $exact"
		echo "eio $eios"
		echo "late_eio $late"
		echo "wrong $wrong"
		echo "other $others"
		echo "hangs $hangs"
		echo "crashes $crashes"
		echo "grown $grown"
		echo "after $after"
		echo "faults $seq_no"
		echo "hostile_roles $(awk '$3 == "start"' "$OUT/x1.roles" 2>/dev/null | wc -l)"
		for k in "${KINDS[@]}"; do echo "injected_$k $(awk -v k="$k" '$1 == k' "$FAULTS" | wc -l)"; done
	} >"$RESULTS"
fi
if [ -s "$WORK/why" ] || [ -s "$WORK/crashes" ]; then
	# (the run's logs: CHAOS_KEEP=1 keeps them)
	echo
	echo "what went wrong:"
	head -n 40 "$WORK/why" "$WORK/crashes" 2>/dev/null
	# What the hosts' scripts said, but bash's notes of our own kills.
	grep -hv 'Killed' "$OUT"/*.sh.err 2>/dev/null | head -n 20 || true
	# A host whose mount crashed: what its mounts said last (stderr:
	# a refusal's line; the log's errors and warnings).
	for h in $(awk '{ print $1 }' "$WORK/crashes" | grep '^r[0-9]*$' | sort -u); do
		echo "--- $h: its mounts' last lines"
		grep -hv 'Killed\|without --token-file' "$OUT/$h.err" 2>/dev/null | tail -n 5 || true
		grep -hE ' [EW] |unmounting|signal' "$OUT/$h.log" 2>/dev/null | tail -n 12 || true
	done
fi
verdict=0
for b in "wrong $wrong" "crashes $crashes" "hangs $hangs" "late_eio $late" \
	"other $others" "grown $grown" "after $after"; do
	# shellcheck disable=SC2086
	bound_held ${b% *} = 0 ${b#* } || verdict=1
done
[ "$verdict" = 0 ] && [ "$exact" -gt 0 ] ||
	die "wrong $wrong, crashes $crashes, hangs $hangs, late EIO $late, other errors $others, grown or unsampled $grown, not exact after the faults $after, byte-exact $exact"
echo "chaos: passed"
