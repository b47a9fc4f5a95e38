#!/usr/bin/env bash
# Sources come and go: re-seeders started and killed -9 one after
# another against one seed (each restart is a new address).  A
# long-lived mount frees the dead ones (their threads, connections and
# memory), never holds more than RSRC_PEERS_MAX (8) re-seeders at a
# time, says so when the cap binds, and uses a live re-seeder started
# after all of that.  Its threads and fds at the end are what they were
# with no re-seeder, its RSS stops growing (the second half of the churn
# adds at most 16 MiB), and it reads
# byte-exact throughout.  CHURN_N re-seeders (default 20, over twice
# the cap).
source "$(dirname "$0")/lib.sh" "$1"

N=${CHURN_N:-20}
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2
F1=model-00001-of-00002.safetensors
MFILES=$(cd "$MODEL" && find . -type f | sed 's|^\./||')
# No fleet lanes (--fleet-from 1024; by default from 9 re-seeders
# listed): each re-seeder here is killed before the next starts, and in
# the lanes a new one's reads waited on members already dead (3-6 s
# each from the ninth on).  A re-seeds nothing, so it is in no ring
# either way: what the seed lists it, and all asserted of it, is the
# same.
start_seed "$MODEL" --fleet-from 1024
SP=$SEED_PORT

A=$WORK/a
MOUNT_LOG=a mount_seed "$A" --cache-size 64M
APID=$MOUNT_PID
cmp "$MODEL/$F1" "$A/m/$F1" || fail "mount A: $F1"
# threads, fds, RSS (kB) of PID; its read threads (seedfs-read, fs/
# readq.h: a pool that grows as reads wait, to its bound) not counted
usage() {
	echo "$(cat /proc/"$1"/task/*/comm 2>/dev/null | grep -cvx 'seedfs-read')" \
		"$(find "/proc/$1/fd" -mindepth 1 2>/dev/null | wc -l)" \
		"$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status")"
}
sleep 1 # its poller and connections settled
read -r t0 f0 _ < <(usage "$APID")
# live_reseeders: how many re-seeders A's status lists now
live_reseeders() { grep -c '^reseeder: ' "$A/.seedfs/status" || true; }
# start_reseeder I: a re-seeding mount that holds the model (each file
# read through it, byte-exact); sets RADDR, RPID.
# Each listens on an address of its own, 127.0.0.(10 + I) (9: "live"),
# as a fleet's re-seeders are each on a host of their own: a seed lists
# only a few announced from one address (--announce-per-host), and the
# killed ones stay listed 15 s.
start_reseeder() {
	local mnt=$WORK/r$1 ip=127.0.0.9
	[ "$1" = live ] || ip=127.0.0.$((10 + $1 % 240))
	MOUNT_LOG=r$1 mount_seed "$mnt" --reseed --listen "$ip:0" --cache-size 32M
	RPID=$MOUNT_PID
	# (Read, not `seedfs prefetch`: a re-seeder's prefetch first waits
	# until it sees itself listed, and one whose 8 peer slots are
	# taken by dead re-seeders refuses itself its slot: 3 s lost on
	# each from the ninth on; A, not the re-seeders, is under test.)
	for f in $MFILES; do
		cmp "$MODEL/$f" "$mnt/m/$f" || fail "re-seeder $1: $f"
	done
	RADDR=$(awk '$1 == "reseed:" { print $2 }' "$mnt/.seedfs/status")
	[ -n "$RADDR" ] || fail "re-seeder $1: no reseed line"
}

max_live=0 used=0
for i in $(seq "$N"); do
	start_reseeder "$i"
	# A finds it through the seed (asked every second), unless the
	# cap binds: then it is refused, counted.
	for _ in $(seq 40); do
		grep -q "^reseeder: $RADDR " "$A/.seedfs/status" && break
		sleep 0.05
	done
	grep -q "^reseeder: $RADDR " "$A/.seedfs/status" && used=$((used + 1))
	l=$(live_reseeders)
	[ "$l" -gt "$max_live" ] && max_live=$l
	[ "$l" -le 8 ] || fail "A lists $l re-seeders (cap 8)"
	kill -9 "$RPID"
	fusermount3 -u -z "$WORK/r$i" 2>/dev/null || true
	kill -0 "$APID" 2>/dev/null || fail "mount A died"
	cmp "$MODEL/$F1" "$A/m/$F1" || fail "mount A: $F1 after re-seeder $i"
	# RSS once the first few went (malloc's per-thread arenas and the
	# cache's memory are in by then), and halfway: memory that grows
	# with every source shows as growth from there to the end.
	[ "$i" -eq 4 ] && read -r _ _ m0 < <(usage "$APID")
	[ "$i" -eq $((N / 2)) ] && read -r _ _ mhalf < <(usage "$APID")
done
read -r _ _ mloop < <(usage "$APID")
ok "$N re-seeders started and killed -9: A used $used of them, at most $max_live at once (cap 8), read byte-exact throughout"
grep -q "re-seeder .* not used: this replica works with at most RSRC_PEERS_MAX re-seeders" "$WORK/a.log" ||
	fail "the cap never bound: $(grep -c 'is a source from now on' "$WORK/a.log") added"

# The dead are freed: RSRC_GONE_MS (10 s) after they went silent.
for _ in $(seq 300); do
	[ "$(live_reseeders)" -eq 0 ] && break
	sleep 0.1
done
[ "$(live_reseeders)" -eq 0 ] ||
	fail "dead re-seeders still listed 30 s on: $(grep '^reseeder: ' "$A/.seedfs/status")"
freed=$(sed -n 's/^sources_live: .*; freed \([0-9]*\),.*/\1/p' "$A/.seedfs/status")
read -r _ _ mfreed < <(usage "$APID")
[ "${freed:-0}" -ge "$used" ] || fail "freed ${freed:-?} of $used: $(grep '^sources_' "$A/.seedfs/status")"
cp "$A/.seedfs/metrics" "$WORK/metrics"
mf=$(sed -n 's/^seedfs_sources_freed_total \([0-9]*\)$/\1/p' "$WORK/metrics")
mr=$(sed -n 's/^seedfs_sources_refused_total{cap="peers"} \([0-9]*\)$/\1/p' "$WORK/metrics")
[ "${mf:-0}" -ge "$freed" ] && [ "${mr:-0}" -ge 1 ] ||
	fail "metrics: freed ${mf:-none} (status $freed), refused at the peers' cap ${mr:-none}: $(grep '^seedfs_sources' "$WORK/metrics")"
grep -q "is no longer a source: it has not answered for RSRC_GONE_MS" "$WORK/a.log" ||
	fail "no line says why a re-seeder left"

# A live one started now is used by the long-lived mount.
start_reseeder live
LPID=$RPID
for _ in $(seq 100); do
	grep -q "^reseeder: $RADDR (reachable)" "$A/.seedfs/status" && break
	sleep 0.1
done
grep -q "^reseeder: $RADDR (reachable)" "$A/.seedfs/status" ||
	fail "A does not use the live re-seeder $RADDR: $(grep -E '^(reseeder|sources_)' "$A/.seedfs/status")"
ok "the dead were freed ($freed), and a live re-seeder started after them is used"
# Their connections' memory went with them: the cache's peers are
# bounded by the most at once (8 re-seeders, the seed, the live one,
# and a couple whose last pull was still out), not by how many came
# ($used; before F4's fix every one stayed).
slots=$(sed -n 's/^cache_peers: [0-9]* (\([0-9]*\) slots)$/\1/p' "$A/.seedfs/status")
[ -n "$slots" ] && [ "$slots" -le 12 ] ||
	fail "cache peer slots ${slots:-none} after $used re-seeders: $(grep '^cache_peers' "$A/.seedfs/status")"
ok "cache peers: $(sed -n 's/^cache_peers: //p' "$A/.seedfs/status") after $used re-seeders used"

# What the churn cost A: back to where it was, give or take one
# source's worth (the live one: a poller, a connection).
sleep 1
read -r t1 f1 m1 < <(usage "$APID")
[ "$t1" -le $((t0 + 3)) ] || fail "threads $t0 -> $t1"
[ "$f1" -le $((f0 + 16)) ] || fail "fds $f0 -> $f1"
# RSS only in the normal build: ASan's quarantine holds freed memory
# back (256 MiB by default) and TSan's shadow grows with it, so there
# RSS says nothing of what the mount keeps.
[ "$SFS_BUILD_KIND" != normal ] || [ "$m1" -le $((mhalf + 16384)) ] ||
	fail "RSS ${m0} kB after 4 re-seeders, ${mhalf} kB after $((N / 2)), ${mloop} kB after all, ${mfreed} once freed, ${m1} kB at the end; the largest mappings (kB): $(pmap -x "$APID" | sort -k3 -n | tail -n 9)"
ok "mount A: threads $t0 -> $t1, fds $f0 -> $f1, RSS $((m0 / 1024)) MiB after 4 re-seeders, $((mhalf / 1024)) after $((N / 2)), $((m1 / 1024)) at the end"
cmp "$MODEL/$F1" "$A/m/$F1" || fail "mount A: $F1 at the end"
unmount_check "$WORK/rlive" "$LPID"
unmount_check "$A" "$APID"
