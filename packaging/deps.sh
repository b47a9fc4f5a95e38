#!/usr/bin/env bash
# Installs the Debian packages seedfs needs to build, test and demo.
# Idempotent: does nothing when every package is already installed.
# Usage: packaging/deps.sh [--build-only | --bench]
#   default       everything, including etcd for the registry tests,
#                 the soft-RoCE VM test tier (qemu, Debian's kernel,
#                 busybox) that make test runs, and the Python loaders
#                 it tests the mount with (packaging/python-loaders.txt,
#                 pinned, from PyPI, in a venv at $SEEDFS_PYENV, by
#                 default /opt/seedfs/pyenv)
#   --build-only  what building and running seedfs need
#   --bench       what make bench needs besides: sshfs and a private sshd
#                 on loopback to compare with, gnuplot for the plot, perf
#                 for make profile
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
--bench) pkgs+=(sshfs openssh-server openssh-client gnuplot-nox linux-perf) ;;
*) pkgs+=(attr rsync python3 python3-numpy python3-torch python3-venv
	python3-requests python3-typing-extensions etcd-server etcd-client
	qemu-system-x86 linux-image-amd64 busybox-static kmod iproute2
	cpio gzip prometheus bash-completion man-db python3-yaml python3-xxhash
	debhelper dh-python dpkg-dev lintian fakeroot gdb) ;;
esac

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps.sh: missing packages: ${missing[*]}; run as root" >&2
		exit 1
	fi
	echo "deps.sh: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The Python loaders (default mode only): a venv over Debian's python3
# and its packages, with exactly the pinned ones from PyPI; made again
# when the pins change.
case "${1:-}" in
--build-only | --bench) exit 0 ;;
esac
REQ=$(cd "$(dirname "$0")" && pwd)/python-loaders.txt
PYENV=${SEEDFS_PYENV:-/opt/seedfs/pyenv}
# Ours: made by this script, marked with the pins it holds (written
# last, so a venv whose install failed is made again).
MARK=$PYENV/seedfs-python-loaders.txt
cmp -s "$REQ" "$MARK" && exit 0
if ! mkdir -p "$PYENV" 2>/dev/null || [ ! -w "$PYENV" ]; then
	echo "deps.sh: cannot write $PYENV for the Python loaders; run as root or set SEEDFS_PYENV" >&2
	exit 1
fi
echo "deps.sh: installing the Python loaders ($REQ) into $PYENV"
if [ -e "$MARK" ] || [ -e "$PYENV/.seedfs-making" ] ||
	[ -e "$PYENV/python-loaders.txt" ]; then # (its first marker)
	rm -rf "$PYENV" # an older venv of ours, or one half made
	mkdir -p "$PYENV"
elif [ -n "$(ls -A "$PYENV")" ]; then
	echo "deps.sh: $PYENV is not empty and is not a venv of seedfs's; not touching it" >&2
	exit 1
fi
: >"$PYENV/.seedfs-making"
/usr/bin/python3 -m venv --system-site-packages "$PYENV"
PYTHONNOUSERSITE=1 "$PYENV/bin/pip" install -q --disable-pip-version-check \
	--no-deps -r "$REQ"
PYTHONNOUSERSITE=1 "$PYENV/bin/python" -c 'import safetensors, transformers, torch, numpy' ||
	{ echo "deps.sh: the Python loaders do not import" >&2; exit 1; }
cp "$REQ" "$MARK"
rm -f "$PYENV/.seedfs-making"
