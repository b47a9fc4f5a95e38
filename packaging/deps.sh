#!/usr/bin/env bash
# Installs the Debian packages seedfs needs to build, test and demo.
# Idempotent: does nothing when every package is already installed.
# Usage: packaging/deps.sh [--build-only | --bench]
#   default       everything, including etcd for the registry tests and
#                 the soft-RoCE VM test tier (qemu,
#                 Debian's kernel, busybox) that make test runs
#   --build-only  what building and running seedfs need
#   --bench       what make bench needs besides: sshfs and a private sshd
#                 on loopback to compare with, gnuplot for the plot
set -euo pipefail

pkgs=(
	build-essential cmake pkg-config
	libfuse3-dev fuse3
	libfabric-dev libfabric-bin
	rdma-core libibverbs-dev ibverbs-utils
	libjansson-dev libxxhash-dev check libsubunit-dev
	libmicrohttpd-dev libcurl4-openssl-dev libgnutls28-dev libsystemd-dev
	zlib1g-dev
	curl jq procps psmisc util-linux coreutils clang-format openssl
	help2man
)
case "${1:-}" in
--build-only) ;;
--bench) pkgs+=(sshfs openssh-server openssh-client gnuplot-nox) ;;
*) pkgs+=(attr rsync python3 python3-numpy python3-torch etcd-server etcd-client
	qemu-system-x86 linux-image-amd64 busybox-static kmod iproute2
	cpio gzip prometheus bash-completion man-db python3-yaml
	debhelper dh-python dpkg-dev lintian fakeroot gdb) ;;
esac

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps.sh: missing packages: ${missing[*]}; run as root" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
