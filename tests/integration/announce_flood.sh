#!/usr/bin/env bash
# No token holder fills, poisons or squats a seed's table of re-seeders
# (docs/security.md, "Announced re-seeders").  One client with the fleet
# token, from 127.0.0.1, announces 1,024 addresses of its own (1,024
# ports) and 64 of other hosts (a genuine re-seeder's among them): the
# seed lists 4 of them (--announce-per-host's default), answers the
# other ports 429 and the other hosts 403, counts each refusal by reason
# in /metrics and says so in one warn line per caller per 10 s with a
# count.  A squatter claims a live re-seeder's run, and later the same
# run once it lapsed: 403 both times, without a proof and with a wrong
# one, the live one staying listed at its address.  A genuine
# re-seeding mount started afterwards (its own address) is listed to a
# new replica beside the flooder's 4, serves it (bytes from it in the
# replica's status) and the replica reads byte-exact.  Seeds given one
# --ring-key-file place runs alike, one without it elsewhere; the fleet
# token is refused as that secret.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 24M --shards 2
F1=model-00001-of-00002.safetensors
F2=model-00002-of-00002.safetensors
umask 077
openssl rand -hex 32 >"$WORK/fleet.tok"
umask 022
TOKEN=$(cat "$WORK/fleet.tok")
start_seed "$MODEL" --token-file "$WORK/fleet.tok"
SP=$SEED_PORT
U=http://$HOST:$SP
get() { curl -sf -H "Authorization: Bearer $TOKEN" "$U$1"; }
metric() { get /metrics | sed -n "s/^$1 \([0-9]*\)$/\1/p"; }
# bytes MNT PREFIX: bytes a mount read from the source whose status
# block starts with PREFIX
bytes() {
	awk -v s="$2" 'index($0, s) == 1 { on = 1; next }
		/^(seed|reseeder): / { on = 0 }
		on && $1 == "seed_bytes:" { n += $2 } END { print n + 0 }' "$1/.seedfs/status"
}

# The token holder's tool: "flood" announces its own address at PORTS
# ports (0.0.0.0 and its address, in turn) and OTHERS addresses of other
# hosts, prints each status code's count; "keep" then announces its
# first 4 ports every 4 s; "squat ADDR INST" claims run INST for ADDR
# without a proof and with a wrong one, printing both codes.
cat >"$WORK/flood.py" <<'EOF'
import collections, http.client, json, os, sys, time

host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mode, args = sys.argv[4], sys.argv[5:]

def post(body, src="127.0.0.1", to=None):
    c = http.client.HTTPConnection(host, to or port, timeout=10,
                                   source_address=(src, 0))
    try:
        c.request("POST", "/v1/announce", body=json.dumps(body),
                  headers={"Authorization": "Bearer " + token,
                           "Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode().strip()
    finally:
        c.close()

if mode == "flood":
    ports, others, victim = int(args[0]), int(args[1]), args[2]
    seen = collections.Counter()
    said = {}
    for i in range(ports):
        h = "0.0.0.0" if i % 2 else "127.0.0.1"
        st, text = post({"address": "%s:%d" % (h, 20000 + i)})
        seen[st] += 1
        said.setdefault(st, text)
    for i in range(others):
        a = victim if i == 0 else ("10.9.%d.%d:7070" % (i >> 8, i & 255)
                                   if i % 2 else "127.0.%d.%d:80" % (1 + i // 250, i % 250 + 2))
        st, text = post({"address": a})
        seen[st] += 1
        said.setdefault(st, text)
    for st in sorted(seen):
        print("%d %d %s" % (st, seen[st], said[st]))
elif mode == "keep":
    while True:
        for i in range(4):
            post({"address": "127.0.0.1:%d" % (20000 + i)})
            post({"address": "127.0.0.1:%d" % (20100 + i)})  # refused
        time.sleep(4)
elif mode == "ring":
    # 16 runs, each from 127.3.0.(10 + i) with its proof, announced to
    # every seed given; then each run's place at each seed, a line a run.
    import hashlib
    ports = [int(p) for p in args]
    runs = []
    for i in range(16):
        secret = hashlib.sha256(b"ring key test %d" % i).digest()
        inst = "0x%016x" % int.from_bytes(
            hashlib.sha256(secret).digest()[:8], "big")
        src = "127.3.0.%d" % (10 + i)
        runs.append(inst)
        for p in ports:
            st, text = post({"address": src + ":9", "instance": inst,
                             "proof": secret.hex()}, src, p)
            if st != 200:
                raise SystemExit("announce %s to %d: %d %s" % (src, p, st, text))
    for inst in runs:
        at = []
        for p in ports:
            c = http.client.HTTPConnection(host, p, timeout=10)
            c.request("GET", "/v1/sources?me=" + inst,
                      headers={"Authorization": "Bearer " + token})
            at.append(str(json.loads(c.getresponse().read())["fleet"]["index"]))
            c.close()
        print(" ".join(at))
elif mode == "squat":
    addr, inst = args[0], args[1]
    src = addr.rsplit(":", 1)[0]
    a = post({"address": addr, "instance": inst}, src)
    b = post({"address": addr, "instance": inst,
              "proof": os.urandom(32).hex()}, src)
    print("%d %d %s" % (a[0], b[0], b[1]))
EOF

# --- A genuine re-seeder: the victim of the squatter. ------------------
V=$WORK/v
MOUNT_LOG=v mount_seed "$V" --reseed --listen 127.0.0.20:0 --token-file "$WORK/fleet.tok" \
	--cache-size 64M
VPID=$MOUNT_PID
VADDR=$(awk '$1 == "reseed:" { print $2 }' "$V/.seedfs/status")
[[ "$VADDR" == 127.0.0.20:* ]] || fail "the victim's address: ${VADDR:-none}"
for _ in $(seq 100); do
	get /v1/sources | grep -qF "\"$VADDR\"" && break
	sleep 0.1
done
get /v1/sources | grep -qF "\"$VADDR\"" || fail "the seed does not list $VADDR: $(get /v1/sources)"
VINST=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://$VADDR/v1/models" |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["instance"])')
[[ "$VINST" == 0x* ]] || fail "the victim's instance: ${VINST:-none}"
# As the seed spells an instance in its lines: 16 hex digits (this one
# may have leading zeros).
VINST16=$(printf '0x%016x' "$VINST")
ok "a genuine re-seeder at $VADDR, run $VINST, listed"

# --- The flood: 1,024 ports of its own, 64 other hosts' addresses. ------
t0=$(now_ms)
python3 "$WORK/flood.py" "$HOST" "$SP" "$TOKEN" flood 1024 64 "$VADDR" >"$WORK/flood.out" ||
	fail "flood.py: $(cat "$WORK/flood.out")"
took=$(($(now_ms) - t0))
cat "$WORK/flood.out"
grep -q "^200 4 ok$" "$WORK/flood.out" || fail "not 4 of its ports listed: $(cat "$WORK/flood.out")"
grep -q "^429 1020 announce: 127.0.0.1:20004: 127.0.0.1 has as many re-seeders listed as one address may (the seed's --announce-per-host)$" \
	"$WORK/flood.out" || fail "its other ports: $(cat "$WORK/flood.out")"
grep -q "^403 64 announce: address $VADDR is not the caller's (127.0.0.1): a re-seeder announces its own address (or 0.0.0.0:PORT for the one it calls from)$" \
	"$WORK/flood.out" || fail "other hosts' addresses: $(cat "$WORK/flood.out")"
[ "$(wc -l <"$WORK/flood.out")" = 3 ] || fail "other answers: $(cat "$WORK/flood.out")"
lines=$(grep -c " W seed: refused an announcement from 127.0.0.1: " "$WORK/seed.err" || true)
python3 "$WORK/flood.py" "$HOST" "$SP" "$TOKEN" keep >/dev/null 2>&1 &
PIDS+=($!)
# Listed: the victim and the flooder's 4, nothing else.
get "/v1/sources?for=0000000000000001" >"$WORK/sources.json"
python3 - "$WORK/sources.json" "$VADDR" <<'EOF' || fail "sources: $(cat "$WORK/sources.json")"
import json, sys
o = json.load(open(sys.argv[1]))
got = sorted(e["address"] for e in o["reseeders"])
want = sorted(["127.0.0.1:%d" % (20000 + i) for i in range(4)] + [sys.argv[2]])
sys.exit(0 if o["live"] == 5 and got == want else 1)
EOF
[ "$(metric 'seedfs_seed_reseeders')" = 5 ] || fail "seedfs_seed_reseeders: $(get /metrics | grep reseeders)"
[ "$(metric 'seedfs_seed_announce_refused_total{reason="cap"}')" -ge 1020 ] &&
	[ "$(metric 'seedfs_seed_announce_refused_total{reason="address"}')" = 64 ] &&
	[ "$(metric 'seedfs_seed_announce_refused_total{reason="full"}')" = 0 ] ||
	fail "metrics: $(get /metrics | grep announce_refused)"
# Told, once per 10 s per caller (the flood took $took ms), with a count.
grep -q " W seed: refused an announcement from 127.0.0.1: announce: 127.0.0.1:20004: 127.0.0.1 has as many re-seeders listed as one address may (the seed's --announce-per-host) (1 refused from it so far)$" \
	"$WORK/seed.err" || fail "no warn line: $(grep 'refused' "$WORK/seed.err" | head -n 3)"
[ "$lines" -le $((took / 10000 + 1)) ] || fail "$lines warn lines for a flood of $took ms"
ok "1,088 announcements from one token holder in $took ms: 4 listed, 1,020 refused (429, cap), 64 refused (403, address); $lines warn line"

# --- A squatter of the live run, from its own address. -----------------
read -r a b why < <(python3 "$WORK/flood.py" "$HOST" "$SP" "$TOKEN" squat 127.0.0.30:9 "$VINST")
[ "$a" = 403 ] && [ "$b" = 403 ] || fail "squatting $VINST (live): $a, $b: $why"
[ "$why" = "announce: instance $VINST16: the proof is not that run's (a run is claimed with its secret, whose SHA-256 begins with it)" ] ||
	fail "squatter's answer: $why"
get "/v1/sources?me=$VINST" >"$WORK/me.json"
grep -qF '"127.0.0.30:9"' "$WORK/me.json" && fail "the squatter is listed: $(cat "$WORK/me.json")"
get /v1/sources | grep -qF "\"$VADDR\"" || fail "the victim left the list"
# The victim still announces (every 5 s) and is answered 200: the seed
# renews its listing (expires_in_ms goes up again) within 10 s.
expires() {
	get /v1/sources | jq -r --arg a "$VADDR" '.reseeders[] | select(.address == $a) | .expires_in_ms'
}
e0=$(expires || true)
[ -n "$e0" ] || fail "the victim left the list: $(get /v1/sources)"
t_end=$(($(now_ms) + 10000))
renewed=0
while [ "$(now_ms)" -lt "$t_end" ]; do
	sleep 0.1
	e=$(expires || true)
	[ -n "$e" ] || fail "the victim left the list: $(get /v1/sources)"
	[ "$e" -gt "$e0" ] && renewed=1 && break
	e0=$e
done
[ $renewed = 1 ] || fail "the seed did not renew $VADDR's listing in 10 s (it announces every 5 s): $(get /v1/sources)"
grep -q "announcing to .*: " "$WORK/v.log" && fail "the victim's announcements refused: $(grep 'announcing to' "$WORK/v.log" | tail -n 2)"
ok "squatting the live run $VINST: 403 without a proof and with a wrong one; $VADDR stays listed, its next announcement taken"

# --- The victim unmounts; its listing lapses 15 s after its last
# announcement (SFS_ANNOUNCED_TTL_MS), meanwhile the next two parts. -----
unmount_check "$V" "$VPID"
t_unmount=$(now_ms)

# --- A genuine re-seeder started afterwards serves a new replica. -------
G=$WORK/g
MOUNT_LOG=g mount_seed "$G" --reseed --listen 127.0.0.21:0 --token-file "$WORK/fleet.tok" \
	--cache-size 64M
GPID=$MOUNT_PID
"$SEEDFS" prefetch "$G/m" >/dev/null 2>"$WORK/pf.err" || fail "prefetch: $(cat "$WORK/pf.err")"
GADDR=$(awk '$1 == "reseed:" { print $2 }' "$G/.seedfs/status")
for _ in $(seq 100); do
	get "/v1/sources?for=00000000000000f2" | grep -qF "\"$GADDR\"" && break
	sleep 0.1
done
get "/v1/sources?for=00000000000000f2" | grep -qF "\"$GADDR\"" ||
	fail "a new replica is not told of $GADDR: $(get /v1/sources)"
F=$WORK/f
MOUNT_LOG=f mount_seed "$F" --token-file "$WORK/fleet.tok" --cache-size 64M
FPID=$MOUNT_PID
for _ in $(seq 200); do
	grep -q "^reseeder: $GADDR (reachable)$" "$F/.seedfs/status" &&
		awk -v s="reseeder: $GADDR " 'index($0, s) == 1 { on = 1; next }
			/^(seed|reseeder): / { on = 0 }
			on && $1 == "seed_holdings:" && $2 == "m" && $3 > 0 { f = 1 }
			END { exit !f }' "$F/.seedfs/status" && break
	sleep 0.05
done
cmp "$MODEL/$F1" "$F/m/$F1" || fail "$F1 not byte-exact"
cmp "$MODEL/$F2" "$F/m/$F2" || fail "$F2 not byte-exact"
fromg=$(bytes "$F" "reseeder: $GADDR")
[ "$fromg" -gt 0 ] || fail "the new replica read nothing from $GADDR: $(grep -E '^(seed|reseeder)' "$F/.seedfs/status")"
ok "a re-seeder started after the flood ($GADDR) is listed to a new replica beside the flooder's 4 and served it $fromg bytes; byte-exact"
unmount_check "$F" "$FPID"
unmount_check "$G" "$GPID"

# --- The ring's secret: shared by seeds, never the token. ---------------
umask 077
openssl rand -hex 32 >"$WORK/ring.key"
umask 022
# (A seed that took it would serve on: 20 s at most.)
if timeout 20 "$SEEDFS" seed --model-dir "$MODEL" --listen "$HOST:0" \
	--token-file "$WORK/fleet.tok" --ring-key-file "$WORK/fleet.tok" \
	>/dev/null 2>"$WORK/rk.err"; then
	fail "a seed took the token as its ring secret"
fi
[ "$(cat "$WORK/rk.err")" = "seedfs seed: --ring-key-file $WORK/fleet.tok holds the token of --token-file: every token holder could place addresses in the ring; give it a secret of the seeds alone" ] ||
	fail "the token as the ring secret: $(cat "$WORK/rk.err")"
ports=()
for k in 1 2 3; do
	key=(--ring-key-file "$WORK/ring.key")
	[ "$k" = 3 ] && key=()
	SEED_LOG=k$k start_seed "$MODEL" --token-file "$WORK/fleet.tok" --fleet-from 2 "${key[@]}"
	ports+=("$SEED_PORT")
done
python3 "$WORK/flood.py" "$HOST" "$SP" "$TOKEN" ring "${ports[@]}" >"$WORK/ring.out" ||
	fail "ring: $(cat "$WORK/ring.out")"
[ "$(wc -l <"$WORK/ring.out")" = 16 ] || fail "ring: $(cat "$WORK/ring.out")"
same=$(awk '$1 == $2' "$WORK/ring.out" | wc -l)
other=$(awk '$1 != $3' "$WORK/ring.out" | wc -l)
[ "$same" = 16 ] && [ "$other" -ge 8 ] ||
	fail "places at seeds with one secret, and at one with its own: $(cat "$WORK/ring.out")"
ok "the token refused as a ring secret; two seeds with one --ring-key-file place 16 runs alike, a third with its own moves $other of them"

# --- ... and the victim's run squatted once it lapsed. ----------------
while [ "$(now_ms)" -lt $((t_unmount + 25000)) ]; do
	get /v1/sources | grep -qF "\"$VADDR\"" || break
	sleep 0.1
done
get /v1/sources | grep -qF "\"$VADDR\"" && fail "$VADDR listed 25 s after it unmounted"
read -r a b why < <(python3 "$WORK/flood.py" "$HOST" "$SP" "$TOKEN" squat 127.0.0.30:9 "$VINST")
[ "$a" = 403 ] && [ "$b" = 403 ] || fail "squatting $VINST (lapsed): $a, $b: $why"
get /v1/sources | grep -qF '"127.0.0.30:9"' && fail "the squatter is listed"
[ "$(metric 'seedfs_seed_announce_refused_total{reason="proof"}')" = 4 ] ||
	fail "proof refusals: $(get /metrics | grep announce_refused)"
grep -q " W seed: refused an announcement from 127.0.0.30: announce: instance $VINST16: no proof of that run " \
	"$WORK/seed.err" || fail "no warn line for the squatter"
ok "squatting the lapsed run: 403 both ways, nothing listed"
sanitizers_clean
