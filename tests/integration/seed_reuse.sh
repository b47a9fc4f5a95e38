#!/usr/bin/env bash
# A republish from disk reads only the files that changed (docs/usage.md,
# "Republishing"): a file that is the same inode, with the same size and
# times, as when the generation before read it keeps that generation's
# checksums and is not read again.  Read again: a file replaced (another
# inode); one whose bytes were written through a mapping and its mtime
# put back (ctime moved; a mapping's writes raise no inotify event);
# one whose times were less than 2 s before the seed's read of it
# (racily clean: here an mtime in the future).  Every generation is
# read byte for byte by a fresh mount: a checksum taken for bytes that
# changed would be refused there.
#   seed_reuse.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 96M --shards 3 >/dev/null
mapfile -t S < <(cd "$MODEL" && ls ./*.safetensors | sed 's|^\./||' | sort)
[ ${#S[@]} = 3 ] || fail "genmodel made ${#S[@]} shards, want 3"
size() { stat -c %s "$MODEL/$1"; }
# Older than the racy rule's 2 s when the seed first reads them.
sleep 2.2
start_seed "$MODEL"

# republish N: SIGHUP, until generation N is published; prints its
# line of files taken from the generation before.
republish() {
	local _ line
	kill -HUP "$SEED_PID"
	for _ in $(seq 600); do
		line=$(grep -o "m: generation $1: .*" "$WORK/seed.err" || true)
		[ -n "$line" ] && { echo "$line"; return 0; }
		line=$(grep -ho "nothing changed: generation $(($1 - 1)) .*\|not republished.*" "$WORK/seed.err" "$WORK/seed.out" || true)
		[ -z "$line" ] || fail "generation $1 not published, the bytes that changed unseen: $line"
		running "$SEED_PID" || fail "the seed died"
		sleep 0.05
	done
	fail "generation $1 not published 30 s after SIGHUP: $(tail -n 5 "$WORK/seed.err")"
}

# taken LINE WHAT SHARD...: LINE says every file the seed registers
# (over --inline-max, 64 KiB) but the SHARDs named was taken: their
# count, and their MiB.
taken() {
	local line=$1 what=$2 f n=0 bytes=0
	shift 2
	while read -r f; do
		[[ " $* " == *" $f "* ]] && continue
		n=$((n + 1))
		bytes=$((bytes + $(size "$f")))
	done < <(cd "$MODEL" && find . -type f -size +64k | sed 's|^\./||')
	case $line in
	*": $n of "*" files ($((bytes >> 20)) of "*) ok "$what: $line" ;;
	*) fail "$what: want $n files ($((bytes >> 20)) MiB) taken: $line" ;;
	esac
}

# same_as_disk WHAT: a fresh mount reads every file as it is on disk.
same_as_disk() {
	local f
	mount_seed "$WORK/mnt"
	for f in $(cd "$MODEL" && find . -type f | sed 's|^\./||'); do
		cmp "$MODEL/$f" "$WORK/mnt/m/$f" || fail "$1: $f differs"
	done
	unmount_check "$WORK/mnt" "$MOUNT_PID"
}
same_as_disk "generation 1"

# Generation 2: shard 2 replaced (another inode, one byte changed, its
# mtime an hour ahead); the rest taken.
cp "$MODEL/${S[1]}" "$WORK/s2.new"
python3 - "$WORK/s2.new" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) - 1000)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0xff]))
PY
touch -d '+1 hour' "$WORK/s2.new"
mv "$WORK/s2.new" "$MODEL/${S[1]}"
line=$(republish 2)
taken "$line" "generation 2: all but shard 2 unchanged" "${S[1]}"
same_as_disk "generation 2"

# Generation 3: shard 3 written through a shared mapping, its mtime put
# back (no inotify event; ctime moved); shard 2 unchanged but racily
# clean (its mtime was ahead of the seed's read).  The rest taken.
python3 - "$MODEL/${S[2]}" <<'PY'
import mmap, os, sys
p = sys.argv[1]
st = os.stat(p)
with open(p, "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    off = st.st_size - 1000
    m[off] = m[off] ^ 0xff
    m.flush()
    m.close()
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
if os.stat(p).st_mtime_ns != st.st_mtime_ns:
    sys.exit("mtime not put back")
PY
line=$(republish 3)
taken "$line" "generation 3: shard 3 written through a mapping and shard 2 racily clean read again, the rest taken" "${S[1]}" "${S[2]}"
same_as_disk "generation 3"

sanitizers_clean
