#!/usr/bin/env bash
# Concurrency stress against a real seed and mount, for the sanitizer
# builds (ThreadSanitizer above all): readers on every shard, stat,
# listings and xattrs, a prefetch, the seed publishing a generation a
# second (an unchanged shard set, so readers keep comparing; the old
# views expire behind them), then an unmount while readers still run.
# Passes when every byte read matched and no sanitizer said a word.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 24M --shards 3
start_seed "$MODEL" --grace 1
MNT=$WORK/mnt
mount_seed "$MNT" --cache-size 32M --ahead 8M
M=$MNT/m
files=$(cd "$MODEL" && find . -name '*.safetensors' | sed 's|^\./||' | sort)
pairs=()
for f in $files; do pairs+=("$MODEL/$f" "$M/$f"); done

end=$(($(now_ms) + 8000))
(
	while [ "$(now_ms)" -lt "$end" ]; do
		"$READCHECK" threads 4 "${pairs[@]}" || exit 1
	done
) &
R1=$!
(
	while [ "$(now_ms)" -lt "$end" ]; do
		for f in $files; do "$READCHECK" pread "$MODEL/$f" "$M/$f" 30 $RANDOM || exit 1; done
	done
) &
R2=$!
(
	while [ "$(now_ms)" -lt "$end" ]; do
		ls -la "$M" "$M/.seedfs/tensors" >/dev/null
		getfattr -d "$M/${files%%$'\n'*}" >/dev/null 2>&1 || true
		cat "$MNT/.seedfs/status" "$M/config.json" >/dev/null
		stat "$M/no-such-file" >/dev/null 2>&1 || true
	done
) &
R3=$!
PIDS+=("$R1" "$R2" "$R3")
"$SEEDFS" prefetch "$M" >/dev/null 2>&1 || true
for g in $(seq 2 7); do
	echo "{\"stress\": $g}" >"$MODEL/config.json.tmp"
	mv "$MODEL/config.json.tmp" "$MODEL/config.json"
	kill -HUP "$SEED_PID"
	sleep 1
done
wait "$R1" || fail "concurrent readers"
wait "$R2" || fail "random preads"
wait "$R3" || true
grep -q "adopted generation 7" "$WORK/mount.log" || fail "generations: $(grep adopted "$WORK/mount.log" | tail -n 1)"
ok "8 s of readers, listings, xattrs and a prefetch across 6 new generations: byte-exact"

# An unmount with readers under way: they get errors, nothing crashes.
( "$READCHECK" threads 4 "${pairs[@]}" >/dev/null 2>&1 || true ) &
R4=$!
PIDS+=("$R4")
sleep 0.3
fusermount3 -u -z "$MNT" || fail "unmount"
for _ in $(seq 200); do running "$MOUNT_PID" || break; sleep 0.05; done
running "$MOUNT_PID" && fail "the mount daemon did not exit"
wait "$R4" || true
ok "unmounted with 4 readers under way: the daemon exited"
sanitizers_clean
