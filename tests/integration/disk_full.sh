#!/usr/bin/env bash
# A full disk tier is reused (issue 40, point 6): a --cache-dir on a
# filesystem a first mount filled, with not one free block left, serves
# every chunk it holds to the next mount (verified as always), which
# pulls only the rest and stores nothing new.  The filesystem is a
# 20 MiB tmpfs of the test's own (root only); the model is 32 MiB.
source "$(dirname "$0")/lib.sh" "$1"
[ "$(id -u)" = 0 ] || { echo "skip: needs root (it mounts a tmpfs)"; exit 77; }

T=$WORK/tier
mkdir -m 0700 "$T"
mount -t tmpfs -o size=20m,mode=0700 seedfs-test "$T" || fail "cannot mount a tmpfs on $T"
umount_tier() { umount "$T" 2>/dev/null || umount -l "$T"; }
EXIT_HOOKS+=(umount_tier)
CD=$T/cd

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 32M --shards 2
start_seed "$MODEL"
MNT=$WORK/mnt
S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }
files=$(cd "$MODEL" && find . -type f | sed 's|^\./||' | sort)
read_all() {
	local f
	for f in $files; do
		cmp "$MODEL/$f" "$MNT/m/$f" || fail "bytes of $f"
	done
}
drain() {
	local i
	for i in $(seq 200); do
		[ "$(val disk_queue)" = 0 ] && return 0
		sleep 0.05
	done
	fail "disk queue not drained: $(grep ^disk "$S")"
}

mount_seed "$MNT" --cache-dir "$CD"
read_all
drain
stored=$(val disk_bytes_written)
first=$(val bytes_pulled) # all but the small files the manifest holds
[ "$stored" -ge $((12 << 20)) ] || fail "first mount stored only $stored bytes: $(grep ^disk "$S")"
[ "$(val disk_not_stored)" -gt 0 ] || fail "the tmpfs did not fill: $(grep ^disk "$S")"
unmount_check "$MNT" "$MOUNT_PID"
# Not one block left: whatever the first mount left free is taken.
dd if=/dev/zero of="$T/fill" bs=4k status=none 2>/dev/null || true
[ "$(stat -f -c %a "$T")" = 0 ] || fail "$T still has $(stat -f -c %a "$T") free blocks"
about=$(cat "$CD"/*/about)
ok "first mount: $stored of $first bytes pulled stored, then the filesystem full ($(df -h --output=used,size "$T" | tail -n 1 | xargs))"

# second_mount WHAT: a mount on the full directory reads every stored
# byte from it, pulls only the rest, stores nothing.
second_mount() {
	mount_seed "$MNT" --cache-dir "$CD"
	read_all
	drain
	got=$(val disk_bytes_read)
	pulled=$(val bytes_pulled)
	bound disk_read_off = 0 $((got - stored)) "$1: read $got bytes from the full disk tier, $stored were stored ($(grep ^disk "$S" | tr '\n' ' ')): off by, bytes"
	bound read_and_pulled_off = 0 $((got + pulled - first)) "$1: read $got from disk and pulled $pulled, the first mount pulled $first: off by, bytes"
	bound disk_written = 0 "$(val disk_bytes_written)" "$1: stored on a full filesystem, bytes"
	bound errors_checksum = 0 "$(val errors_checksum)" "$1: checksum errors"
	refute --why "$1: the disk tier must be used" "stays in memory only" "$WORK/mount.log"
	hits=$(val disk_hits)
	unmount_check "$MNT" "$MOUNT_PID"
	ok "$1: full disk tier reused, $got bytes ($hits chunks) from disk, $pulled pulled, byte-exact, nothing written"
}

# The same seed: the about file says the same, nothing is written.
second_mount "same seed"
[ "$(cat "$CD"/*/about)" = "$about" ] || fail "about file changed: $(cat "$CD"/*/about)"

# A new seed of the same content (another instance and port): the about
# file cannot be replaced (no room for a new one), it is rewritten in
# place and the chunks are used.
kill "$SEED_PID"
wait "$SEED_PID" 2>/dev/null || true
start_seed "$MODEL"
second_mount "a new seed of the same content"
head -n 1 "$CD"/*/about | grep -qx "$(printf '%s\n' "$about" | head -n 1)" ||
	fail "about file's key line: $(cat "$CD"/*/about)"
grep -qx "seed: $HOST:$SEED_PORT" "$CD"/*/about || fail "about file not rewritten in place: $(cat "$CD"/*/about)"
ls "$CD"/*/about.tmp 2>/dev/null && fail "a temporary about file left"
grep -q "about file rewritten in place (No space left on device): what it holds is used" "$WORK/mount.log" ||
	fail "no line saying the about file was rewritten in place"
sanitizers_clean
