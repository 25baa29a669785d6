#!/bin/sh
# Prepare the real corpus once for every corpus test: Debian's dict-gcide
# text → SentencePiece BPE (8192) → llm.c shards in $HPT_BUILD/tests/corpus.
. "$HPT_SRC/tests/helpers/lib.sh"
GCIDE=/usr/share/dictd/gcide.dict.dz
# A machine without dict-gcide given a prepared corpus (the GPU machine:
# bench/gpu-check.sh carries one) uses it; everywhere else (CI installs
# dict-gcide) the corpus is prepared and checked here.
if [ ! -f "$GCIDE" ] && [ -n "${HPT_CORPUS:-}" ] && [ -f "$HPT_CORPUS/train_000000.bin" ]; then
  echo "SKIP: $GCIDE missing; the tests use the corpus given in HPT_CORPUS=$HPT_CORPUS"; exit 77
fi
[ -f "$GCIDE" ] || fail "$GCIDE missing: install the Debian package dict-gcide (setup.sh does)"
"$DATA_TOOL" --input "$GCIDE" --out "$CORPUS" || fail "hpt-data failed"
for f in tokenizer.model train_000000.bin val_000000.bin prep.json; do
  [ -s "$CORPUS/$f" ] || fail "$CORPUS/$f missing"
done
"$PYTHON" - "$CORPUS" <<'PY' || fail "shard check failed"
import os, struct, sys
d = sys.argv[1]
total = 0
for name in ("train_000000.bin", "val_000000.bin"):
    p = os.path.join(d, name)
    with open(p, "rb") as f:
        magic, version, ntok = struct.unpack("<3i", f.read(12))
    assert (magic, version) == (20240520, 1), (p, magic, version)
    assert os.path.getsize(p) == 1024 + 2 * ntok, p
    total += ntok
print("corpus tokens:", total)
assert 8_000_000 < total < 14_000_000, total
PY
pass "corpus prepared in $CORPUS"
