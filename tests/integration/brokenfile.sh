#!/usr/bin/env bash
# One broken file does not take the seed away.  A published file
# truncated on the seed's disk: the seed says so in one line and stops
# serving its bytes (withdrawn; the next generation is tried once the
# directory is quiet); a read of it gets EIO soon (its keys read zeros,
# refused by checksum); the mount's connection stays, and the
# untouched files read byte-exact right after.  An in-place overwrite:
# a handle opened before gets EIO, never the new or mixed bytes; once
# the directory is whole again the next generation serves both files.
# Never other bytes: what a reader gets before the EIO, and every range
# the old handle reads, is the original's; the next generation is tried
# once the directory has been quiet for a second (1-3 s), and again once
# the truncated file is repaired in place (no SIGHUP needed).
#   brokenfile.sh BUILD_DIR [PROTOCOL]
source "$(dirname "$0")/lib.sh" "$1"
PROTO=${2:-tcp}

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 32M --shards 4
cp -a "$MODEL" "$WORK/orig"
F1=model-00001-of-00004.safetensors
F2=model-00002-of-00004.safetensors
F3=model-00003-of-00004.safetensors
F4=model-00004-of-00004.safetensors
start_seed "$MODEL" --protocol "$PROTO" --grace 30
MNT=$WORK/mnt
mount_seed "$MNT" --protocol "$PROTO"
M=$MNT/m
cmp "$MODEL/$F1" "$M/$F1" || fail "before"

truncate -s 1M "$MODEL/$F2"
for _ in $(seq 100); do grep -q "changed on disk under the seed" "$WORK/seed.err" && break; sleep 0.02; done
bound withdrawn_lines = 1 "$(grep -c "$F2 changed on disk under the seed: its bytes are withdrawn from generation 1" "$WORK/seed.err")" \
	"the seed did not say it once ($(grep -c changed "$WORK/seed.err") lines say changed): lines"
t0=$(now_ms)
if cat "$M/$F2" >"$WORK/cat.out" 2>"$WORK/cat.err"; then fail "a truncated file read"; fi
el=$(($(now_ms) - t0))
grep -q "Input/output error" "$WORK/cat.err" || fail "not EIO: $(cat "$WORK/cat.err")"
# Never other bytes: what cat got before the error is the original's.
cmp -n "$(stat -c %s "$WORK/cat.out")" "$WORK/cat.out" "$WORK/orig/$F2" ||
	fail "the truncated file read other bytes than the original's"
bound eio_ms "<=" 5000 "$el" "EIO for the truncated file after, ms"
t0=$(now_ms)
cmp "$MODEL/$F3" "$M/$F3" || fail "an untouched file after the broken one"
el3=$(($(now_ms) - t0))
bound untouched_ms "<=" 5000 "$el3" "the untouched file byte-exact after the broken one, ms"
ok "truncated: $(grep -o "$F2 changed.*withdrawn from generation 1" "$WORK/seed.err"); EIO after $el ms; $F3 byte-exact after $el3 ms"
# The seed tried the next generation and refused it (the shard is cut).
for _ in $(seq 150); do grep -q "not republished" "$WORK/seed.err" && break; sleep 0.02; done
grep -q "a published file changed on disk: not republished, the current generation is still served: refusing $F2" \
	"$WORK/seed.err" || fail "republish: $(grep seed: "$WORK/seed.err" | tail -n 2)"
# ... once the directory had been quiet for a second: 1-3 s after the
# change was logged, by the seed's own clock (2 s of margin for the
# attempt itself on a loaded machine).
t_chg=$(grep -m 1 "$F2 changed on disk" "$WORK/seed.err" | cut -d' ' -f1)
t_rep=$(grep -m 1 "not republished" "$WORK/seed.err" | cut -d' ' -f1)
quiet=$(($(date -d "$t_rep" +%s%3N) - $(date -d "$t_chg" +%s%3N)))
bound quiet_ms ">=" 1000 "$quiet" "the next generation tried after the change ($t_chg, $t_rep), not after a quiet second, ms"
bound quiet_most_ms "<=" 3000 "$quiet" "the next generation tried after the change ($t_chg, $t_rep), ms"
cmp "$MODEL/$F1" "$M/$F1" || fail "$F1 later"
# A withdrawn key reads zeros: the provider never drops the connection
# for it (pullfail.sh shows the other files' reads in flight go on).
n=$(grep -c "connected again" "$WORK/mount.log" || true)
bound reconnections = 0 "$n" "reconnections for one broken file"
grep -q "^seed: $HOST:$SEED_PORT (reachable)$" "$MNT/.seedfs/status" ||
	fail "status: $(grep ^seed: "$MNT/.seedfs/status")"
ok "the seed kept generation 1 without $F2 (republish tried $quiet ms after the change); the mount reads the rest, no reconnection"

# An in-place overwrite of a file not read yet, under a handle opened
# before.
coproc HOLD { "$HOLDFILE" "$M/$F4"; }
# bash unsets HOLD_PID once the coprocess ends: keep it.
hold_pid=$HOLD_PID
PIDS+=("$hold_pid")
read -r line <&"${HOLD[0]}"
[ "$line" = OPEN ] || fail "holdfile: $line"
hold() { echo "$1" >&"${HOLD[1]}"; read -r reply <&"${HOLD[0]}"; echo "$reply"; }
# New bytes in the data section (the header stays valid).
dd if=/dev/urandom of="$MODEL/$F4" bs=1M seek=1 count=2 conv=notrunc 2>/dev/null
for _ in $(seq 100); do grep -q "$F4 changed on disk" "$WORK/seed.err" && break; sleep 0.02; done
grep -q "$F4 changed on disk under the seed" "$WORK/seed.err" || fail "overwrite not noticed"
[ "$(hold "R 2000000 100000")" = "ERR EIO" ] || fail "the old handle read an overwritten file"
# Never other bytes: 64 KiB through the old handle at the start, in the
# overwritten MiBs and after them, each EIO or the original's bytes
# (FNV-1a 64, as holdfile hashes them).
python3 - "$WORK/orig/$F4" >"$WORK/f4.want" <<'PY'
import sys
d = open(sys.argv[1], "rb").read()
for off in (0, 1 << 20, 5 << 19, 5 << 20):
    h = 0xcbf29ce484222325
    for b in d[off:off + 65536]:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    print(off, f"{h:016x}")
PY
[ -s "$WORK/f4.want" ] || fail "no ranges of $F4"
eio=0 same=0
while read -r off h; do
	got=$(hold "R $off 65536")
	case $got in
	"ERR EIO") eio=$((eio + 1)) ;;
	"OK $h") same=$((same + 1)) ;;
	*) fail "the old handle at $off: $got, not EIO or the original's bytes (OK $h)" ;;
	esac
done <"$WORK/f4.want"
ok "overwritten in place: the handle opened before gets EIO ($eio ranges) or the original bytes ($same), never other bytes"
echo Q >&"${HOLD[1]}"
wait "$hold_pid" 2>/dev/null || true

# The overwrite's own attempt at the next generation first (refused: the
# shard is still cut), so that nothing but the repair below can bring
# generation 2.
for _ in $(seq 200); do [ "$(grep -c "not republished" "$WORK/seed.err")" -ge 2 ] && break; sleep 0.05; done
[ "$(grep -c "not republished" "$WORK/seed.err")" -ge 2 ] ||
	fail "the overwrite's attempt at the next generation not made in 10 s: $(grep seed: "$WORK/seed.err" | tail -n 2)"
grep -q "published .*generation 2" "$WORK/seed.out" && fail "generation 2 published before the repair"

# The directory whole again, the truncated shard repaired in place (cp
# onto the same name; no SIGHUP): the seed notices it, says so once, and
# the next generation serves both within 5 s (a quiet second from the
# repair's first write; the attempt itself on a loaded machine and the
# sanitizers).
t_fix=$(now_ms)
cp "$WORK/orig/$F2" "$MODEL/$F2"
for _ in $(seq 200); do grep -q "published .*generation 2" "$WORK/seed.out" && break; sleep 0.05; done
grep -q "published .*generation 2" "$WORK/seed.out" ||
	fail "the repair in place was not taken: no generation 2 in 10 s: $(tail -n 3 "$WORK/seed.err")"
el=$(($(now_ms) - t_fix))
bound repair_ms "<=" 5000 "$el" "generation 2 published after the repair, ms"
bound repair_lines = 1 "$(grep -c "$F2, withdrawn from generation 1 of m, changed on disk again: the next generation is tried once the directory is quiet" \
	"$WORK/seed.err")" "the repair not said once ($(grep -c "changed on disk again" "$WORK/seed.err") lines say changed again): lines"
ok "repaired in place: generation 2 published $el ms after, without SIGHUP"
cmp "$MODEL/$F2" "$M/$F2" || fail "$F2 in generation 2"
cmp "$MODEL/$F4" "$M/$F4" || fail "$F4 (overwritten) in generation 2"
cmp "$MODEL/$F3" "$M/$F3" || fail "$F3 in generation 2"
cmp "$MODEL/$F1" "$M/$F1" || fail "$F1 in generation 2"
ok "generation 2: the restored and the overwritten shard read byte-exact"

# A published file written on and on (its own bytes again, in place,
# every 0.3 s for 4 s) does not hold the next generation back: each
# write after the first finds it withdrawn, and does not push the quiet
# second back; a generation comes about every 1-1.5 s, and after the
# writes stop every file reads byte-exact.
gens() { grep -c "published .*generation" "$WORK/seed.out" || true; }
g0=$(gens)
for _ in $(seq 13); do
	dd if="$MODEL/$F1" of="$MODEL/$F1" bs=1M count=1 conv=notrunc 2>/dev/null
	sleep 0.3
done
g1=$(gens)
[ $((g1 - g0)) -ge 1 ] || fail "no generation while $F1 was written every 0.3 s for 4 s"
for _ in $(seq 100); do
	sleep 0.1
	[ "$(gens)" -gt "$g1" ] && break
done
sleep 1.5 # a later generation may still be on its way
for f in $F1 $F2 $F3 $F4; do
	cmp "$MODEL/$f" "$M/$f" || fail "$f after the writes"
done
ok "$((g1 - g0)) generation(s) while $F1 was written every 0.3 s; every file byte-exact after"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
