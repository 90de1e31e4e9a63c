#!/usr/bin/env bash
# A prompt is everything written through one open file description
# (Documentation/ABI.md, generate; reliability.md, defect 3): the shell
# forms scripts build prompts with, where several processes write through
# one description, each give the answer to the whole text (greedy, equal
# to llmfs-run's on the concatenated prompt), in the model's generate and
# in sessions/N/generate (one turn, one history entry). The prompt is
# submitted at the description's last close: `echo x > generate; cat
# generate` still finds its answer every time, and a read while the
# description is still open finds nothing submitted yet. (And a subnormal
# temperature is accepted, as greedy.)
. "$(dirname "$0")/mount-lib.bash"

mount_llmfs --name stories="$STORIES"
wait_loaded || fail "model loaded"
S=$MNT/stories
printf 'temperature=0\nmax_tokens=16\n' > "$S/config"
printf 'Once upon a time, there was a little girl.\n' > "$WORK/a"
printf 'She liked to play with her red ball.\n' > "$WORK/b"

# want TEXT: llmfs-run's answer to the prompt TEXT as generate takes it
# (one trailing newline dropped).
want() {
	local p=$1
	[ "${p: -1}" = $'\n' ] && p=${p%$'\n'}
	"$RUN" -m "$STORIES" -p "$p" --temp 0 -n 16 2>/dev/null
}
ab=$(cat "$WORK/a" "$WORK/b"; printf x)
ab=${ab%x}
want "$ab" > "$WORK/want-ab"
want "$(cat "$WORK/b")" > "$WORK/want-b"
if cmp -s "$WORK/want-ab" "$WORK/want-b"; then
	fail "the whole prompt's answer differs from its last part's"
else
	ok "the whole prompt's answer differs from its last part's"
fi

# 1. A group: two children write through the shell's one description.
{ cat "$WORK/a"; cat "$WORK/b"; } > "$S/generate"
cat "$S/generate" > "$WORK/got"
same "$WORK/want-ab" "$WORK/got" "{ cat a; cat b; } > generate: the answer to a+b"

# 2. A descriptor held open by the shell, written by a builtin and a child.
exec 3> "$S/generate"
printf '%s' "$(cat "$WORK/a")" >&3
printf '\n' >&3
cat "$WORK/b" >&3
cat "$S/generate" > "$WORK/got-open"
check "a read while the description is open: nothing submitted yet" [ ! -s "$WORK/got-open" ]
exec 3>&-
cat "$S/generate" > "$WORK/got"
same "$WORK/want-ab" "$WORK/got" "exec 3> generate; ...>&3; exec 3>&-: the answer to a+b"

# 3. A pipeline into tee.
cat "$WORK/a" "$WORK/b" | tee "$S/generate" > /dev/null
cat "$S/generate" > "$WORK/got"
same "$WORK/want-ab" "$WORK/got" "cat a b | tee generate: the answer to a+b"

# 4. Here-documents.
cat > "$S/generate" <<EOF
$(cat "$WORK/a")
$(cat "$WORK/b")
EOF
cat "$S/generate" > "$WORK/got"
same "$WORK/want-ab" "$WORK/got" "cat > generate <<EOF: the answer to a+b"

# 5. printf in a loop, one redirection for the loop.
words=$(cat "$WORK/a" "$WORK/b")
for w in $words; do printf '%s ' "$w"; done > "$S/generate"
loop=$(for w in $words; do printf '%s ' "$w"; done)
want "$loop" > "$WORK/want-loop"
cat "$S/generate" > "$WORK/got"
same "$WORK/want-loop" "$WORK/got" "for ...; do printf; done > generate: the answer to the whole loop"

# 6. A subshell and a child writing in turn, with a delay between.
( printf '%s\n' "$(cat "$WORK/a")"; sleep 0.2; cat "$WORK/b" ) > "$S/generate"
cat "$S/generate" > "$WORK/got"
same "$WORK/want-ab" "$WORK/got" "( a; sleep; cat b ) > generate: the answer to a+b"

# 7. The same forms in a session: one turn, recorded once.
n=$(cat "$S/sessions/new")
{ cat "$WORK/a"; cat "$WORK/b"; } > "$S/sessions/$n/generate"
cat "$S/sessions/$n/generate" > "$WORK/got"
same "$WORK/want-ab" "$WORK/got" "{ cat a; cat b; } > sessions/N/generate: the answer to a+b"
check "... history holds one exchange" \
	[ "$(grep -c '^--- prompt$' "$S/sessions/$n/history")" = 1 ]
check "... whose prompt is a+b" grep -qx 'She liked to play with her red ball.' "$S/sessions/$n/history"

# 8. echo then cat at once, again and again: the release of echo's
# description reaches the daemon before cat's read is answered.
bad=0
for i in $(seq 40); do
	echo "Once upon a time number $((i % 4))" > "$S/generate"
	cat "$S/generate" > "$WORK/got-$i"
	[ -s "$WORK/got-$i" ] || bad=$((bad + 1))
done
check "echo > generate; cat generate: 40 of 40 answers ($bad empty)" [ "$bad" = 0 ]
for k in 0 1 2 3; do
	want "Once upon a time number $k" > "$WORK/want-n$k"
done
wrong=0
for i in $(seq 40); do
	cmp -s "$WORK/want-n$((i % 4))" "$WORK/got-$i" || wrong=$((wrong + 1))
done
check "... each equal to llmfs-run's ($wrong differ)" [ "$wrong" = 0 ]
# and the other files a prompt is written to the same way
for f in chat tokenize embed embed.f32; do
	bad=0
	for i in $(seq 40); do
		echo "Once upon a time number $((i % 4))" > "$S/$f"
		cat "$S/$f" > "$WORK/got-$f"
		[ -s "$WORK/got-$f" ] || bad=$((bad + 1))
	done
	check "echo > $f; cat $f: 40 of 40 answers ($bad empty)" [ "$bad" = 0 ]
done

# A subnormal temperature is inside the range (0 to 100): accepted, and
# its limit, greedy, is what it gives.
if printf 'temperature=1e-320\n' > "$S/config" 2>"$WORK/err"; then
	ok "temperature=1e-320 is accepted"
else
	fail "temperature=1e-320 is accepted ($(cat "$WORK/err"))"
fi
{ cat "$WORK/a"; cat "$WORK/b"; } > "$S/generate"
cat "$S/generate" > "$WORK/got"
same "$WORK/want-ab" "$WORK/got" "... and generates as greedy"
unmount_llmfs
finish
