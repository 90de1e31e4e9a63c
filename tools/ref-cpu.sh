#!/usr/bin/env bash
# tools/ref-cpu.sh [VARIANT]: print the folder of a copy of the reference
# install (ref/, make ref) whose llama.cpp loads one CPU variant only
# (default zen4, the variant ../shared/golden was made with: its README,
# section 1). The folder's name ends in -VARIANT.
#
# VARIANT "golden": zen4 where this CPU runs it, else haswell (AVX2, FMA,
# F16C: most laptops and desktops, and machines whose AVX-512 is hidden):
# the llama.cpp a user of this machine runs, for the tests that compare
# with a live reference under ../shared's tolerance rule.
#
# Why: the prebuilt libraries of node-llama-cpp pick their CPU variant at
# run time, the best the machine supports. On an Intel Sapphire Rapids
# machine that is libggml-cpu-sapphirerapids.so (AMX, AVX512-FP16), whose
# logits differ from zen4's, so a reference made there is not the golden
# path. The copy is made of hard links (no bytes copied) with every other
# libggml-cpu-*.so left out, once, in
# ${LLMFS_CACHE:-~/.cache/llmfs}/ref-RELEASE-VARIANT/.
#
# Exit 1 with a reason when ref/ is missing or the CPU lacks the variant's
# instructions (running it would die of SIGILL).
set -euo pipefail
cd "$(dirname "$0")/.."
variant=${1:-zen4}
has_flags() {
	local flags f
	flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
	for f; do
		case $flags in *" $f "*) ;; *) echo "$f"; return 1 ;; esac
	done
}
zen4_flags="avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512vbmi avx2 fma f16c bmi2"
haswell_flags="avx2 fma f16c bmi2"
if [ "$variant" = golden ]; then
	variant=zen4
	has_flags $zen4_flags >/dev/null || variant=haswell
fi
REF=${LLAMA_REF_DIR:-$PWD/ref}
# the folder itself, not a symbolic link to it (cp -a would copy the link)
REF=$(cd "$REF" 2>/dev/null && pwd -P) ||
	{ echo "no llama.cpp reference in ${LLAMA_REF_DIR:-ref} (make ref)" >&2; exit 1; }
CACHE=${LLMFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmfs}
bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
info=$REF/node_modules/node-llama-cpp/llama/llama.cpp.info.json

[ -f "$info" ] || { echo "no llama.cpp reference in $REF (make ref)" >&2; exit 1; }
[ -f "$REF/$bins/libggml-cpu-$variant.so" ] ||
	{ echo "no CPU variant $variant in $REF/$bins" >&2; exit 1; }
case $variant in
zen4) need=$zen4_flags ;;
haswell) need=$haswell_flags ;;
*) need= ;;
esac
# shellcheck disable=SC2086 # a list of flags
if ! lacking=$(has_flags $need); then
	echo "this CPU lacks $lacking, which llama.cpp's $variant variant needs" >&2
	exit 1
fi

release=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$info")
dir=$CACHE/ref-${release:-unknown}-$variant
mkdir -p "$CACHE"
exec 9>"$dir.lock"
flock 9
if [ ! -f "$dir/.complete" ]; then
	rm -rf "$dir"
	# hard links where the cache shares the filesystem, copies elsewhere
	cp -al "$REF" "$dir" 2>/dev/null || { rm -rf "$dir"; cp -a "$REF" "$dir"; }
	for lib in "$dir/$bins"/libggml-cpu-*.so; do
		[ "$lib" = "$dir/$bins/libggml-cpu-$variant.so" ] || rm -f "$lib"
	done
	touch "$dir/.complete"
fi
echo "$dir"
