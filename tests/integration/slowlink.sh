#!/usr/bin/env bash
# Slow links are slow, not broken.  The seed runs in a network namespace
# of its own, joined by a veth pair shaped with tc on both ends:
#   20 Mbit/s, --timeout 3: a 16 MiB file byte-exact with dd, which
#     takes longer than the timeout (it bounds no progress, not a
#     read), and nothing counted as an error;
#   200 Mbit/s with a few % of the packets dropped (tbf overflow): the
#     whole model byte-exact;
#   a silent partition (everything dropped both ways): open and read of
#     bytes not yet fetched fail with EIO within --timeout together, the
#     next read at once, and reads work again within --timeout (3 s)
#     + 1 s of the link coming back.
source "$(dirname "$0")/lib.sh" "$1"

netns_setup
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 16M --shards 1
F=model-00001-of-00001.safetensors
start_seed_ns "$MODEL"
HOST=$NS_IP
MNT=$WORK/mnt
S=$MNT/.seedfs/status
val() { awk -v k="$1:" '$1 == k { print $2 }' "$S"; }
no_errors() {
	local k
	for k in errors_transport errors_timeout errors_checksum \
		errors_unavailable errors_no_chunk reconnects; do
		[ "$(val $k)" = 0 ] || fail "$1: $k $(val $k): $(grep -E '^(errors|reconn)' "$S" | tr '\n' ' ')"
	done
}

# 20 Mbit/s: every pull completes in its turn, the whole longer than
# --timeout.
link tbf rate 20mbit burst 32kbit latency 400ms
mount_seed "$MNT" --timeout 3
t0=$(now_ms)
dd if="$MNT/m/$F" of="$WORK/copy" bs=1M 2>"$WORK/dd.err" || fail "dd: $(cat "$WORK/dd.err")"
el=$(($(now_ms) - t0))
cmp "$MODEL/$F" "$WORK/copy" || fail "20 Mbit/s: bytes differ"
rm "$WORK/copy"
no_errors "20 Mbit/s"
bound slow_read_ms ">" 3000 "$el" "20 Mbit/s: the read was not longer than --timeout: the link is not slow"
# The seed's window follows its measured throughput: a quarter second
# of it in 1 MiB chunks, 2 at least (docs/cache.md): 2.5 MB/s, 2.
rate=$(awk '$1 == "seed_rate:" { print $2 }' "$S")
win=$(sed -n 's/^seed_pulls: [0-9]* in flight (at most \([0-9]*\)),.*/\1/p' "$S")
bound seed_rate_kbps "<=" 3000 "$(awk -v r="$rate" 'BEGIN { printf "%d", r * 1000 }')" \
	"20 Mbit/s: the seed's measured rate, kB/s ($(grep -E '^seed_(rate|pulls)' "$S" | tr '\n' ' '))"
want=$(awk -v r="$rate" 'BEGIN { w = int(r * 1e6 * 0.25 / 1048576); print (w < 2 ? 2 : (w > 32 ? 32 : w)) }')
bound window_off_its_rate = 0 $((win - want)) "20 Mbit/s: window $win, $rate MB/s gives $want"
size=$(stat -c %s "$MODEL/$F")
ok "20 Mbit/s, --timeout 3: dd of $((size >> 20)) MiB byte-exact in $el ms ($(awk -v b=$size -v t=$el 'BEGIN { printf "%.1f", b / t / 1000 }') MB/s), no error counted"
unmount_check "$MNT" "$MOUNT_PID"

# 200 Mbit/s, a queue too short for the bursts: 2-6 % dropped (a limit of 200kb dropped as little as 0.2 %).
link tbf rate 200mbit burst 64kb limit 150kb
mount_seed "$MNT"
for f in $(cd "$MODEL" && find . -type f); do
	cmp "$MODEL/$f" "$MNT/m/$f" || fail "200 Mbit/s with drops: $f differs"
done
st=$(ip netns exec "$NS" tc -s qdisc show dev "$NS_VETH")
pkts=$(echo "$st" | sed -n 's/.* \([0-9]*\) pkt (dropped \([0-9]*\),.*/\1/p')
drops=$(echo "$st" | sed -n 's/.* pkt (dropped \([0-9]*\),.*/\1/p')
pct=$(awk -v d="$drops" -v p="$pkts" 'BEGIN { printf "%.1f", 100 * d / (p + d) }')
bound drops_permille ">=" 5 "$(awk -v d="$drops" -v p="$pkts" 'BEGIN { printf "%d", 1000 * d / (p + d) + 0.5 }')" \
	"packets dropped at 200 Mbit/s ($pct %: $st), per mille, rounded"
no_errors "200 Mbit/s with drops"
ok "200 Mbit/s with $pct % of packets dropped ($drops of $((pkts + drops))): byte-exact"
unmount_check "$MNT" "$MOUNT_PID"

# A silent partition.
link
TIMEOUT=3
mount_seed "$MNT" --timeout $TIMEOUT
cmp "$MODEL/tokenizer.json" "$MNT/m/tokenizer.json" || fail "before the partition"
link tbf rate 1kbit burst 10 limit 10 # every packet is larger: dropped
t0=$(now_ms)
if cat "$MNT/m/$F" >/dev/null 2>"$WORK/cat.err"; then fail "read through a partition"; fi
el=$(($(now_ms) - t0))
grep -q "Input/output error" "$WORK/cat.err" || fail "not EIO: $(cat "$WORK/cat.err")"
bound partition_eio_ms "<=" $((TIMEOUT * 1000 + 1000)) "$el" "open and read through a partition: EIO (--timeout $TIMEOUT s), ms"
t0=$(now_ms)
if dd if="$MNT/m/$F" of=/dev/null bs=4k count=1 skip=3000 2>"$WORK/dd.err"; then
	fail "second read through a partition"
fi
el2=$(($(now_ms) - t0))
bound next_read_ms "<=" 1000 "$el2" "the next open and read through the partition, ms"
ok "partition: open and read EIO after $el ms (--timeout $TIMEOUT s), the next after $el2 ms"
# The link back: reads work again within --timeout + 1 s (README).  A
# source taken out is connected again at the latest when its hold ends
# (1 s, doubling, at most --timeout or 5 s); 1 s for connecting again
# and the read on a loaded machine.  (6 s were allowed before.)
BACK_MS=$((TIMEOUT * 1000 + 1000))
link
t0=$(now_ms)
for _ in $(seq 40); do
	cmp "$MODEL/$F" "$MNT/m/$F" 2>/dev/null && break
	sleep 0.25
done
el=$(($(now_ms) - t0))
cmp "$MODEL/$F" "$MNT/m/$F" || fail "reads did not come back in 10 s"
bound back_ms "<=" $BACK_MS "$el" "reads came back after the partition, ms"
grep -q "^seed: $HOST:$SEED_PORT (reachable)$" "$S" || fail "status: $(grep ^seed: "$S")"
grep -q "connected again" "$WORK/mount.log" || fail "no reconnection logged"
ok "link back: the file read byte-exact after $el ms (bound $BACK_MS ms); $(grep ^reconnects: "$S")"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
