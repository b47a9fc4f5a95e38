#!/bin/sh
# Makes man page PAGE (seedfs, seedfs-seed, ...) from the --help text of
# the command it names, with help2man and seedfs.h2m's sections.
# Usage: help2man.sh SEEDFS_BINARY VERSION PAGE OUT
set -eu
bin=$1 ver=$2 page=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)
case $page in
seedfs) desc="mount the models a running seed publishes, over RDMA" ;;
seedfs-seed) desc="publish model directories for replicas to read" ;;
seedfs-mount) desc="mount what seeds publish as a read-only filesystem" ;;
seedfs-pull) desc="copy a published model to a local directory" ;;
seedfs-prefetch) desc="warm a seedfs mount's cache with a model's files" ;;
seedfs-probe) desc="which fabric protocols this host can serve" ;;
*) echo "help2man.sh: no page $page" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# help2man names the page after the program it runs.
if [ "$page" = seedfs ]; then
	printf '#!/bin/sh\nexec "%s" "$@"\n' "$bin" >"$tmp/$page"
else
	printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$bin" "${page#seedfs-}" >"$tmp/$page"
fi
chmod +x "$tmp/$page"
help2man --no-info --version-string="$ver" --name="$desc" \
	--include="$here/seedfs.h2m" --output="$out.tmp" "$tmp/$page"
mv "$out.tmp" "$out"
