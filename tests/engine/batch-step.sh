#!/usr/bin/env bash
# Sequences decoding together share every kernel of a step: a decode
# step of 9 sequences on the engine's CUDA backend (the mount's path:
# llmfs-bench -s, every tensor on gpu0) launches the very kernels a step
# of one sequence launches, each over all 9 rows, none per sequence
# (tools/step-trace.sh over the module's simulator). 9: past the 8 rows
# the mat-vec kernel takes a weight read. Documentation/gpu.md, "Many
# sequences a step", says what a card then spends on them. Then the
# module's LLMFS_CUDA_MMV_ROWS: with 4, an 8-row prompt of F16 weights
# leaves the mat-vec kernel (for cuBLAS: its F16 conversions run), with
# the default 32 it stays; the backend's 9-row decode step likewise.
# And LLMFS_CUDA_MMV_COLS=16 (opt-in): a 9-row step's quantized
# products read each weight once (mmv_x of 16 columns), on both paths.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
[ -f "$BUILD/lib/llmfs-cuda-sim.so" ] ||
	{ echo "no CUDA simulator ($BUILD/lib/llmfs-cuda-sim.so: a build without nvcc)"; exit 77; }
[ -x "$BUILD/bin/llmfs-bench" ] || { echo "FAIL: $BUILD/bin/llmfs-bench is not built"; exit 1; }
failed=0
trace() { # model, sequences, [--backend]: tools/step-trace.sh's lines
	# shellcheck disable=SC2086
	BUILD=$BUILD tools/step-trace.sh ${3:-} "$1" "$2"
}
kernels() { # a trace: the kernels of its step
	awk '$1 == "step" { print $6 }' <<<"$1"
}
# a trace: its launches of mmv_x of 16 columns, of 8
widths() {
	awk '$3 ~ /^mmv_x</ && $4 == "16," { w += $1 }
		$3 ~ /^mmv_x</ && $4 == "8," { e += $1 }
		END { print w + 0, e + 0 }' <<<"$1"
}
mixq=$SHARED/models/tiny-qwen3-bpe16k-mixq.gguf
for m in stories260K tiny-qwen3-bpe16k-mixq; do
	f=$SHARED/models/$m.gguf
	one=$(kernels "$(trace "$f" 1 --backend)")
	t9=$(trace "$f" 9 --backend)
	nine=$(kernels "$t9")
	[ "$f" = "$mixq" ] && def=$(widths "$t9")
	if [ -z "$one" ] || [ "$one" != "$nine" ]; then
		echo "FAIL: $m: a step of 1 sequence launches ${one:-?} kernels, of 9 ${nine:-?}"
		failed=1
	else
		echo "ok: $m: $one kernels a step, for 1 sequence and for 9"
	fi
done
# LLMFS_CUDA_MMV_COLS=16: a 9-row step's quantized products take mmv_x
# of 16 columns (a weight read for the 9 rows), none of 8, on both
# paths; by default (the backend's step above) the reverse
for path in --backend module; do
	wide=$(widths "$(LLMFS_CUDA_MMV_COLS=16 trace "$mixq" 9 \
		"${path#module}")")
	if [ "${def% *}" = 0 ] && [ "${def#* }" != 0 ] &&
		[ "${wide% *}" != 0 ] && [ "${wide#* }" = 0 ]; then
		echo "ok: the ${path#--} path's 9-row step: LLMFS_CUDA_MMV_COLS=16 launches mmv_x of 16 columns (${wide% *}), none of 8 (by default ${def#* })"
	else
		echo "FAIL: the ${path#--} path's 9-row step, launches of mmv_x of 16 and 8 columns: ${def:-?} by default, ${wide:-?} with LLMFS_CUDA_MMV_COLS=16"
		failed=1
	fi
done
# the kernels of llmfs-cuda-bench's 8-row prompt named like $2
count() { # LLMFS_CUDA_MMV_ROWS, pattern
	local t
	t=$(mktemp)
	LLMFS_CUDA_MMV_ROWS=$1 LLMFS_CUDA_MODULE=$BUILD/lib/llmfs-cuda-sim.so \
		LLMFS_SIM_TRACE=$t "$BUILD/bin/llmfs-cuda-bench" \
		-m "$SHARED/models/tiny-qwen3-bpe16k-f16.gguf" -p 8 -n 1 -d 0 \
		-s 0 -r 1 >/dev/null && grep -c "$2" "$t"
	rm -f "$t"
}
plain=$(count "" half)
four=$(count 4 half)
if [ "$plain" = 0 ] && [ "${four:-0}" -gt 0 ]; then
	echo "ok: LLMFS_CUDA_MMV_ROWS=4 sends an 8-row prompt to cuBLAS ($four F16 conversions), 32 keeps it on the mat-vec kernel"
else
	echo "FAIL: F16 conversions of an 8-row prompt: ${plain:-?} by default, ${four:-?} with LLMFS_CUDA_MMV_ROWS=4"
	failed=1
fi
# the backend's decode step of 9 sequences of F16 weights: its kernels
# named like $2
step_count() { # LLMFS_CUDA_MMV_ROWS, pattern
	LLMFS_CUDA_MMV_ROWS=$1 BUILD=$BUILD tools/step-trace.sh --backend \
		"$SHARED/models/tiny-qwen3-bpe16k-f16.gguf" 9 |
		awk -v p="$2" '$3 ~ p { n += $1 } END { print n + 0 }'
}
plain=$(step_count "" f32_to_half)
four=$(step_count 4 f32_to_half)
if [ "$plain" = 0 ] && [ "${four:-0}" -gt 0 ]; then
	echo "ok: the backend's 9-row step: LLMFS_CUDA_MMV_ROWS=4 sends it to cuBLAS ($four F16 conversions), 32 keeps it on the mat-vec kernel"
else
	echo "FAIL: the backend's 9-row step, F16 conversions: ${plain:-?} by default, ${four:-?} with LLMFS_CUDA_MMV_ROWS=4"
	failed=1
fi
exit $failed
