#!/usr/bin/env bash
# Everyday tools see the model, not the debug view: cp -r, du -sb, tar,
# find and rsync through the mount equal the original; times, modes and
# directory link counts are the seed's and stay across remounts (and
# seedfs pull keeps them); a file published later is found by a program
# polling for it within a second; status says what is true now after
# the seed restarts and counts each kind of error under its name.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 12M --shards 3
chmod 0640 "$MODEL/tokenizer.json"
chmod 0750 "$MODEL/extra"
touch -d '2021-03-04 05:06:07.123456789' "$MODEL/config.json"
cp -a "$MODEL" "$WORK/copy"
# On a port below the range of ports bound to 0 (free_port): it comes
# back on it after a kill -9 below, and a test beside this one cannot
# take it meanwhile.
SFP=$(free_port "$HOST")
start_seed "$MODEL" --grace 2 --listen "$HOST:$SFP"
MNT=$WORK/mnt
mount_seed "$MNT" --timeout 2
M=$MNT/m
S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }

# The debug view: reachable by name, never listed.
ls -a "$M" >"$WORK/ls.model" || fail "ls -a $M"
ls -a "$MNT" >"$WORK/ls.root" || fail "ls -a $MNT"
grep -qx config.json "$WORK/ls.model" || fail "ls -a $M: $(cat "$WORK/ls.model")"
refute --why ".seedfs listed in the model directory" -x .seedfs "$WORK/ls.model"
refute --why ".seedfs listed at the mount root" -x .seedfs "$WORK/ls.root"
bound dot_seedfs_listed = 0 "$(cat "$WORK/ls.model" "$WORK/ls.root" | grep -cx .seedfs)" ".seedfs in ls -a"
[ -n "$(ls "$M/.seedfs/tensors" | head -n 1)" ] || fail ".seedfs/tensors not reachable"
grep -q '^model: m ' "$S" || fail "status not reachable by name"
ok ".seedfs is reachable by name and listed nowhere"

# What tools see equals the original.
[ "$(du -sb "$M" | cut -f1)" = "$(du -sb "$MODEL" | cut -f1)" ] ||
	fail "du -sb: $(du -sb "$M") vs $(du -sb "$MODEL")"
cp -r "$M" "$WORK/cpr"
diff -r "$MODEL" "$WORK/cpr" || fail "cp -r copied something else"
[ "$(du -sb "$WORK/cpr" | cut -f1)" = "$(du -sb "$MODEL" | cut -f1)" ] ||
	fail "cp -r copied $(du -sb "$WORK/cpr")"
a=$(cd "$MODEL" && tar cf - . | wc -c)
b=$(cd "$M" && tar cf - . | wc -c)
[ "$a" = "$b" ] || fail "tar: $b bytes through the mount, $a from the original"
# The listing too: names, sizes, modes, owners and times.
(cd "$MODEL" && tar cf - . | tar tvf - | sort -k6) >"$WORK/tvf.model"
(cd "$M" && tar cf - . | tar tvf - | sort -k6) >"$WORK/tvf.mount"
bound tar_listing_differences = 0 "$(diff "$WORK/tvf.model" "$WORK/tvf.mount" | grep -c '^[<>]')" \
	"tar tvf differs: $(diff "$WORK/tvf.model" "$WORK/tvf.mount" | head -n 6)"
for t in f d; do
	bound find_differences = 0 \
		"$(diff <(cd "$MODEL" && find . -type $t | sort) <(cd "$M" && find . -type $t | sort) | grep -c '^[<>]')" \
		"find -type $t differs"
done
[ "$(cd "$M" && find . -type f -print0 | xargs -0 cat | wc -c)" = \
	"$(cd "$MODEL" && find . -type f -print0 | xargs -0 cat | wc -c)" ] ||
	fail "find -type f | xargs cat"
for d in . extra extra/deep; do
	[ "$(stat -c %h "$M/$d")" = "$(stat -c %h "$MODEL/$d")" ] ||
		fail "nlink of $d: $(stat -c %h "$M/$d"), want $(stat -c %h "$MODEL/$d")"
done
ok "du -sb $(du -sb "$M" | cut -f1), cp -r, tar ($b bytes, same listing), find -type f/d and nlink equal the original"

# rsync finds nothing to do, before and after a remount.
rs() { rsync -a --dry-run --itemize-changes "$1/" "$WORK/copy/"; }
out=$(rs "$M") || fail "rsync failed"
bound rsync_changes = 0 "$(grep -c . <<<"$out")" "rsync would transfer: $out"
[ "$(stat -c '%y %a' "$M/config.json")" = "$(stat -c '%y %a' "$MODEL/config.json")" ] ||
	fail "config.json time: $(stat -c '%y' "$M/config.json")"
[ "$(stat -c %a "$M/tokenizer.json")" = 640 ] || fail "mode of tokenizer.json"
unmount_check "$MNT" "$MOUNT_PID"
mount_seed "$MNT" --timeout 2
out=$(rs "$M") || fail "rsync failed"
bound rsync_changes = 0 "$(grep -c . <<<"$out")" "after a remount rsync would transfer: $out"
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" m "$WORK/pulled" 2>"$WORK/pull.err" ||
	fail "pull: $(cat "$WORK/pull.err")"
out=$(rs "$WORK/pulled") || fail "rsync failed"
bound rsync_changes = 0 "$(grep -c . <<<"$out")" "after seedfs pull rsync would transfer: $out"
ok "rsync -a --dry-run -i: nothing to transfer (mount, remount, seedfs pull)"

# A program polling for a file sees it within a second of the republish,
# with no open elsewhere to make the mount ask.
( until [ -e "$M/late.txt" ]; do sleep 0.05; done; now_ms >"$WORK/seen" ) &
POLL=$!
PIDS+=("$POLL")
# A time that must pass (the thing under test): the poller misses for a
# while (misses are cached 0.2 s each), and must still see the file.
sleep 1.5
echo late >"$MODEL/late.txt"
kill -HUP "$SEED_PID"
for _ in $(seq 200); do grep -q "published .*generation 2" "$WORK/seed.out" && break; sleep 0.01; done
t_pub=$(now_ms)
grep -q "published .*generation 2" "$WORK/seed.out" || fail "no generation 2"
for _ in $(seq 60); do [ -s "$WORK/seen" ] && break; sleep 0.05; done
[ -s "$WORK/seen" ] || fail "the poller did not see late.txt within 3 s"
el=$(($(cat "$WORK/seen") - t_pub))
bound seen_ms "<=" 1000 "$el" "late.txt seen after the republish, ms"
cmp "$MODEL/late.txt" "$M/late.txt" || fail "late.txt bytes"
ok "a polling program saw a new file $el ms after the republish"

# A lookup of a missing name asks the seed at most every 200 ms: 20 of
# them over a second or more make at most one question (GET /v1/models,
# counted by the seed) per 200 ms, besides the mount's own once a second.
asked() {
	curl -sf "http://$HOST:$SEED_PORT/metrics" |
		sed -n 's|^seedfs_seed_control_requests_total{route="/v1/models",code="200"} ||p'
}
q0=$(asked)
[ -n "$q0" ] || fail "no /v1/models count in the seed's metrics"
t0=$(now_ms)
for i in $(seq 20); do [ ! -e "$M/absent-$i" ] || fail "absent-$i exists"; sleep 0.05; done
el=$(($(now_ms) - t0))
q=$(($(asked) - q0))
[ "$q" -ge 1 ] && [ "$q" -le $((el / 200 + 1 + el / 1000 + 1)) ] ||
	fail "20 missing names in $el ms asked the seed $q times (at most every 200 ms: $((el / 200 + 1)), and $((el / 1000 + 1)) of the mount's own)"
ok "20 missing names in $el ms: $q questions to the seed"

# Lookups of missing names are bounded in time, even with a seed that
# does not answer (stopped): the first waits at most a second, the
# rest do not wait.
kill -STOP "$SEED_PID"
# A time that must pass (a cache period): past the last answer's 200 ms,
# so the next miss asks the stopped seed.
sleep 0.3
t0=$(now_ms)
for i in $(seq 50); do [ ! -e "$M/missing-$i" ] || fail "missing-$i exists"; done
el=$(($(now_ms) - t0))
# Opens do not wait for the seed that does not answer (it is asked
# behind them, a timeout apart): 8 opens and reads of a cached file over
# 2.4 s, past the next question behind (--timeout 2), each within 500 ms.
worst=0
for i in $(seq 8); do
	t1=$(now_ms)
	cmp "$MODEL/config.json" "$M/config.json" || fail "config.json with a stopped seed"
	e=$(($(now_ms) - t1))
	[ "$e" -gt "$worst" ] && worst=$e
	sleep 0.3
done
kill -CONT "$SEED_PID"
bound lookups_ms "<=" 1800 "$el" "50 lookups of missing names with a stopped seed, ms"
bound silent_open_ms "<=" 500 "$worst" "the longest open and read once the seed is known silent, ms"
ok "50 lookups of missing names with a stopped seed: $el ms; 8 opens and reads: at most $worst ms each"
# It answers again: status says so within a couple of seconds.
for _ in $(seq 40); do grep -q "^seed_control: answers$" "$S" && break; sleep 0.1; done
grep -q "^seed_control: answers$" "$S" || fail "status 4 s after the seed went on: $(grep ^seed_control "$S")"

# Status after the seed restarts: what is true now.  A read that needs
# the dead seed fails; each kind of failure is counted under its name
# (as many as the log shows); a new seed on the same port serves the
# next open, and status says reachable again.
grep -q "^seed: $HOST:$SEED_PORT (reachable)$" "$S" || fail "status: $(grep ^seed "$S")"
OLD_PORT=$SEED_PORT
kill -9 "$SEED_PID"
wait "$SEED_PID" 2>/dev/null || true
F=model-00002-of-00003.safetensors
if cat "$M/$F" >/dev/null 2>"$WORK/cat.err"; then fail "read from a dead seed"; fi
grep -Eq "^seed: $HOST:$SEED_PORT \((unreachable|reconnecting) for " "$S" ||
	fail "status after the kill: $(grep ^seed "$S")"
grep -q "^seed_control: no answer" "$S" || fail "status: $(grep ^seed_control "$S")"
n_to=$(grep -c "no progress for" "$WORK/mount.log" || true)
n_tr=$(grep -c "W cache: pull of .* failed:" "$WORK/mount.log" || true)
bound errors_timeout_off = 0 $(($(val errors_timeout) - n_to)) "status errors_timeout $(val errors_timeout), the log has $n_to: off by"
bound errors_transport_off = 0 $(($(val errors_transport) - n_tr)) "status errors_transport $(val errors_transport), the log has $n_tr: off by"
[ "$((n_to + n_tr))" -ge 1 ] || fail "the failure was not counted"
ok "dead seed: $(grep ^seed: "$S"); errors_timeout $n_to and errors_transport $n_tr, as logged"
start_seed "$MODEL" --listen "$HOST:$OLD_PORT"
[ "$SEED_PORT" = "$OLD_PORT" ] || fail "the seed came back on $SEED_PORT"
# The mount asks behind the opens while the seed does not answer, at
# most a timeout apart: reads work again within seconds.
t0=$(now_ms)
for _ in $(seq 40); do cmp "$MODEL/$F" "$M/$F" 2>/dev/null && break; sleep 0.25; done
cmp "$MODEL/$F" "$M/$F" || fail "read after the seed came back"
el=$(($(now_ms) - t0))
[ "$el" -le 5000 ] || fail "reads came back after $el ms"
grep -q "^seed: $HOST:$SEED_PORT (reachable)$" "$S" || fail "status: $(grep ^seed "$S")"
grep -q "^seed_control: answers$" "$S" || fail "status: $(grep ^seed_control "$S")"
ok "the seed restarted: reads work after $el ms, status says $(grep ^seed: "$S")"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
