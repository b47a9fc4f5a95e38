#!/usr/bin/env bash
# A `seedfs prefetch` client that stops reading (SIGSTOP) never keeps its
# mount daemon from exiting, and is dropped 5 s after it stopped (issues
# 26 and 40).  The daemon sends it a progress line every 100 ms; its
# socket would hold about 280 of them (28 s), but the daemon drops a
# client that has left what it was sent unread for 5 s, however little
# that is.  Three mounts of one seed on a slow link (so that each
# prefetch outlasts that), each with a stopped client:
#   A: fusermount3 -u          the daemon exits within EXIT_MS
#   B: SIGTERM (it unmounts)   the daemon exits within EXIT_MS
#   C: left alone              the daemon drops the client 5 s (SEND_MS)
#                              after it stopped, within a margin, with
#                              one log line naming its pid, its socket
#                              far from full; the mount stays
# The bounds are docs/cache.md's (Prefetch) and the README's.  EXIT_MS
# is a second for the unmount plus the daemon's teardown, on a loaded
# 2-core machine under ASan.
#   prefetch_sigstop.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

SEND_MS=5000 # docs/cache.md: a client that reads nothing for 5 s is dropped
EXIT_MS=5000
DROP_MARGIN_MS=1500 # a line's interval, and the log line's own delay

netns_setup
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 128M --shards 2
start_seed_ns "$MODEL" --checksum-chunk 64K
HOST=$NS_IP
# 32 Mbit/s shared by three prefetches: about 1.3 MB/s each, 20 chunks
# of 64 KiB a second (a progress line needs one; at most 10 are sent a
# second): the model (about 140 MiB) lasts 100 s, three times the time
# to fill a socket, and more than that (34 s) with the link to itself.
link tbf rate 32mbit burst 64kbit latency 400ms

CLIENTS=()
# release: the stopped clients run again (their daemons may be waiting
# for them), before a failure message or at the end
release() {
	local p
	for p in "${CLIENTS[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
}
die() {
	release
	fail "$@"
}
# bound_or_die: lib.sh's bound, its failure through die (the stopped
# clients released first).
bound_or_die() {
	local key=$1 op=$2 limit=$3 value=$4
	shift 4
	bound_held "$key" "$op" "$limit" "$value" || die "$*: $value, bound $op $limit ($key)"
}

declare -A MPID MNTOF CPID STOPPED
for x in A B C; do
	MOUNT_LOG=mount$x mount_seed "$WORK/mnt$x" --chunk-size 64K --cache-size 256M
	MPID[$x]=$MOUNT_PID
	MNTOF[$x]=$WORK/mnt$x
done
# rq PID: the bytes waiting in the receive queue of PID's unix socket
# (awk reads all of it: ss must not die of SIGPIPE under pipefail)
rq() { ss -Hxp | awk -v me="pid=$1," 'index($0, me) && $1 == "u_str" && !q { q = $3 } END { print q + 0 }'; }
for x in A B C; do
	"$SEEDFS" prefetch "${MNTOF[$x]}/m" 2>"$WORK/pf$x.err" &
	CPID[$x]=$!
	PIDS+=("$!")
	CLIENTS+=("$!")
done
# Stopped once its request is with the daemon: it shows progress.
for x in A B C; do
	for _ in $(seq 400); do
		[ -s "$WORK/pf$x.err" ] && break
		sleep 0.05
	done
	[ -s "$WORK/pf$x.err" ] || die "client $x: no progress in 20 s"
	kill -STOP "${CPID[$x]}" 2>/dev/null || die "client $x ended before it was stopped: $(cat "$WORK/pf$x.err")"
	STOPPED[$x]=$(now_ms)
done
ok "three clients stopped (SIGSTOP) with their prefetches under way"

# A and B: once their stopped client has lines it has not read, A is
# unmounted and B sent SIGTERM, well inside the 5 s bound; C is left
# alone.
declare -A ACT GONE
for x in A B; do
	for _ in $(seq 60); do
		[ "$(rq "${CPID[$x]}")" -gt 0 ] && break
		sleep 0.05
	done
	[ "$(rq "${CPID[$x]}")" -gt 0 ] || die "client $x: no line queued 3 s after its stop"
done
ACT[A]=$(now_ms)
fusermount3 -u "${MNTOF[A]}" || die "fusermount3 -u ${MNTOF[A]}"
ACT[B]=$(now_ms)
kill -TERM "${MPID[B]}"
how() { [ "$1" = A ] && echo "fusermount3 -u" || echo SIGTERM; }
for x in A B; do
	for _ in $(seq $((EXIT_MS / 50 + 20))); do
		running "${MPID[$x]}" || break
		sleep 0.05
	done
	GONE[$x]=$(($(now_ms) - ACT[$x]))
	running "${MPID[$x]}" &&
		die "mount daemon $x (${MPID[$x]}) still running ${GONE[$x]} ms after $(how $x) with a stopped client:$(stuck_threads "${MPID[$x]}")"
	bound_or_die "exit_${x,}_ms" "<=" "$EXIT_MS" "${GONE[$x]}" "mount daemon $x exited after $(how $x) with a stopped client, ms"
done
ok "with a stopped client, the daemon exits ${GONE[A]} ms after fusermount3 -u, ${GONE[B]} ms after SIGTERM (bound $EXIT_MS ms)"

# C: dropped by the bound, counted from its stop (the log line's own
# time): not before it, nor long after, its socket far from full.
bound=$((SEND_MS + DROP_MARGIN_MS))
for _ in $(seq 400); do
	grep -q "mctl: prefetch client pid ${CPID[C]}: " "$WORK/mountC.log" && break
	[ $(($(now_ms) - STOPPED[C])) -le "$bound" ] || break
	sleep 0.05
done
line=$(grep "mctl: prefetch client pid ${CPID[C]}: " "$WORK/mountC.log") ||
	die "mount C: its stopped client not dropped $(($(now_ms) - STOPPED[C])) ms after it stopped (bound $bound ms; $(rq "${CPID[C]}") bytes queued)"
[ "$(echo "$line" | wc -l)" = 1 ] || die "mount C: more than one line: $line"
echo "$line" | grep -q " $SEND_MS ms .*dropped" || die "mount C said: $line"
waited=$(($(date -d "${line%% *}" +%s%3N) - STOPPED[C]))
bound_or_die drop_ms ">=" $((SEND_MS - 1000)) "$waited" "mount C: the client dropped after it stopped (bound $SEND_MS ms), ms"
bound_or_die drop_most_ms "<=" "$bound" "$waited" "mount C: the client dropped after it stopped (bound $SEND_MS ms), ms"
q=$(rq "${CPID[C]}")
bound_or_die unread_at_drop "<" 16384 "$q" "client C: bytes queued at its drop (its socket filling, not checked)"
ok "C: dropped $waited ms after it stopped (bound $SEND_MS ms, asserted $((SEND_MS - 1000))-$bound ms) with $q bytes unread: ${line#* mctl: }"

# The clients run again: each ends with status 1 and one line of why.
release
for x in A B C; do
	st=0
	wait "${CPID[$x]}" || st=$?
	[ "$st" = 1 ] || die "client $x ended with $st: $(tail -n 2 "$WORK/pf$x.err")"
	tail -n 1 "$WORK/pf$x.err" | grep -q "^seedfs prefetch: the mount daemon closed the connection" ||
		die "client $x said: $(tail -n 2 "$WORK/pf$x.err")"
done
ok "the clients, continued: '$(tail -n 1 "$WORK/pfC.err")'"

# Mount C still serves, and unmounts.
grep -q "prefetch: request for 1 path(s) (m): stopped" "$WORK/mountC.log" ||
	die "mount C: its prefetch did not stop: $(grep prefetch: "$WORK/mountC.log" | tail -n 2)"
link
cmp "$MODEL/config.json" "${MNTOF[C]}/m/config.json" || die "mount C: config.json differs"
MOUNT_PID=${MPID[C]}
unmount_check "${MNTOF[C]}" "${MPID[C]}"
ok "mount C reads after the drop, and unmounts"
sanitizers_clean
