#!/usr/bin/env bash
# tools/build-llama-cuda.sh: llama.cpp's llama-bench with its CUDA backend,
# from the source that the pinned node-llama-cpp ships (make ref), for
# one GPU architecture (default 90: H100, H200), static, and print the
# xz-compressed file to carry to a GPU machine (tools/gpu-carry.sh
# --llama; xz because Python's lzma can undo it where xz is absent).
#
# The anchor of the GPU bench: llmfs's figures stand beside this build's,
# measured on the same card in the same run (tools/gpu-check.sh). The
# prebuilt libggml-cuda.so that node-llama-cpp ships covers many
# architectures (159 MB): too large to carry within a device call's
# 64 MiB, hence this build.
#
# Slow: about 28 minutes on 2 cores (../shared/GPU.md), so it runs under
# `nice -n 19` and lives outside the clone, in
# ${XDG_CACHE_HOME:-$HOME/.cache}/llmfs/llama.cpp-COMMIT-cuda-smARCH/,
# keyed by the bundle's commit; a lock lets two callers wait for one
# build. NCCL and OpenSSL are left out (the device image has NCCL only
# inside Python packages). Exit 77 (the reason on stderr) without the
# bundle, cmake, nvcc or xz.
#
#   tools/build-llama-cuda.sh [ARCH]     -> prints .../llama-bench.xz
#   tools/build-llama-cuda.sh --cached [ARCH]: the same, but only where
#       it is built already: exit 77 otherwise, building nothing (a
#       fresh machine has no cache; its build takes longer than a
#       session's helpers can wait: gpu-carry.sh --llama then carries
#       without it)
#   tools/build-llama-cuda.sh --source: the source llama-bench is built
#       from, without what that build does not read (models, docs,
#       the other backends, the server's web UI), xz-compressed (about
#       4 MB), its path printed: gpu-carry.sh --llama-src carries it and
#       gpu-check.sh builds it on the GPU machine's cores (16 there, 2
#       here) while the checks run on the card (LLAMA_CMAKE_FLAGS below)
set -euo pipefail
cd "$(dirname "$0")/.."
cached=0 source=0
[ "${1:-}" = --cached ] && cached=1 && shift
[ "${1:-}" = --source ] && source=1 && shift
ARCH=${1:-90}
REF=${LLAMA_REF_DIR:-$PWD/ref}
BUNDLE=$REF/node_modules/node-llama-cpp/llama/gitRelease.bundle
CACHE=${LLMFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmfs}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

[ -f "$BUNDLE" ] || { echo "no $BUNDLE (make ref)" >&2; exit 77; }
command -v cmake >/dev/null || { echo "cmake is absent" >&2; exit 77; }
command -v xz >/dev/null || { echo "xz is absent" >&2; exit 77; }

commit=$(git bundle list-heads "$BUNDLE" | awk 'NR == 1 {print $1}')
[ -n "$commit" ] || { echo "cannot read $BUNDLE" >&2; exit 77; }
if [ $source = 1 ]; then
	src=$CACHE/llama.cpp-$commit-bench-src.tar.xz
	mkdir -p "$CACHE"
	if [ ! -s "$src" ]; then
		tmp=$(mktemp -d)
		trap 'rm -rf "$tmp"' EXIT
		git -c advice.detachedHead=false clone -q "$BUNDLE" "$tmp/src"
		git -C "$tmp/src" archive "$commit" -- . ':!docs' ':!models' \
			':!benches' ':!tests' ':!examples' ':!gguf-py' ':!conversion' \
			':!scripts' ':!media' ':!tools/ui' ':!tools/server' \
			':!ggml/src/ggml-et' ':!ggml/src/ggml-metal' \
			':!ggml/src/ggml-hexagon' ':!ggml/src/ggml-sycl' \
			':!ggml/src/ggml-vulkan' ':!ggml/src/ggml-opencl' \
			':!ggml/src/ggml-cann' ':!ggml/src/ggml-webgpu' \
			':!ggml/src/ggml-zdnn' ':!ggml/src/ggml-musa' |
			xz -9 -T2 >"$src.tmp"
		mv "$src.tmp" "$src"
	fi
	echo "$src"
	exit 0
fi
[ -x "$NVCC" ] || { echo "nvcc is absent" >&2; exit 77; }
dir=$CACHE/llama.cpp-$commit-cuda-sm$ARCH
out=$dir/llama-bench.xz
if [ $cached = 1 ] && [ ! -s "$out" ]; then
	echo "not built yet: $out (tools/build-llama-cuda.sh $ARCH builds it)" >&2
	exit 77
fi
mkdir -p "$CACHE"
exec 9>"$dir.lock"
flock 9
if [ ! -s "$out" ]; then
	if [ ! -f "$dir/src/CMakeLists.txt" ]; then
		rm -rf "$dir/src"
		git -c advice.detachedHead=false clone -q "$BUNDLE" "$dir/src" >&2
		git -C "$dir/src" -c advice.detachedHead=false checkout -q "$commit"
	fi
	echo "building llama-bench (CUDA sm_$ARCH) from llama.cpp $commit, once, in $dir" >&2
	start=$SECONDS
	nice -n 19 cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_CUDA_COMPILER="$NVCC" \
		-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
		-DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_CUDA_NCCL=OFF \
		-DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
		-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
		-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
		-DLLAMA_BUILD_APP=OFF >"$dir/cmake.log" 2>&1 ||
		{ tail -n 20 "$dir/cmake.log" >&2; exit 1; }
	nice -n 19 cmake --build "$dir/build" -j "${JOBS:-2}" --target llama-bench \
		>"$dir/build.log" 2>&1 ||
		{ tail -n 20 "$dir/build.log" >&2; exit 1; }
	strip -o "$dir/llama-bench" "$dir/build/bin/llama-bench"
	nice -n 19 xz -9 -T2 -c "$dir/llama-bench" >"$out.tmp"
	mv "$out.tmp" "$out"
	echo "built in $((SECONDS - start)) s: $(du -h "$out" | cut -f1) compressed;" \
		"it needs: $(ldd "$dir/llama-bench" | awk '/=>/ {print $1}' | tr '\n' ' ')" >&2
fi
echo "$out"
