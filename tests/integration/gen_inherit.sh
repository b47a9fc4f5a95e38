#!/usr/bin/env bash
# A new generation moves only the chunks that changed (docs/updates.md):
# a mount that read generation 1 (-o direct_io: every read goes through
# its cache, none through the page cache) pulls, for generation 2, the
# chunks whose checksums changed and takes the rest from its cache (the
# same bytes): one byte changed in place in one shard, one shard
# replaced by a copy (another inode) with one byte changed; every file of
# generation 2 reads byte for byte; .seedfs/status and the log say what
# was taken.  Then a third generation that changed nothing but a new
# shard's bytes pulls that shard only; the disk tier (--cache-dir) has
# the whole of it, what generation 3 took from memory too: a mount
# started again on it pulls nothing.
#   gen_inherit.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 24M --shards 3 >/dev/null
mapfile -t S < <(cd "$MODEL" && ls ./*.safetensors | sed 's|^\./||' | sort)
[ ${#S[@]} = 3 ] || fail "genmodel made ${#S[@]} shards, want 3"
start_seed "$MODEL" --grace 2
MNT=$WORK/mnt
mount_seed "$MNT" -o direct_io --cache-size 128M --cache-dir "$WORK/cd"
M=$MNT/m
ST=$MNT/.seedfs/status
# Every file of the model, byte for byte.
check_all() {
	local f
	for f in $(cd "$MODEL" && find . -type f | sed 's|^\./||' | sort); do
		cmp "$MODEL/$f" "$M/$f" || fail "generation $1: bytes of $f"
	done
}
pulled() { status_val "$ST" bytes_pulled; }
check_all 1
p1=$(pulled)

# republish N: SIGHUP, until the seed published generation N and the
# mount shows it.
republish() {
	local _
	kill -HUP "$SEED_PID"
	seed_published seed "$1"
	for _ in $(seq 100); do
		stat "$M" >/dev/null # an open looks for a new generation
		grep -q "^model: m generation $1 " "$ST" && return 0
		sleep 0.05
	done
	fail "the mount shows no generation $1: $(grep ^model: "$ST")"
}

# Generation 2: one byte in the middle of shard 0 (in place), one in
# shard 1's fourth chunk (a copy renamed into place).
flip_byte "$MODEL/${S[0]}" $((5 * 1048576 + 12345))
cp "$MODEL/${S[1]}" "$MODEL/${S[1]}.tmp"
flip_byte "$MODEL/${S[1]}.tmp" $((3 * 1048576 + 7))
mv "$MODEL/${S[1]}.tmp" "$MODEL/${S[1]}"
republish 2
check_all 2
moved=$(($(pulled) - p1))
# Two 1 MiB chunks changed: at most 1.1 x their bytes pulled.
bound gen2_pulled_bytes "<=" $((2 * 1048576 * 11 / 10)) "$moved" \
	"bytes pulled for generation 2 (two 1 MiB chunks changed)"
bound gen2_pulled_bytes_all ">=" $((2 * 1048576)) "$moved" \
	"bytes pulled for generation 2 (the changed chunks)"
taken=$(status_val "$ST" inherited_bytes)
total=$(cat "$MODEL"/*.safetensors | wc -c)
bound gen2_inherited_bytes ">=" $((total - 3 * 1048576)) "$taken" \
	"bytes generation 2 took from generation 1's cache"
grep -q "m: generation 2 takes .* cached chunks .* of generation 1" "$WORK/mount.log" ||
	fail "no log line of what generation 2 took: $(grep -i generation "$WORK/mount.log" | tail -3)"
ok "generation 2: $moved bytes pulled, $taken taken from generation 1"

# Generation 3: shard 2 replaced by other bytes of its size: only it is
# pulled (and what it shares with others, nothing here).
p2=$(pulled)
"$GENMODEL" "$WORK/other" --size 24M --shards 3 --seed 7 >/dev/null
cp "$WORK/other/${S[2]}" "$MODEL/${S[2]}.tmp"
mv "$MODEL/${S[2]}.tmp" "$MODEL/${S[2]}"
republish 3
check_all 3
moved=$(($(pulled) - p2))
sz=$(stat -c %s "$MODEL/${S[2]}")
bound gen3_pulled_bytes "<=" $((sz + 1048576)) "$moved" \
	"bytes pulled for generation 3 (one shard of $sz bytes replaced)"
ok "generation 3: $moved bytes pulled for a shard of $sz bytes"

# The disk tier kept generation 3 whole, what it took from generation 2
# too: a mount started again on the same --cache-dir reads it all from
# disk.
unmount_check "$MNT" "$MOUNT_PID"
MOUNT_LOG=mount2 mount_seed "$MNT" -o direct_io --cache-size 128M --cache-dir "$WORK/cd"
check_all 3
bound gen3_remount_pulled_bytes "<=" 0 "$(pulled)" \
	"bytes pulled by a mount started again on the --cache-dir of generation 3 (disk_hits $(status_val "$ST" disk_hits))"
ok "started again on its --cache-dir: generation 3 read from disk ($(status_val "$ST" disk_hits) chunks)"
