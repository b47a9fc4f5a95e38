#!/usr/bin/env bash
# Defects found by reading the code (at 50a967e), each shown fixed here:
#  - getxattr/listxattr of a replaced file whose generation is gone
#    crashed the mount (an inode held with O_PATH): now ESTALE;
#  - unmounting with --cache-dir while disk misses were queued could
#    post on a quiesced transport and crash: clean exits, many times;
#  - the disk tier kept the files of retired generations open: their
#    space and descriptors grew with every generation;
#  - a failed adoption of a new generation was retried at every open,
#    each fetching the whole manifest again: now a doubling back-off.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2
F=model-00001-of-00002.safetensors
for k in 1 2 3 4; do "$GENMODEL" "$WORK/v$k" --size 8M --shards 2 --seed $((k + 10)); done
start_seed "$MODEL" --grace 1
MNT=$WORK/mnt
CD=$WORK/cd
mount_seed "$MNT" --cache-dir "$CD"
M=$MNT/m

# xattrs of a replaced inode whose generation is gone.
coproc HOLD { "$HOLDFILE" --path "$M/$F"; }
hold_pid=$HOLD_PID # bash unsets HOLD_PID once the coprocess ends
PIDS+=("$hold_pid")
read -r line <&"${HOLD[0]}"
[ "$line" = OPEN ] || fail "holdfile: $line"
hold() { echo "$1" >&"${HOLD[1]}"; read -r reply <&"${HOLD[0]}"; echo "$reply"; }
x=$(hold X)
[ "${x#OK user.seedfs.generation,}" != "$x" ] || fail "xattrs before: $x"
publish() { # K: shard from v$K, then a new generation, read whole
	cp "$WORK/v$1/$F" "$MODEL/$F.tmp" && mv "$MODEL/$F.tmp" "$MODEL/$F"
	kill -HUP "$SEED_PID"
	local g=$(($1 + 1))
	for _ in $(seq 200); do grep -q "^seedfs seed: published model m generation $g " "$WORK/seed.out" && break; sleep 0.05; done
	grep -q "^seedfs seed: published model m generation $g " "$WORK/seed.out" || fail "no generation $g"
	cmp "$MODEL/$F" "$M/$F" || fail "generation $g: $F"
}
# retired G: until the mount has let generation G go (its grace ended,
# the sweeper freed it)
retired() {
	local line="I model: generation $1 of m is no longer served: its open files get ESTALE$"
	for _ in $(seq 200); do grep -q "$line" "$WORK/mount.log" && break; sleep 0.05; done
	grep -q "$line" "$WORK/mount.log" || fail "generation $1 not retired in 10 s (--grace 1)"
}
publish 1
retired 1
[ "$(hold X)" = "ERR ESTALE" ] || fail "listxattr of the replaced inode: $(hold X)"
[ "$(hold 'G user.seedfs.generation')" = "ERR ESTALE" ] || fail "getxattr"
running "$MOUNT_PID" || fail "the mount died"
[ "$(getfattr --absolute-names --only-values -n user.seedfs.generation "$M/$F")" = 2 ] ||
	fail "xattr of the current inode"
ok "xattrs of a replaced inode whose generation is gone: ESTALE; the current one says 2"
echo Q >&"${HOLD[1]}"
wait "$hold_pid" 2>/dev/null || true

# Generations come and go: the disk tier gives their space back.
for k in 2 3 4; do publish $k; done
for g in 2 3 4; do retired $g; done
# The disk tier lets a retired generation's files go behind the sweeper.
for _ in $(seq 100); do
	# An fd closed while find walks the directory makes find fail
	# (pipefail): the count of what is left is what matters.
	deleted=$({ find "/proc/$MOUNT_PID/fd" -lname "$CD/*(deleted)" 2>/dev/null || true; } | wc -l)
	[ "$deleted" = 0 ] && break
	sleep 0.05
done
[ "$deleted" = 0 ] || fail "$deleted descriptors on deleted cache files 5 s after generation 4 was retired: $(ls -l /proc/$MOUNT_PID/fd | grep deleted)"
used=$(du -s -B1 "$CD" | cut -f1)
[ "$used" -le $((3 * 9 << 20)) ] || fail "the cache directory holds $used bytes after 5 generations"
ok "5 generations: no descriptor on a deleted file, the cache directory holds $((used >> 20)) MiB"
unmount_check "$MNT" "$MOUNT_PID"

# A failed adoption is not retried at every open.
PROXY_STATE=$WORK/proxy
mkdir -p "$PROXY_STATE"
python3 "$(dirname "$0")/../tools/ctlproxy.py" "$HOST:$SEED_PORT" "$PROXY_STATE" >"$WORK/proxy.out" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^port [0-9]*$' "$WORK/proxy.out" 2>/dev/null && break; sleep 0.05; done
PPORT=$(sed -n 's/port //p' "$WORK/proxy.out")
[ -n "$PPORT" ] || fail "the proxy did not start"
mkdir -p "$MNT"
MOUNTS+=("$MNT")
"$SEEDFS" mount --seed "127.0.0.1:$PPORT" "$MNT" --log-file "$WORK/mount2.log" ||
	fail "mount through the proxy"
MOUNT_PID=$(sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' "$WORK/mount2.log" | tail -n 1)
PIDS+=("$MOUNT_PID")
touch "$PROXY_STATE/fail-manifest"
cp "$WORK/v1/$F" "$MODEL/$F.tmp" && mv "$MODEL/$F.tmp" "$MODEL/$F"
kill -HUP "$SEED_PID"
pub="^seedfs seed: published model m generation 6 "
for _ in $(seq 200); do grep -q "$pub" "$WORK/seed.out" && break; sleep 0.05; done
grep -q "$pub" "$WORK/seed.out" || fail "no generation 6"
rm -f "$PROXY_STATE"/count.*
# Opens 0.1 s apart for 4 s: the pace is what is tested (a back-off
# from 1 s, doubling, allows 1 to 4 manifest fetches in that time).
for _ in $(seq 40); do cat "$M/config.json" >/dev/null; sleep 0.1; done
asks=$(cat "$PROXY_STATE/count.models" 2>/dev/null | wc -l)
tries=$(cat "$PROXY_STATE/count.manifest" 2>/dev/null | wc -l)
[ "$asks" -ge 30 ] || fail "only $asks opens asked for the generation"
bound manifest_fetches ">=" 1 "$tries" "manifest fetches for $asks opens"
bound manifest_fetches_most "<=" 4 "$tries" "manifest fetches for $asks opens"
grep -q "cannot adopt 127.0.0.1:$PPORT's generation 6 of m: .*HTTP status 500.*next try in" "$WORK/mount2.log" ||
	fail "not logged: $(grep adopt "$WORK/mount2.log" | tail -n 1)"
# Tried again after 1 s, then 2 s, 4 s...: each wait logged double the
# last, from 1000 ms, and no try before the last one's wait was over.
grep "cannot adopt 127.0.0.1:$PPORT's generation 6 of m: " "$WORK/mount2.log" |
	sed -n 's/^\([^ ]*\) .*next try in \([0-9]*\) ms.*/\1 \2/p' >"$WORK/adopt.tries"
[ "$(wc -l <"$WORK/adopt.tries")" -ge 2 ] || fail "fewer than 2 tries logged: $(cat "$WORK/adopt.tries")"
want=1000 prev=
while read -r t w; do
	[ "$w" = "$want" ] || fail "next try in $w ms, not $want: $(cat "$WORK/adopt.tries")"
	ms=$(date -d "$t" +%s%3N)
	[ -z "$prev" ] || [ $((ms - prev)) -ge $((want / 2)) ] ||
		fail "tried again $((ms - prev)) ms after a wait of $((want / 2)) ms: $(cat "$WORK/adopt.tries")"
	prev=$ms want=$((want * 2))
done <"$WORK/adopt.tries"
rm "$PROXY_STATE/fail-manifest"
for _ in $(seq 80); do cmp -s "$MODEL/$F" "$M/$F" && break; sleep 0.1; done
cmp "$MODEL/$F" "$M/$F" || fail "generation 6 not adopted once the manifest came back"
ok "40 opens in 4 s with the manifest failing: $asks questions, $tries manifest fetches, waits $(awk '{ print $2 }' "$WORK/adopt.tries" | paste -sd, ) ms; adopted once it came back"
unmount_check "$MNT" "$MOUNT_PID"

# Unmount right after reads with a disk tier and a deep read-ahead: the
# daemon exits cleanly every time.
"$GENMODEL" "$WORK/big" --size 96M --shards 1
kill "$SEED_PID"
SEED_LOG=big-seed
start_seed "$WORK/big"
for i in 1 2 3 4 5; do
	rm -rf "$CD"
	"$SEEDFS" mount -f --seed "$HOST:$SEED_PORT" "$MNT" --cache-dir "$CD" \
		--ahead 64M --cache-size 256M --log-file "$WORK/mountf.log" &
	FP=$!
	PIDS+=("$FP")
	for _ in $(seq 200); do grep -q " $MNT fuse" /proc/mounts && break; sleep 0.02; done
	grep -q " $MNT fuse" /proc/mounts || fail "run $i: not mounted after 4 s: $(tail -n 3 "$WORK/mountf.log")"
	dd if="$MNT/big/model-00001-of-00001.safetensors" of=/dev/null bs=1M count=24 2>/dev/null ||
		fail "read $i"
	fusermount3 -u "$MNT" || fail "unmount $i"
	st=0
	wait "$FP" || st=$?
	[ "$st" = 0 ] || fail "run $i: the mount daemon exited with $st: $(tail -n 5 "$WORK/mountf.log")"
done
ok "5 unmounts right after reads with --cache-dir and --ahead 64M: clean exits"
sanitizers_clean
