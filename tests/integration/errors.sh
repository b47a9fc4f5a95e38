#!/usr/bin/env bash
# Failures at start: one clear line, a non-zero exit, nothing mounted,
# and for the seed: a bad file is refused by name and rule.
source "$(dirname "$0")/lib.sh" "$1"

MNT=$WORK/mnt
mkdir -p "$MNT"

# expect_one_line KEY CMD_STATUS ERRFILE PATTERN...: status != 0,
# exactly one line on stderr (bound KEY = 1), containing every pattern.
# KEY: EKEY if set (a group of checks docs/claims.md names apart), else
# the caller's.
expect_one_line() {
	local key=${EKEY:-$1} st=$2 file=$3
	shift 3
	[ "$st" -ne 0 ] || fail "exit status 0, expected failure"
	bound "$key" = 1 "$(wc -l <"$file")" "lines on stderr: $(cat "$file")"
	local p
	for p in "$@"; do
		grep -qF -- "$p" "$file" || fail "'$p' not in: $(cat "$file")"
	done
	grep -q " $MNT fuse" /proc/mounts && fail "something got mounted"
	return 0
}

mount_expect() { # PATTERN... ; runs "$SEEDFS mount" with $MARGS
	local st=0
	"$SEEDFS" mount "${MARGS[@]}" "$MNT" 2>"$WORK/err" >/dev/null || st=$?
	expect_one_line mount_error_lines $st "$WORK/err" "$@"
}

# Unreachable seed.
MARGS=(--seed 127.0.0.1:1 --timeout 2)
mount_expect "cannot ask the seed what it publishes" "127.0.0.1:1"
ok "unreachable seed: $(cat "$WORK/err")"

# Manifests that must be refused, served by a stand-in seed.
NSERVE=0
serve() { # FILE [STATUS]: sets HTTP_PORT
	# A file of its own per server: the last one's "port" line must not
	# be read before this one's shell has truncated it (seen in CI).
	local out=$WORK/http.$((++NSERVE)).out i
	"$HTTPFILE" "$@" >"$out" &
	PIDS+=($!)
	HTTP_PORT=
	for i in $(seq 100); do
		# (The file may not be there yet: the background job's
		# redirection comes when it is scheduled; set -e would end
		# the test without a word.)
		HTTP_PORT=$(sed -n 's/^port \([0-9][0-9]*\)$/\1/p' "$out" 2>/dev/null || true)
		[ -n "$HTTP_PORT" ] && break
		sleep 0.05
	done
	[ -n "$HTTP_PORT" ] || fail "the stand-in seed printed no port: $(cat "$out")"
}
good_head='"seedfs_manifest":4,"model":"x","revision":"","generation":1,"endpoints":[{"protocol":"tcp","provider":"tcp;ofi_rxm","address":"02000050 7f000001 0000000000000000"}]'
good_head=${good_head// /}
bad_manifest() { # NAME JSON-TAIL PATTERN
	printf '{%s,%s}' "$good_head" "$2" >"$WORK/$1.json"
	serve "$WORK/$1.json"
	MARGS=(--seed "127.0.0.1:$HTTP_PORT" --timeout 2)
	mount_expect "bad manifest" "$3"
	ok "$1: $(cat "$WORK/err")"
}
bad_manifest extent_past_region \
	'"regions":[{"id":0,"length":10,"remote":[{"address":"0x0","key":"0x1"}]}],"dirs":[],"files":[{"path":"a","size":20,"xxh3":"0x1","extents":[{"region":0,"offset":5,"length":20}]}],"tensors":[]' \
	"files[0].extents[0]"
bad_manifest path_traversal \
	'"regions":[],"dirs":[],"files":[{"path":"../../etc/shadow","size":1,"xxh3":"0x1","extents":[{"inline":"eA=="}]}],"tensors":[]' \
	"files[0].path"
bad_manifest huge_size \
	'"regions":[],"dirs":[],"files":[{"path":"a","size":99999999999999999,"xxh3":"0x1","extents":[]}],"tensors":[]' \
	"files[0].size"
bad_manifest tensor_outside_file \
	'"regions":[],"dirs":[],"files":[{"path":"a","size":1,"xxh3":"0x1","extents":[{"inline":"eA=="}]}],"tensors":[{"name":"t","dtype":"U8","shape":[4],"file":"a","offset":0,"length":4}]' \
	"tensors[0]"
printf 'hello' >"$WORK/notjson"
serve "$WORK/notjson"
MARGS=(--seed "127.0.0.1:$HTTP_PORT")
mount_expect "bad manifest" "not valid JSON"
ok "not JSON: $(cat "$WORK/err")"
serve "$WORK/notjson" 500
MARGS=(--seed "127.0.0.1:$HTTP_PORT")
mount_expect "HTTP status 500"
ok "HTTP 500: $(cat "$WORK/err")"
# What a seed says it publishes is untrusted too: one line naming the
# field, nothing mounted.
bad_models() { # NAME JSON PATTERN
	printf '%s' "$2" >"$WORK/$1.models"
	serve "$WORK/notjson" 200 "$WORK/$1.models"
	MARGS=(--seed "127.0.0.1:$HTTP_PORT")
	mount_expect "$3"
	ok "$1: $(cat "$WORK/err")"
}
bad_models models_traversal '{"instance":"0x1","models":[{"model":"../x","generation":1,"content":"0x1","served":[]}]}' \
	"bad answer from 127.0.0.1" "models[0].model: not a valid model name"
bad_models models_not_object '[1,2]' "/v1/models: not a JSON object"
bad_models models_no_instance '{"models":[]}' "/v1/models: instance"
bad_models models_twice '{"instance":"0x1","models":[{"model":"x","generation":1,"content":"0x1","served":[]},{"model":"x","generation":2,"content":"0x1","served":[]}]}' \
	"models[1].model: x listed twice"
bad_models models_none '{"instance":"0x1","models":[]}' "publishes no model"

# Protocol choice against a real seed.
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 2M --shards 1
start_seed "$MODEL"
# The protocol checks: one line each (bound protocol_error_lines).
EKEY=protocol_error_lines
MARGS=(--seed "127.0.0.1:$SEED_PORT" --protocol sockets)
mount_expect "asks for protocol sockets" "serves tcp"
ok "protocol mismatch: $(cat "$WORK/err")"
MARGS=(--seed "127.0.0.1:$SEED_PORT")
st=0
SEEDFS_PROTOCOL=shm "$SEEDFS" mount "${MARGS[@]}" "$MNT" 2>"$WORK/err" || st=$?
expect_one_line mount_error_lines $st "$WORK/err" "asks for protocol shm"
ok "SEEDFS_PROTOCOL is honoured: $(cat "$WORK/err")"
MARGS=(--seed "127.0.0.1:$SEED_PORT" --protocol carrier-pigeon)
mount_expect "unknown protocol 'carrier-pigeon'"
ok "unknown protocol: $(cat "$WORK/err")"
unset EKEY
MARGS=(--seed "127.0.0.1:$SEED_PORT" --timeout 0)
mount_expect "invalid value '0' for --timeout"
ok "bad option value: $(cat "$WORK/err")"
kill "$SEED_PID"

# The seed refuses bad inputs by name and rule, and never says ready.
seed_expect() { # DIR PATTERN... ; extra seed args in $SARGS
	local st=0
	timeout 20 "$SEEDFS" seed --model-dir "$1" --listen 127.0.0.1:0 \
		"${SARGS[@]}" >"$WORK/out" 2>"$WORK/err" || st=$?
	shift
	refute --empty-ok --why "seed said ready" ready "$WORK/out"
	expect_one_line seed_error_lines $st "$WORK/err" "$@"
}
SARGS=()
cp -r "$MODEL" "$WORK/bad1"
F=$WORK/bad1/model-00001-of-00001.safetensors
off=$(grep -boa -m1 '"dtype":"[A-Z0-9_]*"' "$F" | head -n1 | cut -d: -f1)
printf '"dtype":"Q7' | dd of="$F" bs=1 seek="$off" conv=notrunc 2>/dev/null
seed_expect "$WORK/bad1" "refusing model-00001-of-00001.safetensors" "unknown dtype"
ok "bad dtype: $(cat "$WORK/err")"
cp -r "$MODEL" "$WORK/bad2"
F=$WORK/bad2/model-00001-of-00001.safetensors
truncate -s -1 "$F"
seed_expect "$WORK/bad2" "refusing model-00001-of-00001.safetensors" "run past the data section"
ok "truncated shard: $(cat "$WORK/err")"
mkdir -p "$WORK/bad3"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' >"$WORK/bad3/x.safetensors"
seed_expect "$WORK/bad3" "refusing x.safetensors" "exceeds the cap"
ok "huge header length: $(cat "$WORK/err")"
seed_expect "$WORK/nonexistent" "model directory" "No such file or directory"
ok "missing directory: $(cat "$WORK/err")"
EKEY=protocol_error_lines
SARGS=(--protocol carrier-pigeon)
seed_expect "$MODEL" "protocol carrier-pigeon: unknown protocol"
ok "unknown seed protocol: $(cat "$WORK/err")"
SARGS=(--protocol efa)
seed_expect "$MODEL" "protocol efa"
ok "efa on this host: $(cat "$WORK/err")"
unset EKEY
sanitizers_clean
