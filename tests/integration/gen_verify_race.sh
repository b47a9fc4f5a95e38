#!/usr/bin/env bash
# A generation freed while a chunk of it is being verified: the
# verification reads the checksums of that generation's manifest,
# outside the cache's lock, on the transport's thread.  Forced here:
# every pulled chunk waits VERIFY_MS before it is checked
# (--test-verify-delay), a reader of generation 1 starts a pull, the
# seed republishes with --grace 1, generation 1 expires, its reader
# gets ESTALE and closes, and the mount's sweeper frees generation 1
# while the first chunk's verification still waits.  The checksums it
# then reads must still be there: no use after free (ASan, TSan), no
# checksum mismatch, the mount alive.
source "$(dirname "$0")/lib.sh" "$1"

# Long enough for the republish, the grace and the reader's close to
# come first: about 1.5 s in the normal build, up to 6 s under a
# sanitizer (an ASan run's reader closed at 5.6 s).
VERIFY_MS=3000
[ "$SFS_BUILD_KIND" != normal ] && VERIFY_MS=12000
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 16M --shards 1
F=model-00001-of-00001.safetensors
start_seed "$MODEL" --grace 1
MNT=$WORK/mnt
# The kernel's read-ahead at 4 KiB: the reader's read is smaller than a
# chunk, so the chunk comes through the cache's slots and is checked on
# the transport's thread (a read of whole chunks lands in the reader's
# buffer and is checked on the reader's own thread: it holds the view).
# At debug level the mount logs each pull before it posts it: the test
# waits for its reader's before generation 2 comes (a fixed sleep lost
# the race in an ASan CI run: the reader's read reached the mount 2.2 s
# after it started, after generation 2, and read that; and a CI run saw
# the line 3.1 s late when it was logged after the post, whose pull had
# completed and been checked on the posting thread meanwhile).
mount_seed "$MNT" --test-verify-delay "$VERIFY_MS" --read-ahead-kb 4 \
	--log-level debug
M=$MNT/m
LOG=$WORK/mount.log

# A reader of generation 1: its first chunk is pulled, then waits
# VERIFY_MS before it is checked.
head -c 4096 "$M/$F" >"$WORK/head.out" 2>"$WORK/head.err" &
reader=$!
PIDS+=("$reader")
pulled="D cache: seed [^ ]*: pulls object [0-9]* chunk 0 "
for _ in $(seq 200); do grep -q "$pulled" "$LOG" && break; sleep 0.05; done
grep -q "$pulled" "$LOG" || fail "the reader's first chunk not pulled within 10 s"
# The check waits VERIFY_MS from the pull's end: from here, at most
# 50 ms before the pull is posted, less than VERIFY_MS.
t0=$(now_ms)

# Generation 2, seen at the next open; generation 1 stays served for 1 s.
cp "$MODEL/$F" "$MODEL/$F.tmp"
printf 'generation 2' | dd of="$MODEL/$F.tmp" bs=1 seek=1048576 conv=notrunc status=none
mv "$MODEL/$F.tmp" "$MODEL/$F"
kill -HUP "$SEED_PID"
pub="^seedfs seed: published model m generation 2 "
for _ in $(seq 100); do grep -q "$pub" "$WORK/seed.out" && break; sleep 0.05; done
grep -q "$pub" "$WORK/seed.out" || fail "no generation 2"
: <"$M/config.json"
grep -q "^model: m generation 2 " "$MNT/.seedfs/status" || fail "generation 2 not adopted"

# Generation 1 expires while its first chunk waits to be checked; its
# reader gets ESTALE (or its bytes, had the check come first) and
# closes, and the sweeper frees what nobody uses.
gone="I model: generation 1 of m is no longer served"
for _ in $(seq 100); do grep -q "$gone" "$LOG" && break; sleep 0.05; done
grep -q "$gone" "$LOG" || fail "generation 1 not retired $(($(now_ms) - t0)) ms after its pull began"
expired=$(($(now_ms) - t0))
for _ in $(seq 100); do running "$reader" || break; sleep 0.05; done
running "$reader" && fail "the reader of generation 1 still waits $(($(now_ms) - t0)) ms after it started"
closed=$(($(now_ms) - t0))
[ "$closed" -lt $((VERIFY_MS - 100)) ] ||
	fail "the reader closed $closed ms after its pull began: not before the check (${VERIFY_MS} ms); the race was not forced"
ok "generation 1 retired ${expired} ms, its reader closed ${closed} ms after its pull began ($(cat "$WORK/head.err" | head -c 100))"

# The check of that chunk runs now (VERIFY_MS after its pull).
until_ms=$((t0 + VERIFY_MS + 1500))
while [ "$(now_ms)" -lt "$until_ms" ]; do sleep 0.1; done
running "$MOUNT_PID" || fail "the mount died while generation 1 was freed under a verification"
refute "checksum mismatch" "$LOG"
bound errors_checksum = 0 "$(status_val "$MNT/.seedfs/status" errors_checksum)" "status errors_checksum after generation 1 was freed under a verification"
sanitizers_clean
ok "the chunk checked after its generation was freed: no mismatch, no report, the mount alive"
# Generation 2 is shown (its pulled chunks would each wait VERIFY_MS:
# only a file of the manifest's own bytes is read).
cmp "$MODEL/config.json" "$M/config.json" || fail "generation 2's config.json"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
