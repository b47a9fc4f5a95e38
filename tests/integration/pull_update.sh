#!/usr/bin/env bash
# seedfs pull --update (docs/updates.md): a directory that holds an
# earlier copy becomes the new generation, only the chunks that differ
# pulled and written: one byte changed in place in one shard, one shard
# replaced by a copy with one byte changed, a file added, one removed,
# one cut shorter, a stray file of the user's removed; the copy equals the model byte
# for byte, with the seed's times, and nothing of the update is left.
# A pull killed -9 in the middle (the seed behind a 40 Mbit/s link, in
# a network namespace) leaves every changed file missing under its name
# (never the old bytes beside new ones), the others as they were; the
# next --update finishes.
#   pull_update.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

netns_setup
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 24M --shards 3 >/dev/null
head -c $((3 * 1048576)) /dev/urandom >"$MODEL/tail.bin"
mapfile -t S < <(cd "$MODEL" && ls ./*.safetensors | sed 's|^\./||' | sort)
start_seed_ns "$MODEL" --grace 30
SEEDS=(--seed "$NS_IP:$SEED_PORT")
D=$WORK/copy
"$SEEDFS" pull "${SEEDS[@]}" m "$D" 2>"$WORK/pull.err" || fail "first pull: $(cat "$WORK/pull.err")"
diff -r "$MODEL" "$D" >/dev/null || fail "first pull differs"

# republish N: SIGHUP, until the seed published generation N.
republish() {
	kill -HUP "$SEED_PID"
	seed_published seed "$1"
}
# update [DEST]: seedfs pull --update; its summary line in $WORK/upd.out.
update() {
	"$SEEDFS" pull "${SEEDS[@]}" --update m "${1:-$D}" >"$WORK/upd.out" 2>"$WORK/upd.err" ||
		fail "pull --update: $(cat "$WORK/upd.err")"
}
pulled() { sed -n 's/.*; \([0-9]*\) bytes pulled.*/\1/p' "$WORK/upd.out"; }

# Generation 2.
flip_byte "$MODEL/${S[0]}" $((5 * 1048576 + 12345))
cp "$MODEL/${S[1]}" "$MODEL/${S[1]}.tmp"
flip_byte "$MODEL/${S[1]}.tmp" $((3 * 1048576 + 7))
mv "$MODEL/${S[1]}.tmp" "$MODEL/${S[1]}"
head -c 300000 /dev/urandom >"$MODEL/added.bin"
rm "$MODEL/extra/notes.txt"
truncate -s $((2 * 1048576)) "$MODEL/tail.bin" # shorter, the rest the same
echo "mine" >"$D/stray.txt"
republish 2
update "$D/" # a trailing slash, as shells complete it
diff -r "$MODEL" "$D" >"$WORK/diff" 2>&1 || fail "generation 2 differs: $(head -5 "$WORK/diff")"
[ ! -e "$D/.seedfs-pull" ] || fail ".seedfs-pull left in the copy"
for f in "${S[@]}" added.bin config.json tail.bin; do
	[ "$(stat -c %Y "$MODEL/$f")" = "$(stat -c %Y "$D/$f")" ] || fail "$f: mtime not the seed's"
done
p=$(pulled)
# Two 1 MiB chunks and the added file (300,000 bytes): at most 1.1 x.
bound upd_pulled_bytes "<=" $(((2 * 1048576 + 300000) * 11 / 10)) "$p" \
	"bytes pulled by --update for generation 2: $(cat "$WORK/upd.out")"
grep -q "is generation 2 of m: .* files kept, 4 changed;" "$WORK/upd.out" ||
	fail "summary: $(cat "$WORK/upd.out")"
ok "generation 2: $(cat "$WORK/upd.out")"

# Refused: a directory that holds none of the model (a wrong DEST is
# never emptied), a .seedfs-pull that is a link, --in-place with it.
mkdir -p "$WORK/notcopy" "$WORK/elsewhere" "$WORK/linked"
echo keep >"$WORK/notcopy/mine.txt"
ln -s "$WORK/elsewhere" "$WORK/linked/.seedfs-pull"
refuse() {
	local st=0
	"$SEEDFS" pull "${SEEDS[@]}" --update "${@:2}" m "$1" >/dev/null 2>"$WORK/ref.err" || st=$?
	[ $st -ne 0 ] || fail "--update into $1 ${*:2} was not refused"
}
refuse "$WORK/notcopy"
grep -q "holds none of model m's files" "$WORK/ref.err" || fail "not a copy: $(cat "$WORK/ref.err")"
[ "$(cat "$WORK/notcopy/mine.txt")" = keep ] || fail "a file of a wrong DEST was touched"
refuse "$WORK/linked"
grep -q "not a directory (a link?)" "$WORK/ref.err" || fail ".seedfs-pull link: $(cat "$WORK/ref.err")"
[ -z "$(ls "$WORK/elsewhere")" ] || fail "wrote through the .seedfs-pull link: $(ls "$WORK/elsewhere")"
refuse "$WORK/x" --in-place
grep -q "cannot be combined" "$WORK/ref.err" || fail "--in-place --update: $(cat "$WORK/ref.err")"
ok "refused: a directory with none of the model, a .seedfs-pull link, --in-place"

# A second --update with nothing to do pulls nothing.
update
bound upd_again_pulled_bytes = 0 "$(pulled)" "bytes pulled by an --update with nothing changed"

# Generation 3: every shard new, behind a slow link.  Killed -9 while
# the new shards are built aside: DEST is still generation 2, whole.
"$GENMODEL" "$WORK/other" --size 24M --shards 3 --seed 9 >/dev/null
for f in "${S[@]}"; do cp "$WORK/other/$f" "$MODEL/$f"; done
cp -a "$D" "$WORK/gen2"
republish 3
link tbf rate 40mbit burst 64kbit latency 400ms
# shards_state: how many shards are missing, of generation 2, of 3
# under their names (each whole, or the test fails).
shards_state() {
	local f missing=0 old=0 new=0
	for f in "${S[@]}"; do
		if [ ! -e "$D/$f" ]; then
			missing=$((missing + 1))
		elif cmp -s "$D/$f" "$MODEL/$f"; then
			new=$((new + 1))
		elif cmp -s "$D/$f" "$WORK/gen2/$f"; then
			old=$((old + 1))
		else
			fail "$1: $f is under its name with bytes of neither generation"
		fi
	done
	echo "$missing $old $new"
}
"$SEEDFS" pull "${SEEDS[@]}" --update m "$D" >"$WORK/upd.out" 2>"$WORK/upd.err" &
pull_pid=$!
PIDS+=("$pull_pid")
for _ in $(seq 400); do
	[ -n "$(find "$D/.seedfs-pull" -name 'f*' -size +1M 2>/dev/null)" ] && break
	sleep 0.025
done
kill -9 "$pull_pid"
wait "$pull_pid" 2>/dev/null || true
[ -f "$D/.seedfs-pull/state" ] || fail "no state file after the kill: $(ls -la "$D" "$D/.seedfs-pull" 2>&1)"
read -r missing old new < <(shards_state "killed while building")
bound upd_killed_building_old_shards = 3 "$old" \
	"shards of generation 2 under their names, killed while building ($missing missing, $new of 3)"
diff -r -x .seedfs-pull "$WORK/gen2" "$D" >/dev/null || fail "killed while building: DEST is not generation 2"
ok "killed while building generation 3 aside: DEST still generation 2, whole"

# Killed while the new files go into their names (a pause there, tests
# only): the changed ones are missing, never mixed with the old.
SEEDFS_TEST_UPDATE_PAUSE_MS=20000 "$SEEDFS" pull "${SEEDS[@]}" --update m "$D" \
	>"$WORK/upd.out" 2>"$WORK/upd.err" &
pull_pid=$!
PIDS+=("$pull_pid")
for _ in $(seq 1200); do
	[ ! -e "$D/${S[0]}" ] && [ ! -e "$D/${S[1]}" ] && [ ! -e "$D/${S[2]}" ] && break
	kill -0 "$pull_pid" 2>/dev/null || fail "update ended before its pause: $(cat "$WORK/upd.err")"
	sleep 0.025
done
kill -9 "$pull_pid"
wait "$pull_pid" 2>/dev/null || true
read -r missing old new < <(shards_state "killed while committing")
bound upd_killed_missing = 3 "$missing" \
	"changed shards missing under their names, killed while they go in ($old of generation 2, $new of 3)"
for f in config.json added.bin tail.bin; do
	cmp "$WORK/gen2/$f" "$D/$f" || fail "killed midway: unchanged $f differs"
done
ok "killed while the new files go in: the 3 changed shards missing under their names, the rest as they were"
link ""
update
diff -r "$MODEL" "$D" >"$WORK/diff" 2>&1 || fail "generation 3 after the kill differs: $(head -5 "$WORK/diff")"
[ ! -e "$D/.seedfs-pull" ] || fail ".seedfs-pull left after finishing"
ok "the next --update finished: $(cat "$WORK/upd.out")"

# With --trust-key (a signed manifest, SHA-256 of every chunk): local
# chunks are kept on their SHA-256, and only the changed one pulled.
openssl genpkey -algorithm ed25519 -out "$WORK/sign.key" 2>/dev/null
openssl pkey -in "$WORK/sign.key" -pubout -out "$WORK/sign.pub"
SEED_LOG=seed2 start_seed "$MODEL" --sign-key "$WORK/sign.key"
SEEDS=(--seed "$HOST:$SEED_PORT" --trust-key "$WORK/sign.pub")
SEEDFS_STATE_DIR=$WORK/state
export SEEDFS_STATE_DIR
flip_byte "$MODEL/${S[2]}" $((1048576 + 99))
kill -HUP "$SEED_PID"
seed_published seed2 2
update
diff -r "$MODEL" "$D" >"$WORK/diff" 2>&1 || fail "--trust-key update differs: $(head -5 "$WORK/diff")"
bound upd_trusted_pulled_bytes "<=" $((1048576 * 11 / 10)) "$(pulled)" \
	"bytes pulled by --update --trust-key, one 1 MiB chunk changed"
ok "--trust-key: $(cat "$WORK/upd.out")"
