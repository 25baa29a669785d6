# tests/helpers/lib.sh — shared helpers for hpt's shell tests (sourced).
# Environment (set by `make check`): HPT_SRC, HPT_BUILD, MPIEXEC, PYTHON.
set -u
: "${HPT_SRC:?run through make check}" "${HPT_BUILD:?run through make check}"
MPIEXEC=${MPIEXEC:-mpiexec}
PYTHON=${PYTHON:-/usr/bin/python3}
TRAIN="$HPT_BUILD/src/hpt-train"
DATA_TOOL="$HPT_BUILD/src/hpt-data"
CORPUS=${HPT_CORPUS:-$HPT_BUILD/tests/corpus}
# Sanitizer builds: MPICH's own allocations are reported as leaks; every
# other ASan/UBSan finding still fails the test (see expect_error).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hpt-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; exit 0; }

need_corpus() {
  [ -f "$CORPUS/train_000000.bin" ] || fail "corpus missing: tests/data/prepare-corpus.sh must run first"
}

# skip_without_cuda FILE: a failed --backend cuda run whose output FILE says
# there is no GPU or no CUDA backend ends the test as skipped (77) with
# that reason; any other failure returns to the caller (which fails).
skip_without_cuda() {
  grep -q "no CUDA device visible" "$1" && { echo "SKIP: no CUDA device visible"; exit 77; }
  grep -q "built without the CUDA backend" "$1" &&
    { echo "SKIP: hpt built without CUDA (configure --with-cuda)"; exit 77; }
  return 0
}

# Reject crashes and sanitizer reports in a captured output file.
no_crash() { # FILE STATUS
  [ "$2" -lt 128 ] || fail "crashed with signal $(( $2 - 128 ))"
  if grep -qE "AddressSanitizer|LeakSanitizer|runtime error:|Segmentation fault|core dumped" "$1"; then
    cat "$1"; fail "sanitizer or crash report in the output"
  fi
}

# expect_error STATUS PATTERN CMD...: CMD must exit with STATUS, print a
# message matching the extended regex PATTERN, print it once, and not crash.
expect_error() {
  local want=$1 pat=$2; shift 2
  local out="$WORK/out.$$" st=0
  "$@" >"$out" 2>&1 || st=$?
  cat "$out"
  no_crash "$out" "$st"
  [ "$st" -eq "$want" ] || fail "exit status $st, expected $want"
  grep -qE "$pat" "$out" || fail "message does not match /$pat/"
  [ "$(grep -cE "$pat" "$out")" -eq 1 ] || fail "message printed more than once"
  echo "PASS: exit $st, message matches /$pat/"
}

# run_train NAME RANKS ARG... : hpt-train on RANKS ranks with the caller's
# options $A and ARG..., --run-dir $WORK/NAME, output in $WORK/NAME.out;
# exit 0 or 75 (--stop-at) accepted, anything else fails the test with the
# output shown.
run_train() {
  local name=$1 n=$2 st=0; shift 2
  timeout 300 "$MPIEXEC" -n "$n" "$TRAIN" $A --run-dir "$WORK/$name" "$@" \
    > "$WORK/$name.out" 2>&1 || st=$?
  [ $st = 0 ] || [ $st = 75 ] || { cat "$WORK/$name.out"; fail "run $name: exit $st"; }
}

# tiny8_configs: the tiny preset with 8 layers (enough for PP 4 x V 2) in
# $WORK/t8.json, and the same with tied embeddings in $WORK/t8tied.json.
tiny8_configs() {
  "$TRAIN" --model tiny --print-config > "$WORK/tiny.json" || fail "--print-config"
  "$PYTHON" - "$WORK" <<'PY' || fail "tiny8_configs"
import json, sys
w = sys.argv[1]
c = json.load(open(w + "/tiny.json"))
c["num_hidden_layers"] = 8
json.dump(c, open(w + "/t8.json", "w"))
c["tie_word_embeddings"] = True
json.dump(c, open(w + "/t8tied.json", "w"))
PY
}

# tiny_ckpts DIR ARG... : checkpoints of the tiny model written by
# tests/helpers/make_ckpt.py (h5py; its config in $WORK/tiny.json) into the
# checkpoints directory DIR; ARG... are make_ckpt.py's (e.g. --steps 10 20).
tiny_ckpts() {
  local dir=$1; shift
  "$PYTHON" -c "import h5py, numpy" || fail "python3-h5py missing (setup.sh installs it)"
  [ -f "$WORK/tiny.json" ] || "$TRAIN" --model tiny --print-config > "$WORK/tiny.json" || fail "--print-config"
  "$PYTHON" "$HPT_SRC/tests/helpers/make_ckpt.py" --config "$WORK/tiny.json" --dir "$dir" "$@" ||
    fail "make_ckpt.py $*"
}

# write_shard PATH MAGIC VERSION NTOK_HEADER TOKEN... : an llm.c-style shard
# with an arbitrary header (uint16 tokens unless MAGIC is 20240801).
write_shard() {
  "$PYTHON" - "$@" <<'PY'
import struct, sys
path, magic, version, ntok = sys.argv[1], *map(int, sys.argv[2:5])
toks = [int(t) for t in sys.argv[5:]]
fmt = "<%dI" % len(toks) if magic == 20240801 else "<%dH" % len(toks)
hdr = [0] * 256
hdr[0], hdr[1], hdr[2] = magic, version, ntok
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *hdr))
    f.write(struct.pack(fmt, *toks))
PY
}
