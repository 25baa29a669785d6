#!/usr/bin/env bash
# gpu-check.sh — the prepared GPU device check (issue 12; issue 16 extends it).
#
# Two halves, because the GPU machine has CUDA and PyTorch but no MPICH,
# parallel HDF5, OpenBLAS, json-c or SentencePiece, and no network:
#
#   bash bench/gpu-check.sh --pack [BUILD_DIR]     (here, on the build machine)
#       Downloads the Debian 12 packages of those libraries (apt-get download,
#       no install), unpacks them into a prefix, drops static libraries and
#       docs, and writes .gpudeps/deps.tar.xz (~36 MB); .gpudeps/corpus.tar.xz
#       (~1.7 MB: 2 M tokens of the prepared corpus, HPT_CORPUS or
#       tests/corpus, for the GPU tests: the device has no dict-gcide to
#       prepare it, so tests/data/prepare-corpus.sh skips there) and
#       .gpudeps/echarts/echarts.min.js (the live page's, from node_modules:
#       the tarball carries package.json only); then `make dist` in
#       BUILD_DIR (default: a fresh out-of-tree build of this checkout) and
#       copies the tarball to .gpudeps/hpt.tar.gz. .gpudeps/ is ignored by git
#       (add `/.gpudeps/` to .git/info/exclude); carry it to the device.
#
#   bash bench/gpu-check.sh                          (there, in one device call)
#       run(command="bash bench/gpu-check.sh", carry=[".gpudeps"], timeout_s=590)
#       1. unpacks the libraries into /tmp/deps (never /), makes an `mpicc`
#          wrapper for that prefix, builds hpt from the tarball with
#          --with-cuda=/usr/local/cuda --with-cuda-arch=sm_90 (-j16);
#       2. runs the GPU tests: tests/unit/test_backend_cuda (every op against the
#          CPU backend, its bf16 group included: bf16 products vs fp32 and vs
#          bf16-rounded operands, working copies, every op on bf16-stored
#          activations, tiny bf16 training loops)
#          and the GPU training tests (tests/gpu/gpu-*.sh; gpu-train-bf16.sh:
#          --precision bf16 vs the fp32 CPU run, 1 rank and DP 2 + ZeRO-1);
#       3. times hpt (--backend cuda) against PyTorch (bench/torch_train_gpu.py:
#          SDPA attention, fused AdamW, torch.compile) on `small` and on the
#          ~1B model bench/llama-1b.json at seq 2048, same batch and precision;
#          prints tokens/s, MFU (989 TFLOP/s dense bf16 / 494 tf32 / 67 fp32 H200
#          peaks, SXM datasheet) and peak device memory, and the ratios;
#          with bf16 (the default) also hpt's ~1B run in tf32, for the
#          bf16/tf32 speed-up and the memory the working copies add, and in
#          bf16 with HPT_CUDA_ATTENTION=flash (the fp32 attention kernels
#          instead of the cuBLAS chunked path), for that path's speed-up.
#
#   bash bench/gpu-check.sh --nccl                   (there: only the NCCL checks)
#       run(command="bash bench/gpu-check.sh --nccl", carry=[".gpudeps"], timeout_s=590)
#       builds as above, then the NCCL section only (issue 16; about 5 min):
#       nccl-vs-mpi   world size 1, every group of size 1: --comm nccl's log.tsv
#                     equals --comm mpi's bit for bit (tiny, 20 steps);
#       nccl-train    the single-GPU training run with --comm nccl (small,
#                     60 steps): the banner says comm nccl, the loss falls;
#       nccl-shared   2 ranks on the one GPU: --comm nccl is refused before NCCL
#                     is touched (exit 2, naming rank 1, its host and the GPU it
#                     shares with rank 0); --comm auto falls back to MPI with host
#                     staging and trains (the probe's duplicate-GPU check);
#       nccl-small-timed  `small` for 3 minutes (--max-runtime 180; 60 s when
#                     the NCCL checks run at the end of the whole check) with
#                     --comm nccl: median tokens/s of the progress lines.
#       Multi-GPU NCCL (TP/DP/PP over several GPUs, the overlap of the DP
#       buckets) cannot run on one GPU: NCCL refuses two ranks on one device.
#
#   bash bench/gpu-check.sh --rehearse               (here, after --pack; no GPU)
#       The device half up to the GPU tests, as it will run there: unpack
#       .gpudeps into /tmp/deps, build against that prefix (ECharts and the
#       corpus from .gpudeps), the GPU tests (which skip here), and a 2-rank
#       run through the prefix's mpiexec, with PKG_CONFIG=/bin/false. As
#       root, in a private mount namespace, every file this machine's
#       MPICH, HDF5, OpenBLAS, json-c, SentencePiece and libmicrohttpd
#       packages installed is whited out (an overlay), so a header or
#       library the prefix lacks fails here as there (not root: a warning,
#       and they stay visible). About 2 minutes; it found three faults that
#       would each have cost the one device call (docs/PERFORMANCE.md).
#
#   bash bench/gpu-check.sh --selftest BUILD_DIR   (here, no GPU; make check
#                                                   runs it: tests/gpu/gpu-check-selftest.sh)
#       The script's own logic that needs no GPU: the NCCL section's checks
#       (runs, log comparison, banner and loss checks, tokens/s parsing) on
#       --backend cpu with --comm mpi in place of nccl, tiny model, a
#       30-second timed run; and stage()'s time budget (a hung stage killed
#       with its children, the next one skipped). (--nccl-selftest: the same.)
#
#       The whole check runs: build, GPU tests, the ~1B and `small` timings,
#       the tf32 and flash comparisons, then the NCCL section (with its timed
#       run cut to 60 s), most important first. Every stage runs under
#       `timeout` with what is left of HPT_GPU_BUDGET (default 570 s, inside
#       the device call's 590): a hung stage is killed and reported, a stage
#       with under 20 s left is skipped with "SKIP NAME (time budget ...)".
#       Every stage logs to $OUT (the device tool returns that folder) or to
#       ./gpu-check-out; a failing stage is reported and the next one runs.
#       Exit 0 when every stage passed, 1 otherwise, 77 when no GPU is visible.
#
# Environment: HPT_GPU_STEPS (timed steps per run, default 20), HPT_GPU_SKIP
# (warm-up steps, default 5), HPT_GPU_PRECISION (default bf16; tf32 or fp32
# for the comparison in those), HPT_GPU_ARCH (default sm_90), HPT_GPU_BUDGET
# (seconds for the whole check, default 570), HPT_GPU_NCCL_SECONDS (the NCCL
# timed run; default 180 with --nccl, 60 otherwise).
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
deb_pkgs=(
  libmpich12 mpich libmpich-dev libhwloc15 libucx0 libnuma1 libibverbs1 librdmacm1 libnl-3-200
  libnl-route-3-200 libslurm38 libgfortran5 libquadmath0 libgomp1
  libhdf5-mpich-103-1 libhdf5-mpich-dev libsz2 libaec0
  libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libldap-2.5-0 libgssapi-krb5-2 libkrb5-3
  libk5crypto3 libkrb5support0 libkeyutils1 libbrotli1 libzstd1 libidn2-0 libunistring2 libsasl2-2
  libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libtasn1-6 libffi8 libssl3
  libopenblas0-pthread libopenblas-dev libopenblas-pthread-dev libopenblas0
  libjson-c5 libjson-c-dev libsentencepiece0 libsentencepiece-dev
  libxml2 libicu72 liblzma5 libudev1 libjansson4 libcom-err2
  zlib1g zlib1g-dev
)

# ------------------------------------------------------------------ --pack
if [ "${1:-}" = --pack ]; then
  set -e
  out=$here/.gpudeps
  mkdir -p "$out/debs"
  (cd "$out/debs" && apt-get download "${deb_pkgs[@]}")
  pre=$(mktemp -d)
  for f in "$out"/debs/*.deb; do dpkg -x "$f" "$pre"; done
  find "$pre" -name '*.a' -delete
  rm -rf "$pre"/usr/share/{doc,man,info,lintian,locale} "$pre"/usr/lib/x86_64-linux-gnu/fortran \
         "$pre"/usr/lib/x86_64-linux-gnu/libicu{test,tu,io}* \
         "$pre"/usr/lib/x86_64-linux-gnu/libhdf5_mpich*fortran* "$pre"/usr/lib/x86_64-linux-gnu/libhdf5_mpich*cpp*
  tar -C "$pre" -cJf "$out/deps.tar.xz" .
  rm -rf "$pre" "$out/debs"
  # the GPU tests' corpus: the device has no dict-gcide to prepare it from
  # (tests/data/prepare-corpus.sh skips there): the first 2 M training tokens of
  # the prepared corpus (the tests read ~10 K), its validation shard and
  # tokenizer, ~1.7 MB compressed
  corpus=${HPT_CORPUS:-$here/tests/corpus}
  [ -f "$corpus/train_000000.bin" ] && [ -f "$corpus/val_000000.bin" ] || {
    echo "gpu-check: --pack needs the prepared corpus: $corpus/train_000000.bin missing (set HPT_CORPUS=DIR; tests/data/prepare-corpus.sh makes one)" >&2; exit 2; }
  pre=$(mktemp -d)
  /usr/bin/python3 - "$corpus/train_000000.bin" "$pre/train_000000.bin" 2000000 <<'EOF'
import struct, sys
src, dst, keep = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(src, "rb") as f:
    head = bytearray(f.read(1024))
    magic, version, ntok = struct.unpack_from("<3i", head)
    assert (magic, version) == (20240520, 1), (src, magic, version)
    n = min(ntok, keep)
    struct.pack_into("<i", head, 8, n)
    body = f.read(2 * n)
with open(dst, "wb") as f:
    f.write(head + body)
EOF
  cp "$corpus/val_000000.bin" "$corpus/tokenizer.model" "$pre/"
  tar -C "$pre" -cJf "$out/corpus.tar.xz" .
  rm -rf "$pre"
  # the live page's ECharts: the dist tarball has package.json, not
  # node_modules, and the device has no npm registry (configure ECHARTS_DIR)
  mkdir -p "$out/echarts"
  for d in "${ECHARTS_DIR:-}" "$here/node_modules/echarts/dist" /usr/share/nodejs/echarts/dist; do
    [ -n "$d" ] && [ -f "$d/echarts.min.js" ] && { cp "$d/echarts.min.js" "$out/echarts/"; break; }
  done
  [ -f "$out/echarts/echarts.min.js" ] ||
    { echo "gpu-check: --pack needs echarts.min.js: run 'npm ci' here (setup.sh does)" >&2; exit 2; }
  build=${2:-}
  if [ -z "$build" ]; then
    build=$(mktemp -d)
    (cd "$here" && autoreconf -fi >/dev/null 2>&1)
    (cd "$build" && "$here/configure" >/dev/null)
  fi
  (cd "$build" && make dist-gzip >/dev/null)
  cp "$build"/hpt-*.tar.gz "$out/hpt.tar.gz"
  ls -la "$out"
  echo "gpu-check: packed; on the device: bash bench/gpu-check.sh (carry .gpudeps)"
  exit 0
fi

# ---------------------------------------------------- NCCL section (issue 16)
# Functions of the NCCL checks; they read TRAIN, MPIEXEC_BIN, data, tmp, prec,
# BE (cuda on the device, cpu in the self-test), NCCL (nccl, or mpi in the
# self-test), MODEL_TRAIN, MODEL3 and RUNTIME3 (the timed run's model, seconds).
nccl_common() { echo "--data $data --eval-interval 0 --eval-batches 1 --backend $BE"; }
learnable_data() {  # DIR: llm.c-format shards whose next token follows from the last one
  "${PY:-python3}" - "$1" <<'EOF'
import sys, numpy as np
h = np.zeros(256, dtype='<i4'); h[0], h[1] = 20240520, 1
t = ((np.arange(2_000_000) * 7) % 1009).astype('<u2'); h[2] = t.size
for name in ("train_000000.bin", "val_000000.bin"):
    with open(f"{sys.argv[1]}/{name}", "wb") as f: h.tofile(f); t.tofile(f)
EOF
}
nccl_vs_mpi() {  # world 1, every group of size 1: NCCL == MPI, bit for bit
  local a
  a="--model tiny --steps 20 --seq-len 64 --batch 4 --tp 1 --pp 1 --dp 1 $(nccl_common)"
  rm -rf "$tmp/run-nccl" "$tmp/run-mpi"
  $TRAIN $a --comm "$NCCL" --run-dir "$tmp/run-nccl" >"$tmp/nccl.out" 2>&1 || { cat "$tmp/nccl.out"; return 1; }
  grep -Eq "backend $BE( \([^)]*\))?, comm $NCCL\$" "$tmp/nccl.out" || { echo "banner does not say comm $NCCL:"; head -3 "$tmp/nccl.out"; return 1; }
  $TRAIN $a --comm mpi --run-dir "$tmp/run-mpi" >"$tmp/mpi.out" 2>&1 || { cat "$tmp/mpi.out"; return 1; }
  [ "$(wc -l <"$tmp/run-nccl/log.tsv")" -eq 21 ] || { echo "log.tsv: want 20 rows"; return 1; }
  cmp "$tmp/run-nccl/log.tsv" "$tmp/run-mpi/log.tsv" || { diff "$tmp/run-nccl/log.tsv" "$tmp/run-mpi/log.tsv" | head; return 1; }
  echo "comm $NCCL == comm mpi: log.tsv identical (20 steps, loss/lr/grad_norm)"
}
loss_falls() {  # loss_falls LOG.TSV: the last 10 steps' mean loss 0.5 below the first 10 steps'
  awk -F'\t' 'NR > 1 && $2 != "" {l[++n] = $2} END {
    if (n < 20) {print "only " n " steps logged"; exit 1}
    for (i = 1; i <= 10; i++) {a += l[i]; b += l[n - 10 + i]}
    printf "mean loss first 10 steps %.4f, last 10 %.4f\n", a / 10, b / 10; exit !(b < a - 0.5)}' "$1"
}
nccl_train() {  # the single-GPU training run with --comm nccl, on learnable data
  rm -rf "$tmp/run-train" "$tmp/ldata" && mkdir -p "$tmp/ldata" && learnable_data "$tmp/ldata" || return 1
  $TRAIN --model "${MODEL_TRAIN:-small}" --steps 60 --seq-len 256 --batch 8 --lr 1e-3 --warmup 5 \
    $(nccl_common) --data "$tmp/ldata" --comm "$NCCL" --precision "$prec" --run-dir "$tmp/run-train" >"$tmp/train.out" 2>&1 ||
    { tail -20 "$tmp/train.out"; return 1; }
  grep -q "comm $NCCL\$" "$tmp/train.out" || { echo "banner does not say comm $NCCL"; return 1; }
  loss_falls "$tmp/run-train/log.tsv"
}
nccl_shared() {  # 2 ranks on one GPU: nccl refused with the ranks named; auto falls back to MPI
  local a st=0
  a="--model tiny --steps 4 --seq-len 64 --batch 2 --dp 2 $(nccl_common)"
  $MPIEXEC_BIN -n 2 $TRAIN $a --comm nccl >"$tmp/shared-nccl.out" 2>&1 || st=$?
  cat "$tmp/shared-nccl.out"
  [ "$st" = 2 ] || { echo "--comm nccl on a shared GPU: exit $st, want 2"; return 1; }
  grep -Eq "NCCL needs a distinct GPU per rank, but rank 1 on [^ ]+ shares GPU [0-9a-fA-F:.]+ with rank 0" \
    "$tmp/shared-nccl.out" || { echo "message does not name the ranks, host and GPU"; return 1; }
  $MPIEXEC_BIN -n 2 $TRAIN $a --comm auto >"$tmp/shared-auto.out" 2>&1 || { cat "$tmp/shared-auto.out"; return 1; }
  grep -q "comm mpi+host-staging\$" "$tmp/shared-auto.out" ||
    { echo "--comm auto did not fall back to MPI:"; head -3 "$tmp/shared-auto.out"; return 1; }
  echo "shared GPU: --comm nccl refused (exit 2, ranks named); --comm auto trained on MPI + host staging"
}
median_tok_s() {  # median_tok_s FILE: the median tok/s of the progress lines after the first 3 (warm-up)
  grep -o '| [0-9]* tok/s |' "$1" | awk 'NR > 3 {print $2}' | sort -g |
    awk '{a[NR] = $1} END {if (!NR) exit 1; print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}'
}
nccl_small_timed() {  # MODEL3 for RUNTIME3 seconds with --comm NCCL: tokens/s
  local tok st=0
  rm -rf "$tmp/run-timed"
  $TRAIN --model "$MODEL3" --steps 1000000 --seq-len "${SEQ3:-1024}" --batch "${BATCH3:-16}" --save-every 0 \
    --max-runtime "$RUNTIME3" $(nccl_common) --comm "$NCCL" --precision "$prec" \
    --run-dir "$tmp/run-timed" >"$tmp/timed.out" 2>&1 || st=$?
  [ "$st" = 0 ] || [ "$st" = 75 ] || { echo "exit $st"; tail -20 "$tmp/timed.out"; return 1; }
  tok=$(median_tok_s "$tmp/timed.out") || { echo "no progress lines with tok/s"; tail -5 "$tmp/timed.out"; return 1; }
  echo "$MODEL3 --comm $NCCL, $RUNTIME3 s, B=${BATCH3:-16} T=${SEQ3:-1024} $prec: median $tok tokens/s over $(grep -c ' tok/s ' "$tmp/timed.out") steps"
}

# ------------------------------------------------------------ stages
# The device call is killed at its timeout (590 s) and the machine's time is
# scarce, so every stage runs under `timeout` with what is left of
# HPT_GPU_BUDGET (seconds from the script's start, default 570): a stage that
# hangs is killed with its process group and reported, the next ones still
# run, and a stage with less than 20 s left is skipped and says so. The
# stages run in order of importance: build, the GPU tests, the ~1B timing
# against PyTorch (the issue's targets), `small`, the tf32 and flash
# comparisons, then the NCCL checks. Reads out, summary, failed, budget.
stage() {  # stage NAME CMD...: run, log to $out/NAME.log, record pass/fail
  local name=$1; shift
  local t0=$SECONDS left=$((budget - SECONDS - 5))
  if [ "$left" -lt 20 ]; then
    say "SKIP $name (time budget: ${SECONDS} of $budget s used)"; failed=1; return 124
  fi
  # functions of this script and exported variables reach the command
  if timeout -k 5 "$left" bash -c "$(declare -f); \"\$@\"" "$name" "$@" >"$out/$name.log" 2>&1
  then say "PASS $name ($((SECONDS - t0)) s)"
  else local rc=$?; say "FAIL $name (exit $rc$([ $rc = 124 ] && echo ': killed at the time budget'), $((SECONDS - t0)) s; last lines:)"
       tail -n 15 "$out/$name.log" | sed 's/^/    /' | tee -a "$summary"; failed=1; return $rc; fi
}
say() { echo "$*" | tee -a "$summary"; }

if [ "${1:-}" = --selftest ] || [ "${1:-}" = --nccl-selftest ]; then
  bld=${2:?usage: gpu-check.sh --selftest BUILD_DIR}
  TRAIN=$bld/src/hpt-train BE=cpu NCCL=mpi prec=fp32 MODEL_TRAIN=tiny MODEL3=tiny RUNTIME3=30 PY=/usr/bin/python3
  SEQ3=64 BATCH3=4
  tmp=$(mktemp -d); data=$tmp/data; mkdir -p "$data"
  /usr/bin/python3 - "$data" <<'EOF'
import sys, numpy as np
h = np.zeros(256, dtype='<i4'); h[0], h[1] = 20240520, 1
t = np.random.default_rng(0).integers(0, 8192, size=400_000).astype('<u2'); h[2] = t.size
for name in ("train_000000.bin", "val_000000.bin"):
    with open(f"{sys.argv[1]}/{name}", "wb") as f: h.tofile(f); t.tofile(f)
EOF
  rc=0
  for f in nccl_vs_mpi nccl_train nccl_small_timed; do
    if o=$($f 2>&1); then echo "PASS $f: $(echo "$o" | tail -1)"; else echo "FAIL $f:"; echo "$o" | tail -15; rc=1; fi
  done
  # the checks must be able to fail: another seed's run differs from the MPI run
  if $TRAIN --model tiny --steps 20 --seq-len 64 --batch 4 $(nccl_common) --comm mpi --seed 7 \
       --run-dir "$tmp/run-seed" >/dev/null 2>&1 && ! cmp -s "$tmp/run-seed/log.tsv" "$tmp/run-mpi/log.tsv"; then
    echo "PASS another seed's log.tsv differs (the comparison can fail)"
  else echo "FAIL the log comparison cannot tell runs apart"; rc=1; fi
  # stage(): a passing stage, one killed at the time budget with its
  # children, then one skipped for want of time; the summary says each
  out=$tmp/stages summary=$tmp/stages/summary.txt failed=0 budget=$((SECONDS + 30))
  mkdir -p "$out" && : >"$summary"
  export BUDGET_PROBE=seen  # exported variables and functions reach the stage
  probe() { echo "probe $BUDGET_PROBE"; }
  stage passing probe >/dev/null
  stage hanging bash -c 'sleep 2931 & sleep 2931' >/dev/null
  stage skipped true >/dev/null
  if grep -q "^PASS passing" "$summary" && grep -q "^probe seen" "$out/passing.log" &&
     grep -q "^FAIL hanging (exit 124: killed at the time budget" "$summary" &&
     grep -q "^SKIP skipped (time budget" "$summary" && [ "$failed" = 1 ] &&
     ! pgrep -f "sleep 2931" >/dev/null; then
    echo "PASS stage(): passes, kills a hung stage at the budget (children too), then skips"
  else echo "FAIL stage():"; cat "$summary"; pgrep -af "sleep 2931"; rc=1; fi
  printf 'step 1 | 10 tok/s |\n' >"$tmp/few.out"
  if ! median_tok_s "$tmp/few.out" >/dev/null; then echo "PASS median_tok_s refuses a log without steady steps"
  else echo "FAIL median_tok_s"; rc=1; fi
  rm -rf "$tmp"
  exit $rc
fi

# ------------------------------------------------------------------ device
NCCL_ONLY=0 REHEARSE=0
[ "${1:-}" = --nccl ] && NCCL_ONLY=1
[ "${1:-}" = --rehearse ] && REHEARSE=1
# The rehearsal hides this machine's copies of what the GPU machine lacks
# (MPICH, HDF5, OpenBLAS, json-c, SentencePiece, libmicrohttpd: every file
# their Debian packages installed under /usr and /lib is made absent, in a
# private mount namespace that ends with the script), so a header
# or library the prefix lacks fails here as it would there.
hide_pkgs="libmpich12 mpich libmpich-dev libhwloc15 libhwloc-dev hwloc-nox libucx0 libucx-dev
  libhdf5-mpich-103-1 libhdf5-mpich-dev libhdf5-mpich-hl-100 libhdf5-mpich-cpp-103-1 libhdf5-dev
  libhdf5-103-1 libhdf5-hl-100 hdf5-tools libsz2 libaec0 libaec-dev libopenblas0-pthread
  libopenblas-dev libopenblas-pthread-dev libopenblas0 libjson-c5 libjson-c-dev libsentencepiece0
  libsentencepiece-dev sentencepiece libmicrohttpd12 libmicrohttpd-dev"
if [ "$REHEARSE" = 1 ] && [ -z "${HPT_REHEARSE_NS:-}" ]; then
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
    HPT_REHEARSE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
  fi
  echo "gpu-check: warning: cannot make a private mount namespace (needs root and unshare):" \
       "this machine's MPICH, HDF5, OpenBLAS, json-c, SentencePiece and libmicrohttpd stay" \
       "visible" >&2
fi
if [ "$REHEARSE" = 1 ] && [ "${HPT_REHEARSE_NS:-}" = 1 ]; then
  # only inside the namespace unshare made: never over the machine's own /usr
  [ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] ||
    { echo "gpu-check: HPT_REHEARSE_NS=1 outside a private mount namespace: refusing to hide" \
           "this machine's libraries (unset it)" >&2; exit 2; }
  # the libraries must be installed here to be hidden (a renamed package,
  # e.g. Debian 13's t64 names, would be neither hidden nor checked)
  missing=$(for p in libmpich-dev libhdf5-mpich-dev libopenblas-dev libjson-c-dev libsentencepiece-dev; do
              dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
  [ -z "$missing" ] || { echo "gpu-check: rehearsal: not installed here, so not hidden:" $missing >&2; exit 2; }
  # absent, not empty (an empty libfoo.so is an empty linker script to ld,
  # found before the prefix's: the system directories come before
  # LIBRARY_PATH's): /usr/include, /usr/lib and /usr/bin each get an
  # overlay whose upper layer (tmpfs) has a whiteout for each such file
  # (one overlay per tree: overlays do not stack on an overlay's subtree)
  hide=$(mktemp -d) && mount -t tmpfs hpt-hide "$hide" || exit 1
  trap 'umount -l "$hide" 2>/dev/null; rmdir "$hide" 2>/dev/null' EXIT
  hidden=0
  for f in $(dpkg -L $hide_pkgs 2>/dev/null | sed -E 's,^/(lib|lib64|bin|sbin)/,/usr/\1/,' |
             grep -E '^/usr/(include|lib|lib64|bin|sbin)/' | sort -u); do
    [ ! -d "$f" ] && { [ -e "$f" ] || [ -L "$f" ]; } || continue
    r=${f#/usr/}; r=${r%%/*}; rel=${f#/usr/$r/}
    mkdir -p "$hide/$r/up/$(dirname "$rel")" "$hide/$r/work" &&
      mknod "$hide/$r/up/$rel" c 0 0 && hidden=$((hidden + 1))
  done
  for r in $(ls "$hide"); do
    mount -t overlay hpt-hide -o "lowerdir=/usr/$r,upperdir=$hide/$r/up,workdir=$hide/$r/work" "/usr/$r" ||
      exit 1
  done
  seen=$(for f in $(dpkg -L $hide_pkgs 2>/dev/null | grep -E '^/usr/(include|lib|bin)/'); do
           [ -d "$f" ] || [ ! -e "$f" ] || echo "$f"; done)
  [ -z "$seen" ] || { echo "gpu-check: rehearsal: still visible after hiding: $seen" >&2; exit 1; }
  # and as the compiler sees it: none of them found any more
  probe=$(mktemp -d)
  for h in hdf5.h cblas.h json-c/json.h sentencepiece_processor.h mpi.h microhttpd.h; do
    printf '#include <%s>\n' "$h" >"$probe/p.c"
    ! gcc -E "$probe/p.c" -o /dev/null 2>/dev/null ||
      { echo "gpu-check: rehearsal: <$h> still found after hiding" >&2; exit 1; }
  done
  for l in mpich hdf5_mpich openblas json-c sentencepiece; do
    printf 'int main(void){return 0;}\n' >"$probe/p.c"
    ! gcc "$probe/p.c" -o "$probe/p" -l$l 2>/dev/null ||
      { echo "gpu-check: rehearsal: -l$l still links after hiding" >&2; exit 1; }
  done
  ! command -v mpiexec >/dev/null || { echo "gpu-check: rehearsal: mpiexec still on PATH: $(command -v mpiexec)" >&2; exit 1; }
  rm -rf "$probe"
  [ "$hidden" -gt 0 ] || { echo "gpu-check: rehearsal: nothing hidden" >&2; exit 1; }
  echo "gpu-check: rehearsal: $hidden files of this machine's $(echo $hide_pkgs | wc -w) packages hidden (what the GPU machine lacks)"
fi
set -a  # every variable from here on reaches the stages' commands (bash -c)
export here
out=${OUT:-$PWD/gpu-check-out}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
failed=0
budget=${HPT_GPU_BUDGET:-570}

if [ "$REHEARSE" = 1 ]; then
  echo "rehearsal on a machine without a GPU" >"$out/gpu.txt"
elif ! nvidia-smi -L >"$out/gpu.txt" 2>&1; then
  say "gpu-check: no GPU visible (nvidia-smi -L failed): $(head -1 "$out/gpu.txt")"; exit 77
fi
say "gpu-check: $(head -1 "$out/gpu.txt"); $(nvcc --version | tail -1)"
for f in deps.tar.xz hpt.tar.gz corpus.tar.xz echarts/echarts.min.js; do
  [ -f "$here/.gpudeps/$f" ] ||
    { say "gpu-check: .gpudeps/$f missing: run 'bash bench/gpu-check.sh --pack' here and carry .gpudeps"; exit 2; }
done

P=/tmp/deps
L=$P/usr/lib/x86_64-linux-gnu
rm -rf $P && mkdir -p $P/bin && tar -C $P -xJf "$here/.gpudeps/deps.tar.xz"
# a rehearsal: pkg-config would still list the hidden packages' .pc files
# (their /usr/share/pkgconfig copies, and any other package's)
[ "$REHEARSE" = 1 ] && export PKG_CONFIG=/bin/false
cat >$P/bin/mpicc <<EOF
#!/bin/sh
exec gcc -I$P/usr/include/x86_64-linux-gnu/mpich "\$@" -L$L -Wl,-rpath,$L -lmpich
EOF
chmod +x $P/bin/mpicc
# (hydra looks for hydra_pmi_proxy beside the mpiexec it was started as: a
# link in $P/bin would send it to $P/bin/hydra_pmi_proxy, which is not there)
ln -sf $P/usr/bin/mpiexec.hydra $P/usr/bin/mpiexec
export PATH=$P/bin:$P/usr/bin:/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=$L:$L/openblas-pthread:$L/hdf5/mpich:$P/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CPATH=$P/usr/include:$P/usr/include/x86_64-linux-gnu:$P/usr/include/x86_64-linux-gnu/openblas-pthread
export LIBRARY_PATH=$L:$L/openblas-pthread
export HYDRA_LAUNCHER=fork

# the GPU tests' corpus, packed from the prepared one (no dict-gcide here)
export HPT_CORPUS=/tmp/hpt-corpus
rm -rf $HPT_CORPUS && mkdir -p $HPT_CORPUS && tar -C $HPT_CORPUS -xJf "$here/.gpudeps/corpus.tar.xz"

src=/tmp/hpt-src; bld=/tmp/hpt-build
rm -rf $src $bld && mkdir -p $src $bld
tar -C $src --strip-components=1 -xzf "$here/.gpudeps/hpt.tar.gz"
cfg() {
  cd $bld && $src/configure MPICC=$P/bin/mpicc \
    HDF5_CFLAGS="-I$P/usr/include/hdf5/mpich" HDF5_LIBS="-L$L/hdf5/mpich -Wl,-rpath,$L/hdf5/mpich -lhdf5" \
    JSONC_CFLAGS="-I$P/usr/include/json-c" JSONC_LIBS="-ljson-c" \
    BLAS_LIBS="-L$L/openblas-pthread -Wl,-rpath,$L/openblas-pthread -lopenblas" \
    PYTHON=python3 ECHARTS_DIR="$here/.gpudeps/echarts" --with-cuda=/usr/local/cuda --with-cuda-arch="${HPT_GPU_ARCH:-sm_90}"
}
stage configure cfg || { say "gpu-check: configure failed, see configure.log"; exit 1; }
# (the test programs too, in parallel: `make check` alone would build them
# one at a time inside the GPU tests' stage)
build() { make -C $bld -j16 all && make -C $bld -j16 check TESTS=; }
stage build build || exit 1
grep -q "define HAVE_CUDA 1" $bld/hpt_config.h || { say "FAIL configure did not enable CUDA"; exit 1; }

# ---- GPU tests (each exits 77 without a GPU; here they must pass)
# (gpu-check-selftest.sh is this script's GPU-free self-test: not here)
gpu_tests="tests/unit/test_backend_cuda $(cd $src && ls tests/gpu/gpu-*.sh 2>/dev/null | grep -v gpu-check-selftest | tr '\n' ' ')"
[ "$NCCL_ONLY" = 1 ] || stage gpu-tests make -C $bld check TESTS="$gpu_tests"
for t in $gpu_tests; do
  [ -f "$bld/${t%.sh}.log" ] && cp "$bld/${t%.sh}.log" "$out/$(basename "${t%.sh}").log"
done
if [ "$REHEARSE" = 1 ]; then
  # what the device call needs besides the GPU: the tests ran (skipping at
  # "no CUDA device visible"), and MPICH's mpiexec from the prefix starts
  # two ranks (hydra_pmi_proxy found) on the carried corpus
  stage mpiexec-2-ranks $P/usr/bin/mpiexec -n 2 $bld/src/hpt-train --model tiny --data $HPT_CORPUS \
    --steps 2 --dp 2 --seq-len 32 --batch 2 --eval-batches 1 --run-dir /tmp/run-rehearse
  say "gpu-check: rehearsal done$([ "$failed" = 0 ] || echo ', some stages FAILED')"
  exit $failed
fi

# ---- speed: hpt (cuda) vs PyTorch, same model, shapes, precision
prec=${HPT_GPU_PRECISION:-bf16}
steps=${HPT_GPU_STEPS:-20}; skip=${HPT_GPU_SKIP:-5}
data=/tmp/gpu-data; mkdir -p $data
python3 - $data <<'EOF'
import sys, numpy as np
h = np.zeros(256, dtype='<i4'); h[0], h[1] = 20240520, 1
t = np.random.default_rng(0).integers(0, 8192, size=20_000_000).astype('<u2'); h[2] = t.size
for name in ("train_000000.bin", "val_000000.bin"):
    with open(f"{sys.argv[1]}/{name}", "wb") as f: h.tofile(f); t.tofile(f)
EOF
case $prec in bf16) peak=989e12 ;; tf32) peak=494e12 ;; *) peak=67e12 ;; esac
bench_one() {  # bench_one NAME MODEL BATCH SEQ
  local name=$1 model=$2 B=$3 T=$4
  local cfgjson=$out/$name-config.json
  $bld/src/hpt-train --model "$model" --print-config >"$cfgjson" 2>/dev/null || return 1
  stage "hpt-$name" $bld/src/hpt-train --backend cuda --precision "$prec" --model "$model" \
    --data $data --batch $B --seq-len $T --steps $((steps + skip)) --warmup 2 --eval-interval 0 \
    --eval-batches 1 --peak-flops $peak --run-dir /tmp/run-$name
  local ms
  ms=$(grep -o '[0-9.]* ms/step' "$out/hpt-$name.log" | tail -n $steps | awk '{print $1}' | sort -g |
       awk '{a[NR]=$1} END {if (NR) print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  local hmem
  # (hpt-train's own line; the device image may have no h5py)
  hmem=$(sed -n 's/^peak device memory: .* (\([0-9]*\) bytes;.*/\1/p' "$out/hpt-$name.log" | tail -1)
  hmem=${hmem:-n/a}
  stage "torch-$name" python3 "$src/bench/torch_train_gpu.py" "$cfgjson" --batch $B --seq-len $T \
    --precision "$prec" --compile --warmup-steps $skip --steps $steps
  local tms tmem fpt
  tms=$(awk '/^torch_ms_per_step_median/ {print $2}' "$out/torch-$name.log")
  tmem=$(awk '/^torch_peak_mem_bytes/ {print $2}' "$out/torch-$name.log")
  fpt=$(awk '/^torch_flops_per_token/ {print $2}' "$out/torch-$name.log")
  if [ -n "$ms" ] && [ -n "$tms" ]; then
    python3 - "$name" "$prec" "$B" "$T" "$ms" "$tms" "$fpt" "$peak" "$hmem" "$tmem" <<'EOF' | tee -a "$summary"
import sys
name, prec, B, T, ms, tms, fpt, peak, hmem, tmem = sys.argv[1:]
tok = int(B) * int(T); fpt = float(fpt); peak = float(peak)
h, t = tok / (float(ms) / 1e3), tok / (float(tms) / 1e3)
print(f"{name} {prec} B={B} T={T}: hpt {h:,.0f} tok/s (MFU {h * fpt / peak:.1%}, peak mem {hmem}) | "
      f"PyTorch+compile {t:,.0f} tok/s (MFU {t * fpt / peak:.1%}, peak mem {tmem}) | ratio hpt/PyTorch {h / t:.2f}")
EOF
  fi
}
if [ "$NCCL_ONLY" = 0 ]; then
# the ~1B run first: it carries the issue's targets
bench_one 1b "$src/bench/llama-1b.json" 4 2048
bench_one small small 16 1024
# bf16 against tf32 on hpt alone (same ~1B run): speed-up and memory
tf32_vs_bf16() {
  $bld/src/hpt-train --backend cuda --precision tf32 --model "$src/bench/llama-1b.json" \
    --data $data --batch 4 --seq-len 2048 --steps $((steps + skip)) --warmup 2 --eval-interval 0 \
    --eval-batches 1 --peak-flops 494e12 --run-dir /tmp/run-1b-tf32
}
if [ "$prec" = bf16 ] && stage hpt-1b-tf32 tf32_vs_bf16; then
  python3 - "$out/hpt-1b.log" "$out/hpt-1b-tf32.log" $steps <<'EOF' | tee -a "$summary"
import re, statistics, sys
def med(path, n):
    ms = [float(m) for m in re.findall(r"([0-9.]+) ms/step", open(path).read())][-int(n):]
    return statistics.median(ms) if ms else float("nan")
b, t = med(sys.argv[1], sys.argv[3]), med(sys.argv[2], sys.argv[3])
print(f"1b hpt bf16 {b:.1f} ms/step vs tf32 {t:.1f} ms/step: bf16 speed-up {t / b:.2f}x")
EOF
fi
# bf16 attention: the cuBLAS chunked path (default) against the fp32 flash
# kernels (HPT_CUDA_ATTENTION=flash), same ~1B run
att_flash() {
  HPT_CUDA_ATTENTION=flash $bld/src/hpt-train --backend cuda --precision bf16 \
    --model "$src/bench/llama-1b.json" --data $data --batch 4 --seq-len 2048 \
    --steps $((steps + skip)) --warmup 2 --eval-interval 0 --eval-batches 1 --peak-flops 989e12 \
    --run-dir /tmp/run-1b-flash
}
if [ "$prec" = bf16 ] && stage hpt-1b-flash-attention att_flash; then
  python3 - "$out/hpt-1b.log" "$out/hpt-1b-flash-attention.log" $steps <<'EOF' | tee -a "$summary"
import re, statistics, sys
def med(path, n):
    ms = [float(m) for m in re.findall(r"([0-9.]+) ms/step", open(path).read())][-int(n):]
    return statistics.median(ms) if ms else float("nan")
b, f = med(sys.argv[1], sys.argv[3]), med(sys.argv[2], sys.argv[3])
print(f"1b hpt bf16 attention via cuBLAS {b:.1f} ms/step vs fp32 flash kernels {f:.1f} ms/step: "
      f"speed-up {f / b:.2f}x")
EOF
fi
fi
# ---- NCCL (issue 16): the functions of the "NCCL section" above
TRAIN=$bld/src/hpt-train BE=cuda NCCL=nccl MODEL3=small RUNTIME3=${HPT_GPU_NCCL_SECONDS:-$([ "$NCCL_ONLY" = 1 ] && echo 180 || echo 60)}
MPIEXEC_BIN=$P/usr/bin/mpiexec tmp=/tmp/nccl-check; mkdir -p $tmp
grep -q "define HAVE_NCCL 1" $bld/hpt_config.h && say "NCCL: found by configure" ||
  say "FAIL configure did not find NCCL (the NCCL stages will fail)"
stage nccl-vs-mpi nccl_vs_mpi
stage nccl-train nccl_train
stage nccl-shared nccl_shared
stage nccl-small-timed nccl_small_timed && grep ' tokens/s' "$out/nccl-small-timed.log" | tee -a "$summary"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >>"$summary" 2>&1
say "gpu-check: done, $([ $failed = 0 ] && echo 'all stages passed' || echo 'some stages FAILED')"
exit $failed
