#!/bin/sh
# Bad input: a checkpoint whose HDF5 metadata is damaged — the block of the
# /model group's link heap that holds the tensor names. hpt-ckpt verify,
# list --verify, info and export must report it and exit, not crash: HDF5
# 1.10.8's by-index link calls (H5Lget_name_by_idx) free uninitialised
# pointers when that block fails its checksum (H5G__link_release_table,
# seen under ASan and valgrind; HDFGroup/hdf5#581). CI runs tests/bad/*
# under ASan, where that free is reported (issue 17, finding 15).
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
CKPT="$HPT_BUILD/src/hpt-ckpt"
"$TRAIN" --model tiny --data "$CORPUS" --seq-len 32 --batch 2 --eval-batches 1 --quiet --steps 2 \
  --save-every 2 --checkpoint-dir "$WORK/c" > "$WORK/o" 2>&1 || { cat "$WORK/o"; fail "training run"; }
F="$WORK/c/step_00000002/checkpoint.h5"
# The first copy of a tensor name in the file is its link in /model's
# fractal heap (groups are written in order /model, /optim/...); overwrite
# 4 bytes of that name: the heap block's checksum no longer matches.
"$PYTHON" - "$F" <<'PY' || fail "could not damage $F"
import sys
p = sys.argv[1]
d = open(p, "rb").read()
name = d.find(b"model.embed_tokens.weight")
block = d.rfind(b"FHDB", 0, name)  # fractal heap direct block holding it
assert name > 0 and 0 < block < name < block + 4096, (name, block)
with open(p, "r+b") as f:
    f.seek(name)
    f.write(b"\xde\xad\xbe\xef")
PY
expect_error 3 "/model: links unreadable \(damaged metadata\): .*checksum" "$CKPT" verify "$F"
expect_error 3 "damaged \(/model\)" "$CKPT" list --verify "$WORK/c"
expect_error 3 "/model: not the tensors config_json describes" "$CKPT" export "$WORK/c" "$WORK/w.h5"
[ ! -e "$WORK/w.h5" ] && [ ! -e "$WORK/w.h5.tmp" ] || fail "export of a damaged checkpoint left a file"
st=0; "$CKPT" info "$F" > "$WORK/info" 2>&1 || st=$?
cat "$WORK/info"
no_crash "$WORK/info" $st
[ $st = 0 ] || fail "info exited $st"
grep -q "^/model: links unreadable" "$WORK/info" || fail "info does not say /model's links are unreadable"
grep -qE "^step +2$" "$WORK/info" || fail "info lost the root attributes"
pass "damaged link metadata is reported by verify, list, export and info without a crash"
