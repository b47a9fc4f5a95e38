#!/usr/bin/env bash
# A withdrawn file's keys do not outlive a revocation.  A file that
# changed under the seed keeps its keys (they read zero pages, refused
# by checksum: docs/limits.md), but a token rotation with --revoke-now
# registers it again like every file and revokes the old keys at once:
# guesskey with generation 1's keys of the untouched file and of the
# withdrawn one is refused for both, and the new manifest publishes none
# of the old keys.  (Before, the withdrawn file was skipped at the
# rotation: its old keys read on, and were published again.)
source "$(dirname "$0")/lib.sh" "$1"
GUESSKEY=$BUILD/tests/guesskey
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2 >/dev/null
F1=model-00001-of-00002.safetensors
F2=model-00002-of-00002.safetensors
(umask 077 && openssl rand -hex 32 >"$WORK/a.tok" && openssl rand -hex 32 >"$WORK/b.tok" &&
	cp "$WORK/a.tok" "$WORK/seed.tok")
auth() { echo "Authorization: Bearer $(cat "$WORK/$1.tok")"; }
start_seed "$MODEL" --token-file "$WORK/seed.tok" --revoke-now
SEED=$HOST:$SEED_PORT
curl -fsS -H "$(auth a)" "http://$SEED/v1/manifest" >"$WORK/old.json" || fail "GET /v1/manifest"
# keys_of FILE OUT: the manifest with FILE's first region as region 0
# (the region guesskey reads)
keys_of() {
	python3 - "$WORK/old.json" "$1" >"$2" <<'PY' || fail "keys of $1"
import json, sys
m = json.load(open(sys.argv[1]))
f = [f for f in m["files"] if f["path"] == sys.argv[2]][0]
r = [e["region"] for e in f["extents"] if "region" in e][0]
regs = m["regions"]
regs[0], regs[r] = regs[r], regs[0]
regs[0]["id"], regs[r]["id"] = 0, r
for ff in m["files"]:
    for e in ff.get("extents", []):
        if "region" in e and e["region"] in (0, r):
            e["region"] = r if e["region"] == 0 else 0
print(json.dumps(m))
PY
}
keys_of "$F1" "$WORK/k1.json"
keys_of "$F2" "$WORK/k2.json"
for k in k1 k2; do
	"$GUESSKEY" --keys "$WORK/$k.json" --seed "$SEED" | grep -qx "guesskey: keys read" ||
		fail "$k: generation 1's keys do not read before the rotation"
done
truncate -s 1M "$MODEL/$F2"
for _ in $(seq 100); do grep -q "$F2 changed on disk under the seed" "$WORK/seed.err" && break; sleep 0.05; done
grep -q "$F2 changed on disk under the seed" "$WORK/seed.err" || fail "the seed did not see $F2 change"
ok "$F2 truncated: withdrawn ($(grep -m1 "$F2 changed on disk" "$WORK/seed.err" | cut -d' ' -f4- | cut -c1-120))"

cp "$WORK/b.tok" "$WORK/seed.tok"
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "registered again under new keys" "$WORK/seed.err" && break; sleep 0.05; done
grep -q "registered again under new keys .* are revoked now" "$WORK/seed.err" ||
	fail "no revocation: $(tail -n 3 "$WORK/seed.err")"
for k in k1 k2; do
	st=0
	out=$("$GUESSKEY" --keys "$WORK/$k.json" --seed "$SEED" 2>&1) || st=$?
	[ $st = 3 ] || fail "$k: generation 1's keys after --revoke-now: exit $st, $out"
done
curl -fsS -H "$(auth b)" "http://$SEED/v1/manifest" >"$WORK/new.json" || fail "GET /v1/manifest with the new token"
kept=$(python3 - "$WORK/old.json" "$WORK/new.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
ka = {x["key"] for r in a["regions"] for x in r["remote"]}
kb = {x["key"] for r in b["regions"] for x in r["remote"]}
print(len(ka & kb))
PY
)
[ "$kept" = 0 ] || fail "the new manifest publishes $kept of the old keys"
ok "--revoke-now: the old keys of the untouched and of the withdrawn file refused, none published again"
sanitizers_clean
