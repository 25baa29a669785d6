#!/bin/sh
# Bad input: an index whose weight_map has 300,000 entries beyond the
# model's tensors (half of them in as many distinct shard files). Sorting
# the names was quadratic (an insertion sort: 290 s here), as was looking
# each shard file up in a list; now O(n log n). The run must refuse the
# unknown tensors (exit 3, the first named, the count given) well within a
# generous timeout (this asserts no timing beyond "it finishes").
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/m" --shards 2 --dtype F32 \
  --expect "$WORK/exp.h5" || fail "write"
"$PYTHON" - "$WORK/m/model.safetensors.index.json" <<'PY' || fail "grow the index"
import json, sys
idx = json.load(open(sys.argv[1]))
wm = idx["weight_map"]
for i in range(300000):  # names in descending order: the worst case of an insertion sort
    n = 299999 - i
    wm[f"extra.{n:06d}"] = f"other-{n:06d}.safetensors" if n % 2 else "model-00001-of-00002.safetensors"
json.dump(idx, open(sys.argv[1], "w"))
PY
expect_error 3 "$WORK/m/model.safetensors.index.json: tensor extra.000000 is not one of the model's \(300000 such tensors" \
  timeout 200 "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/m"
pass "a 300,000-entry weight_map is read and its unknown tensors refused"
