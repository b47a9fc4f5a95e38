#!/usr/bin/env bash
# Rotation revokes (docs/security.md): a new token (SIGHUP) is a new key
# epoch.  A manifest kept from before still reads during --grace, and is
# refused by the provider after it; a mount that follows the token file
# reads on, byte-exact, with no reader error, its reads going to the
# seed throughout (direct_io, a cache smaller than the model); a
# re-seeder whose token file changes registers its cache again and its
# old key is refused after its own --grace; with --revoke-now the old
# keys are refused at once.  The reading mount has one source (the
# re-seeder follows another seed of the same model): the seed's holder
# is the only one it can read through.
source "$(dirname "$0")/lib.sh" "$1"

GUESSKEY=$BUILD/tests/guesskey
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 40M --shards 2 >/dev/null
FILES=$(cd "$MODEL" && find . -type f | sed "s|^\./||")
F1=model-00001-of-00002.safetensors
umask 077
openssl rand -hex 32 >"$WORK/a.tok"
openssl rand -hex 32 >"$WORK/b.tok"
for f in seed seedb mnt rs seed2; do cp "$WORK/a.tok" "$WORK/$f.tok"; done
umask 022
# The seeds' --grace and the re-seeder's (s): each is checked to read
# within it and to be refused 1.5 s after it.
GRACE=3
RS_GRACE=2
H() { echo "Authorization: Bearer $(cat "$WORK/$1.tok")"; }

start_seed "$MODEL" --token-file "$WORK/seed.tok" --grace $GRACE
SEED=$HOST:$SEED_PORT
curl -fsS -H "$(H a)" "http://$SEED/v1/manifest" >"$WORK/old.json" || fail "manifest"
grep -q '"key_epoch": 1' "$WORK/old.json" || fail "no key_epoch 1 in the manifest"
"$GUESSKEY" --keys "$WORK/old.json" --seed "$SEED" | grep -qx "guesskey: keys read" ||
	fail "the kept keys do not read before the rotation"

# A reader that keeps going to the seed: direct_io and a cache of 16 MiB
# for 40 MiB of model.
M=$WORK/mnt
mount_seed "$M" --token-file "$WORK/mnt.tok" --cache-size 16M -o direct_io
READER_PID=$MOUNT_PID
# A re-seeder, holding the model, of another seed (rotated at the same
# time).
SEED_A_PID=$SEED_PID
SEED_LOG=seedb
start_seed "$MODEL" --token-file "$WORK/seedb.tok" --grace $GRACE
SEED_B_PID=$SEED_PID
SEED_PID=$SEED_A_PID
R=$WORK/rs
MOUNT_LOG=rs
MOUNT_SEEDS=$HOST:$(seed_port "$WORK/seedb.out") \
	mount_seed "$R" --token-file "$WORK/rs.tok" --reseed --grace $RS_GRACE
MOUNT_LOG=mount
RS_PID=$MOUNT_PID
for f in $FILES; do cmp -s "$MODEL/$f" "$R/m/$f" || fail "re-seeder: $f differs"; done
RS=$(sed -n 's/^reseed: \([^ ]*\) .*/\1/p' "$R/.seedfs/status")
[ -n "$RS" ] || fail "no reseed line in status"
CONTENT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["content"])' "$WORK/old.json")
# slab_keys TOKEN OUT: the re-seeder's manifest with region 0 at the
# first slot of its cache that holds a chunk, under its slab's key
slab_keys() {
	curl -fsS -H "$(H "$1")" "http://$RS/v1/manifest?model=m" >"$WORK/rs-m.json" &&
		curl -fsS -H "$(H "$1")" "http://$RS/v1/holdings?model=m&content=$CONTENT" \
			>"$WORK/rs-h.json" || return 1
	python3 - "$WORK/rs-m.json" "$WORK/rs-h.json" >"$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
h = json.load(open(sys.argv[2]))
slot = min(s for f in h["files"] for s in f if s >= 0)
slab = dict(h["slab"])
slab["address"] = hex(int(slab["address"], 16) + slot * h["chunk_size"])
m["regions"][0]["remote"][0] = slab
print(json.dumps(m))
PY
}
slab_keys a "$WORK/rs-old.json" || fail "re-seeder's keys"
"$GUESSKEY" --keys "$WORK/rs-old.json" --seed "$RS" | grep -qx "guesskey: keys read" ||
	fail "the re-seeder's kept key does not read before the rotation"

: >"$WORK/reads.ok"
: >"$WORK/reads.bad"
(
	while [ ! -e "$WORK/stop" ]; do
		for f in $FILES; do
			if cmp "$MODEL/$f" "$M/m/$f" >"$WORK/cmp.out" 2>&1; then
				echo "$f" >>"$WORK/reads.ok"
			else
				echo "$(date +%T.%N) $f: $(cat "$WORK/cmp.out")" >>"$WORK/reads.bad"
			fi
		done
	done
) &
LOOP=$!
PIDS+=("$LOOP")
# The rotation comes once the reader has read a shard, byte-exact.
t0=$(now_ms)
for _ in $(seq 200); do
	grep -qx "$F1" "$WORK/reads.ok" && break
	[ -s "$WORK/reads.bad" ] && break
	sleep 0.05
done
[ ! -s "$WORK/reads.bad" ] || fail "reader errors before the rotation: $(head -n 5 "$WORK/reads.bad")"
grep -qx "$F1" "$WORK/reads.ok" || fail "the reader did not read $F1 in 10 s"
echo "the reader read $F1 after $(($(now_ms) - t0)) ms"

# --- The rotation. -------------------------------------------------------
for f in seed seedb mnt rs; do cp "$WORK/b.tok" "$WORK/$f.tok"; done
T0=$(now_ms)
kill -HUP "$SEED_PID" "$SEED_B_PID"
for _ in $(seq 100); do
	grep -q "every region registered again under new keys (epoch 2)" "$WORK/seed.err" && break
	sleep 0.05
done
grep -q "every region registered again under new keys (epoch 2)" "$WORK/seed.err" ||
	fail "the seed did not re-key: $(tail -n 5 "$WORK/seed.err")"
curl -fsS -H "$(H b)" "http://$SEED/v1/manifest" >"$WORK/new.json" || fail "new manifest"
grep -q '"key_epoch": 2' "$WORK/new.json" || fail "no key_epoch 2"
python3 - "$WORK/old.json" "$WORK/new.json" <<'PY' || fail "keys did not change"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
ka = [x["key"] for r in a["regions"] for x in r["remote"]]
kb = [x["key"] for r in b["regions"] for x in r["remote"]]
assert len(ka) == len(kb) and not set(ka) & set(kb), (ka, kb)
assert a["generation"] == b["generation"] and a["content"] == b["content"]
PY
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "$(H a)" "http://$SEED/v1/manifest")" = 401 ] ||
	fail "the old token still reads the manifest"
out=$("$GUESSKEY" --keys "$WORK/old.json" --seed "$SEED")
bound old_keys_read_ms "<" $((GRACE * 1000)) $(($(now_ms) - T0)) "the old keys checked within --grace $GRACE, ms after the rotation"
[ "$out" = "guesskey: keys read" ] || fail "the old keys stopped before --grace ended: $out"
ok "rotation: every key new (epoch 2, same generation and content), the old token refused, the old keys still read within --grace $GRACE"

# The re-seeder follows its token file within its announce period (5 s),
# and its grace starts then: checked within it.
for _ in $(seq 200); do
	grep -q "a new token: the cache is registered again" "$WORK/rs.log" && break
	sleep 0.05
done
grep -q "a new token: the cache is registered again" "$WORK/rs.log" ||
	fail "the re-seeder did not register its cache again in 10 s"
T1=$(now_ms)
# Within its --grace the old key still reads.
set +e
out=$("$GUESSKEY" --keys "$WORK/rs-old.json" --seed "$RS" 2>&1)
rc=$?
set -e
bound reseeder_old_key_read_ms "<" $((RS_GRACE * 1000)) $(($(now_ms) - T1)) \
	"the re-seeder's old key checked within its --grace $RS_GRACE, ms after its re-key line"
[ $rc = 0 ] && [ "$out" = "guesskey: keys read" ] ||
	fail "the re-seeder's old key stopped before its --grace ended (exit $rc): $out"
slab_keys b "$WORK/rs-new.json" || fail "re-seeder's new keys"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "$(H a)" "http://$RS/v1/models")" = 401 ] ||
	fail "the re-seeder still takes the old token"
python3 - "$WORK/rs-old.json" "$WORK/rs-new.json" <<'PY' || fail "slab key did not change"
import json, sys
a, b = (json.load(open(p))["regions"][0]["remote"][0] for p in sys.argv[1:])
assert a.get("key") != b.get("key"), (a, b)
PY
# After the grace period: refused by the provider.
# A time that must pass (the bound under test): --grace, plus 1.5 s.
while [ $(($(now_ms) - T0)) -lt $((GRACE * 1000 + 1500)) ]; do sleep 0.05; done
grep -q "keys of epoch 1 revoked" "$WORK/seed.err" || fail "no revocation logged"
set +e
out=$("$GUESSKEY" --keys "$WORK/old.json" --seed "$SEED")
rc=$?
set -e
bound old_keys_refused_exit = 3 "$rc" "guesskey with the old keys --grace + 1.5 s after the rotation (3: refused): $out"
case $out in
"guesskey: keys refused: "*) ;;
*) fail "not refused: $out" ;;
esac
ok "after --grace: the kept manifest's keys are refused ($out)"

# A time that must pass (the bound under test): its --grace, plus 1.5 s.
while [ $(($(now_ms) - T1)) -lt $((RS_GRACE * 1000 + 1500)) ]; do sleep 0.05; done
set +e
out=$("$GUESSKEY" --keys "$WORK/rs-old.json" --seed "$RS")
rc=$?
set -e
bound reseeder_old_key_refused_exit = 3 "$rc" "guesskey with the re-seeder's old key its --grace + 1.5 s after its re-key line (3: refused): $out"
"$GUESSKEY" --keys "$WORK/rs-new.json" --seed "$RS" | grep -qx "guesskey: keys read" ||
	fail "the re-seeder's new key does not read"
ok "re-seeder: a new token in its file gives its cache a new key; the old one reads within --grace $RS_GRACE, refused after it ($out)"

touch "$WORK/stop"
wait "$LOOP"
nok=$(wc -l <"$WORK/reads.ok")
[ ! -s "$WORK/reads.bad" ] || fail "reader errors across the rotation: $(head -n 5 "$WORK/reads.bad")"
bound reads_across ">=" 8 "$nok" "byte-exact file reads across the rotation"
grep -q "keys of epoch 2 in use from now on" "$WORK/mount.log" ||
	fail "the reading mount did not take the new keys"
for f in $FILES; do cmp -s "$MODEL/$f" "$M/m/$f" || fail "$f differs after the rotation"; done
ok "a mount following its token file: $nok file reads byte-exact across the rotation and the revocation, none failed"

unmount_check "$R" "$RS_PID"
unmount_check "$M" "$READER_PID"
kill "$SEED_PID" "$SEED_B_PID"

# --- --revoke-now: refused at once. -------------------------------------
SEED_LOG=seed2
start_seed "$MODEL" --token-file "$WORK/seed2.tok" --revoke-now
curl -fsS -H "$(H a)" "http://$HOST:$SEED_PORT/v1/manifest" >"$WORK/old2.json" || fail "manifest"
cp "$WORK/b.tok" "$WORK/seed2.tok"
kill -HUP "$SEED_PID"
for _ in $(seq 100); do
	grep -q "keys of epoch 1 revoked" "$WORK/seed2.err" && break
	sleep 0.05
done
grep -q "the old ones are revoked now" "$WORK/seed2.err" &&
	grep -q "keys of epoch 1 revoked" "$WORK/seed2.err" || fail "--revoke-now: $(tail -n 3 "$WORK/seed2.err")"
set +e
out=$("$GUESSKEY" --keys "$WORK/old2.json" --seed "$HOST:$SEED_PORT")
rc=$?
set -e
[ $rc = 3 ] || fail "--revoke-now: the old keys still read: $out"
ok "--revoke-now: the old keys are refused at once ($out)"
kill "$SEED_PID"

# --- A file withdrawn within the grace: its old keys read nothing. ------
# (They still covered the zero pages put in place of the file's: a mount
# left with the old token read zeros instead of an I/O error.)
cp -r "$MODEL" "$WORK/m3"
cp "$WORK/a.tok" "$WORK/seed3.tok"
cp "$WORK/a.tok" "$WORK/mnt3.tok"
SEED_LOG=seed3
start_seed "$WORK/m3" --name m --token-file "$WORK/seed3.tok" --grace 60 --checksum-chunk 0
MOUNT_LOG=old
mount_seed "$WORK/old" --token-file "$WORK/mnt3.tok" --cache-size 16M -o direct_io
cmp "$MODEL/$F1" "$WORK/old/m/$F1" || fail "before the rotation"
cp "$WORK/b.tok" "$WORK/seed3.tok"
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "under new keys (epoch 2)" "$WORK/seed3.err" && break; sleep 0.05; done
grep -q "under new keys (epoch 2)" "$WORK/seed3.err" || fail "seed3 did not re-key"
printf 'X%.0s' $(seq 4096) | dd of="$WORK/m3/$F1" bs=4096 seek=2048 conv=notrunc status=none
for _ in $(seq 100); do grep -q "$F1 changed on disk under the seed" "$WORK/seed3.err" && break; sleep 0.05; done
grep -q "$F1 changed on disk under the seed" "$WORK/seed3.err" || fail "seed3 did not see $F1 change in 5 s"
if cmp "$MODEL/$F1" "$WORK/old/m/$F1" >"$WORK/cmp3.out" 2>&1; then
	fail "a withdrawn file read whole with the old keys"
fi
grep -q "Input/output error" "$WORK/cmp3.out" || fail "not EIO: $(cat "$WORK/cmp3.out")"
ok "a file withdrawn within the grace: a mount with the old keys gets EIO, never zeros"
unmount_check "$WORK/old" "$MOUNT_PID"
kill "$SEED_PID"
sanitizers_clean
