#!/bin/sh
# Bad input (hpt-plan): --store-scores with cluster cpu-local, whose exact
# model carves hpt-train's own buffers (the CPU attention keeps only the
# softmax statistics), is refused, exit 2 — it was accepted and changed
# nothing; with an analytic preset it raises the activations.
. "$HPT_SRC/tests/helpers/lib.sh"
P="$HPT_BUILD/src/hpt-plan"
A="--model small --seq-len 256 --global-batch 8"
expect_error 2 "\-\-store-scores is only used with the analytic presets \(a100-80gb, h100-80gb, h200-141gb\): cluster cpu-local models hpt-train's own allocations" \
  "$P" $A --cluster cpu-local --store-scores
expect_error 2 "\-\-store-scores is only used with the analytic presets" \
  "$P" $A --cluster cpu-local --store-scores --search --gpus 2
acts() { "$P" $A --cluster h100-80gb --json "$@" | "$PYTHON" -c \
  "import json,sys; print(json.load(sys.stdin)['memory']['worst']['activations'])"; }
a=$(acts) && b=$(acts --store-scores) || fail "hpt-plan on h100-80gb"
"$PYTHON" -c "import sys; sys.exit(not float(sys.argv[2]) > float(sys.argv[1]))" "$a" "$b" ||
  fail "h100-80gb: --store-scores did not raise the activations ($a -> $b bytes)"
pass "--store-scores refused on cpu-local, counted on an analytic preset"
