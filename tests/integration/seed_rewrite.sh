#!/usr/bin/env bash
# A file rewritten while the seed reads it to publish it is a refused
# file, never a signal and never a generation of mixed bytes
# (docs/usage.md).  The seed publishes the next generation on SIGHUP;
# 10-80 ms later the 160 MiB shard it is reading through its mapping is
# rewritten with other bytes (two valid contents, in turn), two ways:
#   cp     truncate, then write (cp or torch.save onto the same name): a
#          read past the cut raised SIGBUS and ended the seed; now that
#          republish fails in one line ("byte N is gone");
#   inplace  the same size, written in place (rsync --inplace, dd
#          conv=notrunc): no read faults; the file's times show it was
#          written, and the republish fails in one line too.
# Each way is tried until two republishes met the rewrite (at most 30
# tries: the race is run, not hoped for); the seed runs throughout; once
# the directory is quiet a mount reads every file as it is on disk.
#   seed_rewrite.sh BUILD_DIR
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 160M --shards 1 >/dev/null
BIG=$(cd "$MODEL" && ls -S | head -n 1)
cp "$MODEL/$BIG" "$WORK/big.a"
# Another valid content: the same header, other bytes from 1 MiB on.
cp "$WORK/big.a" "$WORK/big.b"
head -c 64M /dev/urandom |
	dd of="$WORK/big.b" bs=1M seek=1 conv=notrunc status=none
cmp -s "$WORK/big.a" "$WORK/big.b" && fail "the two contents are the same"
start_seed "$MODEL" --grace 1

# answers: how many republishes the seed answered (published, or not)
answers() {
	cat "$WORK/seed.err" "$WORK/seed.out" | grep -c "published\|still served" || true
}

# await_answer N: until the seed answered more than N republishes
await_answer() {
	local _
	for _ in $(seq 600); do
		running "$SEED_PID" || fail "the seed died (a SIGBUS?)"
		[ "$(answers)" -gt "$1" ] && return 0
		sleep 0.05
	done
	fail "no answer to a republish in 30 s"
}

# same_as_disk: a fresh mount reads every file as it is on disk now.
same_as_disk() {
	local before f
	sleep 1.5 # quiet: what the seed's watch saw is published
	before=$(answers)
	kill -HUP "$SEED_PID"
	await_answer "$before"
	mount_seed "$WORK/mnt"
	for f in $(cd "$MODEL" && find . -type f | sed 's|^\./||'); do
		cmp "$MODEL/$f" "$WORK/mnt/m/$f" || fail "$1: $f differs"
	done
	unmount_check "$WORK/mnt" "$MOUNT_PID"
}

# rewrite_during WAY PATTERN: republish, rewrite WAY 10-80 ms later, until
# two refusals matching PATTERN (at most 30 tries).
rewrite_during() {
	local way=$1 pat=$2 met=0 tries=0 before src
	local base
	base=$(grep -c "$pat" "$WORK/seed.err" || true)
	while [ "$met" -lt 2 ] && [ $tries -lt 30 ]; do
		tries=$((tries + 1))
		src=$WORK/big.a
		[ $((tries % 2)) = 1 ] && src=$WORK/big.b
		before=$(answers)
		kill -HUP "$SEED_PID"
		sleep "0.0$((tries % 8 + 1))"
		case $way in
		cp) cp "$src" "$MODEL/$BIG" ;;
		inplace) dd if="$src" of="$MODEL/$BIG" bs=4M conv=notrunc status=none ;;
		esac
		await_answer "$before"
		met=$(($(grep -c "$pat" "$WORK/seed.err" || true) - base))
	done
	bound rewrites_met ">=" 2 "$met" "$way: republishes that met the rewrite, in $tries tries"
	ok "$way: $met of $tries republishes met the rewrite: refused in one line each, the seed alive"
	grep "$pat" "$WORK/seed.err" | tail -n 1
}

rewrite_during cp "$BIG changed while it was read: byte [0-9]* is gone"
same_as_disk cp
ok "cp: after the rewrites, every file as on disk from a fresh mount"
rewrite_during inplace "$BIG changed while it was read (written, replaced or removed)"
same_as_disk inplace
ok "inplace: after the rewrites, every file as on disk from a fresh mount"
