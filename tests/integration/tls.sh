#!/usr/bin/env bash
# TLS on the control port (docs/security.md), with certificates made
# here by openssl: a good certificate works; a wrong CA, a wrong host
# name, an expired certificate and a pin that does not match are each
# refused in one line; a right pin alone is enough; the token and the
# manifest's keys never cross in clear (a tap on the connection), while
# without TLS they do; re-seeders speak TLS too, announcements included;
# a mount's --metrics-listen with --tls-cert/--tls-key speaks TLS only,
# and a tap sees no scrape token; TLS 1.2 and 1.3 only, AEAD suites only
# (openssl s_client and s_server).
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2 >/dev/null
F1=model-00001-of-00002.safetensors
umask 077
openssl rand -hex 32 >"$WORK/tok"
openssl rand -hex 32 >"$WORK/scrape"
umask 022
TOKEN=$(cat "$WORK/tok")
TAP=$(dirname "$0")/../tools/tcptap.py

# Two CAs, and certificates from the first: good (localhost and
# 127.0.0.1), for another name only, and expired.
cd "$WORK"
newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
for ca in ca other; do
	newkey $ca.key
	openssl req -x509 -new -key $ca.key -out $ca.pem -days 2 -subj "/CN=seedfs test $ca" 2>/dev/null ||
		fail "openssl: CA"
done
cert() { # NAME SAN DAYS
	newkey "$1.key"
	openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null
	printf 'subjectAltName=%s\n' "$2" >"$1.ext"
	openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
		-out "$1.pem" -days "$3" -extfile "$1.ext" 2>/dev/null || fail "openssl: $1"
}
cert good "DNS:localhost,IP:127.0.0.1" 1
cert elsewhere "DNS:seed.elsewhere.invalid" 1
cert expired "DNS:localhost,IP:127.0.0.1" -1
cd - >/dev/null
pin_hex=$(openssl x509 -in "$WORK/good.pem" -pubkey -noout |
	openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1)

SEED_LOG=good start_seed "$MODEL" --token-file "$WORK/tok" \
	--tls-cert "$WORK/good.pem" --tls-key "$WORK/good.key"
SP=$SEED_PORT
SPID=$SEED_PID
grep -q "ready on https://$HOST:$SP: .*; token required; tls pin sha256//" "$WORK/good.out" ||
	fail "ready line: $(cat "$WORK/good.out")"
PIN=$(sed -n 's/.*; tls pin \(sha256\/\/[^ ]*\)$/\1/p' "$WORK/good.out")
want=$(openssl x509 -in "$WORK/good.pem" -pubkey -noout |
	openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64)
[ "$PIN" = "sha256//$want" ] || fail "the printed pin $PIN is not openssl's sha256//$want"
ok "a TLS seed prints its pin, the same as openssl computes ($PIN)"

MNT=$WORK/mnt
mount_seed "$MNT" --tls-ca "$WORK/ca.pem" --token-file "$WORK/tok"
grep -qx "control_security: token $WORK/tok; tls, ca $WORK/ca.pem" "$MNT/.seedfs/status" ||
	fail "status: $(grep control_security "$MNT/.seedfs/status")"
for f in $(cd "$MODEL" && find . -type f | sort); do
	cmp "$MODEL/$f" "$MNT/m/$f" || fail "over TLS: $f"
done
unmount_check "$MNT" "$MOUNT_PID"
MOUNT_SEEDS="localhost:$SP" mount_seed "$MNT" --tls-ca "$WORK/ca.pem" --token-file "$WORK/tok"
cmp "$MODEL/$F1" "$MNT/m/$F1" || fail "by name"
unmount_check "$MNT" "$MOUNT_PID"
MOUNT_SEEDS="$HOST:$SP" mount_seed "$MNT" --tls-pin "$PIN" --token-file "$WORK/tok"
cmp "$MODEL/$F1" "$MNT/m/$F1" || fail "pinned"
unmount_check "$MNT" "$MOUNT_PID"
MOUNT_SEEDS="$HOST:$SP" mount_seed "$MNT" --tls-pin "$pin_hex" --tls-ca "$WORK/ca.pem" --token-file "$WORK/tok"
unmount_check "$MNT" "$MOUNT_PID"
ok "TLS with the CA (by address and by name), with the pin alone, with both: byte-exact"

# Refusals, one line each, nothing mounted.
SEED_LOG=elsewhere start_seed "$MODEL" --token-file "$WORK/tok" \
	--tls-cert "$WORK/elsewhere.pem" --tls-key "$WORK/elsewhere.key"
EP=$SEED_PORT
SEED_LOG=expired start_seed "$MODEL" --token-file "$WORK/tok" \
	--tls-cert "$WORK/expired.pem" --tls-key "$WORK/expired.key"
XP=$SEED_PORT
grep -q "W tls: --tls-cert $WORK/expired.pem expired .* ago: replicas will refuse it" "$WORK/expired.err" ||
	fail "the seed did not warn of its expired certificate"
refused() { # WHAT PATTERN MOUNT-ARGS...
	local what=$1 pat=$2
	shift 2
	mkdir -p "$WORK/nomnt"
	if "$SEEDFS" mount "$@" "$WORK/nomnt" 2>"$WORK/r.err"; then
		MOUNTS+=("$WORK/nomnt")
		fail "$what: mounted"
	fi
	bound refusal_lines = 1 "$(wc -l <"$WORK/r.err")" "$what: lines of the refusal: $(cat "$WORK/r.err")"
	grep -q -- "$pat" "$WORK/r.err" || fail "$what: $(cat "$WORK/r.err")"
	grep -q " $WORK/nomnt fuse" /proc/mounts && fail "$what: mounted"
	echo "  $what: $(cat "$WORK/r.err")"
}
T=(--token-file "$WORK/tok")
refused "another CA" "TLS: SSL certificate problem: unable to get local issuer certificate" \
	--seed "$HOST:$SP" --tls-ca "$WORK/other.pem" "${T[@]}"
refused "the system's CAs" "TLS: SSL certificate problem" --seed "https://$HOST:$SP" "${T[@]}"
refused "a wrong host name" "TLS: SSL: no alternative certificate subject name matches target host name '$HOST'" \
	--seed "$HOST:$EP" --tls-ca "$WORK/ca.pem" "${T[@]}"
refused "an expired certificate" "TLS: SSL certificate problem: certificate has expired" \
	--seed "$HOST:$XP" --tls-ca "$WORK/ca.pem" "${T[@]}"
refused "a pin that does not match" "TLS: SSL: public key does not match pinned public key" \
	--seed "$HOST:$EP" --tls-pin "$PIN" "${T[@]}"
refused "a malformed pin" "^seedfs mount: --tls-pin: " --seed "$HOST:$SP" --tls-pin sha256//nope "${T[@]}"
refused "plain HTTP to a TLS port" "(a TLS control port? give https:// or --tls-ca)" \
	--seed "$HOST:$SP" "${T[@]}"
refused "TLS options with http://" "the seeds are given as http://" \
	--seed "http://$HOST:$SP" --tls-ca "$WORK/ca.pem" "${T[@]}"
refused "--reseed over TLS without a certificate" "needs --tls-cert and --tls-key" \
	--seed "$HOST:$SP" --tls-ca "$WORK/ca.pem" "${T[@]}" --reseed
ok "another CA, the system's CAs, a wrong host name, an expired certificate, a wrong or malformed pin, plain HTTP to TLS: one line each, nothing mounted"

# Versions and suites (control/tls.h): TLS 1.2 and 1.3, forward-secret
# AEAD suites only.  The seed's port, asked by openssl s_client told to
# allow anything (SECLEVEL=0): TLS 1.0 and 1.1 refused, CBC suites
# refused in TLS 1.2 (SHA-1 and SHA-384 MACs); TLS 1.2 and 1.3 taken.
handshake() { # S_CLIENT-ARGS...: "PROTOCOL CIPHER" of the handshake, or "refused"
	timeout 10 openssl s_client -connect "$HOST:$SP" -servername localhost \
		-CAfile "$WORK/ca.pem" "$@" </dev/null >"$WORK/sc.out" 2>&1 || {
		echo refused
		return 0
	}
	sed -n 's/^New, \([^,]*\), Cipher is \(.*\)$/\1 \2/p' "$WORK/sc.out" | head -n 1
}
taken=0
for v in -tls1 -tls1_1; do
	got=$(handshake $v -cipher 'DEFAULT:@SECLEVEL=0')
	[ "$got" = refused ] || { echo "  the seed took $v: $got"; taken=$((taken + 1)); }
done
for c in ECDHE-ECDSA-AES128-SHA ECDHE-ECDSA-AES256-SHA384; do
	got=$(handshake -tls1_2 -cipher "$c:@SECLEVEL=0")
	[ "$got" = refused ] || { echo "  the seed took $c in TLS 1.2: $got"; taken=$((taken + 1)); }
done
bound weak_handshakes_taken = 0 "$taken" "TLS 1.0, 1.1 and CBC suites the seed took (above)"
got12=$(handshake -tls1_2)
[ "$got12" = "TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384" ] || fail "TLS 1.2: $got12: $(tail -n 5 "$WORK/sc.out")"
got13=$(handshake -tls1_3)
[ "$got13" = "TLSv1.3 TLS_AES_256_GCM_SHA384" ] || fail "TLS 1.3: $got13: $(tail -n 5 "$WORK/sc.out")"
ok "the seed's port: TLS 1.0 and 1.1 refused, CBC suites refused; $got12 and $got13 taken"
# The client: a server (openssl s_server) that offers only TLS 1.1, or
# only a CBC suite in TLS 1.2, is refused in one line.  (Debian's OpenSSL
# configuration refuses TLS 1.1 by itself as well; the CBC suite only
# seedfs's cipher list refuses.)
s_server() { # S_SERVER-ARGS...: sets SS_PORT
	SS_PORT=$(free_port)
	openssl s_server -accept "127.0.0.1:$SS_PORT" -cert "$WORK/good.pem" -key "$WORK/good.key" \
		-www "$@" </dev/null >"$WORK/ss.out" 2>&1 &
	PIDS+=($!)
	SS_PID=$!
	for _ in $(seq 100); do grep -q ACCEPT "$WORK/ss.out" && return 0; sleep 0.05; done
	fail "s_server did not start: $(cat "$WORK/ss.out")"
}
s_server -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0'
refused "a TLS 1.1 server" "TLS: " --seed "$HOST:$SS_PORT" --tls-ca "$WORK/ca.pem" "${T[@]}"
kill "$SS_PID"
s_server -tls1_2 -cipher 'ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0'
refused "a server of a CBC suite" "TLS: .*\(handshake failure\|no shared cipher\|no cipher\)" \
	--seed "$HOST:$SS_PORT" --tls-ca "$WORK/ca.pem" "${T[@]}"
kill "$SS_PID"
ok "the client: a TLS 1.1 server and a CBC-only TLS 1.2 server refused in one line"

# What crosses the network: a tap on the control connection.
tap() { # CAPTURE TARGET: sets TAP_PORT
	python3 "$TAP" "$2" "$1" >"$1.port" &
	PIDS+=($!)
	for _ in $(seq 100); do grep -q port "$1.port" && break; sleep 0.05; done
	TAP_PORT=$(awk '{print $2}' "$1.port")
}
tap "$WORK/tls.cap" "$HOST:$SP"
MOUNT_SEEDS="localhost:$TAP_PORT" mount_seed "$MNT" --tls-ca "$WORK/ca.pem" "${T[@]}"
cmp "$MODEL/$F1" "$MNT/m/$F1" || fail "through the tap"
unmount_check "$MNT" "$MOUNT_PID"
[ -s "$WORK/tls.cap" ] || fail "the tap saw nothing"
for s in "$TOKEN" Bearer '"key"' manifest; do
	refute --why "'$s' crossed in clear over TLS" -aF "$s" "$WORK/tls.cap"
done
SEED_LOG=plain start_seed "$MODEL" --token-file "$WORK/tok"
tap "$WORK/plain.cap" "$HOST:$SEED_PORT"
MOUNT_SEEDS="$HOST:$TAP_PORT" mount_seed "$MNT" "${T[@]}"
unmount_check "$MNT" "$MOUNT_PID"
grep -qaF "Bearer $TOKEN" "$WORK/plain.cap" || fail "the tap did not see the plain token (a tap that sees nothing proves nothing)"
# (The manifest itself comes gzipped: its request is what shows.)
grep -qaF 'GET /v1/manifest?model=m' "$WORK/plain.cap" || fail "the tap did not see the plain manifest's request"
ok "over TLS neither the token nor the manifest's keys cross in clear ($(stat -c %s "$WORK/tls.cap") bytes tapped); without TLS both do"

# seedfs.safe_open on a mounted file (the drop-in) carries the mount's
# TLS over: a mount with the pin alone, through a tap; the drop-in's
# reads are byte-exact and nothing of the token crosses in clear.
SRC=$(cd "$(dirname "$0")/../.." && pwd)
tap "$WORK/dropin.cap" "$HOST:$SP"
MOUNT_SEEDS="localhost:$TAP_PORT" mount_seed "$MNT" --tls-pin "$PIN" "${T[@]}"
PYTHONPATH=$SRC/python SEEDFS_LIB=$BUILD/libseedfs.so $(python_for_build) - \
	"$MNT/m/$F1" "$MODEL/$F1" >"$WORK/dropin.out" 2>&1 <<'PY' || fail "drop-in over TLS: $(tail -n 3 "$WORK/dropin.out")"
import json, struct, sys
import seedfs
with open(sys.argv[2], "rb") as f:
    data = f.read()
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n])
with seedfs.safe_open(sys.argv[1], framework="numpy") as f:
    for k in f.keys():
        a, b = h[k]["data_offsets"]
        if f.get_tensor(k).tobytes() != data[8 + n + a:8 + n + b]:
            sys.exit("%s differs" % k)
    print(len(f.keys()), f.client.bytes_pulled)
PY
unmount_check "$MNT" "$MOUNT_PID"
read -r nt np <"$WORK/dropin.out"
[ "${np:-0}" -gt 0 ] || fail "the drop-in pulled nothing: $(cat "$WORK/dropin.out")"
for s in "$TOKEN" Bearer; do
	refute --why "'$s' crossed in clear from the drop-in" -aF "$s" "$WORK/dropin.cap"
done
ok "seedfs.safe_open on a file of a --tls-pin mount: $nt tensors byte-exact, $np bytes pulled over TLS, no token in clear"

# Re-seeders over TLS: R1 serves on its own TLS port (the token asked
# for there too) and announces itself; R2, told only the seed, finds R1
# and reads everything from it once the seed is gone.
R1=$WORK/r1
MOUNT_LOG=r1 # R1 and R2 run at once: a log each
MOUNT_SEEDS="$HOST:$SP" mount_seed "$R1" --tls-ca "$WORK/ca.pem" "${T[@]}" \
	--reseed --listen "$HOST:0" --tls-cert "$WORK/good.pem" --tls-key "$WORK/good.key" --cache-size 64M \
	--metrics-listen 0.0.0.0:0 --metrics-token-file "$WORK/scrape"
refute --empty-ok --why "warned with TLS" warning "$WORK/r1.err"
R1PID=$MOUNT_PID
"$SEEDFS" prefetch "$R1/m" >/dev/null 2>"$WORK/pf.err" || fail "prefetch: $(cat "$WORK/pf.err")"
R1ADDR=$(awk '$1 == "reseed:" { print $2 }' "$R1/.seedfs/status")
[ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" "https://$R1ADDR/v1/models")" = 401 ] ||
	fail "the re-seeder's TLS port without a token"
[ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.pem" -H "Authorization: Bearer $TOKEN" \
	"https://$R1ADDR/v1/models")" = 200 ] || fail "the re-seeder's TLS port with the token"
# Its metrics port: TLS only, the scrape token reads /metrics and
# nothing else (nor the re-seeder's routes), a tap sees no token.
SCRAPE=$(cat "$WORK/scrape")
SA=(-H "Authorization: Bearer $SCRAPE")
MPORT=$(sed -n 's|^metrics: https://0.0.0.0:\([0-9]*\)/metrics$|\1|p' "$R1/.seedfs/status")
[ -n "$MPORT" ] || fail "status: $(grep '^metrics' "$R1/.seedfs/status")"
scode() { curl -s -o "$WORK/body" -w '%{http_code}' --cacert "$WORK/ca.pem" "$@"; }
[ "$(scode "${SA[@]}" "https://localhost:$MPORT/metrics")" = 200 ] && grep -q '^seedfs_model_generation{model="m"} 1$' "$WORK/body" ||
	fail "metrics over TLS with the scrape token: $(head -c 300 "$WORK/body")"
[ "$(scode -H "Authorization: Bearer $TOKEN" "https://localhost:$MPORT/metrics")" = 200 ] || fail "metrics with the fleet token"
[ "$(scode "https://localhost:$MPORT/metrics")" = 401 ] || fail "metrics over TLS without a token"
if curl -s -m 5 -o "$WORK/body" "${SA[@]}" "http://127.0.0.1:$MPORT/metrics"; then
	fail "the metrics port answered plain HTTP: $(head -c 200 "$WORK/body")"
fi
for r in /v1/models /v1/manifest /v1/holdings; do
	[ "$(scode "${SA[@]}" "https://$R1ADDR$r?model=m")" = 401 ] || fail "the scrape token opened the re-seeder's $r"
done
[ "$(scode "${SA[@]}" -X POST --data x "https://$R1ADDR/v1/connect")" = 401 ] || fail "the scrape token opened POST /v1/connect"
tap "$WORK/metrics.cap" "127.0.0.1:$MPORT"
[ "$(scode "${SA[@]}" "https://localhost:$TAP_PORT/metrics")" = 200 ] || fail "metrics through the tap"
[ -s "$WORK/metrics.cap" ] || fail "the metrics tap saw nothing"
for s in "$SCRAPE" Bearer seedfs_ metrics; do
	refute --why "'$s' crossed in clear from the metrics port" -aF "$s" "$WORK/metrics.cap"
done
ok "--metrics-listen with --tls-cert/--tls-key: TLS only (plain HTTP fails), no warning; the scrape token reads /metrics and gets 401 on the re-seeder's routes; a tap sees neither the token nor the metrics"
R2=$WORK/r2
MOUNT_LOG=r2
MOUNT_SEEDS="$HOST:$SP" mount_seed "$R2" --tls-ca "$WORK/ca.pem" "${T[@]}" --cache-size 64M
R2PID=$MOUNT_PID
for _ in $(seq 100); do
	grep -q "^reseeder: $R1ADDR (reachable)$" "$R2/.seedfs/status" && break
	sleep 0.1
done
grep -q "^reseeder: $R1ADDR (reachable)$" "$R2/.seedfs/status" ||
	fail "replica 2 does not use replica 1: $(grep -E '^(seed|reseeder):' "$R2/.seedfs/status")"
kill -9 "$SPID"
for f in $(cd "$MODEL" && find . -type f | sort); do
	cmp "$MODEL/$f" "$R2/m/$f" || fail "replica 2, from replica 1 over TLS: $f"
done
unmount_check "$R2" "$R2PID"
unmount_check "$R1" "$R1PID"
ok "a re-seeder over TLS: 401 without the token, announced to the seed, and replica 2 read everything from it byte-exact"
sanitizers_clean
