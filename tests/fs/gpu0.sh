#!/usr/bin/env bash
# The mount and llmfs-run computing on a GPU (the CUDA backend,
# engine/cuda/backend.c, device gpu0): the CUDA module's simulator here
# (build/lib/llmfs-cuda-sim.so), a card's module where LLMFS_CUDA_MODULE
# names it (tools/gpu-check.sh). Greedy, stories260K:
#   - llmfs-run --placement 'all gpu0' gives the CPU's text;
#   - status shows gpu0 with a backend, placement shows tensors there;
#   - `cat prompt > generate` with the model on gpu0 streams llmfs-run's
#     gpu0 text;
#   - placement writes moving layers cpu <-> gpu0 while a session
#     generates change no token; a move splitting a layer is EINVAL;
#   - mounted with --placement 'all gpu0' (the weights read from the
#     file straight into VRAM): stats counts every byte loaded, weights/
#     of every tensor reads back the CPU mount's (the file's) bytes, the
#     answer is llmfs-run's gpu0 text, and after 'all cpu' the CPU's;
#     a capped gpu0 too small fails the load with errors saying why;
#   - mounted with --devices auto: the planner's pick applied before the
#     load (all-gpu: straight into VRAM, llmfs-run's gpu0 text; on the
#     simulator with too little VRAM, all-cpu);
#   - on the simulator, a kernel that faults (LLMFS_SIM_FAIL_LAUNCH)
#     makes llmfs-run fail with "gpu0: ..." instead of printing garbage.
. "$(dirname "$0")/mount-lib.bash"

SIM=$BUILD/lib/llmfs-cuda-sim.so
if [ -z "${LLMFS_CUDA_MODULE:-}" ]; then
	[ -f "$SIM" ] || skip "no CUDA simulator ($SIM: a build without nvcc)"
	export LLMFS_CUDA_MODULE=$SIM
fi
# the simulator runs a pass in about a tenth of a second: a short answer
N=${GPU0_TOKENS:-40}
P='Once upon a time, there was a little girl named Lily.'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N > "$WORK/expect" 2>/dev/null
check "llmfs-run gave a reference text on the CPU" [ -s "$WORK/expect" ]
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N --placement "all gpu0" \
	> "$WORK/gpu-run" 2>"$WORK/gpu-run.err" ||
	fail "llmfs-run --placement 'all gpu0': $(tail -n 1 "$WORK/gpu-run.err")"
same "$WORK/expect" "$WORK/gpu-run" "llmfs-run on gpu0: the CPU's text"
if [ "$LLMFS_CUDA_MODULE" = "$SIM" ]; then
	if LLMFS_SIM_FAIL_LAUNCH=200 "$RUN" -m "$STORIES" -p "$P" --temp 0 -n $N \
		--placement "all gpu0" >"$WORK/fault" 2>"$WORK/fault.err"; then
		fail "llmfs-run went on after the GPU's kernel faulted"
	else
		check "a faulting kernel: llmfs-run says gpu0's error" \
			grep -q 'gpu0: .*launch failure' "$WORK/fault.err"
		echo "# $(tail -n 1 "$WORK/fault.err")"
	fi
fi

mount_llmfs --name stories="$STORIES"
S=$MNT/stories
wait_loaded || fail "model loaded in 120 s"
check "status shows gpu0 with a backend" \
	grep -qE '^device gpu0 .*memory_free_bytes=[0-9]+$' "$MNT/status"
printf 'temperature=0\nmax_tokens=%d\n' $N > "$S/config"

cat "$S/weights/blk.0.attn_q.weight" > "$WORK/w-cpu"
mkdir -p "$WORK/wcpu"
for f in "$S"/weights/*; do cat "$f" > "$WORK/wcpu/${f##*/}"; done
echo "all gpu0" > "$S/placement" || fail "placement write 'all gpu0'"
check "the placement file shows tensors on gpu0" \
	grep -q '^blk.0.attn_q.weight .* gpu0$' "$S/placement"
cat "$S/weights/blk.0.attn_q.weight" > "$WORK/w-gpu"
check "weights/ of a gpu0 tensor reads back the file's bytes" \
	cmp -s "$WORK/w-cpu" "$WORK/w-gpu"
check "... which are bytes" [ -s "$WORK/w-gpu" ]
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/all"
same "$WORK/gpu-run" "$WORK/all" "all of the model on gpu0: llmfs-run's gpu0 text"

moves=("blk.0-1 cpu" "all cpu" "all gpu0" "blk.3-4 cpu" "blk.0-4 cpu"
	"all gpu0")
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/got" &
reader=$!
i=0 seen=0
while kill -0 $reader 2>/dev/null; do
	echo "${moves[i % ${#moves[@]}]}" > "$S/placement" ||
		fail "placement write ${moves[i % ${#moves[@]}]}"
	grep -q ' gpu0$' "$S/placement" && seen=1
	i=$((i + 1))
done
wait $reader
echo "# $i placement writes during the answer"
check "placement writes landed while the answer was made" [ $i -ge 2 ]
check "the placement file showed gpu0 during the answer" [ $seen = 1 ]
same "$WORK/expect" "$WORK/got" "layers moved cpu <-> gpu0 mid-answer: the CPU's text"

echo "all gpu0" > "$S/placement"
if echo "blk.0.attn_q.weight cpu" > "$S/placement" 2>"$WORK/err"; then
	fail "a move splitting a layer was accepted"
else
	check "a move splitting a layer is EINVAL" grep -q 'Invalid argument' "$WORK/err"
fi
check "nothing moved" grep -q '^blk.0.attn_q.weight .* gpu0$' "$S/placement"
echo "all cpu" > "$S/placement"
unmount_llmfs

# ---- placed before the load: the weights straight into VRAM ----
mount_llmfs --placement "all gpu0" --name stories="$STORIES"
wait_loaded || fail "model loaded in 120 s"
check "--placement 'all gpu0': the model is ready" \
	grep -q '^stories .* ready ' "$MNT/models"
total=$(awk '$1 == "total" { print $4 }' "$S/placement")
check "stats: load_bytes counts every tensor byte ($total)" \
	grep -qx "load_bytes $total" "$S/stats"
check "--placement 'all gpu0': the tensors are on gpu0" \
	grep -q '^blk.0.attn_q.weight .* gpu0$' "$S/placement"
bad=0 n=0
for f in "$WORK"/wcpu/*; do
	[ "${f##*/}" = index ] && continue # the list, devices in it
	n=$((n + 1))
	cmp -s "$f" "$S/weights/${f##*/}" || { bad=$((bad + 1)); echo "# differs: ${f##*/}"; }
done
check "weights/ of the $n tensors loaded straight to gpu0: the file's bytes" [ $bad = 0 ] && [ $n -gt 10 ]
printf 'temperature=0\nmax_tokens=%d\n' $N > "$S/config"
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/straight"
same "$WORK/gpu-run" "$WORK/straight" "loaded straight to gpu0: llmfs-run's gpu0 text"
echo "all cpu" > "$S/placement" || fail "placement write 'all cpu' after a straight load"
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/back"
same "$WORK/expect" "$WORK/back" "then moved to the CPU: the CPU's text"
unmount_llmfs

# ---- --devices auto: the planner's pick applied before the load ----
mount_llmfs --devices auto --name stories="$STORIES"
wait_loaded || fail "model loaded in 120 s"
check "--devices auto: the model is ready" \
	grep -q '^stories .* ready ' "$MNT/models"
check "--devices auto: what is placed is the plan's all-gpu" \
	grep -q '^placed all-gpu ' "$S/placement"
check "--devices auto: the tensors are on gpu0, no placement written" \
	grep -q '^blk.0.attn_q.weight .* gpu0$' "$S/placement"
check "--devices auto: the plan was placed ($(cat "$S/errors"))" \
	eval '! grep -q "placement auto" "$S/errors"'
check "--devices auto: stats counts every tensor byte loaded" \
	grep -qx "load_bytes $total" "$S/stats"
printf 'temperature=0\nmax_tokens=%d\n' $N > "$S/config"
printf '%s' "$P" > "$S/generate"
cat "$S/generate" > "$WORK/auto"
same "$WORK/gpu-run" "$WORK/auto" "placed by the planner at open: llmfs-run's gpu0 text"
unmount_llmfs
if [ "$LLMFS_CUDA_MODULE" = "$SIM" ]; then
	# a GPU too small for all-gpu (160 MiB, the simulated context's 128
	# in it): the planner's pick at open is the CPU
	LLMFS_SIM_VRAM=$((160 << 20)) mount_llmfs --devices auto --name stories="$STORIES"
	wait_loaded
	check "--devices auto, a small gpu0: the model is ready" \
		grep -q '^stories .* ready ' "$MNT/models"
	check "... placed all-cpu, by the plan" grep -q '^placed all-cpu ' "$S/placement"
	check "... its tensors on the CPU" \
		grep -q '^blk.0.attn_q.weight .* cpu$' "$S/placement"
	unmount_llmfs
fi

mount_llmfs --devices gpu0:vram=1M --placement "all gpu0" --name stories="$STORIES"
wait_loaded
check "a 1 MiB gpu0 and --placement 'all gpu0': the model failed" \
	grep -q '^stories .* failed ' "$MNT/models"
check "errors says there is no room ($(cat "$S/errors"))" \
	grep -q 'load: no room on gpu0: .* cap of 1 MiB' "$S/errors"
unmount_llmfs
finish
