#!/usr/bin/env bash
# make demo: publish a generated model from a local seed over the
# libfabric tcp provider, mount it, look at it, prove the bytes, clean up.
#   tests/demo.sh [BUILD_DIR]
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SEEDFS=${SEEDFS:-$BUILD/seedfs}
WORK=$(mktemp -d /tmp/seedfs-demo.XXXXXX)
MODEL=$WORK/models/tiny-llama
MNT=$WORK/mnt
SEED_PID=

cleanup() {
	if grep -q " $MNT fuse" /proc/mounts; then fusermount3 -u "$MNT"; fi
	if [ -n "$SEED_PID" ]; then kill "$SEED_PID" 2>/dev/null || true; fi
	rm -rf "$WORK"
}
trap cleanup EXIT
if [ -t 1 ]; then B=$'\033[1m' N=$'\033[0m'; else B= N=; fi
step() { printf '\n%s== %s%s\n' "$B" "$*" "$N"; }

step "a small model (3 safetensors shards, config, tokenizer)"
mkdir -p "$(dirname "$MODEL")"
"$BUILD/tests/genmodel" "$MODEL" --size 24M --shards 3
ls -l "$MODEL"

step "a token for the control port (docs/security.md)"
(umask 077 && openssl rand -hex 32 >"$WORK/token")
ls -l "$WORK/token"

step "seedfs seed: publish it over libfabric tcp"
"$SEEDFS" seed --model-dir "$MODEL" --listen 127.0.0.1:0 --protocol tcp \
	--token-file "$WORK/token" >"$WORK/seed.out" 2>"$WORK/seed.log" &
SEED_PID=$!
READY_RE='^seedfs seed: ready on [^ ]*:[0-9]+: '
for _ in $(seq 200); do grep -qE "$READY_RE" "$WORK/seed.out" && break; sleep 0.05; done
cat "$WORK/seed.out"
PORT=$(grep -E "$READY_RE" "$WORK/seed.out" | sed -n 's/.*ready on [^ ]*:\([0-9]*\):.*/\1/p')
[ -n "$PORT" ] || { cat "$WORK/seed.log"; exit 1; }

step "seedfs mount --seed 127.0.0.1:$PORT $MNT: without the token, then with it"
mkdir -p "$MNT"
if "$SEEDFS" mount --seed "127.0.0.1:$PORT" "$MNT"; then
	echo "mounted without the token" >&2
	exit 1
fi
"$SEEDFS" mount --seed "127.0.0.1:$PORT" --token-file "$WORK/token" "$MNT" \
	--log-file "$WORK/mount.log"
grep " $MNT " /proc/mounts

step "ls -l $MNT/tiny-llama"
ls -l "$MNT/tiny-llama"

V=$MNT/tiny-llama/.seedfs/tensors
step "the tensor view: ls $V | head -4"
ls "$V" | head -4
T=$(ls -S "$V" | grep -v '\.json$' | head -1)
step "a tensor's metadata: cat $T.json"
cat "$V/$T.json"
if command -v getfattr >/dev/null; then
	step "and as xattrs: getfattr -d .seedfs/tensors/$T"
	getfattr -d "$V/$T" 2>/dev/null
fi

step "checksums: the original vs the mount"
status=0
for f in model-00001-of-00003.safetensors config.json tokenizer.json; do
	a=$(sha256sum <"$MODEL/$f" | cut -c1-16)
	b=$(sha256sum <"$MNT/tiny-llama/$f" | cut -c1-16)
	if [ "$a" = "$b" ]; then verdict=match; else verdict=DIFFERENT; status=1; fi
	printf '%-34s %s  %s  %s\n' "$f" "$a" "$b" "$verdict"
done
# The tensor's bytes, cut from the original file at its byte_range.
range=$(tr -d ' \n' <"$V/$T.json" | sed -n 's/.*"byte_range":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/p')
file=$(sed -n 's/^ *"file": "\(.*\)",$/\1/p' "$V/$T.json")
set -- $range
a=$(dd if="$MODEL/$file" bs=1M iflag=skip_bytes,count_bytes skip="$1" \
	count=$(($2 - $1)) status=none | sha256sum | cut -c1-16)
b=$(sha256sum <"$V/$T" | cut -c1-16)
if [ "$a" = "$b" ]; then verdict=match; else verdict=DIFFERENT; status=1; fi
printf '%-34s %s  %s  %s\n' "tensor $T" "$a" "$b" "$verdict"

step "clean up: unmount, stop the seed"
fusermount3 -u "$MNT"
kill "$SEED_PID"
wait "$SEED_PID" || true
SEED_PID=
echo "done."
exit $status
