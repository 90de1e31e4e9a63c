# Shared by tests/engine/gpu0.sh and ref0.sh (sourced): a part of the
# run, its report, and test_golden ($golden) under a placement. Failures
# count in $fails.
#
# run_part WHAT PATTERN COMMAND...: runs COMMAND, its output and errors
# together. A skip (77) ends the script with the command's last line (its
# reason); a failure prints "FAIL: WHAT" and the output's last 20 lines;
# a pass prints "WHAT (N s):" and the lines of the output that match
# PATTERN (grep), indented.
run_part() {
	local what=$1 pattern=$2 start=$SECONDS out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	[ $rc -eq 77 ] && { echo "$out" | tail -n 1; exit 77; }
	if [ $rc -ne 0 ]; then
		echo "FAIL: $what"
		echo "$out" | tail -n 20
		fails=$((fails + 1))
		return
	fi
	echo "$what ($((SECONDS - start)) s):"
	echo "$out" | grep "$pattern" | sed 's/^/  /'
}

# golden_place WHAT PLACE [VAR=VALUE...]: the golden prompts (run_part)
# with the weights placed by PLACE, "COMMAND" or "COMMAND;THEN" (THEN
# written once the weights are loaded: "kv cpu"), in the environment
# VAR=VALUE...; WHAT empty: "golden prompts with 'PLACE'".
golden_place() {
	local what=${1:-"golden prompts with '$2'"} place=$2
	shift 2
	run_part "$what" 'matched prefixes' env "$@" \
		GOLDEN_PLACEMENT="${place%%;*}" \
		GOLDEN_PLACEMENT_THEN="$([[ $place == *\;* ]] && echo "${place#*;}")" \
		"$golden"
}
