#!/usr/bin/env bash
# fs/'s dependency rule, checked on the source (make check runs this
# through tests/fs/deps.sh; so does CI): fs/ reaches the model only
# through the engine's public API (STYLE.md, section 1: fs/ -> engine/ ->
# io/).
#
#   1. The only header outside fs/ that a file of fs/ includes ("..."
#      includes) is engine/engine.h.
#   2. No file of fs/ names io/'s GGUF, weights or type API (io_gguf*,
#      io_weights*, io_placement*, io_type*, io_ftype*, IO_TYPE_*): the
#      info file, weights/ and the huge-page merge ask the engine
#      (engine_model_tensor, engine_tensor_bytes, engine_model_merge_step,
#      ...). io/'s load options (io_load_options, io_numa_policy,
#      io_device_set), which engine_model_options carries, are not in
#      that list: they are how the mount configures a load.
#
#   tools/check-fs-deps.sh [FS_DIR]     (default: fs)
#
# Prints each file and line found and exits 1; exits 0 when both hold.
set -u
dir=${1:-fs}
[ -d "$dir" ] || { echo "check-fs-deps: no folder $dir" >&2; exit 2; }
root=$(cd "$dir" && pwd)
fail=0

includes=$(find "$root" -name '*.[ch]' -print0 | while IFS= read -r -d '' f; do
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' \
		"$f" | while IFS= read -r inc; do
		target=$(realpath -m "$(dirname "$f")/$inc")
		case $target in
		"$root"/*) ;;
		*/engine/engine.h) ;;
		*) echo "  ${f#"$root"/}: $inc" ;;
		esac
	done
done)
if [ -n "$includes" ]; then
	echo "check-fs-deps: files of $dir that include a header outside it other than engine/engine.h:"
	echo "$includes"
	fail=1
fi

names=$(grep -rnE '\b(io_(gguf|weights|placement|type|ftype)|IO_TYPE_)' \
	"$root" --include='*.[ch]' | sed "s|^$root/|  |")
if [ -n "$names" ]; then
	echo "check-fs-deps: files of $dir that name io/'s GGUF, weights or type API (ask the engine):"
	echo "$names"
	fail=1
fi
[ $fail -eq 0 ] && echo "check-fs-deps: $dir: only engine/engine.h from outside; no io/ GGUF, weights or type names"
exit $fail
