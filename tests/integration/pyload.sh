#!/usr/bin/env bash
# The Python loader (seedfs.load_model, seedfs.safe_open) with Debian's
# python3-numpy and python3-torch: every safetensors dtype, 0-d and
# empty tensors, subsets, slices and a TP=4 rank's rows, bit-exact
# against the local files; and the example loader
# (python/examples/load_torch.py) prints the same checksum per tensor
# from a seed as from the local files, for that model and a generated one.
source "$(dirname "$0")/lib.sh" "$1"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=$(python_for_build)
export PYTHONPATH=$SRC/python SEEDFS_LIB=$BUILD/libseedfs.so
$PY -c 'import numpy, torch' 2>/dev/null || fail "python3-numpy or python3-torch is not installed (packaging/deps.sh)"

mkdir -p "$WORK/d"
$PY "$SRC/tests/tools/loadtest.py" mkmodel "$WORK/d/m" || fail "mkmodel"
start_seed "$WORK/d/m" --protocol tcp
for fw in numpy torch; do
	$PY "$SRC/tests/tools/loadtest.py" check "$HOST:$SEED_PORT" "$WORK/d/m" $fw \
		>"$WORK/check.out" 2>&1 || fail "$fw: $(cat "$WORK/check.out")"
	while read -r l; do ok "$l"; done <"$WORK/check.out"
done

EX=$SRC/python/examples/load_torch.py
$PY "$EX" --seed "$HOST:$SEED_PORT" m >"$WORK/seed.sums" 2>"$WORK/ex.err" ||
	fail "example loader: $(cat "$WORK/ex.err")"
$PY "$EX" --local "$WORK/d/m" >"$WORK/local.sums" || fail "example loader, local"
diff "$WORK/local.sums" "$WORK/seed.sums" >"$WORK/diff" || fail "checksums differ: $(head "$WORK/diff")"
ok "example loader: $(wc -l <"$WORK/seed.sums") tensors, the same checksums from the seed as from the files"
kill "$SEED_PID"

mkdir -p "$WORK/g"
"$GENMODEL" "$WORK/g/m" --size 24M --shards 3 >/dev/null
start_seed "$WORK/g/m" --protocol tcp
$PY "$EX" --seed "$HOST:$SEED_PORT" m >"$WORK/seed.sums" 2>"$WORK/ex.err" ||
	fail "example loader: $(cat "$WORK/ex.err")"
$PY "$EX" --local "$WORK/g/m" >"$WORK/local.sums" || fail "example loader, local"
diff "$WORK/local.sums" "$WORK/seed.sums" >"$WORK/diff" || fail "checksums differ: $(head "$WORK/diff")"
ok "example loader on a generated model: $(wc -l <"$WORK/seed.sums") tensors, the same checksums"

st=0
$PY -c 'import seedfs, sys; seedfs.load_model(sys.argv[1], "nosuch")' "$HOST:$SEED_PORT" \
	>/dev/null 2>"$WORK/err" || st=$?
[ $st = 1 ] && grep -q "SeedfsError: sfs_client_open: .*publishes no model of that name" "$WORK/err" ||
	fail "wrong name: $(cat "$WORK/err")"
ok "wrong name: $(tail -n 1 "$WORK/err")"
