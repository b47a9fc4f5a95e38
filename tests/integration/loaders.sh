#!/usr/bin/env bash
# The loaders people use, on the mount, against the same files on local
# disk (tests/tools/loaders.py; the libraries pinned in
# packaging/python-loaders.txt, installed by packaging/deps.sh):
#   - safetensors.safe_open, framework numpy and pt, on every file of a
#     two-shard model with every safetensors dtype and of a small Llama:
#     keys, metadata, every tensor (the same bits, dtype and shape, or
#     the same refusal where this numpy or torch lacks the dtype) and
#     get_slice; safetensors.numpy.load_file and .torch.load_file;
#   - torch.load of a torch.save zip and of a legacy file;
#   - transformers' from_pretrained of a small Llama saved by
#     save_pretrained in safetensors shards with an index: every
#     parameter and buffer equal, the logits of a fixed prompt equal;
#   - seedfs.safe_open as a drop-in: the same script, `from seedfs
#     import safe_open` or `from safetensors import safe_open`, on the
#     mounted files, prints the same lines.
source "$(dirname "$0")/lib.sh" "$1"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cmp -s "$SRC/packaging/python-loaders.txt" "$PYENV/seedfs-python-loaders.txt" ||
	fail "the venv at $PYENV does not hold packaging/python-loaders.txt's pins (packaging/deps.sh)"
export PYTHONNOUSERSITE=1
PY=$(python_for_build "$PYENV/bin/python")
export PYTHONPATH=$SRC/python SEEDFS_LIB=$BUILD/libseedfs.so
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=$WORK/hf
LT=$SRC/tests/tools/loaders.py
$PY -c 'import safetensors, transformers, torch' 2>"$WORK/imp.err" ||
	fail "the loaders do not import: $(tail -n 3 "$WORK/imp.err")"

$PY "$LT" mkmodels "$WORK/d" >"$WORK/mk.out" 2>&1 || fail "mkmodels: $(tail -n 5 "$WORK/mk.out")"
start_seed "$WORK/d/m" --protocol tcp --model-dir "llama=$WORK/d/llama"
mount_seed "$WORK/mnt" --cache-size 64M
MNT=$WORK/mnt
ls "$MNT/llama/model.safetensors.index.json" >/dev/null || fail "no index on the mount: $(ls "$MNT/llama")"

for m in m llama; do
	$PY "$LT" safetensors "$MNT/$m" "$WORK/d/$m" >"$WORK/st.out" 2>&1 ||
		fail "safetensors on $m: $(tail -n 5 "$WORK/st.out")"
	while read -r l; do ok "$m: $l"; done <"$WORK/st.out"
done
# The Llama's shards (save_pretrained at 300 KB, transformers pinned):
# load_file took each of its 4 whole.  The all-dtype model's counts are
# not asserted: how many numpy or torch refuse is these versions'.
for fw in numpy torch; do
	n=$(sed -n "s/^safetensors\.$fw\.load_file: [0-9]* files, \([0-9]*\) equal, .*/\1/p" "$WORK/st.out")
	bound llama_load_file_equal "=" 4 "${n:-0}" "safetensors.$fw.load_file: the Llama's shards equal"
done
$PY "$LT" transformers "$MNT/llama" "$WORK/d/llama" >"$WORK/tf.out" 2>&1 ||
	fail "transformers: $(tail -n 5 "$WORK/tf.out")"
n=$(sed -n 's/.* an index, \([0-9]*\) tensors equal, logits of an 8-token prompt equal .*/\1/p' "$WORK/tf.out")
bound from_pretrained_tensors_equal "=" 30 "${n:-0}" "from_pretrained: the Llama's tensors equal, the logits of an 8-token prompt equal"
ok "$(tail -n 1 "$WORK/tf.out")"

# The drop-in: one script, either import.
files=("$MNT"/m/*.safetensors "$MNT"/llama/*.safetensors)
$PY "$LT" dump safetensors "${files[@]}" >"$WORK/st.dump" 2>"$WORK/dump.err" ||
	fail "dump with safetensors: $(tail -n 3 "$WORK/dump.err")"
$PY "$LT" dump seedfs "${files[@]}" >"$WORK/sfs.dump" 2>"$WORK/dump.err" ||
	fail "dump with seedfs: $(tail -n 3 "$WORK/dump.err")"
pulled=$(sed -n 's/^seedfs pulled \([0-9]*\) bytes$/\1/p' "$WORK/dump.err")
bound dropin_pulled_bytes ">" 0 "${pulled:-0}" "seedfs.safe_open's bytes pulled from the seed: $(cat "$WORK/dump.err")"
$PY "$LT" compare-dumps "$WORK/st.dump" "$WORK/sfs.dump" >"$WORK/cmp.out" 2>&1 ||
	fail "$(tail -n 3 "$WORK/cmp.out")"
ok "$(cat "$WORK/cmp.out") (${#files[@]} files; $pulled bytes pulled from the seed, not read through the mount)"

# A .seedfs/status planted in a directory that is no seedfs mount (or
# published by a model in a subdirectory) is not trusted: the drop-in
# refuses the file, and the listener it names hears nothing.
mkdir -p "$WORK/fake/.seedfs" "$WORK/fake/m"
cp "$WORK/d/m/model-00001-of-00002.safetensors" "$WORK/fake/m/"
echo secret-planted >"$WORK/fake/tok"
$PY - "$WORK/fake" >"$WORK/fake.out" 2>&1 <<'PY' || fail "planted status: $(tail -n 3 "$WORK/fake.out")"
import os, socket, sys
import seedfs
d = sys.argv[1]
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(4)
ls.settimeout(1.0)
with open(os.path.join(d, ".seedfs", "status"), "w") as f:
    f.write("seed: 127.0.0.1:%d (reachable)\ncontrol: /tmp/x.sock\n"
            "control_security: token %s/tok; no tls\n" % (ls.getsockname()[1], d))
try:
    seedfs.safe_open(os.path.join(d, "m", "model-00001-of-00002.safetensors"), "pt")
    sys.exit("a planted status was trusted")
except ValueError as e:
    print(e)
try:
    ls.accept()
    sys.exit("the planted seed heard from the drop-in")
except socket.timeout:
    pass
PY
grep -q "not a file of a seedfs mount" "$WORK/fake.out" || fail "planted status: $(cat "$WORK/fake.out")"
ok "a planted .seedfs/status outside a seedfs mount: refused ($(head -n 1 "$WORK/fake.out" | cut -c1-80)...), nothing sent"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
