#!/usr/bin/env bash
# Concurrency stress against a real seed and mount, for the sanitizer
# builds (ThreadSanitizer above all): six generation switches that
# change weight shards (one rewritten in place of the same size, one
# whose size changes) and config.json, while readers read the changing
# files whole across the switches (each read must be exactly one
# generation's bytes, never a mix, and lie between the generations of
# config.json read before and after it), random preads on an unchanged
# shard, listings, stat, xattrs and two prefetches; the old generations
# expire behind them (--grace 3); then an unmount while readers still
# run.  A second mount with -o direct_io has whole-file readers too:
# there every read reaches the daemon (in the first, the kernel's page
# cache serves most of them).  Every error of every kind is counted, and any fails the test.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
NG=7
S1=model-00001-of-00003.safetensors
S2=model-00002-of-00003.safetensors
S3=model-00003-of-00003.safetensors
"$GENMODEL" "$MODEL" --size 24M --shards 3
# Generation K in $WORK/gK: S1 with the same header and new tensor bytes
# (the same size: a mix cannot show in the length), S2 three tensors
# whose sizes change with K, config.json with "stress": K.
python3 - "$MODEL" "$WORK" $NG "$S1" "$S2" <<'EOF' || fail "generations not written"
import json, os, random, struct, sys
model, work, ng, s1, s2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
one = open(f"{model}/{s1}", "rb").read()
hl = 8 + struct.unpack("<Q", one[:8])[0]
cfg = json.load(open(f"{model}/config.json"))
for g in range(1, ng + 1):
    d = f"{work}/g{g}"
    os.makedirs(d)
    rnd = random.Random(g)
    open(f"{d}/{s1}", "wb").write(one[:hl] + rnd.randbytes(len(one) - hl))
    hdr, off = {}, 0
    for i, n in enumerate([(5 << 20) + g * 77777, (1 << 20) + g * 4099, 1000 + g]):
        hdr[f"stress.w{i}"] = {"dtype": "U8", "shape": [n], "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(f"{d}/{s2}", "wb").write(struct.pack("<Q", len(h)) + h + rnd.randbytes(off))
    cfg["stress"] = g
    open(f"{d}/config.json", "w").write(json.dumps(cfg) + "\n")
EOF
sizes=$(for g in $(seq $NG); do stat -c %s "$WORK/g$g/$S2"; done | sort -u | wc -l)
[ "$sizes" = $NG ] || fail "$S2 has $sizes sizes in $NG generations"
cp "$WORK"/g1/* "$MODEL/"
SEED_LOG=stress-seed
start_seed "$MODEL" --grace 3
MNT=$WORK/mnt
MOUNT_LOG=stress-mount
mount_seed "$MNT" --cache-size 32M --ahead 8M
M=$MNT/m
MOUNT_PID1=$MOUNT_PID
DMNT=$WORK/dmnt
MOUNT_LOG=stress-direct
mount_seed "$DMNT" --cache-size 32M -o direct_io
DM=$DMNT/m
ERR=$WORK/errors.txt # one line per error, of any kind
: >"$ERR"
STOP=$WORK/stop
gens=()
for g in $(seq $NG); do gens+=("$WORK/g$g"); done

# Whole reads of the changing files: through the page cache, in 4 KiB
# and 1 MiB blocks and mmap; with direct_io, in 333333-byte and 64 KiB +
# 13 blocks.
"$READCHECK" gens -b 4096,0,1048576 "$STOP" 3 "$M" "${gens[@]}" -- \
	config.json "$S1" "$S2" >"$WORK/gens.out" 2>"$WORK/gens.err" &
R1=$!
"$READCHECK" gens -b 333333,65549 "$STOP" 2 "$DM" "${gens[@]}" -- \
	config.json "$S1" "$S2" >"$WORK/dgens.out" 2>"$WORK/dgens.err" &
R1D=$!
# Random preads at odd offsets of files that never change.
(
	while [ ! -e "$STOP" ]; do
		for f in "$S3" tokenizer.json extra/notes.txt; do
			"$READCHECK" pread "$MODEL/$f" "$M/$f" 30 $RANDOM 2>>"$ERR" ||
				echo "pread $f: exit $?" >>"$ERR"
		done
	done
) &
R2=$!
# Listings, stat, xattrs, status; each result checked.
(
	n=0
	while [ ! -e "$STOP" ]; do
		n=$((n + 1))
		if out=$(ls -la "$M" 2>&1); then
			for f in config.json "$S1" "$S2" "$S3" tokenizer.json extra; do
				grep -q " $f\$" <<<"$out" || echo "ls: no $f in: $out" >>"$ERR"
			done
			! grep -q '\.seedfs' <<<"$out" || echo "ls: .seedfs listed" >>"$ERR"
		else
			echo "ls -la: $out" >>"$ERR"
		fi
		out=$(ls -la "$M/.seedfs/tensors" 2>&1) || echo "ls tensors: $out" >>"$ERR"
		grep -q ' stress\.w0$' <<<"$out" || echo "ls tensors: no stress.w0 in: $out" >>"$ERR"
		out=$(getfattr --absolute-names --only-values -n user.seedfs.generation "$M/.seedfs/tensors/stress.w1" 2>&1) ||
			echo "getfattr: $out" >>"$ERR"
		[[ $out =~ ^[1-7]$ ]] || echo "xattr generation of stress.w1: '$out'" >>"$ERR"
		out=$(getfattr --absolute-names -d "$M/$S1" 2>&1) || echo "getfattr -d $S1: $out" >>"$ERR"
		out=$(cat "$MNT/.seedfs/status" 2>&1) || echo "status: $out" >>"$ERR"
		grep -q '^model: m generation [1-7] ' <<<"$out" || echo "status: $out" >>"$ERR"
		out=$(cat "$M/config.json" 2>&1) || echo "config.json: $out" >>"$ERR"
		[[ $out =~ \"stress\":\ [1-7]\} ]] || echo "config.json: $out" >>"$ERR"
		out=$(stat "$M/no-such-file" 2>&1) && echo "stat of a missing file succeeded" >>"$ERR"
		[ "$out" = "stat: cannot statx '$M/no-such-file': No such file or directory" ] ||
			echo "stat of a missing file: $out" >>"$ERR"
	done
	echo "$n" >"$WORK/r3.count"
) &
R3=$!
PIDS+=("$R1" "$R1D" "$R2" "$R3")

# wait_for WHAT FILE PATTERN [TRIES]: until a line of FILE matches (50 ms apart)
wait_for() {
	local i
	for i in $(seq "${4:-200}"); do
		grep -q "$3" "$2" 2>/dev/null && return 0
		kill -0 "$R1" 2>/dev/null || fail "the whole-file readers stopped: $(cat "$WORK/gens.err")"
		kill -0 "$R1D" 2>/dev/null || fail "the direct_io readers stopped: $(cat "$WORK/dgens.err")"
		sleep 0.05
	done
	fail "$1: no line matching '$3' in $2 after $((${4:-200} / 20)) s"
}
# Each generation is read whole before the next is published.
seen_all() {
	local f o
	for f in config.json "$S1" "$S2"; do
		for o in gens dgens; do
			wait_for "generation $1 of $f read ($o)" "$WORK/$o.out" "^seen $f $1\$" 400
		done
	done
}
prefetch() {
	"$SEEDFS" prefetch "$M" >"$WORK/prefetch$1.out" 2>&1 ||
		echo "prefetch $1: exit $?: $(tail -n 3 "$WORK/prefetch$1.out")" >>"$ERR"
}
seen_all 1
for g in $(seq 2 $NG); do
	# Written aside and renamed into place, as checkpoint writers do.
	for f in "$S1" "$S2" config.json; do
		cp "$WORK/g$g/$f" "$MODEL/$f.tmp" && mv "$MODEL/$f.tmp" "$MODEL/$f"
	done
	kill -HUP "$SEED_PID"
	wait_for "seed" "$WORK/stress-seed.out" "^seedfs seed: published .*generation $g[^0-9]"
	wait_for "mount" "$WORK/stress-mount.log" "adopted generation $g of m "
	wait_for "direct_io mount" "$WORK/stress-direct.log" "adopted generation $g of m "
	# Prefetches across generation switches.
	case $g in
	2 | 5) prefetch $g & PF=$! ;;
	3 | 6) wait "$PF" ;;
	esac
	seen_all "$g"
done
touch "$STOP"
st=0
wait "$R1" || st=$?
[ $st = 0 ] || echo "whole-file readers: exit $st: $(cat "$WORK/gens.err")" >>"$ERR"
st=0
wait "$R1D" || st=$?
[ $st = 0 ] || echo "direct_io readers: exit $st: $(cat "$WORK/dgens.err")" >>"$ERR"
wait "$R2" || echo "preads: exit $?" >>"$ERR"
wait "$R3" || echo "listings: exit $?" >>"$ERR"
for o in gens dgens; do
	echo "$o:"
	grep -v '^seen ' "$WORK/$o.out"
done
for s in "$MNT" "$DMNT"; do
	[ "$(grep -c '^errors_' "$s/.seedfs/status")" -ge 5 ] || fail "no error counters in $s/.seedfs/status"
	while read -r k v; do
		[ "$v" = 0 ] || echo "$s/.seedfs/status: $k $v" >>"$ERR"
	done < <(grep '^errors_' "$s/.seedfs/status")
done
nerr=$(wc -l <"$ERR")
bound errors = 0 "$nerr" "errors of any kind (readers, listings, status counters): $(head -n 20 "$ERR")"
spans=$(sed -n 's/^generation changed around \([0-9]*\) reads$/\1/p' "$WORK/gens.out" "$WORK/dgens.out" | paste -sd+ | bc)
[ -n "$spans" ] && [ "$spans" -gt 0 ] || fail "no whole read saw a generation change around it"
ok "6 generation switches of 2 shards and config.json: every whole read one generation's bytes, buffered, mmap and direct_io ($spans across a switch); $(cat "$WORK/r3.count") rounds of listings, xattrs, stat and status, random preads and 2 prefetches: 0 errors"

unmount_check "$DMNT" "$MOUNT_PID"

# An unmount with readers under way: they get errors, nothing crashes.
# Enough of them that they are still reading when the unmount comes
# (from the page cache, 50 rounds took less than the first poll: a CI
# run failed so); the unmount cuts them short.
pairs=()
for _ in $(seq 1000); do
	for f in "$S3" tokenizer.json; do pairs+=("$MODEL/$f" "$M/$f"); done
done
"$READCHECK" threads 4 "${pairs[@]}" 2>"$WORK/r4.err" &
R4=$!
PIDS+=("$R4")
# Under way: it holds a file of the mount open.
# (Checked once: between two files every thread may have none open.)
seen=0
for _ in $(seq 200); do
	find "/proc/$R4/fd" -lname "$M/*" 2>/dev/null | grep -q . && seen=1 && break
	sleep 0.05
done
[ $seen = 1 ] || fail "the readers opened nothing in 10 s"
fusermount3 -u -z "$MNT" || fail "unmount"
for _ in $(seq 200); do running "$MOUNT_PID1" || break; sleep 0.05; done
running "$MOUNT_PID1" && fail "the mount daemon did not exit"
st=0
wait "$R4" || st=$?
# 0: done before the unmount took effect; 1: an error it printed.
[ $st -le 1 ] || fail "readers during the unmount: exit $st: $(cat "$WORK/r4.err")"
ok "unmounted with 4 readers under way: the daemon exited, the readers ended (exit $st: $(head -c 150 "$WORK/r4.err"))"
sanitizers_clean
