#!/usr/bin/env bash
# Build the soft-RoCE test VM's initramfs: static busybox, /init, and the
# modules of Debian's kernel KVER that the guest loads, in dependency
# order (modinfo -F depends).
#   initramfs.sh KVER OUT.gz
set -euo pipefail
KVER=$1
OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
# crc32_generic first: without it rdma_rxe fails "failed to init crc32".
WANT="crc32_generic virtio_pci 9pnet_virtio 9p fuse veth rdma_rxe rdma_ucm"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/mods" "$T/proc" "$T/sys" "$T/dev" "$T/host"
cp /bin/busybox "$T/bin/busybox"
cp "$HERE/init" "$T/init"
chmod +x "$T/init"

declare -A seen=()
order=()
visit() {
	local m=$1 d f
	[ -n "${seen[$m]:-}" ] && return
	seen[$m]=1
	for d in $(modinfo -k "$KVER" -F depends "$m" | tr ',' ' '); do
		visit "$d"
	done
	f=$(modinfo -k "$KVER" -F filename "$m")
	case "$f" in
	/*) order+=("$f") ;;
	*) ;; # built in
	esac
}
for m in $WANT; do visit "$m"; done
for f in "${order[@]}"; do
	b=$(basename "$f")
	case "$b" in
	*.ko.xz) xz -dc "$f" >"$T/mods/${b%.xz}"; b=${b%.xz} ;;
	*.ko.zst) zstd -qdc "$f" >"$T/mods/${b%.zst}"; b=${b%.zst} ;;
	*) cp "$f" "$T/mods/$b" ;;
	esac
	echo "$b" >>"$T/modorder"
done
(cd "$T" && find . | cpio -o -H newc --quiet | gzip -1) >"$OUT"
