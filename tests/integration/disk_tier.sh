#!/usr/bin/env bash
# The disk tier (--cache-dir): chunks pulled by one mount are reused by
# the next one of the same seed generation with nothing pulled; a chunk
# damaged on disk is pulled again, never served; one mount per
# directory; a new generation is pulled afresh and the old one's copy
# goes when the seed stops serving it.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 16M --shards 2
cp -a "$MODEL" "$WORK/orig"
start_seed "$MODEL" --grace 4
MNT=$WORK/mnt
CD=$WORK/cachedir
S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }
files=$(cd "$MODEL" && find . -type f | sed 's|^\./||' | sort)
read_all() {
	local f
	for f in $files; do
		cmp "$1/$f" "$MNT/m/$f" || fail "bytes of $f"
	done
}
# Stored chunks are written behind the readers: wait for the queue.
drain() {
	local i
	for i in $(seq 200); do
		[ "$(val disk_queue)" = 0 ] && return 0
		sleep 0.05
	done
	fail "disk queue not drained: $(grep ^disk "$S")"
}
gen_dirs() { find "$CD" -mindepth 1 -maxdepth 1 -type d | wc -l; }

# --cache-dir-size after --cache-dir (fuse_opt once took its name for a
# --cache-dir "-size").
mount_seed "$MNT" --cache-dir "$CD" --cache-dir-size 1G
[ "$(val disk_dir)" = "$CD" ] || fail "disk_dir: $(val disk_dir)"
bound disk_size_bytes = $((1 << 30)) "$(val disk_size)" "status disk_size with --cache-dir-size 1G"
read_all "$WORK/orig"
drain
pulled=$(val bytes_pulled)
[ "$pulled" -gt $((12 << 20)) ] || fail "first mount pulled only $pulled"
[ "$(val disk_bytes_written)" = "$pulled" ] ||
	fail "stored $(val disk_bytes_written) of $pulled bytes: $(grep ^disk "$S")"
[ "$(val disk_hits)" = 0 ] || fail "disk hits on an empty directory"
grep -q "^model: m$" "$CD"/*/about || fail "about file: $(cat "$CD"/*/about)"
ok "first mount: pulled $pulled bytes, stored them all in $CD"

# One mount per directory.
mkdir -p "$WORK/mnt2"
if "$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$WORK/mnt2" \
	--cache-dir "$CD" 2>"$WORK/second.err"; then
	MOUNTS+=("$WORK/mnt2")
	fail "a second mount shared the cache directory"
fi
[ "$(cat "$WORK/second.err")" = "seedfs mount: --cache-dir $CD: another seedfs mount uses it" ] || fail "second mount said: $(cat "$WORK/second.err")"
ok "a second mount on the same directory is refused: $(cat "$WORK/second.err")"
unmount_check "$MNT" "$MOUNT_PID"

mount_seed "$MNT" --cache-dir "$CD"
read_all "$WORK/orig"
bound remount_pulled = 0 "$(val bytes_pulled)" "the remount pulled, bytes"
[ "$(val disk_bytes_read)" = "$pulled" ] || fail "remount read $(val disk_bytes_read) from disk"
ok "remount: every byte from disk ($(val disk_hits) chunks), none pulled"
unmount_check "$MNT" "$MOUNT_PID"

# Damage one stored chunk: it is pulled again and the bytes are right.
region=$(find "$CD" -name 'r*' -size +2M | head -n 1)
[ -n "$region" ] || fail "no region file"
printf 'garbage' | dd of="$region" bs=1 seek=$((1 << 20)) conv=notrunc status=none
mount_seed "$MNT" --cache-dir "$CD"
read_all "$WORK/orig"
bound damaged_pulled = $((1 << 20)) "$(val bytes_pulled)" "one damaged chunk on disk: pulled again (one chunk), bytes"
[ "$(val errors_checksum)" = 0 ] || fail "a disk miss counted as a checksum error"
drain
ok "a damaged chunk on disk is a miss: one chunk pulled again, bytes exact"

# A new generation: the changed shard is pulled, not taken from disk;
# the old generation's copy goes when its grace period ends.
F=model-00001-of-00002.safetensors
"$GENMODEL" "$WORK/new" --size 16M --shards 2 --seed 9
cp "$WORK/new/$F" "$MODEL/$F.tmp" && mv "$MODEL/$F.tmp" "$MODEL/$F"
hup_at=$(now_ms) # the grace runs from the publish, after this
kill -HUP "$SEED_PID"
pub="^seedfs seed: published model m generation 2 "
for _ in $(seq 100); do grep -q "$pub" "$WORK/seed.out" && break; sleep 0.05; done
grep -q "$pub" "$WORK/seed.out" || fail "no generation 2: $(tail -n 3 "$WORK/seed.err")"
before=$(val bytes_pulled)
cmp "$MODEL/$F" "$MNT/m/$F" || fail "generation 2 bytes"
size=$(stat -c %s "$MODEL/$F")
got=$(($(val bytes_pulled) - before))
[ "$got" -ge $((size - (1 << 20))) ] || fail "generation 2: pulled $got of $size"
drain
[ "$(gen_dirs)" = 2 ] || fail "want 2 generation directories, have $(gen_dirs)"
# Generation 1's copy goes when its grace (4 s) ends: not before, and
# within 2 s after (a loaded machine's margin).
for _ in $(seq 200); do [ "$(gen_dirs)" = 1 ] && break; sleep 0.05; done
gone=$(($(now_ms) - hup_at))
bound gen_dirs_after_grace = 1 "$(gen_dirs)" "generation directories ${gone} ms after the SIGHUP"
bound gen_removed_ms ">=" 4000 "$gone" "generation 1's copy removed after the SIGHUP, --grace 4, ms"
bound gen_removed_most_ms "<=" 6000 "$gone" "generation 1's copy removed after the SIGHUP, --grace 4, ms"
grep -q "^generation: 2$" "$CD"/*/about || fail "the one left is not generation 2"
ok "generation 2 pulled afresh ($got bytes); generation 1's copy removed when its grace ended ($gone ms)"
unmount_check "$MNT" "$MOUNT_PID"

mount_seed "$MNT" --cache-dir "$CD"
cmp "$MODEL/$F" "$MNT/m/$F" || fail "generation 2 after remount"
bound gen2_remount_pulled = 0 "$(val bytes_pulled)" "the remount in generation 2 pulled, bytes"
ok "remount in generation 2: the new shard comes from disk"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
