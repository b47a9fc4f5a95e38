#!/usr/bin/env bash
# seedfs prefetch and mount --prefetch: the daemon pulls the files into
# the cache (the bytes never pass through the command), later reads pull
# nothing; one FILE warms only that file; a cache too small is warmed
# only as far as it is useful and says so; with a disk tier everything
# is kept; errors are one line; unmounting stops a prefetch in flight.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 48M --shards 2
start_seed "$MODEL"
MNT=$WORK/mnt
S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }
files=$(cd "$MODEL" && find . -type f | sed 's|^\./||' | sort)
F=model-00001-of-00002.safetensors
shards=$(($(stat -c %s "$MODEL/$F") + $(stat -c %s "$MODEL/model-00002-of-00002.safetensors")))
read_all() {
	local f
	for f in $files; do cmp "$MODEL/$f" "$MNT/m/$f" || fail "bytes of $f"; done
}

mount_seed "$MNT" --cache-size 256M
grep -q "^control: /.*/mount-$MOUNT_PID.sock$" "$S" || fail "no control line: $(cat "$S")"
"$SEEDFS" prefetch "$MNT/m" 2>"$WORK/pf.err" || fail "prefetch: $(cat "$WORK/pf.err")"
grep -q "^prefetch m: done, " "$WORK/pf.err" || fail "prefetch said: $(cat "$WORK/pf.err")"
pulled=$(val bytes_pulled)
bound short_kib "<=" 1024 $(((shards - pulled + 1023) / 1024)) "prefetch pulled $pulled of the shards' $shards bytes: short by, KiB"
read_all
bound after_pulled = 0 $(($(val bytes_pulled) - pulled)) "reads after the prefetch pulled, bytes"
ok "prefetch: $(tail -n 1 "$WORK/pf.err"); reads after it pulled nothing"

# Errors: one line each, exit status 1.
"$SEEDFS" prefetch "$MNT/m" nosuch.bin 2>"$WORK/e1" && fail "a missing file was prefetched"
[ "$(cat "$WORK/e1")" = "seedfs prefetch: m/nosuch.bin: not in the mount" ] || fail "said: $(cat "$WORK/e1")"
"$SEEDFS" prefetch "$WORK" 2>"$WORK/e2" && fail "prefetch outside a mount"
grep -q "is not in a seedfs mount" "$WORK/e2" || fail "said: $(cat "$WORK/e2")"
ok "errors: '$(cat "$WORK/e1")', '$(cat "$WORK/e2")'"
unmount_check "$MNT" "$MOUNT_PID"
[ ! -e "/run/seedfs/mount-$MOUNT_PID.sock" ] || fail "control socket left behind"

# One file only.
mount_seed "$MNT" --cache-size 256M
"$SEEDFS" prefetch "$MNT/m" "$F" 2>"$WORK/pf.err" || fail "prefetch $F: $(cat "$WORK/pf.err")"
fsize=$(stat -c %s "$MODEL/$F")
p=$(val bytes_pulled)
bound file_over "<=" 0 $((p - fsize)) "prefetch of $F pulled $p bytes, past the file's $fsize by, bytes"
bound file_short_kib "<=" 1024 $(((fsize - p + 1023) / 1024)) "prefetch of $F pulled $p bytes of $fsize: short by, KiB"
ok "prefetch of one file pulled $p bytes (the file: $fsize)"
unmount_check "$MNT" "$MOUNT_PID"

# A cache smaller than the model: only three quarters of it is warmed.
mount_seed "$MNT" --cache-size 32M
"$SEEDFS" prefetch "$MNT/m" 2>"$WORK/pf.err" || fail "small cache: $(cat "$WORK/pf.err")"
grep -q "^seedfs prefetch: the cache holds 32.0 MiB: warming the first 24.0 MiB" "$WORK/pf.err" ||
	fail "no note: $(cat "$WORK/pf.err")"
p=$(val bytes_pulled)
bound small_cache_pulled_mib ">=" 24 $((p >> 20)) "a 32 MiB cache: prefetch pulled $p bytes, whole MiB"
bound small_cache_pulled_most_mib "<=" 32 $(((p + (1 << 20) - 1) >> 20)) "a 32 MiB cache: prefetch pulled $p bytes, MiB rounded up"
ok "small cache: $(head -n 1 "$WORK/pf.err") (pulled $((p >> 20)) MiB)"
unmount_check "$MNT" "$MOUNT_PID"

# mount --prefetch, with a disk tier: everything pulled once and kept.
mount_seed "$MNT" --cache-size 32M --cache-dir "$WORK/cd" --prefetch
for _ in $(seq 200); do grep -q "prefetch: --prefetch: done" "$WORK/mount.log" && break; sleep 0.05; done
grep -q "prefetch: --prefetch: done" "$WORK/mount.log" || fail "--prefetch did not finish: $(grep prefetch "$WORK/mount.log")"
for _ in $(seq 100); do [ "$(val disk_queue)" = 0 ] && break; sleep 0.05; done
p=$(val bytes_pulled)
[ "$p" -ge $((shards - (1 << 20))) ] || fail "--prefetch pulled $p of $shards"
[ "$(val disk_bytes_written)" = "$p" ] || fail "--prefetch stored $(val disk_bytes_written) of $p"
ok "--prefetch with --cache-dir: pulled and stored $((p >> 20)) MiB through a 32 MiB cache"
unmount_check "$MNT" "$MOUNT_PID"
mount_seed "$MNT" --cache-size 32M --cache-dir "$WORK/cd"
read_all
[ "$(val bytes_pulled)" = 0 ] || fail "remount after --prefetch pulled $(val bytes_pulled)"
ok "remount after --prefetch: every byte from disk"
unmount_check "$MNT" "$MOUNT_PID"

# Unmounting stops a prefetch that waits on a stopped seed, in bounded time.
mount_seed "$MNT" --cache-size 256M --timeout 2
SOCK=$(sed -n 's/^control: //p' "$S")
[ -S "$SOCK" ] || fail "no control socket: $(grep ^control: "$S")"
kill -STOP "$SEED_PID"
"$SEEDFS" prefetch "$MNT/m" 2>"$WORK/pf.err" &
PF=$!
PIDS+=("$PF")
# The client finds the mount's control socket through MNT/.seedfs first
# (an open there may wait for the stopped seed up to 3 s, and is slow
# under ASan): unmount once its request is with the daemon: the client
# holds nothing in the mount and waits for a reply (in a read), its
# socket's peer is the control socket's (ss), and the daemon has read
# all it sent (nothing queued on its side).
talks() {
	local fds
	fds=$(ls -l /proc/"$PF"/fd 2>/dev/null) || return 1
	case $fds in *"-> $MNT"*) return 1 ;; esac
	[ "$(cat /proc/"$PF"/wchan 2>/dev/null)" = unix_stream_read_generic ] || return 1
	ss -Hxp | awk -v me="pid=$PF," -v sock="$SOCK" '{ at[$6] = $5; q[$6] = $3 }
		index($0, me) { peer[$8] = 1 }
		END { for (i in peer) if (at[i] == sock && q[i] == 0) f = 1; exit !f }'
}
t0=$(now_ms)
for _ in $(seq 200); do
	talks && break
	sleep 0.05
done
if ! talks; then
	kill -CONT "$SEED_PID" # a stopped seed would not stop at the cleanup's SIGTERM
	fail "the prefetch client's request is not with the daemon of $SOCK after 10 s: waits in $(cat /proc/"$PF"/wchan 2>&1); $(ss -Hxp | grep "pid=$PF,"); fds: $(ls -l /proc/"$PF"/fd 2>&1)"
fi
echo "the client talks to the mount's socket after $(($(now_ms) - t0)) ms"
t0=$(now_ms)
fusermount3 -u "$MNT" || fail "unmount during prefetch"
for _ in $(seq 200); do running "$MOUNT_PID" || break; sleep 0.05; done
running "$MOUNT_PID" && fail "mount daemon still running 10 s after unmount"
waited=$(($(now_ms) - t0))
kill -CONT "$SEED_PID"
wait "$PF" && fail "the interrupted prefetch reported success"
grep -q "^seedfs prefetch: stopped: the mount is being unmounted$" "$WORK/pf.err" || fail "prefetch said: $(cat "$WORK/pf.err")"
bound unmount_ms "<=" 5000 "$waited" "the daemon gone after an unmount with a prefetch in flight, ms"
ok "unmount during a stalled prefetch: daemon gone in $waited ms; client: $(tail -n 1 "$WORK/pf.err")"
sanitizers_clean
