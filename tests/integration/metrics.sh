#!/usr/bin/env bash
# Prometheus metrics (docs/metrics.md): the seed's GET /metrics behind
# its token, a mount's .seedfs/metrics and --metrics-listen; the
# read-only scrape token (--metrics-token-file) opens /metrics and
# nothing else, on the seed and on the mount (tls.sh: over TLS).  promtool
# check metrics passes on every output (a broken text fails it: the
# check can fail), and the counters move as they should after a read:
# the mount's pulls and bytes by source equal what was read, the pull
# latency histogram counts every pull, the seed's read bytes (what the
# replica reports) reach the model's size, its requests by route count
# the 401s.
source "$(dirname "$0")/lib.sh" "$1"
command -v promtool >/dev/null || fail "promtool is not installed (Debian's prometheus)"

TOKEN=$WORK/token
head -c 32 /dev/urandom | base64 | tr -d '=+/\n' >"$TOKEN"
chmod 600 "$TOKEN"
SCRAPE=$WORK/scrape
(umask 077 && openssl rand -hex 24 >"$SCRAPE")
MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 8M --shards 2 >/dev/null
start_seed "$MODEL" --token-file "$TOKEN" --metrics-token-file "$SCRAPE"
URL=http://$HOST:$SEED_PORT
AUTH=(-H "Authorization: Bearer $(cat "$TOKEN")")
SAUTH=(-H "Authorization: Bearer $(cat "$SCRAPE")")
code() { curl -s -o "$WORK/body" -w '%{http_code}' "$@"; }

check() { # NAME FILE
	local out
	out=$(promtool check metrics <"$2" 2>&1) || fail "promtool check metrics ($1): $out"
	[ -z "$out" ] || fail "promtool check metrics ($1) said: $out"
	# promtool does not check what the format also asks: each family's
	# samples right after its own TYPE line, one group per family.
	out=$(awk '/^# TYPE / { if (seen[$3]++) print "second TYPE " $3; fam = $3; next }
		/^#/ { next }
		{ n = $0; sub(/[{ ].*/, "", n); b = n; sub(/_(bucket|sum|count)$/, "", b)
		  if (n != fam && b != fam) print "sample " n " under TYPE " fam }' "$2")
	[ -z "$out" ] || fail "$1: not grouped by family: $out"
}
value() { # FILE 'NAME{LABELS}' -> the sample's value
	awk -v k="$2" '$1 == k { print $2; f=1 } END { exit !f }' "$1" ||
		fail "no sample $2 in $1: $(grep "${2%%\{*}" "$1" | head -5)"
}

# The check can fail.
printf '# TYPE x counter\nx{a="1"} 1\nx{a="1"} 2\ny 1\n' >"$WORK/bad.prom"
promtool check metrics <"$WORK/bad.prom" >/dev/null 2>&1 && fail "promtool passed a broken text"

code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/metrics")
[ "$code" = 401 ] || fail "GET /metrics without the token: $code, not 401"
curl -sf "${AUTH[@]}" "$URL/metrics" -D "$WORK/seed0.hdr" -o "$WORK/seed0.prom" || fail "GET /metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$WORK/seed0.hdr" ||
	fail "content type: $(grep -i content-type "$WORK/seed0.hdr")"
check seed "$WORK/seed0.prom"
[ "$(value "$WORK/seed0.prom" 'seedfs_seed_generation{model="m"}')" = 1 ] || fail "generation"
total=$(du -cb "$MODEL"/*.safetensors | tail -n1 | cut -f1)
reg=$(value "$WORK/seed0.prom" 'seedfs_seed_registered_bytes{model="m"}')
[ "$reg" -gt 0 ] && [ "$reg" -le "$(du -cb "$MODEL"/* | tail -n1 | cut -f1)" ] || fail "registered bytes $reg"
[ "$(value "$WORK/seed0.prom" 'seedfs_seed_errors_total{kind="unauthorized"}')" -ge 1 ] ||
	fail "the 401 is not counted"
[ "$(value "$WORK/seed0.prom" 'seedfs_seed_control_requests_total{route="/metrics",code="401"}')" = 1 ] ||
	fail "requests by route and code: $(grep control_requests "$WORK/seed0.prom")"
ok "seed: GET /metrics 401 without the token; promtool clean ($(grep -c '^seedfs' "$WORK/seed0.prom") samples); registered $reg bytes"

# The scrape token: /metrics (Prometheus text), and nothing else.
curl -sf "${SAUTH[@]}" "$URL/metrics" -D "$WORK/scrape.hdr" -o "$WORK/scrape.prom" ||
	fail "GET /metrics with the scrape token: $(cat "$WORK/scrape.prom")"
grep -qi '^content-type: text/plain; version=0.0.4' "$WORK/scrape.hdr" || fail "scrape: content type"
check "seed, scrape token" "$WORK/scrape.prom"
grep -q '^seedfs_seed_generation{model="m"} 1$' "$WORK/scrape.prom" || fail "scrape: no generation"
opened=()
for r in /v1/models /v1/manifest /v1/generation /v1/sources; do
	[ "$(code "${SAUTH[@]}" "$URL$r")" = 401 ] || opened+=("$r")
done
for r in /v1/connect /v1/announce; do
	[ "$(code "${SAUTH[@]}" -X POST --data x "$URL$r")" = 401 ] || opened+=("POST $r")
done
bound scrape_token_other_routes = 0 "${#opened[@]}" "routes the scrape token opened: ${opened[*]}"
[ "$(code "${AUTH[@]}" "$URL/metrics")" = 200 ] || fail "the fleet token no longer opens /metrics"
[ "$(code -H "Authorization: Bearer $(cat "$SCRAPE")x" "$URL/metrics")" = 401 ] || fail "a wrong scrape token"
cp "$TOKEN" "$WORK/same"
if "$SEEDFS" seed --model-dir "$MODEL" --listen 127.0.0.1:0 --token-file "$TOKEN" \
	--metrics-token-file "$WORK/same" >/dev/null 2>"$WORK/same.err"; then
	fail "a seed took the fleet token as its scrape token"
fi
[ "$(cat "$WORK/same.err")" = "seedfs seed: --metrics-token-file $WORK/same holds the token of --token-file: a scraper would read every model; give it a token of its own" ] ||
	fail "same token: $(cat "$WORK/same.err")"
ok "seed: the scrape token reads /metrics (200, promtool clean) and gets 401 on every other route; the fleet token still reads it; the fleet token as a scrape token is refused"

MNT=$WORK/mnt
mount_seed "$MNT" --token-file "$TOKEN" --metrics-listen 127.0.0.1:0 --cache-dir "$WORK/disk" \
	--metrics-token-file "$SCRAPE"
refute --empty-ok --why "warned on loopback" warning "$WORK/mount.err"
cp "$MNT/.seedfs/metrics" "$WORK/mnt0.prom"
check "mount, before" "$WORK/mnt0.prom"
ML=$(sed -n 's|^metrics: http://\(.*\)/metrics$|\1|p' "$MNT/.seedfs/status")
[ -n "$ML" ] || fail "status names no metrics address: $(cat "$MNT/.seedfs/status")"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ML/metrics")
[ "$code" = 401 ] || fail "--metrics-listen without the token: $code, not 401"
[ "$(curl -s "http://$ML/v1/health")" = ok ] || fail "--metrics-listen /v1/health"
curl -sf "${SAUTH[@]}" "http://$ML/metrics" -o "$WORK/mscrape.prom" || fail "the mount's /metrics with the scrape token"
check "mount, scrape token" "$WORK/mscrape.prom"
grep -q '^seedfs_model_generation{model="m"} 1$' "$WORK/mscrape.prom" || fail "mount scrape: no generation"
for r in /v1/models /v1/manifest /v1/holdings; do
	[ "$(code "${SAUTH[@]}" "http://$ML$r")" = 401 ] || fail "the scrape token opened the mount's $r"
done
[ "$(code "${AUTH[@]}" "http://$ML/metrics")" = 200 ] || fail "the fleet token no longer opens the mount's /metrics"
ok "mount: the scrape token reads --metrics-listen's /metrics, 401 elsewhere; the fleet token still reads it"

for f in "$MODEL"/*.safetensors; do
	cmp "$f" "$MNT/m/$(basename "$f")" || fail "bytes of $(basename "$f")"
done
cp "$MNT/.seedfs/metrics" "$WORK/mnt1.prom"
check "mount, after" "$WORK/mnt1.prom"
curl -sf "${AUTH[@]}" "http://$ML/metrics" -o "$WORK/listen.prom" || fail "--metrics-listen GET /metrics"
check "--metrics-listen" "$WORK/listen.prom"
src="source=\"$HOST:$SEED_PORT\",kind=\"seed\""
b0=$(value "$WORK/mnt0.prom" "seedfs_source_read_bytes_total{$src}" 2>/dev/null || echo 0)
b1=$(value "$WORK/mnt1.prom" "seedfs_source_read_bytes_total{$src}")
p1=$(value "$WORK/mnt1.prom" "seedfs_pulls_total")
pulled=$(value "$WORK/mnt1.prom" "seedfs_pulled_bytes_total")
hc=$(value "$WORK/mnt1.prom" "seedfs_pull_duration_seconds_count")
hinf=$(value "$WORK/mnt1.prom" 'seedfs_pull_duration_seconds_bucket{le="+Inf"}')
misses=$(value "$WORK/mnt1.prom" "seedfs_cache_misses_total")
# Everything but the inlined headers came over the wire, once.
[ "$b1" -gt $((b0 + total * 9 / 10)) ] && [ "$b1" -le $((total + 8 * 1024 * 1024)) ] ||
	fail "bytes by source: $b0 -> $b1 for $total read"
[ "$pulled" = "$b1" ] || fail "pulled bytes $pulled != the seed's $b1"
[ "$hc" = "$hinf" ] && [ "$hc" -ge "$p1" ] && [ "$hc" -gt 0 ] ||
	fail "histogram: count $hc, +Inf $hinf, pulls $p1"
[ "$misses" -gt 0 ] || fail "no misses counted"
[ "$(value "$WORK/mnt1.prom" "seedfs_source_up{$src}")" = 1 ] || fail "source not up"
[ "$(value "$WORK/mnt1.prom" 'seedfs_errors_total{kind="checksum"}')" = 0 ] || fail "checksum errors"
dw=$(value "$WORK/mnt1.prom" seedfs_disk_written_bytes_total)
# The control client's bytes by route add up to its total, and the
# manifest came once (the one the mount opened with is the one its
# source took: twice before).
# It comes gzipped to a client that asks so (the mount does), whole to
# one that does not.
plain=$(curl -sf "${AUTH[@]}" "$URL/v1/manifest?model=m" -D "$WORK/plain.hdr" | wc -c)
msize=$(curl -sf --compressed "${AUTH[@]}" "$URL/v1/manifest?model=m" -D "$WORK/gz.hdr" \
	-o "$WORK/gz.json" -w '%{size_download}')
grep -qi '^content-encoding: gzip' "$WORK/gz.hdr" || fail "no gzip: $(cat "$WORK/gz.hdr")"
grep -qi '^content-encoding' "$WORK/plain.hdr" && fail "gzip unasked: $(cat "$WORK/plain.hdr")"
curl -sf "${AUTH[@]}" -H 'Accept-Encoding: gzip;q=0' "$URL/v1/manifest?model=m" -D "$WORK/q0.hdr" -o /dev/null
grep -qi '^content-encoding' "$WORK/q0.hdr" && fail "gzip at q=0: $(cat "$WORK/q0.hdr")"
curl -sfI "${AUTH[@]}" -H 'Accept-Encoding: gzip' "$URL/v1/manifest?model=m" >"$WORK/head.hdr"
grep -qi '^content-encoding' "$WORK/head.hdr" && fail "a HEAD said gzip: $(cat "$WORK/head.hdr")"
grep -qi "^content-length: $plain" "$WORK/head.hdr" || fail "HEAD: $(cat "$WORK/head.hdr")"
# The seed gzips a generation's manifest once: the same bytes again.
curl -sf --compressed "${AUTH[@]}" "$URL/v1/manifest?model=m" --raw -o "$WORK/gz2.raw"
curl -sf "${AUTH[@]}" -H 'Accept-Encoding: gzip' "$URL/v1/manifest?model=m" -o "$WORK/gz3.raw"
cmp -s "$WORK/gz2.raw" "$WORK/gz3.raw" && [ "$(wc -c <"$WORK/gz3.raw")" = "$msize" ] ||
	fail "the seed's gzipped manifest differs between asks"
bound unpacked_off = 0 $(($(wc -c <"$WORK/gz.json") - plain)) "gzipped manifest unpacked less the plain one ($plain), bytes"
bound gzip_permille "<" 750 $((msize * 1000 / plain)) "gzipped manifest: $msize bytes for $plain, per mille (rounded down)"
mrx=$(value "$WORK/mnt1.prom" 'seedfs_control_route_bytes_total{route="manifest",direction="received"}')
# Once, with its headers: at least the gzipped size, less than 2 KiB more.
bound manifest_rx_over_gz ">=" 0 $((mrx - msize)) "manifest bytes received ($mrx) past the gzipped manifest ($msize)"
bound manifest_rx_over_gz_most "<" 2048 $((mrx - msize)) "manifest bytes received ($mrx) past the gzipped manifest ($msize)"
sum=0
for rt in holdings manifest models sources other; do
	sum=$((sum + $(value "$WORK/mnt1.prom" "seedfs_control_route_bytes_total{route=\"$rt\",direction=\"received\"}")))
done
[ "$sum" = "$(value "$WORK/mnt1.prom" 'seedfs_control_bytes_total{direction="received"}')" ] ||
	fail "routes' bytes $sum are not the control total"
grep -q "^control_received_by_route: holdings [0-9]*, manifest $mrx, models [0-9]*, sources [0-9]*, other [0-9]*$" "$MNT/.seedfs/status" ||
	fail "status: $(grep control_received "$MNT/.seedfs/status")"
ok "mount: promtool clean before, after, on --metrics-listen; read $total: source bytes $b0 -> $b1, $p1 pulls, histogram $hc, disk written $dw"

# The seed's bytes are what the replica reports on its next ask (1 s).
for _ in $(seq 100); do
	curl -sf "${AUTH[@]}" "$URL/metrics" -o "$WORK/seed1.prom"
	r=$(value "$WORK/seed1.prom" 'seedfs_seed_read_bytes_total{protocol="tcp"}' 2>/dev/null || echo 0)
	[ "$r" -ge "$b1" ] && break
	sleep 0.1
done
check "seed, after" "$WORK/seed1.prom"
bound seed_read_off = 0 $((r - b1)) "the seed's read bytes ($r) less the replica's ($b1)"
bound seed_replicas = 1 "$(value "$WORK/seed1.prom" 'seedfs_seed_replicas{protocol="tcp"}')" "seedfs_seed_replicas{protocol=\"tcp\"}"
ok "seed: read bytes $r reported (= the mount's), 1 replica"


# The Grafana dashboard uses only these metrics, and each one exists.
DASH=$(dirname "$0")/../../packaging/grafana/seedfs-dashboard.json
names=$(python3 -c '
import json, re, sys
d = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
assert exprs, "no queries"
print("\n".join(sorted({n for e in exprs for n in re.findall(r"\bseedfs_\w+", e)})))
' "$DASH") || fail "the dashboard does not parse"
for n in $names; do
	grep -q "^$n[{ ]" "$WORK/seed1.prom" "$WORK/mnt1.prom" ||
		fail "the dashboard asks for $n, which neither the seed nor the mount exports"
done
ok "dashboard: $(echo "$names" | wc -l) metrics, every one exported"

# Off loopback with a token and no TLS: one line of warning (tls.sh: with
# TLS, none); the fleet token as the scrape token: refused.
for a in "--metrics-token-file $SCRAPE" ""; do
	mkdir -p "$WORK/warn"
	# shellcheck disable=SC2086
	"$SEEDFS" mount --seed "$HOST:$SEED_PORT" --token-file "$TOKEN" --metrics-listen 0.0.0.0:0 $a \
		"$WORK/warn" --log-file "$WORK/warn.log" 2>"$WORK/warn.err" || fail "warn mount: $(cat "$WORK/warn.err")"
	MOUNTS+=("$WORK/warn")
	[ "$(wc -l <"$WORK/warn.err")" = 1 ] && grep -q "^seedfs mount: warning: --metrics-listen 0.0.0.0:0 without TLS: every scrape sends its token in clear; give --tls-cert and --tls-key" "$WORK/warn.err" ||
		fail "no warning: $(cat "$WORK/warn.err")"
	echo "  $(cat "$WORK/warn.err")"
	fusermount3 -u "$WORK/warn"
done
if "$SEEDFS" mount --seed "$HOST:$SEED_PORT" --token-file "$TOKEN" --metrics-listen 127.0.0.1:0 \
	--metrics-token-file "$WORK/same" "$WORK/warn" 2>"$WORK/same.err"; then
	MOUNTS+=("$WORK/warn")
	fail "a mount took the fleet token as its scrape token"
fi
grep -qx "seedfs mount: --metrics-token-file $WORK/same holds the token of --token-file: a scraper would read every model; give it a token of its own" "$WORK/same.err" ||
	fail "same token: $(cat "$WORK/same.err")"
ok "mount: off loopback without TLS a token is warned about in one line; the fleet token as the scrape token is refused"

unmount_check "$MNT" "$MOUNT_PID"
sanitizers_clean
