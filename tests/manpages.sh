#!/usr/bin/env bash
# The man pages (made from the --help texts by help2man) document every
# option each command's parser accepts, and name none it does not; the
# bash completion offers subcommands, each command's options and the
# values it knows.  Options come from the parsers' tables in cli/*.c.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/seedfs-man.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v help2man >/dev/null || fail "help2man is not installed (packaging/deps.sh)"
# Only in tests: never documented.
HIDDEN="--test-corrupt"

# The options a parser takes, from its table.
parser_opts() { # CMD
	case $1 in
	seed | pull) sed -n '/ opts\[\] = {\| long_opts\[\] = {/,/};/p' "$SRC/cli/$1.c" |
		sed -n 's/^[[:space:]]*{"\([a-z-]*\)",.*/--\1/p'
		# getopt_long's short options ("h", "hV"...)
		sed -n 's/.*getopt_long(argc, argv, "\([a-zA-Z]*\)".*/\1/p' "$SRC/cli/$1.c" |
			grep -o . | sed 's/^/-/' ;;
	mount) sed -n '/fuse_opt mount_opts_spec\|fuse_opt .*\[\] = {/,/FUSE_OPT_END/p' "$SRC/cli/mount.c" |
		grep -o '"-\{1,2\}[a-zA-Z][a-z-]*\|"nonempty\|"direct_io' | tr -d '"' ;;
	probe) grep -o 'strcmp(argv\[i\], "-[-a-z]*")' "$SRC/cli/probe.c" | grep -o '"[^"]*"' | tr -d '"' ;;
	prefetch) grep -o 'strcmp(argv\[1\], "-[-a-z]*")' "$SRC/cli/prefetch.c" | grep -o '"[^"]*"' | tr -d '"' ;;
	esac | sort -u
}
# The options a page documents: the heads of its option lists.
# (The mount's page ends with libfuse's own options, from "-h   --help"
# on: libfuse takes those.)
page_opts() { # PAGE or FILE
	local f=$1
	[ -f "$f" ] || f=$BUILD/man/$1.1
	MANWIDTH=200 man -l "$f" 2>/dev/null | sed '/^ \{7\}-h   --help/,$d' | grep -E '^ {7}-' |
		grep -oE '(^| |,)(-[a-zA-Z]|--[a-z][a-z-]*|-o [a-z_]+)' | sed 's/^[ ,]//; s/^-o //' | sort -u
}

for p in seedfs seedfs-seed seedfs-mount seedfs-pull seedfs-prefetch seedfs-probe; do
	[ -s "$BUILD/man/$p.1" ] || fail "no man page $p.1 in $BUILD/man"
	grep -q "^\.TH \"\?$(echo "$p" | tr a-z A-Z)\"\? \"1\"" "$BUILD/man/$p.1" ||
		fail "$p.1: $(grep '^\.TH' "$BUILD/man/$p.1")"
	man -l "$BUILD/man/$p.1" 2>&1 >/dev/null | grep . && fail "man $p.1 warns"
	grep -q 'SEE ALSO' "$BUILD/man/$p.1" || fail "$p.1: no SEE ALSO"
done
for c in seed mount pull prefetch probe; do
	parser_opts "$c" >"$WORK/$c.parser"
	[ -s "$WORK/$c.parser" ] || fail "no options found in $c's parser: the test is broken"
	page_opts "seedfs-$c" >"$WORK/$c.page"
	[ -s "$WORK/$c.page" ] || fail "no options found in seedfs-$c(1): the test is broken"
	for o in $(cat "$WORK/$c.parser"); do
		case " $HIDDEN " in *" $o "*) continue ;; esac
		grep -qx -- "$o" "$WORK/$c.page" || fail "seedfs-$c(1) does not document $o"
	done
	for o in $(cat "$WORK/$c.page"); do
		grep -qx -- "$o" "$WORK/$c.parser" || fail "seedfs-$c(1) documents $o, which $c does not take"
	done
	echo "ok: seedfs-$c(1): $(wc -l <"$WORK/$c.page") options, the parser's $(wc -l <"$WORK/$c.parser") all documented"
done
grep -qE '^ {7}-o allow_other' <<<"$(MANWIDTH=200 man -l "$BUILD/man/seedfs-mount.1")" ||
	fail "seedfs-mount(1) lacks libfuse's options"
# The check can fail: a page without one option is caught.
sed '/^\\fB\\-\\-metrics\\-listen/,+2d' "$BUILD/man/seedfs-mount.1" >"$WORK/cut.1"
grep -qx -- --metrics-listen "$WORK/mount.page" || fail "the page lists no --metrics-listen"
grep -qx -- --metrics-listen <<<"$(page_opts "$WORK/cut.1")" &&
	fail "an option cut from the page is still found: the check proves nothing"
for c in seed mount pull prefetch probe; do
	[ -n "$("$BUILD/seedfs" "$c" --help)" ] || fail "seedfs $c --help prints nothing"
done
grep -qx "seedfs [0-9.]*" <<<"$("$BUILD/seedfs" --version)" || fail "seedfs --version: $("$BUILD/seedfs" --version)"
echo "ok: every page renders without warnings; seedfs --version: $("$BUILD/seedfs" --version)"

# Bash completion, as bash runs it.
BC=/usr/share/bash-completion/bash_completion
[ -f "$BC" ] || fail "bash-completion is not installed"
mkdir -p "$WORK/bin"
ln -s "$BUILD/seedfs" "$WORK/bin/seedfs"
complete_words() { # WORDS... -> COMPREPLY, one a line
	PATH=$WORK/bin:$PATH bash -c '
		source "$1"; source "$2"; shift 2
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		_seedfs seedfs "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
		printf "%s\n" "${COMPREPLY[@]}"' _ "$BC" "$SRC/packaging/bash-completion/seedfs" "$@"
}
want() { # EXPECTED WORDS...
	local e=$1
	shift
	grep -qx -- "$e" <<<"$(complete_words "$@")" || fail "completing '$*' does not offer $e: $(complete_words "$@" | tr '\n' ' ')"
}
want seed seedfs se
want prefetch seedfs pre
want --metrics-listen seedfs mount --met
want --model-dir seedfs seed --model
want --in-place seedfs pull --in
want --verbose seedfs probe --ver
want tcp seedfs mount --protocol t
want json seedfs seed --log-format j
met=$(complete_words seedfs seed --met)
grep -qx -- --metrics-token-file <<<"$met" || fail "seed --met completes to: $met"
grep -q -- --metrics-listen <<<"$met" && fail "seed does not take --metrics-listen"
echo "ok: bash completion: subcommands, options from each --help, protocol and log format values"
