#!/usr/bin/env bash
# A real seed and a real FUSE mount over libfabric on loopback: the tree,
# byte-exact contents (sha256, random preads across extent boundaries,
# mmap, 4 concurrent readers), the debug view, read-only, clean unmount;
# the seed's and the mount's defaults (grace, checksum chunk, inline and
# piece sizes, read_ahead_kb, read-ahead cap).
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
# Either side of the default --inline-max (64 KiB): in the manifest, a region.
head -c 65536 /dev/urandom >"$MODEL/extra/inline-64k.bin"
head -c 65537 /dev/urandom >"$MODEL/extra/region-64k1.bin"

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
bound tree_differences = 0 "$(diff <(echo "$want") <(echo "$got") | grep -c '^[<>]')" \
	"tree differs:$(diff <(echo "$want") <(echo "$got"))"
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
if [ ${#SEED_ARGS[@]} -eq 0 ]; then
	# The seed's defaults, as the manifest shows them: --grace 60,
	# --checksum-chunk 1 MiB, --inline-max 64 KiB (--mr-max: below).
	# grace_seconds, the smallest and largest checksum chunk, and for
	# the 64 KiB and 64 KiB + 1 files: one extent, inline (1) or a
	# region (0); anything else -1.
	python3 - "$WORK/manifest.json" >"$WORK/defaults" <<'PY' || fail "seed defaults"
import json, sys
m = json.load(open(sys.argv[1]))
f = {e["path"]: e for e in m["files"]}
sizes = [e["checksum"]["chunk_size"] for e in m["files"]]
def inline(p):
    ext = f[p]["extents"]
    if len(ext) == 1 and "inline" in ext[0]:
        return 1
    return 0 if len(ext) == 1 and "region" in ext[0] else -1
print(m["grace_seconds"], min(sizes), max(sizes),
      inline("extra/inline-64k.bin"), inline("extra/region-64k1.bin"))
PY
	read -r grace cmin cmax in64 in64k1 <"$WORK/defaults"
	bound grace_seconds = 60 "$grace" "the manifest's grace_seconds with no --grace"
	bound checksum_chunk_min = 1048576 "$cmin" "the smallest checksum chunk_size with no --checksum-chunk"
	bound checksum_chunk_max = 1048576 "$cmax" "the largest checksum chunk_size with no --checksum-chunk"
	bound inline_64k = 1 "$in64" "a 64 KiB file one inline extent (1; 0 a region, -1 other)"
	bound inline_64k1 = 0 "$in64k1" "a 64 KiB + 1 file one region extent (0; 1 inline, -1 other)"
	ok "seed defaults: grace_seconds 60, checksum chunk 1 MiB, 64 KiB inline and 64 KiB + 1 not"
fi

# read_ahead_kb raised to 16 MiB after FUSE INIT (set behind the mount's
# ready: waited for), and the mount's read-ahead cap: --ahead 64 MiB, at
# most a quarter of the cache.
bdi=/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb
[ -s "$bdi" ] || fail "no $bdi"
for _ in $(seq 100); do
	[ "$(cat "$bdi")" = 16384 ] && break
	sleep 0.05
done
bound read_ahead_kb = 16384 "$(cat "$bdi")" "$bdi 5 s after the mount was ready"
cs=$(awk '$1 == "cache_size:" { print $2 }' "$MNT/.seedfs/status")
ra=$(awk '$1 == "read_ahead_max:" { print $2 }' "$MNT/.seedfs/status")
[ -n "$cs" ] && [ -n "$ra" ] || fail "no cache_size or read_ahead_max in status"
want=$((cs / 4 < 64 << 20 ? cs / 4 : 64 << 20))
bound read_ahead_max_off = 0 $((ra - want)) "read_ahead_max $ra less min(64 MiB, cache $cs / 4) = $want, bytes"
ok "read_ahead_kb 16384; read_ahead_max $ra (cache $((cs >> 20)) MiB)"

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
differ=()
for f in $files; do
	a=$(sha256sum <"$MODEL/$f")
	b=$(sha256sum <"$M/$f")
	[ "$a" = "$b" ] || differ+=("$f")
done
bound sha256_mismatches = 0 "${#differ[@]}" "sha256 differs: ${differ[*]}"
ok "sha256 of every file matches"
# Read-ahead was raised after INIT: sequential reads arrive as 1 MiB
# requests, not the kernel's default 128 KiB.
big=$(grep -c 'fs: read .*, +1048576)' "$WORK/mount.log" || true)
small=$(grep -c 'fs: read .*, +131072)' "$WORK/mount.log" || true)
bound mib_requests ">=" 1 "$big" "read requests of 1 MiB ($small of 128 KiB)"
bound mib_requests_over_small ">" 0 $((big - small)) "read requests of 1 MiB ($big) less those of 128 KiB ($small)"
ok "read requests: $big of 1 MiB, $small of 128 KiB"
unmount_check "$MNT" "$MOUNT_PID"

t0=$(now_ms)
kill -INT "$SEED_PID"
for i in $(seq 100); do kill -0 "$SEED_PID" 2>/dev/null || break; sleep 0.05; done
kill -0 "$SEED_PID" 2>/dev/null && fail "seed did not stop on SIGINT"
bound seed_stop_ms "<=" 5000 $(($(now_ms) - t0)) "the seed's exit after SIGINT, ms"
st=0
wait "$SEED_PID" || st=$?
bound seed_exit_status = 0 "$st" "the seed's exit status after SIGINT"
ok "seed stopped cleanly on SIGINT"

# The default --mr-max: a file of 1 GiB + 4 KiB (sparse) is registered
# in two pieces, 1 GiB and 4 KiB.
if [ "$PROTO" = tcp ] && [ ${#SEED_ARGS[@]} -eq 0 ]; then
	mkdir -p "$WORK/big"
	truncate -s $(((1 << 30) + 4096)) "$WORK/big/w.bin"
	SEED_LOG=bigseed start_seed "$WORK/big" --protocol tcp
	curl -sf "http://$HOST:$SEED_PORT/v1/manifest" >"$WORK/big.json" ||
		fail "curl big manifest"
	# The extents' count and lengths, and whether the regions' lengths
	# are the same (1) or not (0).
	python3 - "$WORK/big.json" >"$WORK/big.lens" <<'PY' || fail "--mr-max default"
import json, sys
m = json.load(open(sys.argv[1]))
lens = [e["length"] for e in m["files"][0]["extents"]]
print(len(lens), lens[0], lens[-1],
      int([r["length"] for r in m["regions"]] == lens))
PY
	read -r npieces first last same <"$WORK/big.lens"
	bound mr_pieces = 2 "$npieces" "extents of a 1 GiB + 4 KiB file with no --mr-max"
	bound mr_first_piece = 1073741824 "$first" "the first extent of a 1 GiB + 4 KiB file, bytes"
	bound mr_last_piece = 4096 "$last" "the last extent of a 1 GiB + 4 KiB file, bytes"
	bound mr_regions_same = 1 "$same" "regions of the same lengths as the extents ($(cat "$WORK/big.lens"))"
	kill -TERM "$SEED_PID"
	wait "$SEED_PID" || fail "big seed exit status $?"
	ok "--mr-max default: 1 GiB + 4 KiB registered as 1 GiB and 4 KiB"

	# The longest model name (255 bytes) in three-byte characters: its
	# requests carry it escaped (765 bytes), never cut short.
	name=$(python3 -c 'print("\u6a21" * 85, end="")')
	mkdir -p "$WORK/long"
	head -c 100000 /dev/urandom >"$WORK/long/w.bin"
	SEED_LOG=longseed start_seed "$WORK/long" --protocol tcp --name "$name"
	MOUNT_LOG=longmount mount_seed "$WORK/longmnt"
	cmp "$WORK/long/w.bin" "$WORK/longmnt/$name/w.bin" ||
		fail "a 255-byte model name: $(ls "$WORK/longmnt"; tail -3 "$WORK/longmount.log")"
	unmount_check "$WORK/longmnt" "$MOUNT_PID"
	kill -TERM "$SEED_PID"
	wait "$SEED_PID" || fail "long-name seed exit status $?"
	ok "a model named in 255 bytes of UTF-8: mounted, byte-exact"
fi
sanitizers_clean
