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
  # a local Slurm cluster for the job suite (slurm/cluster.sh; PMI2 for MPICH)
  slurmctld slurmd slurm-client munge libpmi2-0-dev
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
