#!/usr/bin/env bash
# Run a script inside a throwaway VM with a real kernel RDMA stack:
# Debian's kernel under qemu (TCG; no KVM here) with soft-RoCE, the host's
# root shared read-only so the built binaries run unchanged, and no
# network device at all (-nic none): traffic stays in the guest.
#   run.sh BUILD_DIR GUEST_SCRIPT [ARGS...]
# Prints the guest's log; exits with the guest script's status.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SCRIPT=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
KVER=${SEEDFS_VM_KERNEL:-$(ls /lib/modules | grep -- '-amd64$' | sort -V | tail -n 1)}
KERNEL=/boot/vmlinuz-$KVER
[ -r "$KERNEL" ] || { echo "vm: no $KERNEL (packaging/deps.sh --rdma)"; exit 1; }
command -v qemu-system-x86_64 >/dev/null || { echo "vm: no qemu (packaging/deps.sh --rdma)"; exit 1; }

INITRD=$BUILD/vm/initramfs-$KVER.gz
mkdir -p "$BUILD/vm"
if [ ! -s "$INITRD" ] || [ "$HERE/init" -nt "$INITRD" ] || [ "$HERE/initramfs.sh" -nt "$INITRD" ]; then
	"$HERE/initramfs.sh" "$KVER" "$INITRD.tmp"
	mv "$INITRD.tmp" "$INITRD"
fi

OUT=$(mktemp -d /tmp/seedfs-vm.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
{
	echo "export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/run/tmp"
	echo "mkdir -p /run/tmp"
	printf 'export SEEDFS_VM_FORM=%q\n' "${SEEDFS_VM_FORM:-long}"
	printf 'exec bash %q' "$SCRIPT"
	printf ' %q' "$BUILD" "$@"
	echo
} >"$OUT/job.sh"

t0=$(date +%s)
rc=0
timeout "${SEEDFS_VM_TIMEOUT:-900}" qemu-system-x86_64 \
	-accel tcg,thread=multi -cpu max -m 2048 -smp 2 \
	-nographic -no-reboot -nic none \
	-kernel "$KERNEL" -initrd "$INITRD" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$OUT",mount_tag=out,security_model=none,multidevs=remap \
	>"$OUT/console.log" 2>&1 || rc=$?
echo "vm: qemu exited $rc after $(($(date +%s) - t0)) s"
if [ ! -f "$OUT/status" ]; then
	echo "vm: the guest did not finish; console:"
	tail -n 40 "$OUT/console.log"
	[ -f "$OUT/guest.log" ] && tail -n 60 "$OUT/guest.log"
	exit 1
fi
cat "$OUT/guest.log"
exit "$(cat "$OUT/status")"
