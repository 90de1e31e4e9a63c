#!/usr/bin/env bash
# fs/'s dependency rule (tools/check-fs-deps.sh) holds on fs/, and the
# checker finds what it is there to find: an include of an engine header
# other than engine.h, and a call of io/'s GGUF or weights API.
set -u
cd "$(dirname "$0")/../.." || exit 1
check=tools/check-fs-deps.sh
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$("$check" fs) || fail "fs/: $out"

work=$(mktemp -d /tmp/llmfs-fsdeps-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/engine" "$work/io" "$work/fs/local"
: >"$work/engine/engine.h"
: >"$work/engine/model.h"
: >"$work/io/io.h"
printf '#include "internal.h"\n#include "../engine/engine.h"\n' >"$work/fs/a.c"
: >"$work/fs/internal.h"
printf '#include "../internal.h"\n' >"$work/fs/local/b.c"
"$check" "$work/fs" >/dev/null || fail "a tree that keeps the rule failed"
# an engine header other than engine.h, from a subfolder
printf '#include "../../engine/model.h"\n' >>"$work/fs/local/b.c"
out=$("$check" "$work/fs") && fail "an include of engine/model.h passed"
echo "$out" | grep -q 'local/b.c: ../../engine/model.h' ||
	fail "the include is not named: $out"
printf '#include "../internal.h"\n' >"$work/fs/local/b.c"
printf '#include "../io/io.h"\n' >>"$work/fs/a.c"
"$check" "$work/fs" >/dev/null && fail "an include of io/io.h passed"
printf '#include "internal.h"\n' >"$work/fs/a.c"
# a call of io/'s weights API
printf 'int f(void) { return io_weights_collapse_step(0, 0, 0); }\n' \
	>>"$work/fs/local/b.c"
out=$("$check" "$work/fs") && fail "io_weights_collapse_step passed"
echo "$out" | grep -q 'local/b.c:2:' || fail "the line is not named: $out"
printf '#include "../internal.h"\n' >"$work/fs/local/b.c"
printf 'static const struct io_gguf_tensor *t;\n' >>"$work/fs/a.c"
"$check" "$work/fs" >/dev/null && fail "struct io_gguf_tensor passed"

[ $fails -eq 0 ] && echo "deps: fs/ holds the rule; the checker finds foreign includes and io/ names"
[ $fails -eq 0 ]
