#!/bin/sh
# Bad input: safetensors bytes that no tensor covers. A header length 4
# bytes short of a space-padded header made every tensor load shifted by one
# float (finite values, exit 0), 1 byte short loaded NaN weights; the
# data_offsets must tile the data region up to the end of the file (exit 3,
# the file, the last tensor and the rule named).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
for d in 4 1; do
  "$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/w$d.safetensors" --dtype F32 \
    --expect "$WORK/exp.h5" --header-delta -$d || fail "write"
  expect_error 3 "$WORK/w$d.safetensors: the last tensor [a-z_.0-9]+ ends at byte [0-9]+ of the [0-9]+-byte data region: its last $d bytes belong to no tensor \(the data_offsets must tile" \
    "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/w$d.safetensors"
done
# a gap between two tensors: model.norm.weight moved 4 bytes on, into the room of the next
"$PYTHON" - "$WORK/config.json" "$WORK/gap.safetensors" <<'PY' || fail "write the gap file"
import json, struct, sys
hdr = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
       "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}}
text = json.dumps(hdr).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + bytes(16))
PY
expect_error 3 "$WORK/gap.safetensors: tensor b begins at byte 12 of the data region, but the tensor before it, a, ends at byte 8: bytes \[8, 12\) belong to no tensor" \
  "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/gap.safetensors"
pass "bytes no tensor covers are refused, naming the file, the tensor and the rule"
