#!/usr/bin/env bash
# seedfs.safe_open on a file of a mount (the drop-in) believes only a
# real seedfs mount of root's or this user's (docs/security.md): a
# mount's daemon answers "identify" on its control socket with the
# device it serves and its status, and the drop-in reads byte-exact with
# what that says (a --trust-key mount's key carried over).  A mount of
# type fuse.seedfs that is no seedfs mount (tests/tools/fakeseedfs.c)
# and names a listener of ours as its seed and the test's token file is
# refused in one line, and the listener hears nothing: one mounted by
# another user (uid 65534); one of root's whose control socket is
# answered by uid 65534; one of root's naming the real mount's socket
# (whose daemon serves another device).  Root only (it mounts as
# another user).
source "$(dirname "$0")/lib.sh" "$1"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a mount as another user)"; exit 77; }
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=$(python_for_build)
export PYTHONPATH=$SRC/python SEEDFS_LIB=$BUILD/libseedfs.so
FAKE=$BUILD/tests/fakeseedfs
NOBODY=65534

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2 >/dev/null
F1=model-00001-of-00002.safetensors
umask 077
openssl rand -hex 32 >"$WORK/tok"
umask 022
TOKEN=$(cat "$WORK/tok")
openssl genpkey -algorithm ed25519 -out "$WORK/sign.key" 2>/dev/null
chmod 600 "$WORK/sign.key"
openssl pkey -in "$WORK/sign.key" -pubout -out "$WORK/sign.pub"
start_seed "$MODEL" --token-file "$WORK/tok" --digest sha256 --sign-key "$WORK/sign.key"

# The seeds a fake mount names: a listener that writes down every
# connection and what it sends.
python3 -c 'import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, a = s.accept(); c.settimeout(2)
    with open(sys.argv[1], "ab") as f:
        f.write(b"connection from %s\n" % str(a).encode())
        try:
            f.write(c.recv(65536))
        except OSError:
            pass
    c.close()' "$WORK/heard" >"$WORK/listen.out" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/listen.out" ] && break; sleep 0.05; done
LPORT=$(cat "$WORK/listen.out")
[ -n "$LPORT" ] || fail "the listener said no port"
: >"$WORK/heard"

# dropin FILE [KEY=VALUE...]: safe_open FILE, check every tensor against
# the local file; prints "TENSORS PULLED" and the client's manifest_trust.
dropin() {
	$PY - "$@" <<'PY'
import json, struct, sys
import seedfs
path, local = sys.argv[1], sys.argv[2]
with open(local, "rb") as f:
    data = f.read()
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n])
with seedfs.safe_open(path, framework="numpy") as f:
    for k in f.keys():
        a, b = h[k]["data_offsets"]
        if f.get_tensor(k).tobytes() != data[8 + n + a:8 + n + b]:
            sys.exit("%s differs" % k)
    print(len(f.keys()), f.client.bytes_pulled)
    print([l for l in f.client.status().splitlines()
           if l.startswith("manifest_trust:")][0])
PY
}

# The real mount (root's, with the token and the trust key): its daemon
# says which device it serves, and the drop-in carries its settings.
MNT=$WORK/mnt
mount_seed "$MNT" --token-file "$WORK/tok" --trust-key "$WORK/sign.pub"
SOCK=$(sed -n 's/^control: //p' "$MNT/.seedfs/status")
[ -S "$SOCK" ] || fail "the mount names no control socket: $(cat "$MNT/.seedfs/status")"
$PY - "$SOCK" "$MNT" >"$WORK/identify.out" 2>&1 <<'PY' || fail "identify: $(cat "$WORK/identify.out")"
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(b"identify\n")
buf = b""
while not buf.endswith((b"done 0\n",)) and b"\nerror " not in buf:
    c = s.recv(65536)
    if not c:
        break
    buf += c
lines = buf.decode().splitlines()
st = os.stat(sys.argv[2])
want = "mount %d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))
assert lines[0] == want, (lines[0], want)
assert lines[-1] == "done 0", lines[-1]
status = [l[len("status "):] for l in lines[1:-1]]
assert all(l.startswith("status ") for l in lines[1:-1])
assert "control: " + sys.argv[1] in status, status
with open(os.path.join(sys.argv[2], ".seedfs", "status")) as f:
    mine = [l for l in f.read().splitlines() if l.startswith("control")]
assert mine == [l for l in status if l.startswith("control")], mine
print(want, len(status))
PY
ok "identify: the daemon says $(cat "$WORK/identify.out" | cut -d' ' -f1-2) (the mount's device) and its status"
dropin "$MNT/m/$F1" "$MODEL/$F1" >"$WORK/dropin.out" 2>&1 || fail "drop-in: $(tail -n 3 "$WORK/dropin.out")"
read -r nt np <"$WORK/dropin.out"
[ "${np:-0}" -gt 0 ] || fail "the drop-in pulled nothing: $(cat "$WORK/dropin.out")"
grep -qx "manifest_trust: signed by a key in $WORK/sign.pub, every chunk checked with its SHA-256" "$WORK/dropin.out" ||
	fail "the drop-in did not carry the mount's trust key: $(cat "$WORK/dropin.out")"
ok "drop-in on the real mount: $nt tensors byte-exact, $np bytes pulled, the mount's --trust-key carried over"

# fake NAME UID SOCK: a fake mount at $WORK/NAME, mounted as UID, whose
# status names the listener, the token file and SOCK; sets FAKE_MNT.
fake() {
	local d=$WORK/$1.src
	FAKE_MNT=$WORK/$1
	mkdir -p "$d/.seedfs" "$d/m" "$FAKE_MNT"
	cp "$MODEL/$F1" "$d/m/"
	cat >"$d/.seedfs/status" <<EOF
seedfs: fake
seed: 127.0.0.1:$LPORT up
protocol: tcp (tcp)
control_security: token $WORK/tok; no tls
manifest_trust: none (unsigned manifests taken; --trust-key)
control: $3
models: 1
model: m generation 1
EOF
	chmod -R a+rX "$d"
	MOUNTS+=("$FAKE_MNT")
	"$FAKE" "$d" "$FAKE_MNT" "$2" >"$WORK/$1.out" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do grep -q '^mounted$' "$WORK/$1.out" && break; sleep 0.05; done
	grep -q "^[0-9]* [0-9]* [0-9:]* / $FAKE_MNT .* - fuse.seedfs fakeseedfs .*user_id=$2," /proc/self/mountinfo ||
		fail "$1: no fuse.seedfs mount of uid $2: $(cat "$WORK/$1.out"; grep "$FAKE_MNT" /proc/self/mountinfo)"
}

# refused FILE LINE: the drop-in on FILE fails with exactly LINE (the
# exception's), and the listener has heard nothing.
refused() {
	local got
	if $PY -c 'import seedfs, sys; seedfs.safe_open(sys.argv[1], framework="numpy")' "$1" \
		>"$WORK/refused.out" 2>&1; then
		fail "the drop-in opened $1"
	fi
	got=$(tail -n 1 "$WORK/refused.out")
	[ "$got" = "$2" ] || fail "expected: $2; got: $(cat "$WORK/refused.out")"
	bound listener_connections = 0 "$(grep -c . "$WORK/heard")" "the listener heard: $(cat "$WORK/heard")"
}

# A socket a fake mount names, which writes down whoever connects.
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
while True:
    c, _ = s.accept()
    open(sys.argv[2], "a").write("connected\n")
    c.close()' "$WORK/any.sock" "$WORK/any.heard" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$WORK/any.sock" ] && break; sleep 0.05; done
: >"$WORK/any.heard"

# 1. Mounted by uid 65534 (what -o subtype=seedfs gives any user).
fake other "$NOBODY" "$WORK/any.sock"
refused "$FAKE_MNT/m/$F1" \
	"PermissionError: $FAKE_MNT/m/$F1: the seedfs mount at $FAKE_MNT belongs to uid $NOBODY, not to root or this user (uid 0): not trusted, nothing sent to the seeds it names"
bound named_socket_connections = 0 "$(grep -c . "$WORK/any.heard")" "the socket the fake mount names was connected to"
ok "a fuse.seedfs mount of uid $NOBODY: refused in one line, its control socket not even asked, no token sent"

# 2. Root's mount whose control socket is answered by uid 65534, which
# names that mount's device: only the answerer's uid refuses it.
fake rootfake 0 "$WORK/nobody.sock"
$PY - "$WORK/nobody.sock" "$FAKE_MNT" "$NOBODY" "$LPORT" "$WORK/tok" \
	>"$WORK/nobody.out" 2>&1 <<'PY' &
import os, socket, sys
path, mnt, uid, port, tok = sys.argv[1:]
st = os.stat(mnt)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
os.setgroups([])
os.setresgid(int(uid), int(uid), int(uid))
os.setresuid(int(uid), int(uid), int(uid))
s.listen(4)  # SO_PEERCRED: the credentials at listen(2)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.recv(100)
    c.sendall(("mount %d:%d\nstatus seed: 127.0.0.1:%s up\n"
               "status control_security: token %s; no tls\n"
               "status model: m generation 1\ndone 0\n" % (
                   os.major(st.st_dev), os.minor(st.st_dev), port,
                   tok)).encode())
    c.close()
PY
NPID=$!
PIDS+=("$NPID")
for _ in $(seq 100); do grep -q listening "$WORK/nobody.out" && break; sleep 0.05; done
refused "$FAKE_MNT/m/$F1" \
	"PermissionError: $FAKE_MNT/m/$F1: the control socket $WORK/nobody.sock of the seedfs mount at $FAKE_MNT is answered by uid $NOBODY (pid $NPID), not by root or this user (uid 0): not trusted, nothing sent to the seeds it names"
ok "a control socket answered by uid $NOBODY (SO_PEERCRED): refused in one line, no token sent"

# 3. Root's mount naming the real mount's socket: that daemon is root's,
# but serves another device.
fake elsewhere 0 "$SOCK"
dev() { $PY -c 'import os, sys; s = os.stat(sys.argv[1]); print("%d:%d" % (os.major(s.st_dev), os.minor(s.st_dev)))' "$1"; }
refused "$FAKE_MNT/m/$F1" \
	"PermissionError: $FAKE_MNT/m/$F1: the daemon answering $SOCK (pid $MOUNT_PID) serves the mount of device $(dev "$MNT"), not the seedfs mount at $FAKE_MNT (device $(dev "$FAKE_MNT")): not trusted, nothing sent to the seeds it names"
ok "a fake mount naming a real daemon's socket: refused (that daemon serves device $(dev "$MNT")), no token sent"

refute --empty-ok --why "the token reached the listener" -F "$TOKEN" "$WORK/heard"
unmount_check "$MNT" "$MOUNT_PID"
