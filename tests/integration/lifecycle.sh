#!/usr/bin/env bash
# SIGTERM unmounts cleanly; foreground mode; seed stops on SIGTERM.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 2
start_seed "$MODEL"
MNT=$WORK/mnt

# Background mount, stopped with SIGTERM.
mount_seed "$MNT"
cat "$MNT/m/config.json" >/dev/null || fail "read"
kill -TERM "$MOUNT_PID"
for i in $(seq 100); do running "$MOUNT_PID" || break; sleep 0.05; done
running "$MOUNT_PID" && fail "mount daemon ignored SIGTERM"
grep -q " $MNT fuse" /proc/mounts && fail "still mounted after SIGTERM"
grep -q "unmounting" "$WORK/mount.log" || fail "no unmount in the log"
ok "SIGTERM unmounts cleanly"

# Foreground (-f): the command itself serves; SIGINT ends it.
"$SEEDFS" mount -f --seed "127.0.0.1:$SEED_PORT" "$MNT" 2>"$WORK/fg.err" &
FG=$!
PIDS+=("$FG")
MOUNTS+=("$MNT")
for i in $(seq 100); do grep -q " $MNT fuse" /proc/mounts && break; sleep 0.05; done
grep -q " $MNT fuse" /proc/mounts || fail "foreground mount did not appear"
cmp "$MODEL/tokenizer.json" "$MNT/m/tokenizer.json" || fail "foreground read"
kill -INT "$FG"
wait "$FG" || fail "foreground exit status $?"
grep -q " $MNT fuse" /proc/mounts && fail "still mounted after SIGINT"
grep -q "mounted m on" "$WORK/fg.err" || fail "no log on stderr in foreground"
ok "foreground mount serves, logs to stderr, SIGINT unmounts"

# A mount point that does not exist: one line, status != 0.
st=0
"$SEEDFS" mount --seed "127.0.0.1:$SEED_PORT" "$WORK/nope" 2>"$WORK/err" || st=$?
[ $st -ne 0 ] || fail "mount on a missing directory succeeded"
[ "$(wc -l <"$WORK/err")" = 1 ] || fail "not one line: $(cat "$WORK/err")"
grep -qxF "seedfs mount: $WORK/nope: No such file or directory" "$WORK/err" ||
	fail "the line does not name the mount point and the error: $(cat "$WORK/err")"
grep -q " $WORK/nope " /proc/mounts && fail "something mounted on the missing directory"
ok "missing mount point: $(tr '\n' ' ' <"$WORK/err")"

kill -TERM "$SEED_PID"
st=0
wait "$SEED_PID" || st=$?
bound seed_exit_status = 0 "$st" "the seed's exit status after SIGTERM"
ok "seed stops cleanly on SIGTERM"
sanitizers_clean
