#!/usr/bin/env bash
# Source identity and --require: the seed takes the identity from
# config.json and --identity; the manifest and status show it with its
# short id; a mount shows a model only while its identity matches, and
# says in .seedfs/status which field differs; a new generation that stops
# (or starts) matching leaves (or joins) the tree; bad keys and values
# are refused at start with one line.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 1 >/dev/null
config() { # QUANT_METHOD
	printf '{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "%s", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}}\n' "$1" >"$MODEL/config.json"
}
config fp8

# Bad --identity: one line, non-zero, nothing served.
bad_seed() { # EXPECTED-LINE ARGS...
	local want=$1
	shift
	if "$SEEDFS" seed --model-dir "$MODEL" --listen "$HOST:0" "$@" \
		>"$WORK/bad.out" 2>"$WORK/bad.err"; then
		fail "seed accepted $*"
	fi
	grep -qF -- "$want" "$WORK/bad.err" || fail "seed $*: $(cat "$WORK/bad.err")"
	bound bad_identity_lines = 1 "$(grep -c . "$WORK/bad.err")" "seed $*: lines: $(cat "$WORK/bad.err")"
}
bad_seed "unknown identity key 'colour'" --identity colour=red
bad_seed "identity.tp_rank: 4 is not below tp_size 4" --identity tp_size=4,tp_rank=4
bad_seed "identity.layout_version: a processed layout needs a version" --identity layout=processed
bad_seed "--identity: model is the seed's own" --identity model=x
bad_seed "identity tp_size: 'four' is not a non-negative integer" --identity tp_size=four
ok "bad --identity values refused with one line each"

start_seed "$MODEL" --identity tp_size=4,tp_rank=3,framework=sglang,revision=abc123 --grace 1
curl -fsS "http://$HOST:$SEED_PORT/v1/manifest" >"$WORK/manifest.json"
python3 - "$WORK/manifest.json" <<'PY' || fail "manifest identity"
import json, sys
m = json.load(open(sys.argv[1]))
i = m["identity"]
want = {"model": "m", "revision": "abc123", "generation": 1,
        "dtype": "bfloat16", "quant": "fp8", "layout": "checkpoint",
        "layout_version": 0, "tp_size": 4, "tp_rank": 3, "pp_size": 1,
        "pp_rank": 0, "ep_size": 1, "ep_rank": 0, "framework": "sglang",
        "quant_params": {"quant_method": "fp8", "weight_block_size": [128, 128],
                         "activation_scheme": "dynamic"}}
assert i == want, i
assert m["revision"] == "abc123"
assert len(m["identity_id"]) == 12 and int(m["identity_id"], 16) >= 0
PY
ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["identity_id"])' "$WORK/manifest.json")
grep -q "identity $ID (quant fp8, layout checkpoint)" "$WORK/seed.out" ||
	fail "seed ready line: $(cat "$WORK/seed.out")"
bound id_hex_digits = 12 "$(tr -cd 0-9a-f <<<"$ID" | wc -c)" "the identity id '$ID'"
ok "identity from config.json and --identity: id $ID in manifest and ready line"

MNT=$WORK/mnt
# Unknown key or bad value at mount time: one line, exit 2, not mounted.
for spec in qaunt=fp8 tp_rank=x quant; do
	if "$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$MNT" --require "$spec" \
		2>"$WORK/req.err"; then
		fail "--require $spec mounted"
	fi
	grep -q "^seedfs mount: --require: " "$WORK/req.err" || fail "--require $spec: $(cat "$WORK/req.err")"
	bound require_refusal_lines = 1 "$(grep -c . "$WORK/req.err")" "--require $spec: $(cat "$WORK/req.err")"
	grep -q " $MNT fuse" /proc/mounts && fail "--require $spec left a mount"
done
ok "--require: unknown key and bad values refused at mount time"

# Matching: shown, with the id in status.
mount_seed "$MNT" --require quant=fp8,layout=checkpoint,tp_rank=3,framework=sglang
[ -f "$MNT/m/config.json" ] || fail "matching model not shown"
grep -q "^model: m generation 1 .* identity $ID$" "$MNT/.seedfs/status" ||
	fail "status: $(grep model "$MNT/.seedfs/status")"
refute --why "hidden while matching" "^hidden:" "$MNT/.seedfs/status"
grep -qx "identity: model=m revision=abc123 dtype=bfloat16 quant=fp8 layout=checkpoint layout_version=0 tp=3/4 pp=0/1 ep=0/1 framework=sglang" \
	"$MNT/.seedfs/status" || fail "status identity: $(grep identity "$MNT/.seedfs/status")"
# The id in the three places: the manifest, the seed's ready line, status.
bound id_places = 3 "$( (grep -c "\"$ID\"" "$WORK/manifest.json"
	grep -c "identity $ID " "$WORK/seed.out"
	grep -c " identity $ID$" "$MNT/.seedfs/status") | awk '$1 > 0 { n++ } END { print n + 0 }')" \
	"places holding the identity id $ID"
ok "--require quant=fp8,layout=checkpoint,tp_rank=3: shown, status names identity $ID"

# The seed republishes with quant awq: the next open finds it gone.
config awq
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "published .*generation 2 " "$WORK/seed.out" && break; sleep 0.05; done
# An open revalidates (close-to-open); names are cached for a second.
for _ in $(seq 100); do
	cat "$MNT/m/config.json" >/dev/null 2>&1 || [ -e "$MNT/m" ] || break
	sleep 0.1
done
[ -e "$MNT/m" ] && fail "model still shown after it stopped matching: $(ls "$MNT")"
grep -q "^hidden: m: quant is 'awq', required 'fp8'$" "$MNT/.seedfs/status" ||
	fail "status: $(cat "$MNT/.seedfs/status")"
ok "generation 2 (quant awq) hidden from a mount that requires fp8; status says why"
# And back.
config fp8
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "published .*generation 3 " "$WORK/seed.out" && break; sleep 0.05; done
for _ in $(seq 100); do
	cat "$MNT/.seedfs/status" >/dev/null
	cat "$MNT/m/config.json" >/dev/null 2>&1 && break
	sleep 0.1
done
cmp "$MODEL/config.json" "$MNT/m/config.json" || fail "generation 3 not shown"
refute --why "still hidden" "^hidden:" "$MNT/.seedfs/status"
ok "generation 3 (fp8 again) shown again"
unmount_check "$MNT" "$MOUNT_PID"

# Not matching from the start: mounted, nothing shown, one stderr line.
: >"$WORK/mount.log"
"$SEEDFS" mount --seed "$HOST:$SEED_PORT" "$MNT" --log-file "$WORK/mount.log" \
	--require layout=processed 2>"$WORK/mount.err" || fail "mount: $(cat "$WORK/mount.err")"
MOUNTS+=("$MNT")
MOUNT_PID=$(sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' "$WORK/mount.log" | tail -n 1)
PIDS+=("$MOUNT_PID")
grep -q "^seedfs mount: model m from $HOST:$SEED_PORT is hidden: layout is 'checkpoint', required 'processed'" \
	"$WORK/mount.err" || fail "stderr: $(cat "$WORK/mount.err")"
bound listed_while_hidden = 0 "$(find "$MNT" -mindepth 1 -maxdepth 1 | wc -l)" "a hidden model is listed: $(ls "$MNT")"
grep -q "^hidden: m: layout is 'checkpoint', required 'processed'$" "$MNT/.seedfs/status" ||
	fail "status: $(cat "$MNT/.seedfs/status")"
grep -q "^require: layout=processed$" "$MNT/.seedfs/status" || fail "no require line"
ok "a checkpoint model is never shown to a mount that requires processed"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
