#!/bin/sh
# hpt-data reuses an existing SentencePiece model (--tokenizer): the first
# 3000 lines of the corpus encode to exactly the first tokens of the full
# corpus's train shard; a second run with the same inputs is skipped as up
# to date.
. "$HPT_SRC/tests/helpers/lib.sh"
need_corpus
head -n 3000 "$CORPUS/corpus.txt" > "$WORK/part.txt"
"$DATA_TOOL" --input "$WORK/part.txt" --tokenizer "$CORPUS/tokenizer.model" --out "$WORK/d" \
  > "$WORK/out1" 2>&1 || { cat "$WORK/out1"; fail "hpt-data with --tokenizer"; }
"$PYTHON" - "$WORK/d/train_000000.bin" "$CORPUS/train_000000.bin" <<'PY' || fail "tokens differ from the full corpus's"
import struct, sys
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<3i", b[:12])[2]
    return b[1024:1024 + 2 * n]
part, full = read(sys.argv[1]), read(sys.argv[2])
assert len(part) > 10000, len(part)
assert full.startswith(part), "prefix mismatch"
print("reused tokenizer: %d tokens match" % (len(part) // 2))
PY
"$DATA_TOOL" --input "$WORK/part.txt" --tokenizer "$CORPUS/tokenizer.model" --out "$WORK/d" \
  > "$WORK/out2" 2>&1 || { cat "$WORK/out2"; fail "second hpt-data run"; }
cat "$WORK/out2"
grep -qi "up to date" "$WORK/out2" || fail "second run was not skipped as up to date"
pass "tokenizer reused; repeated preparation skipped"
