#!/usr/bin/env bash
# Read-ahead to a tensor's end.  A model whose first tensor is 48 MiB:
#   - a read of its header (4 KiB at 0; the kernel's read-ahead kept at
#     128 KiB, --read-ahead-kb 128, so the read runs into the tensor)
#     pulls no tensor: at most 8 MiB (the sequential window's start);
#   - a read of 4 KiB 16 MiB into the tensor pulls the rest of it (32
#     MiB) within 10 s, and not past it by more than 8 MiB;
#   - with --no-tensor-ahead the same read pulls at most 8 MiB.
# The bytes read are the file's.
source "$(dirname "$0")/lib.sh" "$1"
mkdir -p "$WORK/m"
python3 - "$WORK/m/model.safetensors" <<'PY'
import json, os, struct, sys
sizes = [("big", 48 << 20), ("a", 1 << 20), ("c", 2 << 20)]
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
big=$hlen # the big tensor's first byte
start_seed "$WORK/m"
pulled() { seed_stat "$1/.seedfs/status" "$SEED_PORT" seed_bytes; }
# settled MNT: wait (10 s at most) until the mount pulls nothing from
# the seed: no pull in flight or queued, and its byte count unchanged over
# 3 looks 100 ms apart (read-ahead starts behind the read that asks it).
settled() {
	local st=$1/.seedfs/status last=-1 same=0 b
	for _ in $(seq 100); do
		b=$(pulled "$1")
		if [ "$(seed_stat "$st" "$SEED_PORT" seed_pulls 2)" = 0 ] &&
			[ "$(seed_stat "$st" "$SEED_PORT" seed_pulls 8)" = 0 ] && [ "$b" = "$last" ]; then
			same=$((same + 1))
			[ $same -ge 3 ] && return 0
		else
			same=0
		fi
		last=$b
		sleep 0.1
	done
	fail "the mount did not settle in 10 s: $(grep '^seed_pulls' "$st")"
}
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
settled "$WORK/a"
h=$(pulled "$WORK/a")
bound header_pulled_mib "<=" 8 $((${h:-0} / mib)) "a read of the header pulled, MiB"
read_at "$WORK/a" $((big + 16 * mib))
settled "$WORK/a"
got=$(pulled "$WORK/a")
bound rest_pulled_mib ">=" 30 $(((got - h) / mib)) "a 4 KiB read 16 MiB into a 48 MiB tensor pulled (its rest is 32), MiB"
bound rest_pulled_most_mib "<=" 40 $(((got - h + mib - 1) / mib)) "the read pulled past its tensor, MiB"
unmount_check "$WORK/a" "$MOUNT_PID"
ok "the header's read pulled $((h / mib)) MiB; a 4 KiB read 16 MiB into a 48 MiB tensor $(((got - h) / mib)) MiB more"

MOUNT_LOG=b mount_seed "$WORK/b" --read-ahead-kb 128 --no-tensor-ahead
read_at "$WORK/b" $((big + 16 * mib))
settled "$WORK/b"
got=$(pulled "$WORK/b")
bound off_pulled_mib "<=" 8 $(((got + mib - 1) / mib)) "--no-tensor-ahead: the read pulled, MiB"
grep -q "^read_ahead_max: .*sequential readers only" "$WORK/b/.seedfs/status" ||
	fail "status: $(grep read_ahead "$WORK/b/.seedfs/status")"
unmount_check "$WORK/b" "$MOUNT_PID"
ok "--no-tensor-ahead: the same read pulled $((got / mib)) MiB"
sanitizers_clean
