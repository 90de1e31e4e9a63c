#!/usr/bin/env bash
# A VRAM cap on a GPU (--devices gpu0:vram=SIZE without bw= and pcie=: the
# card the CUDA module's probe finds, capped), on the module's simulator
# (build/lib/llmfs-cuda-sim.so, a 2 GiB "card"), stories260K (1.1 MiB):
#   - llmfs-gpus (the probe) shows the card's memory as the cap;
#   - llmfs-bench: a cap smaller than the model refuses 'all gpu0' with
#     ENOSPC in one line; the planner's auto pick under it is all-cpu;
#     a cap that fits gives all-gpu, which runs, and its decode speed is
#     shown beside the estimate; 'auto split' applies the planner's split;
#     the costs lines say the VRAM reserve assumed until a backend opens
#     gpu0, then measured (the simulator's context, LLMFS_SIM_CONTEXT's
#     128 MiB, + 64 MiB for what comes after the open), and the host's
#     step assumed until a decode all on the CPU measures it;
#   - the mount: status and placement say the cap (total = the cap,
#     "capped"), status lists the plan's estimates per model and, after an
#     answer, the measured speed of the placement that gave it, and what
#     is applied ('placed'); 'all gpu0' then 'kv cpu' (the KV cache in
#     RAM) answers, its speed noted as kv-in-ram's; over the
#     cap a placement write is ENOSPC and moves nothing, 'auto' keeps the
#     model on the CPU;
#   - a cap with no GPU to find stops the mount with one line.
. "$(dirname "$0")/mount-lib.bash"

SIM=$BUILD/lib/llmfs-cuda-sim.so
BENCH=$BUILD/bin/llmfs-bench
[ -f "$SIM" ] || skip "no CUDA simulator ($SIM: a build without nvcc)"
export LLMFS_CUDA_MODULE=$SIM

# ---- the probe: llmfs-gpus with the cap ----
LLMFS_DEVICES=gpu0:vram=1G "$BUILD/bin/llmfs-gpus" >"$WORK/gpus" 2>&1 ||
	fail "llmfs-gpus with a cap: $(tail -n 1 "$WORK/gpus")"
check "llmfs-gpus: the capped card's memory is the cap" grep -qE \
	'^gpu0 .* total 1073741824 free 1073741824 node -?[0-9]+ vram_read [0-9.]+GB/s pcie_h2d [0-9.]+GB/s product [0-9.]+GB/s( product\.[a-zA-Z0-9_]+ [0-9.]+GB/s){5} capped$' \
	"$WORK/gpus"
# product rates given with the cap stay (the probe's are the simulator's):
# product= for every type but one given its own
LLMFS_DEVICES=gpu0:vram=1G,product=1.5T,product.q8_0=1.7T "$BUILD/bin/llmfs-gpus" >"$WORK/gpus" 2>&1 ||
	fail "llmfs-gpus with a cap and product=: $(tail -n 1 "$WORK/gpus")"
check "llmfs-gpus: product rates given with the cap stay" grep -qE \
	'^gpu0 .* product 1500\.0GB/s product\.q8_0 1700\.0GB/s capped$' "$WORK/gpus"

# ---- llmfs-bench: the engine's placement under the cap ----
if "$BENCH" -m "$STORIES" --devices gpu0:vram=1M --placement 'all gpu0' \
	-n 2 -r 1 >"$WORK/b1" 2>&1; then
	fail "a 1 MiB cap took the 1.1 MiB model"
else
	check "over the cap: ENOSPC, one line naming the cap" grep -qx \
		'llmfs-bench: no room on gpu0: [0-9]* MiB more would pass its cap of 1 MiB (--devices gpu0:vram=), 0 MiB placed there' \
		"$WORK/b1"
fi
# 1200 KiB: the weights (1171200 bytes) fit, the KV pool's blocks do not
if "$BENCH" -m "$STORIES" --devices gpu0:vram=1200K --placement 'all gpu0' \
	-n 2 -r 1 >"$WORK/b0" 2>&1; then
	fail "the KV blocks passed a cap the weights filled"
else
	check "the KV pool counts against the cap: ENOSPC naming the device" grep -qx \
		'llmfs-bench: no room on gpu0 for KV blocks of [0-9]* bytes' "$WORK/b0"
fi
"$BENCH" -m "$STORIES" --devices gpu0:vram=1M --placement auto --plan \
	>"$WORK/b2" 2>&1 || fail "auto under a 1 MiB cap: $(tail -n 1 "$WORK/b2")"
check "under a small cap the planner picks all-cpu" \
	grep -qE '^plan all-cpu gpu gpu0 host cpu ctx [0-9]+$' "$WORK/b2"
check "... saying all-gpu does not fit the cap" \
	grep -qE '^estimate all-gpu - does not fit: .* > 0\.0 GiB free on gpu0$' "$WORK/b2"
check "... with the reserve assumed (no backend opened gpu0)" \
	grep -qx 'costs gpu0 step 0.500ms assumed cross 20.0us assumed reserve 512MiB assumed' "$WORK/b2"
check "... and the host's step assumed" \
	grep -qx 'costs cpu step 0.500ms assumed' "$WORK/b2"
"$BENCH" -m "$STORIES" --devices gpu0:vram=1M --placement 'auto all-cpu' --plan \
	-n 4 -r 1 >"$WORK/b6" 2>&1 || fail "auto all-cpu: $(tail -n 1 "$WORK/b6")"
check "the host's step measured after a decode all on the CPU" \
	grep -qE '^costs cpu step [0-9.]+ms measured$' "$WORK/b6"
"$BENCH" -m "$STORIES" --devices gpu0:vram=1G --placement auto --plan \
	-n 4 -r 1 >"$WORK/b3" 2>&1 || fail "auto under a 1 GiB cap: $(tail -n 1 "$WORK/b3")"
check "under a cap that fits the planner picks all-gpu" \
	grep -qE '^plan all-gpu gpu gpu0 host - ctx [0-9]+$' "$WORK/b3"
check "... which runs" grep -qE '^tg4 d0 t/s [0-9.]+ ' "$WORK/b3"
check "... and its speed is shown beside its estimate" \
	grep -qE '^measured all-gpu [0-9.]+ estimate [0-9.]+ ratio [0-9.]+$' "$WORK/b3"
check "... with the costs the estimate assumed, the reserve measured at gpu0's open" \
	grep -qx 'costs gpu0 step 0.500ms assumed cross 20.0us assumed reserve 192MiB measured' "$WORK/b3"
"$BENCH" -m "$STORIES" --devices gpu0:vram=1G,step=0.2ms,cross=40us \
	--placement 'auto split' --plan -n 2 -r 1 >"$WORK/b4" 2>&1 ||
	fail "auto split: $(tail -n 1 "$WORK/b4")"
check "'auto split' runs the planner's split" \
	grep -qE '^measured split [0-9.]+ estimate [0-9.]+ ratio [0-9.]+$' "$WORK/b4"
check "measured costs given: the estimate says so" \
	grep -qx 'costs gpu0 step 0.200ms measured cross 40.0us measured reserve 192MiB measured' "$WORK/b4"
if "$BENCH" -m "$STORIES" --devices gpu0:vram=1G --placement 'auto experts-in-ram' \
	--plan >"$WORK/b5" 2>&1; then
	fail "a dense model took 'auto experts-in-ram'"
else
	check "an alternative the plan has not: EINVAL, one line" grep -qx \
		"llmfs-bench: no alternative 'experts-in-ram' in this model's plan (see the estimate lines of placement)" \
		"$WORK/b5"
fi

# ---- the mount ----
mount_llmfs --devices gpu0:vram=1G --name stories="$STORIES"
S=$MNT/stories
wait_loaded || fail "model loaded in 120 s"
check "status: gpu0's memory is the cap, said capped" grep -qE \
	'^device gpu0 .* memory_total_bytes=1073741824 memory_free_bytes=[0-9]+ capped$' \
	"$MNT/status"
cat "$S/placement" >"$WORK/placement"
check "placement: gpu0's memory is the cap, said capped" grep -qE \
	'^memory gpu0 total 1073741824 free [0-9]+ node -?[0-9-]* bw [0-9.]+GB/s measured product [0-9.]+GB/s measured( product\.[a-zA-Z0-9_]+ [0-9.]+GB/s measured){5} pcie [0-9.]+GB/s capped$' \
	"$WORK/placement"
check "status: the plan's estimates per model" \
	grep -qE '^model stories estimate all-gpu [0-9.]+ chosen: ' "$MNT/status"
check "status: ... every alternative" \
	grep -qE '^model stories estimate all-cpu [0-9.]+ fits; ' "$MNT/status"
check "status: nothing measured yet" sh -c "! grep -q '^model stories measured' '$MNT/status'"
printf 'temperature=0\nmax_tokens=8\n' >"$S/config"
printf 'Once upon a time' >"$S/generate"
cat "$S/generate" >/dev/null
check "status: the CPU's decode speed beside all-cpu's estimate" grep -qE \
	'^model stories measured all-cpu [0-9.]+ estimate [0-9.]+ ratio [0-9.]+$' "$MNT/status"
check "placement: the same" grep -qE \
	'^measured all-cpu [0-9.]+ estimate [0-9.]+ ratio [0-9.]+$' "$S/placement"
check "status: what is applied" grep -qx \
	'model stories placed all-cpu ctx 512 kv-in-ram 0/5' "$MNT/status"
# all on gpu0 with the KV cache in RAM (--no-kv-offload): an answer
check "placement: all gpu0, then the KV cache in RAM" sh -c \
	"echo 'all gpu0' > '$S/placement' && echo 'kv cpu' > '$S/placement'"
check "placement: the KV cache's place" grep -qx 'kv blk.0-4 cpu' "$S/placement"
check "placement: kv-in-ram applied" grep -qx \
	'placed kv-in-ram ctx 512 kv-in-ram 5/5' "$S/placement"
printf 'Once upon a time' >"$S/generate"
check "an answer with the KV cache in RAM" sh -c "[ -n \"\$(cat '$S/generate')\" ]"
check "status: its speed noted as kv-in-ram's" grep -qE \
	'^model stories measured kv-in-ram [0-9.]+ estimate' "$MNT/status"
unmount_llmfs

mount_llmfs --devices gpu0:vram=1M --name stories="$STORIES"
S=$MNT/stories
wait_loaded || fail "model loaded in 120 s"
before=$(grep -c ' cpu$' "$S/placement")
if echo 'all gpu0' >"$S/placement" 2>"$WORK/err"; then
	fail "placement: 'all gpu0' over a 1 MiB cap is refused"
else
	check "placement: over the cap is ENOSPC" grep -q 'No space left on device' "$WORK/err"
fi
check "errors: why, in one line" grep -qE \
	'placement: all gpu0: no room on gpu0: [0-9]+ MiB more would pass its cap of 1 MiB' "$S/errors"
check "nothing moved" [ "$(grep -c ' cpu$' "$S/placement")" = "$before" ]
check "auto under the cap keeps the CPU" sh -c "echo auto > '$S/placement'"
check "... the plan says all-cpu" grep -qE '^plan all-cpu gpu gpu0 ' "$S/placement"
check "... and no tensor is on gpu0" sh -c "! grep -qE '^[a-z_.0-9]+ [A-Za-z0-9_]+ [0-9x]+ [0-9]+ gpu0$' '$S/placement'"
unmount_llmfs

# a cap needs a card: the simulator with no device
if LLMFS_SIM_DEVICES=0 timeout 60 "$LLMFS" -f --devices gpu0:vram=8G "$STORIES" "$MNT" 2>"$WORK/bad"; then
	fail "a cap without a GPU is refused"
elif mountpoint -q "$MNT"; then
	fail "a cap without a GPU is refused (it mounted)"
	fusermount3 -u -z "$MNT"
else
	check "a cap without a GPU: one line" grep -qE \
		'^llmfs: --devices: gpu0:vram= without bw= and pcie= caps a real GPU: ' "$WORK/bad"
fi
finish
