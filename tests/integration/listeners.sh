#!/usr/bin/env bash
# A mount's fabric endpoints listen only on the interface that reaches
# its sources (docs/security.md): rxm opens a listener for connections
# back on every endpoint, and it must not be reachable from interfaces
# the mount does not use.  A seed on 127.0.0.1: every listener of the
# mount on 127.0.0.1.  A seed in another network namespace: every
# listener on the veth address that reaches it, a re-seeder's slab
# endpoint too (its control port is where --listen says).
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 2 >/dev/null
F1=model-00001-of-00002.safetensors

# listeners PID: "ADDR:PORT" of every TCP socket PID listens on
listeners() {
	ss -Htlnp | awk -v p="pid=$1," 'index($0, p) { print $4 }'
}

# only_on PID ADDR [EXCEPT]: at least one listener, all on ADDR; sets n
# to how many
only_on() {
	local l bad=()
	n=0
	for l in $(listeners "$1"); do
		[ "$l" = "${3:-}" ] && continue
		n=$((n + 1))
		[ "${l%:*}" = "$2" ] || bad+=("$l")
	done
	[ $n -ge 1 ] || fail "no listener of $1 to check: $(ss -Htlnp)"
	bound listeners_elsewhere = 0 "${#bad[@]}" "pid $1 listens on ${bad[*]}, not only on $2"
}

start_seed "$MODEL"
M=$WORK/mnt
mount_seed "$M"
cmp "$MODEL/$F1" "$M/m/$F1" || fail "$F1 differs"
only_on "$MOUNT_PID" 127.0.0.1
ok "seed on 127.0.0.1: the mount's $n fabric listener(s) on 127.0.0.1 alone"
unmount_check "$M" "$MOUNT_PID"
netns_setup
umask 077
openssl rand -hex 32 >"$WORK/tok"
umask 022
SEED_LOG=ns # the first seed runs on, writing seed.out
start_seed_ns "$MODEL" --token-file "$WORK/tok"
# Sources in the namespace: reached through the veth.
HOST_SAVE=$HOST
HOST=$NS_IP
mount_seed "$M" --token-file "$WORK/tok" --reseed
HOST=$HOST_SAVE
cmp "$MODEL/$F1" "$M/m/$F1" || fail "$F1 differs over the veth"
RS=$(sed -n 's/^reseed: \([^ ]*\) .*/\1/p' "$M/.seedfs/status")
case $RS in 0.0.0.0:*) ;; *) fail "re-seeder's control port: '$RS'" ;; esac
only_on "$MOUNT_PID" "$HOST_IP" "$RS"
ok "seed behind a veth: the mount's $n fabric listener(s), the re-seeder's slab endpoint among them, on $HOST_IP alone (control port $RS as --listen says)"
unmount_check "$M" "$MOUNT_PID"

# Two seeds on two interfaces (127.0.0.1, and behind the veth): each
# connection listens where its seed is reached, and each seed alone
# serves the mount (the connection to the second used to be bound to
# the first one's route: EINVAL once the first was gone).
SEED_NS_PID=$SEED_PID
SEED_LOG=lo
start_seed "$MODEL" --token-file "$WORK/tok"
MOUNT_SEEDS=$HOST:$SEED_PORT,$NS_IP:$(seed_port "$WORK/ns.out") \
	mount_seed "$M" --token-file "$WORK/tok" --cache-size 16M -o direct_io
for f in $(cd "$MODEL" && find . -type f); do cmp "$MODEL/$f" "$M/m/$f" || fail "$f differs"; done
bad=$(listeners "$MOUNT_PID" | awk -F: -v a=127.0.0.1 -v b="$HOST_IP" '$1 != a && $1 != b')
bound listeners_elsewhere = 0 "$(grep -c . <<<"$bad" || true)" "two seeds: the mount listens on $bad"
listeners "$MOUNT_PID" | grep -q "^$HOST_IP:" || fail "two seeds: no listener on $HOST_IP"
kill "$SEED_PID"
for f in $(cd "$MODEL" && find . -type f); do
	cmp "$MODEL/$f" "$M/m/$f" || fail "$f differs from the seed behind the veth alone"
done
ok "two seeds on two interfaces: listeners on 127.0.0.1 and $HOST_IP alone, and the second seed alone serves byte-exact"
unmount_check "$M" "$MOUNT_PID"
sanitizers_clean
