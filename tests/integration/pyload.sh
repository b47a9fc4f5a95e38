#!/usr/bin/env bash
# The Python loader (seedfs.load_model, seedfs.safe_open) with Debian's
# python3-numpy and python3-torch: every safetensors dtype, 0-d and
# empty tensors, subsets, slices and a TP=4 rank's rows, bit-exact
# against the local files; and the example loader
# (python/examples/load_torch.py) prints the same checksum per tensor
# from a seed as from the local files, for that model and a generated one;
# trust_key= and require_signed= (signed manifests) from Python.
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
	while read -r l; do
		# loadtest.py's bounds, as lib.sh's bound prints them
		case $l in "bound: "*) echo "$l" ;; *) ok "$l" ;; esac
	done <"$WORK/check.out"
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

# Signed manifests from Python: trust_key= and require_signed= on
# load_model, Client and safe_open (passed down to libseedfs's cfg):
# with the seed's key, every tensor bit-exact; another key, and
# require_signed without a key, refused in one line each.
kill "$SEED_PID"
openssl genpkey -algorithm ed25519 -out "$WORK/sign.key" 2>/dev/null
chmod 600 "$WORK/sign.key"
openssl pkey -in "$WORK/sign.key" -pubout -out "$WORK/sign.pub"
openssl genpkey -algorithm ed25519 -out "$WORK/other.key" 2>/dev/null
openssl pkey -in "$WORK/other.key" -pubout -out "$WORK/other.pub"
SEED_LOG=signed start_seed "$WORK/g/m" --protocol tcp --digest sha256 --sign-key "$WORK/sign.key"
$PY - "$HOST:$SEED_PORT" "$WORK/g/m" "$WORK/sign.pub" >"$WORK/signed.out" 2>&1 <<'PY' || fail "signed: $(tail -n 3 "$WORK/signed.out")"
import glob, json, os, struct, sys
import seedfs
seed, local, key = sys.argv[1:]
want = {}
for fn in glob.glob(os.path.join(local, "*.safetensors")):
    with open(fn, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    for k, v in json.loads(data[8:8 + n]).items():
        if k != "__metadata__":
            a, b = v["data_offsets"]
            want[k] = data[8 + n + a:8 + n + b]
sd = seedfs.load_model(seed, "m", trust_key=key, require_signed=True)
assert sorted(sd) == sorted(want), (sorted(sd), sorted(want))
for k, v in sd.items():
    assert v.tobytes() == want[k], k
with seedfs.safe_open(seed, "m", trust_key=key, require_signed=True) as f:
    for k in f.keys():
        assert f.get_tensor(k).tobytes() == want[k], k
    trust = [l for l in f.client.status().splitlines()
             if l.startswith("manifest_trust:")]
assert trust == ["manifest_trust: signed by a key in %s, every chunk "
                 "checked with its SHA-256" % key], trust
print(len(sd))
PY
ok "load_model and safe_open with trust_key and require_signed: $(cat "$WORK/signed.out") tensors bit-exact, the client checks signatures"
$PY "$EX" --seed "$HOST:$SEED_PORT" --trust-key "$WORK/sign.pub" --require-signed m >"$WORK/seed.sums" 2>"$WORK/ex.err" ||
	fail "example loader, signed: $(cat "$WORK/ex.err")"
$PY "$EX" --local "$WORK/g/m" >"$WORK/local.sums" || fail "example loader, local"
diff "$WORK/local.sums" "$WORK/seed.sums" >"$WORK/diff" || fail "checksums differ: $(head "$WORK/diff")"
ok "example loader with --trust-key --require-signed: the same checksums"
# py_refused LINE CODE: python -c CODE SEED fails with the exception
# LINE (the log's warnings aside)
py_refused() {
	local want=$1 st=0
	shift
	env -u SEEDFS_TRUST_KEY_FILE $PY -c "import seedfs, sys; $1" "$HOST:$SEED_PORT" \
		>/dev/null 2>"$WORK/err" || st=$?
	[ $st = 1 ] && [ "$(grep -v '^[0-9T:.-]*Z seedfs\[[0-9]*\] ' "$WORK/err" | tail -n 1)" = "$want" ] ||
		fail "expected '$want', got status $st: $(cat "$WORK/err")"
}
py_refused "seedfs.SeedfsError: sfs_client_open: require_signed: no trust key (neither trust_key nor \$SEEDFS_TRUST_KEY_FILE): unsigned manifests are not read (errno 22)" \
	'seedfs.load_model(sys.argv[1], "m", require_signed=True)'
py_refused "seedfs.SeedfsError: sfs_client_open: require_signed: no trust key (neither trust_key nor \$SEEDFS_TRUST_KEY_FILE): unsigned manifests are not read (errno 22)" \
	'seedfs.safe_open(sys.argv[1], "m", require_signed=True)'
kid=$(openssl pkey -pubin -in "$WORK/sign.pub" -outform der | sha256sum | cut -c1-16)
py_refused "seedfs.SeedfsError: sfs_client_open: m from $HOST:$SEED_PORT: manifest signed by key $kid, which --trust-key $WORK/other.pub does not hold (errno 2)" \
	"seedfs.Client(sys.argv[1], \"m\", trust_key=\"$WORK/other.pub\")"
ok "require_signed without a key (load_model, safe_open), another key (Client): refused in one line each"
