#!/usr/bin/env bash
# The engine's dependency rules (tools/check-engine-deps.sh) hold on
# engine/, and the checker finds what it is there to find: an include
# cycle through a .c file and its header, and a file outside cpu/ that
# names it.
set -u
cd "$(dirname "$0")/../.." || exit 1
check=tools/check-engine-deps.sh
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
command -v tsort >/dev/null || { echo "no tsort: skipped"; exit 77; }

out=$("$check" engine) || fail "engine/: $out"

work=$(mktemp -d /tmp/llmfs-deps-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/e/cpu"
# a.c includes b.h, b.c includes a.h: modules a and b need each other
printf '#include "a.h"\n#include "b.h"\n' >"$work/e/a.c"
printf '#include "b.h"\n#include "a.h"\n' >"$work/e/b.c"
: >"$work/e/a.h"
: >"$work/e/b.h"
printf '#include "../a.h"\n' >"$work/e/cpu/k.c"
printf '#include "cpu/k.h"\n' >"$work/e/backend.c"
: >"$work/e/cpu/k.h"
out=$("$check" "$work/e") && fail "a cycle a <-> b was not found"
echo "$out" | grep -qx '  a' && echo "$out" | grep -qx '  b' ||
	fail "the cycle's modules are not named: $out"
# a header that includes the other's header makes a cycle too
rm "$work/e/b.c"
printf '#include "a.h"\n' >"$work/e/b.h"
"$check" "$work/e" >/dev/null && fail "a cycle a.c -> b.h -> a.h was not found"
: >"$work/e/b.h"
"$check" "$work/e" >/dev/null || fail "a tree without a cycle failed"
# a folder's internal.h that includes the folder's own header is that
# module's (t/t.c -> t/internal.h -> t/t.h): no cycle
mkdir -p "$work/e/t"
printf '#include "internal.h"\n' >"$work/e/t/t.c"
printf '#include "t.h"\n' >"$work/e/t/internal.h"
: >"$work/e/t/t.h"
printf '#include "internal.h"\n' >"$work/e/t/u.c"
"$check" "$work/e" >/dev/null || fail "t/internal.h -> t/t.h made a cycle"
# but a cycle through it is one still (t.h -> u.h -> internal.h -> t.h)
printf '#include "internal.h"\n' >"$work/e/t/u.h"
printf '#include "u.h"\n' >"$work/e/t/t.h"
"$check" "$work/e" >/dev/null && fail "t -> u -> t through internal.h was not found"
rm -r "$work/e/t"
# outside cpu/ only backend.c may name it
printf '/* see cpu/k.c */\n' >"$work/e/a.h"
out=$("$check" "$work/e") && fail "a.h names cpu/ and passed"
echo "$out" | grep -qx '  a.h' || fail "a.h is not named: $out"

[ $fails -eq 0 ] && echo "deps: engine/ holds the rules; the checker finds cycles and cpu/ names"
[ $fails -eq 0 ]
