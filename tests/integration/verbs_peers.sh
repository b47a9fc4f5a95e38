#!/usr/bin/env bash
# Raw verbs (protocol rdma) on a real kernel RDMA stack (the soft-RoCE
# VM tier).  A seed finds the queue pairs of replicas that went away (a
# zero-byte SEND each check period fails once the peer's queue pair is
# gone) and releases them, so connections never run out over a seed's
# life: more than its limit (1024; 128 here, SEEDFS_RDMA_MAX_PEERS, so
# the VM gets through it quickly) are made and dropped, and a mount still
# connects.  One client address holds at most 32.  A replica whose
# hello is refused frees the queue pair it made (no leak per retry).
source "$(dirname "$0")/lib.sh" "$1"
HELLOS=$BUILD/tests/hellos
[ -n "$(ls /sys/class/infiniband 2>/dev/null)" ] || { echo "skip: no RDMA device here (/sys/class/infiniband is empty): the VM tier runs this on soft-RoCE (tests/vm)"; exit 77; }

export SEEDFS_RDMA_PEER_CHECK_MS=300 SEEDFS_RDMA_MAX_PEERS=128
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 1
start_seed "$MODEL" --protocol rdma
SEED=$HOST:$SEED_PORT
qps_of() { rdma resource show qp 2>/dev/null | grep -c " pid $1 " || true; }

# One client: 32 at most; the refused hellos leave no queue pair.
"$HELLOS" "$SEED" 40 hold >"$WORK/h.out" &
H=$!
PIDS+=("$H")
for _ in $(seq 600); do grep -q '^ok' "$WORK/h.out" && break; sleep 0.1; done
grep -q '^ok 32 refused 8$' "$WORK/h.out" || fail "one client: $(cat "$WORK/h.out")"
grep -q "too many connections from this client" "$WORK/h.out" || fail "reason: $(cat "$WORK/h.out")"
n=$(qps_of "$H")
bound client_queue_pairs = 32 "$n" "the client's queue pairs after 8 refusals"
ok "one client: 32 queue pairs, 8 hellos refused ($(tail -n 1 "$WORK/h.out")), none left over"
kill "$H"
wait "$H" 2>/dev/null || true

# 6 rounds of 30 replicas that connect and vanish: 180 in all, more
# than the seed keeps at once.
gone() { grep -c "is gone" "$WORK/seed.err" || true; }
want=32
for round in $(seq 6); do
	for _ in $(seq 200); do [ "$(gone)" -ge "$want" ] && break; sleep 0.1; done
	[ "$(gone)" -ge "$want" ] || fail "round $round: $(gone) released, $want gone"
	out=$("$HELLOS" "$SEED" 30)
	[ "$out" = "ok 30 refused 0" ] || fail "round $round: $out"
	want=$((want + 30))
done
for _ in $(seq 200); do [ "$(gone)" -ge "$want" ] && break; sleep 0.1; done
bound queue_pairs_unreleased "<=" 0 $((want - $(gone))) "queue pairs of the vanished replicas not released ($(gone) of $want)"
ok "$((want - 32)) replicas came and went; the seed released $(gone) queue pairs"
MNT=$WORK/mnt
mount_seed "$MNT" --protocol rdma
cmp "$MODEL/config.json" "$MNT/m/config.json" || fail "read"
cmp "$MODEL/model-00001-of-00001.safetensors" "$MNT/m/model-00001-of-00001.safetensors" ||
	fail "read the shard"
ok "a mount after all that connects and reads byte-exact"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
