#!/usr/bin/env bash
# Reads blocked on a stalled seed hold nothing else up (issue 40, points
# 3 and 7).  The seed is stopped (SIGSTOP) with NREADERS readers, half
# O_DIRECT and half buffered, each reading an uncached chunk of its own
# file (opened while the seed ran), all waiting on it -- more than
# libfuse's 10 workers.  Then, each within BOUND_MS (docs/usage.md: a
# wait on a source is answered by the mount's read threads, libfuse's
# workers stay free):
#   cat .seedfs/status, ls of the model, stat of a file, and the control
#   socket's identify (timed inside the client: connect to "done 0")
# The readers are still waiting then (their reads were not answered).
# Then the daemon stops while they wait, within EXIT_MS (docs/usage.md:
# 2 s, asserted with a margin for a loaded machine), every reader
# getting an error, none any byte:
#   A: SIGTERM, while a question to the seed's control port waits too
# and then
#   B: umount -l (the mount leaves the mount table; files open there are
#   still served, the waiting reads end at --timeout)
# Before those (O): opens waiting on the stopped seed (each asks it for
# its generation) leave status, ls and stat as quick.
#   stalled_reads.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

# More than libfuse's 10 workers and the mount's 64 read threads; the
# kernel sends them all (--max-background over NREADERS: async reads,
# O_DIRECT ones too, are background requests), so 32 wait in the read
# threads' queue.
NREADERS=${NREADERS:-96}
MAXBG=128
BOUND_MS=100 # docs/usage.md: status, listings, attributes, control socket
EXIT_MS=2000 # docs/usage.md: SIGTERM with reads waiting
# Over EXIT_MS for a loaded 2-core machine (sanitizer builds, other
# tests): the daemon's teardown after the reads ended.  (Less than the
# 2.8 s a question to the seed under way would hold SIGTERM's exit
# without the cut-off: A below.)
EXIT_MARGIN_MS=500
# Long enough that no read ends by itself while the test runs.
TIMEOUT_S=60

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 64M --shards $NREADERS
start_seed "$MODEL"
SPID=$SEED_PID
# Whatever happens, the seed runs again before the daemons are stopped
# (cleanup's unmounts; SIGCONT by PID); cleanup sees the test's status
# (set +e: `exit` of a failed test's status must not end the trap).
trap 'st=$?; trap - ERR; set +e; kill -CONT "$SPID" 2>/dev/null; (exit $st); cleanup' EXIT
mapfile -t SHARDS < <(cd "$MODEL" && ls ./*.safetensors | sed 's|^\./||' | sort)
[ ${#SHARDS[@]} = $NREADERS ] || fail "genmodel made ${#SHARDS[@]} shards, want $NREADERS"

# readers MNT TAG: NREADERS threads, each opens one shard (even ones
# O_DIRECT), says "open", waits for a line on stdin, then reads 64 KiB
# from the middle of its shard: "I ok" (the model's bytes), "I err
# ERRNO" or "I WRONG".  Output in $WORK/TAG.out.
cat >"$WORK/readers.py" <<'PY'
import mmap, os, sys, threading
mnt, model, names = sys.argv[1], sys.argv[2], sys.argv[3:]
fds, offs = [], []
for i, n in enumerate(names):
    flags = os.O_RDONLY | (os.O_DIRECT if i % 2 == 0 else 0)
    fds.append(os.open(os.path.join(mnt, n), flags))
    size = os.stat(os.path.join(model, n)).st_size
    offs.append((size // 2) & ~(mmap.PAGESIZE - 1))
print("open", flush=True)
sys.stdin.readline()
out = {}
def read(i):
    buf = mmap.mmap(-1, 65536)
    try:
        got = bytes(buf[:os.preadv(fds[i], [buf], offs[i])])
    except OSError as e:
        out[i] = "err %d" % e.errno
        return
    with open(os.path.join(model, names[i]), "rb") as f:
        f.seek(offs[i])
        want = f.read(len(got))
    out[i] = "ok" if got == want and got else "WRONG %d bytes" % len(got)
ts = [threading.Thread(target=read, args=(i,)) for i in range(len(fds))]
for t in ts:
    t.start()
print("started", flush=True)
for t in ts:
    t.join()
for i in range(len(fds)):
    print(i, out[i], flush=True)
PY
readers() {
	local mnt=$1 tag=$2
	rm -f "$WORK/$tag.go"
	mkfifo "$WORK/$tag.go"
	python3 "$WORK/readers.py" "$mnt/m" "$MODEL" "${SHARDS[@]}" <"$WORK/$tag.go" >"$WORK/$tag.out" 2>"$WORK/$tag.err" &
	RPID=$!
	PIDS+=("$RPID")
	exec {GOFD}>"$WORK/$tag.go"
	for _ in $(seq 200); do
		grep -q "^open$" "$WORK/$tag.out" && return 0
		running "$RPID" || break
		sleep 0.05
	done
	fail "$tag: the readers did not open their files: $(cat "$WORK/$tag.err")"
}

# go TAG: the seed stops, the readers read; their reads are then
# waiting on it (requests with the daemon for STALL_S, none answered)
go() {
	local tag=$1
	kill -STOP "$SPID"
	echo go >&"$GOFD"
	for _ in $(seq 100); do
		grep -q "^started$" "$WORK/$tag.out" && break
		sleep 0.05
	done
	sleep 1.5
	grep -q "^started$" "$WORK/$tag.out" || fail "$tag: the readers did not start"
	! grep -E "^[0-9]+ " "$WORK/$tag.out" ||
		fail "$tag: reads answered while the seed was stopped: $(grep -E '^[0-9]+ ' "$WORK/$tag.out")"
}

# ms_of cat|ls|size PATH: the filesystem's answer to one open and read
# (cat), readdir (ls) or stat (size) of PATH, its text in $WORK/cmd.out;
# print its time in ms, taken in the process that asks (not the start
# of a process: a CI-like run's stat(1) took 104 ms of 100, its own
# start-up in them).
ms_of() {
	python3 - "$1" "$2" "$WORK/cmd.out" <<'PY' || fail "$1 $2 failed: $(cat "$WORK/cmd.out")"
import os, sys, time
op, path, out = sys.argv[1:4]
t = time.monotonic()
try:
    if op == "cat":
        with open(path, "rb") as f:
            data = f.read()
    elif op == "ls":
        data = "".join(n + "\n" for n in sorted(os.listdir(path))).encode()
    else:
        data = b"%d\n" % os.stat(path).st_size
except OSError as e:
    with open(out, "w") as f:
        f.write(str(e))
    sys.exit(1)
ms = (time.monotonic() - t) * 1000
with open(out, "wb") as f:
    f.write(data)
print(int(ms))
PY
}

# gone_within PID START_MS [BOUND_MS]: wait until PID exits (BOUND_MS,
# 4000 by default, at most); print the ms it took
gone_within() {
	local pid=$1 t0=$2 most=${3:-4000}
	while [ $(($(now_ms) - t0)) -le "$most" ]; do
		running "$pid" || break
		sleep 0.01
	done
	running "$pid" && fail "mount daemon $pid still running $(($(now_ms) - t0)) ms later:$(stuck_threads "$pid")"
	echo $(($(now_ms) - t0))
}

# errors_only TAG: every reader ended, with an error, and none with bytes
errors_only() {
	local tag=$1 n
	for _ in $(seq 200); do
		running "$RPID" || break
		sleep 0.05
	done
	running "$RPID" && fail "$tag: readers still waiting after the daemon exited"
	n=$(grep -cE "^[0-9]+ err (5|107|103)$" "$WORK/$tag.out" || true)
	[ "$n" = $NREADERS ] || fail "$tag: $n of $NREADERS readers ended with EIO or ENOTCONN: $(grep -E '^[0-9]+ ' "$WORK/$tag.out" | sort | uniq -c -f1 | head)"
}

# opens_waiting MNT FIRST LAST TAG: the seed stopped, each of the shards
# FIRST..LAST opened and its first 4096 bytes read at once (TAG$i.out,
# TAG$i.err), in the background (OPIDS); 0.3 s later, how many still
# wait (waiting)
opens_waiting() {
	local mnt=$1 tag=$4 i p
	kill -STOP "$SPID"
	OPIDS=()
	for i in $(seq "$2" "$3"); do
		head -c 4096 "$mnt/m/${SHARDS[$i]}" >"$WORK/$tag$i.out" 2>"$WORK/$tag$i.err" &
		OPIDS+=("$!")
	done
	PIDS+=("${OPIDS[@]}")
	sleep 0.3
	waiting=0
	for p in "${OPIDS[@]}"; do running "$p" && waiting=$((waiting + 1)); done
	return 0 # (the last open ended: counted, not an exit under set -e)
}

# --- O: opens waiting on the stopped seed hold nothing up either ---
# Each open of a model file asks the seed for its generation first
# (close-to-open), up to 3 s while the seed has not yet failed to
# answer.  NOPENS opens at once, more than libfuse's 10 workers, then
# status, ls and stat, each within BOUND_MS; once the seed runs again
# every open succeeds.  (Their own mount: part A times its SIGTERM
# from its mount's first unanswered question.)
NOPENS=16
MNTO=$WORK/mnto
MOUNT_LOG=mounto mount_seed "$MNTO"
opens_waiting "$MNTO" 0 $((NOPENS - 1)) open
ms_status=$(ms_of cat "$MNTO/.seedfs/status")
grep -q "^seed: " "$WORK/cmd.out" || fail "O: status: $(cat "$WORK/cmd.out")"
ms_ls=$(ms_of ls "$MNTO/m")
grep -qx config.json "$WORK/cmd.out" || fail "O: ls: $(cat "$WORK/cmd.out")"
ms_stat=$(ms_of size "$MNTO/m/config.json")
kill -CONT "$SPID"
[ $waiting = $NOPENS ] || fail "O: $waiting of $NOPENS opens waiting when status, ls and stat were timed (the test timed nothing)"
for x in status:$ms_status ls:$ms_ls stat:$ms_stat; do
	bound "opens_${x%%:*}_ms" "<=" $BOUND_MS "${x#*:}" "${x%%:*} with $NOPENS opens waiting on a stopped seed, ms"
done
# Once the seed runs, each open is answered (its question, 3 s at most)
# and reads through its handle (opened on an open thread) byte-exact.
for i in $(seq 0 $((NOPENS - 1))); do
	for _ in $(seq 200); do running "${OPIDS[$i]}" || break; sleep 0.05; done
	running "${OPIDS[$i]}" && fail "O: open of ${SHARDS[$i]} not answered 10 s after the seed ran again"
	wait "${OPIDS[$i]}" || fail "O: open of ${SHARDS[$i]} failed once the seed ran: $(cat "$WORK/open$i.err")"
	cmp -s "$WORK/open$i.out" <(head -c 4096 "$MODEL/${SHARDS[$i]}") ||
		fail "O: ${SHARDS[$i]} read through the handle opened on an open thread: not the model's first 4096 bytes"
done
fusermount3 -u "$MNTO" || fail "O: fusermount3 -u $MNTO"
ok "with $NOPENS opens waiting on a stopped seed: status $ms_status ms, ls $ms_ls ms, stat $ms_stat ms (bound $BOUND_MS ms); each open answered once the seed ran, and read byte-exact"

# --- Q: SIGTERM while opens wait on a question to the stopped seed ---
# A fresh mount, the seed stopped: four opens each wait for its answer
# (3 s at most), on open threads and workers; SIGTERM ends those waits
# at once, as it does the reads' (the stop watch): the daemon is gone
# within EXIT_MS (+ the margin), and every open has its answer (the
# daemon answers those it can from what it has: seen succeed) and its
# read an error, none hangs.
MNTQ=$WORK/mntq
MOUNT_LOG=mountq mount_seed "$MNTQ"
opens_waiting "$MNTQ" 1 4 q
QPIDS=("${OPIDS[@]}")
t0=$(now_ms)
kill -TERM "$MOUNT_PID"
took=$(gone_within "$MOUNT_PID" "$t0")
kill -CONT "$SPID"
# (counted before the SIGTERM, asserted after it: what is timed comes
# first)
bound opens_waiting_at_sigterm = 4 "$waiting" "Q: opens waiting on the stopped seed when SIGTERM came"
bound opens_sigterm_exit_ms "<=" $((EXIT_MS + EXIT_MARGIN_MS)) "$took" "Q: the daemon's exit after SIGTERM with 4 opens waiting, ms"
ended=0 failed=0
for p in "${QPIDS[@]}"; do
	for _ in $(seq 20); do running "$p" || break; sleep 0.05; done
	running "$p" && continue
	ended=$((ended + 1))
	wait "$p" || failed=$((failed + 1))
done
bound opens_ended_at_sigterm = 4 "$ended" "Q: opens (and their reads) ended within 1 s of the daemon's exit"
ok "Q: SIGTERM with 4 opens waiting on the stopped seed: exited in $took ms, every opener ended ($failed with an error$(cat "$WORK"/q*.err | sort -u | sed 's/^/: /' | tr '\n' ' '))"

# --- A: the answers while every read waits, then SIGTERM ---
MNT=$WORK/mnt
mount_seed "$MNT" --timeout $TIMEOUT_S --max-background $MAXBG
S=$MNT/.seedfs/status
SOCK=$(sed -n 's/^control: //p' "$S")
[ -S "$SOCK" ] || fail "no control socket: $(cat "$S")"
readers "$MNT" A
go A
# the lookup of a file no reader holds: after the 1 s entry timeout
sleep 1
ms_status=$(ms_of cat "$S")
grep -q "^seed: " "$WORK/cmd.out" || fail "status: $(cat "$WORK/cmd.out")"
ms_ls=$(ms_of ls "$MNT/m")
grep -qx config.json "$WORK/cmd.out" || fail "ls: $(cat "$WORK/cmd.out")"
ms_stat=$(ms_of size "$MNT/m/config.json")
[ "$(cat "$WORK/cmd.out")" = "$(stat -c %s "$MODEL/config.json")" ] || fail "stat: $(cat "$WORK/cmd.out")"
ms_ctl=$(python3 - "$SOCK" 2>&1 <<'PY'
import socket, sys, time
t = time.monotonic()
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"identify\n")
buf = b""
while not buf.endswith(b"done 0\n") and b"error " not in buf:
    c = s.recv(65536)
    if not c:
        break
    buf += c
assert buf.startswith(b"mount ") and buf.endswith(b"done 0\n"), buf
print(int((time.monotonic() - t) * 1000))
PY
) || fail "control socket: $ms_ctl"
for x in status:$ms_status ls:$ms_ls stat:$ms_stat control:$ms_ctl; do
	bound "${x%%:*}_ms" "<=" $BOUND_MS "${x#*:}" "${x%%:*} with $NREADERS reads waiting on a stopped seed, ms"
done
! grep -E "^[0-9]+ " "$WORK/A.out" || fail "A: reads answered while the seed was stopped"
ok "with $NREADERS reads waiting on a stopped seed: status $ms_status ms, ls $ms_ls ms, stat $ms_stat ms, control socket $ms_ctl ms (bound $BOUND_MS ms)"

# SIGTERM while the daemon also waits on the seed's control port: its
# first unanswered question is logged once it times out (3 s); the
# next one goes 1 s later and would wait 3 s (replica/source.c), and so
# on every 4 s, so SIGTERM about 1.25 s (mod 4 s) after that line
# finds one under way for 2.75 s more (the open of config.json below
# comes at 1.05 s, SIGTERM 0.2 s after it).
for _ in $(seq 200); do
	line=$(grep -m1 "W source: cannot ask .* what it publishes" "$WORK/mount.log") && break
	sleep 0.05
done
[ -n "${line:-}" ] || fail "A: no unanswered question to the stopped seed logged in 10 s"
at=$(($(date -d "${line%% *}" +%s%3N) + 1050))
while [ "$at" -lt $(($(now_ms) + 50)) ]; do at=$((at + 4000)); done
while [ "$(now_ms)" -lt "$at" ]; do sleep 0.02; done
# The seed counts as unreachable now: an open asks it nothing and is
# answered at once, however many reads wait (opens have threads of
# their own, never queued behind the 32 reads queued here), and a read
# of bytes in memory (config.json is inline) is answered at once too
# (never queued behind them).  (Here, with the poller's question under
# way: an open while none is may start one, and move the cadence the
# SIGTERM below is timed by.)
ms_open=$(ms_of cat "$MNT/m/config.json")
cmp -s "$WORK/cmd.out" "$MODEL/config.json" || fail "A: config.json read wrong while the reads wait"
bound open_unreachable_ms "<=" $BOUND_MS "$ms_open" "open and read of config.json with $NREADERS reads waiting on a seed counted unreachable, ms"
# (Opens here are answered at once, the seed counted unreachable: four
# opens started here were all answered before the SIGTERM, which then
# showed nothing of them.  Opens waiting on a question to the seed when
# SIGTERM comes are part Q, before this.)
sleep 0.2
t0=$(now_ms)
kill -TERM "$MOUNT_PID"
took=$(gone_within "$MOUNT_PID" "$t0")
bound sigterm_exit_ms "<=" $((EXIT_MS + EXIT_MARGIN_MS)) "$took" "A: the daemon's exit after SIGTERM ($EXIT_MS ms + $EXIT_MARGIN_MS for a loaded machine), ms"
errors_only A
grep -q "read .*: the mount is stopping" "$WORK/mount.log" || fail "A: no line for the reads ended"
ok "A: SIGTERM with $NREADERS reads waiting: exited in $took ms (bound $EXIT_MS ms), every reader an error: $(cut -d' ' -f2- "$WORK/A.out" | grep -v '^open\|^started' | sort | uniq -c | tr '\n' ' ')"

# --- B: umount -l while every read waits ---
# A lazy unmount detaches the mount at once and leaves the files open
# there served (what umount -l means): a file held open reads on, and
# the reads waiting on the stopped seed end as any read does, with EIO
# once the seed made no progress for --timeout; the daemon exits when
# the last file open there is closed.
kill -CONT "$SPID"
MNT=$WORK/mntb
TB=3
MOUNT_LOG=mountb mount_seed "$MNT" --timeout $TB --max-background $MAXBG
readers "$MNT" B
exec {HELD}<"$MNT/m/config.json"
umount -l "$MNT" || fail "umount -l $MNT"
grep -q " $MNT fuse" /proc/mounts && fail "B: $MNT still in the mount table after umount -l"
cmp "$MODEL/config.json" - <&$HELD || fail "B: a file held open across umount -l does not read"
go B
exec {HELD}<&-
t0=$(now_ms)
took=$(gone_within "$MOUNT_PID" "$t0" $((TB * 1000 + EXIT_MS + EXIT_MARGIN_MS + 1000)))
bound lazy_exit_ms "<=" $((TB * 1000 + EXIT_MS + EXIT_MARGIN_MS)) "$took" "B: the daemon's exit after the held file closed, its readers' reads ending at --timeout $TB s, ms"
errors_only B
grep -q "I mount: unmounting $MNT$" "$WORK/mountb.log" || fail "B: $(grep 'mount:' "$WORK/mountb.log" | tail -n 2)"
ok "B: umount -l with $NREADERS reads waiting: detached at once, a file held open read on, the reads ended with EIO at --timeout $TB s, the daemon exited $took ms after the held file closed (bound $((TB * 1000 + EXIT_MS + EXIT_MARGIN_MS)) ms)"
sanitizers_clean
