#!/bin/sh
# config.json of a safetensors export carries bos_token_id / eos_token_id /
# pad_token_id when the model config gives them (they were dropped), from
# hpt-train --export and from hpt-ckpt export of the run's checkpoint; a
# config without them writes none; a negative id is refused (exit 2).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json" || fail "print-config"
"$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); c.update(bos_token_id=1, eos_token_id=2, pad_token_id=None); json.dump(c, open(sys.argv[2], "w"))' \
  "$WORK/tiny.json" "$WORK/ids.json" || fail "write ids.json"
A="--data $CORPUS --seq-len 32 --batch 2 --eval-batches 1 --quiet --metrics none --steps 1"
mkdir "$WORK/d" "$WORK/e" "$WORK/n"
"$TRAIN" $A --model "$WORK/ids.json" --save-every 1 --run-dir "$WORK/r" --export "$WORK/d/model.safetensors" \
  > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "train with ids.json"; }
"$HPT_BUILD/src/hpt-ckpt" export "$WORK/r" "$WORK/e/model.safetensors" > /dev/null || fail "hpt-ckpt export"
"$TRAIN" $A --model tiny --export "$WORK/n/model.safetensors" > "$WORK/n.out" 2>&1 ||
  { cat "$WORK/n.out"; fail "train tiny"; }
check() { # CONFIG.JSON BOS EOS (None: absent); pad_token_id absent
  "$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); want = [None if a == "None" else int(a) for a in sys.argv[2:4]]
got, pad = [c.get("bos_token_id"), c.get("eos_token_id")], "pad_token_id" in c
sys.exit(0 if got == want and not pad else f"{sys.argv[1]}: bos/eos {got}, want {want}; pad_token_id given: {pad}, want absent")' "$@" ||
    fail "$1: token ids"
}
check "$WORK/d/config.json" 1 2
check "$WORK/e/config.json" 1 2
check "$WORK/n/config.json" None None
"$PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["eos_token_id"] = -1; json.dump(c, open(sys.argv[2], "w"))' \
  "$WORK/tiny.json" "$WORK/neg.json" || fail "write neg.json"
expect_error 2 "$WORK/neg.json: field 'eos_token_id' = -1 must be >= 0" "$TRAIN" --model "$WORK/neg.json" --print-config
pass "token ids carried into config.json when given"
