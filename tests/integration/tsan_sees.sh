#!/usr/bin/env bash
# The ThreadSanitizer tier sees our code where a library calls it: a
# race planted in a FUSE handler (run by libfuse's worker threads) and in
# the control port's handler (run by libmicrohttpd) is reported, with the
# handler in the stack, under the project's own tsan.supp.  The test
# passes only when ThreadSanitizer complains.  It also shows why the old
# module-wide suppressions were wrong: `race:libfuse3.so` hides the
# planted race in the FUSE handler.
#   tsan_sees.sh BUILD_DIR   (the ThreadSanitizer build: seedfs_plant)
set -euo pipefail
. "$(dirname "$0")/lib.sh" "$1"
[ -x "$BUILD/seedfs_plant" ] || fail "no $BUILD/seedfs_plant: run this in the -DSEEDFS_TSAN=ON build"
SUPP=$(dirname "${BASH_SOURCE[0]}")/tsan.supp
SEEDFS=$BUILD/seedfs_plant
MODEL=$WORK/m
"$GENMODEL" "$MODEL" >/dev/null
F=model-00001-of-00003.safetensors

# run_plant DIR SUPP: a seed and a mount of seedfs_plant, their reports
# in DIR; two control-port requests and a read of a file of many chunks.
run_plant() {
	local dir=$1 supp=$2
	mkdir -p "$dir"
	# The planted reports go to $dir, not to $WORK/tsan.*, which the exit
	# check reads for real races.
	local TSAN_OPTIONS="log_path=$dir/tsan:halt_on_error=0:suppressions=$supp"
	SEED_LOG=seed-${dir##*/} start_seed "$MODEL"
	curl -sf -o /dev/null "http://$HOST:$SEED_PORT/v1/models" || fail "GET /v1/models"
	curl -sf -o /dev/null "http://$HOST:$SEED_PORT/v1/models" || fail "GET /v1/models (2)"
	MOUNT_LOG=mount-${dir##*/} mount_seed "$dir/mnt"
	cmp "$MODEL/$F" "$dir/mnt/m/$F" || fail "bytes through seedfs_plant"
	unmount_check "$dir/mnt" "$MOUNT_PID"
	kill -TERM "$SEED_PID"
	local st=0
	wait "$SEED_PID" || st=$?
	# 66: ThreadSanitizer's exit status when it reported.
	[ "$st" = 0 ] || [ "$st" = 66 ] || fail "seed exit status $st"
}

# reported DIR FUNCTION: a data race report whose stack holds FUNCTION
reported() {
	local f
	for f in "$1"/tsan.*; do
		[ -s "$f" ] || continue
		awk -v fn="$2" '/WARNING: ThreadSanitizer: data race/ { r = 1 }
			r && $0 ~ ("#[0-9]+ " fn " ") { found = 1 } END { exit !found }' "$f" &&
			return 0
	done
	return 1
}

run_plant "$WORK/seen" "$SUPP"
reported "$WORK/seen" op_read || fail "no race reported in the FUSE read handler under tsan.supp: $(cat "$WORK/seen"/tsan.* 2>/dev/null | head -n 40)"
reported "$WORK/seen" handle || fail "no race reported in the control port's handler under tsan.supp: $(cat "$WORK/seen"/tsan.* 2>/dev/null | head -n 40)"
ok "the planted races in op_read (libfuse's worker) and in the control port's handle (libmicrohttpd) are reported under tsan.supp"

printf 'race:libfuse3.so\n' >"$WORK/module.supp"
run_plant "$WORK/hidden" "$WORK/module.supp"
reported "$WORK/hidden" op_read && fail "race:libfuse3.so did not hide the FUSE handler's race: the test's claim about module suppressions is wrong"
reported "$WORK/hidden" handle || fail "the control port's race is not reported in the second run"
ok "a module-wide race:libfuse3.so hides the race in the FUSE handler (why tsan.supp names functions only)"
