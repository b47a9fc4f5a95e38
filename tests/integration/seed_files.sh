#!/usr/bin/env bash
# The seed publishes the files its walk saw and nothing else (issue 24,
# item 8).  Whoever can write the model directory cannot get another
# file the seed can read published, nor hang it:
#  - a file swapped between the walk and the open (--test-after-walk
#    pauses the seed there) for a FIFO, a link to a file outside, or
#    another file renamed over it: the seed refuses it in one line and
#    exits at once (a model whose files change while it is published is
#    not published in part); the FIFO never blocks it;
#  - the same swap on a SIGHUP republish: refused in one line, the
#    current generation stays served, byte-exact;
#  - FIFOs and links outside found by the walk: skipped by name;
#  - a Hugging Face cache snapshot (snapshots/REV/* -> ../../blobs/HASH)
#    publishes and mounts byte-exact; links out of its blobs do not.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2
cp -a "$MODEL" "$WORK/orig"
head -c 100000 /dev/urandom >"$WORK/secret"
chmod 0600 "$WORK/secret"
T=tokenizer.json # over --inline-max: registered, read remotely
GO=$WORK/go

# paused_seed [seed args...]: a seed that stops after its walk; sets
# SEED_PID and returns once it waits.
walks() { grep -c "test: $MODEL walked; waiting for $GO" "$WORK/seed.err" 2>/dev/null || true; }
wait_walks() { # N
	local i
	for i in $(seq 200); do
		[ "$(walks)" -ge "$1" ] && return 0
		kill -0 "$SEED_PID" 2>/dev/null || fail "seed exited: $(cat "$WORK/seed.err")"
		sleep 0.05
	done
	fail "the seed did not walk $1 times: $(cat "$WORK/seed.err")"
}
paused_seed() {
	: >"$WORK/seed.out"
	"$SEEDFS" seed --model-dir "$MODEL" --listen "$HOST:0" --test-after-walk "$GO" "$@" \
		>"$WORK/seed.out" 2>"$WORK/seed.err" &
	SEED_PID=$!
	PIDS+=("$SEED_PID")
	wait_walks 1
}
# exits_with LINE: the paused seed, let go, exits within 5 s with LINE
# last on stderr; if it gets ready instead, what it published is pulled
# to show it.
exits_with() {
	local i st=0 t0
	t0=$(now_ms)
	touch "$GO"
	for i in $(seq 100); do
		running "$SEED_PID" || break
		seed_ready "$WORK/seed.out" && break
		sleep 0.05
	done
	if seed_ready "$WORK/seed.out"; then
		port=$(seed_port "$WORK/seed.out")
		"$SEEDFS" pull --seed "$HOST:$port" m "$WORK/leak" 2>/dev/null || true
		fail "the seed published it: $T is $(stat -c %s "$WORK/leak/$T" 2>/dev/null) bytes$(cmp -s "$WORK/leak/$T" "$WORK/secret" && echo ", the secret's bytes")"
	fi
	running "$SEED_PID" && fail "the seed hangs after its walk: $(stuck_threads "$SEED_PID")"
	bound exit_ms "<=" 5000 $(($(now_ms) - t0)) "the seed's exit after the swap, ms"
	wait "$SEED_PID" || st=$?
	[ $st = 1 ] || fail "exit status $st"
	[ "$(tail -n 1 "$WORK/seed.err")" = "$1" ] || fail "said: $(tail -n 3 "$WORK/seed.err")"
	bound refusal_lines = 1 "$(grep -c "refusing $T" "$WORK/seed.err")" "lines refusing $T: $(cat "$WORK/seed.err")"
	rm -rf "$MODEL" && cp -a "$WORK/orig" "$MODEL"
}

# A FIFO in its place: never opened for a blocking read.
paused_seed
rm "$MODEL/$T" && mkfifo "$MODEL/$T"
exits_with "seedfs seed: refusing $T: not a regular file any more: it changed since the directory was walked"
ok "a FIFO swapped in after the walk: refused at once, no hang"

# A link to a file outside, renamed over it.
paused_seed
ln -s "$WORK/secret" "$MODEL/$T.new" && mv "$MODEL/$T.new" "$MODEL/$T"
exits_with "seedfs seed: refusing $T: a symbolic link where the walk saw a file: it changed since the directory was walked"
ok "a link to a file outside renamed over a file after the walk: refused"

# Another file renamed over it (the same size: only the inode differs).
paused_seed
cp "$WORK/orig/$T" "$MODEL/$T.new" && mv "$MODEL/$T.new" "$MODEL/$T"
exits_with "seedfs seed: refusing $T: another file than the one walked (renamed over it?): it changed since the directory was walked"
ok "another file renamed over it after the walk: refused"

# Found by the walk: a FIFO and links outside are skipped by name; the
# seed serves; then SIGHUP, and the same swap during that walk.
mkfifo "$MODEL/pipe"
ln -s "$WORK/secret" "$MODEL/secret.bin"
ln -s pipe "$MODEL/pipe-link"
paused_seed --grace 60
touch "$GO"
for _ in $(seq 200); do seed_ready "$WORK/seed.out" && break; sleep 0.05; done
seed_ready "$WORK/seed.out" || fail "seed not ready: $(cat "$WORK/seed.err")"
SEED_PORT=$(seed_port "$WORK/seed.out")
for l in "skipping pipe: not a regular file" "skipping pipe-link: not a regular file" \
	"skipping symlink secret.bin: it points outside the model directory ($WORK/secret)"; do
	grep -qF "W seed: $l" "$WORK/seed.err" || fail "no line '$l': $(cat "$WORK/seed.err")"
done
MNT=$WORK/mnt
mount_seed "$MNT"
[ ! -e "$MNT/m/secret.bin" ] && [ ! -e "$MNT/m/pipe" ] || fail "skipped names are in the mount: $(ls "$MNT/m")"
cmp "$WORK/orig/$T" "$MNT/m/$T" || fail "$T before SIGHUP"
kill -HUP "$SEED_PID"
wait_walks 2
ln -s "$WORK/secret" "$MODEL/$T.new" && mv "$MODEL/$T.new" "$MODEL/$T"
touch "$GO"
line="E seed: SIGHUP: not republished, the current generation is still served: refusing $T: a symbolic link where the walk saw a file: it changed since the directory was walked"
for _ in $(seq 100); do grep -qF "$line" "$WORK/seed.err" && break; sleep 0.05; done
grep -qF "$line" "$WORK/seed.err" || fail "SIGHUP: $(tail -n 3 "$WORK/seed.err")"
bound refusal_lines = 1 "$(grep -c "refusing $T" "$WORK/seed.err")" "SIGHUP: lines refusing $T: $(cat "$WORK/seed.err")"
refute --why republished "^seedfs seed: published" "$WORK/seed.out"
gen=$(curl -s "http://$HOST:$SEED_PORT/v1/generation")
grep -q '"generation": *1[,}]' <<<"$gen" || fail "generation: $gen"
cmp "$WORK/orig/$T" "$MNT/m/$T" || fail "$T after the refused SIGHUP"
ok "the swap on a SIGHUP republish: refused in one line, generation 1 still served byte-exact; FIFOs and a link outside skipped by name"
unmount_check "$MNT" "$MOUNT_PID"
kill "$SEED_PID"
wait "$SEED_PID" || true

# A Hugging Face cache snapshot: every file a link into the blobs.
R=$WORK/hub/models--org--m
mkdir -p "$R/blobs" "$R/refs" "$R/snapshots/0123abc"
echo 0123abc >"$R/refs/main"
(cd "$WORK/orig" && find . -type f | sed 's|^\./||') | while read -r f; do
	h=$(sha256sum "$WORK/orig/$f" | cut -c1-64)
	cp "$WORK/orig/$f" "$R/blobs/$h"
	mkdir -p "$R/snapshots/0123abc/$(dirname "$f")"
	d=$(dirname "$f")
	up=$([ "$d" = . ] || echo "$d/" | sed 's|[^/][^/]*|..|g')
	ln -s "$up../../blobs/$h" "$R/snapshots/0123abc/$f"
done
ln -s "$WORK/secret" "$R/blobs/evil"
ln -s ../../blobs/evil "$R/snapshots/0123abc/evil.bin"
ln -s ../../refs/main "$R/snapshots/0123abc/ref.txt"
ln -s "$WORK/secret" "$R/snapshots/0123abc/secret.bin"
start_seed "$R/snapshots/0123abc" --name m
for l in "skipping symlink evil.bin: it points outside the model directory ($WORK/secret)" \
	"skipping symlink ref.txt: it points outside the model directory ($R/refs/main)" \
	"skipping symlink secret.bin: it points outside the model directory ($WORK/secret)"; do
	grep -qF "W seed: $l" "$WORK/seed.err" || fail "no line '$l': $(cat "$WORK/seed.err")"
done
bound snapshot_links_skipped = 3 "$(grep -c "W seed: skipping" "$WORK/seed.err")" "links skipped: $(cat "$WORK/seed.err")"
mount_seed "$MNT"
want=$(cd "$WORK/orig" && find . -mindepth 1 -printf '%y %P\n' | sort)
got=$(cd "$MNT/m" && find . -mindepth 1 ! -path './.seedfs*' -printf '%y %P\n' | sort)
bound snapshot_tree_differences = 0 "$(diff <(echo "$want") <(echo "$got") | grep -c '^[<>]')" \
	"the snapshot's tree through the mount:$(diff <(echo "$want") <(echo "$got"))"
(cd "$WORK/orig" && find . -type f | sed 's|^\./||') | while read -r f; do
	cmp "$WORK/orig/$f" "$MNT/m/$f" || exit 1
done || fail "bytes differ"
ok "a Hugging Face snapshot: $(echo "$got" | wc -l) entries byte-exact through the blobs; links out of them skipped"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
