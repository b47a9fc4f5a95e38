#!/usr/bin/env bash
# A real seed and a real FUSE mount over libfabric on loopback: the tree,
# byte-exact contents (sha256, random preads across extent boundaries,
# mmap, 4 concurrent readers), the debug view, read-only, clean unmount.
# With a token on the control port, as it should be run (so over raw
# verbs in the VM tier the queue pair exchange, /v1/connect, carries it).
#   mount.sh BUILD_DIR [PROTOCOL [SEED ARGS...]]
source "$(dirname "$0")/lib.sh" "$1"
PROTO=${2:-tcp}
shift $(($# < 2 ? $# : 2))
SEED_ARGS=("$@")

MODEL=$WORK/llama-test
"$GENMODEL" "$MODEL" --size "${SEEDFS_TEST_MODEL_SIZE:-40M}" --shards 3 --seed 7
ln -s config.json "$MODEL/config-link.json"         # inside: followed
ln -s extra "$MODEL/extra-link"                     # inside dir: followed
ln -s /etc/hostname "$MODEL/outside-link"           # outside: skipped
ln -s . "$MODEL/extra/loop"                         # loop: skipped

(umask 077 && openssl rand -hex 32 >"$WORK/token")
start_seed "$MODEL" --protocol "$PROTO" --token-file "$WORK/token" "${SEED_ARGS[@]}"
grep -q "skipping symlink outside-link: it points outside" "$WORK/seed.err" ||
	fail "outside symlink not reported"
grep -q "skipping extra/loop: it loops back" "$WORK/seed.err" ||
	fail "symlink loop not reported"
ok "$(cat "$WORK/seed.out") ${SEED_ARGS[*]}"
grep -q "regions" "$WORK/seed.out" || fail "no summary in the ready line"
# Raw verbs registers the read-only file mappings as they are (remote
# read only, no local write): no private copies.
if [ "$PROTO" = rdma ] && grep -q "private copies" "$WORK/seed.err"; then
	fail "rdma: the seed fell back to private copies"
fi

MNT=$WORK/mnt
mount_seed "$MNT" --protocol "$PROTO" --token-file "$WORK/token"
M=$MNT/llama-test

# The tree: same names, types and sizes, links resolved, outside skipped.
# (find -L complains about the loop link and exits 1: expected)
want=$(cd "$MODEL" && { find -L . -mindepth 1 \
	! -path ./outside-link ! -path ./extra/loop ! -path './extra-link/loop' \
	-printf '%y %P %s\n' 2>/dev/null || true; } | sed 's/^d \(.*\) [0-9]*$/d \1/' | sort)
got=$(cd "$M" && find . -mindepth 1 ! -path './.seedfs*' -printf '%y %P %s\n' |
	sed 's/^d \(.*\) [0-9]*$/d \1/' | sort)
[ "$want" = "$got" ] || fail "tree differs:$(diff <(echo "$want") <(echo "$got"))"
ok "tree: $(echo "$got" | wc -l) entries, names, types and sizes match"

# Random preads at odd offsets and lengths, cold: every file.
files=$(cd "$MODEL" && { find -L . -type f ! -path ./outside-link 2>/dev/null || true; } | sed 's|^\./||' | sort)
for f in $files; do
	"$READCHECK" pread "$MODEL/$f" "$M/$f" 60 11 || fail "pread $f"
done
ok "random preads match on $(echo "$files" | wc -l) files"

# mmap of every file.
for f in $files; do
	"$READCHECK" mmap "$MODEL/$f" "$M/$f" || fail "mmap $f"
done
ok "mmap reads match"

# The debug view shows the manifest as the seed serves it, without the
# endpoints' addresses and the regions' addresses and keys.
curl -sf -H "Authorization: Bearer $(cat "$WORK/token")" \
	"http://$HOST:$SEED_PORT/v1/manifest" >"$WORK/manifest.json" ||
	fail "curl manifest"
python3 - "$WORK/manifest.json" "$M/.seedfs/manifest.json" <<'PY' || fail "manifest.json"
import json, sys
served, shown = (json.load(open(p)) for p in sys.argv[1:])
assert shown.pop("public") is True, "no public: true"
for e in served["endpoints"]:
    del e["address"]
for r in served["regions"]:
    del r["remote"]
assert served == shown, "shown manifest differs beyond addresses and keys"
PY
ok ".seedfs/manifest.json is the served manifest without addresses and keys"

# Read-only.
if touch "$M/config.json" 2>"$WORK/touch.err"; then fail "write allowed"; fi
grep -q "Read-only file system" "$WORK/touch.err" || fail "not EROFS: $(cat "$WORK/touch.err")"
ok "read-only (EROFS)"
unmount_check "$MNT" "$MOUNT_PID"
ok "unmounted, daemon gone, mount point empty"

# A fresh (cold) mount: 4 concurrent readers over all shards, then sha256.
mount_seed "$MNT" --protocol "$PROTO" --log-level debug --token-file "$WORK/token"
pairs=()
for f in $files; do pairs+=("$MODEL/$f" "$M/$f"); done
"$READCHECK" threads 4 "${pairs[@]}" || fail "concurrent readers"
ok "4 concurrent readers match"
for f in $files; do
	a=$(sha256sum <"$MODEL/$f")
	b=$(sha256sum <"$M/$f")
	[ "$a" = "$b" ] || fail "sha256 of $f"
done
ok "sha256 of every file matches"
# Read-ahead was raised after INIT: sequential reads arrive as 1 MiB
# requests, not the kernel's default 128 KiB.
big=$(grep -c 'fs: read .*, +1048576)' "$WORK/mount.log" || true)
small=$(grep -c 'fs: read .*, +131072)' "$WORK/mount.log" || true)
[ "$big" -ge 1 ] && [ "$big" -gt "$small" ] ||
	fail "read requests: $big of 1 MiB, $small of 128 KiB"
ok "read requests: $big of 1 MiB, $small of 128 KiB"
unmount_check "$MNT" "$MOUNT_PID"

kill -INT "$SEED_PID"
for i in $(seq 100); do kill -0 "$SEED_PID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$SEED_PID" 2>/dev/null && fail "seed did not stop on SIGINT"
wait "$SEED_PID" || fail "seed exit status $?"
ok "seed stopped cleanly on SIGINT"
sanitizers_clean
