#!/usr/bin/env bash
# What one decode step of the engine's CUDA backend asks of the GPU:
# kernel launches, copies, event records and waits, and the calls its
# graphs' captures recorded and the captures (LLMFS_CUDA_GRAPH=capture:
# each step's; the default replays kept graphs), counted by the
# module's simulator (LLMFS_SIM_STATS=1, engine/cuda/sim/sim.cc) over
# llmfs-run --placement 'all gpu0' with A and then B generated tokens:
# the difference over B - A steps (the prompt, the start and the probe
# cancel out). The counts are the module's calls, the same on a card,
# where a small model's decode step is bound by them.
#
#   tools/launch-count.sh [MODEL [PLACEMENT]]
#   LLMFS_CUDA_FUSE=0 tools/launch-count.sh   # the backend unfused
#   LLMFS_CUDA_GRAPH=capture tools/launch-count.sh   # captured each step
#
# Prints one line:
#   stories260K all gpu0: per decode step 142.0 launches 10.0 copies ...
# Exit 77 without the simulator (a build without nvcc).
set -u
BUILD=${BUILD:-build}
SHARED=${SHARED:-../shared}
model=${1:-$SHARED/models/stories260K.gguf}
place=${2:-all gpu0}
sim=${LLMFS_SIM:-$BUILD/lib/llmfs-cuda-sim.so}
A=${LAUNCH_COUNT_A:-4}
B=${LAUNCH_COUNT_B:-12}
[ -f "$sim" ] || { echo "no CUDA simulator ($sim)"; exit 77; }

# the counters of llmfs-run's own process: the last line (the probe's
# child prints its own first)
counts() { # tokens
	LLMFS_CUDA_MODULE=$sim LLMFS_SIM_STATS=1 "$BUILD/bin/llmfs-run" \
		-m "$model" -p "Once upon a time" --temp 0 -n "$1" \
		--placement "$place" 2>&1 >/dev/null |
		grep '^llmfs-cuda-sim:' | tail -n 1 | tr -cs '0-9' ' '
}
a=$(counts "$A") && b=$(counts "$B") || exit 1
[ -n "$a" ] && [ -n "$b" ] || { echo "llmfs-run printed no counts"; exit 1; }
awk -v a="$a" -v b="$b" -v n=$((B - A)) -v name="$(basename "$model" .gguf) $place" '
BEGIN {
	split(a, x, " "); split(b, y, " ")
	split("launches copies records graphs waits kernels captured captures", k, " ")
	# in the order sim.cc prints them
	line = name ": per decode step"
	for (i = 1; i <= 8; i++)
		line = line sprintf(" %.1f %s", (y[i] - x[i]) / n, k[i])
	print line
}'
