#!/usr/bin/env bash
# The engine API (seedfs.h, sfs_client_*): reads straight into the
# caller's registered memory, byte-exact against the local files (whole
# files in one batch, every tensor in one batch, random odd ranges from
# four threads), over tcp and shm; striped over two seeds, and a kill -9
# of one mid-read survived (it had served bytes, the failover counter
# moved, the other served the rest); a corrupt seed refused (-EBADMSG);
# bad reads, a wrong name and a port nobody listens on answered in one
# line; signed manifests through trust_key and require_signed (below).
source "$(dirname "$0")/lib.sh" "$1"
APIREAD=$BUILD/tests/apiread

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 48M --shards 3 >/dev/null
start_seed "$MODEL" --protocol tcp,shm
P1=$SEED_PORT
PID1=$SEED_PID

for p in tcp shm; do
	for mode in files tensors ranges; do
		SEEDFS_PROTOCOL=$p "$APIREAD" "$HOST:$P1" m "$MODEL" $mode 4 0.5 \
			>"$WORK/api.out" 2>"$WORK/api.err" ||
			fail "$mode over $p: $(cat "$WORK/api.err")"
		grep -q "apiread: $mode ok .*, $p\$" "$WORK/api.out" ||
			fail "$mode over $p: $(cat "$WORK/api.out")"
		ok "$(cat "$WORK/api.out")"
	done
done

# Whole files: every byte pulled once, straight in (no edge pulled
# twice); the tensors' batch pulls its edges' chunks through the cache.
SEEDFS_PROTOCOL=tcp "$APIREAD" "$HOST:$P1" m "$MODEL" files >"$WORK/api.out" 2>&1 ||
	fail "files: $(cat "$WORK/api.out")"
read -r total pulled < <(sed -n 's/.* ok \([0-9]*\) bytes.*, pulled \([0-9]*\),.*/\1 \2/p' "$WORK/api.out")
bound pulled_over_read "<=" 0 $((pulled - total)) "whole files pulled $pulled bytes for $total read: more by, bytes"
ok "whole files: $pulled bytes pulled for $total read"

# Errors, each in one line.
"$APIREAD" "$HOST:$P1" m "$MODEL" errors >"$WORK/api.out" 2>"$WORK/api.err" ||
	fail "bad reads: $(cat "$WORK/api.out" "$WORK/api.err")"
ok "bad reads: $(head -n 1 "$WORK/api.out")"
st=0
"$APIREAD" "$HOST:$P1" nosuch "$MODEL" 2>"$WORK/err" >/dev/null || st=$?
[ $st = 1 ] && grep -q "publishes no model of that name" "$WORK/err" ||
	fail "wrong name: $(cat "$WORK/err")"
ok "wrong name: $(cat "$WORK/err")"
st=0
closed_port
"$APIREAD" "127.0.0.1:$CLOSED_PORT" m "$MODEL" 2>"$WORK/err" >/dev/null || st=$?
[ $st = 1 ] && [ "$(wc -l <"$WORK/err")" = 1 ] || fail "no seed: $(cat "$WORK/err")"
ok "no seed: $(cat "$WORK/err")"

# Two seeds of the same files: striped, then seed 1 killed -9 while four
# threads read random ranges: no error, byte-exact.
SEED_LOG=seed2 start_seed "$MODEL" --protocol tcp
P2=$SEED_PORT
# seed_bytes PORT FILE: what the client read from that seed
seed_bytes() { seed_stat "$2" "$1" seed_bytes; }
# Four threads of random ranges for 2 s: a whole-file read takes 30-70
# ms here, less than the second connection's start-up can take (a
# CI-like run had seed 2 serve only its first 5 MiB window of one).
APIREAD_STATUS=$WORK/st1 SEEDFS_PROTOCOL=tcp "$APIREAD" "$HOST:$P1,$HOST:$P2" m "$MODEL" ranges 4 2 \
	>"$WORK/api.out" 2>"$WORK/api.err" || fail "striped: $(cat "$WORK/api.err")"
b1=$(seed_bytes "$P1" "$WORK/st1")
b2=$(seed_bytes "$P2" "$WORK/st1")
tot=$((b1 + b2))
# (Under ThreadSanitizer the second connection's start-up costs too much
# of a 50 MB read to ask for a fifth.)
share=5
[ "$SFS_BUILD_KIND" = tsan ] && share=50
[ "$tot" -gt 0 ] || fail "no bytes counted from either seed"
lo=$((b1 < b2 ? b1 : b2))
# Each seed more than 1/share of the bytes (per mille, rounded down).
bound share_permille ">" $((1000 / share)) $((lo * 1000 / tot)) "not striped: seed 1 $b1, seed 2 $b2 bytes; the smaller share, per mille"
ok "striped over two seeds: $b1 and $b2 bytes ($(sed 's/.* in //; s/, open.*//' "$WORK/api.out"))"

# Seed 1 killed -9 mid-read: four threads read random ranges from both
# (until $WORK/stop2, at most 60 s); apiread rewrites st2 every 100 ms.
# Once seed 1 has served bytes it is stopped (SIGSTOP), and killed -9
# once the reader has pulls in flight on it that cannot complete (its
# bytes no longer move): a kill with nothing in flight, noticed by the
# control port first, moves no pull (measured: 1 run in 8).  The read
# must go on without an error, the failover counter move, and seed 2
# serve more.
# seed_inflight PORT FILE: that seed's pulls in flight
seed_inflight() { seed_stat "$2" "$1" seed_pulls; }
# fresh_status: wait for apiread to write st2 anew
fresh_status() {
	rm -f "$WORK/st2"
	for _ in $(seq 200); do
		[ -s "$WORK/st2" ] && return 0
		kill -0 "$RPID" 2>/dev/null || fail "the reader ended: $(cat "$WORK/api.err")"
		sleep 0.02
	done
	fail "apiread wrote no status in 4 s"
}
APIREAD_STATUS=$WORK/st2 APIREAD_STOP=$WORK/stop2 SEEDFS_PROTOCOL=tcp \
	"$APIREAD" "$HOST:$P1,$HOST:$P2" m "$MODEL" ranges 4 60 \
	>"$WORK/api.out" 2>"$WORK/api.err" &
RPID=$!
PIDS+=("$RPID")
b1=0
for _ in $(seq 400); do
	[ -s "$WORK/st2" ] && b1=$(seed_bytes "$P1" "$WORK/st2")
	[ "${b1:-0}" -gt 0 ] && break
	kill -0 "$RPID" 2>/dev/null || fail "the reader ended before seed 1 served a byte: $(cat "$WORK/api.err")"
	sleep 0.05
done
[ "${b1:-0}" -gt 0 ] || fail "seed 1 served no byte in 20 s: $(cat "$WORK/st2")"
cp "$WORK/st2" "$WORK/st2.before"
kill -STOP "$PID1"
fresh_status
last=$(seed_bytes "$P1" "$WORK/st2") inflight=0
for _ in $(seq 100); do
	fresh_status
	now=$(seed_bytes "$P1" "$WORK/st2")
	inflight=$(seed_inflight "$P1" "$WORK/st2")
	[ "${inflight:-0}" -gt 0 ] && [ "$now" = "$last" ] && break
	last=$now
done
[ "${inflight:-0}" -gt 0 ] || fail "no pull in flight on the stopped seed 1: $(cat "$WORK/st2")"
kill -9 "$PID1"
fo0=$(status_val "$WORK/st2.before" failovers)
b2_0=$(seed_bytes "$P2" "$WORK/st2.before")
[ -n "$fo0" ] && [ -n "$b2_0" ] || fail "no failovers or seed 2 in the status: $(cat "$WORK/st2.before")"
# Wait until the failover counter and seed 2's bytes have moved and
# seed 1 is no longer called reachable (its control port refuses).
for _ in $(seq 400); do
	if [ -s "$WORK/st2" ]; then
		fo=$(status_val "$WORK/st2" failovers)
		b2=$(seed_bytes "$P2" "$WORK/st2")
		[ "${fo:-0}" -gt "$fo0" ] && [ "${b2:-0}" -gt "$b2_0" ] &&
			! grep -q "^seed: $HOST:$P1 (reachable" "$WORK/st2" && break
	fi
	kill -0 "$RPID" 2>/dev/null || break
	sleep 0.05
done
touch "$WORK/stop2"
st=0
wait "$RPID" || st=$?
[ $st = 0 ] || fail "ranges across a kill -9: $(cat "$WORK/api.err")"
grep -q "apiread: ranges ok " "$WORK/api.out" || fail "ranges across a kill -9: $(cat "$WORK/api.out")"
fo=$(status_val "$WORK/st2" failovers)
b2=$(seed_bytes "$P2" "$WORK/st2")
[ "${fo:-0}" -gt "$fo0" ] ||
	fail "seed 1 killed with $b1 bytes served: no failover (failovers $fo0, then ${fo:-none}): $(cat "$WORK/st2")"
[ "${b2:-0}" -gt "$b2_0" ] || fail "seed 2 served nothing after the kill ($b2_0, then ${b2:-none})"
grep -q "^seed: $HOST:$P1 (" "$WORK/st2" || fail "no status of seed 1: $(cat "$WORK/st2")"
grep -q "^seed: $HOST:$P1 (reachable" "$WORK/st2" && fail "seed 1 still reachable after its kill: $(cat "$WORK/st2")"
ok "seed 1 stopped once it had served $b1 bytes, killed -9 with $inflight pulls in flight on it: $(cat "$WORK/api.out"); failovers $fo0 -> $fo; seed 2 served $b2_0 -> $b2 bytes; $(grep "^seed: $HOST:$P1 " "$WORK/st2")"

# A corrupt seed: refused, naming the file.
F=model-00002-of-00003.safetensors
SEED_LOG=seed3 start_seed "$MODEL" --protocol tcp --test-corrupt "$F:5000000"
st=0
"$APIREAD" "$HOST:$SEED_PORT" m "$MODEL" files >/dev/null 2>"$WORK/err" || st=$?
bound corrupt_exit_status = 1 "$st" "apiread from a corrupt seed: $(cat "$WORK/err")"
grep -q "$F bytes \[0, +[0-9]*): bytes do not match the seed's checksum" "$WORK/err" ||
	fail "corrupt seed: $(cat "$WORK/err")"
ok "corrupt seed: $(grep -v ' W ' "$WORK/err" | head -n 1)"

# A read that outlives its timeout on a stopped seed: the transport
# still holds it, so sfs_client_dereg says -EBUSY and keeps the
# registration (one line).  Twice:
#   resumed: the seed goes on after the dereg; the file is read again
#     byte-exact, and sfs_client_close finds nothing in flight: it
#     deregisters what dereg kept (no "left open"; under ASan,
#     LeakSanitizer sees one it does not);
#   stopped: the seed still stopped at sfs_client_close: over tcp the
#     read has been cancelled with its connection by then (the source
#     was marked unreachable), so the close releases the registration
#     too, and leaves nothing open.  (A transport that cannot end such
#     a read keeps it and its memory, with a "left open" line:
#     seedfs.h.)
# Each within 1 s timeout + 4 s (resumed: + the seed's hold, 10 s).
# wait_line NAME PID LINE: apiread (PID, output $WORK/NAME.out) printed
# LINE, 10 s at most
wait_line() {
	for _ in $(seq 200); do
		grep -q "^$3\$" "$WORK/$1.out" && return 0
		kill -0 "$2" 2>/dev/null || fail "$1: apiread ended: $(cat "$WORK/$1.out" "$WORK/$1.err")"
		sleep 0.05
	done
	fail "$1: apiread did not say '$3' in 10 s: $(cat "$WORK/$1.out" "$WORK/$1.err")"
}
# stalled_read NAME [TRY]: one run, apiread's output in $WORK/NAME.out,
# .err
stalled_read() {
	local n=$1 spid st t0 ms
	SEED_LOG=seed-$n start_seed "$MODEL" --protocol tcp
	local pid=$SEED_PID
	rm -f "$WORK/go" "$WORK/go2"
	local go2=()
	[ "$n" = resumed ] && go2=("APIREAD_GO2=$WORK/go2")
	env APIREAD_GO="$WORK/go" "${go2[@]}" APIREAD_TIMEOUT_MS=1000 SEEDFS_PROTOCOL=tcp \
		timeout 60 "$APIREAD" "$HOST:$SEED_PORT" m "$MODEL" stalled >"$WORK/$n.out" 2>"$WORK/$n.err" &
	spid=$!
	PIDS+=("$spid")
	wait_line "$n" "$spid" "apiread: registered"
	kill -STOP "$pid"
	t0=$(now_ms)
	touch "$WORK/go"
	if [ "$n" = resumed ]; then
		wait_line "$n" "$spid" "apiread: dereg done"
		kill -CONT "$pid"
		touch "$WORK/go2"
	fi
	st=0
	wait "$spid" || st=$?
	ms=$(($(now_ms) - t0))
	kill -CONT "$pid"
	# (The seed stays up until the end: stopped now, with this client's
	# reconnects pending, libfabric would leak their connection
	# requests' info at its close: lsan-connreq.supp.)
	# The stall's reconnect may end the reads in the transport before
	# the dereg (under load; dereg 0 and no read held is then right):
	# tried again, up to 3 times in all, for the case this asserts.
	if [ "$st" = 1 ] && [ "${2:-1}" -lt 3 ] &&
		grep -q "^apiread: stalled ok read -110 dereg 0\$" "$WORK/$n.out" &&
		! grep -q "kept until sfs_client_close" "$WORK/$n.err"; then
		echo "stalled ($n): the reads ended before the dereg (try ${2:-1}): again"
		stalled_read "$n" $((${2:-1} + 1))
		return
	fi
	bound "stalled_${n}_exit" = 0 "$st" "apiread stalled ($n): $(cat "$WORK/$n.out" "$WORK/$n.err")"
	grep -q "^apiread: stalled ok read -110 dereg -16\$" "$WORK/$n.out" ||
		fail "stalled ($n): $(cat "$WORK/$n.out")"
	local k
	k=$(grep -c " W client: a timed-out read may still write into a registration: kept until sfs_client_close\$" "$WORK/$n.err" || true)
	[ "$k" = 1 ] || fail "stalled ($n): dereg's line $k times: $(cat "$WORK/$n.err")"
	STALLED_MS=$ms
}
stalled_read resumed
bound stalled_resumed_ms "<=" 15000 "$STALLED_MS" "a timed-out read, its dereg, the seed going on, the file read again and the close, ms"
grep -q "^apiread: again ok after [0-9]* tries\$" "$WORK/resumed.out" || fail "resumed: $(cat "$WORK/resumed.out")"
left=$(grep -c "left open" "$WORK/resumed.err" || true)
bound stalled_resumed_left_open = 0 "$left" "reads left open at close once the seed went on: $(grep "left open" "$WORK/resumed.err" | head -n 2)"
ok "a read past its timeout on a stopped seed: ETIMEDOUT, dereg EBUSY (kept, said once); the seed going on, $(sed -n 's/^apiread: //p' "$WORK/resumed.out" | tail -n 1), and the close released it, in $STALLED_MS ms"
stalled_read stopped
bound stalled_dereg_ms "<=" 5000 "$STALLED_MS" "a timed-out read, its dereg and the close with the seed still stopped, ms"
left=$(grep -c "left open" "$WORK/stopped.err" || true)
bound stalled_stopped_left_open = 0 "$left" "reads left open at close with the seed still stopped: $(grep "left open" "$WORK/stopped.err" | head -n 2)"
ok "the seed still stopped at the close: the read ended with its connection, nothing left open, in $STALLED_MS ms"

# Signed manifests (docs/security.md): trust_key in the cfg as the
# mount's --trust-key; require_signed without a key refuses before any
# source is asked (a listener of ours, named as the seed, hears
# nothing); $SEEDFS_TRUST_KEY_FILE stays the fallback; a program built
# against SEEDFS_0.1's cfg (apicompat) reads none of the new fields.
openssl genpkey -algorithm ed25519 -out "$WORK/sign.key" 2>/dev/null
chmod 600 "$WORK/sign.key"
openssl pkey -in "$WORK/sign.key" -pubout -out "$WORK/sign.pub"
openssl genpkey -algorithm ed25519 -out "$WORK/other.key" 2>/dev/null
openssl pkey -in "$WORK/other.key" -pubout -out "$WORK/other.pub"
SEED_LOG=signed start_seed "$MODEL" --protocol tcp --digest sha256 --sign-key "$WORK/sign.key"
SIGNED=$HOST:$SEED_PORT
SEED_LOG=unsigned start_seed "$MODEL" --protocol tcp
UNSIGNED=$HOST:$SEED_PORT
APIREAD_TRUST_KEY=$WORK/sign.pub APIREAD_REQUIRE_SIGNED=1 "$APIREAD" "$SIGNED" m "$MODEL" files \
	>"$WORK/api.out" 2>&1 || fail "trust_key, signed: $(cat "$WORK/api.out")"
SEEDFS_TRUST_KEY_FILE=$WORK/sign.pub APIREAD_REQUIRE_SIGNED=1 "$APIREAD" "$SIGNED" m "$MODEL" files \
	>"$WORK/api.out" 2>&1 || fail "\$SEEDFS_TRUST_KEY_FILE, signed: $(cat "$WORK/api.out")"
ok "trust_key (and \$SEEDFS_TRUST_KEY_FILE) with require_signed on a signed seed: $(cat "$WORK/api.out")"
# api_refused LINE [VAR=VALUE...] PROGRAM ARGS: exit 1, its last line
# exactly LINE (the log's warnings come before it)
api_refused() {
	local want=$1 st=0
	shift
	env "$@" >"$WORK/api.out" 2>"$WORK/api.err" || st=$?
	[ $st = 1 ] && [ "$(tail -n 1 "$WORK/api.err")" = "$want" ] ||
		fail "expected '$want' (status 1), got status $st: $(cat "$WORK/api.err")"
}
api_refused "apiread: m from $UNSIGNED: manifest not signed, and --trust-key $WORK/sign.pub asks for a signature (the seed's --sign-key)" \
	APIREAD_TRUST_KEY="$WORK/sign.pub" "$APIREAD" "$UNSIGNED" m "$MODEL" files
api_refused "apiread: m from $SIGNED: manifest signed by key $(openssl pkey -pubin -in "$WORK/sign.pub" -outform der | sha256sum | cut -c1-16), which --trust-key $WORK/other.pub does not hold" \
	APIREAD_TRUST_KEY="$WORK/other.pub" "$APIREAD" "$SIGNED" m "$MODEL" files
api_refused "apiread: no_verify cannot go with a trust key ($WORK/sign.pub): signed digests are there to be checked" \
	APIREAD_NO_VERIFY=1 APIREAD_TRUST_KEY="$WORK/sign.pub" "$APIREAD" "$SIGNED" m "$MODEL" files
api_refused "apiread: trust_key: an empty path" APIREAD_TRUST_KEY= "$APIREAD" "$SIGNED" m "$MODEL" files
ok "trust_key: an unsigned seed, another key, no_verify, an empty path: each refused in one line"
python3 -c 'import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    open(sys.argv[1], "a").write("connected\n")
    c.close()' "$WORK/heard" >"$WORK/listen.out" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/listen.out" ] && break; sleep 0.05; done
LPORT=$(cat "$WORK/listen.out")
: >"$WORK/heard"
api_refused "apiread: require_signed: no trust key (neither trust_key nor \$SEEDFS_TRUST_KEY_FILE): unsigned manifests are not read" \
	-u SEEDFS_TRUST_KEY_FILE APIREAD_REQUIRE_SIGNED=1 "$APIREAD" "127.0.0.1:$LPORT" m "$MODEL" files
api_refused "apiread: require_signed: no trust key (neither trust_key nor \$SEEDFS_TRUST_KEY_FILE): unsigned manifests are not read" \
	SEEDFS_TRUST_KEY_FILE= APIREAD_REQUIRE_SIGNED=1 "$APIREAD" "127.0.0.1:$LPORT" m "$MODEL" files
bound unkeyed_connections = 0 "$(grep -c . "$WORK/heard")" "require_signed without a key asked the seed: $(cat "$WORK/heard")"
ok "require_signed without a trust key: refused in one line, no source asked"
"$BUILD/tests/apicompat" "$UNSIGNED" m >"$WORK/api.out" 2>&1 ||
	fail "a SEEDFS_0.1 program: $(cat "$WORK/api.out")"
grep -qx "apicompat: m generation 1, [0-9]* tensors" "$WORK/api.out" || fail "apicompat: $(cat "$WORK/api.out")"
compat=$(cat "$WORK/api.out")
api_refused "apicompat: m from $UNSIGNED: manifest not signed, and --trust-key $WORK/sign.pub asks for a signature (the seed's --sign-key)" \
	SEEDFS_TRUST_KEY_FILE="$WORK/sign.pub" "$BUILD/tests/apicompat" "$UNSIGNED" m
ok "a program built against SEEDFS_0.1's cfg (0xff after it): $compat; \$SEEDFS_TRUST_KEY_FILE applies to it"
sanitizers_clean
