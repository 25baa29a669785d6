#!/bin/sh
# Bad input: hpt-live refuses, before serving, an HDF5 file that is not an
# hpt metrics file and a file that is not HDF5 at all (exit 3, by name). A
# path that does not exist yet is not an error: it is waited for (tests/live/live.sh).
# /dev/null and a fifo are not regular files: refused by name.
. "$HPT_SRC/tests/helpers/lib.sh"
LIVE="$HPT_BUILD/src/hpt-live"
[ -x "$LIVE" ] || { echo "SKIP: hpt-live not built (no libmicrohttpd)"; exit 77; }
"$PYTHON" - "$WORK/other.h5" "$WORK/fmt.h5" <<'PY' || fail "h5py"
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f["steps/step"] = [1, 2]
with h5py.File(sys.argv[2], "w") as f:
    f.attrs["format"] = "hpt-checkpoint"
PY
echo "step,loss" > "$WORK/log.h5"
mkdir -p "$WORK/rundir" && cp "$WORK/log.h5" "$WORK/rundir/metrics.h5"
expect_error 3 "other.h5: not an hpt metrics file \(root attribute format = missing" \
  timeout 60 "$LIVE" --port 0 "$WORK/other.h5"
expect_error 3 "fmt.h5: not an hpt metrics file \(root attribute format = \"hpt-checkpoint\"" \
  timeout 60 "$LIVE" --port 0 "$WORK/fmt.h5"
expect_error 3 "log.h5: not an HDF5 file \(no HDF5 signature\)" timeout 60 "$LIVE" --port 0 "$WORK/log.h5"
expect_error 3 "rundir/metrics.h5: not an HDF5 file" timeout 60 "$LIVE" --port 0 "$WORK/rundir"
expect_error 3 "/dev/null: not a regular file \(a character device\)" timeout 60 "$LIVE" --port 0 /dev/null
mkfifo "$WORK/fifo.h5"
expect_error 3 "fifo.h5: not a regular file \(a fifo\)" timeout 60 "$LIVE" --port 0 "$WORK/fifo.h5"
pass "hpt-live refuses files that are not hpt metrics files"
