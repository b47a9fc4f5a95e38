#!/usr/bin/env bash
# The hold after a stall, through a mount: the seed (in a network
# namespace) keeps its control port answering while everything it sends
# from its fabric port is dropped, so connecting again to it succeeds at
# once and its pulls still make no progress.  With --timeout 2: a read
# fails with EIO after the timeout; the seed is down for its hold (1 s):
# a read within it fails at once (< 0.5 s, counted in
# errors_unavailable), once the mount has connected again too; after the
# hold a read is posted again and waits the timeout (the next hold is
# 2 s); the link back, a read after that hold is byte-exact.
source "$(dirname "$0")/lib.sh" "$1"

netns_setup
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 16M --shards 1
F=model-00001-of-00001.safetensors
start_seed_ns "$MODEL"
HOST=$NS_IP
T=2
MNT=$WORK/mnt
mount_seed "$MNT" --timeout $T
S=$MNT/.seedfs/status
val() { status_val "$S" "$1"; }
cmp "$MODEL/tokenizer.json" "$MNT/m/tokenizer.json" || fail "before the stall"

# The seed's fabric port: the TCP port it listens on besides its control
# port.
fport=$(ip netns exec "$NS" ss -ltnpH | grep "pid=$SEED_PID," | awk '{ print $4 }' |
	grep -vxF "$NS_IP:$SEED_PORT" | sed -E 's/^.*:([0-9]+)$/\1/' | sort -u)
[ "$(echo "$fport" | wc -w)" = 1 ] || fail "the seed's fabric port: '$fport'"
tc -n "$NS" qdisc add dev "$NS_VETH" root handle 1: htb default 1 || fail "tc htb"
tc -n "$NS" class add dev "$NS_VETH" parent 1: classid 1:1 htb rate 10gbit quantum 60000
tc -n "$NS" class add dev "$NS_VETH" parent 1: classid 1:2 htb rate 10gbit quantum 60000
# (A tbf every packet is larger than drops them all.)
tc -n "$NS" qdisc add dev "$NS_VETH" parent 1:2 tbf rate 1kbit burst 10 limit 10 || fail "tc tbf"
tc -n "$NS" filter add dev "$NS_VETH" parent 1: protocol ip u32 \
	match ip sport "$fport" 0xffff flowid 1:2 || fail "tc filter"
unshape() { tc -n "$NS" qdisc del dev "$NS_VETH" root; }

# rd BLOCK: one 4 KiB block of the shard not read before, with
# O_DIRECT (no read-ahead); sets EL (ms) and fails unless it was EIO.
rd() {
	local t0
	t0=$(now_ms)
	if dd if="$MNT/m/$F" of=/dev/null bs=4k count=1 skip="$1" iflag=direct 2>"$WORK/dd.err"; then
		fail "block $1 read through the stall"
	fi
	EL=$(($(now_ms) - t0))
	grep -q "Input/output error" "$WORK/dd.err" || fail "block $1: not EIO: $(cat "$WORK/dd.err")"
}

rd 1000
down=$(now_ms)
bound first_eio_ms ">=" $((T * 1000 - 200)) "$EL" "first read through the stall: EIO after (--timeout $T s), ms"
bound first_eio_most_ms "<=" $((T * 1000 + 1500)) "$EL" "first read through the stall: EIO after (--timeout $T s), ms"
first=$EL
# The mount connects again at once (its control port answers): the hold
# must outlast that.
for _ in $(seq 40); do grep -q "connected again" "$WORK/mount.log" && break; sleep 0.01; done
grep -q "connected again" "$WORK/mount.log" || fail "not connected again within 0.4 s of the stall"
un=$(val errors_unavailable)
since=$(($(now_ms) - down))
rd 2000
bound in_hold_ms "<" 500 "$EL" "a read $since ms after the stall, within its hold (1 s): EIO after, ms"
bound in_hold_unavailable ">" 0 $(($(val errors_unavailable) - un)) "errors_unavailable counted by the read within the hold (was $un)"
second=$EL
# The hold over (1 s from the stall): the next read is posted again.
while [ $(($(now_ms) - down)) -lt 1300 ]; do sleep 0.05; done
rd 3000
down=$(now_ms)
bound after_hold_ms ">=" $((T * 1000 - 200)) "$EL" "a read after the hold (posted again): EIO after, ms"
ok "a stalled seed that takes connections, --timeout $T: EIO after $first ms; a read $since ms later after $second ms (its hold); after the hold after $EL ms"

# The link back: after the second hold (2 s), the file byte-exact.
unshape
while [ $(($(now_ms) - down)) -lt 2200 ]; do sleep 0.05; done
t0=$(now_ms)
cmp "$MODEL/$F" "$MNT/m/$F" || fail "after the link came back"
el=$(($(now_ms) - t0))
bound back_ms "<=" 3000 "$el" "the link back: the file read byte-exact after the second hold, ms"
ok "the link back: byte-exact in $el ms after the second hold; $(grep ^reconnects: "$S")"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
