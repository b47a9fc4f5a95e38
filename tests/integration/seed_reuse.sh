#!/usr/bin/env bash
# A republish from disk reads only the files that changed (docs/usage.md,
# "Republishing"): a file that is the same inode, with the same size and
# times, as when a republish read it keeps those checksums and is not
# read again.  Read again: every file once after the first generation
# (read without putting dirty pages under write-out); a file replaced
# (another inode); one whose bytes were written through a mapping and
# its mtime put back (ctime moved; a mapping's writes raise no inotify
# event); one whose times were less than 2 s before the seed's read of
# it (racily clean: here an mtime in the future); every file on tmpfs
# (its mapped pages are never made clean: a second write through a
# mapping moves no time).  Every generation is read byte for byte by a
# fresh mount, and the checksums taken equal those a fresh seed computes
# from the same files.
#   seed_reuse.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 96M --shards 3 >/dev/null
mapfile -t S < <(cd "$MODEL" && ls ./*.safetensors | sed 's|^\./||' | sort)
[ ${#S[@]} = 3 ] || fail "genmodel made ${#S[@]} shards, want 3"
case $(stat -f -c %T "$WORK") in
ext2/ext3 | xfs | btrfs) ;;
*) fail "$WORK is on $(stat -f -c %T "$WORK"): this test needs ext4, XFS or Btrfs (TMPDIR)" ;;
esac
size() { stat -c %s "$MODEL/$1"; }
# Older than the racy rule's 2 s when the seed reads them.
sleep 2.2
start_seed "$MODEL"

# republish LOG PID N: SIGHUP, until generation N is published; prints
# its line of files taken.
republish() {
	local log=$1 pid=$2 n=$3 _ line
	kill -HUP "$pid"
	for _ in $(seq 600); do
		line=$(grep -o "m: generation $n: .*" "$WORK/$log.err" || true)
		[ -n "$line" ] && { echo "$line"; return 0; }
		line=$(grep -ho "nothing changed: generation $((n - 1)) .*\|not republished.*" "$WORK/$log.err" "$WORK/$log.out" || true)
		[ -z "$line" ] || fail "generation $n not published, the bytes that changed unseen: $line"
		running "$pid" || fail "the seed died"
		sleep 0.05
	done
	fail "generation $n not published 30 s after SIGHUP: $(tail -n 5 "$WORK/$log.err")"
}

# taken LINE WHAT all|SHARD...: LINE says every file the seed registers
# (over --inline-max, 64 KiB) but the SHARDs named (all: every one) was
# taken: their count, and their MiB.
taken() {
	local line=$1 what=$2 f n=0 bytes=0
	shift 2
	while read -r f; do
		[[ " $* " == *" $f "* || $1 == all ]] && continue
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
# mtime an hour ahead).  Nothing taken: generation 1 read its files
# without putting their dirty pages under write-out.
cp "$MODEL/${S[1]}" "$WORK/s2.new"
flip_byte "$WORK/s2.new" -1000
touch -d '+1 hour' "$WORK/s2.new"
mv "$WORK/s2.new" "$MODEL/${S[1]}"
line=$(republish seed "$SEED_PID" 2)
taken "$line" "generation 2: the first republish reads every file" all
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
line=$(republish seed "$SEED_PID" 3)
taken "$line" "generation 3: shard 3 written through a mapping and shard 2 racily clean read again, the rest taken" "${S[1]}" "${S[2]}"
same_as_disk "generation 3"

# Generations 4 and 5: a page of shard 1 dirtied through a shared
# mapping more than 2 s before the seed reads it, then written again
# through the same mapping once generation 4 was read.  The seed put
# the page under write-out before its read, so the second write faulted
# and moved the times: generation 5 reads shard 1 again.  (Without the
# write-out the page stays writable, the second write moves no time, and
# generation 5 would take generation 4's checksums: "nothing changed".)
python3 - "$MODEL/${S[0]}" "$WORK/pg" <<'PY' &
import mmap, os, sys, time
p, flag = sys.argv[1], sys.argv[2]
with open(p, "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    off = os.path.getsize(p) - 3000
    m[off] = m[off] ^ 0xff
    open(flag + ".1", "w").close()
    for _ in range(600):
        if os.path.exists(flag + ".go"):
            break
        time.sleep(0.05)
    m[off + 1] = m[off + 1] ^ 0xff
    m.close()
open(flag + ".2", "w").close()
PY
WPID=$!
PIDS+=("$WPID")
for _ in $(seq 200); do [ -e "$WORK/pg.1" ] && break; sleep 0.05; done
[ -e "$WORK/pg.1" ] || fail "the mapping's writer did not start"
sleep 2.2 # the first write older than the racy rule when read
line=$(republish seed "$SEED_PID" 4)
taken "$line" "generation 4: shard 1 dirtied through a mapping read again" "${S[0]}" "${S[1]}" "${S[2]}"
touch "$WORK/pg.go"
for _ in $(seq 200); do [ -e "$WORK/pg.2" ] && break; sleep 0.05; done
[ -e "$WORK/pg.2" ] || fail "the mapping's second write did not happen"
line=$(republish seed "$SEED_PID" 5)
taken "$line" "generation 5: shard 1 written again through the mapping read again" "${S[0]}" "${S[1]}"
same_as_disk "generation 5"

# What was taken is what the files hold: the manifest of generation 5
# and a fresh seed's (every file read) give every file the same digest,
# chunk XXH3 and SHA-256, and every tensor the same XXH3.
SEED_LOG=fresh start_seed "$MODEL"
curl -fsS "http://$HOST:$SEED_PORT/v1/manifest" >"$WORK/fresh.json" || fail "GET the fresh seed's manifest"
SEED_PORT=$(seed_port "$WORK/seed.out")
curl -fsS "http://$HOST:$SEED_PORT/v1/manifest" >"$WORK/taken.json" || fail "GET generation 5's manifest"
python3 - "$WORK/taken.json" "$WORK/fresh.json" <<'PY' || fail "the checksums taken differ from a fresh seed's"
import json, sys
t, f = (json.load(open(p)) for p in sys.argv[1:3])
def files(m):
    return {x["path"]: (x.get("xxh3"), x.get("checksum")) for x in m["files"]}
def tensors(m):
    return {x["name"]: x.get("xxh3") for x in m.get("tensors", [])}
ft, ff = files(t), files(f)
bad = [p for p in ff if ft.get(p) != ff[p]]
bad += [n for n, x in tensors(f).items() if tensors(t).get(n) != x]
summed = sum(1 for v in ff.values() if v[1] and v[1].get("sha256"))
if bad or set(ft) != set(ff) or summed < 3:
    sys.exit("differ: %s (files with SHA-256: %d)" % (bad[:5], summed))
print("ok: generation 5's checksums equal a fresh seed's: %d files "
      "(%d with SHA-256), %d tensors" % (len(ff), summed, len(tensors(f))))
PY

# On tmpfs nothing is taken, ever: its mapped pages stay writable
# without a fault, so a write through a mapping moves no time.  Each
# generation there: shard 1 replaced (a byte flipped, then back).
SHM=$(mktemp -d /dev/shm/seedfs-reuse.XXXXXX)
unshm() { rm -rf "$SHM"; }
EXIT_HOOKS+=(unshm)
cp -a "$MODEL" "$SHM/m"
sleep 2.2 # the files older than the racy rule's 2 s: not why
SEED_LOG=shm start_seed "$SHM/m"
SPID=$SEED_PID
flip() {
	cp "$SHM/m/${S[0]}" "$SHM/new"
	flip_byte "$SHM/new" -1000
	mv "$SHM/new" "$SHM/m/${S[0]}"
}
flip
republish shm "$SPID" 2 >/dev/null
flip
line=$(republish shm "$SPID" 3)
nreg=$(cd "$MODEL" && find . -type f -size +64k | wc -l)
case $line in
*": 0 of $nreg registered files "*"; $nreg on a filesystem whose times may miss a write"*) ok "tmpfs: $line" ;;
*) fail "tmpfs: want 0 of $nreg taken, $nreg said to be read at every republish: $line" ;;
esac

sanitizers_clean
