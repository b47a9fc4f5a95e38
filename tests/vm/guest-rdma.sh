#!/usr/bin/env bash
# Inside the soft-RoCE VM: a guest-only link with rxe on it, then the
# mount integration suite over each RDMA protocol given.
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
	echo "vm: mount suite over $p"
	t0=$(date +%s)
	if bash "$HERE/../integration/mount.sh" "$BUILD" "$p"; then
		echo "vm: $p passed in $(($(date +%s) - t0)) s"
	else
		echo "vm: $p FAILED"
		status=1
	fi
done
exit $status
