#!/usr/bin/env bash
# New generations: the seed republishes (SIGHUP, --watch); a new open
# sees the new bytes (close-to-open); a handle opened before keeps
# reading its own generation while the seed serves it, then gets ESTALE
# (cached pages included; a shard's and an inline file's, config.json,
# whose bytes are in the manifest, not the cache); unchanged files keep their inode; a bad
# republish leaves the current generation served.
source "$(dirname "$0")/lib.sh" "$1"

GRACE=4
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2
cp -a "$MODEL" "$WORK/orig"
"$GENMODEL" "$WORK/new" --size 8M --shards 2 --seed 5
F=model-00001-of-00002.safetensors
start_seed "$MODEL" --grace $GRACE
MNT=$WORK/mnt
mount_seed "$MNT"
M=$MNT/m

# FNV-1a of a byte range, as holdfile computes it.
hash_of() { printf 'R %s %s\nQ\n' "$2" "$3" | "$HOLDFILE" "$1" | sed -n 2p; }
coproc HOLD { "$HOLDFILE" "$M/$F"; }
hold_pid=$HOLD_PID # bash unsets HOLD_PID once the coprocess ends
PIDS+=("$hold_pid")
read -r line <&"${HOLD[0]}"
[ "$line" = OPEN ] || fail "holdfile: $line"
hold() { echo "$1" >&"${HOLD[1]}"; read -r reply <&"${HOLD[0]}"; echo "$reply"; }

want1=$(hash_of "$WORK/orig/$F" 0 100000)
[ "$(hold 'R 0 100000')" = "$want1" ] || fail "first read through the handle"
# A second handle, on config.json: inline (its bytes are in the
# manifest), so nothing but the generation's expiry refuses its reads.
mkfifo "$WORK/cfg.in" "$WORK/cfg.out"
"$HOLDFILE" "$M/config.json" <"$WORK/cfg.in" >"$WORK/cfg.out" &
PIDS+=("$!")
cfg_pid=$!
exec {CFG_W}>"$WORK/cfg.in" {CFG_R}<"$WORK/cfg.out"
read -r line <&"$CFG_R"
[ "$line" = OPEN ] || fail "holdfile config.json: $line"
cfg() { echo "$1" >&"$CFG_W"; read -r reply <&"$CFG_R"; echo "$reply"; }
jq -e '[.files[] | select(.path == "config.json") | .extents[] | has("inline")] == [true]' \
	"$M/.seedfs/manifest.json" >/dev/null || fail "config.json is not inline in the manifest"
want_cfg=$(hash_of "$WORK/orig/config.json" 0 4096)
[ "$(cfg 'R 0 4096')" = "$want_cfg" ] || fail "first read of config.json through the handle"
ino_tok=$(stat -c %i "$M/tokenizer.json")
ino_f=$(stat -c %i "$M/$F")
cat "$M/extra/notes.txt" >/dev/null

# Generation 2: a shard replaced (written aside, renamed into place, as
# checkpoint writers do), config.json changed, a file added, one removed.
cp "$WORK/new/$F" "$MODEL/$F.tmp" && mv "$MODEL/$F.tmp" "$MODEL/$F"
echo '{"generation": 2}' >"$MODEL/config.json.tmp" && mv "$MODEL/config.json.tmp" "$MODEL/config.json"
echo added >"$MODEL/added.txt"
rm "$MODEL/extra/notes.txt"
hup_at=$(now_ms) # the grace runs from the publish, after this
kill -HUP "$SEED_PID"
for _ in $(seq 100); do grep -q "^seedfs seed: published model m generation 2 " "$WORK/seed.out" && break; sleep 0.05; done
grep -q "^seedfs seed: published model m generation 2 " "$WORK/seed.out" || fail "no generation 2"

# The old handle first (the grace period runs from the publish): its own
# generation, cached or not, while served. A new open (config.json)
# makes the mount see generation 2.
cmp "$MODEL/config.json" "$M/config.json" || fail "new config.json"
adopted=$(now_ms)
want2=$(hash_of "$WORK/orig/$F" 3000000 100000)
r=$(hold 'R 0 100000')
[ "$r" = "$want1" ] || fail "old handle, cached range: $r ($(($(now_ms) - hup_at)) ms after the SIGHUP)"
r=$(hold 'R 3000000 100000')
[ "$r" = "$want2" ] || fail "old handle, range not read before: $r ($(($(now_ms) - hup_at)) ms after the SIGHUP)"
r=$(cfg 'R 0 4096')
[ "$r" = "$want_cfg" ] || fail "old handle on config.json (inline): $r ($(($(now_ms) - hup_at)) ms after the SIGHUP)"
grep -q "^older_generations_served: 1$" "$MNT/.seedfs/status" || fail "status older generations"
ok "the handles opened in generation 1 (a shard, the inline config.json) still read generation 1"

cmp "$WORK/new/$F" "$M/$F" || fail "a new open did not see the new shard"
cmp "$MODEL/config.json" "$M/config.json" || fail "new config.json"
cmp "$MODEL/added.txt" "$M/added.txt" || fail "added file"
grep -q "^model: m generation 2 " "$MNT/.seedfs/status" || fail "status: $(grep ^model "$MNT/.seedfs/status")"
grep -q '"generation": 2' "$M/.seedfs/manifest.json" || fail "manifest.json not generation 2"
ok "close-to-open: new opens read generation 2 (shard, config, added file, manifest)"
# The removed file goes once the kernel's copy of the name expires
# (entry_timeout, a second from its last lookup): within 2 s of the
# adoption (a second of margin).  A stat of a name the kernel holds does
# not renew it, so when it expires within that second is not asserted.
for _ in $(seq 40); do [ -e "$M/extra/notes.txt" ] || break; sleep 0.05; done
[ ! -e "$M/extra/notes.txt" ] || fail "removed file still there $(($(now_ms) - adopted)) ms after the adoption"
[ "$(stat -c %i "$M/tokenizer.json")" = "$ino_tok" ] || fail "unchanged file got a new inode"
[ "$(stat -c %i "$M/$F")" != "$ino_f" ] || fail "changed file kept its inode"
ok "unchanged files keep their inode ($ino_tok), changed ones get new ones ($ino_f -> $(stat -c %i "$M/$F")), removed ones go"

# The grace period ends: the mount says so, not before GRACE seconds
# after the SIGHUP, nor long after (its sweeper follows the expiry the
# seed gave it; 2 s of margin on a loaded machine).
gone="I model: generation 1 of m is no longer served: its open files get ESTALE$"
for _ in $(seq 200); do grep -q "$gone" "$WORK/mount.log" && break; sleep 0.05; done
ended=$(($(now_ms) - hup_at))
grep -q "$gone" "$WORK/mount.log" || fail "generation 1 not retired ${ended} ms after the SIGHUP"
bound retired_ms ">=" $((GRACE * 1000)) "$ended" "generation 1 retired after the SIGHUP, --grace $GRACE, ms"
bound retired_most_ms "<=" $((GRACE * 1000 + 2000)) "$ended" "generation 1 retired after the SIGHUP, --grace $GRACE, ms"
[ "$(hold 'R 0 100000')" = "ERR ESTALE" ] || fail "cached range after grace"
[ "$(hold 'R 5000000 1000')" = "ERR ESTALE" ] || fail "new range after grace"
# Its xattrs too: the handle keeps its retired generation from being
# freed, and a retired generation gives no new reference.
[ "$(hold 'G user.seedfs.generation')" = "ERR ESTALE" ] ||
	fail "getxattr through the old handle after grace: $(hold 'G user.seedfs.generation')"
r=$(cfg 'R 0 4096')
[ "$r" = "ERR ESTALE" ] || fail "old handle on config.json (inline) after grace: $r, not ESTALE"
ok "after the grace period ($ended ms) the old handles get ESTALE, cached pages, xattrs and an inline file included"
echo Q >&"${HOLD[1]}"
wait "$hold_pid" 2>/dev/null || true
echo Q >&"$CFG_W"
exec {CFG_W}>&- {CFG_R}<&-
wait "$cfg_pid" 2>/dev/null || true

# A republish that fails keeps generation 2 served.
printf 'not a safetensors file' >"$MODEL/broken.safetensors"
kill -HUP "$SEED_PID"
bad="SIGHUP: not republished, the current generation is still served: refusing broken.safetensors"
for _ in $(seq 100); do grep -q "$bad" "$WORK/seed.err" && break; sleep 0.05; done
grep -q "$bad" "$WORK/seed.err" || fail "bad republish not reported: $(tail -n 3 "$WORK/seed.err")"
cmp "$WORK/new/$F" "$M/$F" || fail "reads after a failed republish"
ok "a bad republish is refused, generation 2 still served"
rm "$MODEL/broken.safetensors"
unmount_check "$MNT" "$MOUNT_PID"
kill "$SEED_PID"

# --watch: a change in the directory publishes the next generation.
W=$WORK/w
cp -a "$WORK/orig" "$W"
SEED_LOG=watch-seed
start_seed "$W" --watch --grace 2
MOUNT_LOG=watch-mount
mount_seed "$MNT"
cmp "$W/config.json" "$MNT/w/config.json" || fail "watch: generation 1"
echo '{"watched": true}' >"$W/config.json"
pub="^seedfs seed: published model w generation 2 .*changed"
for _ in $(seq 100); do grep -q "$pub" "$WORK/watch-seed.out" && break; sleep 0.05; done
grep -q "$pub" "$WORK/watch-seed.out" || fail "--watch did not republish"
cmp "$W/config.json" "$MNT/w/config.json" || fail "watch: generation 2 not seen"
ok "--watch: an edit published generation 2, seen on the next open"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
