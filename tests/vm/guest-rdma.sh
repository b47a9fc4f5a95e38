#!/usr/bin/env bash
# Inside the soft-RoCE VM: a guest-only link with rxe on it, then the
# mount integration suite and the kill -9 test over each RDMA protocol,
# the verbs peers' test and one seed serving all protocols at once.
# SEEDFS_VM_FORM=short (make test's rdma_vm): the mount suite over the
# first protocol (raw verbs: our own queue pairs) and the one seed
# serving all, every mount of it reading byte-exact; long (the default:
# make test-full, make test-rdma): all of it.
#   guest-rdma.sh BUILD_DIR PROTOCOL...
set -euo pipefail
BUILD=$1
shift
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bound.sh
source "$HERE/../bound.sh"

ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add 10.0.0.1/24 dev veth0
ip link set veth0 up
ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0
echo "vm: $(uname -r), $(ibv_devices | awk 'NR > 2 { print $1 }' | tr '\n' ' ')"

export SEEDFS_TEST_HOST=10.0.0.1
export SEEDFS_TEST_MODEL_SIZE=${SEEDFS_TEST_MODEL_SIZE:-4M}
status=0 passed=0 failed=0
# run NAME SCRIPT ARGS...: one suite, counted
run() {
	local name=$1 t0
	shift
	echo "vm: $name"
	t0=$(date +%s)
	if bash "$@"; then
		echo "vm: $name passed in $(($(date +%s) - t0)) s"
		passed=$((passed + 1))
	else
		echo "vm: $name FAILED"
		failed=$((failed + 1))
		status=1
	fi
}
first=${1:-}
for p in "$@"; do
	tests="mount seed_death"
	if [ "${SEEDFS_VM_FORM:-long}" = short ]; then
		tests=
		[ "$p" != "$first" ] || tests=mount
	fi
	for t in $tests; do
		run "$t over $p" "$HERE/../integration/$t.sh" "$BUILD" "$p"
	done
done
# Raw verbs queue pairs: limits and reclaim.
case "${SEEDFS_VM_FORM:-long} $* " in
short*) ;;
*" rdma "*) run verbs_peers "$HERE/../integration/verbs_peers.sh" "$BUILD" ;;
esac
# One seed serving every RDMA protocol given and tcp at once.
all=$(IFS=,; echo "$*"),tcp
run "multi over $all" "$HERE/../integration/multi.sh" "$BUILD" "$all"
bound_held suites_failed = 0 "$failed" || status=1
# the mount suite over each protocol given (the first in the short
# form) and the one seed at least
want=$(($# + 1))
[ "${SEEDFS_VM_FORM:-long}" != short ] || want=2
bound_held suites_passed ">=" $want "$passed" || status=1
exit $status
