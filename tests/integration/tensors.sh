#!/usr/bin/env bash
# The tensor view: MOUNT/NAME/.seedfs/tensors/ holds one file per tensor
# of every safetensors and GGUF file
# (its bytes) and T.json beside it; xattrs user.seedfs.* on tensors and
# model files.  Checked by an independent reader (tests/tools/
# tensorcheck.py: its own safetensors parser and escaping) against the
# files the seed publishes, including names that need escaping.
source "$(dirname "$0")/lib.sh" "$1"
CHECK="/usr/bin/python3 $(dirname "$0")/../tools/tensorcheck.py"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 6M --shards 2 >/dev/null
$CHECK awkward "$MODEL" || fail "cannot write the awkward shard"
$CHECK gguf "$MODEL" || fail "cannot write the GGUF file"

# A bad GGUF header: the seed refuses to start, one line naming it.
BAD=$WORK/bad
mkdir -p "$BAD"
head -c 200 "$MODEL/tiny.gguf" >"$BAD/cut.gguf"
if "$SEEDFS" seed --model-dir "$BAD" --listen "$HOST:0" >/dev/null 2>"$WORK/bad.err"; then
	fail "seed published a truncated GGUF"
fi
grep -Eq "^seedfs seed: refusing cut.gguf: .*(the file ends|past the end of the file)" "$WORK/bad.err" ||
	fail "bad GGUF: $(cat "$WORK/bad.err")"
ok "truncated GGUF refused: $(cat "$WORK/bad.err")"

start_seed "$MODEL"
MNT=$WORK/mnt
mount_seed "$MNT"
V=$MNT/m/.seedfs/tensors

# Before any read: a tensor's .json says nothing of it is cached.
big=$(ls -S "$V" | grep -v '\.json$' | head -n 1)
len=$(stat -c %s "$V/$big")
[ "$len" -gt $((256 << 10)) ] || fail "largest tensor is only $len bytes"
c0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cached_bytes"])' "$V/$big.json")
[ "$c0" -lt "$len" ] || fail "$big: $c0 of $len bytes cached before any read"
ok "fresh mount: $big.json says $c0 of $len bytes cached"

# Every tensor: bytes, ls -l sizes, .json fields (cached_bytes = length
# after the read), xattrs, escaping; the listing is exactly the tensors.
out=$($CHECK check "$MODEL" "$V") || fail "tensor view: $out"
ok "tensor view: $out, byte-exact, metadata and xattrs right"

# Awkward names, as files.
found=0 missing=()
for f in 'a%2Fb%2Fc' '%2Ehidden' 'x%2Ejson' '100%25' 'tab%09name' '%2E.' plain; do
	if [ -f "$V/$f" ] && [ -f "$V/$f.json" ]; then found=$((found + 1)); else missing+=("$f"); fi
done
bound awkward_names_found = 7 "$found" "awkward tensor names, each a file with its .json (missing: ${missing[*]}; the view: $(ls "$V" | head))"
ok "escaped names: a/b/c -> a%2Fb%2Fc, .hidden -> %2Ehidden, x.json -> x%2Ejson"

# getfattr -d lists them (tensor and model file).
getfattr -d "$V/plain" 2>/dev/null | grep -q '^user.seedfs.dtype="F32"$' ||
	fail "getfattr on a tensor: $(getfattr -d "$V/plain" 2>&1)"
# dtype, shape, layout, generation, seed, file, xxh3 (tensorcheck.py
# compares each with its own reading of the model)
bound tensor_xattrs = 7 "$(getfattr -d "$V/plain" 2>/dev/null | grep -c '^user\.seedfs\.')" \
	"user.seedfs xattrs of a tensor: $(getfattr -d "$V/plain" 2>&1)"
S=model-00001-of-00002.safetensors
n=$(python3 -c 'import json,struct,sys
f=open(sys.argv[1],"rb"); n=struct.unpack("<Q",f.read(8))[0]
h=json.loads(f.read(n)); h.pop("__metadata__",None); print(len(h))' "$MODEL/$S")
getfattr -d "$MNT/m/$S" 2>/dev/null >"$WORK/fattr.out"
grep -q "^user.seedfs.tensors=\"$n\"$" "$WORK/fattr.out" &&
	grep -q '^user.seedfs.generation="1"$' "$WORK/fattr.out" &&
	grep -q "^user.seedfs.seed=\"$HOST:$SEED_PORT\"$" "$WORK/fattr.out" ||
	fail "getfattr on $S: $(cat "$WORK/fattr.out")"
no_attr() { # FILE NAME: getfattr fails with ENODATA
	local out
	if out=$(getfattr -n "$2" "$1" 2>&1); then fail "$1 has $2: $out"; fi
	echo "$out" | grep -q "No such attribute" || fail "getfattr -n $2 $1: $out"
}
no_attr "$MNT/m/$S" user.seedfs.dtype
no_attr "$V/plain" user.nope
no_attr "$MNT/m" user.seedfs.generation
getfattr -n user.seedfs.tensors --only-values "$MNT/m/tiny.gguf" 2>/dev/null | grep -qx 5 ||
	fail "tiny.gguf tensors: $(getfattr -d "$MNT/m/tiny.gguf" 2>&1)"
cmp "$MODEL/tiny.gguf" "$MNT/m/tiny.gguf" || fail "tiny.gguf differs"
ok "getfattr -d: tensors and model files ($n tensors in $S, 5 in tiny.gguf)"

# Opened read-only only; the view is not counted in statfs.
if echo x 2>/dev/null >"$V/plain"; then fail "wrote a tensor file"; fi
used=$(stat -f -c '%b' "$MNT")
total=$(du -sb --apparent-size "$MODEL" | cut -f1)
# The tensors are most of the model: counted twice would be ~2x.
[ $((used * 4096)) -lt $((total + (1 << 20))) ] ||
	fail "statfs counts $((used * 4096)) bytes for a $total byte model"
ok "read-only; statfs counts the model once"

unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
ok "clean unmount"
