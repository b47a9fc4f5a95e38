#!/usr/bin/env bash
# -o direct_io: model files byte-exact, served from the mount's cache
# with nothing in the page cache (fincore), a second read pulls nothing,
# mmap refused (ENODEV, as documented for this libfuse), status still
# readable.  And the bench's FUSE ceiling server (sfs-fuseceil) serves
# the same bytes, buffered and with direct_io: a ceiling measured on
# wrong bytes would mean nothing.
source "$(dirname "$0")/lib.sh" "$1"
CEIL=$BUILD/bench/sfs-fuseceil

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 24M --shards 2
start_seed "$MODEL"
MNT=$WORK/mnt
mount_seed "$MNT" -o direct_io
M=$MNT/m
S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }
F=model-00001-of-00002.safetensors

diff -r "$MODEL" "$M" >/dev/null || fail "-o direct_io: the tree differs"
cached=$(fincore --bytes --noheadings --output RES "$M/$F" | tr -d ' ')
bound page_cache_bytes = 0 "$cached" "-o direct_io: bytes of $F in the page cache after a read"
p=$(val bytes_pulled)
cmp "$MODEL/$F" "$M/$F" || fail "second read differs"
bound second_read_pulled = 0 $(($(val bytes_pulled) - p)) "-o direct_io: the second read pulled, bytes"
out=$(python3 -c '
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    mmap.mmap(fd, 4096, prot=mmap.PROT_READ)
    print("mapped")
except OSError as e:
    print(e.errno)
' "$M/$F")
# A libfuse with FUSE_CAP_DIRECT_IO_ALLOW_MMAP (3.16+) keeps mmap.
if grep -q '^SEEDFS_FUSE_DIO_MMAP:INTERNAL=1' "$BUILD/CMakeCache.txt"; then
	want=mapped
else
	want=19
fi
[ "$out" = "$want" ] || fail "mmap with -o direct_io: $out (want $want; 19 is ENODEV)"
grep -q "^bytes_pulled:" "$S" || fail "status unreadable"
ok "-o direct_io: byte-exact, 0 bytes in the page cache, a second read pulled nothing, mmap: $out"
unmount_check "$MNT" "$MOUNT_PID"

# The ceiling server, both ways.
for mode in "" "-o direct_io"; do
	CM=$WORK/ceil
	mkdir -p "$CM"
	MOUNTS+=("$CM")
	# shellcheck disable=SC2086
	"$CEIL" "$MODEL" "$CM" $mode 2>"$WORK/ceil.err" &
	CP=$!
	PIDS+=("$CP")
	for _ in $(seq 100); do grep -q " $CM fuse" /proc/mounts && break; sleep 0.05; done
	grep -q " $CM fuse" /proc/mounts || fail "sfs-fuseceil did not mount: $(cat "$WORK/ceil.err")"
	diff -r "$MODEL" "$CM" >/dev/null || fail "sfs-fuseceil $mode: the tree differs"
	fusermount3 -u "$CM"
	wait "$CP" || fail "sfs-fuseceil $mode exited with an error"
	ok "sfs-fuseceil ${mode:-(buffered)}: byte-exact"
done
sanitizers_clean
