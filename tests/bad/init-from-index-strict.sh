#!/bin/sh
# Bad input: sharded indexes that json-c alone accepted — a weight_map key
# given twice (the last won), a /* comment */, and a shard named
# ../m/model-00001-of-00002.safetensors (a '/' component: HF writes plain
# names; absolute ones were already refused): exit 3 each, the rule named.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/config.json" || fail "print-config"
"$PYTHON" "$HPT_SRC/tests/helpers/st_tool.py" write "$WORK/config.json" "$WORK/m" --shards 2 --dtype F32 \
  --expect "$WORK/exp.h5" || fail "write"
I="$WORK/m/model.safetensors.index.json"
cp "$I" "$WORK/good.json"
edit() { # PYTHON-EXPRESSION on the index text t
  "$PYTHON" -c "import sys; t = open(sys.argv[1]).read(); open(sys.argv[2], 'w').write($1)" \
    "$WORK/good.json" "$I" || fail "edit $1"
}
run() { "$TRAIN" --model tiny --data "$CORPUS" --steps 1 --batch 2 --seq-len 32 --init-from "$WORK/m"; }
edit "t.replace('\"weight_map\": {', '\"weight_map\": {\"model.norm.weight\": \"model-00001-of-00002.safetensors\", ', 1)"
grep -c '"model.norm.weight"' "$I" | grep -q 2 || fail "the edited index does not name model.norm.weight twice"
expect_error 3 "$I gives the key \"model.norm.weight\" twice in one object" run
edit "t.replace('{', '{ /* comment */', 1)"
expect_error 3 "$I is not one strict JSON object" run
edit "t.replace('\"model-00001-of-00002', '\"../m/model-00001-of-00002')"
expect_error 3 "$I: weight_map entry [^ ]*: expected the name of a shard file beside the index \(no '/'\), got '../m/model-00001" run
