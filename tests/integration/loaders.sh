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
[ -x "$PYENV/bin/python" ] || fail "no venv of the Python loaders at $PYENV (packaging/deps.sh)"
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
$PY "$LT" transformers "$MNT/llama" "$WORK/d/llama" >"$WORK/tf.out" 2>&1 ||
	fail "transformers: $(tail -n 5 "$WORK/tf.out")"
ok "$(tail -n 1 "$WORK/tf.out")"

# The drop-in: one script, either import.
files=("$MNT"/m/*.safetensors "$MNT"/llama/*.safetensors)
$PY "$LT" dump safetensors "${files[@]}" >"$WORK/st.dump" 2>"$WORK/dump.err" ||
	fail "dump with safetensors: $(tail -n 3 "$WORK/dump.err")"
$PY "$LT" dump seedfs "${files[@]}" >"$WORK/sfs.dump" 2>"$WORK/dump.err" ||
	fail "dump with seedfs: $(tail -n 3 "$WORK/dump.err")"
pulled=$(sed -n 's/^seedfs pulled \([0-9]*\) bytes$/\1/p' "$WORK/dump.err")
[ "${pulled:-0}" -gt 0 ] || fail "seedfs.safe_open pulled nothing from the seed: $(cat "$WORK/dump.err")"
$PY "$LT" compare-dumps "$WORK/st.dump" "$WORK/sfs.dump" >"$WORK/cmp.out" 2>&1 ||
	fail "$(tail -n 3 "$WORK/cmp.out")"
ok "$(cat "$WORK/cmp.out") (${#files[@]} files; $pulled bytes pulled from the seed, not read through the mount)"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
