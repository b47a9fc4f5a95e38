#!/usr/bin/env bash
# A hostile source beside a real seed (tests/tools/hostile.py): deep, wide
# and huge answers to every question a mount asks (manifests, /v1/models,
# /v1/sources, a re-seeder's holdings) are each refused in one line naming
# the answer and the limit; a new name at every answer (churn) keeps the
# mount's models within its caps, said once, and they go when no longer
# listed; a name that comes back is shown again, byte-exact.  The mount's
# peak RSS stays within 200 MiB of where it was, and the real seed's
# model reads byte-exact throughout.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/model
"$GENMODEL" "$MODEL" --size 2M --shards 1
start_seed "$MODEL" --name m
ST=$WORK/hostile
mkdir -p "$ST"
# The hostile source, and three more hostile.py on the same state (the
# fat re-seeders below, asked nothing until a /v1/sources lists them),
# started together.
for i in "" 1 2 3; do
	python3 "$(dirname "$0")/../tools/hostile.py" "$HOST:$SEED_PORT" "$ST" \
		>"$WORK/hostile$i.out" 2>"$WORK/hostile$i.err" &
	PIDS+=($!)
done
# hostile_port I: the port hostile.py I (""; 1, 2, 3) listens on
hostile_port() {
	local p
	for _ in $(seq 200); do
		p=$(sed -n 's/^port //p' "$WORK/hostile$1.out")
		[ -n "$p" ] && echo "$p" && return 0
		sleep 0.05
	done
	fail "hostile.py $1 did not start: $(cat "$WORK/hostile$1.err")"
}
HP=$(hostile_port "")
H=$HOST:$HP

MNT=$WORK/mnt
MOUNT_SEEDS="$HOST:$SEED_PORT,$H" mount_seed "$MNT" --cache-size 64M \
	--max-models 100
S=$MNT/.seedfs/status
same() {
	local f
	for f in $(cd "$MODEL" && find . -type f | sed 's|^\./||'); do
		cmp "$MODEL/$f" "$MNT/m/$f" || fail "m/$f differs $1"
	done
}
same "before"
# The cache is faulted in behind the ready line: the peak counts from
# when it is all there.
for _ in $(seq 100); do grep -q '^cache_ready:' "$S" || break; sleep 0.05; done
hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$MOUNT_PID/status"; }
HWM0=$(hwm)

# logged PATTERN: the mount's log has PATTERN within 10 s
logged() {
	local i
	for i in $(seq 200); do
		grep -qF -- "$1" "$WORK/mount.log" && return 0
		sleep 0.05
	done
	fail "not logged: $1"
}
# control_says PATTERN: the hostile seed's seed_control line in
# .seedfs/status has it within 10 s
control_says() {
	local i
	for i in $(seq 100); do
		CONTROL_LINE=$(awk -v s="seed: $H " 'index($0, s) == 1 { on = 1; next }
			/^(seed|reseeder): / { on = 0 }
			on && /^seed_control:/' "$S")
		case $CONTROL_LINE in *"$1"*) return 0 ;; esac
		sleep 0.1
	done
	fail "not in status: $1: $CONTROL_LINE"
}

# Manifests: deep, wide (25 million values in 50 MB), huge (300 MiB,
# over the cap), a gzip bomb (300 KiB that unpack to 300 MiB: refused
# past 256 x, asked again ungzipped: bytes that are no JSON), one
# gzipped twice (a Content-Encoding not asked for); and a re-seeder (localhost:PORT, listed in /v1/sources)
# whose holdings hold 10 million values.
echo "deep wide huge bomb stacked" >"$ST/names"
echo reseeder >"$ST/sources"
echo wide >"$ST/holdings"
logged "of deep: bad manifest: manifest: nested 1000000 deep, more than the 32 allowed"
logged "of wide: bad manifest: manifest: 25000001 JSON values, more than the 20000000 allowed"
logged "of huge: http://$H/v1/manifest?model=huge: response larger than 268435456 bytes"
logged "http://$H/v1/manifest?model=bomb: response unpacks to more than 256 times the"
logged "of bomb: bad manifest: manifest: not valid JSON"
logged "of stacked: http://$H/v1/manifest?model=stacked: an answer in a Content-Encoding other than gzip"
# (A holdings answer's cap is the model's: 64 KiB and 16 bytes for each
# chunk of a quarter of the mount's, 64 for each file: 66304 bytes here.)
logged "holdings of m from localhost:$HP: http://localhost:$HP/v1/holdings?model=m&content="
logged "&form=2: response larger than 66304 bytes"
n=$(grep -c "holdings of m from localhost:$HP: http" "$WORK/mount.log")
bound holdings_refusal_lines "=" 1 "$n" "times the holdings refusal was logged"
ok "manifests and holdings refused: $(grep -E 'bad manifest|holdings of' "$WORK/mount.log" | sed 's/.* W source: //' | cut -c1-150 | sort -u | tr '\n' '|')"
rm -f "$ST/names"

# Four re-seeders (this one and three more hostile.py on the same state)
# whose holdings are fat: 7.99 million values in 16 MB, within the JSON
# limits such an answer had (jansson spent about 1 GB on each, asked
# every 250 ms per re-seeder: 4 took a victim to 4 GB).  Each is refused
# by its size before a byte is kept, asked again 0.5, 1, 2 and 4 s
# later, then not at all while it runs; the mount's peak RSS grows by at
# most 64 MiB.
HWMF=$(hwm)
FAT=()
for i in 1 2 3; do
	FAT+=("$(hostile_port $i)")
done
echo fat >"$ST/holdings"
echo "reseeder ${FAT[*]}" >"$ST/sources"
for p in "$HP" "${FAT[@]}"; do
	logged "holdings of m from localhost:$p: 5 answers in a row refused: not asked again while it runs"
done
asked() { cat "$ST"/count.holdings.* 2>/dev/null | wc -l; }
a1=$(asked)
sleep 3
a2=$(asked)
bound fat_holdings_asks_in_3s "=" 0 $((a2 - a1)) "holdings asked in the 3 s after 5 refusals each ($a1 before)"
HWMG=$(hwm)
if grep -qE '^SEEDFS_(SANITIZE|TSAN):BOOL=ON' "$BUILD/CMakeCache.txt"; then
	ok "fat holdings of 4 re-seeders: refused by size, $a2 asks in all, then none (peak RSS not measured under a sanitizer)"
else
	bound fat_holdings_rss_mib "<=" 64 $(((HWMG - HWMF + 1023) / 1024)) "peak RSS growth with 4 re-seeders' fat holdings, MiB"
	ok "fat holdings of 4 re-seeders: refused by size, $a2 asks in all, then none; peak RSS +$(((HWMG - HWMF) / 1024)) MiB"
fi
rm -f "$ST/holdings" "$ST/sources"

# /v1/sources with half a million values; /v1/models deep, then wide.
echo wide >"$ST/sources"
logged "$H: /v1/sources: 500003 JSON values, more than the 65536 allowed"
echo deep >"$ST/models"
logged "cannot ask $H what it publishes (/v1/models: nested 1000000 deep, more than the 8 allowed)"
echo wide >"$ST/models"
control_says "(/v1/models: 2000005 JSON values, more than the 65536 allowed)"
ok "/v1/sources and /v1/models refused: $CONTROL_LINE"
rm -f "$ST/models" "$ST/sources"

# Churn: every answer lists 64 names never listed before, 4 answers.
# One source brings in at most 25 of --max-models 100; the names it
# stops listing leave and are freed.
models() { awk '$1 == "models:" { print $2 }' "$S"; }
c0=$(wc -l <"$ST/count.models")
echo 64 >"$ST/churn"
most=0
while [ $(($(wc -l <"$ST/count.models") - c0)) -lt 4 ]; do
	n=$(models)
	[ -n "$n" ] || fail "no models line in status: $(head -n 20 "$S")"
	[ "$n" -gt "$most" ] && most=$n
	sleep 0.1
done
rm -f "$ST/churn"
bound models_at_once "<=" 26 "$most" "models at once (at most 25 from the hostile source and m)"
# lines FIXED1 FIXED2: how many lines of the mount's log hold both
lines() { awk -v a="$1" -v b="$2" 'index($0, a) && index($0, b) { n++ } END { print n + 0 }' "$WORK/mount.log"; }
n=$(lines "W model: not adding model c" " from $H: it brought in 25 models, the most one source may (a quarter of --max-models 100, at most 256); more from it are refused until there is room (counted in status)")
[ "$n" = 1 ] || fail "the cap was said $n times, not once: $(grep 'not adding' "$WORK/mount.log" | head -n 3)"
refused=$(awk -v s="seed: $H " 'index($0, s) == 1 { on = 1; next }
	/^(seed|reseeder): / { on = 0 }
	on && $1 == "seed_models:" { print $5 }' "$S")
[ "${refused:-0}" -gt 0 ] || fail "no refusals counted: $(grep -A6 "^seed: $H" "$S")"
for _ in $(seq 100); do [ "$(models)" = 1 ] && break; sleep 0.1; done
[ "$(models)" = 1 ] || fail "$(models) models left once the churn stopped: $(grep '^model' "$S" | head)"
[ "$(ls "$MNT" | tr '\n' ' ')" = "m " ] || fail "left in the mount: $(ls "$MNT" | head)"
shown=$(lines "I model: model c" " generation 1: ")
ok "churn of 4 answers of 64 new names: at most $most models at once, $shown shown and gone, $refused refused at the cap, said once; back to 1 model"

# A name shown and gone comes back: shown again, byte-exact.
back=$(sed -n 's/.* I model: model \(c[0-9]*-[0-9]*\) generation 1:.*/\1/p' "$WORK/mount.log" | head -n 1)
echo "$back" >"$ST/names"
for _ in $(seq 100); do [ -d "$MNT/$back" ] && break; sleep 0.1; done
[ -d "$MNT/$back" ] || fail "$back did not come back: $(ls "$MNT")"
for f in $(cd "$MODEL" && find . -type f | sed 's|^\./||'); do
	cmp "$MODEL/$f" "$MNT/$back/$f" || fail "$back/$f differs"
done
ok "$back came back: shown again, byte-exact"
rm -f "$ST/names"

same "beside the hostile source"
HWM1=$(hwm)
if grep -qE '^SEEDFS_(SANITIZE|TSAN):BOOL=ON' "$BUILD/CMakeCache.txt"; then
	ok "peak RSS not measured under a sanitizer (shadow memory)"
else
	bound hostile_rss_mib "<=" 200 $(((HWM1 - HWM0 + 1023) / 1024)) "peak RSS growth beside the hostile sources (from $((HWM0 / 1024)) MiB), MiB"
	ok "peak RSS $((HWM0 / 1024)) MiB before, $((HWM1 / 1024)) MiB after (bound: 200 MiB more)"
fi
ok "m read byte-exact beside the hostile source"
unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
