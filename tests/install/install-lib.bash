# Shared by tests/install/*.sh (sourced after tests/fs/mount-lib.bash).
#
# make_install DESTDIR [make variables...]: make install into DESTDIR. The
# binaries come from $BUILD as tests/run found them; nothing is written under
# the build tree (a test running beside this one reads it).

VERSION=$(sed -n 's/^VERSION = //p' Makefile)
[ -n "$VERSION" ] || skip "no VERSION line in the Makefile"

make_install() {
	local dest=$1
	shift
	make -s --no-print-directory install BUILD="$BUILD" DESTDIR="$dest" "$@" \
		>"$WORK/install.log" 2>&1 && return 0
	echo "make install failed:"
	cat "$WORK/install.log"
	return 1
}

# The files make install must write for PREFIX (the list from the issue:
# binaries, their man pages, the unit, the documentation; the CUDA
# module).
expected_files() {
	local p=$1 f
	for f in llmfs llmfs-run llmfs-inspect; do
		echo "$p/bin/$f"
		echo "$p/share/man/man1/$f.1"
	done
	echo "$p/lib/systemd/system/llmfs@.service"
	echo "$p/share/doc/llmfs/README.md"
	for f in Documentation/*.md; do
		echo "$p/share/doc/llmfs/${f#Documentation/}"
	done
	# the CUDA module, where the build has one (nvcc)
	[ -f "$BUILD/lib/llmfs-cuda.so" ] && echo "$p/lib/llmfs/llmfs-cuda.so"
	return 0
}
