#!/usr/bin/env bash
# The reference backend (engine/ref/, device ref0) through whole models:
# the golden prompts of every shared model (test_golden, the rule of
# ../shared/README.md section 4) with all weights on ref0, and with layer
# 0 on ref0 and the rest on the CPU (the residual stream and the KV cache
# of that layer in ref0's memory); all on ref0 with the KV cache of
# every layer in RAM, attended by the CPU ('kv cpu', the planner's
# kv-in-ram); and the MoE model with all but its experts on ref0 (hybrid
# MoE: the experts on the CPU).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/engine/golden-lib.bash
BUILD=${BUILD:-build}
golden=$BUILD/tests/engine/test_golden
[ -x "$golden" ] || { echo "FAIL: $golden is not built"; exit 1; }
fails=0
moe=tiny-qwen3moe-bpe16k-q4km
for place in "all ref0" "blk.0 ref0" "all ref0;kv cpu" "all-but-experts ref0"; do
	# hybrid MoE: only the MoE model has experts to leave on the CPU
	models=
	[ "$place" = "all-but-experts ref0" ] && models=$moe
	golden_place "" "$place" ${models:+GOLDEN_MODELS=$models} LLMFS_REF_DEVICE=1
done
# without LLMFS_REF_DEVICE there is no ref0 to place on
if GOLDEN_PLACEMENT="all ref0" "$golden" >/dev/null 2>&1; then
	echo "FAIL: ref0 exists without LLMFS_REF_DEVICE=1"
	fails=$((fails + 1))
fi
[ $fails -eq 0 ]
