#!/usr/bin/env bash
# The layers' arrows point down only: a folder includes headers of the
# folders below it, never of those above (docs/architecture.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=tests/bound.sh
source "$ROOT/tests/bound.sh"
# folder: the folders it must not include
declare -A above=(
	[common]="transports metadata control cache replica fs cli seed lib"
	[transports]="metadata control cache replica fs cli seed lib"
	[metadata]="control cache replica fs cli seed lib"
	[control]="cache replica fs cli seed lib sim"
	[cache]="control replica fs cli seed lib"
	[replica]="fs cli seed lib"
	[fs]="cli seed lib"
	[seed]="cache replica fs cli lib"
	[lib]="fs cli"
	[sim]="transports metadata control replica fs cli seed lib"
)
bad=0 upward=0 fuse=0
for dir in "${!above[@]}"; do
	[ -d "$dir" ] || { echo "FAIL: no folder $dir/"; exit 1; }
	for up in ${above[$dir]}; do
		if grep -rn "#include \"$up/" "$dir" --include='*.c' --include='*.h'; then
			echo "FAIL: $dir/ includes $up/ (it is above it)"
			upward=$((upward + 1))
			bad=1
		fi
	done
	# FUSE headers belong to fs/ (and cli/, above it) alone.
	if [ "$dir" != fs ] && grep -rn "#include <fuse" "$dir" --include='*.c' --include='*.h'; then
		echo "FAIL: $dir/ includes a FUSE header"
		fuse=$((fuse + 1))
		bad=1
	fi
done
bound_held upward_includes = 0 "$upward" || bad=1
bound_held fuse_headers_below_fs = 0 "$fuse" || bad=1
[ $bad -eq 0 ] && echo "ok: every include points down"
exit $bad
