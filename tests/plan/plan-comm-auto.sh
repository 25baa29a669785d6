#!/bin/sh
# hpt-plan --comm auto, as hpt-train's --comm auto (lib/train.c
# choose_comm): the modelled GPU presets get NCCL (one rank per GPU, cuda
# backend, NCCL built), cpu-local (hpt's CPU backend) MPI; the same plan as
# the default and as the library named explicitly.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
M="--model small --seq-len 256 --global-batch 8 --tp 2 --json"
for c in h100-80gb cpu-local; do
  "$P" $M --cluster $c --comm auto > "$WORK/auto.json" 2> "$WORK/auto.err" ||
    { cat "$WORK/auto.err"; fail "--comm auto refused on $c"; }
  "$P" $M --cluster $c > "$WORK/default.json" || fail "default on $c"
  lib=$([ $c = cpu-local ] && echo mpi || echo nccl)
  "$P" $M --cluster $c --comm $lib > "$WORK/named.json" || fail "--comm $lib on $c"
  "$PYTHON" - "$WORK/auto.json" "$WORK/default.json" "$WORK/named.json" $lib <<'PY' || fail "--comm auto on $c"
import json, sys
a, d, n = (json.load(open(p)) for p in sys.argv[1:4])
assert a["comm_library"] == sys.argv[4], a["comm_library"]
assert a == d == n
print("--comm auto on %s: %s" % (a["cluster"]["name"], a["comm_library"]))
PY
done
"$P" --help | grep -q "auto is nccl on the GPU presets" || fail "--help does not say what auto resolves to"
pass "hpt-plan --comm auto resolves as hpt-train's for the modelled cluster"
