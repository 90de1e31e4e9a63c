#!/usr/bin/env bash
# tools/bench-placement.sh: the planner's estimates against measurements.
# For each case (a model of real shape and a VRAM cap on the GPU,
# --devices gpu0:vram=CAP), every alternative the planner lists is run
# with llmfs-bench -c 0 --placement 'auto ALTERNATIVE' (the model's
# default context, 4096, as a mount plans for it; the planner's own
# placement of it: all-gpu, all-gpu-ctx with its context, kv-in-ram with
# the later layers' KV cache in RAM, the split by layers as it sizes it,
# all-cpu, experts-in-ram) and timed, pp512 and tg64 from an empty context in one
# load; then a table: case, alternative, the planner's estimate of
# decode (t/s), tg64 measured, their ratio, pp512 measured, and which
# alternative the planner picks. An alternative that does not fit, or
# that the engine cannot place yet, says "not run: <why>" (the estimate
# line's reason, or llmfs-bench's error), never a figure.
#
# The table's head has the rates the estimates divide by (llmfs-gpus:
# the VRAM read, PCIe, the decode product's rate of each weight type).
# Last, the costs the estimate assumes, from what was measured:
#   step  = assumed step + (1/measured - 1/estimate) of all-gpu and
#           all-gpu-ctx (the per-token time the bytes / rates part does
#           not explain, on plans without a crossing)
#   cross = assumed cross + (1/measured - 1/estimate of split, corrected
#           for the new step) / 2 (a split crosses twice a token)
#   host step = assumed + (1/measured - 1/estimate) of all-cpu
# each the median over the cases, printed as the --devices words that
# give them to the planner (gpu0:...,step=...,cross=...,cpu:step=...).
# Then they are fed back: each case is planned again (llmfs-bench --plan,
# a load and no run, about as long as the load) with the costs fitted
# from the other cases' runs (leave one case out: a case's own residue
# would make its estimate its measurement by construction), and a second
# table gives those estimates beside the same measurements: how well a
# step measured on some models predicts another (PLACEMENT_REFIT= (empty)
# skips it).
# The GPU's VRAM reserve needs no run of its own: each run's plan is
# made after its backend opened the card, and its costs line says
# `reserve NMiB measured` (Documentation/placement.md).
#
#   tools/bench-placement.sh                # the four cases of issue 27
#   PLACEMENT_CASES="8b-6g" tools/bench-placement.sh
#   # a dry run on the simulator (tiny model, tiny tests):
#   LLMFS_CUDA_MODULE=build/lib/llmfs-cuda-sim.so PLACEMENT_PP=8 \
#     PLACEMENT_TG=4 PLACEMENT_CASES="file:../shared/models/stories260K.gguf@1G \
#     file:../shared/models/stories260K.gguf@1M" tools/bench-placement.sh
#
# Environment: BIN (programs: build/bin), WORK (models are written
# there: .gpu-work), VOCAB (a GGUF whose vocabulary the models take: the
# 152k Qwen2 one), OUT (logs: /tmp/bench-placement), PLACEMENT_REPS (1;
# each test also has an untimed warm-up), PLACEMENT_PP (512),
# PLACEMENT_TG (64), PLACEMENT_SECONDS (budget: a case starts only if
# its estimated time fits; 480).
#
# Time on the lent machine (16 cores, NVMe, 1.1-1.5 GB/s O_DIRECT
# loads): the models are written from random valid blocks (the 8B in 3 s
# there; 14B about 6 s, the 30B-A3B about 12-20 s: disk-bound), 33 GB of
# disk in all; each llmfs-bench run loads its model (8B 4-5 s, 14B 7-8 s,
# 30B-A3B 13-16 s) and packs it for the CPU. Estimated: 8b-16g 60 s,
# 8b-6g 70 s (all-gpu-ctx and kv-in-ram run there: the weights fit, the
# 4096 context's KV does not), 14b-8g 80 s, moe-8g 100 s, and the four
# plans again with the fitted costs about 40 s: about 6 minutes with the
# writing, inside one device call of 600 s.
set -u
cd "$(dirname "$0")/.." || exit 1
BIN=${BIN:-build/bin}
WORK=${WORK:-.gpu-work}
OUT=${OUT:-/tmp/bench-placement}
REPS=${PLACEMENT_REPS:-1}
PP=${PLACEMENT_PP:-512}
TG=${PLACEMENT_TG:-64}
BUDGET=${PLACEMENT_SECONDS:-480}
mkdir -p "$WORK" "$OUT"
LOG=$OUT/placement.log
T0=$SECONDS

declare -A shape=(
	[8b]="--arch qwen3 --embd 4096 --layers 36 --heads 32 --kv-heads 8 --head-dim 128 --ff 12288 --type q4_k_m"
	[14b]="--arch qwen3 --embd 5120 --layers 40 --heads 40 --kv-heads 8 --head-dim 128 --ff 17408 --type q4_k_m"
	[30b-a3b]="--arch qwen3moe --embd 2048 --layers 48 --heads 32 --kv-heads 4 --head-dim 128 --ff 768 --experts 128 --experts-used 8 --type q4_k_m"
)
# case: shape@cap, and its estimated seconds (the header's figures)
declare -A cases=([8b-16g]=8b@16G [8b-6g]=8b@6G [14b-8g]=14b@8G [moe-8g]=30b-a3b@8G)
declare -A secs=([8b-16g]=60 [8b-6g]=70 [14b-8g]=80 [moe-8g]=100)

write_model() { # shape; prints the file
	local s=$1 f=$WORK/placement-$1-q4_k_m.gguf t=$SECONDS
	if [ ! -s "$f" ]; then
		# shellcheck disable=SC2086
		timeout 240 "$BIN/llmfs-write-model" -o "$f" ${shape[$s]} \
			${VOCAB:+--vocab-from "$VOCAB"} --random-blocks >>"$LOG" 2>&1 ||
			{ rm -f "$f"; return 1; }
		echo "wrote $f in $((SECONDS - t)) s ($(du -h "$f" | cut -f1))" >>"$LOG"
	fi
	echo "$f"
}

# one run: alternative, model, cap; its output in $WORK/run.out
run_alt() {
	local alt=$1 model=$2 cap=$3 pack=
	# all on the GPU: the CPU's panels would only be undone by the move
	case $alt in all-gpu | all-gpu-ctx | kv-in-ram) pack=--no-pack ;; esac
	# -c 0: the model's default context (4096), as a mount plans for
	echo "== $alt: llmfs-bench -m $model -c 0 --devices gpu0:vram=$cap --placement 'auto $alt' $pack -p $PP -n $TG -r $REPS --plan" >>"$LOG"
	timeout --kill-after=5 300 "$BIN/llmfs-bench" -m "$model" -c 0 \
		--devices "gpu0:vram=$cap" --placement "auto $alt" $pack \
		-p "$PP" -n "$TG" -r "$REPS" --plan >"$WORK/run.out" 2>&1
	local rc=$?
	cat "$WORK/run.out" >>"$LOG"
	return $rc
}

ts() { awk -v k="$1" '$1 == k && $3 == "t/s" { print $4; exit }' "$WORK/run.out"; }
rows=()
row() { rows+=("$(printf '%-8s %-15s %9s %9s %6s %9s  %s' "$@")"); }

one_case() { # name, shape, cap, model
	local name=$1 cap=$3 model=$4 alts alt est why tg pp ratio pick first
	local plan=$WORK/plan-$name.txt
	# all-cpu first (it always fits in 128 GiB): its --plan lists the rest
	first=all-cpu
	run_alt $first "$model" "$cap"
	cp "$WORK/run.out" "$plan"
	pick=$(awk '$1 == "plan" { print $2; exit }' "$plan")
	[ -n "$pick" ] || { row "$name" - - - - - "failed: $(grep -m 1 'llmfs-bench:' "$WORK/run.out" | cut -c1-90)"; return; }
	alts=$(awk '$1 == "estimate" && !seen[$2]++ { print $2 }' "$plan")
	best='' best_tg=0 pick_tg=''
	for alt in $alts; do
		est=$(awk -v a="$alt" '$1 == "estimate" && $2 == a { print $3; exit }' "$plan")
		why=$(awk -v a="$alt" '$1 == "estimate" && $2 == a { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }' "$plan")
		if [ "$est" = - ]; then
			row "$name" "$alt" - - - - "not run: ${why:0:80}"
			continue
		fi
		if [ "$alt" = $first ]; then
			cp "$plan" "$WORK/run.out"
		else
			run_alt "$alt" "$model" "$cap"
		fi
		tg=$(ts "tg$TG")
		pp=$(ts "pp$PP")
		if [ -z "$tg" ]; then
			row "$name" "$alt" "$est" - - - "not run: $(grep -m 1 'llmfs-bench:' "$WORK/run.out" | sed 's/^llmfs-bench: //' | cut -c1-90)"
			continue
		fi
		ratio=$(awk -v m="$tg" -v e="$est" 'BEGIN { printf "%.2f", m / e }')
		row "$name" "$alt" "$est" "$tg" "$ratio" "${pp:--}" "$([ "$alt" = "$pick" ] && echo "<- the planner's pick")"
		echo "measured $name $alt $est $tg ${pp:--}" >>"$OUT/measured.txt"
		# the VRAM reserve measured at gpu0's open (a GPU run's plan)
		awk -v c="$name" -v a="$alt" '$1 == "costs" && $2 ~ /^gpu/ && $NF == "measured" && $(NF - 2) == "reserve" { print c, a, $(NF - 1); exit }' \
			"$WORK/run.out" >>"$OUT/reserve.txt"
		[ "$alt" = "$pick" ] && pick_tg=$tg
		if awk -v a="$tg" -v b="$best_tg" 'BEGIN { exit !(a > b) }'; then
			best=$alt best_tg=$tg
		fi
		# the costs this run's plan assumed (its costs lines: the GPU's,
		# then the host's)
		awk '$1 == "costs" && $2 ~ /^gpu/ { sub(/ms$/, "", $4); sub(/us$/, "", $7); g = $4 / 1e3 " " $7 / 1e6 }
			$1 == "costs" && $2 !~ /^gpu/ { sub(/ms$/, "", $4); h = $4 / 1e3 }
			$1 == "plan" && n++ { exit }
			END { if (g != "") print g, (h != "" ? h : 0.0005) }' \
			"$WORK/run.out" >"$WORK/costs"
	done
	# the issue's rule: the pick within 10% of the fastest measured
	if [ -n "$pick_tg" ] && [ -n "$best" ]; then
		row "$name" "(pick)" - - - - "$(awk -v p="$pick" -v pt="$pick_tg" -v b="$best" -v bt="$best_tg" \
			'BEGIN { w = pt >= 0.9 * bt ? "within 10%" : "NOT within 10%"; printf "%s at %.2fx of the fastest measured (%s %.1f t/s): %s", p, pt / bt, b, bt, w }')"
	else
		row "$name" "(pick)" - - - - "$pick: not measured, no comparison"
	fi
}

: >"$OUT/measured.txt"
: >"$OUT/reserve.txt"
: >"$LOG"
declare -A case_model=() case_cap=()
case_names=()
# the rates the estimates divide by: the probe's, per weight type
rates=$("$BIN/llmfs-gpus" 2>&1 | sed -n 's/^gpu0 .* vram_read /vram_read /p')
for c in ${PLACEMENT_CASES:-8b-16g 8b-6g 14b-8g moe-8g}; do
	case $c in
	file:*@*) spec=${c#file:} && model=${spec%@*} && cap=${spec##*@} && name=$(basename "$model" .gguf | cut -c1-8)-$cap && est=30 ;;
	*) spec=${cases[$c]:-} && name=$c && est=${secs[$c]:-60} ;;
	esac
	[ -n "$spec" ] || { row "$c" - - - - - "no such case (8b-16g 8b-6g 14b-8g moe-8g, or file:PATH@CAP)"; continue; }
	if [ $((SECONDS - T0 + est)) -gt "$BUDGET" ]; then
		row "$name" - - - - - "not run: no time left (about $est s; PLACEMENT_SECONDS=$BUDGET)"
		continue
	fi
	if [[ $c != file:* ]]; then
		cap=${spec##*@}
		model=$(write_model "${spec%@*}") || { row "$name" - - - - - "not run: the model was not written ($LOG)"; continue; }
	fi
	one_case "$name" "${spec%@*}" "$cap" "$model"
	case_model[$name]=$model case_cap[$name]=$cap
	case_names+=("$name")
done

# The costs from the measurements: the GPU plans' residue without a
# crossing (all-gpu, all-gpu-ctx) is the step, the split's (after the
# step) over its two crossings the crossing, all-cpu's the host's step;
# each the median over the cases but the one named (leave it out: "" for
# none). Prints "words step-source cross-source host host-source".
read -r step0 cross0 host0 < <(cat "$WORK/costs" 2>/dev/null || echo "0.0005 0.00002 0.0005")
fit_costs() {
	awk -v s0="$step0" -v c0="$cross0" -v h0="${host0:-0.0005}" -v skip="$1" '
	function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	$2 == skip { next }
	$3 == "all-gpu" || $3 == "all-gpu-ctx" { ds[++ns] = 1 / $5 - 1 / $4 }
	$3 == "split" { sp[++nc] = 1 / $5 - 1 / $4 }
	$3 == "all-cpu" { dh[++nh] = 1 / $5 - 1 / $4 }
	END {
		step = ns ? s0 + median(ds, ns) : s0
		if (step < 1e-6) step = 1e-6
		for (i = 1; i <= nc; i++) sp[i] = (sp[i] - (step - s0)) / 2
		cross = nc ? c0 + median(sp, nc) : c0
		if (cross < 1e-7) cross = 1e-7
		host = nh ? h0 + median(dh, nh) : h0
		if (host < 1e-6) host = 1e-6
		printf "step=%.3fms,cross=%.1fus %s %s %.3fms %s\n", step * 1e3, cross * 1e6,
			ns ? "measured" : "assumed", nc ? "measured" : "assumed",
			host * 1e3, nh ? "measured" : "assumed"
	}' "$OUT/measured.txt"
}
costs=$(fit_costs "")

# The costs fed back: each case planned again (llmfs-bench --plan: a
# load, no run) with the costs fitted from the other cases' runs, never
# its own (a constant fitted on a case would explain that case by
# construction), its estimates beside the same measurements.
refit=()
if [ -s "$OUT/measured.txt" ] && [ -n "${PLACEMENT_REFIT-1}" ]; then
	for name in "${case_names[@]}"; do
		grep -q "^measured $name " "$OUT/measured.txt" || continue
		if [ $((SECONDS - T0 + 20)) -gt "$BUDGET" ]; then
			refit+=("$(printf '%-8s %-15s  %s' "$name" - "not planned again: no time left")")
			continue
		fi
		read -r words sm cm host hm <<<"$(fit_costs "$name")"
		echo "== $name planned again: --devices gpu0:vram=${case_cap[$name]},$words,cpu:step=$host ($sm $cm $hm)" >>"$LOG"
		timeout --kill-after=5 120 "$BIN/llmfs-bench" -m "${case_model[$name]}" -c 0 \
			--devices "gpu0:vram=${case_cap[$name]},$words,cpu:step=$host" --plan \
			>"$WORK/refit.out" 2>&1
		cat "$WORK/refit.out" >>"$LOG"
		while read -r _ _ alt _ tg _; do
			e=$(awk -v a="$alt" '$1 == "estimate" && $2 == a { print $3; exit }' "$WORK/refit.out")
			ratio=$(awk -v m="$tg" -v e="${e:--}" 'BEGIN { if (e + 0 > 0) printf "%.2f", m / e; else print "-" }')
			refit+=("$(printf '%-8s %-15s %9s %9s %6s  %s' "$name" "$alt" "${e:--}" "$tg" "$ratio" "$words,cpu:step=$host ($sm, $cm, $hm)")")
		done < <(awk -v c="$name" '$2 == c' "$OUT/measured.txt")
	done
fi

{
	echo
	echo "==== bench-placement: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1), reps $REPS, pp$PP tg$TG, $((SECONDS - T0)) s ===="
	echo "gpu0 rates (llmfs-gpus): ${rates:-none: $("$BIN/llmfs-gpus" 2>&1 | head -n 1)}"
	printf '%-8s %-15s %9s %9s %6s %9s  %s\n' case alternative "est t/s" "tg$TG t/s" ratio "pp$PP t/s" ""
	for r in "${rows[@]}"; do echo "$r"; done
	read -r words sm cm host hm <<<"$costs"
	echo "costs from these runs: step $sm, crossing $cm, host step $hm: --devices gpu0:vram=CAP,$words,cpu:step=$host"
	if [ ${#refit[@]} -gt 0 ]; then
		echo "planned again with the costs of the other cases' runs (leave one case out):"
		printf '%-8s %-15s %9s %9s %6s  %s\n' case alternative "est t/s" "tg$TG t/s" ratio "costs (of the other cases)"
		for r in "${refit[@]}"; do echo "$r"; done
	fi
	# the planner assumes 512 MiB until a backend has opened the card
	awk 'NF == 3 { n++; sub(/MiB$/, "", $3); if ($3 > m) m = $3; if (!lo || $3 < lo) lo = $3 }
		END { if (n) printf "VRAM reserve measured at gpu0'"'"'s open (+64 MiB after it): %d-%d MiB over %d runs (assumed before: 512 MiB)\n", lo, m, n
		      else print "VRAM reserve: not measured (no run opened gpu0)" }' "$OUT/reserve.txt"
} | tee "$OUT/placement.txt"
