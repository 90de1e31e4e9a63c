#!/usr/bin/env bash
# What one decode step of S sequences together asks of the GPU, kernel by
# kernel: traced by the module's simulator (LLMFS_SIM_TRACE, engine/cuda/
# sim/sim.cc) over the last decode step of a run, on the module's own
# path (llmfs-cuda-bench -s S: step.cu, one CUDA graph a step) or the
# engine's backend (llmfs-bench -s S --placement 'all gpu0': the path
# the mount takes). The launches, grids and copies are the module's
# calls, the same on a card; the times are not (the simulator runs every
# thread on the CPU). Whether S sequences share each kernel or cost a
# launch each shows here: compare S = 1 with S = 16.
#
#   tools/step-trace.sh [--backend] MODEL [S]
#
# Prints a line a kernel (launches, grid, blocks and threads of the step
# summed) and a last line of totals:
#   step of 16 sequences (module): 212 kernels, 2 copies (1048768 bytes)
# Exit 77 without the simulator (a build without nvcc).
set -u
BUILD=${BUILD:-build}
sim=${LLMFS_SIM:-$BUILD/lib/llmfs-cuda-sim.so}
path=module
if [ "${1:-}" = --backend ]; then
	path=backend
	shift
fi
model=${1:?usage: tools/step-trace.sh [--backend] MODEL [S]}
seqs=${2:-16}
[ -f "$sim" ] || { echo "no CUDA simulator ($sim)"; exit 77; }
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT

# two decode steps at least: the last one is cut out of the trace
if [ $path = module ]; then
	LLMFS_CUDA_MODULE=$sim LLMFS_SIM_TRACE=$trace \
		"$BUILD/bin/llmfs-cuda-bench" -m "$model" -p 1 -n 1 -d 0 \
		-g 2 -s "$seqs" -r 1 >/dev/null || exit 1
else
	LLMFS_CUDA_MODULE=$sim LLMFS_SIM_TRACE=$trace \
		"$BUILD/bin/llmfs-bench" -m "$model" -n 2 -s "$seqs" -r 1 \
		-c 256 --placement 'all gpu0' --no-pack >/dev/null || exit 1
fi
# A step ends with its logits' copies (one of S rows, or one a row), all
# of one size: the last step is what lies after the run of copies of
# that size before the trace's last one.
awk -v seqs="$seqs" -v path=$path '
{ line[NR] = $0 }
END {
	n = NR
	if (line[n] !~ /^copy /) { print "the trace ends in no copy"; exit 1 }
	split(line[n], f, " ")
	last = f[2]
	i = n
	while (i > 0 && line[i] == "copy " last)
		i--
	while (i > 0 && line[i] != "copy " last)
		i--
	for (j = i + 1; j <= n; j++) {
		split(line[j], f, " ")
		if (f[1] == "copy") {
			copies++
			bytes += f[2]
			continue
		}
		name = line[j]
		sub(/^kernel +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +/, "", name)
		sub(/^void /, "", name)
		sub(/\(.*/, "", name)
		grid[name] = f[2] "x" f[3] "x" f[4]
		calls[name]++
		blocks[name] += f[2] * f[3] * f[4]
		threads[name] += f[2] * f[3] * f[4] * f[5] * f[6] * f[7]
		kernels++
	}
	for (k in calls)
		printf "%4d x %-44s grid %-10s blocks %7d threads %9d\n",
			calls[k], substr(k, 1, 44), grid[k], blocks[k],
			threads[k] | "sort -k3"
	close("sort -k3")
	printf "step of %d sequences (%s): %d kernels, %d copies (%d bytes)\n",
		seqs, path, kernels, copies, bytes
}' "$trace"
