#!/usr/bin/env bash
# seedfs pull: a byte-identical copy (empty files and directories too),
# verified against the seed's checksums (and with --in-place pulled
# straight into the files' mappings and verified there), with progress on stderr; clear
# refusals for a wrong name, a non-empty destination, a corrupt seed (the
# failed file removed), a model whose seed left files out for their
# names.
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 24M --shards 3
# Modes the umask must bound: a 0777 file, a set-uid 04755 one, a 0777
# directory.
mkdir "$MODEL/modes"
printf 'all may write\n' >"$MODEL/modes/all"
printf 'set-uid\n' >"$MODEL/modes/suid"
chmod 0755 "$MODEL"
chmod 0777 "$MODEL/modes" "$MODEL/modes/all"
chmod 04755 "$MODEL/modes/suid"
start_seed "$MODEL" --protocol tcp,shm
for p in tcp shm; do
	"$SEEDFS" pull --seed "$HOST:$SEED_PORT" --protocol $p m "$WORK/copy-$p" \
		2>"$WORK/pull.err" || fail "pull over $p: $(cat "$WORK/pull.err")"
	diff -r "$MODEL" "$WORK/copy-$p" >"$WORK/diff" 2>&1 || true
	bound copy_differences = 0 "$(grep -c . "$WORK/diff")" "pull over $p: the copy differs: $(head "$WORK/diff")"
	[ -d "$WORK/copy-$p/extra/deep" ] && [ -f "$WORK/copy-$p/extra/empty.bin" ] ||
		fail "empty dirs or files missing"
	grep -q "^pull m: done, " "$WORK/pull.err" || fail "no final progress line"
	ok "pull over $p: identical ($(tail -n 1 "$WORK/pull.err"))"
done

# --in-place: the pulls land in the files' mappings, none is copied
# (the copy path says why it was taken, at info).
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" --in-place --log-level info m "$WORK/copy-info" \
	2>"$WORK/pull.err" || fail "pull: $(cat "$WORK/pull.err")"
diff -r "$MODEL" "$WORK/copy-info" >/dev/null || fail "in-place copy differs"
refute --why "not in place" copying "$WORK/pull.err"
ok "--in-place: byte-exact, no file copied through the cache ($(tail -n 1 "$WORK/pull.err"))"

# The seed's bits without set-id and sticky, minus the umask.
modes() { stat -c '%a' "$1/modes/all" "$1/modes/suid" "$1/modes" "$1" | tr '\n' ' '; }
[ "$(modes "$MODEL")" = "777 4755 777 755 " ] || fail "the seed's modes: $(modes "$MODEL")"
for um in 022 077; do
	(umask $um && "$SEEDFS" pull --seed "$HOST:$SEED_PORT" m "$WORK/umask-$um" 2>"$WORK/pull.err") ||
		fail "pull under umask $um: $(cat "$WORK/pull.err")"
	cmp "$MODEL/modes/suid" "$WORK/umask-$um/modes/suid" || fail "bytes of modes/suid"
done
[ "$(modes "$WORK/umask-022")" = "755 755 755 755 " ] || fail "umask 022: $(modes "$WORK/umask-022")"
[ "$(modes "$WORK/umask-077")" = "700 700 700 700 " ] || fail "umask 077: $(modes "$WORK/umask-077")"
ok "modes 0777, 04755, directory 0777: 755 755 755 under umask 022, 700 700 700 under umask 077"

st=0
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" other "$WORK/x" 2>"$WORK/err" || st=$?
[ $st -ne 0 ] && grep -q "publishes no model of that name" "$WORK/err" || fail "wrong name: $(cat "$WORK/err")"
st=0
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" m "$WORK/copy-tcp" 2>"$WORK/err" || st=$?
[ $st -ne 0 ] && grep -q "copy-tcp: not empty" "$WORK/err" || fail "non-empty: $(cat "$WORK/err")"
ok "refusals: $(tr '\n' ' ' <"$WORK/err")"
kill "$SEED_PID"

F=model-00002-of-00003.safetensors
start_seed "$MODEL" --test-corrupt "$F:5000000"
st=0
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" m "$WORK/bad" 2>"$WORK/err" || st=$?
[ $st -ne 0 ] || fail "a corrupt seed was pulled"
grep -q "seedfs pull: $F: bytes do not match the seed's checksum" "$WORK/err" ||
	fail "no checksum line: $(cat "$WORK/err")"
# A failed pull leaves no file that looks complete: the file that failed
# is removed, every file left is byte-identical to the seed's.
left_exact() {
	local f n=0 wrong=()
	bound failed_file_left = 0 "$([ -e "$1/$F" ] && echo 1 || echo 0)" \
		"$1/$F left after the failure: $(stat -c '%s bytes, mode %a' "$1/$F" 2>&1)"
	while IFS= read -r f; do
		cmp -s "$MODEL/${f#"$1"/}" "$f" || wrong+=("$f")
		n=$((n + 1))
	done < <(find "$1" -type f)
	bound left_files_not_exact = 0 "${#wrong[@]}" "files left after the failure, not the seed's bytes: ${wrong[*]}"
	left=$n
}
left_exact "$WORK/bad"
ok "corrupt seed: $(grep 'seedfs pull:' "$WORK/err"); $F removed, the $left files left byte-exact"
st=0
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" --in-place m "$WORK/bad2" 2>"$WORK/err" || st=$?
[ $st -ne 0 ] && grep -q "seedfs pull: $F: bytes do not match the seed's checksum" "$WORK/err" ||
	fail "--in-place from a corrupt seed: $(cat "$WORK/err")"
left_exact "$WORK/bad2"
ok "--in-place, corrupt seed: refused the same way; $F removed, the $left files left byte-exact"
kill "$SEED_PID"

# Names the seed cannot publish (a newline, a tab): it leaves them out,
# the manifest says so, and pull fails naming them (escaped) once every
# other file is in place.
M2=$WORK/m2
"$GENMODEL" "$M2" --size 2M --shards 1
printf 'newline\n' >"$M2/a
b.txt"
printf 'tab\n' >"$M2/c	d.txt"
start_seed "$M2"
st=0
"$SEEDFS" pull --seed "$HOST:$SEED_PORT" m2 "$WORK/names" 2>"$WORK/err" || st=$?
bound names_left_out_exit_status = 1 "$st" "pull without 2 files: $(cat "$WORK/err")"
want="seedfs pull: the seed left out 2 entries whose names it cannot publish (see its log): a\\nb.txt, c\\td.txt ($WORK/names is incomplete)"
[ "$(tail -n 1 "$WORK/err")" = "$want" ] || fail "names left out: $(tail -n 1 "$WORK/err"), want $want"
diff -r -x 'a?b.txt' -x 'c?d.txt' "$M2" "$WORK/names" >"$WORK/diff" 2>&1 || true
bound rest_differences = 0 "$(grep -c . "$WORK/diff")" "the rest differs: $(head "$WORK/diff")"
ok "names with a newline and a tab: exit $st, $(tail -n 1 "$WORK/err"); every other file identical"
sanitizers_clean
