# shellcheck shell=bash
# The bound lines that docs/claims.md's tokens are checked against
# (tests/claims_bounds.py): sourced by tests/integration/lib.sh,
# tests/sim.sh and bench/chaos.sh.

# bound_held KEY OP LIMIT VALUE: print "bound: KEY OP LIMIT: VALUE" and
# return 0 if VALUE OP LIMIT holds (integers; OP one of <= >= < > =),
# 1 if not; 2, with a line on stderr, if they are no integers or OP is
# none of those.
bound_held() {
	local key=$1 op=$2 limit=$3 value=$4 held
	if ! [[ "$limit" =~ ^-?[0-9]+$ && "$value" =~ ^-?[0-9]+$ ]]; then
		echo "bound $key: '$value' $op '$limit' is not a comparison of integers" >&2
		return 2
	fi
	case $op in
	"<=") held=$((value <= limit)) ;;
	">=") held=$((value >= limit)) ;;
	"<") held=$((value < limit)) ;;
	">") held=$((value > limit)) ;;
	"=") held=$((value == limit)) ;;
	*)
		echo "bound $key: unknown comparison '$op'" >&2
		return 2
		;;
	esac
	echo "bound: $key $op $limit: $value"
	[ "$held" = 1 ]
}

# bound KEY OP LIMIT VALUE WHAT...: assert it with bound_held; otherwise
# the caller's fail, naming WHAT.
bound() {
	local key=$1 op=$2 limit=$3 value=$4 rc=0
	shift 4
	bound_held "$key" "$op" "$limit" "$value" || rc=$?
	case $rc in
	0) ;;
	1) fail "$*: $value, bound $op $limit ($key)" ;;
	*) fail "bound $key: '$value' $op '$limit' is not a comparison ($*)" ;;
	esac
}
