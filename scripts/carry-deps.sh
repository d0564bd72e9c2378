#!/usr/bin/env bash
# Copies the libraries Osprey builds against (fmt, nlohmann-json, CLI11, PCRE2, GoogleTest,
# Google Benchmark, and pkg-config itself) from this machine's Debian packages into `.deps/`, a
# git-ignored install prefix, so they can travel to a machine that has a compiler but cannot
# install packages (the GPU machine has no network). scripts/gpu-check.sh uses `.deps/` only when
# a configure against the system's own packages fails.
#
#   scripts/carry-deps.sh            # writes .deps/ (about 10 MB) and lists what it holds
#
# Layout (mirrors /usr, so the packages' own CMake config files find their files relative to
# themselves):
#   .deps/include/                         headers
#   .deps/lib/x86_64-linux-gnu/            libraries (PCRE2 static only; fmt and benchmark shared)
#   .deps/lib/x86_64-linux-gnu/cmake/      fmt, GTest, benchmark CMake packages
#   .deps/lib/x86_64-linux-gnu/pkgconfig/  libpcre2-8.pc, relocated with ${pcfiledir}
#   .deps/share/cmake/                     CLI11, nlohmann_json CMake packages
#   .deps/bin/pkg-config                   pkgconf and its library, for machines without one
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
arch=x86_64-linux-gnu
sys=/usr/lib/$arch

missing=()
need() { for p in "$@"; do [[ -e $p ]] || missing+=("$p"); done; }
need /usr/include/fmt /usr/include/nlohmann /usr/include/CLI /usr/include/gtest /usr/include/gmock \
     /usr/include/benchmark /usr/include/pcre2.h \
     $sys/libfmt.so.9.1.0 $sys/libgtest.a $sys/libgtest_main.a $sys/libgmock.a $sys/libgmock_main.a \
     $sys/libbenchmark.so.1.7.1 $sys/libbenchmark_main.a $sys/libpcre2-8.a \
     $sys/cmake/fmt $sys/cmake/GTest $sys/cmake/benchmark /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json \
     $sys/pkgconfig/libpcre2-8.pc /usr/bin/pkgconf /lib/$arch/libpkgconf.so.3
if ((${#missing[@]})); then
  echo "carry-deps: this machine lacks: ${missing[*]}" >&2
  echo "carry-deps: install libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libssl-dev pkgconf" >&2
  exit 1
fi

rm -rf "$deps"
mkdir -p "$deps/include" "$deps/lib/$arch/cmake" "$deps/lib/$arch/pkgconfig" "$deps/share/cmake" "$deps/bin" "$deps/libexec"

cp -a /usr/include/{fmt,nlohmann,CLI,gtest,gmock,benchmark} /usr/include/pcre2.h "$deps/include/"
# OpenSSL (libcrypto, for SHA-256): the portable headers plus Debian's per-architecture ones,
# merged into one folder; the runtime libcrypto.so.3 is the device machine's own.
cp -a /usr/include/openssl "$deps/include/" && cp -a /usr/include/$arch/openssl/. "$deps/include/openssl/"
cp -a $sys/libcrypto.so $sys/libcrypto.so.3 "$deps/lib/$arch/"
cp -a $sys/libfmt.so $sys/libfmt.so.9 $sys/libfmt.so.9.1.0 \
      $sys/libgtest.a $sys/libgtest_main.a $sys/libgmock.a $sys/libgmock_main.a \
      $sys/libbenchmark.so $sys/libbenchmark.so.1debian $sys/libbenchmark.so.1.7.1 $sys/libbenchmark_main.a \
      $sys/libpcre2-8.a "$deps/lib/$arch/"
cp -a $sys/cmake/fmt $sys/cmake/GTest $sys/cmake/benchmark "$deps/lib/$arch/cmake/"
cp -a /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$deps/share/cmake/"

# The Python module's build headers (python/), where this machine has them: pybind11 (headers and
# its CMake package, which finds them relative to itself) and DLPack's header. The device machine
# still needs its own Python headers for the module to be built there.
if [[ -d /usr/include/pybind11 && -d /usr/lib/cmake/pybind11 ]]; then
  mkdir -p "$deps/lib/cmake"
  cp -a /usr/include/pybind11 "$deps/include/"
  cp -a /usr/lib/cmake/pybind11 "$deps/lib/cmake/"
fi
[[ -f /usr/include/dlpack/dlpack.h ]] && cp -a /usr/include/dlpack "$deps/include/"

# The opencl device (src/gpu/opencl/): the OpenCL headers and the ICD loader libOpenCL, where this
# machine has them. The device machine's own driver (NVIDIA's libnvidia-opencl.so.1) answers
# through the loader once an ICD file names it (OCL_ICD_VENDORS; scripts/gpu-check.sh).
if [[ -d /usr/include/CL && -e $sys/libOpenCL.so.1 ]]; then
  cp -a /usr/include/CL "$deps/include/"
  cp -a $sys/libOpenCL.so $sys/libOpenCL.so.1 $sys/libOpenCL.so.1.* "$deps/lib/$arch/"
fi

# The .pc file names /usr; make it relative to wherever .deps lands.
sed 's|^prefix=.*|prefix=${pcfiledir}/../../..|' $sys/pkgconfig/libpcre2-8.pc > "$deps/lib/$arch/pkgconfig/libpcre2-8.pc"

# pkg-config: pkgconf with its library beside it, behind a wrapper that finds both.
cp /usr/bin/pkgconf "$deps/libexec/pkgconf"
cp /lib/$arch/libpkgconf.so.3 "$deps/libexec/"
cat > "$deps/bin/pkg-config" <<'WRAPPER'
#!/bin/sh
# pkgconf carried from the build machine (scripts/carry-deps.sh); searches .deps' own .pc files first.
here=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$here/libexec${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_PATH="$here/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
exec "$here/libexec/pkgconf" "$@"
WRAPPER
chmod +x "$deps/bin/pkg-config"

# A record of where the copies came from.
{
  echo "# carried from $(hostname) on $(date -u +%Y-%m-%dT%H:%MZ) by scripts/carry-deps.sh"
  dpkg-query -W -f='${Package} ${Version}\n' libfmt-dev nlohmann-json3-dev libcli11-dev libgtest-dev \
    libgmock-dev libbenchmark-dev libpcre2-dev pkgconf pybind11-dev libdlpack-dev ocl-icd-opencl-dev opencl-c-headers 2>/dev/null || true
} > "$deps/VERSIONS"

echo "carry-deps: wrote $deps ($(du -sh "$deps" | cut -f1)):"
(cd "$deps" && find . -maxdepth 3 -mindepth 2 | sort | sed 's/^/  /')
