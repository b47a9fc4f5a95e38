#!/usr/bin/env bash
# No two modules define the same global symbol: with static libraries
# the linker silently takes whichever comes first (a seed once called
# the mount's sfs_ctl_start).
set -euo pipefail
BUILD=$1
# shellcheck source=tests/bound.sh
source "$(dirname "$0")/bound.sh"
libs=$(find "$BUILD" -maxdepth 2 -name 'libsfs_*.a' | sort)
[ -n "$libs" ] || { echo "no libsfs_*.a under $BUILD" >&2; exit 1; }
dups=$(for l in $libs; do
	nm -g --defined-only "$l" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u
done | sort | uniq -d)
bound_held symbols_defined_twice = 0 "$(grep -c . <<<"$dups" || true)" || true
bound_held static_libraries ">=" 5 "$(echo "$libs" | wc -l)" || { echo "too few libraries under $BUILD" >&2; exit 1; }
if [ -n "$dups" ]; then
	echo "symbols defined in more than one library:" >&2
	for s in $dups; do
		echo "  $s: $(for l in $libs; do nm -g --defined-only "$l" | grep -qw "$s" && basename "$l"; done | tr '\n' ' ')" >&2
	done
	exit 1
fi
echo "ok: $(echo "$libs" | wc -l) libraries, no symbol defined twice"
