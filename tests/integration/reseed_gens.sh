#!/usr/bin/env bash
# Re-seeders under republishes: three mounts that re-seed (each a source
# of the others) follow GENS generations of one model, reading each.  A
# generation is held for what uses it, never because another re-seeder
# lists it: once the seed's grace period is over and no handle is open,
# every mount holds only the generation the seed serves (views, tree
# nodes back to one generation's), lists only that one as served, serves
# no older one's bytes, and a handle opened in generation 1 gets ESTALE.  (Before, each re-seeder
# kept every old generation because another one listed it, which listed
# it because the first did: 2 to 11 views held after 12 republishes,
# for good.)
source "$(dirname "$0")/lib.sh" "$1"

GENS=${GENS:-10}
GRACE=4
NMNT=3
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 2
S1=model-00001-of-00002.safetensors

# Generation G: the shard rewritten aside and renamed into place.
write_gen() {
	cp "$MODEL/$S1" "$MODEL/$S1.tmp"
	printf 'generation %08d' "$1" |
		dd of="$MODEL/$S1.tmp" bs=1 seek=1048576 conv=notrunc status=none
	mv "$MODEL/$S1.tmp" "$MODEL/$S1"
}
write_gen 1
cp "$MODEL/$S1" "$WORK/gen1"
start_seed "$MODEL" --grace $GRACE
SADDR=$HOST:$SEED_PORT

MNTS=()
PIDS_M=()
for i in $(seq $NMNT); do
	MOUNT_LOG=r$i mount_seed "$WORK/r$i" --reseed --listen "$HOST:0" \
		--cache-size 64M
	MNTS+=("$WORK/r$i")
	PIDS_M+=("$MOUNT_PID")
done

# served_of ADDR: the generations ADDR's /v1/models lists as served for
# model m, sorted, space-separated.
served_of() {
	curl -sf "http://$1/v1/models" | python3 -c '
import json, sys
o = json.load(sys.stdin)
print(" ".join(str(g) for g in sorted(s["generation"]
      for m in o["models"] if m["model"] == "m" for s in m["served"])))'
}
addr_of() { awk '$1 == "reseed:" { print $2 }' "$1/.seedfs/status"; }
# expires_of ADDR GEN: the expires_in_ms ADDR's /v1/models gives
# generation GEN of m ("none": listed without it; "" not listed)
expires_of() {
	curl -sf "http://$1/v1/models" | python3 -c '
import json, sys
g = int(sys.argv[1])
for m in json.load(sys.stdin)["models"]:
    for s in m["served"] if m["model"] == "m" else []:
        if s["generation"] == g:
            print(s.get("expires_in_ms", "none"))' "$2"
}
# hash_of FILE OFF LEN: FNV-1a 64 of LEN bytes at OFF, as holdfile says
hash_of() { printf 'R %s %s\nQ\n' "$2" "$3" | "$HOLDFILE" "$1" | sed -n 2p; }

# Every mount reads generation 1 and uses the other two as sources.
for m in "${MNTS[@]}"; do
	cmp "$MODEL/$S1" "$m/m/$S1" || fail "$m: generation 1 differs"
done
for m in "${MNTS[@]}"; do
	for _ in $(seq 200); do
		n=$(grep -c '^reseeder: .* (reachable)$' "$m/.seedfs/status" || true)
		[ "$n" -ge $((NMNT - 1)) ] && break
		sleep 0.05
	done
	[ "$n" -ge $((NMNT - 1)) ] ||
		fail "$m uses $n re-seeders: $(grep -E '^(seed|reseeder):' "$m/.seedfs/status")"
done
# Generation 1's content digest, as the seed lists it.
C1=$(curl -sf "http://$SADDR/v1/models" | python3 -c '
import json, sys
print([m["content"] for m in json.load(sys.stdin)["models"] if m["model"] == "m"][0])')
[ -n "$C1" ] || fail "no content digest of generation 1 from the seed"
for m in "${MNTS[@]}"; do
	curl -sf "http://$(addr_of "$m")/v1/holdings?model=m&content=$C1" >/dev/null ||
		fail "$m's re-seeder does not serve generation 1's holdings"
done
nodes1=$(status_val "${MNTS[0]}/.seedfs/status" tree_nodes)
[ -n "$nodes1" ] || fail "no tree_nodes in status: $(cat "${MNTS[0]}/.seedfs/status")"
ok "$NMNT re-seeding mounts read generation 1 ($nodes1 tree nodes), each a source of the others"

# A handle opened in generation 1 on the first mount, read once.
coproc HOLD { "$HOLDFILE" "${MNTS[0]}/m/$S1"; }
hold_pid=$HOLD_PID
PIDS+=("$hold_pid")
read -r line <&"${HOLD[0]}"
[ "$line" = OPEN ] || fail "holdfile: $line"
hold() { echo "$1" >&"${HOLD[1]}"; read -r reply <&"${HOLD[0]}"; echo "$reply"; }
r=$(hold 'R 0 100000')
case "$r" in ERR*) fail "first read through the handle: $r" ;; esac

for g in $(seq 2 "$GENS"); do
	write_gen "$g"
	# The seed serves at most 8 generations at once: a republish
	# refused while it does is asked again.
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
	for m in "${MNTS[@]}"; do
		cmp "$MODEL/$S1" "$m/m/$S1" || fail "$m: generation $g differs"
		grep -q "^model: m generation $g " "$m/.seedfs/status" ||
			fail "$m: generation $g not adopted: $(grep '^model:' "$m/.seedfs/status")"
	done
	if [ "$g" = 2 ]; then
		# Within the grace: every re-seeder lists generation 1 with
		# what is left of the seed's grace, and the old handle reads
		# generation 1's bytes where it never read before.
		for m in "${MNTS[@]}"; do
			e=$(expires_of "$(addr_of "$m")" 1)
			[[ "$e" =~ ^[0-9]+$ ]] && [ "$e" -gt 0 ] && [ "$e" -le $((GRACE * 1000)) ] ||
				fail "$m lists generation 1 with expires_in_ms '${e}' within the seed's grace of $GRACE s"
		done
		want=$(hash_of "$WORK/gen1" 1048576 65536)
		r=$(hold 'R 1048576 65536')
		[ "$r" = "$want" ] || fail "old handle, a range it never read, within the grace: $r, generation 1's is $want"
		ok "within the grace: every re-seeder lists generation 1 with the time left (at most $GRACE s); the old handle reads generation 1's bytes"
	fi
	sleep 0.3
done
seed_served=$(served_of "$SADDR")
held=""
for m in "${MNTS[@]}"; do held+="$(status_val "$m/.seedfs/status" views_held) "; done
ok "$GENS generations read on every mount (views held now: $held; the seed serves $seed_served)"

# Idle past the grace period: the seed serves the last generation
# alone; so does every mount, within a sweep and a question to the seed
# (every second).
for _ in $(seq 100); do
	[ "$(served_of "$SADDR")" = "$GENS" ] && break
	sleep 0.1
done
[ "$(served_of "$SADDR")" = "$GENS" ] ||
	fail "the seed serves generations $(served_of "$SADDR") $((GRACE + 10)) s after the last republish"
# listed MNT: what its re-seeder lists, and its older_generations_served
listed() { echo "$(served_of "$(addr_of "$1")") / $(status_val "$1/.seedfs/status" older_generations_served)"; }
# Timed from the seed's serving it alone: a mount that never lists it
# alone ends its loop past 10 s, and the bound fails.
t_alone=$(now_ms)
for m in "${MNTS[@]}"; do
	while :; do
		el=$(($(now_ms) - t_alone))
		[ "$(listed "$m")" = "$GENS / 0" ] && break
		[ "$el" -gt 10000 ] && break
		sleep 0.1
	done
	bound listed_alone_ms "<=" 10000 "$el" "$m lists generations $(listed "$m") (served / older served; $GENS / 0 wanted) after the seed served $GENS alone: $(grep -E '^(model|older_|views_held|tree_nodes)' "$m/.seedfs/status" | tr '\n' ' '), ms"
done
# Nor does any re-seeder serve generation 1's bytes any more.
for m in "${MNTS[@]}"; do
	code=$(curl -s -o /dev/null -w '%{http_code}' \
		"http://$(addr_of "$m")/v1/holdings?model=m&content=$C1")
	[ "$code" = 404 ] || fail "$m's re-seeder answers $code for generation 1's holdings (404: not served)"
done
ok "every mount lists generation $GENS alone as served, as the seed does, and none serves generation 1"

# The handle of generation 1: ESTALE, cached range and new range.
r=$(hold 'R 0 100000')
[ "$r" = "ERR ESTALE" ] || fail "old handle, cached range, after the grace period: $r"
r=$(hold 'R 2000000 1000')
[ "$r" = "ERR ESTALE" ] || fail "old handle, new range, after the grace period: $r"
echo Q >&"${HOLD[1]}"
wait "$hold_pid" 2>/dev/null || true
ok "the handle opened in generation 1 gets ESTALE"

# What each mount holds: one generation's worth (the handle closed).
for m in "${MNTS[@]}"; do
	st=$m/.seedfs/status
	for _ in $(seq 100); do
		[ "$(status_val "$st" views_held)" = 1 ] &&
			[ "$(status_val "$st" tree_nodes)" = "$nodes1" ] && break
		sleep 0.1
	done
	v=$(status_val "$st" views_held)
	n=$(status_val "$st" tree_nodes)
	bound views_after_grace = 1 "$v" "$m: views held after the grace period"
	bound tree_nodes_off = 0 $((n - nodes1)) "$m: tree nodes after the grace period ($n) less generation 1's ($nodes1)"
done
ok "every mount holds one view and $nodes1 tree nodes, as after generation 1"

# Still right: the current generation through each mount.
for m in "${MNTS[@]}"; do
	cmp "$MODEL/$S1" "$m/m/$S1" || fail "$m: generation $GENS differs at the end"
done
for i in $(seq $NMNT); do
	unmount_check "${MNTS[$((i - 1))]}" "${PIDS_M[$((i - 1))]}"
done
sanitizers_clean
