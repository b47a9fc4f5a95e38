#!/usr/bin/env bash
# docs/claims.md names, for each README claim, the ctest tests that
# assert it.  Every name in a table's "test" column (in backticks) must
# be a test of the build dir's `ctest -N`; a name tagged "(asan build)"
# or "(tsan build)" must be defined in tests/CMakeLists.txt instead; one
# tagged "(planned)" must not exist yet (once it does, the tag goes).
# Fails on a missing name, a malformed test cell, a row with the wrong
# number of cells, or tables with no row naming a test.
#   claims.sh BUILD_DIR [CTEST] [CLAIMS_MD]
set -euo pipefail
BUILD=${1:?usage: claims.sh BUILD_DIR [CTEST] [CLAIMS_MD]}
CTEST=${2:-ctest}
SRC=$(cd "$(dirname "$0")/.." && pwd)
CLAIMS=${3:-$SRC/docs/claims.md}
CML=$SRC/tests/CMakeLists.txt
[ -s "$CLAIMS" ] || { echo "claims: $CLAIMS is missing or empty" >&2; exit 1; }
[ -s "$CML" ] || { echo "claims: $CML is missing or empty" >&2; exit 1; }

names=$(cd "$BUILD" && "$CTEST" -N) || { echo "claims: ctest -N failed in $BUILD" >&2; exit 1; }
known=$(echo "$names" | sed -n 's/^ *Test *#[0-9]*: \([^ ]*\)$/\1/p')
[ -n "$known" ] || { echo "claims: ctest -N in $BUILD lists no test" >&2; exit 1; }
in_ctest() { grep -qxF -- "$1" <<<"$known"; }
# Defined in tests/CMakeLists.txt: add_test(NAME name ...), or a name in
# a list (IT_TESTS, foreach) with a script of that name.
in_cmake() {
	grep -Eq "add_test\(NAME $1([[:space:]]|\)|$)" "$CML" && return 0
	grep -Eqw -- "$1" "$CML" && [ -e "$SRC/tests/integration/$1.sh" ]
}

trim() { sed 's/^ *//; s/ *$//' <<<"$1"; }
errors=()
rows=0 named=0 checked=0 planned=()
col=-1 ncols=0 lineno=0
# shellcheck disable=SC2016 # literal backticks
name_re='^`([A-Za-z0-9_]+)`( *\(([a-z ,]+)\))?'
while IFS= read -r line; do
	lineno=$((lineno + 1))
	if [[ "$line" != "|"* ]]; then
		col=-1
		continue
	fi
	body=${line#|}
	body=${body%|}
	IFS='|' read -r -a cells <<<"$body"
	if [ "$col" -lt 0 ]; then # a header row
		ncols=${#cells[@]}
		for i in "${!cells[@]}"; do
			c=$(trim "${cells[$i]}")
			[ "$c" = test ] && col=$i
		done
		[ "$col" -ge 0 ] || { col=-2; continue; } # a table without tests
		continue
	fi
	[ "$col" -ge 0 ] || continue
	[[ "$line" =~ ^\|[-|\ :]+\|$ ]] && continue # the separator row
	[ "${#cells[@]}" = "$ncols" ] ||
		{ errors+=("line $lineno: ${#cells[@]} cells, the header has $ncols"); continue; }
	rows=$((rows + 1))
	cell=$(trim "${cells[$col]}")
	[ "$cell" = - ] && continue
	n=0
	rest=$cell
	while [ -n "$rest" ]; do
		if [[ "$rest" =~ $name_re ]]; then
			name=${BASH_REMATCH[1]}
			tags=${BASH_REMATCH[3]}
			rest=${rest:${#BASH_REMATCH[0]}}
		else
			errors+=("line $lineno: test cell not understood at: $rest")
			break
		fi
		rest=$(sed 's/^ *, *//' <<<"$rest")
		n=$((n + 1))
		checked=$((checked + 1))
		is_planned=0 build=
		IFS=, read -r -a tl <<<"$tags"
		for t in "${tl[@]}"; do
			t=$(trim "$t")
			case $t in
			planned) is_planned=1 ;;
			"asan build" | "tsan build") build=$t ;;
			"") ;;
			*) errors+=("line $lineno: $name: unknown tag '$t'") ;;
			esac
		done
		if [ -n "$build" ]; then
			exists=0
			in_cmake "$name" && exists=1
			where="tests/CMakeLists.txt ($build)"
		else
			exists=0
			in_ctest "$name" && exists=1
			where="ctest -N of $BUILD"
		fi
		if [ $is_planned = 1 ]; then
			if [ $exists = 1 ]; then
				errors+=("line $lineno: $name exists in $where: drop its (planned) tag")
			else
				planned+=("$name")
			fi
		elif [ $exists = 0 ]; then
			errors+=("line $lineno: $name is not in $where")
		fi
	done
	[ "$n" -gt 0 ] && named=$((named + 1))
done <"$CLAIMS"

[ "$rows" -gt 0 ] || errors+=("no table rows under a 'test' column in $CLAIMS")
[ "$named" -gt 0 ] || errors+=("no row of $CLAIMS names a test")
if [ ${#errors[@]} -gt 0 ]; then
	echo "claims: FAILED ($CLAIMS):" >&2
	printf '  %s\n' "${errors[@]}" >&2
	exit 1
fi
# The bounds the rows state (`bound TEST KEY OP LIMIT`): well formed,
# each TEST in its row; make test compares them with what the tests
# printed (tests/claims_bounds.py on the normal pass's JUnit file).
python3 "$SRC/tests/claims_bounds.py" --static "$CLAIMS" || exit 1
p=$(printf '%s\n' "${planned[@]}" | sort -u | grep . | paste -sd " " || true)
echo "claims: $rows rows, $named naming tests, $checked names checked; planned, not yet tests: ${p:-none}"
