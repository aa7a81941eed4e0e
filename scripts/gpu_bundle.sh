#!/usr/bin/env bash
# Runs HERE (no GPU needed): builds the Release tree with CUDA in build-gpu/ and assembles gpu-bundle/ for a lent
# GPU machine, which has CUDA 13, PyTorch with pip's cuDNN/cuBLAS wheels, but none of our Debian libraries:
#   gpu-bundle/bin  monet-run, monet-check, monet-profile, monet-solve, monet_cuda_tests (stripped), linked with
#                   RPATH $ORIGIN/../lib as DT_RPATH (-Wl,--disable-new-dtags: it also serves transitive deps)
#   gpu-bundle/lib  every shared library ldd lists except glibc's and CUDA's (cuDNN, cuBLAS come from the wheels;
#                   the CUDA runtime is linked statically)
#   gpu-pack/bundle.txz  the two folders above as one xz archive (what the run tool carries)
# The repository's tracked files (models/, scripts/) travel with the working tree; carry gpu-pack with the run
# tool and run scripts/gpu_session.sh there (it unpacks the archive). Checks that the bundled binaries start with a clean environment.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-bundle}
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMONET_CUDA=ON \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN/../lib' \
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags >/dev/null
grep -q '^MONET_CUDA:BOOL=ON' build-gpu/CMakeCache.txt
ninja -C build-gpu -j "$(nproc)" monet-run monet-check monet-profile monet-solve monet_cuda_tests
[ -x build-gpu/test/monet_cuda_tests ] || { echo "gpu_bundle.sh: no CUDA in this build (nvcc/cuDNN missing?)" >&2; exit 1; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp build-gpu/apps/monet-run build-gpu/apps/monet-check build-gpu/apps/monet-profile build-gpu/apps/monet-solve \
   build-gpu/test/monet_cuda_tests "$out/bin/"
strip "$out"/bin/*
for b in "$out"/bin/*; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  while read -r so; do
    case "$(basename "$so")" in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libutil.so.*) continue ;;  # glibc
      libcudnn*|libcublas*|libcudart*|libcuda.so*|libnvrtc*|libnvJitLink*) continue ;;  # from the GPU machine
    esac
    cp -L "$so" "$out/lib/$(basename "$so")"
  done
strip --strip-unneeded "$out"/lib/*.so* 2>/dev/null || true

# The bundle must start without help from this machine's environment.
env -i PATH=/usr/bin:/bin "$out/bin/monet-run" --help >/dev/null
missing=$(for b in "$out"/bin/*; do env -i LD_LIBRARY_PATH= ldd "$b"; done | grep 'not found' | grep -v 'libcudnn\|libcublas' || true)
[ -z "$missing" ] || { echo "gpu_bundle.sh: unresolved libraries: $missing" >&2; exit 1; }
# The run tool carries at most 64 MiB with the working tree; the bundle is ~100 MB (OpenBLAS alone 35 MB): carry
# the archive, gpu_session.sh unpacks it.
mkdir -p gpu-pack
# xz: 13 MB where gzip takes 35 MB, so the bundle and the repository's tracked files (about 40 MB) fit the run
# tool's 64 MiB.
rm -f gpu-pack/bundle.tgz
tar cf - "$out" | xz -9 -T"$(nproc)" > gpu-pack/bundle.txz
echo "gpu_bundle.sh: $out: $(du -sh "$out" | cut -f1) ($(ls "$out/lib" | wc -l) libraries), gpu-pack/bundle.txz" \
  "$(du -sh gpu-pack/bundle.txz | cut -f1); binaries start with a clean environment"
echo "carry it with the run tool (carry: [\"gpu-pack\"]) and run there:" \
  "OUT=/tmp/g MONET_PACK=\$OUT/results.tgz MONET_DEADLINE=560 bash scripts/gpu_session.sh (docs/testing.md, \"On a GPU\")"
