#!/usr/bin/env bash
# tools/build-llama.sh [TARGET...]: build llama.cpp's programs (default:
# llama-bench and llama-server) from the source bundle that the pinned
# node-llama-cpp ships (make ref), CPU only, native, and print the folder
# that holds them.
#
# The build is slow on a small machine (minutes), so it lives outside the
# clone, in ${XDG_CACHE_HOME:-$HOME/.cache}/llmfs/llama.cpp-COMMIT/, keyed by
# the bundle's commit: CI runs on the same machine find it built. A lock
# file lets the benchmark and the tests ask for it at the same time.
#
# Exit 77 (and a reason on stderr) when the bundle, cmake or a compiler is
# missing, so that a test calling it can skip.
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${LLAMA_REF_DIR:-$PWD/ref}
BUNDLE=$REF/node_modules/node-llama-cpp/llama/gitRelease.bundle
CACHE=${LLMFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmfs}
[ $# -gt 0 ] || set -- llama-bench llama-server

[ -f "$BUNDLE" ] || { echo "no $BUNDLE (make ref)" >&2; exit 77; }
command -v cmake >/dev/null || { echo "cmake is absent" >&2; exit 77; }
command -v c++ >/dev/null || { echo "no C++ compiler" >&2; exit 77; }

commit=$(git bundle list-heads "$BUNDLE" | awk 'NR == 1 {print $1}')
[ -n "$commit" ] || { echo "cannot read $BUNDLE" >&2; exit 77; }
dir=$CACHE/llama.cpp-$commit
mkdir -p "$CACHE"

exec 9>"$CACHE/llama.cpp-$commit.lock"
flock 9
missing=
for t in "$@"; do [ -x "$dir/build/bin/$t" ] || missing="$missing $t"; done
if [ -n "$missing" ]; then
	if [ ! -f "$dir/src/CMakeLists.txt" ]; then
		rm -rf "$dir/src"
		git -c advice.detachedHead=false clone -q "$BUNDLE" "$dir/src" >&2
		git -C "$dir/src" -c advice.detachedHead=false checkout -q "$commit"
	fi
	echo "building$missing from llama.cpp $commit (once, cached in $dir)" >&2
	cmake -S "$dir/src" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release \
		-DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DBUILD_SHARED_LIBS=OFF >"$dir/cmake.log" 2>&1 ||
		{ tail -n 20 "$dir/cmake.log" >&2; exit 1; }
	for t in $missing; do
		cmake --build "$dir/build" -j "$(nproc)" --target "$t" \
			>>"$dir/build.log" 2>&1 ||
			{ tail -n 20 "$dir/build.log" >&2; exit 1; }
	done
fi
echo "$dir/build/bin"
