#!/usr/bin/env bash
# The control port stays open for business.  300 clients that send a
# request one byte a second (from 127.0.0.2) and 500 that connect and
# send nothing (from 127.0.0.3) run for 12 s; meanwhile every
# /v1/generation asked from 127.0.0.1 is answered within 500 ms, and a
# new mount gets its manifest within 500 ms.  The port is event driven,
# caps each client address at 32 connections, and gives each request a
# deadline of 5 s (and says so).
source "$(dirname "$0")/lib.sh" "$1"
SLOW=$BUILD/tests/slowclient

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 1
start_seed "$MODEL"
URL=http://$HOST:$SEED_PORT/v1/generation
curl -sf -m 2 "$URL" >/dev/null || fail "no answer before"

"$SLOW" "$HOST" "$SEED_PORT" 127.0.0.2 300 drip 12 >"$WORK/drip.out" &
DRIP=$!
PIDS+=("$DRIP")
"$SLOW" "$HOST" "$SEED_PORT" 127.0.0.3 500 idle 12 >"$WORK/idle.out" &
IDLE=$!
PIDS+=("$IDLE")
# The attack under way: from each crowd's address, at least the port's
# cap per address (CTLSRV_PER_CLIENT, 32; those above it are closed and
# opened again) of connections established to the seed (its side).
held() { ss -Htn state established "( sport = :$SEED_PORT and dst $1 )" | wc -l; }
t0=$(now_ms)
while :; do
	n2=$(held 127.0.0.2)
	n3=$(held 127.0.0.3)
	[ "$n2" -ge 32 ] && [ "$n3" -ge 32 ] && break
	[ $(($(now_ms) - t0)) -lt 5000 ] ||
		fail "the attack is not under way after 5 s: $n2 connections from 127.0.0.2 and $n3 from 127.0.0.3 established to the seed (32 each wanted)"
	sleep 0.05
done
ok "the attack under way after $(($(now_ms) - t0)) ms: $n2 connections from 127.0.0.2, $n3 from 127.0.0.3"
# Timed by curl itself (connect to last byte), not by the wall clock
# around it: starting curl on a loaded 2-core machine takes up to a
# second, which is not the seed's.  Within 500 ms each (28-216 ms
# worst seen with load 9-10 on 2 cores; a SYN the backlog dropped would
# cost 1 s).
worst=0
for i in $(seq 16); do
	curl -sf -m 3 -o "$WORK/gen.json" -w '%{time_connect} %{time_total}\n' "$URL" \
		>"$WORK/curl.t" || fail "curl $i: no answer"
	read -r tc tt <"$WORK/curl.t"
	el=$(awk -v t="$tt" 'BEGIN { printf "%d", t * 1000 }')
	grep -q '"generation":1,' "$WORK/gen.json" || fail "answer $i: $(cat "$WORK/gen.json")"
	[ "$el" -le 500 ] || fail "curl $i answered after $el ms (connected after $tc s)"
	[ "$el" -gt "$worst" ] && worst=$el
	sleep 0.4
done
bound answer_ms "<=" 500 "$worst" "the slowest of 16 answers under attack, ms"
# A new mount: its manifest, fetched from the attacked port (connect
# to last byte, the mount's own timing), within 500 ms (0-1 ms seen
# loaded).  The rest of its start-up is the transport's and the
# machine's, not the port's (mountsafe bounds it).
MNT=$WORK/mnt
t0=$(now_ms)
mount_seed "$MNT" --log-level debug
el=$(($(now_ms) - t0))
mf=$(sed -n 's/.* D replica: manifest fetched in \([0-9]*\) ms$/\1/p' "$WORK/mount.log" | head -n 1)
[ -n "$mf" ] || fail "no manifest fetch timed in the mount's log"
bound manifest_ms "<=" 500 "$mf" "the mount's manifest fetch under attack, ms"
cmp "$MODEL/config.json" "$MNT/m/config.json" || fail "read during the attack"
ok "under 300 dripping and 500 idle clients: 16 answers in at most $worst ms (curl's timing); a mount's manifest in $mf ms, the mount up $el ms after its command"
wait "$DRIP" || fail "the dripping clients: $(cat "$WORK/drip.out")"
wait "$IDLE" || fail "the idle clients: $(cat "$WORK/idle.out")"
drip=$(cat "$WORK/drip.out")
idle=$(cat "$WORK/idle.out")
[ "$(echo "$drip" | awk '{ print $4 }')" -gt 0 ] || fail "no dripping client was cut: $drip"
[ "$(echo "$idle" | awk '{ print $4 }')" -gt 0 ] || fail "no idle client was cut: $idle"
# The cap: 32 connections per client address held at once (those past it
# closed at once).  The deadline: a request not whole 5 s after connect is
# cut, no sooner and at most 1.5 s later (the seed looks every 200 ms; the
# rest is margin for a loaded machine).
for kind in drip idle; do
	out=$(cat "$WORK/$kind.out")
	read -r held a b < <(echo "$out" | sed -n 's/.* held \([0-9]*\) cut \([0-9.]*\)-\([0-9.]*\) s read [0-9]*$/\1 \2 \3/p')
	[ -n "$b" ] || fail "$kind: no held/cut in: $out"
	bound "held_${kind}" = 32 "$held" "$kind: connections from one address held at once ($out)"
	# In whole ms, the first rounded down and the last up (no rounding
	# passes what the seconds would fail).
	bound "${kind}_cut_first_ms" ">=" 4950 "$(awk -v a="$a" 'BEGIN { printf "%d", a * 1000 }')" \
		"$kind: the first cut after connect, not 5 s ($out), ms"
	bound "${kind}_cut_last_ms" "<=" 6500 "$(awk -v b="$b" 'BEGIN { m = b * 1000; printf "%d", (m > int(m)) ? int(m) + 1 : m }')" \
		"$kind: the last cut after connect, not 5 s ($out), ms"
done
grep -q "closed [0-9]* connections that sent no whole request within 5000 ms" "$WORK/seed.err" ||
	fail "the seed did not say it cut them"
ok "dripping: $drip; idle: $idle; $(grep -o 'closed [0-9]* connections.*' "$WORK/seed.err" | head -n 1)"
unmount_check "$MNT" "$MOUNT_PID"
curl -sf -m 2 "$URL" >/dev/null || fail "no answer after"
sanitizers_clean
