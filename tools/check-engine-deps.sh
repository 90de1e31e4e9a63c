#!/usr/bin/env bash
# The engine's dependency rules, checked on the source (make check runs
# this through tests/engine/deps.sh; so does CI):
#
#   1. No include cycle between the files of engine/. A .c file and the
#      headers of the same name beside it are one module (x.c, x.h and
#      x_internal.h), and a folder's internal.h, the helpers its files
#      share (STYLE.md, section 2), is the module named after the folder
#      where there is one (template/internal.h with template/template.c);
#      a header without such a .c is a module of its own,
#      and so is a .c without a header. Module A depends on
#      module B when a file of A includes a file of B ("..." includes
#      only); the dependencies must form no cycle (tsort finds them).
#   2. Nothing outside engine/cpu/ names it ("cpu/" anywhere in a .c or .h)
#      but the registry of backends, engine/backend.c: the CPU backend is
#      one folder behind the table of engine/backend.h.
#
#   tools/check-engine-deps.sh [ENGINE_DIR]     (default: engine)
#
# Prints each cycle or file found and exits 1; exits 0 when both hold.
set -u
dir=${1:-engine}
[ -d "$dir" ] || { echo "check-engine-deps: no folder $dir" >&2; exit 2; }
root=$(cd "$dir" && pwd)
fail=0

# module of a file: its path without .c/.h, relative to the folder
module() {
	local f=${1#"$root"/} d
	d=$(dirname "$f")
	if [ "${f##*/}" = internal.h ] && [ "$d" != . ] &&
		[ -e "$root/$d/${d##*/}.c" ]; then
		echo "$d/${d##*/}"
		return
	fi
	f=${f%.[ch]}
	echo "${f%_internal}"
}

edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
while IFS= read -r -d '' f; do
	from=$(module "$f")
	# modules with no dependency still take part (a pair "x x")
	echo "$from $from" >>"$edges"
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
		"$f" | while IFS= read -r inc; do
		target=$(realpath -m "$(dirname "$f")/$inc")
		case $target in "$root"/*) ;; *) continue ;; esac
		[ -e "$target" ] || continue
		to=$(module "$target")
		[ "$to" = "$from" ] || echo "$from $to"
	done >>"$edges"
done < <(find "$root" -name '*.[ch]' -print0)

if ! out=$(tsort "$edges" 2>&1 >/dev/null); then
	echo "check-engine-deps: include cycles between modules of $dir:"
	echo "$out" | sed -n 's/^tsort: \([^:]*\)$/  \1/p; /loop/s/.*/cycle:/p'
	fail=1
fi

others=$(grep -rln 'cpu/' "$root" --include='*.[ch]' |
	sed "s|^$root/||" | grep -v '^cpu/' | grep -vx 'backend.c')
if [ -n "$others" ]; then
	echo "check-engine-deps: files outside $dir/cpu/ that name it (only the registry, backend.c, may):"
	echo "$others" | sed 's/^/  /'
	fail=1
fi
[ $fail -eq 0 ] && echo "check-engine-deps: $dir: no include cycle; only backend.c names cpu/"
exit $fail
