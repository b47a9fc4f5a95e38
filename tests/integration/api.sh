#!/usr/bin/env bash
# The engine API (seedfs.h, sfs_client_*): reads straight into the
# caller's registered memory, byte-exact against the local files (whole
# files in one batch, every tensor in one batch, random odd ranges from
# four threads), over tcp and shm; striped over two seeds, and a kill -9
# of one mid-read survived; a corrupt seed refused (-EBADMSG); bad reads
# and a wrong name answered in one line.
source "$(dirname "$0")/lib.sh" "$1"
APIREAD=$BUILD/tests/apiread

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 48M --shards 3 >/dev/null
start_seed "$MODEL" --protocol tcp,shm
P1=$SEED_PORT
PID1=$SEED_PID

for p in tcp shm; do
	for mode in files tensors ranges; do
		SEEDFS_PROTOCOL=$p "$APIREAD" "$HOST:$P1" m "$MODEL" $mode 4 0.5 \
			>"$WORK/api.out" 2>"$WORK/api.err" ||
			fail "$mode over $p: $(cat "$WORK/api.err")"
		grep -q "apiread: $mode ok .*, $p\$" "$WORK/api.out" ||
			fail "$mode over $p: $(cat "$WORK/api.out")"
		ok "$(cat "$WORK/api.out")"
	done
done

# Whole files: every byte pulled once, straight in (no edge pulled
# twice); the tensors' batch pulls its edges' chunks through the cache.
SEEDFS_PROTOCOL=tcp "$APIREAD" "$HOST:$P1" m "$MODEL" files >"$WORK/api.out" 2>&1 ||
	fail "files: $(cat "$WORK/api.out")"
read -r total pulled < <(sed -n 's/.* ok \([0-9]*\) bytes.*, pulled \([0-9]*\),.*/\1 \2/p' "$WORK/api.out")
[ "$pulled" -le "$total" ] || fail "whole files pulled $pulled bytes for $total"
ok "whole files: $pulled bytes pulled for $total read"

# Errors, each in one line.
"$APIREAD" "$HOST:$P1" m "$MODEL" errors >"$WORK/api.out" 2>"$WORK/api.err" ||
	fail "bad reads: $(cat "$WORK/api.out" "$WORK/api.err")"
ok "bad reads: $(head -n 1 "$WORK/api.out")"
st=0
"$APIREAD" "$HOST:$P1" nosuch "$MODEL" 2>"$WORK/err" >/dev/null || st=$?
[ $st = 1 ] && grep -q "publishes no model of that name" "$WORK/err" ||
	fail "wrong name: $(cat "$WORK/err")"
ok "wrong name: $(cat "$WORK/err")"
st=0
"$APIREAD" "$HOST:$(free_port)" m "$MODEL" 2>"$WORK/err" >/dev/null || st=$?
[ $st = 1 ] && [ "$(wc -l <"$WORK/err")" = 1 ] || fail "no seed: $(cat "$WORK/err")"
ok "no seed: $(cat "$WORK/err")"

# Two seeds of the same files: striped, then seed 1 killed -9 while four
# threads read random ranges for 3 s: no error, byte-exact.
SEED_LOG=seed2 start_seed "$MODEL" --protocol tcp
P2=$SEED_PORT
# seed_bytes PORT FILE: what the client read from that seed
seed_bytes() {
	awk -v s="seed: $HOST:$1 " 'index($0, s) == 1 { on = 1; next }
		/^seed: / { on = 0 }
		on && $1 == "seed_bytes:" { print $2 }' "$2"
}
APIREAD_STATUS=$WORK/st1 SEEDFS_PROTOCOL=tcp "$APIREAD" "$HOST:$P1,$HOST:$P2" m "$MODEL" files \
	>"$WORK/api.out" 2>"$WORK/api.err" || fail "striped: $(cat "$WORK/api.err")"
b1=$(seed_bytes "$P1" "$WORK/st1")
b2=$(seed_bytes "$P2" "$WORK/st1")
tot=$((b1 + b2))
# (Under ThreadSanitizer the second connection's start-up costs too much
# of a 50 MB read to ask for a fifth.)
share=5
grep -q "SEEDFS_TSAN:BOOL=ON" "$BUILD/CMakeCache.txt" && share=50
[ "$tot" -gt 0 ] && [ $((b1 * share)) -gt "$tot" ] && [ $((b2 * share)) -gt "$tot" ] ||
	fail "not striped: seed 1 $b1, seed 2 $b2 bytes"
ok "striped over two seeds: $b1 and $b2 bytes ($(sed 's/.* in //; s/, open.*//' "$WORK/api.out"))"

APIREAD_STATUS=$WORK/st2 SEEDFS_PROTOCOL=tcp "$APIREAD" "$HOST:$P1,$HOST:$P2" m "$MODEL" ranges 4 3 \
	>"$WORK/api.out" 2>"$WORK/api.err" &
RPID=$!
PIDS+=("$RPID")
sleep 1
kill -9 "$PID1"
st=0
wait "$RPID" || st=$?
[ $st = 0 ] || fail "ranges across a kill -9: $(cat "$WORK/api.err")"
b2=$(seed_bytes "$P2" "$WORK/st2")
grep -q "^seed: $HOST:$P1 (" "$WORK/st2" || fail "no status of seed 1: $(cat "$WORK/st2")"
ok "seed 1 killed -9 a third into 3 s of reads: $(cat "$WORK/api.out"); seed 2 served $b2 bytes; $(grep "^seed: $HOST:$P1 " "$WORK/st2")"

# A corrupt seed: refused, naming the file.
F=model-00002-of-00003.safetensors
SEED_LOG=seed3 start_seed "$MODEL" --protocol tcp --test-corrupt "$F:5000000"
st=0
"$APIREAD" "$HOST:$SEED_PORT" m "$MODEL" files >/dev/null 2>"$WORK/err" || st=$?
[ $st = 1 ] && grep -q "$F bytes \[0, +[0-9]*): bytes do not match the seed's checksum" "$WORK/err" ||
	fail "corrupt seed: $(cat "$WORK/err")"
ok "corrupt seed: $(grep -v ' W ' "$WORK/err" | head -n 1)"
sanitizers_clean
