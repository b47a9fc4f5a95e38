#!/usr/bin/env bash
# A mount given a re-seeder as a --seed follows the seed's generations:
#   M1 --seed R      (R re-seeds the seed S: all M1 was given)
#   M2 --seed R2,S   (a re-seeder named first; R2 re-seeds S2, a second
#                    seed of generation 1 that never publishes another:
#                    S leads M2 all the same)
# S publishes generation 2, R reads it whole; within 10 s M1 and M2
# show generation 2 and a new open reads its bytes.  (Before, the
# re-seeder led M2, and a re-seeder's new content was refused, "not a
# generation this mount follows": both served generation 1 for good.)
source "$(dirname "$0")/lib.sh" "$1"

MODEL=$WORK/m
"$GENMODEL" "$MODEL" --size 4M --shards 2
S1=model-00001-of-00002.safetensors
# write_gen G: generation G's shard, with bytes changed in every chunk
write_gen() {
	cp "$MODEL/$S1" "$MODEL/$S1.tmp"
	python3 - "$MODEL/$S1.tmp" "$1" <<'PY'
import sys
p, g = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    n = f.seek(0, 2)
    for off in range(4096, n - 64, 262144):
        f.seek(off)
        f.write(b"generation %08d" % g)
PY
	mv "$MODEL/$S1.tmp" "$MODEL/$S1"
}
write_gen 1
start_seed "$MODEL" --grace 3
SADDR=$HOST:$SEED_PORT
SPID=$SEED_PID
MOUNT_LOG=r mount_seed "$WORK/r" --reseed --listen "$HOST:0" --cache-size 64M
cmp "$MODEL/$S1" "$WORK/r/m/$S1" || fail "R: generation 1 differs"
RADDR=$(awk '$1 == "reseed:" { print $2 }' "$WORK/r/.seedfs/status")
[ -n "$RADDR" ] || fail "R: no re-seeder address in status"
cp -a "$MODEL" "$WORK/m-s2"
SEED_LOG=seed2 start_seed "$WORK/m-s2" --name m
S2ADDR=$HOST:$SEED_PORT
MOUNT_LOG=r2 MOUNT_SEEDS=$S2ADDR mount_seed "$WORK/r2" --reseed --listen "$HOST:0" --cache-size 64M
cmp "$MODEL/$S1" "$WORK/r2/m/$S1" || fail "R2: generation 1 differs"
R2ADDR=$(awk '$1 == "reseed:" { print $2 }' "$WORK/r2/.seedfs/status")
[ -n "$R2ADDR" ] || fail "R2: no re-seeder address in status"
MOUNT_LOG=m1 MOUNT_SEEDS=$RADDR mount_seed "$WORK/m1"
MOUNT_LOG=m2 MOUNT_SEEDS=$R2ADDR,$SADDR mount_seed "$WORK/m2"
for m in m1 m2; do
	cmp "$MODEL/$S1" "$WORK/$m/m/$S1" || fail "$m: generation 1 differs"
done
ok "M1 (--seed R) and M2 (--seed R2,S) read generation 1 byte-exact"

write_gen 2
kill -HUP "$SPID"
for _ in $(seq 200); do
	grep -q "^seedfs seed: published model m generation 2 " "$WORK/seed.out" && break
	sleep 0.05
done
grep -q "^seedfs seed: published model m generation 2 " "$WORK/seed.out" ||
	fail "no generation 2: $(tail -n 3 "$WORK/seed.err")"
for _ in $(seq 200); do
	grep -q "^model: m generation 2 " "$WORK/r/.seedfs/status" && break
	sleep 0.05
done
cmp "$MODEL/$S1" "$WORK/r/m/$S1" || fail "R: generation 2 differs"
t0=$(now_ms)
for m in m1 m2; do
	for _ in $(seq 200); do
		grep -q "^model: m generation 2 " "$WORK/$m/.seedfs/status" && break
		sleep 0.05
	done
	bound "${m}_follows_ms" "<=" 10000 $(($(now_ms) - t0)) \
		"$m shows generation 2 ($(grep '^model:' "$WORK/$m/.seedfs/status")) after R read it, ms"
	grep -q "^model: m generation 2 " "$WORK/$m/.seedfs/status" ||
		fail "$m does not follow: $(grep -E '^(model|seed|reseeder|seed_model):' "$WORK/$m/.seedfs/status")"
	cmp "$MODEL/$S1" "$WORK/$m/m/$S1" || fail "$m: a new open does not read generation 2"
done
ok "M1 and M2 follow generation 2 (a new open reads its bytes)"
sanitizers_clean
