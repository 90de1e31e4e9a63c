#!/usr/bin/env bash
# Without a GPU the daemon starts and serves CPU models, however CUDA is
# missing: the CUDA module beside it finding no driver (this machine:
# no libcuda.so.1), a stub libcuda.so.1 (the toolkit's, which fails
# every call), no module at all; `--devices auto` then says why in one
# line. With the simulator as the module (engine/cuda/sim/) the probe's
# GPU shows in status, a backend computing on it (tests/fs/gpu0.sh
# computes there).
. "$(dirname "$0")/mount-lib.bash"

P='Once upon a time'
printf 'temperature=0\nmax_tokens=8\n' > "$WORK/greedy"
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 8 > "$WORK/expect" 2>/dev/null
check "llmfs-run gave a reference text" [ -s "$WORK/expect" ]

# serve CASE [llmfs options]: mount, generate on the CPU, unmount
serve() {
	local name=$1
	shift
	mount_llmfs --name stories="$STORIES" "$@"
	wait_loaded || fail "$name: model loaded in 10 s"
	cat "$WORK/greedy" > "$MNT/stories/config"
	printf '%s' "$P" > "$MNT/stories/generate"
	cat "$MNT/stories/generate" > "$WORK/got-$name"
	same "$WORK/expect" "$WORK/got-$name" "$name: the CPU generates"
	cp "$MNT/status" "$WORK/status-$name"
	unmount_llmfs
}

MODULE=$BUILD/lib/llmfs-cuda.so
if [ -f "$MODULE" ]; then
	serve "module, no driver"
	check "module, no driver: no GPU in status" \
		bash -c "! grep -q '^device gpu' '$WORK/status-module, no driver'"
	STUB=$(ls /usr/local/cuda/lib64/stubs/libcuda.so 2>/dev/null | head -n 1)
	if [ -n "$STUB" ]; then
		mkdir -p "$WORK/stub"
		ln -s "$STUB" "$WORK/stub/libcuda.so.1"
		LD_LIBRARY_PATH=$WORK/stub serve "stub libcuda" --devices auto
		check "stub libcuda: --devices auto says why" \
			grep -q 'llmfs: --devices auto: no CUDA device' "$WORK/daemon.log"
	else
		echo "# no CUDA stub library here: that case is left out"
	fi
else
	echo "# $MODULE is not built (no nvcc): the module cases are left out"
fi
LLMFS_CUDA_MODULE=/nonexistent/llmfs-cuda.so serve "no module" --devices auto
check "no module: --devices auto says why" \
	grep -q 'llmfs: --devices auto: no CUDA module at /nonexistent' "$WORK/daemon.log"

SIM=$BUILD/lib/llmfs-cuda-sim.so
if [ -f "$SIM" ]; then
	LLMFS_CUDA_MODULE=$SIM serve "simulated GPU"
	check "simulated GPU: status lists the probe's GPU, with a backend" \
		grep -qE '^device gpu0 name=llmfs-CUDA-simulator cc=9.0 memory_total_bytes=[0-9]+ memory_free_bytes=[0-9]+$' \
		"$WORK/status-simulated GPU"
fi
finish
