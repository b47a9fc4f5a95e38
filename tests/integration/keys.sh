#!/usr/bin/env bash
# Keys nobody can guess: every registration's key is 64 random bits
# (libfabric tcp, sockets and shm let the application choose), so two
# seeds of the same files publish different, large keys; a reader given
# the seed's fabric address and a region's address but not its key is
# refused by the provider (tests/tools/guesskey: 0-7 and the real key
# one off), while the real key reads.  shm does not check keys at all
# (the reader copies with process_vm_readv, which the kernel allows to
# the same user only): pinned here as docs/security.md says.
source "$(dirname "$0")/lib.sh" "$1"
GUESS=$BUILD/tests/guesskey

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2 >/dev/null
start_seed "$MODEL" --protocol tcp,sockets,shm
P1=$SEED_PORT
SEED_LOG=seed2 start_seed "$MODEL" --protocol tcp
P2=$SEED_PORT

curl -fsS "http://$HOST:$P1/v1/manifest" >"$WORK/m1.json"
curl -fsS "http://$HOST:$P2/v1/manifest" >"$WORK/m2.json"
jq -r '.. | objects | select(has("key")) | .key' "$WORK/m1.json" | sort -u >"$WORK/k1"
jq -r '.. | objects | select(has("key")) | .key' "$WORK/m2.json" | sort -u >"$WORK/k2"
[ -s "$WORK/k1" ] && [ -s "$WORK/k2" ] || fail "no keys in the manifests"
bound shared_keys = 0 "$(comm -12 "$WORK/k1" "$WORK/k2" | wc -l)" "keys the two seeds share: $(comm -12 "$WORK/k1" "$WORK/k2" | tr '\n' ' ')"
# 0x and at most 16 hex digits, no leading zero; 11 digits or more is
# 2^40 or more (a 64-bit random key is below 2^40 with odds 2^-24), and
# among this many keys one has 16 digits, 2^60 or more (all below:
# odds 16^-n).
bad=$(grep -Ev '^0x[1-9a-f][0-9a-f]{0,15}$' "$WORK/k1" "$WORK/k2" || true)
bound malformed_keys = 0 "$(echo -n "$bad" | grep -c . || true)" "keys not 0x and 1-16 hex digits: $bad"
small=$(awk '{ if (length($1) - 2 < 11) print }' "$WORK/k1" "$WORK/k2")
bound keys_below_2_40 = 0 "$(echo -n "$small" | grep -c . || true)" "keys below 2^40: $small"
n=$(cat "$WORK/k1" "$WORK/k2" | wc -l)
bound keys ">=" 8 "$n" "keys in the two manifests"
big=$(awk '{ if (length($1) - 2 == 16) n++ } END { print n + 0 }' "$WORK/k1" "$WORK/k2")
bound keys_at_2_60 ">=" 1 "$big" "keys of $n at 2^60 or more: $(cat "$WORK/k1" "$WORK/k2" | tr '\n' ' ')"
ok "$n keys, none shared by the two seeds, none below 2^40, $big at 2^60 or more ($(head -n 2 "$WORK/k1" | tr '\n' ' '))"

for p in tcp sockets; do
	out=$("$GUESS" --seed "$HOST:$P1" --protocol $p 2>&1) || fail "$p: $out"
	ok "$p: $out"
done
st=0
out=$("$GUESS" --seed "$HOST:$P1" --protocol shm 2>&1) || st=$?
[ $st = 1 ] && [[ "$out" == *"(guessed) read the seed's memory"* ]] ||
	fail "shm now checks keys? update docs/security.md: $out"
ok "shm: keys are not checked (same host, same user only): $out"
sanitizers_clean
