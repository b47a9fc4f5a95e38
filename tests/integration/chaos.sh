#!/usr/bin/env bash
# make chaos in short: a seed and 3 re-seeding replicas in network
# namespaces, each reading the model in a loop for 60 s while a fault of
# every kind (seed and mount kill -9, SIGSTOP, link cut, republish,
# remount) is injected at least once.  bench/chaos.sh fails on a wrong
# byte, a crash, a read longer than its bound, an EIO outside a fault's
# window (its start to --timeout + 3 s after its end), any other error,
# a read after the faults that is not exact, or a mount that grew; here
# also: every kind injected, the hostile member in each of its four roles
# (forger, staller, fat holdings, announcer: it is no fault, an EIO it
# caused fails), and no sanitizer report.
source "$(dirname "$0")/lib.sh" "$1"
[ "$(id -u)" = 0 ] || { echo "skip: network namespaces need root"; exit 77; }
# libfabric's leak of a connection request pending at a close
# (lsan-connreq.supp says why): for this test's daemons only.
cat "$(dirname "$0")/lsan-connreq.supp" >>"$SAN/supp-lsan"

R=$WORK/results
# Under the sanitizers RSS is theirs (ASan's quarantine of freed memory
# alone is 256 MiB): leaks are LeakSanitizer's to find there, at each
# daemon's exit.  Under ThreadSanitizer each mount's cache holds the
# whole model: with half of it, a re-seeder out of slots must reuse one
# it listed to its peers (export_evictions, docs/control.md) while a
# peer may be reading it, and ThreadSanitizer reports that race between
# our pull's write and the transport's send (the peer's checksum refuses
# those bytes; the normal and ASan runs keep the small cache).
export CHAOS_RSS_GROW=48
[ "$SFS_BUILD_KIND" = normal ] || CHAOS_RSS_GROW=2048
[ "$SFS_BUILD_KIND" != tsan ] || export CHAOS_CACHE=64M
CHAOS_S=${CHAOS_S:-60} CHAOS_HOSTS=4 CHAOS_SIZE=32M CHAOS_RESULTS=$R CHAOS_ROLE_S=12 \
	bash "$(dirname "$0")/../../bench/chaos.sh" "$BUILD" >"$WORK/chaos.out" 2>&1 ||
	fail "bench/chaos.sh: $(tail -n 40 "$WORK/chaos.out")"
# bench/chaos.sh asserted (and printed as lib.sh's bound prints them)
# each mount's RSS and fds growth and its verdict's counts: wrong bytes,
# crashes, hangs, EIO outside a fault's window, other errors, mounts
# grown, reads after the faults not exact (each 0).
grep '^bound: ' "$WORK/chaos.out"
val() { awk -v k="$1" '$1 == k { print $2 }' "$R"; }
for k in seed_kill mount_kill stop cut republish remount; do
	bound "injected_$k" ">=" 1 "$(val "injected_$k")" "$k faults injected ($(tr '\n' ' ' <"$R"))"
done
bound hostile_roles ">=" 4 "$(val hostile_roles)" "roles the hostile member took"
bound byte_exact ">=" 20 "$(val byte_exact)" "byte-exact reads ($(tr '\n' ' ' <"$R"))"
sanitizers_clean
ok "chaos, 60 s: $(grep -E '^reads ' "$WORK/chaos.out")"
