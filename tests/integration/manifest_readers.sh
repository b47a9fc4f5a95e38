#!/usr/bin/env bash
# Slow readers of a large manifest share one copy of it.  A seed whose
# manifest is over 4 MB (256 MiB at 4 KiB checksum chunks, with their
# SHA-256) answers 32 clients that read /v1/manifest slowly (from
# 127.0.0.5, a 4 KiB receive buffer, 1 KiB every 100 ms) and 32 that
# read its gzipped form so (from 127.0.0.6), all at once for 10 s.
# Every answer of a generation is sent from the generation's one
# encoded copy (and its one gzipped copy): the seed's anonymous memory
# may grow by at most two manifests' worth while they read (a copy per
# reader, as before, would be 32 of each: over 250 MB here).
source "$(dirname "$0")/lib.sh" "$1"
SLOW=$BUILD/tests/slowclient

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 256M --shards 2
start_seed "$MODEL" --checksum-chunk 4K --digest sha256
URL=http://$HOST:$SEED_PORT/v1/manifest
# Its sizes; asking each once makes the gzipped copy the readers share.
M=$(curl -sf "$URL" | wc -c)
Z=$(curl -sf -H 'Accept-Encoding: gzip' "$URL" | wc -c)
[ "$M" -ge $((4 << 20)) ] || fail "a manifest of $M bytes: too small to tell copies apart"
[ "$Z" -gt 0 ] && [ "$Z" -lt "$M" ] || fail "gzipped: $Z bytes of $M"
anon() { awk '$1 == "RssAnon:" { print $2 * 1024 }' "/proc/$SEED_PID/status"; }
sleep 0.5
a0=$(anon)

"$SLOW" "$HOST" "$SEED_PORT" 127.0.0.5 32 read 10 >"$WORK/plain.out" &
PLAIN=$!
PIDS+=("$PLAIN")
"$SLOW" "$HOST" "$SEED_PORT" 127.0.0.6 32 read 10 /v1/manifest "Accept-Encoding: gzip" \
	>"$WORK/gz.out" &
GZ=$!
PIDS+=("$GZ")
held() { ss -Htn state established "( sport = :$SEED_PORT and dst $1 )" | wc -l; }
t0=$(now_ms)
until [ "$(held 127.0.0.5)" -ge 32 ] && [ "$(held 127.0.0.6)" -ge 32 ]; do
	[ $(($(now_ms) - t0)) -lt 5000 ] ||
		fail "readers not under way after 5 s: $(held 127.0.0.5) and $(held 127.0.0.6) connections"
	sleep 0.05
done
# While all 64 are being answered: the most the seed's memory grew.
sleep 1
top=0
for _ in $(seq 20); do
	a=$(anon)
	[ "$a" -gt "$top" ] && top=$a
	sleep 0.2
done
n5=$(held 127.0.0.5)
n6=$(held 127.0.0.6)
wait "$PLAIN" || fail "plain readers: $(cat "$WORK/plain.out")"
wait "$GZ" || fail "gzip readers: $(cat "$WORK/gz.out")"
# Still reading when measured: each had read a small part (32 readers x
# 10 s x 10 KiB/s at most, far below 32 manifests) and none had ended.
for f in plain gz; do
	read -r _ opened _ closed _ held _ _ _ _ got < <(cat "$WORK/$f.out")
	[ "$opened" = 32 ] && [ "$closed" = 0 ] && [ "$held" = 32 ] ||
		fail "$f readers: $(cat "$WORK/$f.out")"
	[ "$got" -gt 0 ] && [ "$got" -lt $((32 * 120 * 1024)) ] ||
		fail "$f readers read $got bytes: not slow readers"
done
[ "$n5" -ge 32 ] && [ "$n6" -ge 32 ] || fail "readers gone before the end: $n5 and $n6"
grow=$((top - a0))
[ "$grow" -le $((2 * M)) ] ||
	fail "the seed's anonymous memory grew by $((grow >> 20)) MiB under 64 slow readers of a $((M >> 20)) MiB manifest ($((Z >> 20)) MiB gzipped): more than two copies ($((2 * M >> 20)) MiB)"
ok "64 slow readers (32 plain, 32 gzip) of a $M-byte manifest ($Z gzipped): the seed's anonymous memory grew by $((grow >> 10)) KiB (bound: 2 copies, $((2 * M >> 10)) KiB)"
curl -sf "$URL" | cmp - <(curl -sf "$URL") || fail "the manifest after the readers"
sanitizers_clean
