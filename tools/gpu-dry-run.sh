#!/usr/bin/env bash
# tools/gpu-dry-run.sh [PARTS]: tools/gpu-check.sh as a lent GPU machine
# runs it, rehearsed here without a GPU, so that a device call cannot
# fail on the script. After tools/gpu-carry.sh:
#
#   - the tree a device call sends (tracked files and the untracked
#     ones git does not ignore) and .gpu-carry (hard links) into a
#     fresh directory: no build/, no ref/, no ../shared beside it;
#   - run there under `env -i`: a minimal PATH (the CUDA toolkit's bin
#     on it, as on the device image), HOME an empty directory, so that
#     nothing of this machine's environment or caches is used;
#   - stand-ins for what only the device has: nvidia-smi (one simulated
#     GPU), compute-sanitizer (runs the program, reports no error) and
#     nsys (runs the program, a kernel table of two rows); the carried
#     simulator (llmfs-cuda-sim.so) as the CUDA module;
#   - llama.cpp's source, if carried (gpu-carry.sh --llama-src), replaced
#     by a stub of the same build whose llama-bench prints a fixed CSV;
#   - each part with tiny models (GPU_CHECK_PART_MODELS=dense-tiny, the
#     16k vocabulary), each a run of its own, its summary and table
#     under DIR/out/PARTS/;
#   - the libraries each carried program needs that are neither carried
#     nor the C and C++ runtimes (what a bare image may lack): listed.
#
# PARTS: what one run of gpu-check takes in GPU_CHECK_PARTS, several
# runs given as arguments ("tests gpu0" placement ...); by default each
# default part and each other one in turn. GPU_DRY_DIR: the directory
# (a fresh one under /tmp by default; left there to read). Exit 1 when a
# row says FAIL or TIME, or when gpu-check does not print its table.
#
# What it cannot show: the card's figures and times, the image's own
# programs (fusermount3 and /dev/fuse are this machine's here), and the
# bench models of real shape (written on the device in seconds; here a
# 2-layer one). The times are the simulator's, not the budget's.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[ -f .gpu-carry/programs.tar.xz ] ||
	{ echo "no .gpu-carry/programs.tar.xz: tools/gpu-carry.sh first" >&2; exit 1; }
D=${GPU_DRY_DIR:-$(mktemp -d /tmp/gpu-dry.XXXXXX)}
tree=$D/tree fake=$D/fake
rm -rf "$tree" "$fake" "${D:?}/home" "${D:?}/out"
mkdir -p "$tree" "$fake" "$D/home" "$D/out"
git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -C "$tree" -xf -
cp -al .gpu-carry "$tree/.gpu-carry"

# ---- stand-ins for the device's tools -----------------------------------------
cat >"$fake/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
*--query-gpu*) echo "simulated GPU (gpu-dry-run)" ;;
*) echo "GPU 0: simulated GPU (gpu-dry-run)" ;;
esac
EOF
cat >"$fake/compute-sanitizer" <<'EOF'
#!/bin/sh
# compute-sanitizer --tool T --error-exitcode N PROGRAM ARGS...
while [ $# -gt 0 ]; do
	case $1 in --*) shift 2 ;; *) break ;; esac
done
"$@"
rc=$?
echo "========= ERROR SUMMARY: 0 errors (gpu-dry-run stand-in)"
exit $rc
EOF
cat >"$fake/nsys" <<'EOF'
#!/bin/sh
# nsys profile ... -o OUT --force-overwrite true PROGRAM...; nsys stats FILE
case $1 in
profile)
	shift
	while [ $# -gt 0 ]; do
		case $1 in -o) out=$2; shift 2 ;; -*) shift 2 ;; *) break ;; esac
	done
	"$@" && : >"$out.nsys-rep" ;;
stats)
	echo '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"'
	echo '"60.0","600000","32","18750.0","18000","17000","21000","900.0","mmv_xw<(int)12>(...)"'
	echo '"40.0","400000","32","12500.0","12000","11000","14000","700.0","att_walk_cpu(...)"' ;;
esac
EOF
chmod +x "$fake"/*

# llama.cpp's source, where carried, stands in as a stub of the same
# build (cmake, a llama-bench printing its CSV): the real one is 143
# CUDA objects, minutes of the lent machine's 16 cores and most of an
# hour of these
if [ -f "$tree/.gpu-carry/llama-src.tar.xz" ]; then
	rm "$tree/.gpu-carry/llama-src.tar.xz"
	mkdir -p "$D/llama-stub"
	cat >"$D/llama-stub/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.14)
project(llama_bench_stub C)
add_executable(llama-bench main.c)
set_target_properties(llama-bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
EOF
	cat >"$D/llama-stub/main.c" <<'EOF'
#include <stdio.h>
int main(void)
{
	puts("model_filename,n_prompt,n_gen,avg_ts,stddev_ts");
	puts("\"stub.gguf\",\"512\",\"0\",\"123.4\",\"0.1\"");
	return 0;
}
EOF
	tar -C "$D/llama-stub" -cf - CMakeLists.txt main.c |
		xz >"$tree/.gpu-carry/llama-src.tar.xz"
fi

# ---- the libraries a bare image may lack ---------------------------------------
prog=$D/programs
rm -rf "$prog" && mkdir -p "$prog" && tar -C "$prog" -xJf .gpu-carry/programs.tar.xz
missing=$(for f in "$prog"/bin/* "$prog"/lib/llmfs-cuda*.so; do
	LD_LIBRARY_PATH=$prog/lib ldd "$f" 2>/dev/null |
		awk -v f="${f##*/}" -v p="$prog/lib/" '/not found/ { print f ": " $1 " not found" }
			/=> \// && index($3, p) != 1 { print f ": " $1 }'
done | grep -vE ': (libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^ ]*)\.so' | sort -u)
echo "libraries of the carried programs that are not carried (the image must have them):"
echo "${missing:-  none}" | sed 's/^/  /'

# ---- gpu-check, part by part ----------------------------------------------------
[ $# -gt 0 ] || set -- "tests gpu0" models sanitizer bench gpu0bench mmv \
	batch attention mmq profile placement
bad=0
models=$tree/.gpu-work/shared/models
for parts in "$@"; do
	out=$D/out/${parts// /-}
	mkdir -p "$out"
	start=$SECONDS
	env -i PATH="$fake:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		HOME="$D/home" OUT="$out" TERM=dumb \
		GPU_CHECK_PARTS="$parts" GPU_CHECK_SECONDS="${GPU_DRY_SECONDS:-600}" \
		GPU_CHECK_MODULE="$tree/.gpu-work/programs/lib/llmfs-cuda-sim.so" \
		GPU_CHECK_MODELS="${GPU_DRY_MODELS:-}" GPU_CHECK_MOE= GPU_CHECK_PROMPTS=1 \
		GPU_CHECK_PART_MODELS=dense-tiny GPU_CHECK_BATCH_MODELS=dense-tiny \
		GPU_CHECK_VOCAB=tiny-qwen3-bpe16k-mixq.gguf \
		GPU_CHECK_LOAD_MODEL="$models/stories260K.gguf" \
		GOLDEN_MODELS=stories260K GOLDEN_PROMPTS=1 MD_MODELS=1 GPU0_TOKENS=20 \
		LLMFS_CUDA_TESTS="${GPU_DRY_CUDA_TESTS:-rmsnorm,rope,attention}" \
		PLACEMENT_PP=8 PLACEMENT_TG=4 \
		PLACEMENT_CASES="file:$models/stories260K.gguf@1G file:$models/stories260K.gguf@1M" \
		bash "$tree/.gpu-carry/gpu-check.sh" >"$out/stdout" 2>&1
	rc=$?
	echo
	echo "==== dry run of GPU_CHECK_PARTS=\"$parts\": exit $rc, $((SECONDS - start)) s, $out"
	# the table must be what the call prints last
	sed -n '/^==== gpu-check/,$p' "$out/stdout"
	if ! grep -q '^==== gpu-check' "$out/stdout"; then
		echo "no table printed"; tail -n 5 "$out/stdout"; bad=1
	elif sed -n '/^==== gpu-check/,$p' "$out/stdout" | grep -qE '^\S* +(FAIL|TIME) '; then
		bad=1
	fi
	for f in "$out"/*; do
		case ${f##*/} in
		stdout | summary.txt | env.log | tests.log | gpu0.log | models.log | \
			bench.log | bench.json | profile.log | placement.log) ;;
		*) echo "unexpected under \$OUT: ${f##*/}" ;;
		esac
	done
	# a device call brings back 8 files of $OUT at most
	n=$(find "$out" -type f ! -name stdout | wc -l)
	[ "$n" -le 8 ] || { echo "$n files under \$OUT: 8 come back"; bad=1; }
done
exit $bad
