#!/usr/bin/env bash
# Inside the soft-RoCE VM: a guest-only link with rxe on it, then the
# mount integration suite and the kill -9 test over each RDMA protocol,
# the verbs peers' test and one seed serving all protocols at once.
# SEEDFS_VM_FORM=short (make test's rdma_vm): the mount suite over each
# and the one seed only; long (the default: make test-full, make
# test-rdma): all of it.
#   guest-rdma.sh BUILD_DIR PROTOCOL...
set -euo pipefail
BUILD=$1
shift
HERE=$(cd "$(dirname "$0")" && pwd)

ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add 10.0.0.1/24 dev veth0
ip link set veth0 up
ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0
echo "vm: $(uname -r), $(ibv_devices | awk 'NR > 2 { print $1 }' | tr '\n' ' ')"

export SEEDFS_TEST_HOST=10.0.0.1
export SEEDFS_TEST_MODEL_SIZE=${SEEDFS_TEST_MODEL_SIZE:-4M}
status=0
for p in "$@"; do
	tests="mount seed_death"
	[ "${SEEDFS_VM_FORM:-long}" != short ] || tests=mount
	for t in $tests; do
		echo "vm: $t over $p"
		t0=$(date +%s)
		if bash "$HERE/../integration/$t.sh" "$BUILD" "$p"; then
			echo "vm: $t over $p passed in $(($(date +%s) - t0)) s"
		else
			echo "vm: $t over $p FAILED"
			status=1
		fi
	done
done
# Raw verbs queue pairs: limits and reclaim.
case "${SEEDFS_VM_FORM:-long} $* " in
short*) ;;
*" rdma "*)
	echo "vm: verbs_peers"
	t0=$(date +%s)
	if bash "$HERE/../integration/verbs_peers.sh" "$BUILD"; then
		echo "vm: verbs_peers passed in $(($(date +%s) - t0)) s"
	else
		echo "vm: verbs_peers FAILED"
		status=1
	fi
	;;
esac
# One seed serving every RDMA protocol given and tcp at once.
all=$(IFS=,; echo "$*"),tcp
echo "vm: multi over $all"
t0=$(date +%s)
if bash "$HERE/../integration/multi.sh" "$BUILD" "$all"; then
	echo "vm: multi over $all passed in $(($(date +%s) - t0)) s"
else
	echo "vm: multi over $all FAILED"
	status=1
fi
exit $status
