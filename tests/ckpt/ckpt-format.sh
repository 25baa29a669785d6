#!/bin/sh
# Checkpoint format 2 as hpt-train writes it (contiguous datasets, CRC32C
# tiles, io/ckpt.h): hpt-ckpt verifies it, h5py reads it as full tensors and
# recomputes the same CRC32C per tile, a flipped byte is found and named;
# a save with direct I/O equals one through the page cache; and a format 1
# checkpoint (Fletcher32 chunks, tests/helpers/make_ckpt.py) still loads into
# hpt-train.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
CKPT="$HPT_BUILD/src/hpt-ckpt"
MAKE_CKPT="$HPT_SRC/tests/helpers/make_ckpt.py"
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json" || fail "--print-config"
# Format 2, as hpt-train writes it (contiguous datasets, CRC32C tiles): it
# verifies, reads in h5py with the CRCs right, and a flipped byte is found.
st=0; "$TRAIN" --model tiny --data "$CORPUS" --seq-len 16 --batch 2 --eval-batches 1 --quiet --steps 3 \
  --stop-at 1 --run-dir "$WORK/t2" > "$WORK/t2.out" 2>&1 || st=$?
[ $st = 75 ] || { cat "$WORK/t2.out"; fail "hpt-train --stop-at 1: exit $st"; }
F2="$WORK/t2/checkpoints/step_00000001/checkpoint.h5"
# Resuming a run whose checkpoint is its last step: loads, trains nothing,
# says so (no "final val loss nan"), exits 0.
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 16 --batch 2 --eval-batches 1 --quiet --steps 1 \
  --run-dir "$WORK/t2" > "$WORK/t2b.out" 2>&1 || { cat "$WORK/t2b.out"; fail "resume at the last step"; }
grep -q "nothing left to train" "$WORK/t2b.out" && ! grep -qi nan "$WORK/t2b.out" ||
  { cat "$WORK/t2b.out"; fail "resume at the last step: message"; }
"$CKPT" verify "$F2" | grep -q ': ok$' || fail "verify of a format 2 checkpoint"
"$PYTHON" - "$F2" <<'PY' || fail "format 2 file: h5py view or CRC32C differs"
import sys, h5py, numpy as np
T = []
for b in range(256):
  c = b
  for _ in range(8):
      c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
  T.append(c)
def crc32c(data):
  c = 0xFFFFFFFF
  for x in data:
      c = (c >> 8) ^ T[(c ^ x) & 0xFF]
  return c ^ 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
with h5py.File(sys.argv[1], "r") as f:
  assert f.attrs["format_version"] == 2
  d = f["model/model.layers.1.mlp.down_proj.weight"]
  assert d.shape == (64, 176) and d.chunks is None and d.dtype == np.float32
  tr, tc = d.attrs["crc_tile"]
  a = d[...]
  crcs = d.attrs["crc32c"].reshape(-(-64 // tr), -(-176 // tc))
  for i in range(crcs.shape[0]):
      for j in range(crcs.shape[1]):
          assert crc32c(a[i*tr:(i+1)*tr, j*tc:(j+1)*tc].astype("<f4").tobytes()) == crcs[i, j]
  off = f["optim/exp_avg/model.layers.0.self_attn.k_proj.weight"].id.get_offset()
with open(sys.argv[1], "r+b") as fh:
  fh.seek(off + 8)
  fh.write(b"\xde\xad\xbe\xef")
PY
expect_error 3 "exp_avg/model\.layers\.0\.self_attn\.k_proj\.weight: damaged: CRC32C mismatch in tile \(0, 0\)" \
  "$CKPT" verify "$F2"
# Direct I/O (the default) and page-cache writes (HPT_CKPT_DIRECT=0) give
# the same file contents, at TP=2 (raw writes and collective column shards)
# and at DP=2 (the replicas split the raw writes).
for lay in "--tp 2" "--batch 1"; do
  for d in 1 0; do
    st=0; HPT_CKPT_DIRECT=$d $MPIEXEC -n 2 "$TRAIN" --model tiny --data "$CORPUS" --seq-len 16 --batch 2 \
      --eval-batches 1 --quiet --steps 3 --stop-at 1 $lay --run-dir "$WORK/d$d" > "$WORK/d.out" 2>&1 || st=$?
    [ $st = 75 ] || { cat "$WORK/d.out"; fail "HPT_CKPT_DIRECT=$d $lay: exit $st"; }
    "$CKPT" verify "$WORK/d$d/checkpoints/step_00000001" | grep -q ': ok$' ||
      fail "verify, HPT_CKPT_DIRECT=$d $lay"
  done
  "$PYTHON" - "$WORK/d1/checkpoints/step_00000001/checkpoint.h5" \
    "$WORK/d0/checkpoints/step_00000001/checkpoint.h5" <<'PY' || fail "direct vs page-cache save differ ($lay)"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert len(names) >= 3 * 20, names
for n in names:
    assert np.array_equal(a[n][()], b[n][()]), n
    assert np.array_equal(a[n].attrs["crc32c"], b[n].attrs["crc32c"]), n
print(len(names), "datasets equal")
PY
  rm -rf "$WORK/d1" "$WORK/d0"
done
# Format 1 (Fletcher32 chunks, make_ckpt.py) still loads into hpt-train.
"$PYTHON" "$MAKE_CKPT" --config "$WORK/tiny.json" --dir "$WORK/v1/checkpoints" --steps 4 ||
  fail "make_ckpt.py v1"
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 16 --batch 2 --eval-batches 1 --quiet --steps 5 \
  --resume strict --run-dir "$WORK/v1" > "$WORK/v1.out" 2>&1 || { cat "$WORK/v1.out"; fail "load of format 1"; }
grep -q "resumed from .*step_00000004" "$WORK/v1.out" || fail "format 1 checkpoint not loaded"

pass "format 2 verifies, reads in h5py with matching CRC32C, damage is named; direct and page-cache saves are equal; format 1 loads"
