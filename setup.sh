#!/usr/bin/env bash
# setup.sh — install the Debian 12 packages that hpt's build, tests and demo need.
# Idempotent: installs only what is missing. Run as root (or with sudo available).
set -euo pipefail

PKGS=(
  # build
  build-essential autoconf automake libtool pkg-config
  # MPI, parallel HDF5 (MPICH flavour), BLAS, JSON, SentencePiece
  mpich libmpich-dev libhdf5-mpich-dev hdf5-tools
  libopenblas-dev libopenblas0-pthread
  libjson-c-dev
  # hpt-live, the live view (optional: without it hpt-live is not built)
  libmicrohttpd-dev
  libsentencepiece-dev sentencepiece
  # the real corpus and the reference / analysis stack
  dict-gcide
  python3 python3-torch python3-numpy python3-h5py python3-matplotlib
  # bench/long-context.sh: peak RSS of each run (/usr/bin/time), its memory guard (ps)
  time procps
  # a local Slurm cluster for the job suite (slurm/cluster.sh; PMI2 for MPICH)
  slurmctld slurmd slurm-client munge libpmi2-0-dev
  # the live page (share/live): node for `npm ci` below, chromium for its browser tests
  nodejs chromium
  # hpt-live's GET /metrics scraped by a real Prometheus (tests/live/live-prometheus.sh)
  prometheus
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ECharts (installed with the programs) and playwright-core (browser tests,
# driving Debian's chromium: never a downloaded browser), pinned by
# package-lock.json, into node_modules/ beside this script.
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -f "$HERE/package-lock.json" ]; then
  command -v npm >/dev/null 2>&1 || $SUDO apt-get install -y -qq --no-install-recommends npm
  (cd "$HERE" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi
