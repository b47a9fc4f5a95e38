#!/usr/bin/env bash
# A seed publishes one wrong byte (test option, after checksumming): a
# read of it fails with EIO after one retry, nothing wrong is served,
# the log names file, offset and seed; the rest of the file reads; a
# replica that opts out of verification gets the wrong byte (so the
# check is what protects the others).
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 12M --shards 2
F=model-00002-of-00002.safetensors
BAD=$((3 * 1048576 + 12345))
start_seed "$MODEL" --test-corrupt "$F:$BAD"
grep -q "test: published byte $BAD of $F is corrupt" "$WORK/seed.err" ||
	fail "seed did not corrupt"
MNT=$WORK/mnt
mount_seed "$MNT"
M=$MNT/m

t0=$(now_ms)
served=0
dd if="$M/$F" of="$WORK/out" bs=4096 skip=$((BAD / 4096)) count=1 2>"$WORK/dd.err" && served=1
bound corrupt_block_served = 0 "$served" "the corrupt byte's block read through the mount"
grep -q "Input/output error" "$WORK/dd.err" || fail "not EIO: $(cat "$WORK/dd.err")"
grep -q "checksum mismatch: m generation 1 object [0-9]* bytes .* from seed $HOST:$SEED_PORT" "$WORK/mount.log" ||
	fail "cache did not log the mismatch"
grep -q "pulling m generation 1 object [0-9]* chunk [0-9]* again after a checksum mismatch" "$WORK/mount.log" ||
	fail "no retry"
bound file_range_lines ">=" 1 \
	"$(grep -c "read m/$F \[[0-9]*, +[0-9]*): bytes do not match the seed's checksum" "$WORK/mount.log")" \
	"the failed read's line naming the file and its range"
ok "corrupt chunk: EIO after $(($(now_ms) - t0)) ms, logged with file, offset and seed"

# Everything outside that chunk reads, byte-exact.
CH0=$((BAD / 1048576 * 1048576)) CH1=$((BAD / 1048576 * 1048576 + 1048576))
cmp -n $CH0 "$MODEL/$F" "$M/$F" || fail "bytes before the bad chunk"
size=$(stat -c %s "$MODEL/$F")
[ "$size" -gt $CH1 ] || fail "the model leaves nothing after the bad chunk ($size bytes)"
cmp <(tail -c +$((CH1 + 1)) "$MODEL/$F") <(tail -c +$((CH1 + 1)) "$M/$F") ||
	fail "bytes after the bad chunk"
cmp "$MODEL/model-00001-of-00002.safetensors" "$M/model-00001-of-00002.safetensors" ||
	fail "the other shard"
errs=$(awk '$1 == "errors_checksum:" { print $2 }' "$MNT/.seedfs/status")
bound errors_checksum ">=" 2 "$errs" "status errors_checksum after the bad chunk (a mismatch and its retry)"
ok "the rest reads byte-exact ($CH0 bytes before the chunk, $((size - CH1)) after, the other shard); status errors_checksum $errs"
unmount_check "$MNT" "$MOUNT_PID"

# Without verification the wrong byte does come through.
mount_seed "$MNT" --no-verify
dd if="$M/$F" of="$WORK/out" bs=1 skip=$BAD count=1 2>/dev/null || fail "read"
want=$(dd if="$MODEL/$F" bs=1 skip=$BAD count=1 2>/dev/null | od -An -tu1)
got=$(od -An -tu1 <"$WORK/out")
bound no_verify_corrupt_served = 1 "$([ "$want" != "$got" ] && echo 1 || echo 0)" \
	"--no-verify: the corrupt byte served (the check is what refuses it)"
ok "--no-verify serves the corrupt byte (${want// /} became ${got// /})"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
