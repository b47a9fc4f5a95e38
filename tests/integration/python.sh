#!/usr/bin/env bash
# libseedfs from Python: publish numpy arrays (python/seedfs, ctypes),
# mount them, read the synthesized safetensors shards back with an
# independent reader, byte-exact; update tensors in place and commit: a
# new open reads the new bytes.  Debian's python3 and python3-numpy.
source "$(dirname "$0")/lib.sh" "$1"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=$(python_for_build)
T=$SRC/tests/tools/pubtest.py
export PYTHONPATH=$SRC/python SEEDFS_LIB=$BUILD/libseedfs.so
$PY -c 'import numpy' 2>/dev/null || fail "python3-numpy is not installed"

out=$($PY "$T" errors 2>&1) || fail "errors: $out"
ok "$out"

mkfifo "$WORK/in"
$PY "$T" serve "$WORK" <"$WORK/in" >"$WORK/seed.out" 2>"$WORK/seed.err" &
PUB_PID=$!
PIDS+=("$PUB_PID")
exec 3>"$WORK/in"
for _ in $(seq 200); do grep -qE '^ready [0-9]+ [0-9]+$' "$WORK/seed.out" && break; sleep 0.05; done
read -r _ SEED_PORT gen <"$WORK/seed.out" || fail "publisher: $(cat "$WORK/seed.err")"
[ "$gen" = 1 ] || fail "first generation $gen"
ok "published from Python on port $SEED_PORT, generation 1"

MNT=$WORK/mnt
mount_seed "$MNT"
M=$MNT/pymodel
ls "$M" >"$WORK/ls.out"
for f in config.json model.safetensors.index.json model-00001-of-00003.safetensors \
	model-00002-of-00003.safetensors model-00003-of-00003.safetensors tokenizer; do
	grep -qx "$f" "$WORK/ls.out" || fail "no $f in: $(cat "$WORK/ls.out")"
done
out=$($PY "$T" check "$M" "$WORK/ref1.npz") || fail "generation 1: $out"
ok "generation 1: $out"
# The tensor view and the layout a tensor declares.
[ "$(getfattr -n user.seedfs.layout --only-values "$M/.seedfs/tensors/model.flag" 2>/dev/null)" = processed:bool-packed ] ||
	fail "model.flag layout: $(getfattr -d "$M/.seedfs/tensors/model.flag" 2>&1)"
[ "$(getfattr -n user.seedfs.layout --only-values "$M/.seedfs/tensors/model.big" 2>/dev/null)" = processed ] ||
	fail "model.big layout: $(getfattr -d "$M/.seedfs/tensors/model.big" 2>&1)"
cmp <($PY -c 'import numpy as np,sys; sys.stdout.buffer.write(np.load(sys.argv[1])["model.embed.weight"].tobytes())' "$WORK/ref1.npz") \
	"$M/.seedfs/tensors/model.embed.weight" || fail "tensor view bytes"
grep -q "^model: pymodel generation 1 .*identity " "$MNT/.seedfs/status" || fail "status"
ok "tensor view and per-tensor layout"

# A replica that requires checkpoint layout sees none of it.
M2=$WORK/mnt2
mkdir -p "$M2"
MOUNTS+=("$M2")
"$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$M2" --require layout=checkpoint \
	--log-file "$WORK/mount2.log" 2>"$WORK/mount2.err" || fail "mount 2: $(cat "$WORK/mount2.err")"
P2=$(sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' "$WORK/mount2.log" | tail -n 1)
PIDS+=("$P2")
[ "$(ls "$M2")" = "" ] || fail "a checkpoint mount shows: $(ls -R "$M2" | head)"
grep -q "^hidden: .*layout is 'processed', required 'checkpoint'" "$M2/.seedfs/status" ||
	fail "status: $(cat "$M2/.seedfs/status")"
unmount_check "$M2" "$P2"
ok "a mount requiring layout=checkpoint shows no processed tensor"

# Update in place and commit: a new open sees generation 2's bytes.
ino3=$(stat -c %i "$M/model-00003-of-00003.safetensors")
ino1=$(stat -c %i "$M/model-00001-of-00003.safetensors")
echo update >&3
for _ in $(seq 200); do grep -q "^gen 2$" "$WORK/seed.out" && break; sleep 0.05; done
grep -q "^gen 2$" "$WORK/seed.out" || fail "no generation 2: $(cat "$WORK/seed.err")"
out=$($PY "$T" check "$M" "$WORK/ref2.npz") || fail "generation 2: $out"
ok "after an in-place update and commit: $out"
cmp -s "$WORK/ref1.npz" "$WORK/ref2.npz" && fail "the update changed nothing"
# Synthesized deterministically: the shard whose tensors did not change
# is the same file (same bytes, so the same inode); the changed one not.
[ "$(stat -c %i "$M/model-00003-of-00003.safetensors")" = "$ino3" ] ||
	fail "unchanged shard 3 got a new inode"
[ "$(stat -c %i "$M/model-00001-of-00003.safetensors")" != "$ino1" ] ||
	fail "changed shard 1 kept its inode"
ok "unchanged shard kept its inode ($ino3), the changed one did not"

echo quit >&3
exec 3>&-
for _ in $(seq 100); do kill -0 "$PUB_PID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$PUB_PID" 2>/dev/null && fail "publisher did not exit"
wait "$PUB_PID" || fail "publisher exit status: $(cat "$WORK/seed.err")"
unmount_check "$MNT" "$MOUNT_PID"
ok "publisher closed; clean unmount"
