#!/usr/bin/env bash
# Secrets left out of core dumps (docs/security.md, "Secrets in
# memory").  In libseedfs (an engine's process, whose dumpability is
# its own): the token, in the engine API and the publisher, and the
# publisher's TLS key lie on pages whose VmFlags say `dd`
# (MADV_DONTDUMP), read through /proc/PID/mem (tests/tools/memfind.py);
# so does a seed daemon's token.  The daemons are undumpable
# (PR_SET_DUMPABLE 0): run as uid 65534, a tcp seed's and a mount's
# /proc/PID/environ belong to root and the same user cannot read them; a seed serving shm stays dumpable (its readers copy
# with process_vm_readv) and says so, and an undumpable mount of that
# user reads it over shm byte-exact.  Root only (it runs daemons as
# another user).
source "$(dirname "$0")/lib.sh" "$1"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (daemons as another user)"; exit 77; }
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=$(python_for_build)
export PYTHONPATH=$SRC/python SEEDFS_LIB=$BUILD/libseedfs.so
MEMFIND=$SRC/tests/tools/memfind.py
NOBODY=65534

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 2 >/dev/null
F1=model-00001-of-00002.safetensors
umask 077
openssl rand -hex 32 >"$WORK/tok"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/tls.key" 2>/dev/null
umask 022
openssl req -x509 -new -key "$WORK/tls.key" -out "$WORK/tls.pem" -days 1 -subj /CN=localhost 2>/dev/null
TOKEN=$(cat "$WORK/tok")
# A line of the TLS key's base64 (the key itself, not its armour).
KEYLINE=$(sed -n 2p "$WORK/tls.key")
[ ${#KEYLINE} -ge 40 ] || fail "no line of base64 in the TLS key file"

# found PID NEEDLE: "dd=N other=M" for that needle
found() { python3 "$MEMFIND" "$1" "$2" | cut -d' ' -f2-; }

# The seed daemon (root, tcp): its token on a dd page.
start_seed "$MODEL" --token-file "$WORK/tok" --protocol tcp
SP=$SEED_PORT
got=$(found "$SEED_PID" "$TOKEN")
bound seed_token_dd_copies ">=" 1 "$(sed -n 's/^dd=\([0-9]*\).*/\1/p' <<<"$got")" "the seed's token on pages left out of dumps ($got)"
ok "seed: the token on a dd page ($got)"

# libseedfs in a Python process: an engine API client with the token,
# and a publisher with the token and a TLS key.
mkfifo "$WORK/go"
$PY - "$HOST:$SP" "$WORK/tok" "$WORK/tls.pem" "$WORK/tls.key" "$WORK/go" >"$WORK/lib.out" 2>&1 <<'PY' &
import sys
import seedfs
seed, tok, cert, key, go = sys.argv[1:]
c = seedfs.Client(seed, "m", token_file=tok)
p = seedfs.Publisher("t", listen="127.0.0.1:0", token_file=tok,
                     tls_cert=cert, tls_key=key)
print("ready", len(c.tensors), flush=True)
open(go).read()  # until the test has looked
c.close()
p.close()
PY
LPID=$!
PIDS+=("$LPID")
for _ in $(seq 200); do grep -q '^ready' "$WORK/lib.out" && break; sleep 0.05; done
grep -q '^ready' "$WORK/lib.out" || fail "the library's process: $(cat "$WORK/lib.out")"
gt=$(found "$LPID" "$TOKEN")
gk=$(found "$LPID" "$KEYLINE")
echo >"$WORK/go"
wait "$LPID" || fail "the library's process: $(cat "$WORK/lib.out")"
case $gt in dd=0*) fail "libseedfs: the token is on no page left out of dumps: $gt" ;; esac
case $gk in dd=0*) fail "libseedfs: the TLS key is on no page left out of dumps: $gk" ;; esac
ok "libseedfs (client and publisher): the token ($gt) and the TLS key ($gk) on dd pages"

# Daemons of another user.  Their files in a directory of their own
# outside $WORK (root's alone); their socket directory there too.
PUB=$(mktemp -d /tmp/seedfs-dumps.XXXXXX)
chmod 755 "$PUB"
rm_pub() { rm -rf "$PUB"; }
EXIT_HOOKS+=(rm_pub)
cp -r "$MODEL" "$PUB/m"
install -m 600 -o "$NOBODY" "$WORK/tok" "$PUB/tok"
mkdir -m 700 "$PUB/run" "$PUB/mnt" "$PUB/log"
chown "$NOBODY:$NOBODY" "$PUB/run" "$PUB/mnt" "$PUB/log"
chmod -R a+rX "$PUB/m"
AS=(setpriv --reuid "$NOBODY" --regid "$NOBODY" --clear-groups env XDG_RUNTIME_DIR="$PUB/run")
# The command too: the build directory may be one uid 65534 cannot
# reach (a checkout under /root, a mktemp -d of CI).
install -m 755 "$SEEDFS" "$PUB/seedfs"
SEEDFS=$PUB/seedfs
# owner PID: the owner of /proc/PID/environ (root's when undumpable)
owner() { stat -c %u "/proc/$1/environ"; }
# environ_denied PID: uid 65534 may not read /proc/PID/environ
environ_denied() { ! "${AS[@]}" cat "/proc/$1/environ" >/dev/null 2>&1; }

SEED_WRAP=("${AS[@]}")
SEED_LOG=tcp start_seed "$PUB/m" --token-file "$PUB/tok" --protocol tcp
bound environ_owner_uid = 0 "$(owner "$SEED_PID")" "a tcp seed of uid $NOBODY: the owner of /proc/$SEED_PID/environ (root's: undumpable)"
environ_denied "$SEED_PID" || fail "uid $NOBODY reads its own tcp seed's /proc/PID/environ"
ok "a tcp seed of uid $NOBODY: undumpable (/proc/PID/environ is root's, closed to its own user)"

SEED_LOG=shm start_seed "$PUB/m" --token-file "$PUB/tok" --protocol shm --log-level info
SEED_WRAP=()
SHP=$SEED_PORT
[ "$(owner "$SEED_PID")" = "$NOBODY" ] || fail "a shm seed of uid $NOBODY is undumpable: its readers cannot copy"
grep -q "I seed: stays dumpable: it serves shm, whose readers of uid $NOBODY copy with process_vm_readv" "$WORK/shm.err" ||
	fail "the shm seed did not say it stays dumpable: $(cat "$WORK/shm.err")"
ok "a shm seed of uid $NOBODY: dumpable, and says why"

# A mount of uid 65534 (fusermount3) reading that seed over shm.
"${AS[@]}" "$SEEDFS" mount --seed "$HOST:$SHP" --token-file "$PUB/tok" --protocol shm \
	"$PUB/mnt" --log-file "$PUB/log/mount.log" 2>"$WORK/mount.err" ||
	fail "a mount of uid $NOBODY: $(cat "$WORK/mount.err")"
MOUNTS+=("$PUB/mnt")
MPID=$(sed -n 's/.*seedfs-mount\[\([0-9]*\)\] I mount: mounted.*/\1/p' "$PUB/log/mount.log" | tail -n 1)
[ -n "$MPID" ] || fail "no pid in the mount's log: $(cat "$PUB/log/mount.log")"
PIDS+=("$MPID")
MOUNT_PIDS+=("$MPID")
"${AS[@]}" cmp "$PUB/m/$F1" "$PUB/mnt/m/$F1" || fail "the mount of uid $NOBODY over shm: $F1 differs"
bound environ_owner_uid = 0 "$(owner "$MPID")" "a mount of uid $NOBODY: the owner of /proc/$MPID/environ (root's: undumpable)"
environ_denied "$MPID" || fail "uid $NOBODY reads its own mount's /proc/PID/environ"
ok "a mount of uid $NOBODY: undumpable, and reads the shm seed byte-exact"
unmount_check "$PUB/mnt" "$MPID"
