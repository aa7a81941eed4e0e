#!/usr/bin/env bash
# Installs monet's build and test dependencies from Debian packages (Debian 12). Skips apt when all are present.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config git
  coinor-libcbc-dev coinor-cbc libprotobuf-dev protobuf-compiler libonnx-dev libcli11-dev libspdlog-dev catch2
  nlohmann-json3-dev libopenblas-dev python3-onnx python3-torch python3-torchvision python3-numpy
  clang libclang-rt-14-dev llvm  # clang: the sanitizer and fuzz trees (libFuzzer, ASan, UBSan runtimes, symbolizer)
  librsvg2-bin)  # rsvg-convert: the tests render the SVG pictures the commands draw
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_deps: done"
