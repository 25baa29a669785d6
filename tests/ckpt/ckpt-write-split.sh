#!/bin/sh
# The DP replicas share a save's writes per pipeline stage: at PP=2 x DP=2
# (small, 4 ranks) each rank writes half of its stage's bytes (within 5 %),
# every byte of the file's tensors is written by exactly one rank (the
# per-rank byte counts add up to the datasets' sizes), and the checkpoint
# verifies. (Split by the whole file's bytes, as before, the replicas of a
# stage wrote about 2:1.)
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
HPT_CKPT_PROFILE=1 OMP_NUM_THREADS=1 $MPIEXEC -n 4 "$TRAIN" --model small --data "$CORPUS" --seq-len 16 \
  --batch 1 --eval-batches 1 --eval-interval 0 --quiet --steps 1 --save-every 1 --pp 2 \
  --run-dir "$WORK/r" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "PP=2 x DP=2 run"; }
"$HPT_BUILD/src/hpt-ckpt" verify "$WORK/r/checkpoints/step_00000001" | grep -q ': ok$' ||
  fail "the checkpoint does not verify"
grep 'checkpoint rank .* writes' "$WORK/out" > "$WORK/w"
[ "$(wc -l < "$WORK/w")" = 4 ] || { cat "$WORK/out"; fail "expected 4 'writes' lines"; }
"$PYTHON" - "$WORK/w" "$WORK/r/checkpoints/step_00000001/checkpoint.h5" <<'PY' || fail "write split"
import re, sys, h5py
per = {}
for line in open(sys.argv[1]):
    m = re.search(r"\(pp (\d+), tp (\d+), dp (\d+)\) writes (\d+) bytes", line)
    per.setdefault(int(m.group(1)), {})[int(m.group(3))] = int(m.group(4))
for pp, d in per.items():
    a, b = d[0], d[1]
    assert abs(a - b) <= 0.05 * max(a, b), f"stage {pp}: DP ranks write {a} and {b} bytes"
    print(f"stage {pp}: DP ranks write {a} and {b} bytes")
total = 0
with h5py.File(sys.argv[2], "r") as f:
    f.visititems(lambda n, o: None)
    def add(name, o):
        global total
        if isinstance(o, h5py.Dataset):
            total += o.size * 4
    f.visititems(add)
got = sum(v for d in per.values() for v in d.values())
assert got == total, f"ranks wrote {got} bytes, the tensors hold {total}"
print(f"{got} bytes written once each")
PY
pass "each DP replica writes half of its stage; every byte once; verifies"
