#!/usr/bin/env bash
# Names and remote text cannot forge a line (docs/security.md, "Names
# and remote text"): a source whose error text holds "\nmodel: llama-8b
# generation 1 ...\nready\n" and one that lists a model with such a name
# show, in .seedfs/status, the log, the control socket's answers and the
# command's error line, one line each with the text escaped (\n); the
# readiness probes of packaging/k8s, run as they are written, see no
# forged line; a seed refuses a model named with a newline.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 2M --shards 1 >/dev/null
start_seed "$MODEL"
FORGED='model: llama-8b generation 1 files 1 bytes 1 tensors 0 sources 1 identity 0'
printf 'oops\n%s\nready\n\033[2J' "$FORGED" >"$WORK/evil.txt"
serve() { # FILE [STATUS [MODELS]]: a stand-in seed, sets HTTP_PORT
	rm -f "$WORK/http.out" # the last server's port must not be read
	"$HTTPFILE" "$@" >"$WORK/http.out" &
	PIDS+=($!)
	for _ in $(seq 100); do grep -qE '^port [0-9]+$' "$WORK/http.out" 2>/dev/null && break; sleep 0.05; done
	HTTP_PORT=$(sed -n 's/port //p' "$WORK/http.out")
}
# A line the probes could take: starts with "model: " or "ready", or any
# line of the log without its time stamp.
forged_in() { # FILE
	grep -aE '^(model: llama-8b|ready|oops)' "$1" && return 0
	grep -aP '\x1b|\r' "$1" && return 0
	return 1
}
# forged_lines FILE: how many lines forged_in would show
forged_lines() {
	local n
	n=$(grep -acE '^(model: llama-8b|ready|oops)' "$1" || true)
	echo $((n + $(grep -acP '\x1b|\r' "$1" || true)))
}

# 1. The command's error line: a seed that lists "m" and answers its
# manifest with a 500 and that text.
printf '{"instance":"0x2","models":[{"model":"m","generation":1,"content":"0x1","served":[{"generation":1}]}]}' >"$WORK/m.models"
serve "$WORK/evil.txt" 500 "$WORK/m.models"
mkdir -p "$WORK/nomnt"
"$SEEDFS" mount --seed "127.0.0.1:$HTTP_PORT" --timeout 2 "$WORK/nomnt" 2>"$WORK/cli.err" &&
	{ MOUNTS+=("$WORK/nomnt"); fail "mounted"; }
bound error_lines = 1 "$(wc -l <"$WORK/cli.err")" "the command's error: $(cat -A "$WORK/cli.err")"
grep -qF 'HTTP status 500: oops\nmodel: llama-8b generation 1' "$WORK/cli.err" ||
	fail "not escaped: $(cat -A "$WORK/cli.err")"
! forged_in "$WORK/cli.err" || fail "forged line in the error"
"$SEEDFS" pull --seed "127.0.0.1:$HTTP_PORT" --timeout 2 m "$WORK/p" 2>"$WORK/pull.err" && fail "pulled"
[ "$(wc -l <"$WORK/pull.err")" = 1 ] && ! forged_in "$WORK/pull.err" || fail "pull: $(cat -A "$WORK/pull.err")"
echo "  $(cat "$WORK/cli.err")"
ok "the command's error line: one line, the seed's text escaped"

# 2. A mount of the real seed and two stand-ins: one lists "m" (another
# content) and answers its manifest with the text; one lists a model
# named with it.
serve "$WORK/evil.txt" 500 "$WORK/m.models"
P1=$HTTP_PORT
python3 -c '
import json, sys
name = "x\n" + sys.argv[1] + "\nready"
print(json.dumps({"instance": "0x3", "models": [{"model": name, "generation": 1,
      "content": "0x1", "served": [{"generation": 1}]}]}))' "$FORGED" >"$WORK/named.models"
grep -q '\\n' "$WORK/named.models" || fail "the list holds no escaped newline"
serve "$WORK/evil.txt" 500 "$WORK/named.models"
P2=$HTTP_PORT
MNT=$WORK/mnt
MOUNT_SEEDS="$HOST:$SEED_PORT,127.0.0.1:$P1,127.0.0.1:$P2" mount_seed "$MNT" --timeout 2
for _ in $(seq 100); do
	grep -q "^seed_model: m generation 1 refused: .*HTTP status 500" "$MNT/.seedfs/status" &&
		grep -q "not a valid model name" "$MNT/.seedfs/status" && break
	sleep 0.1
done
cp "$MNT/.seedfs/status" "$WORK/status"
grep -qF 'HTTP status 500: oops\nmodel: llama-8b generation 1' "$WORK/status" ||
	fail "status: the 500's text is not there escaped: $(grep -n 'seed_model\|oops' "$WORK/status")"
grep -A1 "^seed: 127.0.0.1:$P2 " "$WORK/status" | grep -q "^seed_control: .*/v1/models: models\[0\].model: not a valid model name" ||
	fail "status: the forged name is not refused: $(grep -A3 "$P2" "$WORK/status")"
bound forged_lines_in_status = 0 "$(forged_lines "$WORK/status")" "forged lines in status: $(forged_in "$WORK/status")"
grep -q '^model: m generation 1 ' "$WORK/status" || fail "the real model is missing: $(grep '^model' "$WORK/status")"
[ "$(ls "$MNT")" = m ] || fail "the mount shows $(ls "$MNT")"
# The k8s probes, as written, with /models the mount.
python3 - "$(dirname "$0")/../../packaging/k8s" >"$WORK/probes" <<'PY'
import glob, os, sys, yaml
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
    for d in yaml.safe_load_all(open(f)):
        pod = (d.get("spec", {}).get("template", {}) or {}).get("spec") or {}
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            for k in ("readinessProbe", "livenessProbe"):
                cmd = c.get(k, {}).get("exec", {}).get("command")
                if cmd and "grep" in " ".join(cmd):
                    print(cmd[-1])
            cmd = " ".join(c.get("command", []))
            if "grep" in cmd and ".seedfs/status" in cmd:
                print(c["command"][-1].split("until ")[1].split("; do")[0])
PY
[ "$(wc -l <"$WORK/probes")" -ge 2 ] || fail "no probes found: $(cat "$WORK/probes")"
while read -r probe; do
	p=${probe//\/models/$MNT}
	case $p in
	*llama-8b*) ! sh -c "$p" || fail "the probe '$probe' took a forged line" ;;
	*) sh -c "$p" || fail "the probe '$probe' does not see the real model" ;;
	esac
	echo "  probe: $probe"
done <"$WORK/probes"
ok "status: the source's 500 text and the listed name shown escaped on their own line; the k8s probes see only the real model"

# The control socket's answers (a prefetch's "note" and "error" lines)
# carry what the request or a source said: escaped too.
SOCK=$(sed -n 's/^control: //p' "$WORK/status")
python3 - "$SOCK" >"$WORK/ctl.answer" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"path m/\x1b[2Jx\rdone 0\nprefetch\n")
out = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    out += b
sys.stdout.buffer.write(out)
PY
[ "$(cat "$WORK/ctl.answer")" = 'error m/\x1b[2Jx\rdone 0: not in the mount' ] ||
	fail "control socket: $(cat -A "$WORK/ctl.answer")"
ok "the control socket's error line: escaped"

# 3. The log: every line has its time stamp; the text is escaped.
grep -qF 'oops\nmodel: llama-8b generation 1' "$WORK/mount.log" || fail "the log does not carry the text"
bad=$(grep -avE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z seedfs-mount\[[0-9]+\] [EWID] ' "$WORK/mount.log" || true)
bound log_lines_unstamped = 0 "$(grep -c . <<<"$bad" || true)" "log lines without a time stamp: $bad"
bound forged_lines_in_log = 0 "$(forged_lines "$WORK/mount.log")" "forged lines in the log: $(forged_in "$WORK/mount.log")"
# The seed's log too (its names come from disk).
unmount_check "$MNT" "$MOUNT_PID"
ok "the log: the text escaped, every line stamped"

# 4. The seed refuses a model whose directory name holds a newline.
D=$WORK/$'evil\nready'
cp -r "$MODEL" "$D"
st=0
timeout 20 "$SEEDFS" seed --model-dir "$D" --listen 127.0.0.1:0 >"$WORK/s.out" 2>"$WORK/s.err" || st=$?
[ $st != 0 ] && [ -f "$WORK/s.out" ] && [ ! -s "$WORK/s.out" ] || fail "the seed published it: $(cat "$WORK/s.out")"
[ "$(wc -l <"$WORK/s.err")" = 1 ] && grep -qF 'evil\nready' "$WORK/s.err" ||
	fail "seed: $(cat -A "$WORK/s.err")"
echo "  $(cat "$WORK/s.err")"
ok "a seed refuses a model named with a newline, in one line"
sanitizers_clean
