#!/bin/sh
# hpt-ckpt on checkpoints written by tests/helpers/make_ckpt.py (h5py, the format of
# io/ckpt.h): list, info, verify (a flipped byte in a tensor's chunk, a
# truncated file, an unknown format version), export, and a leftover .tmp.
. "$HPT_SRC/tests/helpers/lib.sh"
CKPT="$HPT_BUILD/src/hpt-ckpt"
MAKE_CKPT="$HPT_SRC/tests/helpers/make_ckpt.py"
"$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
"$TRAIN" --model tiny --print-config > "$WORK/tiny.json" || fail "--print-config"
DIR="$WORK/run/checkpoints"
"$PYTHON" "$MAKE_CKPT" --config "$WORK/tiny.json" --dir "$DIR" --steps 10 20 || fail "make_ckpt.py"

# list: both checkpoints, newest first, the one 'latest' names marked.
"$CKPT" list "$DIR" > "$WORK/list" || { cat "$WORK/list"; fail "list exited $?"; }
cat "$WORK/list"
grep -E '^ +[0-9]+ ' "$WORK/list" | awk '{print $1}' | tr '\n' ' ' | grep -qx '20 10 ' ||
  fail "list does not show steps 20 then 10"
grep -E '^ +20 .*complete.*<- latest' "$WORK/list" >/dev/null || fail "step 20 not marked latest"
grep -E '^ +10 .*latest' "$WORK/list" >/dev/null && fail "step 10 marked latest"

# info: the metadata and a tensor with its shape and layer.
"$CKPT" info "$DIR/step_00000020" > "$WORK/info" || { cat "$WORK/info"; fail "info failed"; }
grep -E '^step +20$' "$WORK/info" >/dev/null || fail "info: no step 20"
grep -E '^model\.layers\.1\.mlp\.down_proj\.weight +\(64, 176\) +float32 +1$' "$WORK/info" >/dev/null ||
  { cat "$WORK/info"; fail "info: down_proj of layer 1 not shown as (64, 176) float32 layer 1"; }

# verify: a sound checkpoint, and the whole directory.
"$CKPT" verify "$DIR/step_00000020/checkpoint.h5" | grep -q ': ok$' || fail "verify of a good file"
"$CKPT" verify "$DIR" > "$WORK/v" || { cat "$WORK/v"; fail "verify DIR of good checkpoints"; }

# Garbage inside the first chunk of one tensor: Fletcher32 catches it.
cp -r "$DIR/step_00000010" "$WORK/flip"
"$PYTHON" - "$WORK/flip/checkpoint.h5" <<'PY' || fail "could not corrupt the file"
import sys, h5py
path, name = sys.argv[1], "/model/model.layers.1.self_attn.q_proj.weight"
with h5py.File(path, "r") as f:
    ds = f[name]
    # chunked datasets have no single offset (get_offset() is None): use chunk 0
    off = ds.id.get_offset()
    off = ds.id.get_chunk_info(0).byte_offset if off is None else off
with open(path, "r+b") as fh:
    fh.seek(off + 64)
    fh.write(b"\xde\xad\xbe\xef" * 8)
PY
expect_error 3 "q_proj\.weight: damaged: .*Fletcher32" "$CKPT" verify "$WORK/flip"

# A truncated file.
cp -r "$DIR/step_00000010" "$WORK/trunc"
truncate -s 100000 "$WORK/trunc/checkpoint.h5" || fail "truncate"
expect_error 3 "trunc/checkpoint.h5: .*truncated" "$CKPT" verify "$WORK/trunc"

# An unknown format version is refused with the version named.
"$PYTHON" "$MAKE_CKPT" --config "$WORK/tiny.json" --dir "$WORK/v99" --steps 5 --format-version 99 ||
  fail "make_ckpt.py --format-version 99"
expect_error 3 "unknown checkpoint format version 99" "$CKPT" verify "$WORK/v99/step_00000005"
expect_error 3 "unknown checkpoint format version 99" "$CKPT" info "$WORK/v99/step_00000005"

# export: HF names at the root, equal to /model, config_json attached.
"$CKPT" export "$DIR/step_00000020" "$WORK/w.h5" || fail "export failed"
[ ! -e "$WORK/w.h5.tmp" ] || fail "export left w.h5.tmp behind"
"$PYTHON" - "$DIR/step_00000020/checkpoint.h5" "$WORK/w.h5" <<'PY' || fail "exported weights differ"
import json, sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as c, h5py.File(sys.argv[2], "r") as w:
    names = sorted(c["model"].keys())
    assert sorted(w.keys()) == names, (sorted(w.keys()), names)
    assert "model.layers.0.self_attn.q_proj.weight" in names and "lm_head.weight" in names
    for n in names:
        assert w[n].dtype == np.float32 and w[n].shape == c["model"][n].shape, n
        assert np.array_equal(w[n][...], c["model"][n][...]), n
    assert json.loads(w.attrs["config_json"])["hidden_size"] == 64
PY
expect_error 3 "q_proj\.weight: .*Fletcher32" "$CKPT" export "$WORK/flip" "$WORK/bad.h5"
if [ -e "$WORK/bad.h5" ] || [ -e "$WORK/bad.h5.tmp" ]; then fail "a failed export left a file"; fi

# list --verify reads every dataset and names the first damaged one.
cp -r "$WORK/flip" "$DIR/step_00000015"
expect_error 3 "^ +15 .*damaged \(/model/model\.layers\.1\.self_attn\.q_proj\.weight\)" \
  "$CKPT" list --verify "$DIR"
rm -rf "$DIR/step_00000015"

# A leftover step_*.tmp (an interrupted save) is listed as incomplete.
mkdir "$DIR/step_00000030.tmp" && cp "$DIR/step_00000010/checkpoint.h5" "$DIR/step_00000030.tmp/"
"$CKPT" list "$DIR" > "$WORK/list2" || fail "list with a .tmp"
cat "$WORK/list2"
grep -E '^ +30 .*incomplete' "$WORK/list2" >/dev/null || fail "step_00000030.tmp not listed as incomplete"
grep -E '^ +20 .*<- latest' "$WORK/list2" >/dev/null || fail "latest mark moved"

# 'latest' naming a missing checkpoint is reported.
echo step_00000040 > "$DIR/latest"
"$CKPT" list "$DIR" > "$WORK/list3" || fail "list with a dangling latest"
grep -q "latest: names step_00000040, which does not exist" "$WORK/list3" ||
  fail "latest naming a missing checkpoint not reported"
grep -q "resume: tries step_00000020 first" "$WORK/list3" || fail "the resume candidate not named"

# A tied model has no lm_head.weight, and verify knows it from config_json.
"$TRAIN" --model tiny --tie-embeddings --print-config > "$WORK/tied.json" || fail "--print-config tied"
"$PYTHON" "$MAKE_CKPT" --config "$WORK/tied.json" --dir "$WORK/tied" --steps 3 --tp 2 --pp 2 --dp 2 \
  --zero1 || fail "make_ckpt.py tied"
"$CKPT" verify "$WORK/tied" > "$WORK/vt" || { cat "$WORK/vt"; fail "verify of a tied checkpoint"; }
"$CKPT" list "$WORK/tied" | grep -qE '^ +3  2x2x2 +yes ' || fail "list does not show layout 2x2x2, ZeRO-1"

expect_error 2 "unknown command 'frobnicate'" "$CKPT" frobnicate "$DIR"
pass "hpt-ckpt lists, describes, verifies and exports checkpoints"
