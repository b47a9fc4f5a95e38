#!/usr/bin/env bash
# Every ctest test runs under ASan+UBSan (label asan: make test; asan-full:
# make test-full), or docs/testing.md's exception table names it with the
# reason: not both, not neither.
#   asan_coverage.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
SRC=$(cd "$1" && pwd)
BUILD=$2
DOC=$SRC/docs/testing.md
# shellcheck source=tests/bound.sh
source "$SRC/tests/bound.sh"
[ -s "$DOC" ] || { echo "FAIL: no $DOC"; exit 1; }
cd "$BUILD"
names() { ctest -N "$@" | sed -n 's/^ *Test *#[0-9]*: \([^ ]*\)$/\1/p' | sort -u; }
all=$(names)
asan=$( (names -L '^asan$'; names -L '^asan-full$') | sort -u)
# The exception table: rows after the line "| test | why not under ASan |".
except=$(awk -F'|' '/^\| test \| why not under ASan \|/ { t = 1; next }
	t && !/^\|/ { t = 0 }
	t && /^\| `/ { n = split($2, a, "`"); for (i = 2; i <= n; i += 2) print a[i] }' "$DOC" | sort -u)
[ "$(echo "$all" | grep -c .)" -ge 40 ] || { echo "FAIL: only $(echo "$all" | grep -c .) tests in ctest -N of $BUILD"; exit 1; }
[ -n "$except" ] || { echo "FAIL: no exception table in $DOC"; exit 1; }
bad=0
neither=$(comm -23 <(echo "$all") <(printf '%s\n%s\n' "$asan" "$except" | sort -u) || true)
both=$(comm -12 <(echo "$asan") <(echo "$except") || true)
unknown=$(comm -13 <(echo "$all") <(echo "$except") || true)
count() { [ -z "$1" ] && echo 0 || echo "$1" | grep -c .; }
bound_held tests_neither = 0 "$(count "$neither")" ||
	{ echo "FAIL: not under ASan and not in docs/testing.md's exceptions: $neither" | tr '\n' ' '; echo; bad=1; }
bound_held tests_both = 0 "$(count "$both")" ||
	{ echo "FAIL: under ASan yet listed as an exception: $both" | tr '\n' ' '; echo; bad=1; }
bound_held exceptions_unknown = 0 "$(count "$unknown")" ||
	{ echo "FAIL: docs/testing.md names tests ctest does not have: $unknown" | tr '\n' ' '; echo; bad=1; }
[ $bad = 0 ] || exit 1
echo "ok: $(echo "$asan" | grep -c .) of $(echo "$all" | grep -c .) tests under ASan+UBSan; the other $(echo "$except" | grep -c .) named in docs/testing.md"
