#!/usr/bin/env bash
# tools/gpu-carry.sh [--llama] [--build] [--to DIR]...: fill .gpu-carry/ (git-ignored) in
# the repository root with what tools/gpu-check.sh needs on a lent GPU
# machine and cannot find there, and print the device call to make.
#
# A device call sends the repository's working tree and the ignored paths
# it names in `carry` (64 MiB in all); ../shared does not travel. So:
#
#   programs.tar.xz   bin/ and lib/: the programs built here (the CUDA
#                module for every arch and its simulator, the tests, both
#                benches, the model writer, the mount), this machine's fusermount3 (the fs
#                tests unmount with it; the CUDA image has none), and the
#                shared libraries they need that a CUDA image may lack
#                (libnuma, libjansson, libfuse3, ...), without debug info;
#                gpu-check.sh unpacks them and puts bin/ on PATH, or
#                builds on the device instead if they do not run there
#   shared.tar.xz    ../shared/models and ../shared/golden (25 MB): the
#                golden tests and the bench's 152k Qwen2 vocabulary
#   llama-bench.xz   (--llama) llama.cpp's CUDA llama-bench for sm_90
#                (tools/build-llama-cuda.sh, about 40 MB)
#   llama-src.tar.xz (--llama-src) its source instead (about 4 MB):
#                gpu-check.sh builds it on the GPU machine's cores while
#                the checks run, and its `llama` part runs it last
# xz, not zstd: where the image lacks xz, Python's lzma undoes it.
#
# The models and llama-bench together pass 64 MiB: the first call carries
# the models (tests and llmfs's bench), a second one `--llama` (llmfs's
# bench again and llama.cpp's on the same card, the shared tarball
# replaced by the vocabulary alone). --build: make first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SHARED=${SHARED:-$(cd .. && pwd)/shared}
BUILD=${BUILD:-build}
CARRY=$ROOT/.gpu-carry
llama=0 build=0 llama_src=0
to=()
while [ $# -gt 0 ]; do
	case $1 in
	--llama) llama=1 ;;
	--llama-src) llama_src=1 ;;
	--build) build=1 ;;
	--to) to+=("$2"); shift ;;
	*) echo "usage: tools/gpu-carry.sh [--llama | --llama-src] [--build] [--to DIR]..." >&2; exit 2 ;;
	esac
	shift
done
[ $build = 1 ] && nice make -j2 CUDA_VARIANTS=1 all tests

fusermount=$(command -v fusermount3) ||
	{ echo "no fusermount3 here to carry (Debian: fuse3)" >&2; exit 1; }
bins="$BUILD/bin/llmfs-cuda-bench $BUILD/bin/llmfs-bench $BUILD/bin/llmfs-write-model
	$BUILD/bin/llmfs-gpus $BUILD/bin/llmfs-run
	$BUILD/tests/engine/test_cuda $BUILD/tests/engine/test_cuda_model
	$BUILD/tests/engine/test_golden $BUILD/tests/engine/test_multidevice
	$BUILD/tests/engine/test_load_device
	$BUILD/bin/llmfs $BUILD/tests/io/test_stage $fusermount"
for f in $bins $BUILD/lib/llmfs-cuda.so; do
	[ -x "$f" ] || { echo "missing $f: make all tests (or --build)" >&2; exit 1; }
done
# gpu-check's attention part times the walks only a switch launches
# (attention_variants.cu's table, a local symbol of the unstripped module)
nm "$BUILD/lib/llmfs-cuda.so" | grep -q 'att_variant_table$' ||
	{ echo "the module lacks the switched attention kernels: make CUDA_VARIANTS=1 (or --build)" >&2; exit 1; }
rm -rf "$CARRY"
mkdir -p "$CARRY/bin" "$CARRY/lib"
cp $bins "$CARRY/bin/"
cp "$BUILD/lib/llmfs-cuda.so" "$CARRY/lib/"
# the simulator counts the backend's launches a step (tools/launch-count.sh)
[ -f "$BUILD/lib/llmfs-cuda-sim.so" ] && cp "$BUILD/lib/llmfs-cuda-sim.so" "$CARRY/lib/"
# the libraries beyond libc, libm, libstdc++, libgcc and the loader
for f in $bins; do
	ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
	case $(basename "$lib") in
	libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | \
		libstdc++.so* | libgcc_s.so* | ld-linux*) ;;
	*) cp -L "$lib" "$CARRY/lib/" ;;
	esac
done
# stripped of their debug info and packed: the mount's libraries (curl,
# gnutls, systemd) and four test programs pass the 64 MiB otherwise
strip --strip-debug "$CARRY"/bin/* "$CARRY"/lib/*
tar -C "$CARRY" -cf - bin lib | xz -6 -T2 >"$CARRY/programs.tar.xz"
rm -rf "$CARRY/bin" "$CARRY/lib"
# llama-bench only where built already: its build takes hours of this
# machine's two busy cores (gpu.md), and every session starts without it
lb=
if [ $llama = 1 ] && ! lb=$(tools/build-llama-cuda.sh --cached 90); then
	echo "carrying no llama-bench (call 2 runs without llama.cpp's figures):" \
		"build it first, hours on 2 cores: tools/build-llama-cuda.sh 90" >&2
	lb=
fi
if [ -n "$lb" ]; then
	cp "$lb" "$CARRY/llama-bench.xz"
	# the vocabulary the bench's models take: the 152k Qwen2 model only
	# (with the K-quant model and the golden files for the mmq part's
	# prompts, 5 MB more, the call passed 64 MiB: gpu.md)
	tar -C "$SHARED" -cf - models/tiny-qwen2-bpe152k-legacyq.gguf |
		xz -9 -T2 >"$CARRY/shared.tar.xz"
else
	tar -C "$SHARED" -cf - models golden | xz -9 -T2 >"$CARRY/shared.tar.xz"
fi
if [ $llama_src = 1 ] && [ -z "$lb" ]; then
	cp "$(tools/build-llama-cuda.sh --source)" "$CARRY/llama-src.tar.xz"
fi
git -C "$ROOT" rev-parse HEAD >"$CARRY/commit"
# this script's partner and the commit's source travel too (gpu-check.sh)
cp tools/gpu-check.sh "$CARRY/"
git -C "$ROOT" archive HEAD | gzip -9 >"$CARRY/src.tar.gz"
for d in "${to[@]}"; do
	rm -rf "$d/.gpu-carry"
	cp -al "$CARRY" "$d/.gpu-carry"
	git -C "$d" check-ignore -q .gpu-carry ||
		echo "warning: $d/.gpu-carry is not git-ignored there" >&2
done
size=$(du -sb "$CARRY" | cut -f1)
# what travels beside it: tracked files and untracked ones not ignored
tree=$(git -C "$ROOT" ls-files -z -co --exclude-standard |
	du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
echo "$CARRY: $((size / 1048576)) MiB, the tree $((tree / 1048576)) MiB (64 MiB in all)"
[ $((size + tree)) -lt $((64 * 1048576)) ] ||
	{ echo "too large for one device call" >&2; exit 1; }
# the call: the default parts, or with llama-bench the bench beside
# llama.cpp's and the int8 prefill against it (Documentation/gpu.md)
parts=
timeout=330
[ -n "$lb" ] && parts='GPU_CHECK_PARTS=\"bench mmq\" '
# the build on the device's cores takes minutes beside the checks
[ -f "$CARRY/llama-src.tar.xz" ] && parts='GPU_CHECK_SECONDS=500 ' && timeout=590
echo "device call: run(command=\"${parts}bash .gpu-carry/gpu-check.sh\", carry=[\".gpu-carry\"], timeout_s=$timeout)"
