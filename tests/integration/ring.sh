#!/usr/bin/env bash
# A ring of a thousand: a seed lists as many re-seeders as a fleet of a
# thousand has (up to 1,024), gives each its place in the ring of them,
# and a replica works with its log2(n) = 10 members (more than the 8
# peers it keeps outside a ring).  A real re-seeding mount first takes
# 8 peers from 20 announced without a run (no ring); then 1,003 are
# announced with their runs (the ring: those and the mount, 1,004), each
# from its own address with its run's proof.  All announced addresses
# lead nowhere (127.1.x.y and 127.2.x.y, port 9).
# The seed must list all 1,024 and refuse the next (503); every fake's
# place must be its own, its members at places -1, -2, ..., -512; the
# mount must log its place among 1,004 with 10 peers and take all 10
# as sources within 5 s, its 8 earlier peers leaving for them (not 10 s
# later, once the seed stopped listing them), and still read every byte exact (its dead
# members' chunks come from the seed once the waits for them end).
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 1
F=model-00001-of-00001.safetensors
# The ring from 1,004 on (--fleet-from): announced from 1,003 addresses
# one after another, the fakes take a second or so to all be in, and a
# mount given its place in a ring still growing would take members it
# drops a second later.
start_seed "$MODEL" --fleet-from 1004
SP=$SEED_PORT

# The script: announces NFAKE re-seeders every 4 s (an announcement
# lasts 15), each from its own address (a seed lists only the caller's
# own, a few per address) with its run and the run's proof (its
# secret), after the first round checks every fake's place, then
# writes "ready"; with "extra" it announces one more and prints the
# status it got.
cat >"$WORK/ring.py" <<'EOF'
import hashlib, http.client, json, sys, time

host, port, nfake, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
conn = http.client.HTTPConnection(host, port, timeout=10)

def call(method, path, body=None, src=None):
    global conn
    for attempt in range(3):
        c = conn if src is None else http.client.HTTPConnection(
            host, port, timeout=10, source_address=(src, 0))
        try:
            c.request(method, path, body=body,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.read()
        except (http.client.HTTPException, OSError):
            if src is None:
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=10)
        finally:
            if src is not None:
                c.close()
    raise SystemExit("no answer from the seed")

def src(i):
    return "127.1.%d.%d" % (i >> 8, i & 255)

def addr(i):
    return src(i) + ":9"

# Fake i's run: its secret, and the instance the secret proves (the
# first 8 bytes of its SHA-256).
def secret(i):
    return hashlib.sha256(b"ring fake %d" % i).digest()

def inst(i):
    return "0x%016x" % int.from_bytes(hashlib.sha256(secret(i)).digest()[:8], "big")

def announce(i):
    return call("POST", "/v1/announce",
                json.dumps({"address": addr(i), "instance": inst(i),
                            "proof": secret(i).hex()}), src=src(i))[0]

mode = sys.argv[5] if len(sys.argv) > 5 else "ring"
if mode == "extra":
    print(announce(nfake))
    sys.exit(0)
if mode == "plain":  # no run: no place in the ring
    while True:
        for i in range(nfake):
            h = "127.2.%d.%d" % (i >> 8, i & 255)
            st = call("POST", "/v1/announce", json.dumps(
                {"address": h + ":9"}), src=h)[0]
            if st != 200:
                raise SystemExit("announce plain %d: %d" % (i, st))
        with open(out, "w") as fo:
            fo.write("ready\n")
        time.sleep(4)
rounds = 0
while True:
    for i in range(nfake):
        st = announce(i)
        if st != 200:
            raise SystemExit("announce %d: %d" % (i, st))
    rounds += 1
    if rounds == 1:
        # Every fake's place, and its members'.
        at = {}
        ans = {}
        for i in range(nfake):
            st, body = call("GET", "/v1/sources?me=" + inst(i))
            o = json.loads(body)
            f = o.get("fleet")
            if st != 200 or not f:
                raise SystemExit("fake %d: no place: %s" % (i, body[:200]))
            at[f["index"]] = addr(i)
            ans[i] = (f, [e["address"] for e in o["reseeders"]])
        sizes = {f["size"] for f, _ in ans.values()}
        n = max(sizes)
        # The one place no fake has: the real re-seeder's, the one
        # address in members lists that is no fake's.
        fakes = set(at.values())
        other = {m for f, _ in ans.values() for m in f["members"]} - fakes
        free = [k for k in range(n) if k not in at]
        if len(free) == 1 and len(other) == 1:
            at[free[0]] = other.pop()
        with open(out, "w") as fo:
            fo.write("sizes %s places %d\n" % (sorted(sizes), len(at)))
            bad = 0
            for i, (f, listed) in ans.items():
                want = [at.get((f["index"] - (1 << k)) % n) for k in range(n.bit_length() - 1 + (n & (n - 1) != 0))]
                if f["members"] != want or listed != want:
                    bad += 1
            fo.write("members %d wrong\n" % bad)
            fo.write("ready\n")
    time.sleep(4)
EOF

# The real re-seeder, and its 8 peers of 20 without a ring.
A=$WORK/a
MOUNT_LOG=a mount_seed "$A" --reseed --listen "$HOST:0" --cache-size 64M --timeout 5
APID=$MOUNT_PID
python3 "$WORK/ring.py" "$HOST" "$SP" 20 "$WORK/plain.out" plain >"$WORK/plain.log" 2>&1 &
PPID_=$!
PIDS+=("$PPID_")
plain() { grep -c '^reseeder: 127\.2\.' "$A/.seedfs/status" || true; }
for _ in $(seq 100); do
	[ "$(plain)" -ge 8 ] && break
	sleep 0.1
done
bound plain_reseeders = 8 "$(plain)" "re-seeders the mount took of 20 announced without a ring ($(cat "$WORK/plain.log"))"

# The ring: 1,003 fakes with their runs, and the mount.
python3 "$WORK/ring.py" "$HOST" "$SP" 1003 "$WORK/ring.out" >"$WORK/ring.log" 2>&1 &
RPID=$!
PIDS+=("$RPID")
for _ in $(seq 600); do
	grep -q '^ready' "$WORK/ring.out" 2>/dev/null && break
	kill -0 "$RPID" 2>/dev/null || fail "ring.py: $(cat "$WORK/ring.log")"
	sleep 0.1
done
grep -q '^ready' "$WORK/ring.out" || fail "ring.py not ready in 60 s: $(cat "$WORK/ring.log")"
grep -q '^sizes \[1004\] ' "$WORK/ring.out" || fail "not one ring of 1004: $(cat "$WORK/ring.out")"
bound ring_places = 1004 "$(sed -n 's/^sizes .* places \([0-9]*\)$/\1/p' "$WORK/ring.out")" \
	"places of the ring taken ($(cat "$WORK/ring.out"))"
bound members_wrong = 0 "$(sed -n 's/^members \([0-9]*\) wrong$/\1/p' "$WORK/ring.out")" \
	"fakes whose members or listing are not their places -1 .. -512 ($(cat "$WORK/ring.out"))"
st=$(python3 "$WORK/ring.py" "$HOST" "$SP" 1003 /dev/null extra)
bound announce_1025_status = 503 "$st" "the 1,025th announcement's HTTP status"
curl -sf "http://$HOST:$SP/metrics" >"$WORK/seed.metrics" || fail "seed metrics"
bound seed_reseeders = 1024 "$(awk '$1 == "seedfs_seed_reseeders" { print $2 }' "$WORK/seed.metrics")" \
	"seedfs_seed_reseeders in the seed's metrics"
ok "the seed lists 1024 re-seeders, one ring of 1004, each fake's members at -1 .. -512, the 1025th refused (503)"

# The mount's place: asked every second, the lanes set once it has it.
placed="fleet lanes: 1004 replicas, this one the [0-9]*-th: .* from 10 peers"
for _ in $(seq 200); do
	grep -q "$placed" "$WORK/a.log" && break
	sleep 0.1
done
grep -q "$placed" "$WORK/a.log" ||
	fail "no place among 1004 with 10 peers: $(grep -h 'lanes\|not used' "$WORK/a.log" | tail -n 5)"
# All ten members became sources (a ring's peers past RSRC_PEERS_MAX),
# the earlier 8 leaving for them, well before those would have been
# freed as unlisted (RSRC_GONE_MS, 10 s).
max=0
for _ in $(seq 50); do
	n=$(grep -c '^reseeder: 127\.1\.' "$A/.seedfs/status" || true)
	[ "$n" -gt "$max" ] && max=$n
	[ "$max" -ge 10 ] && break
	sleep 0.1
done
bound member_sources = 10 "$max" "of its 10 members, sources in 5 s: $(grep -E '^(reseeder|sources_)' "$A/.seedfs/status" | tr '\n' ' ')"
grep -q "is no longer a source: a member of this re-seeder's place in the fleet's ring comes" "$WORK/a.log" ||
	fail "no earlier peer left for a member: $(grep -c 'is a source from now on' "$WORK/a.log") added"
kill "$PPID_" 2>/dev/null || true
ok "the mount: $(grep -o 'fleet lanes: 1004 replicas, this one the [0-9]*-th' "$WORK/a.log" | tail -n 1), its 10 members sources, its earlier peers gone for them"
# Its dead members' chunks come from the seed after the waits.
timeout 120 cmp "$MODEL/$F" "$A/m/$F" || fail "$F not byte-exact"
ok "read byte-exact from a ring of dead members"
kill "$RPID" 2>/dev/null || true
unmount_check "$A" "$APID"
sanitizers_clean
