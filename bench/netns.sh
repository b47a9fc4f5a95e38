# shellcheck shell=bash
# Hosts in network namespaces, for bench/fanout.sh and bench/chaos.sh
# (sourced).  Every host is a namespace $P-NAME joined to a bridge (in
# a namespace of its own, $P"hub") by a veth pair, both ends shaped with
# tc tbf.  The caller sets P (a short prefix for names), NET (the first
# three octets of a /24) and NSS=() (the namespaces made: its cleanup
# deletes them).

# Rate in bits per second from tc's words (100mbit, 1gbit, 500kbit).
bps() {
	echo "$1" | awk '{ v = $0 + 0; u = tolower($0); sub(/^[0-9.]+/, "", u)
		m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 1
		printf "%.0f", v * m }'
}

# hub: the bridge's namespace, $HUB.
hub() {
	HUB=${P}hub
	ip netns add "$HUB" || return 1
	NSS+=("$HUB")
	ip -n "$HUB" link add br0 type bridge || return 1
	ip -n "$HUB" link set br0 up || return 1
	ip -n "$HUB" link set lo up || return 1
}

# host NAME INDEX RATE: a namespace $P-NAME with address $NET.INDEX,
# RATE each way.
host() {
	local ns=$P-$1 ip=$NET.$2 rate=$3 port=${P}p$2
	ip netns add "$ns"
	NSS+=("$ns")
	ip link add "$port" netns "$HUB" type veth peer name eth0 netns "$ns"
	ip -n "$HUB" link set "$port" master br0 up
	ip -n "$ns" addr add "$ip/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" link set lo up
	shape "$ns" eth0 "$rate" add
	shape "$HUB" "$port" "$rate" add
}

# shape NETNS DEV RATE add|change: tbf at RATE on DEV, a bucket of a few
# ms at the rate (bursts queue, not drop).
shape() {
	local burst=$(($(bps "$3") / 8 / 250 + 16384))
	ip netns exec "$1" tc qdisc "$4" dev "$2" root tbf rate "$3" \
		burst "$burst" latency 100ms
}
