#!/usr/bin/env bash
# A long-lived mount under churn: the seed republishes its model GENS
# times (every file of a directory of small files and one shard
# changed each time), the mount reads every generation (through a disk
# tier too) and an old handle keeps one generation open for a while.
# What the mount holds per generation and per holder (views, tree
# nodes, cache sets and holders, disk sources) stays what the live
# generations need, and so does its memory: nothing grows with the
# number of generations it has seen.
source "$(dirname "$0")/lib.sh" "$1"

GENS=${GENS:-40}
NFILES=300 # small files, all changed each generation: new inodes
GRACE=1
RSS_GROW_MIB=2 # from generation 10 to GENS (the leak was 3-4 MiB at 300 files)
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 2
S1=model-00001-of-00002.safetensors

# Generation G's files: written aside and renamed into place (the seed
# still serves the previous generation from the old files meanwhile).
write_gen() {
	local g=$1 i
	rm -rf "$MODEL/many.new" "$MODEL/many.old"
	mkdir "$MODEL/many.new"
	for i in $(seq $NFILES); do
		echo "generation $g file $i" >"$MODEL/many.new/f$i.txt"
	done
	[ -d "$MODEL/many" ] && mv "$MODEL/many" "$MODEL/many.old"
	mv "$MODEL/many.new" "$MODEL/many"
	cp "$MODEL/$S1" "$MODEL/$S1.tmp"
	printf 'generation %08d' "$g" |
		dd of="$MODEL/$S1.tmp" bs=1 seek=1048576 conv=notrunc status=none
	mv "$MODEL/$S1.tmp" "$MODEL/$S1"
	rm -rf "$MODEL/many.old"
}
write_gen 1
start_seed "$MODEL" --grace $GRACE
MNT=$WORK/mnt
mount_seed "$MNT" --cache-dir "$WORK/cache" --cache-size 64M
M=$MNT/m
ST=$MNT/.seedfs/status

# Reads of generation G through the mount: byte-exact.
read_gen() {
	cmp "$MODEL/$S1" "$M/$S1" || fail "generation $1: $S1 differs"
	cmp "$MODEL/many/f7.txt" "$M/many/f7.txt" || fail "generation $1: many/f7.txt"
	cat "$M/many/f$((1 + $1 % NFILES)).txt" >/dev/null
}
counts() {
	cp "$ST" "$WORK/status.now"
	local k out=""
	for k in views_held tree_nodes cache_sets cache_holders disk_sources; do
		out+="$k $(status_val "$WORK/status.now" "$k") "
	done
	echo "$out"
}
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$MOUNT_PID/status"; }

read_gen 1
sleep 0.5
nodes1=$(status_val "$ST" tree_nodes)
[ -n "$nodes1" ] || fail "no tree_nodes in status: $(cat "$ST")"
echo "generation 1: $(counts)"

# A handle opened in generation 1 keeps it while generations come.
coproc HOLD { "$HOLDFILE" "$M/$S1"; }
hold_pid=$HOLD_PID
PIDS+=("$hold_pid")
read -r line <&"${HOLD[0]}"
[ "$line" = OPEN ] || fail "holdfile: $line"
hold() { echo "$1" >&"${HOLD[1]}"; read -r reply <&"${HOLD[0]}"; echo "$reply"; }
hold 'R 0 100000' >/dev/null

rss_start=""
for g in $(seq 2 "$GENS"); do
	write_gen "$g"
	# The seed serves at most 8 generations at once: a republish while
	# it does is refused (the grace, 1 s, frees one); asked again then.
	pub="^seedfs seed: published model m generation $g "
	busy="generations are still served; wait for the grace period"
	for _ in $(seq 20); do
		refused=$(grep -c "$busy" "$WORK/seed.err" || true)
		kill -HUP "$SEED_PID"
		for _ in $(seq 200); do
			grep -q "$pub" "$WORK/seed.out" && break 2
			[ "$(grep -c "$busy" "$WORK/seed.err" || true)" -gt "$refused" ] && break
			sleep 0.05
		done
		sleep 0.2
	done
	grep -q "$pub" "$WORK/seed.out" || fail "no generation $g: $(tail -n 3 "$WORK/seed.err")"
	read_gen "$g"
	grep -q "^model: m generation $g " "$ST" || fail "generation $g not adopted: $(grep '^model:' "$ST")"
	if [ "$g" = 5 ]; then
		# The old handle is done: its generation may go.
		echo Q >&"${HOLD[1]}"
		wait "$hold_pid" 2>/dev/null || true
	fi
	[ $((g % 10)) = 0 ] && echo "generation $g: $(counts)rss_kb $(rss_kb)"
	# Memory once the slab is all faulted in and a few generations
	# came and went.
	if [ "$g" = 10 ]; then
		for _ in $(seq 100); do grep -q '^cache_ready:' "$ST" || break; sleep 0.1; done
		rss_start=$(rss_kb)
	fi
done

# The superseded generations expire (GRACE after their successor,
# a sweep later): what is left is the current one, at most one more.
for _ in $(seq 100); do
	[ "$(status_val "$ST" views_held)" -le 2 ] && break
	sleep 0.1
done
sleep 0.5
c=$(counts)
rss_end=$(rss_kb)
echo "after $GENS generations: ${c}rss_kb $rss_end (at generation 10: $rss_start)"
read -r _ views _ nodes _ sets _ holders _ dsrcs <<<"$c"
bound views_held "<=" 3 "$views" "after $GENS generations: views_held (at most 3 live)"
bound cache_sets "<=" 3 "$sets" "after $GENS generations: cache_sets (at most 3 live)"
bound cache_holders "<=" 3 "$holders" "after $GENS generations: cache_holders (one seed: one per live view)"
bound disk_sources "<=" 3 "$dsrcs" "after $GENS generations: disk_sources (at most 3 live)"
# Three generations' nodes at most, in % of one's (rounded up).
bound tree_nodes_pct "<=" 300 $(((nodes * 100 + nodes1 - 1) / nodes1)) \
	"after $GENS generations: tree_nodes $nodes ($nodes1 for one generation), % of one's"
# RSS means something else under the sanitizers (shadow memory,
# quarantine): asserted in the normal build only.
grow=$(((rss_end - rss_start) / 1024))
[ "$SFS_BUILD_KIND" != normal ] ||
	bound rss_grow_mib "<=" "$RSS_GROW_MIB" "$grow" "RSS growth from generation 10 to $GENS ($rss_start -> $rss_end KiB), MiB"
ok "after $GENS generations: $views views, $nodes tree nodes ($nodes1 with one), $sets cache sets, $holders holders, $dsrcs disk sources; RSS $rss_start -> $rss_end KiB from generation 10"
# Reads still right, the page cache of the current generation too.
read_gen "$GENS"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
