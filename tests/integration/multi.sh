#!/usr/bin/env bash
# One seed serving several protocols at once; one replica per protocol,
# mounted at the same time, each byte-exact; the default is the seed's
# first protocol; asking for one it does not serve is one line.
#   multi.sh BUILD_DIR [PROTOCOLS]     (default tcp,shm,sockets)
source "$(dirname "$0")/lib.sh" "$1"
PROTOS=${2:-tcp,shm,sockets}

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size "${SEEDFS_TEST_MODEL_SIZE:-12M}" --shards 2
start_seed "$MODEL" --protocol "$PROTOS"
grep -q "protocol $PROTOS; unauthenticated$" "$WORK/seed.out" || fail "ready line: $(cat "$WORK/seed.out")"
n=$(curl -sf "http://$HOST:$SEED_PORT/v1/manifest" | grep -c '"protocol"')
[ "$n" -eq "$(echo "$PROTOS" | tr ',' '\n' | wc -l)" ] || fail "$n endpoints in the manifest"
ok "one seed serves $PROTOS ($n endpoints)"

files=$(cd "$MODEL" && find . -type f | sed 's|^\./||' | sort)
pids=()
i=0
for p in ${PROTOS//,/ }; do
	MOUNT_LOG=mount-$p # one log each: they run at once
	mount_seed "$WORK/mnt$i" --protocol "$p"
	pids+=("$MOUNT_PID")
	i=$((i + 1))
done
# Every replica reads everything at once.
i=0
for p in ${PROTOS//,/ }; do
	(
		for f in $files; do
			cmp "$MODEL/$f" "$WORK/mnt$i/m/$f" || exit 1
		done
	) &
	readers+=($!)
	i=$((i + 1))
done
wrong=0
for r in "${readers[@]}"; do wait "$r" || wrong=$((wrong + 1)); done
bound replicas_at_once ">=" 3 "$i" "replicas reading at once, one per protocol"
bound replicas_wrong = 0 "$wrong" "replicas that read wrong bytes"
ok "$i replicas, one per protocol, read every file byte-exact at once"
i=0
for p in ${PROTOS//,/ }; do
	unmount_check "$WORK/mnt$i" "${pids[$i]}"
	i=$((i + 1))
done

# Default: the seed's first protocol.
first=${PROTOS%%,*}
MOUNT_LOG=mount-default
mount_seed "$WORK/mnt0" --log-level debug
cmp "$MODEL/config.json" "$WORK/mnt0/m/config.json" || fail "default read"
grep -q "protocol $first$" "$WORK/mount-default.log" || fail "default was not $first"
unmount_check "$WORK/mnt0" "$MOUNT_PID"
ok "the default is the seed's first protocol ($first)"

st=0
"$SEEDFS" mount --seed "$HOST:$SEED_PORT" --protocol efa "$WORK/mnt0" \
	2>"$WORK/err" || st=$?
[ $st -ne 0 ] && [ "$(wc -l <"$WORK/err")" -eq 1 ] || fail "efa: $(cat "$WORK/err")"
grep -q "asks for protocol efa, but the seed at $HOST:$SEED_PORT serves ${PROTOS//,/, }" \
	"$WORK/err" || fail "mismatch line: $(cat "$WORK/err")"
ok "a protocol it does not serve: $(cat "$WORK/err")"
sanitizers_clean
