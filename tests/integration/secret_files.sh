#!/usr/bin/env bash
# The control plane's smaller holes (docs/security.md, "Secret files,
# Host names, the control socket"):
# - a secret's file (a token, a TLS key, etcd's password) that its group
#   or others may read is refused in one line naming the file and its
#   mode, by every command that reads one; 0600 and 0400 are taken;
# - a seed or a re-seeder without a token answers only requests whose
#   Host names it (DNS rebinding): Host: evil.example gets 421;
# - the mount's control socket directory: one made by another user, a
#   symlink, or one others may enter is not used (one line why), and a
#   mount as an ordinary user still gets its own.
source "$(dirname "$0")/lib.sh" "$1"

APIREAD=$BUILD/tests/apiread
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 2M --shards 1 >/dev/null
code() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }

# --- Secret files: modes. ------------------------------------------------
openssl rand -hex 32 >"$WORK/t.tok"
printf 'root:s3cret\n' >"$WORK/etcd.auth"
cd "$WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
	-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 \
	-keyout k.pem -out c.pem 2>/dev/null || fail "openssl"
cd - >/dev/null
# refused WHAT FILE MODE PREFIX CMD...: one line, naming FILE and MODE.
refused() {
	local what=$1 file=$2 mode=$3 prefix=$4
	shift 4
	chmod "$mode" "$file"
	mkdir -p "$WORK/nomnt"
	# (A seed that takes it serves until the timeout.)
	if timeout 10 "$@" >"$WORK/r.out" 2>"$WORK/r.err" || seed_ready "$WORK/r.out"; then
		grep -q " $WORK/nomnt fuse" /proc/mounts && MOUNTS+=("$WORK/nomnt")
		fail "$what: took $file at mode $mode"
	fi
	local want="$file: mode 0$mode gives its group or others access (0600 or 0400 wanted); chmod 600 $file"
	bound refusal_lines = 1 "$(wc -l <"$WORK/r.err")" "$what ($mode): lines of the refusal: $(cat "$WORK/r.err")"
	grep -qF -- "$prefix" "$WORK/r.err" && grep -qF -- "$want" "$WORK/r.err" ||
		fail "$what ($mode): $(cat "$WORK/r.err")"
}
S=(--model-dir "$MODEL" --listen 127.0.0.1:0 --log-level err)
for mode in 644 640; do
	refused "seed --token-file" "$WORK/t.tok" $mode "seedfs seed: --token-file " \
		"$SEEDFS" seed "${S[@]}" --token-file "$WORK/t.tok"
	refused "seed --tls-key" "$WORK/k.pem" $mode "seedfs seed: --tls-key " \
		"$SEEDFS" seed "${S[@]}" --tls-cert "$WORK/c.pem" --tls-key "$WORK/k.pem"
	refused "seed --registry-auth-file" "$WORK/etcd.auth" $mode "--registry-auth-file " \
		"$SEEDFS" seed "${S[@]}" --registry etcd://127.0.0.1:1 --registry-auth-file "$WORK/etcd.auth"
	refused "seed --metrics-token-file" "$WORK/t.tok" $mode "seedfs seed: --metrics-token-file " \
		"$SEEDFS" seed "${S[@]}" --metrics-token-file "$WORK/t.tok"
	refused "mount --metrics-token-file" "$WORK/t.tok" $mode "seedfs mount: --metrics-token-file " \
		"$SEEDFS" mount --log-level err --seed 127.0.0.1:1 --metrics-listen 127.0.0.1:0 \
		--metrics-token-file "$WORK/t.tok" "$WORK/nomnt"
	refused "mount --token-file" "$WORK/t.tok" $mode "seedfs mount: --token-file " \
		"$SEEDFS" mount --log-level err --seed 127.0.0.1:1 --token-file "$WORK/t.tok" "$WORK/nomnt"
	refused "mount --tls-key" "$WORK/k.pem" $mode "seedfs mount: --tls-key " \
		"$SEEDFS" mount --log-level err --seed 127.0.0.1:1 --reseed --tls-cert "$WORK/c.pem" \
		--tls-key "$WORK/k.pem" --tls-pin "sha256//erFIUM2u3Iopm4C1kj1NksJCJ9Gu5MD/jsZnjPGsGjI=" "$WORK/nomnt"
	refused "mount --registry-auth-file" "$WORK/etcd.auth" $mode "seedfs mount: --registry-auth-file " \
		"$SEEDFS" mount --log-level err --registry etcd://127.0.0.1:1 --registry-auth-file "$WORK/etcd.auth" "$WORK/nomnt"
	refused "pull --token-file" "$WORK/t.tok" $mode "seedfs pull: --token-file " \
		"$SEEDFS" pull --seed 127.0.0.1:1 --token-file "$WORK/t.tok" m "$WORK/p"
	refused "the engine API's token_file" "$WORK/t.tok" $mode "apiread: --token-file " \
		env SEEDFS_TOKEN_FILE="$WORK/t.tok" "$APIREAD" 127.0.0.1:1 m "$MODEL"
done
echo "  $(cat "$WORK/r.err")"
# 0600 and 0400: a seed with its token and key, a mount and a pull.
for mode in 600 400; do
	chmod $mode "$WORK/t.tok" "$WORK/k.pem"
	SEED_LOG=seed$mode start_seed "$MODEL" --token-file "$WORK/t.tok" \
		--tls-cert "$WORK/c.pem" --tls-key "$WORK/k.pem"
	"$SEEDFS" pull --seed "$HOST:$SEED_PORT" --tls-ca "$WORK/c.pem" --token-file "$WORK/t.tok" \
		m "$WORK/pulled$mode" >/dev/null 2>"$WORK/pull.err" || fail "pull at $mode: $(cat "$WORK/pull.err")"
	diff -r "$MODEL" "$WORK/pulled$mode" >/dev/null || fail "pulled at $mode differs"
	kill "$SEED_PID"
done
ok "secret files at 0644 and 0640 refused in one line naming the file and its mode (seed, mount, pull, engine API; token, scrape token, TLS key, etcd auth); 0600 and 0400 taken"

# --- DNS rebinding: Host names on a port without a token. ----------------
start_seed "$MODEL"
U=http://127.0.0.1:$SEED_PORT
for h in evil.example "evil.example:$SEED_PORT" 127.0.0.1.evil.example localhost.evil.example; do
	[ "$(code -H "Host: $h" "$U/v1/models")" = 421 ] || fail "Host: $h got $(cat "$WORK/body")"
done
bound body_lines_421 = 1 "$(wc -l <"$WORK/body")" "lines of the 421 body: $(cat "$WORK/body")"
grep -q "^this control port has no token and answers only requests for its own host names" "$WORK/body" ||
	fail "421 body: $(cat "$WORK/body")"
[ "$(code -H "Host: evil.example" "$U/v1/manifest")" = 421 ] || fail "/v1/manifest"
[ "$(code -H "Host: evil.example" -X POST --data '{"address":"1.2.3.4:5"}' "$U/v1/announce")" = 421 ] ||
	fail "POST /v1/announce"
[ "$(code -H "Host: evil.example" "$U/v1/health")" = 200 ] || fail "/v1/health is for probes"
for h in localhost "localhost:$SEED_PORT" 127.0.0.1 "127.0.0.1:$SEED_PORT" "127.0.0.2:9" "[::1]:$SEED_PORT" LOCALHOST. ; do
	[ "$(code -H "Host: $h" "$U/v1/models")" = 200 ] || fail "Host: $h refused: $(cat "$WORK/body")"
done
grep -q "W ctl: refused /v1/models from 127.0.0.1: Host evil.example is not a name of this port" "$WORK/seed.err" ||
	fail "not logged: $(cat "$WORK/seed.err")"
# A re-seeder without a token too; a seed with a token answers any name
# (the token is what protects it).
MNT=$WORK/rs
mount_seed "$MNT" --reseed --listen 127.0.0.1:0 --cache-size 64M
RS=$(awk '$1 == "reseed:" { print $2 }' "$MNT/.seedfs/status")
for r in /v1/models /v1/holdings; do
	[ "$(code -H "Host: evil.example" "http://$RS$r")" = 421 ] || fail "re-seeder $r: $(cat "$WORK/body")"
done
[ "$(code "http://$RS/v1/models")" = 200 ] || fail "re-seeder by its address"
unmount_check "$MNT" "$MOUNT_PID"
chmod 600 "$WORK/t.tok"
SEED_LOG=tok start_seed "$MODEL" --token-file "$WORK/t.tok"
[ "$(code -H "Host: evil.example" -H "Authorization: Bearer $(cat "$WORK/t.tok")" \
	"http://127.0.0.1:$SEED_PORT/v1/models")" = 200 ] || fail "a seed with a token, any Host"
ok "no token: Host evil.example gets 421 in one line on the seed and the re-seeder (/v1/health excepted); localhost and its addresses answer; with a token any name"

# --- The control socket directory (/tmp/seedfs-UID): squatted. ----------
# As nobody (fusermount3 wants a passwd entry); the seed has no token,
# so it needs no file.  One run at a time on this host (the normal and
# the ASan build, other worktrees): /tmp/seedfs-65534 is shared.
UID_=65534
SQ=/tmp/seedfs-$UID_
exec 9>/tmp/seedfs-secrets-test.lock
flock -w 120 9 || fail "another secrets.sh holds /tmp/seedfs-secrets-test.lock"
# Once the daemons have gone (an EXIT trap of its own would lose the
# test's status: cleanup exits with the status it is called with).
unsquat() { rm -rf "$SQ"; }
EXIT_HOOKS+=(unsquat)
mkdir -p "$WORK/u" "$WORK/bin"
chown "$UID_" "$WORK/u"
chmod 755 "$WORK" "$WORK/bin"
# The build directory may be where that user cannot go (a fresh clone
# in a 0700 directory): a copy of the command it runs.
cp "$SEEDFS" "$WORK/bin/seedfs"
chmod 755 "$WORK/bin/seedfs"
USEEDFS=$WORK/bin/seedfs
umount_as() { # MNT: mount as UID_, sets UPID; the log in $WORK/u/mount.log
	mkdir -p "$1"
	chown "$UID_" "$1"
	: >"$WORK/u/mount.log"
	chown "$UID_" "$WORK/u/mount.log"
	MOUNTS+=("$1")
	setpriv --reuid "$UID_" --regid "$UID_" --clear-groups env -u XDG_RUNTIME_DIR \
		"$USEEDFS" mount --seed "127.0.0.1:$SEED_PORT" "$1" --cache-size 64M \
		--log-file "$WORK/u/mount.log" 2>"$WORK/u/mount.err" ||
		fail "mount as uid $UID_: $(cat "$WORK/u/mount.err")"
	UPID=$(sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' "$WORK/u/mount.log")
	PIDS+=("$UPID")
}
as_user() { setpriv --reuid "$UID_" --regid "$UID_" --clear-groups "$@"; }
start_seed "$MODEL"
UM=$WORK/umnt
# squatted HOW WANT: the mount does not use $SQ, and says why in one line.
squatted() {
	umount_as "$UM"
	grep -qF "W replica: seedfs prefetch will not work: control socket directory $SQ $2" "$WORK/u/mount.log" ||
		fail "$1: $(cat "$WORK/u/mount.log")"
	as_user cat "$UM/.seedfs/status" >"$WORK/u.status" || fail "$1: status"
	refute --why "$1: uses a squatted control directory" '^control:' "$WORK/u.status"
	as_user cmp "$MODEL/config.json" "$UM/m/config.json" || fail "$1: the mount does not read"
	fusermount3 -u "$UM"
	echo "  $1: $(grep -o 'control socket directory.*' "$WORK/u/mount.log")"
}
rm -rf "$SQ"
mkdir -m 1777 "$SQ" # another user's (root's), open to all
squatted "a directory of another user" "belongs to uid 0, not to this user (uid $UID_): not used; remove it (or set XDG_RUNTIME_DIR)"
[ -z "$(ls -A "$SQ")" ] || fail "something was made in the squatted directory: $(ls -A "$SQ")"
rmdir "$SQ"
mkdir -m 700 "$WORK/u/target"
chown "$UID_" "$WORK/u/target"
ln -s "$WORK/u/target" "$SQ" # another user's symlink to a directory of ours
squatted "a symlink" "is a symbolic link, not a directory of this user's: not used; remove it"
[ -z "$(ls -A "$WORK/u/target")" ] || fail "the symlink was followed: $(ls -A "$WORK/u/target")"
rm "$SQ"
mkdir -m 777 "$SQ"
chown "$UID_" "$SQ" # ours, but others may enter (and replace the socket)
squatted "a directory others may enter" "has mode 0777: others may enter it; not used; chmod 700 it"
rmdir "$SQ"
# Nothing there: made 0700 and used.
umount_as "$UM"
as_user cat "$UM/.seedfs/status" >"$WORK/u.status"
grep -qx "control: $SQ/mount-$UPID.sock" "$WORK/u.status" || fail "no socket of its own: $(grep control "$WORK/u.status")"
[ "$(stat -c '%u %a %F' "$SQ")" = "$UID_ 700 directory" ] || fail "$SQ: $(stat -c '%u %a %F' "$SQ")"
as_user "$USEEDFS" prefetch "$UM/m" >/dev/null 2>"$WORK/u/pf.err" || fail "prefetch as uid $UID_: $(cat "$WORK/u/pf.err")"
fusermount3 -u "$UM"
ok "control socket directory: another user's directory, a symlink, one others may enter: not used, one line; otherwise made 0700 and prefetch works"

sanitizers_clean
