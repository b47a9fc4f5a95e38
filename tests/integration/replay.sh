#!/usr/bin/env bash
# Signed manifests cannot be played back, and trust anchors cannot be
# swapped (docs/security.md, "Signed generations remembered").  A seed
# signs with --sign-key; replicas check with --trust-key.
#  - Anchors: a --trust-key or --tls-ca file others may write, or
#    another user's, is refused in one line by mount, pull and the
#    engine API; root's 0644 is taken.
#  - Replay: tests/tools/replay.py serves generation 1's signed manifest
#    with another seed's endpoints and keys (unsigned: the attacker's
#    choice), whose memory holds generation 1's bytes.  A replica that
#    never took anything newer reads them (the window a signature's
#    validity leaves); one whose state (SEEDFS_STATE_DIR, --cache-dir)
#    says it took generation 2 refuses in one line (mount, pull, engine
#    API), and so after a restart of the seed (a new run counting from
#    1) it refuses the old run's generation.
#  - Lapsed: a manifest signed 2 h ago, valid 1 h, is refused by a
#    fresh mount in one line saying how long ago it expired.
#  - Signed again: a seed with --sign-validity 10s (the least it takes)
#    signs every 5 s; a running re-seeding mount takes two new
#    signatures within 2.6 such intervals while a reader reads every
#    file byte-exact without an error, and passes the new one on.  (It
#    starts first and is checked last: the other parts run meanwhile.)
source "$(dirname "$0")/lib.sh" "$1"
REPLAY=$(dirname "$0")/../tools/replay.py

MODEL=$WORK/a
"$GENMODEL" "$MODEL" --size 6M --shards 2 >/dev/null
FILES=$(cd "$MODEL" && find . -type f | sed "s|^\./||")
cp -r "$MODEL" "$WORK/old" # generation 1's bytes, for the attacker's seed
openssl genpkey -algorithm ed25519 -out "$WORK/sign.key" 2>/dev/null
chmod 600 "$WORK/sign.key"
PUB=$WORK/sign.pub
openssl pkey -in "$WORK/sign.key" -pubout -out "$PUB"
chmod 644 "$PUB"
SIGN=(--digest sha256 --sign-key "$WORK/sign.key")

# refused WHO CMD... EXPECTED: CMD fails, its stderr exactly the line
# EXPECTED (a regex when it starts with ~)
refused() {
	local want=${*: -1} out=$WORK/refused.err
	if "${@:1:$#-1}" 2>"$out" >/dev/null; then
		fail "taken: ${*:1:$#-1}"
	fi
	[ "$(wc -l <"$out")" = 1 ] || fail "not one line: $(cat "$out")"
	if [ "${want:0:1}" = "~" ]; then
		grep -qE -- "^${want:1}\$" "$out" || fail "expected /${want:1}/, got: $(cat "$out")"
	else
		grep -qxF -- "$want" "$out" || fail "expected '$want', got: $(cat "$out")"
	fi
}
# mount_refused ARGS... EXPECTED: a mount on $WORK/r fails so
mount_refused() {
	mkdir -p "$WORK/r"
	MOUNTS+=("$WORK/r")
	refused "$SEEDFS" mount "${@:1:$#-1}" "$WORK/r" --log-file "$WORK/r.log" "${@: -1}"
}
# api_refused SEED TEXT: the engine API fails, saying TEXT
api_refused() {
	if SEEDFS_TRUST_KEY_FILE=${API_KEY:-$PUB} "$BUILD/tests/apiread" "$1" m "$MODEL" files \
		>"$WORK/api.out" 2>&1; then
		fail "the engine API took it: $(cat "$WORK/api.out")"
	fi
	grep -qF -- "$2" "$WORK/api.out" || fail "engine API: $(cat "$WORK/api.out")"
}

# --- Signed again while served: started here, checked at the end (the
# parts between run while the seed signs again). ---------------------------
refused "$SEEDFS" seed --model-dir "$MODEL" --sign-key "$WORK/sign.key" --sign-validity 5s \
	"seedfs seed: invalid value '5s' for --sign-validity (10s to 366d)"
# The least validity a seed takes: signed again at half of it, every
# EVERY_S.  Two new signatures, seen signed and taken, are wanted within
# 2.6 such intervals of the reader's start.  Its own copies of the model
# (the play-back below changes $MODEL) and of the public key (the anchor
# checks below change its mode).
VALID_S=10
EVERY_S=$((VALID_S / 2))
cp -r "$MODEL" "$WORK/d"
install -m 644 "$PUB" "$WORK/d.pub"
SEED_LOG=d
start_seed "$WORK/d" --name m "${SIGN[@]}" --sign-validity ${VALID_S}s
D=$HOST:$SEED_PORT
D_PID=$SEED_PID
MOUNT_LOG=rs
SEEDFS_STATE_DIR=$WORK/s3 MOUNT_SEEDS=$D mount_seed "$WORK/rs" --trust-key "$WORK/d.pub" --reseed -o direct_io
RS_PID=$MOUNT_PID
until0=$(awk '$1 == "signature:" { print $NF }' "$WORK/rs/.seedfs/status")
[ -n "$until0" ] || fail "no signature line in status"
resigned() { grep -c "m: generation 1 signed again, valid until" "$WORK/d.err" || true; }
took() { grep -c "m: generation 1 signed again (from $D), valid" "$WORK/rs.log" || true; }
t0=$(now_ms)
t_end=$((t0 + EVERY_S * 2600))
# A watcher writes the ms from t0 at which both were signed and taken.
(
	while [ "$(now_ms)" -lt "$t_end" ]; do
		if [ "$(resigned)" -ge 2 ] && [ "$(took)" -ge 2 ]; then
			echo $(($(now_ms) - t0)) >"$WORK/resigned.tmp"
			mv "$WORK/resigned.tmp" "$WORK/resigned.ms"
			exit 0
		fi
		sleep 0.1
	done
) &
WATCHER=$!
PIDS+=("$WATCHER")
# A reader of every file, byte-exact, the whole time (direct_io: each
# read goes through the mount), until both signatures were taken, and
# then every file once more.
(
	while [ ! -e "$WORK/resigned.ms" ] && [ "$(now_ms)" -lt "$t_end" ]; do
		for f in $FILES; do
			cmp "$WORK/d/$f" "$WORK/rs/m/$f" || exit 1
		done
	done
	for f in $FILES; do
		cmp "$WORK/d/$f" "$WORK/rs/m/$f" || exit 1
	done
) 2>"$WORK/reader.err" &
READER=$!
PIDS+=("$READER")

# --- Trust anchors. -------------------------------------------------------
SEED_LOG=a
start_seed "$MODEL" --name m "${SIGN[@]}" --grace 600
A=$HOST:$SEED_PORT
A_PID=$SEED_PID
chmod 666 "$PUB"
line="--trust-key $PUB: mode 0666 lets others write it, and whoever writes it decides what this trusts; chmod go-w $PUB"
mount_refused --seed "$A" --trust-key "$PUB" "seedfs mount: $line"
refused "$SEEDFS" pull --seed "$A" --trust-key "$PUB" m "$WORK/p" "seedfs pull: $line"
api_refused "$A" "$line"
chmod 664 "$PUB"
mount_refused --seed "$A" --trust-key "$PUB" \
	"seedfs mount: --trust-key $PUB: mode 0664 lets its group write it, and whoever writes it decides what this trusts; chmod go-w $PUB"
chmod 644 "$PUB"
cp "$PUB" "$WORK/ca.pem"
chmod 664 "$WORK/ca.pem"
mount_refused --seed "$A" --tls-ca "$WORK/ca.pem" \
	"seedfs mount: --tls-ca $WORK/ca.pem: mode 0664 lets its group write it, and whoever writes it decides what this trusts; chmod go-w $WORK/ca.pem"
refused "$SEEDFS" pull --seed "$A" --tls-ca "$WORK/ca.pem" m "$WORK/p" \
	"seedfs pull: --tls-ca $WORK/ca.pem: mode 0664 lets its group write it, and whoever writes it decides what this trusts; chmod go-w $WORK/ca.pem"
if [ "$(id -u)" = 0 ]; then
	cp "$PUB" "$WORK/other.pub"
	chown 65534:65534 "$WORK/other.pub"
	mount_refused --seed "$A" --trust-key "$WORK/other.pub" \
		"seedfs mount: --trust-key $WORK/other.pub: owned by uid 65534, not by this user (uid 0) or root"
	API_KEY=$WORK/other.pub api_refused "$A" "owned by uid 65534, not by this user (uid 0) or root"
	anchors="others may write (0666, 0664), another user's"
else
	anchors="others may write (0666, 0664); not root: another user's file not tried"
fi
ok "trust anchors refused in one line: --trust-key and --tls-ca files $anchors (mount, pull, engine API)"

# --- Generation 2 taken; generation 1 played back. -----------------------
curl -fsS "http://$A/v1/manifest" >"$WORK/g1.json"
SEED_LOG=b # the attacker's: generation 1's bytes, unsigned
start_seed "$WORK/old" --name m --digest sha256
B=$HOST:$SEED_PORT
curl -fsS "http://$B/v1/manifest" >"$WORK/b.json"
python3 - "$WORK/g1.json" "$WORK/b.json" "$WORK/replay1.json" <<'PY'
import json, sys
m, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert len(m["regions"]) == len(b["regions"])
# What the signature leaves out: the attacker's seed's.
m["endpoints"] = b["endpoints"]
for r, s in zip(m["regions"], b["regions"]):
    r["remote"] = s["remote"]
m["instance"], m["key_epoch"] = b["instance"], b["key_epoch"]
json.dump(m, open(sys.argv[3], "w"))
PY
read -r SIGNER RUN < <(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print(m["signer"], "%016x" % int(m["signer_run"], 16))' "$WORK/g1.json")
echo '{"changed": 2}' >"$MODEL/config.json"
kill -HUP "$A_PID"
for _ in $(seq 100); do grep -q "generation 2 published" "$WORK/a.err" && break; sleep 0.05; done
grep -q "generation 2 published" "$WORK/a.err" || fail "no generation 2"

export SEEDFS_STATE_DIR=$WORK/s1
MOUNT_LOG=v1
MOUNT_SEEDS=$A mount_seed "$WORK/v" --trust-key "$PUB"
cmp "$MODEL/config.json" "$WORK/v/m/config.json" || fail "generation 2 not shown"
grep -qx "signed_generations: 1 remembered in $WORK/s1/signed-generations" "$WORK/v/.seedfs/status" ||
	fail "status: $(grep signed_ "$WORK/v/.seedfs/status")"
unmount_check "$WORK/v" "$MOUNT_PID"
[ "$(stat -c %a "$WORK/s1/signed-generations")" = 600 ] || fail "the state file is not 0600"
grep -qE "^m [0-9a-f]{16} $SIGNER $RUN 2 [0-9]+\$" "$WORK/s1/signed-generations" ||
	fail "state: $(cat "$WORK/s1/signed-generations")"
# With a disk tier the state is kept in it.
export SEEDFS_STATE_DIR=$WORK/unused
MOUNT_LOG=c1
MOUNT_SEEDS=$A mount_seed "$WORK/v" --trust-key "$PUB" --cache-dir "$WORK/cache"
unmount_check "$WORK/v" "$MOUNT_PID"
[ -f "$WORK/cache/signed-generations" ] && [ ! -e "$WORK/unused" ] ||
	fail "with --cache-dir the state is not in it"

python3 "$REPLAY" "$WORK/replay1.json" >"$WORK/replay.out" 2>"$WORK/replay.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -qE '^port [0-9]+$' "$WORK/replay.out" 2>/dev/null && break; sleep 0.05; done
R=127.0.0.1:$(sed -n 's/^port //p' "$WORK/replay.out")
[ "$R" != 127.0.0.1: ] || fail "replay.py did not start: $(cat "$WORK/replay.err")"

# A replica that took nothing newer takes it: the old bytes, from the
# attacker's seed (what a signature's validity still allows).
export SEEDFS_STATE_DIR=$WORK/s0
MOUNT_LOG=fresh
MOUNT_SEEDS=$R mount_seed "$WORK/f" --trust-key "$PUB"
for f in $FILES; do cmp "$WORK/old/$f" "$WORK/f/m/$f" || fail "fresh: $f is not generation 1's"; done
unmount_check "$WORK/f" "$MOUNT_PID"

# One that took generation 2 refuses it, in one line naming both.
export SEEDFS_STATE_DIR=$WORK/s1
older="m from $R: generation 1 of $SIGNER's run $RUN is older than generation 2 of that run, which this replica took (remembered in $WORK/s1/signed-generations): an older generation played back?"
mount_refused --seed "$R" --trust-key "$PUB" "seedfs mount: $older"
refused "$SEEDFS" pull --seed "$R" --trust-key "$PUB" m "$WORK/p" "seedfs pull: $older"
[ ! -e "$WORK/p" ] || fail "pull wrote $WORK/p"
api_refused "$R" "generation 1 of $SIGNER's run $RUN is older than generation 2 of that run"
mount_refused --seed "$R" --trust-key "$PUB" --cache-dir "$WORK/cache" \
	"seedfs mount: m from $R: generation 1 of $SIGNER's run $RUN is older than generation 2 of that run, which this replica took (remembered in $WORK/cache/signed-generations): an older generation played back?"
ok "generation 1 played back with another seed's endpoints: read by a fresh replica (within its validity), refused in one line by mount, pull and the engine API that took generation 2 (state in SEEDFS_STATE_DIR, in --cache-dir)"

# A restarted seed counts from 1 again, in a new run (signed 120 s on:
# its clock moved, and the old run's signatures are older than the step
# a clock may make).
kill "$A_PID"
SEED_LOG=a2
start_seed "$MODEL" --name m "${SIGN[@]}" --test-sign-clock 120
A=$HOST:$SEED_PORT
MOUNT_LOG=v2
MOUNT_SEEDS=$A mount_seed "$WORK/v" --trust-key "$PUB"
cmp "$MODEL/config.json" "$WORK/v/m/config.json" || fail "the restarted seed's generation 1 not shown"
unmount_check "$WORK/v" "$MOUNT_PID"
RUN2=$(curl -fsS "http://$A/v1/manifest" | python3 -c '
import json, sys
print("%016x" % int(json.load(sys.stdin)["signer_run"], 16))')
mount_refused --seed "$R" --trust-key "$PUB" \
	"~seedfs mount: m from $R: generation 1 of $SIGNER's run $RUN was signed 1[2-9][0-9] s before generation 1 of its run $RUN2, which this replica took \(remembered in $WORK/s1/signed-generations; a signer's clock may step back 60 s\): an older run played back\?"
ok "a restarted seed's generation 1 (a new run) taken; the old run's generation 1 played back then refused in one line"
kill "$SEED_PID"

# --- A signature that lapsed. ---------------------------------------------
SEED_LOG=lapsed
start_seed "$MODEL" --name m "${SIGN[@]}" --sign-validity 1h --test-sign-clock -7200
C=$HOST:$SEED_PORT
curl -fsS "http://$C/v1/manifest" >"$WORK/replay1.json" # replay.py reads it again
UNTIL=$(python3 -c '
import json, sys, time
m = json.load(open(sys.argv[1]))
print(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(m["valid_until"] // 10**9)))' "$WORK/replay1.json")
export SEEDFS_STATE_DIR=$WORK/s2
lapsed="expired 36[0-9][0-9] s ago \(valid until $UNTIL, signed by $SIGNER; clocks may differ by 300 s\): an old manifest played back, or a seed that no longer signs again"
mount_refused --seed "$R" --trust-key "$PUB" "~seedfs mount: m from $R: manifest signature $lapsed"
mount_refused --seed "$C" --trust-key "$PUB" "~seedfs mount: m from $C: manifest signature $lapsed"
refused "$SEEDFS" pull --seed "$R" --trust-key "$PUB" m "$WORK/p" "~seedfs pull: m from $R: manifest signature $lapsed"
[ ! -e "$WORK/s2/signed-generations" ] || fail "a lapsed manifest was remembered"
ok "a manifest whose signature lapsed an hour ago: refused in one line by a fresh mount and pull, played back or from its seed"
kill "$SEED_PID"

# --- Signed again while served: the checks. -------------------------------
wait "$READER" || fail "a reader saw an error or other bytes while the seed signed again: $(cat "$WORK/reader.err")"
wait "$WATCHER" || true
n=$(resigned)
taken=$(took)
[ -s "$WORK/resigned.ms" ] ||
	fail "in $((EVERY_S * 26 / 10)) s the seed signed again $n times and the mount took $taken (2 each wanted, every $EVERY_S s): $(grep -i sign "$WORK/rs.log" | tail -n 3)"
waited=$(cat "$WORK/resigned.ms")
until1=$(awk '$1 == "signature:" { print $NF }' "$WORK/rs/.seedfs/status")
[ "$until1" != "$until0" ] || fail "status still says valid_until $until0"
# The re-seeder passes on the new signature.
RS=$(awk '$1 == "reseed:" { print $2 }' "$WORK/rs/.seedfs/status")
seed_at=$(curl -fsS "http://$D/v1/manifest" | python3 -c 'import json, sys; print(json.load(sys.stdin)["signed_at"])')
rs_at=$(curl -fsS "http://$RS/v1/manifest?model=m" | python3 -c 'import json, sys; print(json.load(sys.stdin)["signed_at"])')
[ "$rs_at" -ge $((seed_at - EVERY_S * 1000000000)) ] || fail "the re-seeder passes on a signature made at $rs_at, the seed's is $seed_at"
unmount_check "$WORK/rs" "$RS_PID"
ok "signed again every $EVERY_S s (validity $VALID_S s): signed and taken twice in $waited ms by a running re-seeding mount (valid until $until0 -> $until1), a reader byte-exact throughout, the re-seeder passing the new signature on"
kill "$D_PID"
sanitizers_clean
