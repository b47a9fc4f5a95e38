#!/usr/bin/env bash
# Protocol selection end to end: --protocol beats SEEDFS_PROTOCOL on seed
# and mount, "auto" on the seed picks what this host serves and says so,
# "auto" on a replica takes what the seed serves, probe tells the truth.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 2M --shards 1
MNT=$WORK/mnt
mkdir -p "$MNT"

# probe: tcp, shm, sockets here; efa and libfabric verbs not, with why.
"$SEEDFS" probe >"$WORK/probe.out" || fail "probe exit status"
grep -Eq '^tcp +yes +provider tcp;ofi_rxm' "$WORK/probe.out" || fail "probe tcp: $(cat "$WORK/probe.out")"
grep -Eq '^shm +yes' "$WORK/probe.out" || fail "probe shm"
grep -Eq '^sockets +yes' "$WORK/probe.out" || fail "probe sockets"
if ! fi_info -p efa >/dev/null 2>&1; then
	grep -Eq '^efa +no +protocol efa: no EFA device \(fi_getinfo provider=efa: No data available\); try --protocol tcp$' \
		"$WORK/probe.out" || fail "probe efa: $(grep ^efa "$WORK/probe.out")"
fi
grep -Eq '^auto +yes +chooses ' "$WORK/probe.out" || fail "probe auto"
ok "probe: $(grep -c ' yes ' "$WORK/probe.out") available, $(grep -c ' no ' "$WORK/probe.out") not"

# Seed: the environment picks when no option is given; the option wins.
SEED_LOG=seed-env SEEDFS_PROTOCOL=shm start_seed "$MODEL"
grep -q "protocol shm; unauthenticated$" "$WORK/seed-env.out" || fail "env ignored: $(cat "$WORK/seed-env.out")"
kill "$SEED_PID"
SEED_LOG=seed-opt SEEDFS_PROTOCOL=shm start_seed "$MODEL" --protocol sockets
grep -q "protocol sockets; unauthenticated$" "$WORK/seed-opt.out" || fail "option lost: $(cat "$WORK/seed-opt.out")"
kill "$SEED_PID"
ok "seed: --protocol beats SEEDFS_PROTOCOL"

# Seed auto: the first of efa, rdma, tcp this host serves, and why.
SEED_LOG=seed-auto start_seed "$MODEL" --protocol auto
want=tcp
fi_info -p efa >/dev/null 2>&1 && want=efa
grep -q "protocol $want; unauthenticated$" "$WORK/seed-auto.out" || fail "auto: $(cat "$WORK/seed-auto.out")"
grep -q "protocol auto: chose $want" "$WORK/seed-auto.err" || fail "auto did not say what it chose"
ok "seed auto chose $want: $(grep -o 'chose.*' "$WORK/seed-auto.err" | cut -c1-100)"

# Mount: auto takes what the seed serves; the option beats the env.
mount_seed "$MNT" --protocol auto
cmp "$MODEL/config.json" "$MNT/m/config.json" || fail "read via auto"
unmount_check "$MNT" "$MOUNT_PID"
st=0
SEEDFS_PROTOCOL=shm "$SEEDFS" mount --seed "$HOST:$SEED_PORT" \
	--protocol sockets "$MNT" 2>"$WORK/err" || st=$?
[ $st -ne 0 ] || fail "mismatch mounted"
grep -q "asks for protocol sockets, but the seed at $HOST:$SEED_PORT serves $want" "$WORK/err" ||
	fail "option did not win: $(cat "$WORK/err")"
SEEDFS_PROTOCOL=$want mount_seed "$MNT"
unmount_check "$MNT" "$MOUNT_PID"
ok "mount: auto follows the seed; --protocol beats SEEDFS_PROTOCOL"
kill "$SEED_PID"

# rxm connects only peers of one buffer size: a seed with another is
# refused before any read, with the setting named on both sides (not a
# "no progress" timeout), and the same setting on both works.
SEED_LOG=seed-rxm FI_OFI_RXM_BUFFER_SIZE=16384 start_seed "$MODEL" --protocol tcp
curl -sf "http://$HOST:$SEED_PORT/v1/manifest?model=m" |
	jq -e '.endpoints[0].compat == "FI_OFI_RXM_BUFFER_SIZE=16384"' >/dev/null ||
	fail "compat not published: $(curl -s "http://$HOST:$SEED_PORT/v1/manifest?model=m" | jq -c .endpoints)"
st=0
t0=$(date +%s%N)
timeout 30 "$SEEDFS" pull --seed "$HOST:$SEED_PORT" --protocol tcp m "$WORK/pulled" \
	2>"$WORK/err" || st=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $st -ne 0 ] || fail "pull across buffer sizes succeeded?"
grep -q "its tcp endpoint runs with FI_OFI_RXM_BUFFER_SIZE=16384, this host with FI_OFI_RXM_BUFFER_SIZE=1024" "$WORK/err" ||
	fail "mismatch not named: $(cat "$WORK/err")"
bound mismatch_ms "<" 5000 "$ms" "a pull across rxm buffer sizes refused, ms"
st=0
"$SEEDFS" mount --seed "$HOST:$SEED_PORT" --protocol tcp "$MNT" 2>"$WORK/err" || st=$?
[ $st -ne 0 ] || { fusermount3 -u "$MNT"; fail "mounted across buffer sizes"; }
grep -q "FI_OFI_RXM_BUFFER_SIZE=16384" "$WORK/err" || fail "mount: $(cat "$WORK/err")"
FI_OFI_RXM_BUFFER_SIZE=16384 timeout 60 "$SEEDFS" pull --seed "$HOST:$SEED_PORT" \
	--protocol tcp m "$WORK/pulled" 2>"$WORK/err" || fail "same size: $(cat "$WORK/err")"
cmp "$MODEL/config.json" "$WORK/pulled/config.json" || fail "pulled bytes differ"
ok "rxm buffer sizes: a differing seed refused in $ms ms with both named; the same on both reads"
sanitizers_clean
