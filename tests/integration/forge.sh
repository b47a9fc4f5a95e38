#!/usr/bin/env bash
# Bytes a peer cannot forge (docs/security.md): a hostile re-seeder
# (--test-corrupt-slab: every chunk it serves is wrong) next to an honest
# seed.  A replica that finds it through the seed reads byte-exact:
# files without checksums (--checksum-chunk 0) never come from a
# re-seeder, checksummed ones are checked (and the re-seeder's are
# refused), --no-verify reads from seeds alone and is refused with
# --reseed; SHA-256 (the default) refuses the re-seeders' chunks, with
# --digest xxh3 they are not read from.  Verified mode: --sign-key,
# mounts with --trust-key; unsigned, wrongly signed and altered
# manifests are refused in one line, and so is a signed one without
# SHA-256; what the signature leaves out (addresses) may differ.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 12M --shards 2 >/dev/null
FILES=$(cd "$MODEL" && find . -type f | sed "s|^\./||")
F1=model-00001-of-00002.safetensors
# Signing keys (verified mode, below; the unsigned seed of the SHA-256
# part is refused with them too).
openssl genpkey -algorithm ed25519 -out "$WORK/sign.key" 2>/dev/null
chmod 600 "$WORK/sign.key"
openssl pkey -in "$WORK/sign.key" -pubout -out "$WORK/sign.pub"
openssl genpkey -algorithm ed25519 -out "$WORK/other.key" 2>/dev/null
openssl pkey -in "$WORK/other.key" -pubout -out "$WORK/other.pub"
cat "$WORK/other.pub" "$WORK/sign.pub" >"$WORK/both.pub"

# refused MNT-ARGS... EXPECTED: the mount fails with exactly that line
refused() {
	local want=${*: -1} mnt=$WORK/r
	mkdir -p "$mnt"
	if "$SEEDFS" mount "${@:1:$#-1}" "$mnt" --log-file "$WORK/r.log" \
		2>"$WORK/r.err"; then
		MOUNTS+=("$mnt")
		fail "mounted: ${*:1:$#-1}"
	fi
	bound refusal_lines = 1 "$(wc -l <"$WORK/r.err")" "a refused mount's lines: $(cat "$WORK/r.err")"
	grep -qF -- "$want" "$WORK/r.err" || fail "expected '$want', got: $(cat "$WORK/r.err")"
}

# hostile SEEDARGS...: a seed, a hostile re-seeder that holds all of
# it (read through), and a replica that finds it through the seed.
# Sets H (its mount), H_PID and V (the replica's mount point).
N=0
hostile() {
	N=$((N + 1))
	SEED_LOG=seed$N
	start_seed "$MODEL" "$@"
	H=$WORK/h$N
	MOUNT_LOG=h$N
	mount_seed "$H" --reseed --test-corrupt-slab ${TRUST:+--trust-key "$TRUST"}
	H_PID=$MOUNT_PID
	for f in $FILES; do cmp -s "$MODEL/$f" "$H/m/$f" || fail "the re-seeder's own $f differs"; done
	for _ in $(seq 100); do
		grep -q "re-seeder .* announced itself" "$WORK/seed$N.err" && break
		sleep 0.05
	done
	grep -q "re-seeder .* announced itself" "$WORK/seed$N.err" ||
		fail "the hostile re-seeder did not announce itself to seed $N in 5 s"
	V=$WORK/v$N
	MOUNT_LOG=v$N
}

# readall MNT: every file byte-exact
readall() {
	local f
	for f in $FILES; do
		cmp "$MODEL/$f" "$1/m/$f" || fail "$f read through $1 differs"
	done
}

# holders MNT: how many re-seeders MNT has taken holdings of m from (in
# its status, a re-seeder's block with "seed_holdings: m N answers", N > 0)
holders() {
	awk '/^(seed|reseeder): / { r = $1 == "reseeder:" }
		r && $1 == "seed_holdings:" && $2 == "m" && $3 > 0 { n++ }
		END { print n + 0 }' "$1/.seedfs/status"
}
# holdings MNT N: wait until MNT has taken holdings from N re-seeders
# (asked every 250 ms; before the first answer one is not read from)
holdings() {
	local t0
	t0=$(now_ms)
	for _ in $(seq 200); do
		[ "$(holders "$1")" -ge "$2" ] && echo "holdings from $2 re-seeder(s) after $(($(now_ms) - t0)) ms" &&
			return 0
		sleep 0.05
	done
	fail "$1 has holdings from $(holders "$1") re-seeder(s) after 10 s, $2 wanted: $(grep -E '^(seed|reseeder|seed_holdings)' "$1/.seedfs/status")"
}
# logged FILE TEXT: wait until FILE has a line with TEXT (grep pattern)
logged() {
	local t0
	t0=$(now_ms)
	for _ in $(seq 200); do
		grep -q -- "$2" "$1" && echo "logged after $(($(now_ms) - t0)) ms: $2" && return 0
		sleep 0.05
	done
	fail "not in $1 after 10 s: $2"
}

# --- No checksums: files come from seeds alone. -------------------------
hostile --checksum-chunk 0
mount_seed "$V"
holdings "$V" 1
readall "$V"
grep -q "source: re-seeder .* is a source from now on" "$WORK/v$N.log" ||
	fail "the replica did not find the re-seeder"
ok "no checksums: byte-exact beside a re-seeder serving wrong bytes (it is not read from)"
unmount_check "$V" "$MOUNT_PID"

# --no-verify: never a re-seeder, and not one itself; nor held back by
# the lane of a re-seeder it refused (it was: about a second a chunk).
mount_seed "$V" --no-verify
logged "$WORK/v$N.log" "not reading m from .*: a re-seeder, and this mount does not check what it pulls (--no-verify)"
t0=$(now_ms)
for f in $FILES; do cmp "$MODEL/$f" "$V/m/$f" || fail "--no-verify: $f differs"; done
[ $(($(now_ms) - t0)) -lt 5000 ] || fail "--no-verify: 12 MiB took $(($(now_ms) - t0)) ms"
unmount_check "$V" "$MOUNT_PID"
mkdir -p "$WORK/nv"
if "$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$WORK/nv" --no-verify --reseed --log-file "$WORK/nv.log" \
	2>"$WORK/nv.err"; then
	MOUNTS+=("$WORK/nv")
	fail "--no-verify --reseed mounted"
fi
bound refusal_lines = 1 "$(wc -l <"$WORK/nv.err")" "--no-verify --reseed: $(cat "$WORK/nv.err")"
grep -qx "seedfs mount: --no-verify cannot go with --reseed: a re-seeder's bytes are always checked" \
		"$WORK/nv.err" || fail "--no-verify --reseed: $(cat "$WORK/nv.err")"
ok "--no-verify: byte-exact from the seed alone (the re-seeder refused); with --reseed refused in one line"
unmount_check "$H" "$H_PID"
kill "$SEED_PID"

# --- A liar: announced as a re-seeder, answers like a seed. -------------
# Seed B publishes other bytes at the same places; the liar serves seed
# A's manifest (content digest and all) with B's endpoint and keys, and
# no "holdings".  It was taken for a seed: files without checksums, and
# --no-verify mounts, read B's bytes.
cp -r "$MODEL" "$WORK/b"
python3 - "$WORK/b/$F1" <<'PY'
import sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
d[1 << 20:5 << 20] = b"\x41" * (4 << 20)
open(p, "wb").write(d)
PY
SEED_LOG=seedA
start_seed "$MODEL" --checksum-chunk 0
SEED_A=$HOST:$SEED_PORT
SEED_A_PID=$SEED_PID
SEED_LOG=seedB
start_seed "$WORK/b" --name m --checksum-chunk 0
python3 "$(dirname "$0")/../tools/liar.py" "$SEED_A" "$HOST:$SEED_PORT" >"$WORK/liar.out" \
	2>"$WORK/liar.err" &
PIDS+=($!)
for _ in $(seq 100); do
	grep -q "re-seeder .* announced itself" "$WORK/seedA.err" && break
	sleep 0.05
done
grep -q "re-seeder .* announced itself" "$WORK/seedA.err" || fail "the liar did not announce itself"
for opt in "" --no-verify; do
	MOUNT_LOG=liar
	MOUNT_SEEDS=$SEED_A mount_seed "$WORK/l" $opt
	logged "$WORK/liar.log" "not reading m from .*: found as a re-seeder, but its manifest does not say holdings"
	readall "$WORK/l"
	unmount_check "$WORK/l" "$MOUNT_PID"
done
ok "a re-seeder that answers like a seed (no holdings, a seed's manifest, other bytes): refused, byte-exact without checksums and with --no-verify"
# A liar whose manifests are thin whatever was asked (no checksums, what
# a re-seeder sends a replica that holds that content already), given
# alone: a content nothing can check is never taken, B's bytes never
# read.
python3 "$(dirname "$0")/../tools/liar.py" "$SEED_A" "$HOST:$SEED_PORT" --thin \
	>"$WORK/thin.out" 2>"$WORK/thin.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q port "$WORK/thin.out" && break; sleep 0.05; done
TP=$(sed -n 's/port //p' "$WORK/thin.out")
[ -n "$TP" ] || fail "liar.py --thin did not start: $(cat "$WORK/thin.err")"
mkdir -p "$WORK/t"
if "$SEEDFS" mount --seed "$HOST:$TP" "$WORK/t" --log-file "$WORK/thin.log" 2>"$WORK/t.err"; then
	MOUNTS+=("$WORK/t")
	fail "a thin manifest's content was taken: $(ls "$WORK/t/m" 2>&1 | head -n 3)"
fi
bound refusal_lines = 1 "$(wc -l <"$WORK/t.err")" "thin: $(cat "$WORK/t.err")"
grep -qE "^seedfs mount: m from $HOST:$TP: a thin manifest of content [0-9a-f]{16}, which this mount no longer has: asked whole next$" \
		"$WORK/t.err" || fail "thin: $(cat "$WORK/t.err")"
ok "a thin manifest of a content the mount does not hold (checksums left out): refused in one line, nothing mounted"
kill "$SEED_A_PID" "$SEED_PID"

# --- The default, a SHA-256 of every chunk: the re-seeders' chunks are
# refused; two of them cannot take turns until a read fails. -----------
hostile
MOUNT_LOG=h${N}b
mount_seed "$WORK/h${N}b" --reseed --test-corrupt-slab
H2_PID=$MOUNT_PID
for f in $FILES; do cmp -s "$MODEL/$f" "$WORK/h${N}b/m/$f" || fail "the second re-seeder's $f differs"; done
MOUNT_LOG=v$N
mount_seed "$V"
holdings "$V" 2
readall "$V"
grep -q "SHA-256 mismatch: .* from re-seeder 127.0.0.1:" "$WORK/v$N.log" ||
	fail "the re-seeders' wrong bytes were never pulled (nothing shows the check)"
ok "SHA-256 (the default): two re-seeders serving wrong bytes refused, byte-exact from the seed"
unmount_check "$V" "$MOUNT_PID"
unmount_check "$WORK/h${N}b" "$H2_PID"
unmount_check "$H" "$H_PID"
# This seed signs nothing: a mount that asks for signatures is refused.
refused --seed "$HOST:$SEED_PORT" --trust-key "$WORK/sign.pub" \
	"manifest not signed, and --trust-key $WORK/sign.pub asks for a signature"
kill "$SEED_PID"

# --- --digest xxh3, the fast-only mode: XXH3 has a closed-form second
# preimage, so no re-seeder is read from at all (the seed serves it). --
hostile --digest xxh3
mount_seed "$V"
holdings "$V" 1
readall "$V"
reb=$(awk '$1 == "reseeder:" { r = 1; next } /^(seed|reseeder): / { r = 0 }
	r && $1 == "seed_bytes:" { print $2 }' "$V/.seedfs/status")
[ "${reb:-x}" = 0 ] || fail "--digest xxh3: $reb bytes read from the re-seeder"
grep -q "mismatch: .* from re-seeder" "$WORK/v$N.log" &&
	fail "--digest xxh3: a pull from the re-seeder was checked"
ok "--digest xxh3: byte-exact, nothing read from the re-seeder (its files have no SHA-256)"
unmount_check "$V" "$MOUNT_PID"
unmount_check "$H" "$H_PID"
kill "$SEED_PID"

# --- Verified: signed manifests, SHA-256 of every chunk. ----------------
TRUST=$WORK/sign.pub hostile --digest sha256 --sign-key "$WORK/sign.key"
SIGNED=$HOST:$SEED_PORT
SIGNED_PID=$SEED_PID
mount_seed "$V" --trust-key "$WORK/both.pub"
holdings "$V" 1
readall "$V"
bound reseeder_chunks_refused ">=" 1 "$(grep -c "mismatch: .* from re-seeder 127.0.0.1:" "$WORK/v$N.log")" \
	"verified: the re-seeder's wrong bytes pulled and refused"
grep -qx "manifest_trust: signed by a key in $WORK/both.pub, every chunk checked with its SHA-256" \
	"$V/.seedfs/status" ||
	fail "status does not say manifests are checked"
ok "verified: signed manifest, SHA-256 checked, the hostile re-seeder refused, byte-exact (a key file of two keys)"
unmount_check "$V" "$MOUNT_PID"

refused --seed "$SIGNED" --trust-key "$WORK/other.pub" \
	"which --trust-key $WORK/other.pub does not hold"
# The engine API: $SEEDFS_TRUST_KEY_FILE.
SEEDFS_TRUST_KEY_FILE=$WORK/sign.pub "$BUILD/tests/apiread" "$SIGNED" m "$MODEL" files \
	>"$WORK/api.out" 2>&1 || fail "engine API with the trusted key: $(cat "$WORK/api.out")"
if SEEDFS_TRUST_KEY_FILE=$WORK/other.pub "$BUILD/tests/apiread" "$SIGNED" m "$MODEL" files \
	>"$WORK/api.out" 2>&1; then
	fail "engine API took a manifest signed by a key it does not trust"
fi
grep -q "which --trust-key $WORK/other.pub does not hold" "$WORK/api.out" ||
	fail "engine API: $(cat "$WORK/api.out")"
unmount_check "$H" "$H_PID"
SEED_LOG=nosha
start_seed "$MODEL" --digest xxh3 --sign-key "$WORK/sign.key"
refused --seed "$HOST:$SEED_PORT" --trust-key "$WORK/sign.pub" \
	"no SHA-256 digests, and --trust-key checks every chunk with one"
kill "$SEED_PID"

# A signed manifest altered on the way: one bit of what is signed (a
# file's mode), and then only what is not signed (an address).  Served
# by the verified part's seed (--digest sha256 --sign-key).
curl -fsS "http://$SIGNED/v1/manifest" >"$WORK/signed.json"
curl -fsS "http://$SIGNED/v1/models" >"$WORK/models.json"
python3 - "$WORK/signed.json" "$WORK/mode.json" "$WORK/addr.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
f = [x for x in m["files"] if x["path"] == "config.json"][0]
f["mode"] ^= 0o001
json.dump(m, open(sys.argv[2], "w"))
f["mode"] ^= 0o001
m["grace_seconds"] += 1
json.dump(m, open(sys.argv[3], "w"))
PY
serve_json() { # FILE: httpfile serving it as the manifest; sets HTTP_PORT
	rm -f "$WORK/http.out" # the last server's port must not be read
	"$HTTPFILE" "$1" 200 "$WORK/models.json" >"$WORK/http.out" &
	PIDS+=($!)
	HTTP_PID=$!
	for _ in $(seq 100); do grep -qE '^port [0-9]+$' "$WORK/http.out" 2>/dev/null && break; sleep 0.05; done
	HTTP_PORT=$(sed -n 's/port //p' "$WORK/http.out")
	[ -n "$HTTP_PORT" ] || fail "httpfile did not say its port in 5 s: $(cat "$WORK/http.out")"
}
serve_json "$WORK/mode.json"
refused --seed "127.0.0.1:$HTTP_PORT" --trust-key "$WORK/sign.pub" \
	"manifest signature (key "
kill "$HTTP_PID"
serve_json "$WORK/addr.json"
MOUNT_LOG=addr
MOUNT_SEEDS=127.0.0.1:$HTTP_PORT mount_seed "$WORK/a" --trust-key "$WORK/sign.pub"
cmp "$MODEL/$F1" "$WORK/a/m/$F1" || fail "$F1 differs"
ok "refused in one line: another key, no signature, no SHA-256, a signed field changed; a field outside the signature changed reads byte-exact"
unmount_check "$WORK/a" "$MOUNT_PID"
kill "$HTTP_PID" "$SIGNED_PID"

# Played back: an older generation's signed manifest, served again by
# whoever sits on a control channel without TLS, is not taken.
cp -r "$MODEL" "$WORK/g"
SEED_LOG=gens
start_seed "$WORK/g" --name m --digest sha256 --sign-key "$WORK/sign.key" --grace 60
G=$HOST:$SEED_PORT
curl -fsS "http://$G/v1/manifest" >"$WORK/g1.json"
curl -fsS "http://$G/v1/models" >"$WORK/g1.models"
echo '{"changed": true}' >"$WORK/g/config.json"
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "generation 2 published" "$WORK/gens.err" && break; sleep 0.05; done
curl -fsS "http://$G/v1/manifest" >"$WORK/g2.json"
curl -fsS "http://$G/v1/models" >"$WORK/g2.models"
grep -q '"generation": 2' "$WORK/g2.json" || fail "no generation 2"
cp "$WORK/g2.json" "$WORK/served.json"
cp "$WORK/g2.models" "$WORK/models.json"
serve_json "$WORK/served.json"
MOUNT_LOG=replay
MOUNT_SEEDS=127.0.0.1:$HTTP_PORT mount_seed "$WORK/p" --trust-key "$WORK/sign.pub"
cmp "$WORK/g/config.json" "$WORK/p/m/config.json" || fail "generation 2 not shown"
cp "$WORK/g1.json" "$WORK/served.json"
cp "$WORK/g1.models" "$WORK/models.json"
for _ in $(seq 60); do grep -q "an older generation played back" "$WORK/replay.log" && break; sleep 0.1; done
grep -q "an older generation played back" "$WORK/replay.log" ||
	fail "the played-back generation 1 was not refused: $(tail -n 3 "$WORK/replay.log")"
cmp "$WORK/g/config.json" "$WORK/p/m/config.json" || fail "the mount went back to generation 1"
ok "an older signed generation played back is refused; the mount stays on the newer one"
unmount_check "$WORK/p" "$MOUNT_PID"
kill "$HTTP_PID" "$SEED_PID"
sanitizers_clean
