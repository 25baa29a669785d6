#!/bin/sh
# Bad input: non-finite initial weights (a NaN in a safetensors file, an
# infinity in an HDF5 export) were found only when 5 steps had been skipped;
# now at load time, naming the tensor and the first bad element (exit 3).
# On TP = 2 the rank holding the bad element names its global index.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
ST="$PYTHON $HPT_SRC/tests/helpers/st_tool.py"
A="--model tiny --data $CORPUS --steps 1 --batch 2 --seq-len 32 --quiet --metrics none"
# up_proj is (176, 64): flat element 7000 is [109, 24]
$ST write "$WORK/config.json" "$WORK/n.safetensors" --dtype BF16 --expect "$WORK/n.h5" \
  --nonfinite model.layers.1.mlp.up_proj.weight=7000,nan || fail "write"
expect_error 3 "$WORK/n.safetensors: tensor model.layers.1.mlp.up_proj.weight: element \[109, 24\] is NaN \(initial weights must be finite\)" \
  "$TRAIN" $A --init-from "$WORK/n.safetensors"
$ST write "$WORK/config.json" "$WORK/i.safetensors" --dtype F32 --expect "$WORK/i.h5" \
  --nonfinite model.norm.weight=5,-inf || fail "write"
expect_error 3 "$WORK/i.h5: tensor model.norm.weight: element \[5\] is -inf" "$TRAIN" $A --init-from "$WORK/i.h5"
expect_error 3 "$WORK/n.safetensors: tensor model.layers.1.mlp.up_proj.weight: element \[109, 24\] is NaN" \
  timeout 300 "$MPIEXEC" -n 2 "$TRAIN" $A --tp 2 --init-from "$WORK/n.safetensors"
pass "non-finite initial weights are refused at load, naming tensor and element"
