#!/usr/bin/env bash
# The registry against a three-member etcd cluster (one member killed:
# registration, watch and reads go on), against etcd with
# authentication (the right user file accepted, a wrong one refused in
# one line) and with TLS (certificates made here with openssl: the
# right CA accepted, another CA refused in one line).
source "$(dirname "$0")/lib.sh" "$1"
command -v etcd >/dev/null || fail "etcd is not installed (packaging/deps.sh installs etcd-server)"

M=$WORK/m
"$GENMODEL" "$M" --size 16M --shards 1
st() { cat "$MNT/.seedfs/status"; }

# --- three members, one killed ---
start_etcd_cluster 3 c
EPS=$ETCD_EPS
for _ in $(seq 200); do
	etcdctl_at "$EPS" endpoint health >/dev/null 2>&1 && break
	sleep 0.1
done
etcdctl_at "$EPS" endpoint health >/dev/null 2>&1 || fail "the cluster is not healthy"
REG=etcd://$EPS/c$$
SEED_LOG=seed start_seed "$M" --name m --registry "$REG" --registry-ttl 3
MNT=$WORK/mnt
MOUNT_REG=$REG mount_seed "$MNT"
diff -r "$M" "$MNT/m" >/dev/null || fail "m differs"
ok "three members: registered, mounted, byte-exact"

# Both use the first endpoint: kill that member.
kill -9 "${ETCD_PIDS[1]}"
EPS23="127.0.0.1:${ETCD_CPORTS[2]},127.0.0.1:${ETCD_CPORTS[3]}"
# A time that must pass (the thing under test): longer than the TTL
# (3 s), so the lease lives only if renewed through another member.
sleep 5
key="/c$$/models/m/seed/$HOST:$SEED_PORT"
[ -n "$(etcdctl_at "$EPS23" get "$key" --keys-only)" ] ||
	fail "the record lapsed with one member down: $(grep registry "$WORK/seed.err")"
printf '{"v": 2}\n' >"$M/extra.json"
kill -HUP "$SEED_PID"
for _ in $(seq 200); do
	grep -q "^model: m generation 2 " <(st) && break
	sleep 0.05
done
grep -q "^model: m generation 2 " <(st) || fail "no generation 2 with a member down: $(st | grep -E '^(model|registry)')"
st | grep -q "^registry: .*watching" || fail "not watching: $(st | grep ^registry)"
mapfile -t files < <(find "$MNT/m" -type f)
drop_cached "${files[@]}"
diff -r "$M" "$MNT/m" >/dev/null || fail "m differs with a member down"
ok "one member killed: the lease renewed, generation 2 by watch, reads byte-exact"
unmount_check "$MNT" "$MOUNT_PID"
kill "$SEED_PID"
wait "$SEED_PID" || true
kill -9 "${ETCD_PIDS[2]}" "${ETCD_PIDS[3]}"
wait "${ETCD_PIDS[2]}" "${ETCD_PIDS[3]}" 2>/dev/null || true

# --- authentication ---
start_etcd a1
EP=127.0.0.1:$ETCD_CPORT
etcdctl_at "$EP" user add root --new-user-password s3cret >/dev/null
etcdctl_at "$EP" auth enable >/dev/null
printf 'root:s3cret\n' >"$WORK/auth"
printf 'root:wrong\n' >"$WORK/bad-auth"
chmod 600 "$WORK/auth" "$WORK/bad-auth"
REG=etcd://$EP/a$$
SEED_LOG=seed-auth start_seed "$M" --name m --registry "$REG" --registry-auth-file "$WORK/auth"
ps -o args= -p "$SEED_PID" >"$WORK/seed.args" || fail "seed $SEED_PID is gone"
refute --why "the password is in argv" s3cret "$WORK/seed.args"
if "$SEEDFS" seed --model-dir "$M" --listen "$HOST:0" --registry "$REG" \
	--registry-auth-file "$WORK/bad-auth" >"$WORK/bad.out" 2>"$WORK/bad.err"; then
	fail "a seed with a wrong password started"
fi
grep -v '^[0-9-]*T' "$WORK/bad.err" >"$WORK/bad.lines" || true
[ "$(wc -l <"$WORK/bad.lines")" = 1 ] || fail "not one line: $(cat "$WORK/bad.err")"
grep -q "refused user root" "$WORK/bad.lines" || fail "the line: $(cat "$WORK/bad.lines")"
refute --why "the line shows a password" "wrong\|s3cret" "$WORK/bad.lines"
mkdir -p "$WORK/mnt-noauth"
if "$SEEDFS" mount --registry "$REG" "$WORK/mnt-noauth" 2>"$WORK/noauth.err"; then
	MOUNTS+=("$WORK/mnt-noauth")
	fail "a mount without credentials worked"
fi
grep -q "registry-auth-file" "$WORK/noauth.err" || fail "no credentials: $(cat "$WORK/noauth.err")"
MOUNT_REG=$REG mount_seed "$MNT" --registry-auth-file "$WORK/auth"
diff -r "$M" "$MNT/m" >/dev/null || fail "m differs (auth)"
ok "etcd with auth: right user file accepted; wrong: '$(cat "$WORK/bad.lines")'; none: '$(cat "$WORK/noauth.err")'"
unmount_check "$MNT" "$MOUNT_PID"
kill "$SEED_PID"
wait "$SEED_PID" || true
kill -9 "$ETCD_PID"
wait "$ETCD_PID" 2>/dev/null || true

# --- TLS ---
cd "$WORK"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
	-subj "/CN=seedfs test CA" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 2 \
	-subj "/CN=another CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout etcd.key -out etcd.csr \
	-subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
openssl x509 -req -in etcd.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
	-out etcd.crt -days 2 -extfile san.ext 2>/dev/null
cd - >/dev/null
ETCD_SCHEME=https ETCD_CURL_OPTS="--cacert $WORK/ca.crt" start_etcd t1 \
	--cert-file "$WORK/etcd.crt" --key-file "$WORK/etcd.key"
CP=$ETCD_CPORT
REG=etcds://127.0.0.1:$CP/s$$
SEED_LOG=seed-tls start_seed "$M" --name m --registry "$REG" --registry-ca "$WORK/ca.crt"
mkdir -p "$WORK/mnt-badca"
if "$SEEDFS" mount --registry "$REG" --registry-ca "$WORK/other.crt" "$WORK/mnt-badca" \
	2>"$WORK/badca.err"; then
	MOUNTS+=("$WORK/mnt-badca")
	fail "a mount trusting another CA worked"
fi
[ "$(wc -l <"$WORK/badca.err")" = 1 ] || fail "not one line: $(cat "$WORK/badca.err")"
grep -qi "certificate\|SSL" "$WORK/badca.err" || fail "the line: $(cat "$WORK/badca.err")"
if "$SEEDFS" mount --registry "etcd://127.0.0.1:$CP/s$$" "$WORK/mnt-badca" \
	2>"$WORK/plain.err"; then
	MOUNTS+=("$WORK/mnt-badca")
	fail "plain HTTP to a TLS etcd worked"
fi
MOUNT_REG=$REG mount_seed "$MNT" --registry-ca "$WORK/ca.crt"
diff -r "$M" "$MNT/m" >/dev/null || fail "m differs (TLS)"
ok "etcd over TLS: the right CA accepted; another: '$(cat "$WORK/badca.err")'"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
