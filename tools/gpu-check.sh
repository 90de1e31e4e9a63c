#!/usr/bin/env bash
# tools/gpu-check.sh: every GPU test and the GPU bench on a lent GPU
# machine, in one run of under 5 minutes, a short table last, full logs
# under $OUT. Exit 77 without a GPU (so it can sit in a test list).
#
# Prepare here, then make one device call from the repository root:
#
#   tools/gpu-carry.sh --build          # .gpu-carry/: programs, models
#   run(command="bash .gpu-carry/gpu-check.sh", carry=[".gpu-carry"], timeout_s=330)
#
#   tools/gpu-carry.sh --llama          # then llama.cpp's anchor
#   run(command="bash .gpu-carry/gpu-check.sh", carry=[".gpu-carry"], timeout_s=330)
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
#             (every shared model's golden prompts with all of it and with
#             layer 0 on gpu0; test_multidevice: a model split with the
#             CPU gives the CPU's tokens, placement moves mid-generation
#             change none) and tests/fs/gpu0.sh (llmfs-run and the mount
#             on gpu0, placement writes cpu <-> gpu0 mid-answer)
#   bench     models of real shape written from random valid blocks
#             (Qwen3-8B Q4_K_M and Q8_0, Qwen3-0.6B Q4_K_M, 152k
#             vocabulary): llmfs-cuda-bench's load GB/s (beside disk and
#             pinned h2d), pp512 (int8 and cuBLAS), tg128, tg64 at depth
#             4096, 16 sequences, each beside the HBM roofline measured in
#             the same run; and llama.cpp's llama-bench when carried
#
# With no carried programs (or if they do not run on this image) it
# builds them here: make with NVCC_ARCH=-arch=sm_90 (needs the Makefile's
# Debian packages' libraries; the CUDA image may lack them).
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
trap table EXIT
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
	command -v compute-sanitizer xz zstd python3
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
		NVCC_ARCH=-arch=sm_90 CFLAGS="-O2 -g" all tests; then
		mkdir -p "$WORK/bin"
		cp "$src"/build/bin/* "$src"/build/tests/engine/test_cuda \
			"$src"/build/tests/engine/test_cuda_model \
			"$src"/build/tests/engine/test_golden \
			"$src"/build/tests/engine/test_multidevice \
			"$src"/build/tests/io/test_stage "$WORK/bin/" 2>/dev/null
		BIN=$WORK/bin
		export LLMFS_CUDA_MODULE=$src/build/lib/llmfs-cuda.so
	else
		row build FAIL "carried programs do not run and make failed: env.log"
		exit 1
	fi
fi
gpus=$("$BIN/llmfs-gpus" 2>&1)
result env $? "$(head -n 1 <<<"$gpus" | cut -c1-110)"

# ---- the shared test data ----------------------------------------------------
export SHARED=$WORK/shared
if [ -f "$CARRY/shared.tar.xz" ] && [ ! -d "$SHARED/models" ]; then
	unpack "$CARRY/shared.tar.xz" "$SHARED" || row shared FAIL "cannot unpack"
fi

# ---- tests and bench, the most telling first --------------------------------
# GPU_CHECK_PARTS: which parts run (a later call of a lease that wants
# one figure again); all by default
part() { [[ " ${GPU_CHECK_PARTS:-tests gpu0 models sanitizer bench attention} " == *" $1 "* ]]; }

# Check's forked tests: the device is opened in each child (test_cuda*.c)
checks() { grep -E '^[0-9]+%: Checks' "$1" | tail -n 1; }
# whether s more seconds fit in the 5 minutes (the call's limit is later)
fits() { [ $((SECONDS - T0 + $1)) -le ${GPU_CHECK_SECONDS:-290} ]; }

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
	for f in test_golden test_multidevice; do ln -sf "$BIN/$f" "$b/tests/engine/$f"; done
	for f in llmfs llmfs-run; do ln -sf "$BIN/$f" "$b/bin/$f"; done
	BUILD=$b limited 100 "$OUT/gpu0.log" bash "$src/tests/engine/gpu0.sh"
	result gpu0-engine $? "golden all/blk.0 on gpu0, split, moves: gpu0.log"
	while read -r l; do
		row "" "" "$l"
	done < <(grep -E 'matched prefixes|^  # ' "$OUT/gpu0.log" | sed 's/^ *//' | cut -c1-120)
	if fits 60; then
		echo "== tests/fs/gpu0.sh" >>"$OUT/gpu0.log"
		BUILD=$b GPU0_TOKENS=${GPU0_TOKENS:-200} limited 60 "$OUT/gpu0.log" bash "$src/tests/fs/gpu0.sh"
		result gpu0-mount $? "$(grep -E "checks, [0-9]+ failed|^skip" "$OUT/gpu0.log" | tail -n 1 | cut -c1-100); gpu0.log"
	else
		row gpu0-mount skip "no time left"
	fi
fi
if ! part models; then
	:
elif [ -d "$SHARED/golden" ]; then
	LLMFS_CUDA_PROMPTS=8 limited 150 "$OUT/models.log" "$BIN/test_cuda_model"
	result models $? "$(checks "$OUT/models.log")"
	while read -r l; do
		row "" "" "$l"
	done < <(grep '^gpu ' "$OUT/models.log" | sed 's/^gpu //' |
		grep -v 'left out' | cut -c1-120)
else
	row models skip "no shared models carried (gpu-carry.sh --llama carries none)"
fi

sanitize() { # tool, seconds, tests
	CK_FORK=no LLMFS_CUDA_TESTS=$3 limited "$2" "$OUT/sanitizer.log" \
		compute-sanitizer --tool "$1" --error-exitcode 99 "$BIN/test_cuda"
	local rc=$?
	# 99: the sanitizer's errors; another: a test failed under it
	result "$1" $rc "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer.log" | tail -n 1 | sed 's/=* *//')$([ $rc != 0 ] && [ $rc != 99 ] && echo "; a test failed under it:" \
		"$(grep -m 1 -oE '[a-z_0-9]+:[0-9]+: [^(]{0,60}' "$OUT/sanitizer.log" | tail -n 1)")"
}
have_sanitizer=
command -v compute-sanitizer >/dev/null && have_sanitizer=1
# one process (CK_FORK=no): the sanitizer would not follow Check's forks
if ! part sanitizer; then
	have_sanitizer=
elif [ -n "$have_sanitizer" ]; then
	sanitize memcheck 100 ""
	sanitize racecheck 45 attention
else
	row sanitizer skip "compute-sanitizer not on this image"
fi

vocab=$SHARED/models/tiny-qwen2-bpe152k-legacyq.gguf
declare -A shape=(
	[8b-q4_k_m]="--arch qwen3 --embd 4096 --layers 36 --heads 32 --kv-heads 8 --head-dim 128 --ff 12288 --type q4_k_m"
	[8b-q8_0]="--arch qwen3 --embd 4096 --layers 36 --heads 32 --kv-heads 8 --head-dim 128 --ff 12288 --type q8_0"
	[0.6b-q4_k_m]="--arch qwen3 --embd 1024 --layers 28 --heads 16 --kv-heads 8 --head-dim 128 --ff 3072 --type q4_k_m"
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
	timeout 60 "$llama" -m "$m" -ngl 99 -fa 1 -r 3 "$@" -o csv 2>>"$OUT/llama.log" |
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
bench() { # model
	local m=$1 f=$WORK/$1.gguf j=$WORK/bench-$1.json a b k
	write_model "$m" || return
	# prefill through cuBLAS on dequantized halves (the faster: 3101
	# against 550 t/s on the 8B, H100), so the depth fills are quick
	echo "== $m" >>"$OUT/bench.log"
	limited 100 "$OUT/bench.log" "$BIN/llmfs-cuda-bench" -m "$f" -r 3 \
		--matmul cublas -j "$j"
	a=$?
	[ $a = 0 ] || { result "$m" $a "llmfs-cuda-bench: bench.log"; return; }
	# the int8 prefill (the CPU's numbers) beside it
	limited 40 "$OUT/bench.log" "$BIN/llmfs-cuda-bench" -m "$f" -r 2 -n 1 \
		-d 0 -s 0 --matmul mmv -j "$j.int8"
	row "$m" ok "load $(fig "$j" load_gbs) GB/s (disk alone $(fig "$j" disk_gbs), pinned h2d $(fig "$j" h2d_gbs)); hbm copy $(fig "$j" hbm_copy_gbs) GB/s"
	for k in pp512 tg128 tg64@d4096 tg64x16; do
		a=$(fig "$j" "$k")
		b=
		if [ -n "$llama" ]; then
			case $k in
			pp512) b=$(lb "$f" -p 512 -n 0) ;;
			tg128) b=$(lb "$f" -p 0 -n 128) ;;
			tg64@d4096) b=$(lb "$f" -p 0 -n 64 -d 4096) ;;
			esac
		fi
		row "" "" "$(printf '%-11s llmfs %8s t/s  llama.cpp %8s  %-6s roofline %s%%%s' \
			"$k" "$a" "${b:--}" "$(ratio "$a" "$b")" \
			"$(fig "$j" "$k"_roof_pct)" \
			"$([ $k = pp512 ] && echo "(cuBLAS); int8 $(fig "$j.int8" pp512)")")"
	done
}
if ! part bench; then
	:
elif [ ! -f "$vocab" ]; then
	row bench skip "no vocabulary carried"
else
	for m in $models; do
		if fits 90; then bench "$m"; else row "$m" skip "no time left"; fi
	done
fi
# What the CPU's bits cost in the attention of rows below 256 positions
# (attention.cu): libm's expf there, CUDA's, and no CPU order at all
variant() { # name, env...
	local name=$1 j=$WORK/bench-att-$1.json
	shift
	echo "== attention $name: $*" >>"$OUT/bench.log"
	env "$@" timeout 60 "$BIN/llmfs-cuda-bench" -m "$WORK/8b-q4_k_m.gguf" \
		-r 2 -d 0 -s 16 -g 32 --matmul cublas -j "$j" >>"$OUT/bench.log" 2>&1
	result "att-$name" $? "8b-q4_k_m pp512 $(fig "$j" pp512), tg128 $(fig "$j" tg128) ($(fig "$j" tg128_roof_pct)%), tg32x16 $(fig "$j" tg32x16) t/s"
}
if part attention && [ -f "$vocab" ] && fits 80 && write_model 8b-q4_k_m; then
	variant libm-exp LLMFS_CUDA_ATT_EXACT=256
	fits 25 && variant cuda-exp LLMFS_CUDA_ATT_FAST_EXP=1
	fits 25 && variant no-cpu-order LLMFS_CUDA_ATT_EXACT=0
fi
if [ -n "$have_sanitizer" ]; then
	if fits 45; then sanitize synccheck 45 attention,moe,quantize; else row synccheck skip "no time left"; fi
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
