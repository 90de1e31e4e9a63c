#!/usr/bin/env bash
# tools/build-llama.sh [TARGET...]: build llama.cpp's programs (default:
# llama-bench and llama-server) from the source bundle that the pinned
# node-llama-cpp ships (make ref), CPU only, and print the folder that
# holds them.
#
# Not -DGGML_NATIVE=ON: the instruction set is named, LLAMA_CPU_VARIANT=
# zen4 (the default where the CPU has it: the variant ../shared/golden was
# made with, AVX-512 VNNI/BF16/VBMI, no AMX) or haswell (AVX2, FMA, F16C),
# as ggml's own GGML_CPU_ALL_VARIANTS list defines them. A native build on
# an Intel Sapphire Rapids machine turns on ggml's AMX path, which dies of
# SIGSEGV in ggml_backend_amx_mul_mat on the shared models; and the build
# would depend on whichever machine CI lands on.
#
# The build is slow on a small machine (minutes), so it lives outside the
# clone, in ${XDG_CACHE_HOME:-$HOME/.cache}/llmfs/llama.cpp-COMMIT/ (src/,
# and build-VARIANT/ per CPU variant), keyed by the bundle's commit: CI
# runs on the same machine find it built. A lock file lets the benchmark
# and the tests ask for it at the same time.
#
# Exit 77 (and a reason on stderr) when the bundle, cmake or a compiler is
# missing, so that a test calling it can skip.
#
# tools/build-llama.sh --source: only the source (cloned once, in the
# same cache), and print its folder (tests/engine/template.sh reads the
# chat templates it ships).
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${LLAMA_REF_DIR:-$PWD/ref}
BUNDLE=$REF/node_modules/node-llama-cpp/llama/gitRelease.bundle
CACHE=${LLMFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmfs}
[ $# -gt 0 ] || set -- llama-bench llama-server

[ -f "$BUNDLE" ] || { echo "no $BUNDLE (make ref)" >&2; exit 77; }
source_only=
[ "${1-}" = --source ] && source_only=1
[ -n "$source_only" ] || command -v cmake >/dev/null ||
	{ echo "cmake is absent" >&2; exit 77; }
[ -n "$source_only" ] || command -v c++ >/dev/null ||
	{ echo "no C++ compiler" >&2; exit 77; }

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f; do case $flags in *" $f "*) ;; *) return 1 ;; esac; done; }
zen4_needs="avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512vbmi avx2 fma f16c bmi2"
if [ -z "${LLAMA_CPU_VARIANT:-}" ]; then
	# shellcheck disable=SC2086
	if has $zen4_needs; then LLAMA_CPU_VARIANT=zen4; else LLAMA_CPU_VARIANT=haswell; fi
fi
haswell="-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_F16C=ON -DGGML_FMA=ON -DGGML_AVX2=ON -DGGML_BMI2=ON"
case $LLAMA_CPU_VARIANT in
haswell) cpu_flags="$haswell -DGGML_AVX512=OFF" needs="avx2 fma f16c bmi2" ;;
zen4) cpu_flags="$haswell -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
	needs=$zen4_needs ;;
*) echo "LLAMA_CPU_VARIANT=$LLAMA_CPU_VARIANT: zen4 or haswell" >&2; exit 1 ;;
esac
# shellcheck disable=SC2086
[ -n "$source_only" ] || has $needs ||
	{ echo "this CPU cannot run llama.cpp's $LLAMA_CPU_VARIANT variant" >&2; exit 1; }

commit=$(git bundle list-heads "$BUNDLE" | awk 'NR == 1 {print $1}')
[ -n "$commit" ] || { echo "cannot read $BUNDLE" >&2; exit 77; }
dir=$CACHE/llama.cpp-$commit
build=$dir/build-$LLAMA_CPU_VARIANT
mkdir -p "$CACHE"

# a source cloned whole is marked: reading it needs no lock (a build holds
# the lock for minutes)
if [ -n "$source_only" ] && [ -f "$dir/src.done" ]; then
	echo "$dir/src"
	exit 0
fi
exec 9>"$CACHE/llama.cpp-$commit.lock"  # the source is shared by the builds
flock 9
clone() {
	if [ ! -f "$dir/src/CMakeLists.txt" ]; then
		rm -f "$dir/src.done"
		rm -rf "$dir/src"
		git -c advice.detachedHead=false clone -q "$BUNDLE" "$dir/src" >&2
		git -C "$dir/src" -c advice.detachedHead=false checkout -q "$commit"
	fi
	touch "$dir/src.done"
}
if [ -n "$source_only" ]; then
	clone
	echo "$dir/src"
	exit 0
fi
missing=
for t in "$@"; do [ -x "$build/bin/$t" ] || missing="$missing $t"; done
if [ -n "$missing" ]; then
	clone
	echo "building$missing from llama.cpp $commit, $LLAMA_CPU_VARIANT (once, cached in $dir)" >&2
	cmake -S "$dir/src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
		-DGGML_NATIVE=OFF $cpu_flags -DGGML_AMX_TILE=OFF \
		-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CUDA=OFF -DLLAMA_CURL=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
		-DBUILD_SHARED_LIBS=OFF >"$build.cmake.log" 2>&1 ||
		{ tail -n 20 "$build.cmake.log" >&2; exit 1; }
	for t in $missing; do
		cmake --build "$build" -j "$(nproc)" --target "$t" \
			>>"$build.build.log" 2>&1 ||
			{ tail -n 20 "$build.build.log" >&2; exit 1; }
	done
fi
echo "$build/bin"
