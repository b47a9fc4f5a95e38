#!/usr/bin/env bash
# Nothing readable through a mount carries a key or a fabric address
# (docs/security.md): with -o allow_other and a re-seeding mount, every
# file and extended attribute under the mount, read as root and as
# another user, and the mount's and seed's logs, hold none of the seed's
# region keys, region addresses or endpoint addresses; the mount
# enforces the published permission bits (default_permissions).
source "$(dirname "$0")/lib.sh" "$1"

NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
command -v getfattr >/dev/null || fail "getfattr is missing (packaging/deps.sh installs attr)"
chmod 0755 "$WORK" # the other user reaches the mount points in it
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 2 >/dev/null
F1=model-00001-of-00002.safetensors
chmod 0600 "$MODEL/config.json"
chmod 0644 "$MODEL/$F1"
umask 077
openssl rand -hex 32 >"$WORK/seed.tok"
umask 022

for proto in tcp shm; do
	SEED_LOG=seed-$proto
	start_seed "$MODEL" --token-file "$WORK/seed.tok" --protocol "$proto"
	curl -fsS -H "Authorization: Bearer $(cat "$WORK/seed.tok")" \
		"http://$HOST:$SEED_PORT/v1/manifest" >"$WORK/raw-$proto.json" ||
		fail "GET /v1/manifest"
	M=$WORK/mnt-$proto
	mount_seed "$M" --token-file "$WORK/seed.tok" -o allow_other --reseed
	PID=$MOUNT_PID
	N=$(basename "$MODEL")
	cmp -s "$MODEL/$F1" "$M/$N/$F1" || fail "$proto: $F1 differs"

	# The re-seeder's own endpoint and slab key, from its port.
	RS=$(sed -n 's/^reseed: \([^ ]*\) .*/\1/p' "$M/.seedfs/status")
	[ -n "$RS" ] || fail "$proto: no reseed line in status"
	CONTENT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["content"])' "$WORK/raw-$proto.json")
	TOK=(-H "Authorization: Bearer $(cat "$WORK/seed.tok")")
	curl -fsS "${TOK[@]}" "http://$RS/v1/manifest?model=$N" >"$WORK/rs-$proto.json" ||
		fail "$proto: re-seeder's manifest"
	curl -fsS "${TOK[@]}" "http://$RS/v1/holdings?model=$N&content=$CONTENT" \
		>"$WORK/hold-$proto.json" || fail "$proto: re-seeder's holdings"

	# What a reader must never find: every endpoint address (hex, and
	# tcp's sockaddr as HOST:PORT), every key (hex, decimal) and every
	# region address that is not a small offset, the seed's and the
	# re-seeder's.
	python3 - "$WORK/raw-$proto.json" "$WORK/rs-$proto.json" \
		"$WORK/hold-$proto.json" >"$WORK/secrets-$proto" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
rs = json.load(open(sys.argv[2]))
slab = json.load(open(sys.argv[3]))["slab"]
m["regions"].append({"remote": [slab]})
out = set()
for e in m["endpoints"] + rs["endpoints"]:
    a = e["address"]
    out.add(a)
    b = bytes.fromhex(a)
    if e["protocol"] == "tcp" and b[:2] == b"\x02\x00":  # sockaddr_in
        out.add("%d.%d.%d.%d:%d" % (b[4], b[5], b[6], b[7], b[2] << 8 | b[3]))
for r in m["regions"]:
    for x in r["remote"]:
        k = int(x.get("key", "0x0"), 16)
        if k >= 1 << 32:
            out.add("%x" % k)
            out.add("%d" % k)
        if "raw_key" in x:
            out.add(x["raw_key"])
        a = int(x["address"], 16)
        if a >= 1 << 32:
            out.add("%x" % a)
            out.add("%d" % a)
if not out:
    sys.exit("no secret to look for")
print("\n".join(sorted(out)))
PY
	[ -s "$WORK/secrets-$proto" ] || fail "$proto: no secrets parsed"
	keys=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(sum(1 for r in m["regions"] for x in r["remote"] if int(x.get("key","0x0"),16) >= 1<<32))' "$WORK/raw-$proto.json")
	[ "$proto" = shm ] || [ "$keys" -ge 1 ] || fail "$proto: no 64-bit key in the manifest to look for"

	# Everything a reader can reach: the listed tree, the debug views
	# reachable by name, every extended attribute.
	for who in root nobody; do
		run=()
		[ $who = root ] || run=("${NOBODY[@]}")
		out=$WORK/read-$proto-$who
		: >"$out"
		paths=("$M/.seedfs/status" "$M/.seedfs/metrics"
			"$M/$N/.seedfs/manifest.json")
		while IFS= read -r -d '' f; do paths+=("$f"); done < <(
			find "$M/$N" "$M/$N/.seedfs/tensors" -type f -print0)
		[ ${#paths[@]} -gt 10 ] || fail "$proto: only ${#paths[@]} files found"
		readable=0
		for f in "${paths[@]}"; do
			if "${run[@]}" cat "$f" >>"$out" 2>/dev/null; then
				readable=$((readable + 1))
			fi
			"${run[@]}" getfattr -d -m - --absolute-names "$f" >>"$out" 2>/dev/null || true
		done
		[ $readable -gt 10 ] || fail "$proto: $who read only $readable files"
		grep -q '^user\.seedfs\.' "$out" || fail "$proto: $who read no extended attribute"
		found=()
		while IFS= read -r s; do
			grep -qiF -- "$s" "$out" && found+=("$s")
		done <"$WORK/secrets-$proto"
		bound secrets_under_mount = 0 "${#found[@]}" "$proto: $who found keys or addresses under the mount: ${found[*]}"
		grep -q '"public": true' "$out" || fail "$proto: $who read no public manifest"
	done
	for f in "$WORK/mount.log" "$WORK/seed-$proto.out" "$WORK/seed-$proto.err"; do
		[ -f "$f" ] || fail "no $f"
		found=()
		while IFS= read -r s; do
			grep -qiF -- "$s" "$f" && found+=("$s")
		done <"$WORK/secrets-$proto"
		bound secrets_in_logs = 0 "${#found[@]}" "$proto: in $f: ${found[*]}"
	done
	ok "$proto: no key or address under the mount (read as root and as uid 65534, xattrs included) nor in the logs"

	# The published bits hold for other users (default_permissions).
	[ "$(stat -c %a "$M/$N/config.json")" = 600 ] || fail "config.json not 0600"
	if "${NOBODY[@]}" cat "$M/$N/config.json" >/dev/null 2>"$WORK/eacces"; then
		fail "$proto: uid 65534 read a 0600 file through allow_other"
	fi
	grep -q 'Permission denied' "$WORK/eacces" || fail "not EACCES: $(cat "$WORK/eacces")"
	"${NOBODY[@]}" cmp "$MODEL/$F1" "$M/$N/$F1" || fail "uid 65534 cannot read a 0644 file"
	cmp "$MODEL/config.json" "$M/$N/config.json" || fail "root cannot read the 0600 file"
	awk -v m="$M" '$2 == m { print $4 }' /proc/mounts | grep -q default_permissions ||
		fail "$proto: not mounted with default_permissions"
	ok "$proto: published bits enforced for other users (0600 refused, 0644 byte-exact)"
	unmount_check "$M" "$PID"
	kill "$SEED_PID"
done
sanitizers_clean
