#!/usr/bin/env bash
# Read-ahead to a tensor's end: one read of 4 KiB at the start of a 48
# MiB safetensors tensor (the kernel's own read-ahead kept small,
# --read-ahead-kb 128) makes the mount pull the rest of that tensor
# (up to --ahead, 64 MiB) within 10 s: at least 44 MiB from the seed.
# With --no-tensor-ahead the same read pulls at most 8 MiB (the
# sequential window's first step).  A read in the header pulls no
# tensor.  The bytes read are the file's.
source "$(dirname "$0")/lib.sh" "$1"
mkdir -p "$WORK/m"
python3 - "$WORK/m/model.safetensors" <<'PY'
import json, os, struct, sys
sizes = [("a", 1 << 20), ("big", 48 << 20), ("c", 2 << 20)]
h, off = {}, 0
for name, n in sizes:
    h[name] = {"dtype": "U8", "shape": [n], "data_offsets": [off, off + n]}
    off += n
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb)
    f.write(os.urandom(off))
PY
F=$WORK/m/model.safetensors
hlen=$(python3 -c 'import struct,sys; print(8 + struct.unpack("<Q", open(sys.argv[1], "rb").read(8))[0])' "$F")
big=$((hlen + (1 << 20))) # the big tensor's first byte
start_seed "$WORK/m"
pulled() { seed_stat "$1/.seedfs/status" "$SEED_PORT" seed_bytes; }
# read_at MNT OFF: 4 KiB at OFF, checked against the file
read_at() {
	dd if="$1/m/model.safetensors" bs=4096 count=1 skip="$2" iflag=skip_bytes \
		status=none >"$WORK/got" || fail "dd at $2"
	dd if="$F" bs=4096 count=1 skip="$2" iflag=skip_bytes status=none | cmp - "$WORK/got" ||
		fail "the 4 KiB at $2 are not the file's"
}
mib=$((1 << 20))

MOUNT_LOG=a mount_seed "$WORK/a" --read-ahead-kb 128
read_at "$WORK/a" 0
sleep 1
h=$(pulled "$WORK/a")
[ "${h:-0}" -le $((8 * mib)) ] || fail "a read in the header pulled $h bytes"
read_at "$WORK/a" "$big"
for _ in $(seq 100); do
	[ "$(pulled "$WORK/a")" -ge $((44 * mib)) ] && break
	sleep 0.1
done
got=$(pulled "$WORK/a")
[ "$got" -ge $((44 * mib)) ] || fail "4 KiB read at the big tensor's start pulled $got bytes, not the tensor"
unmount_check "$WORK/a" "$MOUNT_PID"
ok "a 4 KiB read at a 48 MiB tensor's start pulled $((got / mib)) MiB (the header's read: $((h / mib)) MiB)"

MOUNT_LOG=b mount_seed "$WORK/b" --read-ahead-kb 128 --no-tensor-ahead
read_at "$WORK/b" "$big"
sleep 2
got=$(pulled "$WORK/b")
[ "$got" -le $((8 * mib)) ] || fail "--no-tensor-ahead: the read pulled $got bytes"
grep -q "^read_ahead_max: .*sequential readers only" "$WORK/b/.seedfs/status" ||
	fail "status: $(grep read_ahead "$WORK/b/.seedfs/status")"
unmount_check "$WORK/b" "$MOUNT_PID"
ok "--no-tensor-ahead: the same read pulled $((got / mib)) MiB"
sanitizers_clean
