#!/usr/bin/env bash
# The control port's token (docs/security.md): a seed without one stays
# on loopback; with one, every route but /v1/health answers 401 without
# it (the route's body never read), and a mount, a pull, the engine API
# and a re-seeder refuse in one line or read byte-exact; the token is in
# no argv or environment; SIGHUP rotates it while mounts keep reading.
source "$(dirname "$0")/lib.sh" "$1"

APIREAD=$BUILD/tests/apiread
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2 >/dev/null
F1=model-00001-of-00002.safetensors
F2=model-00002-of-00002.safetensors
umask 077
openssl rand -hex 32 >"$WORK/seed.tok"
cp "$WORK/seed.tok" "$WORK/a.tok"
TOKEN_A=$(cat "$WORK/a.tok")
echo "wrong-$(openssl rand -hex 16)" >"$WORK/wrong.tok"
umask 022

# --- Without a token: loopback only, said in the ready line. -----------
netns_setup
nsenter "--net=/run/netns/$NS" "$SEEDFS" seed --model-dir "$MODEL" \
	>"$WORK/lo.out" 2>"$WORK/lo.err" &
LO_PID=$!
PIDS+=("$LO_PID")
for _ in $(seq 200); do seed_ready "$WORK/lo.out" && break; sleep 0.05; done
grep -q "ready on 127.0.0.1:7070: .*; unauthenticated$" "$WORK/lo.out" ||
	fail "ready line: $(cat "$WORK/lo.out" "$WORK/lo.err")"
ip netns exec "$NS" ss -Hltn >"$WORK/lo.ss"
bound control_on_loopback = 1 "$(awk '$4 == "127.0.0.1:7070"' "$WORK/lo.ss" | wc -l)" \
	"listeners on 127.0.0.1:7070: $(cat "$WORK/lo.ss")"
bound listeners_off_loopback = 0 "$(awk '$4 !~ /^127\.0\.0\.1:/' "$WORK/lo.ss" | wc -l)" \
	"the seed's listeners off 127.0.0.1: $(cat "$WORK/lo.ss")"
if curl -s -m 2 "http://$NS_IP:7070/v1/models" >/dev/null; then
	fail "a seed without a token answered another network namespace"
fi
refute --empty-ok --why "warned on loopback" warning "$WORK/lo.err"
kill "$LO_PID"
SEED_LOG=any
start_seed "$MODEL" --listen 0.0.0.0:0
bound warning_lines = 1 "$(grep -c "^seedfs seed: warning: --listen 0.0.0.0:0 without --token-file: whoever reaches it reads the models" \
	"$WORK/any.err")" "the warning for 0.0.0.0: $(cat "$WORK/any.err")"
kill "$SEED_PID"
ok "no token: 127.0.0.1:7070 by default, 'unauthenticated' in the ready line, unreachable from another namespace, a warning for 0.0.0.0"

# --- With a token. -------------------------------------------------------
SEED_LOG=seed # the one stopped above may still be writing its own
start_seed "$MODEL" --token-file "$WORK/seed.tok" --grace 2
grep -q "; token required$" "$WORK/seed.out" || fail "ready line: $(cat "$WORK/seed.out")"
U=http://$HOST:$SEED_PORT
code() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }
for route in /v1/models /v1/manifest /v1/generation /v1/sources; do
	[ "$(code "$U$route")" = 401 ] || fail "$route without a token"
	[ "$(code -H "Authorization: Bearer $(cat "$WORK/wrong.tok")" "$U$route")" = 401 ] ||
		fail "$route with a wrong token"
	[ "$(code -H "Authorization: Basic $TOKEN_A" "$U$route")" = 401 ] ||
		fail "$route with another scheme"
done
curl -s -D "$WORK/hdr" -o /dev/null "$U/v1/models"
grep -qi '^WWW-Authenticate: Bearer realm="seedfs"' "$WORK/hdr" || fail "no WWW-Authenticate"
[ "$(code -H "Authorization: Bearer $TOKEN_A" "$U/v1/models")" = 200 ] || fail "right token"
[ "$(code -H "authorization: bearer   $TOKEN_A  " "$U/v1/models")" = 200 ] ||
	fail "header name and scheme are case-insensitive"
[ "$(code "$U/v1/health")" = 200 ] || fail "/v1/health needs no token"
# POST /v1/connect (raw verbs' queue pairs) and /v1/announce: refused
# before the body (a 1 MiB one) is read.
head -c 1048576 /dev/urandom >"$WORK/big"
for route in /v1/connect /v1/announce; do
	[ "$(code --data-binary @"$WORK/big" "$U$route?protocol=rdma")" = 401 ] ||
		fail "POST $route without a token"
done
grep -q "W ctl: refused /v1/models from 127.0.0.1: no token" "$WORK/seed.err" ||
	fail "refusals not logged"
ok "every route but /v1/health: 401 without the token, with a wrong one or another scheme (POST bodies unread); 200 with it"

# A mount without the token, or with a wrong one: one line, nothing
# mounted.
MNT=$WORK/mnt
mkdir -p "$WORK/nomnt"
mkdir -p "$MNT"
for args in "" "--token-file $WORK/wrong.tok"; do
	t0=$(now_ms)
	# shellcheck disable=SC2086
	if "$SEEDFS" mount --seed "$HOST:$SEED_PORT" $args "$MNT" 2>"$WORK/m.err"; then
		MOUNTS+=("$MNT")
		fail "mounted with '$args'"
	fi
	bound refusal_lines = 1 "$(wc -l <"$WORK/m.err")" "a mount refused the token ('$args'): lines: $(cat "$WORK/m.err")"
	grep -q " $MNT fuse" /proc/mounts && fail "mounted"
	bound refusal_ms "<" 5000 $(($(now_ms) - t0)) "a mount refused the token ('$args'), ms"
	echo "  $(cat "$WORK/m.err")"
done
grep -q "HTTP status 401: the seed needs a token; give --token-file FILE (or SEEDFS_TOKEN_FILE)" \
	"$WORK/m.err" && fail "wrong token reported as missing"
grep -q "HTTP status 401: the seed refused the token in $WORK/wrong.tok" "$WORK/m.err" ||
	fail "wrong token: $(cat "$WORK/m.err")"
ok "a mount without the token or with a wrong one: one line, nothing mounted"

MOUNT_LOG=mnt1 # several mounts run at once: a log each
mount_seed "$MNT" --token-file "$WORK/a.tok"
M1_PID=$MOUNT_PID
cmp "$MODEL/$F1" "$MNT/m/$F1" || fail "byte-exact with the token"
grep -qx "control_security: token $WORK/a.tok; no tls" "$MNT/.seedfs/status" ||
	fail "status: $(grep control_security "$MNT/.seedfs/status")"
cp "$WORK/seed.tok" "$WORK/shared.tok"
MNT2=$WORK/mnt2
MOUNT_LOG=mnt2
SEEDFS_TOKEN_FILE=$WORK/shared.tok mount_seed "$MNT2"
M2_PID=$MOUNT_PID
cmp "$MODEL/config.json" "$MNT2/m/config.json" || fail "SEEDFS_TOKEN_FILE"
for pid in "$SEED_PID" "$M1_PID" "$M2_PID"; do
	for what in cmdline environ; do
		tr '\0' '\n' <"/proc/$pid/$what" >"$WORK/proc-$what" ||
			fail "cannot read /proc/$pid/$what"
		refute --why "the token is in /proc/$pid/$what" -F "$TOKEN_A" "$WORK/proc-$what"
	done
done
ok "with the token: byte-exact (--token-file and SEEDFS_TOKEN_FILE); the token is in no process's cmdline or environ"

# pull and the engine API.
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" m "$WORK/p1" 2>"$WORK/pull.err" &&
	fail "pull without a token"
grep -q "401: the seed needs a token" "$WORK/pull.err" || fail "pull: $(cat "$WORK/pull.err")"
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" --token-file "$WORK/a.tok" m "$WORK/p2" ||
	fail "pull with the token"
diff -r "$MODEL" "$WORK/p2" || fail "pull not byte-exact"
"$APIREAD" "$HOST:$SEED_PORT" m "$MODEL" files >"$WORK/api.out" 2>&1 &&
	fail "the API without a token"
grep -q "401: the seed needs a token" "$WORK/api.out" || fail "api: $(cat "$WORK/api.out")"
SEEDFS_TOKEN_FILE=$WORK/a.tok "$APIREAD" "$HOST:$SEED_PORT" m "$MODEL" files >"$WORK/api.out" 2>&1 ||
	fail "the API with the token: $(cat "$WORK/api.out")"
ok "pull and the engine API: refused without the token, byte-exact with it"

# Bad token files: one line naming the file.
printf 'short\n' >"$WORK/short.tok"
printf '%s\nsecond\n' "$TOKEN_A" >"$WORK/two.tok"
chmod 600 "$WORK/short.tok" "$WORK/two.tok"
printf '%s\n' "$TOKEN_A" >"$WORK/open.tok"
chmod 644 "$WORK/open.tok"
for f in short two missing; do
	"$SEEDFS" mount --seed "$HOST:$SEED_PORT" --token-file "$WORK/$f.tok" "$WORK/nomnt" \
		2>"$WORK/bad.err" && fail "mounted with $f.tok"
	bound bad_token_file_lines = 1 "$(wc -l <"$WORK/bad.err")" "$f.tok: lines: $(cat "$WORK/bad.err")"
	grep -q "^seedfs mount: --token-file $WORK/$f.tok: " "$WORK/bad.err" ||
		fail "$f.tok: $(cat "$WORK/bad.err")"
	echo "  $(cat "$WORK/bad.err")"
	"$SEEDFS" seed --model-dir "$MODEL" --token-file "$WORK/$f.tok" >/dev/null 2>"$WORK/bad.err" &&
		fail "seed took $f.tok"
	grep -q "^seedfs seed: --token-file $WORK/$f.tok: " "$WORK/bad.err" || fail "seed, $f.tok"
done
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" --token-file "$WORK/open.tok" --log-level warn \
	m "$WORK/p3" 2>"$WORK/open.err" && fail "pull took a token file others can read"
[ "$(cat "$WORK/open.err")" = "seedfs pull: --token-file $WORK/open.tok: mode 0644 gives its group or others access (0600 or 0400 wanted); chmod 600 $WORK/open.tok" ] ||
	fail "a token file others can read: $(cat "$WORK/open.err")"
ok "a bad token file (short, two lines, missing, readable by others) is one line naming it (secrets.sh: every reader of a secret)"

# A re-seeder asks for the same token, and announces itself with it.
RS=$WORK/rs
MOUNT_LOG=rs
MOUNT_SEEDS="$HOST:$SEED_PORT" mount_seed "$RS" --reseed --listen "$HOST:0" \
	--token-file "$WORK/a.tok" --cache-size 64M
RS_ADDR=$(sed -n 's/.*serving what this mount holds on \([^ ]*\) .*/\1/p' "$WORK/rs.log" | tail -n 1)
[ -n "$RS_ADDR" ] || fail "no re-seeder address"
cat "$RS/m/$F2" >/dev/null
for route in /v1/models /v1/manifest /v1/holdings; do
	[ "$(code "http://$RS_ADDR$route?model=m")" = 401 ] || fail "re-seeder $route without a token"
done
[ "$(code -H "Authorization: Bearer $TOKEN_A" "http://$RS_ADDR/v1/models")" = 200 ] ||
	fail "re-seeder with the token"
for _ in $(seq 100); do
	curl -s -H "Authorization: Bearer $TOKEN_A" "$U/v1/sources" | grep -qF "$RS_ADDR" && break
	sleep 0.1
done
curl -s -H "Authorization: Bearer $TOKEN_A" "$U/v1/sources" | grep -qF "$RS_ADDR" ||
	fail "the re-seeder's announcement did not reach the seed"
unmount_check "$RS" "$MOUNT_PID"
ok "a re-seeder: 401 without the token on its own port, 200 with it; its announcement carried the token"

# The registry: its records hold no secret, and a mount that finds a
# seed there still needs the token.
start_etcd e1
CP=$ETCD_CPORT
REG=etcd://127.0.0.1:$CP/a$$
MAIN_PID=$SEED_PID MAIN_PORT=$SEED_PORT
SEED_LOG=regseed start_seed "$MODEL" --name rm --token-file "$WORK/a.tok" --registry "$REG"
REG_PID=$SEED_PID
SEED_PID=$MAIN_PID SEED_PORT=$MAIN_PORT
etcdctl --endpoints "127.0.0.1:$CP" get --prefix "/a$$/" >"$WORK/records"
grep -q '"model":"rm"' "$WORK/records" || fail "no record: $(cat "$WORK/records")"
refute --why "the token is in the registry" -F "$TOKEN_A" "$WORK/records"
refute --why "keys in the registry" '"key"\|"raddr"\|"remote"' "$WORK/records"
RMNT=$WORK/rmnt
mkdir -p "$RMNT"
"$SEEDFS" mount --registry "$REG" "$RMNT" 2>"$WORK/r.err" && fail "mounted by registry without a token"
grep -q "401: the seed needs a token" "$WORK/r.err" || fail "registry, no token: $(cat "$WORK/r.err")"
MOUNT_LOG=rmnt
MOUNT_REG=$REG mount_seed "$RMNT" --token-file "$WORK/a.tok"
cmp "$MODEL/$F1" "$RMNT/rm/$F1" || fail "by registry with the token"
unmount_check "$RMNT" "$MOUNT_PID"
kill "$REG_PID"
kill "$ETCD_PID"
ok "by registry: the records hold neither token nor keys; without the token the mount is refused, with it byte-exact"

# Rotation: SIGHUP reads the file again.  Mounts up keep reading; new
# ones need the new token; a mount sharing the seed's file follows.
openssl rand -hex 32 >"$WORK/b.tok"
chmod 600 "$WORK/b.tok"
cp "$WORK/b.tok" "$WORK/seed.tok"
cp "$WORK/b.tok" "$WORK/shared.tok"
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "token read again" "$WORK/seed.err" && break; sleep 0.05; done
grep -q "SIGHUP: token read again from $WORK/seed.tok: a new one" "$WORK/seed.err" ||
	fail "rotation not logged: $(tail -3 "$WORK/seed.err")"
[ "$(code -H "Authorization: Bearer $TOKEN_A" "$U/v1/models")" = 401 ] || fail "old token still taken"
# The mounts ask the seed again (every second): the one with the old
# token is refused, the one sharing the seed's file reads it again.
for _ in $(seq 100); do
	grep -q "401: the seed refused the token in $WORK/a.tok" "$WORK/mnt1.log" &&
		grep -q "refused the token; $WORK/shared.tok holds a new one" "$WORK/mnt2.log" && break
	sleep 0.05
done
grep -q "401: the seed refused the token in $WORK/a.tok" "$WORK/mnt1.log" ||
	fail "the mount with the old token was not refused in 5 s: $(tail -n 3 "$WORK/mnt1.log")"
grep -q "refused the token; $WORK/shared.tok holds a new one" "$WORK/mnt2.log" ||
	fail "the mount sharing the seed's file did not read it again in 5 s: $(tail -n 3 "$WORK/mnt2.log")"
cmp "$MODEL/$F2" "$MNT/m/$F2" || fail "a mount with the old token stopped reading"
cmp "$MODEL/$F2" "$MNT2/m/$F2" || fail "the mount sharing the file stopped reading"
"$SEEDFS" mount --seed "$HOST:$SEED_PORT" --token-file "$WORK/a.tok" "$WORK/nomnt" 2>"$WORK/m.err" &&
	fail "a new mount with the old token"
grep -q "refused the token" "$WORK/m.err" || fail "old token: $(cat "$WORK/m.err")"
MNT3=$WORK/mnt3
MOUNT_LOG=mnt3
mount_seed "$MNT3" --token-file "$WORK/b.tok"
cmp "$MODEL/$F1" "$MNT3/m/$F1" || fail "new token"
grep -q "^seedfs seed: nothing changed: generation 1 is still served (SIGHUP)$" "$WORK/seed.out" ||
	fail "an unchanged republish made a generation: $(tail -n 2 "$WORK/seed.out")"
ok "SIGHUP rotated the token: the old one is refused to new mounts, mounts already up kept reading byte-exact (the same content kept generation 1)"
# A mount whose token file was updated too follows the next generation:
# refused once, it reads the file again.
echo '{"rotated": true}' >"$MODEL/config.json.tmp" && mv "$MODEL/config.json.tmp" "$MODEL/config.json"
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "published .*generation 2" "$WORK/seed.out" && break; sleep 0.05; done
for _ in $(seq 100); do grep -q "^model: m generation 2 " "$MNT2/.seedfs/status" && break; sleep 0.1; done
grep -q "^model: m generation 2 " "$MNT2/.seedfs/status" || fail "the mount with the new token file did not follow"
cmp "$MODEL/config.json" "$MNT2/m/config.json" || fail "generation 2's config.json"
grep -q "^model: m generation 1 " "$MNT/.seedfs/status" || fail "the old token followed?"
ok "a mount whose token file holds the new token follows generation 2; the one with the old token stays on generation 1"
unmount_check "$MNT3" "$MOUNT_PID"
unmount_check "$MNT2" "$M2_PID"
unmount_check "$MNT" "$M1_PID"
sanitizers_clean
