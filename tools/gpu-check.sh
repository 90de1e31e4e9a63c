#!/usr/bin/env bash
# tools/gpu-check.sh: every GPU test and the GPU bench on a lent GPU
# machine, in one run of about 250 s (GPU_CHECK_SECONDS), a short table
# last, full logs under $OUT (8 files at most: a device call brings back
# no more). Exit 77 without a GPU (so it can sit in a test list).
#
# Prepare here, then make one device call from the repository root:
#
#   tools/gpu-carry.sh --build --llama-src   # programs, models, llama.cpp's source
#   run(command="GPU_CHECK_SECONDS=500 bash .gpu-carry/gpu-check.sh",
#       carry=[".gpu-carry"], timeout_s=590)
#
# (without --llama-src: the default 250 s, timeout_s=330; gpu-carry.sh
# prints the call to make)
#
# (.gpu-carry holds a copy of this script and the commit's source: the
# device tool sends the checkout its session started in, which may be
# another worktree than the one that filled .gpu-carry; gpu-carry.sh
# --to DIR puts the same files in DIR/.gpu-carry, hard links.)
#
# (../shared does not travel; gpu-carry.sh packs what is needed of it.
# The models and llama-bench together pass the 64 MiB a call carries:
# see gpu-carry.sh.) What it runs, each with a time limit:
#
#   env       nvidia-smi, the driver, the CUDA module's probe (llmfs-gpus)
#   kernels   test_cuda with the real module: every op against the CPU
#             backend on fresh random inputs, outputs poisoned first
#   sanitizer test_cuda under compute-sanitizer memcheck, then racecheck
#             and synccheck on the attention and MoE tests
#   models    test_cuda_model: every shared model's golden prompts (48
#             steps, prefill + decode graphs) within its tolerance of
#             llama.cpp's logits, greedy tokens up to the first near-tie;
#             the same against the CPU engine with F16 and Q8_0 caches;
#             4 sequences batched == each alone; cuBLAS prefill
#   stage     test_stage (the staging ring, host side)
#   gpu0      the engine's CUDA backend (device gpu0): tests/engine/gpu0.sh
#             (every shared model's golden prompts with all of it, with
#             layer 0 on gpu0, and with all of it but the KV cache, in
#             RAM and attended by the CPU ('kv cpu'); test_multidevice: a
#             model split with the CPU gives the CPU's tokens, placement
#             moves mid-generation change none, 'auto all-gpu-ctx' and
#             'auto kv-in-ram' give the CPU's tokens) and tests/fs/gpu0.sh (llmfs-run and the mount
#             on gpu0, placement writes cpu <-> gpu0 mid-answer; the
#             carried fusermount3, and /dev/fuse, which the image must
#             have: its row says so when it has not)
#   bench     models of real shape written from random valid blocks
#             (Qwen3-8B Q4_K_M and Q8_0, Qwen3-0.6B Q4_K_M, 152k
#             vocabulary): llmfs-cuda-bench's load GB/s (beside disk and
#             pinned h2d), pp512 (int8 and cuBLAS), tg128, tg64 at depth
#             4096, 16 sequences, each beside the HBM roofline measured in
#             the same run; and llama.cpp's llama-bench when carried.
#             The Q8_0 model runs last, after gpu0bench, if time is left
#   gpu0bench the engine's path on the card, the one the mount takes:
#             first the load of the 8B Q4_K_M with every tensor on gpu0
#             (llmfs-run -n 1, cold cache): straight from the file into
#             VRAM through the staging ring, and host first then moved
#             (--move-after-load): open -> first token, the ring's GB/s
#             beside the disk alone and the pinned copy, the host's
#             peak RSS (GPU_CHECK_LOAD_MODEL=FILE: that model instead);
#             then
#             llmfs-bench --placement 'all gpu0' (pp512, tg128, tg64 at
#             depth 4096 if time is left) on the 8B and 0.6B Q4_K_M
#             models, beside llmfs-cuda-bench's figures for the same
#             model (the module's own path: step.cu, CUDA graphs); tg128
#             again without the backend's fusions (LLMFS_CUDA_FUSE=0)
#             and without its graphs (LLMFS_CUDA_GRAPH=0), beside
#             llama.cpp's tg128 of the bench part; on the 0.6B also
#             with its graphs captured each step instead of replayed
#             (LLMFS_CUDA_GRAPH=capture);
#             1 and 16 sessions through the mount with the model on gpu0
#             (tools/bench-mount.sh); with GPU_CHECK_LAUNCHES=1 the
#             launches of the backend's decode step, counted by the
#             simulator (tools/launch-count.sh: with graphs replayed,
#             captured each step, without, unfused: the same count on
#             any machine); then
#             hybrid MoE on the 8-layer Qwen3-30B-A3B shape (tg128,
#             pp512): all on gpu0, the experts in RAM on the CPU
#             (--cpu-moe), all on the CPU (GPU_CHECK_MOE picks the model)
#   attention (not by default) llmfs-cuda-bench on the 0.6B and 8B
#             shapes, tg128 and tg64 at depth 4096, with the default
#             (the CPU's order below 256 positions, split-K deeper), the
#             staged walk (staged; staged-all at every depth), the
#             CPU's order at every depth a block a chunk of 256 (chunks),
#             a block a row (row: the walk), warp 0 alone a chunk,
#             split-K everywhere, CUDA's expf in the walk
#   mmv       what the quantized products in the CPU's order cost:
#             llmfs-cuda-bench on the 8B and 0.6B Q4_K_M with the
#             default (mmv_xw; mmv_x at 8 columns), LLMFS_CUDA_MMV=walk
#             (mmv_x, the one before), =warp (mmv_xw always) and =lanes
#             (mmv_q, not the CPU's bits), in turn; tg128, and a step's
#             time for 1, 4 and 16 sequences together (8B: 5.5 and 39 ms
#             for 1 and 16 on the H100 before each weight block was
#             unpacked once for all the columns of a launch)
#   batch     (not by default: about 2 minutes) what a step of many
#             sequences costs against one: on the 0.6B and 8B Q4_K_M, a
#             step's time for 1, 4 and 16 sequences 32 deep, on the
#             module's path (llmfs-cuda-bench -s 1,4,16) with each
#             product kernel in turn (GPU_CHECK_BATCH_VARIANTS: lines of
#             NAME ENV... [-- BENCH ARGS]; with int8 tensor cores in the
#             build, batches past 8 rows on them too: LLMFS_CUDA_MMV_ROWS=8
#             --matmul mma; cols-16: LLMFS_CUDA_MMV_COLS=16, 16 rows a
#             weight read), and on the engine's backend (llmfs-bench -s,
#             all gpu0: the mount's path), by default, with 16 rows a
#             weight read (be-cols-16) and with its
#             products past 8 rows off the mat-vec kernel
#             (LLMFS_CUDA_MMV_ROWS=8: cuBLAS, and LLMFS_CUDA_MATMUL=mma
#             where the build has int8 tensor cores). 16 sequences read
#             the weights twice (8 rows a read): about 2x one sequence's
#             step where the products are bound by memory; 7.1x measured
#             before a weight block was unpacked once for all its
#             columns (gpu.md)
#   mmq       (not by default) the int8 tensor-core prefill (mmq.cu,
#             opt-in) against cuBLAS: its products (test_cuda's mma
#             tests, under racecheck too) and test_cuda_model's prompts
#             past 32 rows on it (the K-quant model), then pp512 of
#             llmfs-cuda-bench --matmul mma and --matmul cublas on the
#             0.6B and 8B Q4_K_M and the 8B Q8_0, beside llama.cpp's,
#             and llmfs-bench's pp512 with LLMFS_CUDA_MATMUL=mma (the
#             backend's path): GPU_CHECK_PARTS="mmq" GPU_CHECK_SECONDS=300
#   profile   (not by default) nsys (or ncu) over 16 decode steps of
#             llmfs-cuda-bench on the 0.6B model: the 12 kernels of the
#             most total time into profile.log, the first 3 in the table
#   llama     (when gpu-carry.sh --llama-src carried llama.cpp's source)
#             llama-bench built at the start on this machine's cores
#             (nice 19, beside the other parts), then, last: each bench
#             model's pp512, tg128 and tg64 at depth 4096 with
#             llmfs-cuda-bench again (the cores quiet by then) and with
#             llama-bench (-fa 1), side by side, while the budget lasts
#             (GPU_CHECK_SECONDS=500, timeout_s=590: gpu-carry prints it)
#   golden-mm (not by default) test_golden, every weight on gpu0, with
#             the prompts' products forced to mmv (the default for
#             quantized weights), mma, then cublas (LLMFS_CUDA_MATMUL):
#             each path's distance from llama.cpp's logits
#   placement (not by default: about 5 minutes) tools/bench-placement.sh
#             from the carried source: issue 27's cases (Qwen3-8B shape
#             Q4_K_M capped at 16G and 6G, a 14B-class dense shape at 8G,
#             a Qwen3-30B-A3B shape at 8G; --devices gpu0:vram=CAP), every
#             alternative the planner lists run and timed (pp512, tg64)
#             beside its estimate, under the probe's rates per weight
#             type; the costs fitted from the runs and each case planned
#             again with the other cases' costs; the table into
#             placement.log and the summary. Alone in a call of its own:
#             GPU_CHECK_PARTS="placement" GPU_CHECK_SECONDS=540
#
# GPU_CHECK_PARTS="tests gpu0 ..." picks the parts (default: tests gpu0
# models sanitizer bench gpu0bench mmv); GPU_CHECK_SECONDS the budget (250).
# A dry run elsewhere (tools/gpu-dry-run.sh: the simulator, tiny models)
# sets GPU_CHECK_PART_MODELS (the models of attention, mmv, mmq and
# profile), GPU_CHECK_VOCAB (the bench models' vocabulary, a file of
# the carried models) and GPU_CHECK_PROMPTS (test_cuda_model's, 8).
# A call of its own for the batch part:
#   GPU_CHECK_PARTS="batch" GPU_CHECK_SECONDS=250
#
# Logs under $OUT: summary.txt (the table with the seconds so far),
# env.log, tests.log (kernels, stage, the sanitizers), gpu0.log,
# models.log, bench.log (both benches, llama-bench's errors), bench.json,
# profile.log, placement.log (bench-placement's runs and table; with
# profile.log, a ninth file: the two parts are not asked for together).
#
# With no carried programs (or if they do not run on this image) it
# builds them here: make with NVCC_ARCH=-arch=sm_90 CUDA_VARIANTS=1
# (needs the Makefile's Debian packages' libraries; the CUDA image may
# lack them).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
CARRY=$ROOT/.gpu-carry
OUT=${OUT:-/tmp/gpu-check-out}
# on the disk, not /tmp (perhaps a tmpfs, where O_DIRECT fails): the
# load figures are the disk's; git-ignored, and it does not come back
WORK=${GPU_CHECK_WORK:-$ROOT/.gpu-work}
mkdir -p "$OUT" "$WORK"
T0=$SECONDS
summary=$OUT/summary.txt
: >"$summary"
rows=()

row() { # name, result, detail; the seconds so far in the log's copy
	rows+=("$(printf '%-12s %-6s %s' "$1" "$2" "$3")")
	printf '%-12s %-6s %s [%d s]\n' "$1" "$2" "$3" $((SECONDS - T0)) >>"$summary"
}
table() {
	echo
	echo "==== gpu-check: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), $((SECONDS - T0)) s ===="
	for r in "${rows[@]}"; do echo "$r"; done
}
# (stop_llama_build: defined below; a build still running when the
# script ends, by its time limit or an error, ends with it)
trap 'stop_llama_build 2>/dev/null; table' EXIT
result() { # name, rc, detail
	case $2 in
	0) row "$1" ok "$3" ;;
	77) row "$1" skip "$3" ;;
	124 | 137) row "$1" TIME "$3 (time limit)" ;;
	*) row "$1" FAIL "$3 (exit $2)" ;;
	esac
}
# time limited, its output into a log; the exit code back
limited() { # seconds, log, command...
	local s=$1 log=$2
	shift 2
	timeout --kill-after=10 "$s" "$@" >>"$log" 2>&1
}

# ---- a GPU? ----------------------------------------------------------------
{
	echo "== $(date -u) commit $(cat "$CARRY/commit" 2>/dev/null || git rev-parse HEAD 2>/dev/null)"
	nvidia-smi 2>&1
	nvcc --version 2>&1 | tail -n 2
	uname -a
	nproc
	free -g
	df -h /tmp "$ROOT"
	command -v compute-sanitizer xz zstd python3 nsys ncu
} >"$OUT/env.log" 2>&1
if ! nvidia-smi -L >/dev/null 2>&1; then
	trap - EXIT
	echo "skip: no GPU here (nvidia-smi finds none)"
	exit 77
fi

# ---- the programs: carried, or built here -----------------------------------
unpack() { # archive, dir
	mkdir -p "$2"
	tar -C "$2" -xJf "$1" 2>/dev/null ||
		python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
}
PROG=$WORK/programs
if [ -f "$CARRY/programs.tar.xz" ]; then
	rm -rf "$PROG" && unpack "$CARRY/programs.tar.xz" "$PROG" ||
		echo "cannot unpack programs.tar.xz" >>"$OUT/env.log"
fi
BIN=$PROG/bin
# the carried fusermount3 (tests/fs's unmounts) and the programs
export PATH=$BIN:$PATH
export LD_LIBRARY_PATH=$PROG/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# GPU_CHECK_MODULE, GPU_CHECK_MODELS: a dry run of this script elsewhere
# (the simulator's module with a stand-in nvidia-smi, no bench models)
export LLMFS_CUDA_MODULE=${GPU_CHECK_MODULE:-$PROG/lib/llmfs-cuda.so}
# cuBLAS (dlopen'ed by the module): the toolkit's, else the Python one's
for d in "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64" \
	/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
	/opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib \
	/opt/torch/.venv/lib/python3*/site-packages/nvidia/cublas/lib; do
	if ls "$d"/libcublas.so* >/dev/null 2>&1; then
		LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
		echo "cuBLAS from $d" >>"$OUT/env.log"
		break
	fi
done
gpus=$("$BIN/llmfs-gpus" 2>&1)
gpus_rc=$?
echo "$gpus" >>"$OUT/env.log"
# rebuilt here only when the carried programs cannot load (another libc,
# a library missing); a GPU the module cannot open is the tests' to show
if [ $gpus_rc != 0 ] && grep -qE 'error while loading shared libraries|version .GLIBC' <<<"$gpus"; then
	echo "carried programs do not run here: building" >>"$OUT/env.log"
	# the carried commit's source: the tree that travels may be another
	src=$WORK/src
	rm -rf "$src" && mkdir -p "$src" && tar -C "$src" -xzf "$CARRY/src.tar.gz"
	if limited 180 "$OUT/env.log" make -C "$src" -j"$(nproc)" \
		NVCC_ARCH=-arch=sm_90 CUDA_VARIANTS=1 CFLAGS="-O2 -g" all tests; then
		mkdir -p "$WORK/bin"
		cp "$src"/build/bin/* "$src"/build/tests/engine/test_cuda \
			"$src"/build/tests/engine/test_cuda_model \
			"$src"/build/tests/engine/test_golden \
			"$src"/build/tests/engine/test_multidevice \
			"$src"/build/tests/engine/test_load_device \
			"$src"/build/tests/io/test_stage "$WORK/bin/" 2>/dev/null
		BIN=$WORK/bin
		PATH=$BIN:$PATH
		export LLMFS_CUDA_MODULE=$src/build/lib/llmfs-cuda.so
	else
		row build FAIL "carried programs do not run and make failed: env.log"
		exit 1
	fi
fi
gpus=$("$BIN/llmfs-gpus" 2>&1)
# the rates the planner takes (vram_read, pcie_h2d, the decode product's
# of each weight type), not the byte counts
result env $? "$(head -n 1 <<<"$gpus" | sed -E 's/ total [0-9]+ free [0-9]+//; s/ product .*//' | cut -c1-140)"
row rates "" "$(head -n 1 <<<"$gpus" | grep -o 'product .*' | cut -c1-200)"

# ---- the shared test data ----------------------------------------------------
export SHARED=$WORK/shared
if [ -f "$CARRY/shared.tar.xz" ] && [ ! -d "$SHARED/models" ]; then
	unpack "$CARRY/shared.tar.xz" "$SHARED" || row shared FAIL "cannot unpack"
fi

# ---- llama.cpp's llama-bench, built here while the checks run ----------------
# Where its source is carried (gpu-carry.sh --llama-src) and no built
# llama-bench is, it is built on this machine's cores (16 on the lent
# ones; 143 CUDA objects for sm_90, hours on the 2 development cores)
# under nice 19, beside the parts below, which keep the card to
# themselves; the `llama` part, last, waits for it and runs it on the
# bench's models. The flags are tools/build-llama-cuda.sh's.
llama_build=
llama_build_log=$WORK/llama-build.log
stop_llama_build() { # the subshell, cmake, ninja and the compilers
	[ -n "$llama_build" ] || return 0
	kill -9 -- -"$llama_build" 2>/dev/null # its own group (set -m)
	pkill -9 -f "$WORK/llama/" 2>/dev/null
	llama_build=
}
if [ -f "$CARRY/llama-src.tar.xz" ] && [ ! -f "$CARRY/llama-bench.xz" ]; then
	if command -v cmake >/dev/null && command -v nvcc >/dev/null; then
		set -m # a process group of its own: stop_llama_build ends it all
		(
			t=$SECONDS
			d=$WORK/llama
			rm -rf "$d" && mkdir -p "$d/src" &&
				unpack "$CARRY/llama-src.tar.xz" "$d/src" || exit 1
			jobs=$(($(nproc) > 6 ? $(nproc) - 2 : 2))
			gen=()
			command -v ninja >/dev/null && gen=(-G Ninja)
			nice -n 19 cmake "${gen[@]}" -S "$d/src" -B "$d/build" \
				-DCMAKE_BUILD_TYPE=Release \
				-DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
				-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
				-DGGML_CUDA_FA_ALL_QUANTS=OFF -DGGML_CUDA_NCCL=OFF \
				-DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
				-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
				-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
				-DLLAMA_BUILD_APP=OFF || exit 1
			nice -n 19 cmake --build "$d/build" -j "$jobs" --target llama-bench ||
				exit 1
			cp "$d/build/bin/llama-bench" "$WORK/llama-bench.new" &&
				mv "$WORK/llama-bench.new" "$WORK/llama-bench"
			echo "llama-bench built in $((SECONDS - t)) s with $jobs jobs"
		) >"$llama_build_log" 2>&1 &
		llama_build=$!
		set +m
	else
		row llama skip "llama.cpp's source carried, but no cmake or nvcc here"
	fi
fi

# ---- tests and bench, the most telling first --------------------------------
# GPU_CHECK_PARTS: which parts run (a later call of a lease that wants
# one figure again); all by default
part() { [[ " ${GPU_CHECK_PARTS:-tests gpu0 models sanitizer bench gpu0bench mmv} " == *" $1 "* ]]; }

# Check's forked tests: the device is opened in each child (test_cuda*.c)
checks() { grep -E '^[0-9]+%: Checks' "$1" | tail -n 1; }
# whether s more seconds fit in the budget (the call's limit is later)
# (while llama-bench builds, the `llama` part's GPU_CHECK_LLAMA_SECONDS
# are kept for it, after the build)
fits() {
	local budget=${GPU_CHECK_SECONDS:-250}
	[ -n "${llama_build:-}" ] && [ -z "${in_llama_part:-}" ] &&
		budget=$((budget - ${GPU_CHECK_LLAMA_SECONDS:-75}))
	[ $((SECONDS - T0 + $1)) -le $budget ]
}

if part tests; then
	limited 120 "$OUT/tests.log" "$BIN/test_cuda"
	result kernels $? "$(checks "$OUT/tests.log")"
	mkdir -p "$WORK/build/tests/io" # test_stage's files: $BUILD/tests/io
	BUILD=$WORK/build limited 30 "$OUT/tests.log" "$BIN/test_stage"
	result stage $? "$(grep -E '^[0-9]+%' "$OUT/tests.log" | tail -n 1)"
fi
# The engine's CUDA backend through whole models and the mount: the
# commit's test scripts (carried in src.tar.gz) over the carried programs
if part gpu0; then
	src=$WORK/src
	[ -f "$src/tests/engine/gpu0.sh" ] || {
		rm -rf "$src" && mkdir -p "$src" &&
			tar -C "$src" -xzf "$CARRY/src.tar.gz"
	}
	b=$WORK/gpu0-build
	mkdir -p "$b/bin" "$b/tests/engine"
	for f in test_golden test_multidevice test_load_device; do ln -sf "$BIN/$f" "$b/tests/engine/$f"; done
	for f in llmfs llmfs-run; do ln -sf "$BIN/$f" "$b/bin/$f"; done
	BUILD=$b limited 100 "$OUT/gpu0.log" bash "$src/tests/engine/gpu0.sh"
	result gpu0-engine $? "golden all/blk.0 on gpu0, split, moves: gpu0.log"
	while read -r l; do
		row "" "" "$l"
	done < <(grep -E 'matched prefixes|^  # ' "$OUT/gpu0.log" | sed 's/^ *//' | cut -c1-120)
	# root may load the module; a kernel without FUSE has no /dev/fuse
	[ -c /dev/fuse ] || modprobe fuse >/dev/null 2>&1
	if ! [ -c /dev/fuse ]; then
		row gpu0-mount skip "/dev/fuse is absent on this image (no FUSE in its kernel, or not passed in)"
	elif ! command -v fusermount3 >/dev/null; then
		row gpu0-mount skip "fusermount3 is not on this image and was not carried (gpu-carry.sh)"
	elif fits 60; then
		echo "== tests/fs/gpu0.sh" >>"$OUT/gpu0.log"
		BUILD=$b GPU0_TOKENS=${GPU0_TOKENS:-200} limited 60 "$OUT/gpu0.log" bash "$src/tests/fs/gpu0.sh"
		result gpu0-mount $? "$(grep -E "checks, [0-9]+ failed|^skip" "$OUT/gpu0.log" | tail -n 1 | cut -c1-100); gpu0.log"
	else
		row gpu0-mount skip "no time left"
	fi
fi
# each later part starts only while the budget lasts (its time limit is
# longer than what it took on the H100: models 19 s, the sanitizers 5 s)
if ! part models; then
	:
elif ! fits 30; then
	row models skip "no time left"
elif [ -d "$SHARED/golden" ]; then
	LLMFS_CUDA_PROMPTS=${GPU_CHECK_PROMPTS:-8} limited 150 "$OUT/models.log" "$BIN/test_cuda_model"
	result models $? "$(checks "$OUT/models.log")"
	while read -r l; do
		row "" "" "$l"
	done < <(grep '^gpu ' "$OUT/models.log" | sed 's/^gpu //' |
		grep -v 'left out' | cut -c1-120)
else
	row models skip "no shared models carried (gpu-carry.sh --llama carries none)"
fi

# ---- a prompt's products on each path, against llama.cpp (golden-mm) -------
# Not by default. test_golden with every weight on gpu0 (the backend) and
# the products past the mat-vec kernel's rows forced to one path:
# mmv (the mat-vec kernel: ggml's quantized activations in the CPU's
# order, the default for quantized weights; expected: the CPU's
# figures), mma (int8 tensor cores on the same activation rows, the
# float epilogue in another order: within tolerance on the simulator),
# cublas (halves: float activations, opt-in; the default before
# 2026-11-27's card failed the MoE model through it); every shared
# model, 8 prompts, its lines under the row
if part golden-mm && [ -d "$SHARED/golden" ]; then
	for k in ${GPU_CHECK_GOLDEN_MATMUL:-mmv mma cublas}; do
		fits 30 || { row "golden-$k" skip "no time left"; continue; }
		echo "== test_golden, all gpu0, LLMFS_CUDA_MATMUL=$k" >>"$OUT/models.log"
		GOLDEN_PLACEMENT='all gpu0' LLMFS_CUDA_MATMUL=$k \
			limited 60 "$WORK/golden-$k.log" "$BIN/test_golden"
		result "golden-$k" $? "$(checks "$WORK/golden-$k.log")"
		cat "$WORK/golden-$k.log" >>"$OUT/models.log"
		while read -r l; do
			row "" "" "$l"
		done < <(grep -E 'max rel err|^tests/' "$WORK/golden-$k.log" | sed 's/^ *//; s/^tests.engine.//' | cut -c1-120)
	done
fi

sanitize() { # tool, seconds, tests
	local log=$WORK/sanitizer-$1.log rc
	: >"$log"
	CK_FORK=no LLMFS_CUDA_TESTS=$3 limited "$2" "$log" \
		compute-sanitizer --tool "$1" --error-exitcode 99 "$BIN/test_cuda"
	rc=$?
	{ echo "== compute-sanitizer --tool $1"; cat "$log"; } >>"$OUT/tests.log"
	# 99: the sanitizer's errors; another: a test failed under it
	result "$1" $rc "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1 | sed 's/=* *//')$([ $rc != 0 ] && [ $rc != 99 ] && echo "; a test failed under it:" \
		"$(grep -m 1 -oE '[a-z_0-9]+:[0-9]+: [^(]{0,60}' "$log" | tail -n 1)")"
}
have_sanitizer=
command -v compute-sanitizer >/dev/null && have_sanitizer=1
# one process (CK_FORK=no): the sanitizer would not follow Check's forks
if ! part sanitizer; then
	have_sanitizer=
elif [ -n "$have_sanitizer" ]; then
	if fits 15; then sanitize memcheck 100 ""; else row memcheck skip "no time left"; fi
	if fits 10; then sanitize racecheck 45 attention; else row racecheck skip "no time left"; fi
else
	row sanitizer skip "compute-sanitizer not on this image"
fi

vocab=$SHARED/models/${GPU_CHECK_VOCAB:-tiny-qwen2-bpe152k-legacyq.gguf}
declare -A shape=(
	[8b-q4_k_m]="--arch qwen3 --embd 4096 --layers 36 --heads 32 --kv-heads 8 --head-dim 128 --ff 12288 --type q4_k_m"
	[8b-q8_0]="--arch qwen3 --embd 4096 --layers 36 --heads 32 --kv-heads 8 --head-dim 128 --ff 12288 --type q8_0"
	[0.6b-q4_k_m]="--arch qwen3 --embd 1024 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --ff 3072 --type q4_k_m"
	# tools/bench-cpu.sh's moe: Qwen3-30B-A3B's layer, 8 of its 48 layers
	[moe-q4_k_m]="--arch qwen3moe --embd 2048 --layers 8 --heads 32 --kv-heads 4 --head-dim 128 --ff 768 --experts 128 --experts-used 8 --type q4_k_m"
	# a dry run's (the simulator): the same graphs, tiny
	[dense-tiny]="--arch qwen3 --embd 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ff 512 --type q4_k_m"
	[moe-tiny]="--arch qwen3moe --embd 256 --layers 2 --heads 4 --kv-heads 2 --head-dim 64 --ff 256 --experts 8 --experts-used 2 --type q4_k_m"
)
models=${GPU_CHECK_MODELS-8b-q4_k_m 0.6b-q4_k_m 8b-q8_0}
llama=
if [ -f "$CARRY/llama-bench.xz" ]; then
	llama=$WORK/llama-bench
	if [ ! -x "$llama" ]; then
		{ xz -dc "$CARRY/llama-bench.xz" >"$llama" 2>/dev/null ||
			python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
				"$CARRY/llama-bench.xz" "$llama"; } && chmod +x "$llama"
	fi
fi
# llama-bench's CSV: avg_ts of its one test
lb() { # model, args...
	local m=$1
	shift
	timeout 60 "$llama" -m "$m" -ngl 99 -fa 1 -r 3 "$@" -o csv 2>>"$OUT/bench.log" |
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "avg_ts") c = i }
			NR == 2 { gsub(/"/, "", $c); print $c }'
}
fig() { # json file, key
	python3 -c 'import json, sys; print("%.1f" % json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" 2>/dev/null
}
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b }'; }
write_model() { # model
	local m=$1 f=$WORK/$1.gguf t=$SECONDS
	[ -s "$f" ] && return 0
	# shellcheck disable=SC2086
	limited 120 "$OUT/bench.log" "$BIN/llmfs-write-model" -o "$f" \
		${shape[$m]} --vocab-from "$vocab" --random-blocks ||
		{ rm -f "$f"; row "$m" FAIL "not written: bench.log"; return 1; }
	row "$m" "" "written from random blocks in $((SECONDS - t)) s ($(du -h "$f" | cut -f1))"
}
# One figure's row: llmfs's from JSON j beside llama-bench's on model m
# (run now where llama-bench is here; kept for gpu0bench's rows). pp512
# is cuBLAS's float path (opt-in) there: the default's, the int8
# mat-vec kernel's, beside it.
figure_row() { # model, json, figure
	local m=$1 j=$2 k=$3 f=$WORK/$1.gguf a b=
	a=$(fig "$j" "$k")
	if [ -n "$llama" ]; then
		case $k in
		pp512) b=$(lb "$f" -p 512 -n 0) ;;
		tg128) b=$(lb "$f" -p 0 -n 128) ;;
		tg64@d4096) b=$(lb "$f" -p 0 -n 64 -d 4096) ;;
		esac
	fi
	[ -n "$b" ] && echo "$b" >"$WORK/llama-$m.$k"
	row "" "" "$(printf '%-11s llmfs %8s t/s  llama.cpp %8s  %-6s roofline %s%%%s' \
		"$k" "$a" "${b:--}" "$(ratio "$a" "$b")" "$(fig "$j" "$k"_roof_pct)" \
		"$([ $k = pp512 ] && echo " (cuBLAS); default int8 $(fig "$WORK/bench-$m.json.int8" pp512)")")"
}
bench() { # model
	local m=$1 f=$WORK/$1.gguf j=$WORK/bench-$1.json a b k
	write_model "$m" || return
	# prefill through cuBLAS on dequantized halves (the faster: 2990
	# against 549 t/s on the 8B, H100), so the depth fills are quick;
	# 2 repetitions, not 3: room for gpu0bench in the budget
	echo "== $m" >>"$OUT/bench.log"
	limited 100 "$OUT/bench.log" "$BIN/llmfs-cuda-bench" -m "$f" -r 2 \
		--matmul cublas -j "$j"
	a=$?
	[ $a = 0 ] || { result "$m" $a "llmfs-cuda-bench: bench.log"; return; }
	# the int8 prefill (the CPU's numbers) beside it
	limited 40 "$OUT/bench.log" "$BIN/llmfs-cuda-bench" -m "$f" -r 2 -n 1 \
		-d 0 -s 0 --matmul mmv -j "$j.int8"
	row "$m" ok "load $(fig "$j" load_gbs) GB/s (disk alone $(fig "$j" disk_gbs), pinned h2d $(fig "$j" h2d_gbs)); hbm copy $(fig "$j" hbm_copy_gbs) GB/s"
	for k in pp512 tg128 tg64@d4096 tg64x16; do
		figure_row "$m" "$j" "$k"
	done
}
if ! part bench; then
	:
elif [ ! -f "$vocab" ]; then
	row bench skip "no vocabulary carried"
else
	# the 8B Q8_0 last (after gpu0bench): the longest, the least new
	for m in $models; do
		[ "$m" = 8b-q8_0 ] && continue
		if fits 70; then bench "$m"; else row "$m" skip "no time left"; fi
	done
fi

# ---- the engine's path on the card (gpu0bench) ----------------------------
# llmfs-bench with every tensor on gpu0: the CUDA backend (engine/cuda/
# backend.c, one module call per op) as the mount and llmfs-run compute,
# beside llmfs-cuda-bench's figures of the same model (step.cu's whole
# passes and CUDA graphs): what the backend's path costs. Weights in the
# file's layout (--no-pack: the CPU's panels would be undone on the move).
# Where the weights are (ebench's mode): gpu every tensor on gpu0, in the
# file's layout; hybrid a MoE's experts in RAM on the CPU (--cpu-moe,
# packed), the rest on gpu0; cpu all on the CPU.
ebench_place() { # mode
	case $1 in
	gpu) echo "--placement|all gpu0|--no-pack" ;;
	hybrid) echo "--placement|all gpu0|--cpu-moe" ;;
	cpu) echo "" ;;
	esac
}
ebench() { # model, log key, mode, llmfs-bench args...; prints t/s or nothing
	local f=$WORK/$1.gguf key=$2 t=$SECONDS rc place
	IFS='|' read -r -a place <<<"$(ebench_place "$3")"
	shift 3
	echo "== llmfs-bench -m $(basename "$f") ${place[*]} $*" >>"$OUT/bench.log"
	timeout --kill-after=5 60 "$BIN/llmfs-bench" -m "$f" "${place[@]}" \
		"$@" >"$WORK/ebench.out" 2>&1
	rc=$?
	cat "$WORK/ebench.out" >>"$OUT/bench.log"
	echo "($key: exit $rc, $((SECONDS - t)) s)" >>"$OUT/bench.log"
	# why there is no figure: the time limit, or the tool's one line
	case $rc in
	0) : >"$WORK/ebench.why" ;;
	124 | 137) echo "time limit (60 s)" >"$WORK/ebench.why" ;;
	*) grep -m 1 'llmfs-bench:' "$WORK/ebench.out" | cut -c1-70 >"$WORK/ebench.why" ;;
	esac
	awk '{ for (i = 1; i < NF; i++) if ($i == "t/s") { print $(i + 1); exit } }' "$WORK/ebench.out"
}
gpu0bench() { # model
	local m=$1 j=$WORK/bench-$1.json k a b c why
	write_model "$m" || return
	row "$m" gpu0 "llmfs-bench --placement 'all gpu0' (the backend) beside llmfs-cuda-bench (the module's path)"
	for k in pp512 tg128 tg64@d4096; do
		case $k in
		pp512) fits 30 && a=$(ebench "$m" $k gpu -p 512 -r 2) ;;
		tg128) fits 30 && a=$(ebench "$m" $k gpu -n 128 -r 2) ;;
		tg64@d4096) fits 45 && a=$(ebench "$m" $k gpu -n 64 -d 4096 -r 1) ;;
		esac || { row "" "" "$(printf '%-11s no time left' "$k")"; continue; }
		b=$(fig "$j" "$k")
		c=
		[ $k = pp512 ] && c=" (cuBLAS), int8 $(fig "$j.int8" pp512)"
		why=
		[ -n "$a" ] || why="  failed: $(cat "$WORK/ebench.why")"
		row "" "" "$(printf '%-11s backend %8s t/s  module %8s%s  %s%s' \
			"$k" "${a:--}" "${b:--}" "$c" "$(ratio "$a" "$b")" "$why")"
		# the backend's fusions on this card: decode without them
		[ $k = tg128 ] && [ -n "$a" ] && fits 20 || continue
		c=$(LLMFS_CUDA_FUSE=0 ebench "$m" tg128-unfused gpu -n 128 -r 2)
		row "" "" "$(printf '%-11s unfused %8s t/s  (LLMFS_CUDA_FUSE=0)  fused/unfused %s' \
			"$k" "${c:--}" "$(ratio "$a" "$c")")"
		# the decode step as CUDA graphs (the default) against launch
		# by launch, beside the module's step and llama.cpp
		fits 20 || continue
		c=$(LLMFS_CUDA_GRAPH=0 ebench "$m" tg128-nograph gpu -n 128 -r 2)
		row "" "" "$(printf '%-11s nograph %8s t/s  (LLMFS_CUDA_GRAPH=0)  graph/nograph %s; llama.cpp %s, backend/llama.cpp %s' \
			"$k" "${c:--}" "$(ratio "$a" "$c")" \
			"$(cat "$WORK/llama-$m.$k" 2>/dev/null || echo -)" \
			"$(ratio "$a" "$(cat "$WORK/llama-$m.$k" 2>/dev/null)")")"
		# kept graphs replayed (the default) against each step
		# captured again (the backend before replay): the host's
		# capture and update, where a step is shortest (the 0.6B)
		[ "$m" = 0.6b-q4_k_m ] && fits 20 || continue
		c=$(LLMFS_CUDA_GRAPH=capture ebench "$m" tg128-capture gpu -n 128 -r 2)
		row "" "" "$(printf '%-11s capture %8s t/s  (LLMFS_CUDA_GRAPH=capture)  replay/capture %s' \
			"$k" "${c:--}" "$(ratio "$a" "$c")")"
	done
	# 16 sessions through the mount, the model's placement 'all gpu0'
	# (tools/bench-mount.sh: 128 tokens each, one round), beside the
	# module's 16 sequences of 64 tokens
	fits 60 || { row "" "" "$(printf '%-11s no time left' mount-x16)"; return; }
	echo "== tools/bench-mount.sh $m, all gpu0, 1 and 16 sessions" >>"$OUT/bench.log"
	BUILD=$(dirname "$BIN") BENCH_MOUNT_MODEL=$WORK/$m.gguf \
		BENCH_MOUNT_PLACEMENT="all gpu0" BENCH_MOUNT_SESSIONS="1 16" \
		BENCH_MOUNT_ROUNDS=1 BENCH_THREADS=4 \
		timeout --kill-after=5 60 tools/bench-mount.sh >"$WORK/mount.out" 2>&1
	cat "$WORK/mount.out" >>"$OUT/bench.log"
	a=$(awk '$1 == "16" && $2 == "sessions:" { print $3 }' "$WORK/mount.out")
	c=$(awk '$1 == "1" && $2 == "sessions:" { print $3 }' "$WORK/mount.out")
	b=$(fig "$j" tg64x16)
	row "" "" "$(printf '%-11s mount    %8s t/s  module %8s (tg64x16)  %s; one session %s t/s%s' \
		mount-x16 "${a:--}" "${b:--}" "$(ratio "$a" "$b")" "${c:--}" \
		"$([ -n "$a" ] || echo "  failed: $(tail -n 1 "$WORK/mount.out" | cut -c1-60)")")"
}
# Launches and copies per decode step of the backend, counted by the
# simulator (tools/launch-count.sh; the same calls reach a card), with
# and without its fusions: what the figures above are bound by
launches() {
	local src=$WORK/src b=$WORK/count-build f l
	[ -f "$PROG/lib/llmfs-cuda-sim.so" ] || return
	[ -f "$src/tools/launch-count.sh" ] || {
		rm -rf "$src" && mkdir -p "$src" &&
			tar -C "$src" -xzf "$CARRY/src.tar.gz"
	}
	mkdir -p "$b/bin" "$b/lib"
	ln -sf "$BIN/llmfs-run" "$b/bin/llmfs-run"
	ln -sf "$PROG/lib/llmfs-cuda-sim.so" "$b/lib/llmfs-cuda-sim.so"
	# fused with graphs replayed (the default), captured each step,
	# fused launch by launch, unfused
	for f in 1/1 1/capture 1/0 0/0; do
		l=$(LLMFS_CUDA_FUSE=${f%/*} LLMFS_CUDA_GRAPH=${f#*/} BUILD=$b \
			SHARED=$SHARED timeout 60 bash \
			"$src/tools/launch-count.sh" \
			"$SHARED/models/tiny-qwen3-bpe16k-mixq.gguf" 2>&1 | tail -n 1)
		echo "launch-count LLMFS_CUDA_FUSE=${f%/*} LLMFS_CUDA_GRAPH=${f#*/}: $l" >>"$OUT/bench.log"
		row "" "" "$(printf 'fuse=%s graph=%-7s a step: %s' ${f%/*} ${f#*/} "${l#*per decode step }" | cut -c1-130)"
	done
}
# Hybrid MoE (Documentation/engine.md): the MoE bench model with every
# tensor on gpu0, with its experts in RAM computed by the CPU (attention,
# norms, router on gpu0: the planner's experts-in-ram), and all on the
# CPU, decode then prefill
moebench() { # model
	local m=$1 k mode a why line
	local -A runs=([tg]=${GPU_CHECK_MOE_TG:--n 128 -r 2} [pp]=${GPU_CHECK_MOE_PP:--p 512 -r 2})
	write_model "$m" || return
	row "$m" gpu0 "llmfs-bench: all gpu0 | experts in RAM (--cpu-moe) | all cpu"
	# GPU_CHECK_MOE_TG, _PP: llmfs-bench's runs (a dry run's are short)
	for k in tg pp; do
		line=$(printf '%-11s' "$k $(tr -d ' ' <<<"${runs[$k]}")")
		for mode in gpu hybrid cpu; do
			a=
			why=
			if fits 25; then
				# shellcheck disable=SC2086
				a=$(ebench "$m" "$k-$mode" $mode ${runs[$k]})
				[ -n "$a" ] || why=" ($(cat "$WORK/ebench.why"))"
			else
				why=" (no time left)"
			fi
			line="$line $(printf '%s %s t/s%s' "$mode" "${a:--}" "$why")"
		done
		row "" "" "$line"
	done
}
# Loading straight into VRAM: llmfs-run -n 1 with every tensor on gpu0,
# the page cache dropped before each run, the weights from the file
# through the staging ring into VRAM (the default) and, to compare, read
# into host memory first and moved (--move-after-load): open -> first
# token, the ring's GB/s beside the disk alone and the pinned copy
# (llmfs-cuda-bench's, the bench part, same model), the host's peak RSS
# (the card's memory is not in it; the ring is 256 MiB of it). Packed as
# users get it: the straight load packs nothing (a GPU keeps the file's
# layout), the host-first one packs and the move unpacks
dropcache() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
loadrun() { # gguf, llmfs-run args...: "RSS_KB RC KEY VALUE ..." (-v's load line)
	local f=$1
	shift
	dropcache
	echo "== llmfs-run -m $(basename "$f") -n 1 -v $*" >>"$OUT/bench.log"
	timeout --kill-after=5 90 python3 -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, text=True)
sys.stderr.write(r.stderr)
load = [l[len("llmfs-run: load "):] for l in r.stderr.splitlines()
        if l.startswith("llmfs-run: load ")]
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode,
      load[-1] if load else "")
' "$BIN/llmfs-run" -m "$f" -p "Once upon a time" --temp 0 -n 1 -v \
		"$@" 2>>"$OUT/bench.log"
}
loadbench() { # gguf, name
	local f=$1 j=$WORK/bench-$2.json k a d h
	d=$(fig "$j" disk_gbs)
	h=$(fig "$j" h2d_gbs)
	row "$2" load "llmfs-run -n 1 --placement 'all gpu0', cold: straight | host first (--move-after-load); disk alone ${d:--}, pinned h2d ${h:--} GB/s (bench)"
	for k in straight moved; do
		fits 40 || { row "" "" "$k: no time left"; continue; }
		a=$(loadrun "$f" --placement "all gpu0" \
			$([ $k = moved ] && echo --move-after-load))
		row "" "" "$(awk -v k=$k '{ for (i = 3; i < NF; i += 2) v[$i] = $(i + 1)
			printf "%-8s open->first token %s ms, ring %s GB/s (%s s), host read %s s, host RSS peak %.0f MiB%s",
				k, v["open_to_first_token_ms"], v["stage_gbs"], v["stage_s"],
				v["host_read_s"], $1 / 1024, ($2 != 0 ? " (exit " $2 ")" : "") }' <<<"$a")"
	done
}
if part gpu0bench && [ -n "${GPU_CHECK_LOAD_MODEL:-}" ]; then
	# a dry run's (the simulator): any model file
	loadbench "$GPU_CHECK_LOAD_MODEL" "$(basename "$GPU_CHECK_LOAD_MODEL" .gguf)"
elif part gpu0bench && [ -f "$vocab" ] && [[ " $models " == *" 8b-q4_k_m "* ]]; then
	if fits 60 && write_model 8b-q4_k_m; then
		loadbench "$WORK/8b-q4_k_m.gguf" 8b-q4_k_m
	else
		row 8b-q4_k_m skip "load: no time left"
	fi
fi
if part gpu0bench && [ -f "$vocab" ]; then
	for m in 8b-q4_k_m 0.6b-q4_k_m; do
		[[ " $models " == *" $m "* ]] || continue
		if fits 40; then gpu0bench "$m"; else row "$m" skip "gpu0bench: no time left"; fi
	done
	# the simulator's count is the same on any machine (34 s of the
	# 2026-11-27 call): here only when asked, else tools/launch-count.sh
	# at home
	if [ -n "${GPU_CHECK_LAUNCHES:-}" ]; then
		row launches gpu0 "the backend's decode step on the simulator (tools/launch-count.sh)"
		if fits 20; then launches; else row "" "" "no time left"; fi
	fi
	# GPU_CHECK_MOE: the model (moe-tiny in a dry run; empty: none)
	m=${GPU_CHECK_MOE-moe-q4_k_m}
	if [ -z "$m" ]; then
		:
	elif fits 60; then moebench "$m"; else row "$m" skip "moe: no time left"; fi
fi
if part bench && [ -f "$vocab" ] && [[ " $models " == *" 8b-q8_0 "* ]]; then
	if fits 90; then bench 8b-q8_0; else row 8b-q8_0 skip "no time left"; fi
fi
# What the CPU's bits cost in attention (attention.cu), per model: tg128
# from an empty context and tg64 at depth 4096, for the default (the
# CPU's order below 256 positions, split-K deeper: walk), the staged
# walk (the same bits, its K and V rows in shared memory first:
# LLMFS_CUDA_ATT_WALK=staged; staged-all at every depth), the CPU's
# order at every depth (LLMFS_CUDA_ATT_EXACT=1000000) a block a chunk of
# 256 (chunks), a block a row walking its chunks in turn (row: the cost
# of the whole-row walk, LLMFS_CUDA_ATT_WALK=row), warp 0 alone a chunk
# (warp0-all, the walk before att_walk_cpu), split-K everywhere
# (LLMFS_CUDA_ATT_EXACT=0); libm's expf against CUDA's in the walk
variant() { # model, name, env...
	local m=$1 name=$2 j=$WORK/bench-att-$1-$2.json
	shift 2
	echo "== attention $m $name: $*" >>"$OUT/bench.log"
	env "$@" timeout 90 "$BIN/llmfs-cuda-bench" -m "$WORK/$m.gguf" \
		-r 1 -p 64 -n 128 -d 4096 -g 64 -s 0 --matmul cublas -j "$j" \
		>>"$OUT/bench.log" 2>&1
	result "att-$name" $? "$m tg128 $(fig "$j" tg128), tg64@d4096 $(fig "$j" tg64@d4096) t/s"
}
# not by default (GPU_CHECK_PARTS=attention): about 20 s a variant
if part attention && [ -f "$vocab" ]; then
	for m in ${GPU_CHECK_PART_MODELS:-0.6b-q4_k_m 8b-q4_k_m}; do
		fits 100 && write_model "$m" || continue
		variant "$m" walk
		fits 40 && variant "$m" staged LLMFS_CUDA_ATT_WALK=staged
		fits 40 && variant "$m" split-k LLMFS_CUDA_ATT_EXACT=0
		fits 40 && variant "$m" chunks LLMFS_CUDA_ATT_EXACT=1000000
		fits 40 && variant "$m" staged-all LLMFS_CUDA_ATT_WALK=staged \
			LLMFS_CUDA_ATT_EXACT=1000000
		fits 40 && variant "$m" row LLMFS_CUDA_ATT_WALK=row \
			LLMFS_CUDA_ATT_EXACT=1000000
		fits 40 && variant "$m" warp0-all LLMFS_CUDA_ATT_WALK=warp0 \
			LLMFS_CUDA_ATT_EXACT=1000000
		fits 40 && variant "$m" cuda-exp LLMFS_CUDA_ATT_FAST_EXP=1
	done
fi
# What the quantized products' CPU order costs: the default (mmv.cu
# mmv_xw, a warp a row, its blocks gathered 4U at once, the FMAs applied
# in order; mmv_x for 8 columns) against mmv_x everywhere
# (LLMFS_CUDA_MMV=walk: 8 lanes a row walking its blocks), mmv_xw
# everywhere (warp: its x16 steps are the 8 columns' comparison) and
# mmv_q (lanes: a block over 4-16 lanes, 1-4 warps a row, not the CPU's
# bits): the 8B and the 0.6B, each way in turn, the 0.6B's warp and
# lanes only if time is left
mmv_variant() { # model, name, env...
	local m=$1 name=$2 j=$WORK/bench-mmv-$1-$2.json
	shift 2
	echo "== mmv $m $name: $*" >>"$OUT/bench.log"
	env "$@" timeout 60 "$BIN/llmfs-cuda-bench" -m "$WORK/$m.gguf" \
		-r 2 -d 0 -s 1,4,16 -g 32 --matmul cublas -j "$j" >>"$OUT/bench.log" 2>&1
	result "mmv-$name" $? "$m tg128 $(fig "$j" tg128) ($(fig "$j" tg128_roof_pct)%), tg32x16 $(fig "$j" tg32x16) t/s; $(steps "$j" 32)"
}
# a step's ms for 1, 4 and 16 sequences (llmfs-cuda-bench -s 1,4,16 -g G)
steps() { # json, G
	printf 'ms a step x1 %s x4 %s x16 %s (x16/x1 %s)' "$(fig "$1" tg$2x1_step_ms)" \
		"$(fig "$1" tg$2x4_step_ms)" "$(fig "$1" tg$2x16_step_ms)" \
		"$(ratio "$(fig "$1" tg$2x16_step_ms)" "$(fig "$1" tg$2x1_step_ms)")"
}
if part mmv && [ -f "$vocab" ]; then
	for m in ${GPU_CHECK_PART_MODELS:-8b-q4_k_m 0.6b-q4_k_m}; do
		fits 50 && write_model "$m" || continue
		mmv_variant "$m" cpu-order LLMFS_CUDA_MMV=cpu
		fits 25 && mmv_variant "$m" walk LLMFS_CUDA_MMV=walk
		[ "$m" = 8b-q4_k_m ] || fits 70 || continue
		fits 25 && mmv_variant "$m" warp LLMFS_CUDA_MMV=warp
		fits 25 && mmv_variant "$m" lanes LLMFS_CUDA_MMV=lanes
	done
fi
# Many sequences a step (not by default): the module's step for 1, 4 and
# 16 sequences with each product kernel, then the backend's (the mount's
# path), each beside one sequence's step
batch_variant() { # model, name, env... [-- llmfs-cuda-bench args (--matmul cublas)]
	local m=$1 name=$2 j=$WORK/bench-batch-$1-$2.json env=() args=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do env+=("$1") && shift; done
	[ $# -gt 0 ] && shift && args=("$@")
	[ ${#args[@]} -gt 0 ] || args=(--matmul cublas)
	echo "== batch $m $name: ${env[*]} -- ${args[*]}" >>"$OUT/bench.log"
	env "${env[@]}" timeout 60 "$BIN/llmfs-cuda-bench" -m "$WORK/$m.gguf" \
		-r 2 -p 16 -n 1 -d 0 -s 1,4,16 -g 32 "${args[@]}" -j "$j" \
		>>"$OUT/bench.log" 2>&1
	result "" $? "$(printf '%-12s %s' "$name" "$(steps "$j" 32)")"
}
# past 8 rows on int8 tensor cores (mmq.cu), where this build has them
batch_mma=
"$BIN/llmfs-cuda-bench" --help 2>&1 | grep -q 'mma' &&
	batch_mma="
mma-past-8 LLMFS_CUDA_MMV_ROWS=8 -- --matmul mma"
batch_backend() { # model, name, env...
	local m=$1 s a line
	local -A ms=()
	line=$(printf '%-12s ms a step' "$2")
	shift 2
	for s in 1 4 16; do
		fits 25 || break
		# the environment in the substitution's subshell alone
		a=$(for e in "$@"; do export "${e?}"; done
			ebench "$m" "batch-x$s" gpu -n 32 -s $s -r 2)
		# t/s of s sequences -> ms a step
		[ -n "$a" ] && ms[$s]=$(awk -v t="$a" -v s=$s 'BEGIN { printf "%.2f", 1e3 * s / t }')
		line="$line x$s ${ms[$s]:--}"
	done
	row "" "" "$line (x16/x1 $(ratio "${ms[16]:-}" "${ms[1]:-}"))"
}
if part batch && [ -f "$vocab" ]; then
	# GPU_CHECK_BATCH_MODELS: dense-tiny in a dry run
	for m in ${GPU_CHECK_BATCH_MODELS:-0.6b-q4_k_m 8b-q4_k_m}; do
		fits 60 && write_model "$m" || continue
		row "$m" batch "a step of 1, 4, 16 sequences 32 deep: module (llmfs-cuda-bench), then backend (llmfs-bench)"
		while read -r name env; do
			[ -n "$name" ] || continue
			# shellcheck disable=SC2086
			fits 30 && batch_variant "$m" "$name" $env
		done <<<"${GPU_CHECK_BATCH_VARIANTS:-cpu-order LLMFS_CUDA_MMV=cpu
cols-16 LLMFS_CUDA_MMV_COLS=16
walk LLMFS_CUDA_MMV=walk
warp LLMFS_CUDA_MMV=warp
lanes LLMFS_CUDA_MMV=lanes
old LLMFS_CUDA_MMV=old$batch_mma}"
		# the backend's line past which products leave the mat-vec
		# kernel (LLMFS_CUDA_MMV_ROWS, as the module's): 16 rows then run
		# launch by launch on cuBLAS, or on the int8 tensor cores
		fits 40 && batch_backend "$m" backend
		fits 40 && batch_backend "$m" be-cols-16 LLMFS_CUDA_MMV_COLS=16
		fits 40 && batch_backend "$m" be-rows-8 LLMFS_CUDA_MMV_ROWS=8
		[ -n "$batch_mma" ] && fits 40 &&
			batch_backend "$m" be-rows-8-mma LLMFS_CUDA_MMV_ROWS=8 \
				LLMFS_CUDA_MATMUL=mma
	done
fi
# The int8 tensor-core prefill (mmq.cu; opt-in: --matmul mma, and
# LLMFS_CUDA_MATMUL=mma for the engine's backend) against cuBLAS on
# dequantized halves, what deciding the default takes: pp512 of
# llmfs-cuda-bench each way on the 0.6B and 8B Q4_K_M and the 8B Q8_0
# (written here if the bench part did not), beside llama.cpp's pp512
# (the bench part's figure, else measured here), then the backend's
# pp512 (llmfs-bench, all on gpu0) with it; correctness first: its
# products of every type against the Q8_1-rounded double product
# (test_cuda's mma tests) under racecheck where the sanitizer is (the
# cp.async stages share shared memory across warps), and
# test_cuda_model's prompts past 32 rows on it against cuBLAS. Not by
# default: GPU_CHECK_PARTS="mmq" GPU_CHECK_SECONDS=300 (about 250 s with
# the three models to write)
mmq_pp() { # model
	local m=$1 j=$WORK/bench-mmq-$1 a b c e
	for k in cublas mma; do
		echo "== mmq $m --matmul $k" >>"$OUT/bench.log"
		limited 45 "$OUT/bench.log" "$BIN/llmfs-cuda-bench" \
			-m "$WORK/$m.gguf" -r 2 -n 1 -d 0 -s 0 --matmul $k \
			-j "$j.$k.json"
	done
	a=$(fig "$j.mma.json" pp512)
	b=$(fig "$j.cublas.json" pp512)
	c=
	[ -s "$WORK/llama-$m.pp512" ] && c=$(cat "$WORK/llama-$m.pp512")
	[ -z "$c" ] && [ -n "$llama" ] && fits 40 &&
		c=$(lb "$WORK/$m.gguf" -p 512 -n 0)
	e=
	fits 30 && e=$(LLMFS_CUDA_MATMUL=mma ebench "$m" pp512-mma gpu -p 512 -r 2)
	row "mmq" "" "$(printf '%-11s %-12s mma %8s t/s  cuBLAS %8s  %-6s llama.cpp %8s  %-6s backend mma %s' \
		pp512 "$m" "${a:--}" "${b:--}" "$(ratio "$a" "$b")" "${c:--}" \
		"$(ratio "$a" "$c")" "${e:--}")"
}
if part mmq; then
	if ! part tests; then
		LLMFS_CUDA_TESTS=mma limited 60 "$OUT/tests.log" "$BIN/test_cuda"
		result mmq-kernel $? "$(checks "$OUT/tests.log")"
	fi
	command -v compute-sanitizer >/dev/null && fits 60 &&
		sanitize racecheck 60 matmul_mma
	LLMFS_CUDA_MODELS=kquant limited 90 "$OUT/tests.log" \
		"$BIN/test_cuda_model"
	result mmq-model $? "$(grep -E 'int8 tensor cores' "$OUT/tests.log" | tail -n 1 | sed 's/^gpu *//' | cut -c1-90)"
	for m in ${GPU_CHECK_PART_MODELS:-0.6b-q4_k_m 8b-q4_k_m 8b-q8_0}; do
		[ -f "$vocab" ] || break
		if [ $m = 8b-q8_0 ] && [ ! -s "$WORK/$m.gguf" ]; then
			fits 150 && write_model "$m" || continue
		fi
		fits 60 && write_model "$m" || continue
		fits 40 && mmq_pp "$m"
	done
fi
if [ -n "$have_sanitizer" ]; then
	if fits 45; then sanitize synccheck 45 attention,moe,quantize; else row synccheck skip "no time left"; fi
fi

# ---- where a decode step's time goes (profile; not by default) ---------------
find_tool() { # name: on PATH, or where the toolkits put it
	command -v "$1" 2>/dev/null && return
	ls -d /usr/local/cuda/bin/"$1" /opt/nvidia/nsight-*/bin/"$1" \
		/opt/nvidia/nsight-*/"$1" /usr/local/cuda/nsight-*/bin/"$1" \
		/usr/local/cuda/nsight-*/"$1" 2>/dev/null | head -n 1
}
profile() {
	local m=${GPU_CHECK_PART_MODELS:-0.6b-q4_k_m} p=$OUT/profile.log nsys ncu rc
	m=${m%% *}
	# 16 decode steps (-n 16) after a 16-token prompt, warm-up and one
	# repetition: 32 steps in all, every kernel of a step in the sums
	local run=("$BIN/llmfs-cuda-bench" -m "$WORK/$m.gguf" -p 16 -n 16 -d 0 -s 0 -r 1)
	nsys=$(find_tool nsys)
	ncu=$(find_tool ncu)
	if [ -z "$nsys" ] && [ -z "$ncu" ]; then
		row profile skip "neither nsys nor ncu on this image"
		return
	fi
	write_model "$m" || return
	if [ -n "$nsys" ]; then
		echo "== $nsys profile ${run[*]}" >>"$p"
		rm -f "$WORK/prof.nsys-rep" "$WORK/prof.sqlite"
		limited 90 "$p" "$nsys" profile --trace cuda --sample none \
			--cpuctxsw none -o "$WORK/prof" --force-overwrite true "${run[@]}"
		rc=$?
		[ $rc = 0 ] || { result profile $rc "nsys profile: profile.log"; return; }
		# the report's name before nsys 2023.4: gpukernsum
		"$nsys" stats --report cuda_gpu_kern_sum --format csv \
			"$WORK/prof.nsys-rep" >"$WORK/prof.csv" 2>>"$p"
		grep -q '^"\{0,1\}Time' "$WORK/prof.csv" ||
			"$nsys" stats --report gpukernsum --format csv \
				"$WORK/prof.nsys-rep" >"$WORK/prof.csv" 2>>"$p"
		# Time (%), Total Time (ns), Instances, Avg, Med, Min, Max, StdDev, Name
		python3 - "$WORK/prof.csv" "$WORK/prof.top" <<'PY' >>"$p" 2>&1
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) >= 9]
head = next(i for i, r in enumerate(rows) if r[0].startswith("Time"))
top = rows[head + 1:head + 13]
print("%6s %10s %8s %9s  %s" % ("time%", "total ms", "calls", "avg us", "kernel"))
for r in top:
    print("%6s %10.2f %8s %9.1f  %s" % (r[0], float(r[1]) / 1e6, r[2], float(r[3]) / 1e3, r[8][:100]))
open(sys.argv[2], "w").write("; ".join("%s %s%%" % (r[8].split("(")[0].split("<")[0][:28], r[0]) for r in top[:3]))
PY
	elif [ -n "$ncu" ]; then
		# ncu replays each kernel: the first 400 launches after the load
		echo "== $ncu ${run[*]}" >>"$p"
		limited 150 "$WORK/ncu.csv" "$ncu" --csv --metrics gpu__time_duration.sum \
			--launch-skip 200 --launch-count 400 "${run[@]}"
		rc=$?
		[ $rc = 0 ] || { tail -n 20 "$WORK/ncu.csv" >>"$p"; result profile $rc "ncu: profile.log"; return; }
		python3 - "$WORK/ncu.csv" "$WORK/prof.top" <<'PY' >>"$p" 2>&1
import csv, sys, collections
tot, cnt = collections.Counter(), collections.Counter()
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        v = float(r["Metric Value"].replace(",", ""))
        v *= {"nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(r.get("Metric Unit"), 1)
        tot[r["Kernel Name"]] += v
        cnt[r["Kernel Name"]] += 1
s = sum(tot.values()) or 1
print("%6s %10s %8s %9s  %s" % ("time%", "total ms", "calls", "avg us", "kernel"))
top = tot.most_common(12)
for k, v in top:
    print("%6.1f %10.2f %8d %9.1f  %s" % (100 * v / s, v / 1e6, cnt[k], v / cnt[k] / 1e3, k[:100]))
open(sys.argv[2], "w").write("; ".join("%s %.1f%%" % (k.split("(")[0][:28], 100 * v / s) for k, v in top[:3]))
PY
	fi
	row profile ok "$(cat "$WORK/prof.top" 2>/dev/null | cut -c1-110); profile.log"
}
if part profile && [ -f "$vocab" ]; then
	if fits 60; then profile; else row profile skip "no time left"; fi
fi
# ---- the planner's alternatives measured (placement; not by default) --------
if part placement; then
	src=$WORK/src
	[ -f "$src/tools/bench-placement.sh" ] || {
		rm -rf "$src" && mkdir -p "$src" &&
			tar -C "$src" -xzf "$CARRY/src.tar.gz"
	}
	left=$((${GPU_CHECK_SECONDS:-250} - (SECONDS - T0)))
	if [ ! -f "$src/tools/bench-placement.sh" ]; then
		row placement skip "no tools/bench-placement.sh in the carried source"
	elif [ $left -lt 60 ]; then
		row placement skip "no time left"
	else
		BIN=$BIN WORK=$WORK OUT=$WORK/placement VOCAB=$vocab \
			PLACEMENT_SECONDS=$((left - 20)) \
			limited $left "$OUT/placement.log" bash "$src/tools/bench-placement.sh"
		result placement $? "issue 27's cases: placement.log"
		while read -r l; do
			row "" "" "$l"
		done < <(sed -n '/^==== bench-placement/,$p' "$WORK/placement/placement.txt" 2>/dev/null | cut -c1-200)
		cat "$WORK/placement/placement.log" >>"$OUT/placement.log" 2>/dev/null
	fi
fi

# ---- llama.cpp's figures on the same card (llama; with --llama-src) ---------
# After the build above: llmfs-cuda-bench again on each bench model, now
# that the cores are quiet, then llama-bench's same three figures (-fa
# 1, F16 cache, -r 3): the 8B Q4_K_M first, while the budget lasts.
llama_part() {
	local m f j k t0=$SECONDS
	in_llama_part=1
	while kill -0 "$llama_build" 2>/dev/null && fits 60; do sleep 2; done
	if kill -0 "$llama_build" 2>/dev/null; then
		stop_llama_build
		row llama TIME "not built within the budget ($(grep -cE '^\[[0-9]+/' "$llama_build_log") build steps): bench.log"
		tail -n 5 "$llama_build_log" >>"$OUT/bench.log"
		return
	fi
	{ echo "== llama-bench's build"; tail -n 25 "$llama_build_log"; } >>"$OUT/bench.log"
	[ -x "$WORK/llama-bench" ] ||
		{ row llama FAIL "the build failed: bench.log"; return; }
	llama=$WORK/llama-bench
	row llama ok "$(grep -m 1 'llama-bench built' "$llama_build_log"), waited $((SECONDS - t0)) s"
	for m in $models; do
		f=$WORK/$m.gguf j=$WORK/bench-$m.json
		[ -s "$f" ] || continue
		fits 30 || { row "$m" skip "no time left for llama.cpp's figures"; continue; }
		# llmfs's figures of the bench part (measured beside the build:
		# on the H100 the 8B's tg128 was 141.6 t/s then, 143.1 alone),
		# else measured now
		if [ ! -s "$j" ]; then
			j=$WORK/bench-$m-quiet.json
			echo "== $m, beside llama-bench" >>"$OUT/bench.log"
			limited 60 "$OUT/bench.log" "$BIN/llmfs-cuda-bench" -m "$f" \
				-r 2 --matmul cublas -s 0 -j "$j"
		fi
		row "$m" "" "beside llama.cpp's CUDA build, this card, this run:"
		for k in pp512 tg128 tg64@d4096; do
			figure_row "$m" "$j" "$k"
		done
	done
}
if [ -n "$llama_build" ]; then
	llama_part
fi

# one JSON of every bench (the call brings back at most 8 files)
python3 - "$WORK" "$OUT/bench.json" <<'PY' 2>/dev/null
import glob, json, os, sys
out = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.json*"))):
    try:
        out[os.path.basename(f)] = json.load(open(f))
    except Exception:
        pass
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
exit 0
