#!/usr/bin/env bash
# A fleet member costs time, never a byte or a read (docs/security.md,
# "A fleet member costs time"): eight re-seeding mounts that hold all of
# a model and announce themselves, each on an address of its own in a
# network namespace joined to this one by a veth pair, and a replica
# here reading the model from one seed.  They turn hostile three ways:
#   loss   their fabric connections drop every packet they send: they
#          never answer a read (their control ports answer on, their
#          holdings claim every chunk);
#   slow   their fabric connections send 1 KB/s;
#   wrong  they serve wrong bytes (--test-corrupt-slab).
# loss and slow come after the replica has seen them serve (they proved
# themselves) and, again, from the start of a fresh replica.  The
# replica reads every file byte-exact, with no error, each within one
# --timeout of what the seed alone takes (a --no-verify mount, which
# never reads from re-seeders, timed first), plus a margin for a
# loaded machine.
#   stall_fleet.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

netns_setup
HOST=$HOST_IP
NR=8
TIMEOUT=4
MARGIN_MS=2500
case $SFS_BUILD_KIND in asan | tsan) MARGIN_MS=6000 ;; esac
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 24M --shards 3 >/dev/null
FILES=$(cd "$MODEL" && find . -type f -size +1M | sed "s|^\./||" | sort)
FIRST=$(echo "$FILES" | head -n 1)
REST=$(echo "$FILES" | tail -n +2)
start_seed "$MODEL"
NET=${HOST_IP%.*}
for i in $(seq $NR); do
	ip -n "$NS" addr add "$NET.$((10 + i))/24" dev "$NS_VETH" || fail "ip addr"
done

# What the seed alone takes for each file, cold: SEED_MS[f].
declare -A SEED_MS
MOUNT_LOG=alone
mount_seed "$WORK/alone" --no-verify
for f in $FILES; do
	t0=$(now_ms)
	cmp "$MODEL/$f" "$WORK/alone/m/$f" || fail "the seed alone: $f differs"
	SEED_MS[$f]=$(($(now_ms) - t0))
done
unmount_check "$WORK/alone" "$MOUNT_PID"
echo "the seed alone: $(for f in $FILES; do printf '%s %s ms, ' "$f" "${SEED_MS[$f]}"; done)"

# start_reseeders [ARGS...]: $NR re-seeding mounts in $NS, each on its
# own address, holding all of the model; the seed lists them all.
RPIDS=()
start_reseeders() {
	local i n
	RPIDS=()
	MOUNT_WRAP=(nsenter "--net=/run/netns/$NS")
	for i in $(seq $NR); do
		MOUNT_LOG=r$i
		mount_seed "$WORK/r$i" --reseed --listen "$NET.$((10 + i)):0" \
			--cache-size 64M "$@"
		RPIDS+=("$MOUNT_PID")
	done
	MOUNT_WRAP=()
	for i in $(seq $NR); do
		"$SEEDFS" prefetch "$WORK/r$i/m" >/dev/null 2>"$WORK/pf.err" ||
			fail "prefetch on re-seeder $i: $(cat "$WORK/pf.err")"
	done
	for _ in $(seq 200); do
		n=$(curl -fsS "http://$HOST:$SEED_PORT/v1/sources" | python3 -c \
			'import json, sys; print(json.load(sys.stdin)["live"])')
		[ "$n" -ge $NR ] && return 0
		sleep 0.05
	done
	fail "the seed lists $n re-seeders, $NR wanted"
}

stop_reseeders() {
	local i
	for i in $(seq $NR); do
		unmount_check "$WORK/r$i" "${RPIDS[$((i - 1))]}"
	done
}

# control_addr I: re-seeder I's control address (HOST:PORT)
control_addr() {
	awk '$1 == "reseed:" { print $2 }' "$WORK/r$1/.seedfs/status"
}

# fabric_ports: "ADDRESS PORT" of every TCP socket the re-seeders
# listen on but their control ports (their fabric endpoints': what they
# send goes out from them).  By address and port: each re-seeder has an
# address of its own, so one's fabric port may have the number of
# another's control port.
fabric_ports() {
	local i pid ctl
	for i in $(seq $NR); do
		pid=${RPIDS[$((i - 1))]}
		ctl=$(control_addr "$i")
		ip netns exec "$NS" ss -ltnpH | grep "pid=$pid," |
			awk '{ print $4 }' | grep -vxF "$ctl" |
			sed -E 's/^(.*):([0-9]+)$/\1 \2/'
	done | sort -u
}

# shape loss|slow|"": what the re-seeders send from their fabric ports:
# every packet dropped, or 1 KB/s each; "" as it was.
shape() {
	tc -n "$NS" qdisc del dev "$NS_VETH" root 2>/dev/null || true
	[ -n "$1" ] || return 0
	local a p k=10 i
	tc -n "$NS" qdisc add dev "$NS_VETH" root handle 1: htb default 1 || fail "tc htb"
	tc -n "$NS" class add dev "$NS_VETH" parent 1: classid 1:1 htb rate 10gbit \
		quantum 60000
	while read -r a p; do
		k=$((k + 1))
		case $a in
		"$NET".*) ;;
		*) fail "re-seeder fabric port on $a:$p: not an address of its own" ;;
		esac
		if [ "$1" = loss ]; then
			# (No netem here: a tbf every packet is larger than
			# drops them all.)
			tc -n "$NS" class add dev "$NS_VETH" parent 1: classid "1:$k" htb \
				rate 10gbit quantum 60000
			tc -n "$NS" qdisc add dev "$NS_VETH" parent "1:$k" tbf rate 1kbit \
				burst 10 limit 10 || fail "tc tbf"
		else
			tc -n "$NS" class add dev "$NS_VETH" parent 1: classid "1:$k" htb \
				rate 8kbit ceil 8kbit burst 1600 quantum 1600
		fi
		tc -n "$NS" filter add dev "$NS_VETH" parent 1: protocol ip u32 \
			match ip src "$a/32" match ip sport "$p" 0xffff \
			flowid "1:$k" || fail "tc filter"
	done < <(fabric_ports)
	[ $k -gt 10 ] || fail "no fabric port of the re-seeders found"
	# Their control ports answer on, whatever their fabric ports do.
	for i in $(seq $NR); do
		curl -fsS -m 2 -o /dev/null "http://$(control_addr "$i")/v1/models" ||
			fail "$1: re-seeder $i's control port does not answer"
	done
}

# reseeders_seen MNT: how many re-seeders MNT has holdings from
reseeders_seen() {
	awk '/^(seed|reseeder): / { r = $1 == "reseeder:" }
		r && $1 == "seed_holdings:" && $2 == "m" && $3 > 0 { n++ }
		END { print n + 0 }' "$1/.seedfs/status"
}

# reseeder_bytes MNT: what MNT read from re-seeders
reseeder_bytes() {
	awk '/^(seed|reseeder): / { r = $1 == "reseeder:" }
		r && $1 == "seed_bytes:" { n += $2 }
		END { print n + 0 }' "$1/.seedfs/status"
}

# victim NAME: a fresh replica at $WORK/NAME that has the holdings of
# all $NR re-seeders.
victim() {
	local n t0
	MOUNT_LOG=$1
	t0=$(now_ms)
	mount_seed "$WORK/$1" --timeout "$TIMEOUT"
	V=$WORK/$1
	for _ in $(seq 200); do
		n=$(reseeders_seen "$V")
		if [ "$n" -ge $NR ]; then
			echo "$1: holdings from $NR re-seeders $(($(now_ms) - t0)) ms after mount"
			return 0
		fi
		sleep 0.05
	done
	cp "$V/.seedfs/status" "$WORK/$1.status" || true
	curl -fsS "http://$HOST:$SEED_PORT/v1/sources" >"$WORK/sources.json" || true
	FAIL_LAST=("$WORK/sources.json" "$WORK/$1.status" "$WORK/$1.log")
	fail "$1 has holdings from $n re-seeders after 10 s, $NR wanted"
}

# read_timed WHAT FILES...: each byte-exact, no error, within one
# --timeout of the seed alone
read_timed() {
	local what=$1 f t0 el bound
	shift
	for f in "$@"; do
		t0=$(now_ms)
		cmp "$MODEL/$f" "$V/m/$f" || fail "$what: $f differs (or a read failed)"
		el=$(($(now_ms) - t0))
		# Past the seed alone's time: at most --timeout + MARGIN_MS.
		bound over_seed_alone_ms "<=" $((TIMEOUT * 1000 + MARGIN_MS)) $((el - ${SEED_MS[$f]})) \
			"$what: $f took $el ms, the seed alone ${SEED_MS[$f]} ms: more by, ms"
	done
	bound errors_timeout = 0 "$(status_val "$V/.seedfs/status" errors_timeout)" "$what: reads timed out (status errors_timeout)"
}

start_reseeders
for mode in loss slow; do
	# Proved first: the replica reads a file with them honest.
	victim "v-$mode"
	read_timed "$mode (honest)" "$FIRST"
	b=$(reseeder_bytes "$V")
	[ "$b" -gt 0 ] || fail "$mode: the re-seeders served nothing while honest"
	shape "$mode"
	# shellcheck disable=SC2086
	read_timed "$mode (after they served)" $REST
	echo "$mode: hedges $(status_val "$V/.seedfs/status" hedges), re-seeder failures $(status_val "$V/.seedfs/status" reseeder_failures)"
	[ "$(status_val "$V/.seedfs/status" reseeder_failures)" -ge 1 ] ||
		fail "$mode: no re-seeder failure counted"
	unmount_check "$V" "$MOUNT_PID"
	# Hostile from the start of a fresh replica.
	victim "w-$mode"
	# shellcheck disable=SC2086
	read_timed "$mode (from the start)" $FILES
	unmount_check "$V" "$MOUNT_PID"
	shape ""
	ok "$mode: 8 re-seeders, after they served and from the start: every file byte-exact within one --timeout of the seed alone"
done
stop_reseeders

start_reseeders --test-corrupt-slab
victim v-wrong
# shellcheck disable=SC2086
read_timed wrong $FILES
grep -q "SHA-256 mismatch: .* from re-seeder" "$WORK/v-wrong.log" ||
	fail "wrong: no re-seeder's bytes were checked"
[ "$(status_val "$V/.seedfs/status" errors_checksum)" -ge 1 ] ||
	fail "wrong: no checksum error counted"
unmount_check "$V" "$MOUNT_PID"
ok "wrong: 8 re-seeders serving wrong bytes: every file byte-exact within one --timeout of the seed alone"
stop_reseeders
