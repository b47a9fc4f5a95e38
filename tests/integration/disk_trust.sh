#!/usr/bin/env bash
# The disk tier trusts nothing in its directory (issue 24, item 7).
#  1. A --cache-dir that is a link, another user's, writable by others
#     or below a parent others can change is refused in one line.
#  2. The three attacks of the issue, played by uid 65534 in a
#     world-writable directory of a root mount (a root-only file
#     overwritten with model bytes, every file of a root-only directory
#     deleted, a root-owned file created): the directory is refused, the
#     victims stay as they were.
#  3. In a directory that passes (root's, 0700), links, a hard link and
#     another user's directory planted where the mount will look: none
#     is followed or written through, the victims stay byte-for-byte,
#     and the mount serves byte-exact content and still stores chunks.
source "$(dirname "$0")/lib.sh" "$1"
[ "$(id -u)" = 0 ] || { echo "skip: needs root (uid 65534 plays the attacker)"; exit 77; }
command -v setpriv >/dev/null || fail "no setpriv (util-linux): it plays uid 65534"
chmod 0755 "$WORK" # uid 65534 reaches what it is given, nothing more
AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)

"$GENMODEL" "$WORK/a" --size 8M --shards 2 --seed 1
"$GENMODEL" "$WORK/b" --size 8M --shards 2 --seed 2
start_seed "$WORK/a" --model-dir "$WORK/b"
MNT=$WORK/mnt
S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }
drain() {
	local i
	for i in $(seq 200); do
		[ "$(val disk_queue)" = 0 ] && return 0
		sleep 0.05
	done
	fail "disk queue not drained: $(grep ^disk "$S")"
}
read_all() {
	local m f
	for m in a b; do
		for f in $(cd "$WORK/$m" && find . -type f | sed 's|^\./||'); do
			cmp "$WORK/$m/$f" "$MNT/$m/$f" || fail "bytes of $m/$f"
		done
	done
}

# What an attacker can compute from the public content digest: the
# directory of each model and the key in its about file; learnt here
# from a mount of our own.
mount_seed "$MNT" --cache-dir "$WORK/learn"
read_all
drain
unmount_check "$MNT" "$MOUNT_PID"
for m in a b; do
	d=$(grep -l "^model: $m$" "$WORK"/learn/*/about | xargs dirname)
	[ -d "$d" ] || fail "no directory for model $m in $WORK/learn"
	eval "NAME_$m=${d##*/}"
	eval "KEY_$m=\$(head -n 1 \"\$d/about\")"
done
REGIONS=$(cd "$WORK/learn/$NAME_b" && ls r*)
[ "$(echo "$REGIONS" | wc -l)" -ge 2 ] || fail "model b stored only: $REGIONS"

# The victims: root's alone (their originals kept aside).
mkdir -m 0700 "$WORK/orig"
head -c 8192 /dev/urandom >"$WORK/orig/victim"
head -c 8192 /dev/urandom >"$WORK/orig/victim2"
mkdir "$WORK/orig/victimdir"
printf 'one\n' >"$WORK/orig/victimdir/one"
printf 'two\n' >"$WORK/orig/victimdir/two"
chmod 0600 "$WORK/orig/victim" "$WORK/orig/victim2"
chmod 0700 "$WORK/orig/victimdir"
victims() {
	rm -rf "$WORK/victim" "$WORK/victim2" "$WORK/victimdir" "$WORK/created" "$WORK/created2"
	cp -a "$WORK/orig/victim" "$WORK/orig/victim2" "$WORK/orig/victimdir" "$WORK/"
}
# damage: what happened to the victims ("" when nothing)
damage() {
	local v d=""
	for v in victim victim2; do
		cmp -s "$WORK/orig/$v" "$WORK/$v" ||
			d="$d $v overwritten (now $(stat -c '%s bytes' "$WORK/$v"), $(cmp "$WORK/orig/$v" "$WORK/$v" 2>&1 | head -n 1));"
	done
	diff -r "$WORK/orig/victimdir" "$WORK/victimdir" >/dev/null 2>&1 ||
		d="$d victimdir changed (now: $(ls "$WORK/victimdir" | tr '\n' ' '));"
	for v in created created2; do
		[ -e "$WORK/$v" ] && d="$d $WORK/$v was created ($(stat -c '%U, %s bytes' "$WORK/$v"));"
	done
	echo "$d"
}
# damaged WHAT: assert that nothing happened to the victims
damaged() {
	local d
	d=$(damage)
	bound victims_damaged = 0 "$(tr -cd ';' <<<"$d" | wc -c)" "$1:$d"
}

# 1. The directory itself.
refused() { # DIR MESSAGE
	local st=0
	mkdir -p "$WORK/mnt1"
	"$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$WORK/mnt1" --cache-dir "$1" 2>"$WORK/refused.err" || st=$?
	if [ $st = 0 ]; then
		MOUNTS+=("$WORK/mnt1")
		fail "--cache-dir $1 was used"
	fi
	bound refusal_lines = 1 "$(grep -c . "$WORK/refused.err")" "--cache-dir $1: said $(cat "$WORK/refused.err")"
	[ "$(cat "$WORK/refused.err")" = "seedfs mount: --cache-dir $1: $2" ] ||
		fail "--cache-dir $1: said $(cat "$WORK/refused.err")"
	ok "refused: $(cat "$WORK/refused.err")"
}
mkdir -m 0700 "$WORK/real"
ln -s "$WORK/real" "$WORK/link"
refused "$WORK/link" "a symbolic link: give the directory itself"
mkdir -m 0700 "$WORK/theirs" && chown 65534:65534 "$WORK/theirs"
refused "$WORK/theirs" "owned by uid 65534, not by uid 0 that mounts: chown 0 it, or give another directory"
mkdir -m 0770 "$WORK/group"
refused "$WORK/group" "group or others can write it (mode 770): chmod go-w it"
mkdir -m 0777 "$WORK/pub" && mkdir -m 0700 "$WORK/pub/cache"
refused "$WORK/pub/cache" "group or others can write its parent $WORK/pub (mode 777, not sticky): give a directory whose parents only root or uid 0 can change"

# 2. The attacks, in a world-writable directory.
victims
CD=$WORK/ww
mkdir -m 0777 "$CD"
# every file of victimdir deleted: model a's directory is a link to it
"${AS[@]}" ln -s "$WORK/victimdir" "$CD/$NAME_a"
# victim overwritten with model bytes: model b's region files are
# links to it, under an about file with the right key
"${AS[@]}" env D="$CD/$NAME_b" V="$WORK/victim" K="$KEY_b" sh -c \
	'mkdir -m 0777 "$D" && printf "%s\n" "$K" >"$D/about" && for r; do ln -s "$V" "$D/$r"; done' _ $REGIONS
# a root-owned file created: the lock is a link to where it goes
"${AS[@]}" ln -s "$WORK/created" "$CD/lock"
[ -L "$CD/$NAME_a" ] && [ -L "$CD/$NAME_b/$(echo "$REGIONS" | head -n 1)" ] && [ -L "$CD/lock" ] ||
	fail "uid 65534 could not plant its links: $(ls -la "$CD")"
st=0
mkdir -p "$MNT"
"$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$MNT" --cache-dir "$CD" \
	--log-file "$WORK/mount.log" 2>"$WORK/ww.err" || st=$?
if [ $st = 0 ]; then
	# The old behaviour: play it out and say what the attacks did.
	MOUNTS+=("$MNT")
	pid=$(sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' "$WORK/mount.log" | tail -n 1)
	PIDS+=($pid)
	read_all
	drain
	fusermount3 -u "$MNT"
	# its last writes: done once it has exited
	for _ in $(seq 100); do running "$pid" || break; sleep 0.05; done
	running "$pid" && fail "a world-writable --cache-dir was used (its daemon still running 5 s after the unmount):$(damage)"
	fail "a world-writable --cache-dir was used:$(damage)"
fi
[ "$(cat "$WORK/ww.err")" = "seedfs mount: --cache-dir $CD: group or others can write it (mode 777): chmod go-w it" ] ||
	fail "world-writable: $(cat "$WORK/ww.err")"
damaged "refused, but"
ok "uid 65534's world-writable directory is refused; victim file, victim directory untouched, nothing created"

# 3. A directory that passes, with what others could have left in it.
victims
CD=$WORK/cd
mkdir -m 0700 "$CD"
ln -s "$WORK/victimdir" "$CD/$NAME_a"
ln -s "$WORK/victimdir" "$CD/0123456789abcdef0123456789abcdef"
mkdir -m 0700 "$CD/$NAME_b"
printf '%s\n' "$KEY_b" >"$CD/$NAME_b/about"
first=1
for r in $REGIONS; do
	if [ $first = 1 ]; then
		ln "$WORK/victim2" "$CD/$NAME_b/$r" # a hard link: written through, it is victim2
		first=0
	else
		ln -s "$WORK/victim" "$CD/$NAME_b/$r"
	fi
done
ln -s "$WORK/created" "$CD/$NAME_b/about.tmp"
ln -s "$WORK/created2" "$CD/lock"
mkdir -m 0700 "$CD/fedcba9876543210fedcba9876543210"
printf 'theirs\n' >"$CD/fedcba9876543210fedcba9876543210/keep"
chown -R 65534:65534 "$CD/fedcba9876543210fedcba9876543210"
mount_seed "$MNT" --cache-dir "$CD"
read_all
drain
stored=$(val disk_bytes_written)
[ "$stored" -gt $((4 << 20)) ] || fail "chunks not stored: $(grep ^disk "$S")"
unmount_check "$MNT" "$MOUNT_PID"
damaged "planted links were followed"
for r in $REGIONS; do
	[ "$(stat -c '%F %U %h' "$CD/$NAME_b/$r")" = "regular file root 1" ] ||
		fail "$NAME_b/$r: $(stat -c '%F %U %h' "$CD/$NAME_b/$r")"
done
[ -d "$CD/$NAME_a" ] && [ ! -L "$CD/$NAME_a" ] || fail "$NAME_a: $(ls -ld "$CD/$NAME_a")"
[ ! -e "$CD/0123456789abcdef0123456789abcdef" ] || fail "a stray link was kept"
[ "$(cat "$CD/fedcba9876543210fedcba9876543210/keep")" = theirs ] || fail "uid 65534's directory was touched"
grep -q "W disk: $CD/0123456789abcdef0123456789abcdef: a symbolic link: removed, never followed" "$WORK/mount.log" ||
	fail "no line for the stray link: $(grep disk "$WORK/mount.log")"
grep -q "W disk: $CD/fedcba9876543210fedcba9876543210: owned by uid 65534: left alone, never used" "$WORK/mount.log" ||
	fail "no line for the foreign directory: $(grep disk "$WORK/mount.log")"
ok "planted links (directory, region files, about.tmp, lock), a hard link and uid 65534's directory: victims byte-for-byte, every file read byte-exact, $stored bytes stored"

# The same again: what it stored is used, nothing pulled.
mount_seed "$MNT" --cache-dir "$CD"
read_all
[ "$(val bytes_pulled)" = 0 ] || fail "remount pulled $(val bytes_pulled) bytes"
unmount_check "$MNT" "$MOUNT_PID"
damaged "remount"
ok "remount: every byte from the disk tier"
sanitizers_clean
