#!/usr/bin/env bash
# make install DESTDIR=...: every file where it belongs; the installed llmfs
# answers --version and --help, mounts a shared model and generates what
# llmfs-run generates, loads the installed CUDA module (where the build
# has one), takes its options in the form mount.fuse3 passes them;
# systemd-analyze verify accepts the installed unit; make uninstall
# removes every file again.
. "$(dirname "$0")/../fs/mount-lib.bash"
. "$(dirname "$0")/install-lib.bash"

D=$WORK/root
make_install "$D" || exit 1
find "$D" -type f -printf '/%P\n' | sort > "$WORK/got"
expected_files /usr/local | sort > "$WORK/want"
if cmp -s "$WORK/want" "$WORK/got"; then
	ok "make install wrote the $(wc -l < "$WORK/want") expected files and nothing else"
else
	fail "make install wrote the expected files"
	diff "$WORK/want" "$WORK/got" | sed 's/^/  /'
fi
B=$D/usr/local/bin
for f in llmfs llmfs-run llmfs-inspect; do
	check "bin/$f is executable (mode $(stat -c %a "$B/$f" 2>/dev/null))" \
		[ "$(stat -c %a "$B/$f" 2>/dev/null)" = 755 ]
done
U=$D/usr/local/lib/systemd/system/llmfs@.service
check "the unit runs the installed binary" \
	grep -qx 'ExecStart=/usr/local/bin/llmfs -f ${SOURCE} %f $OPTIONS' "$U"
check "no @BINDIR@ left in the unit" bash -c "! grep -q '@BINDIR@' '$U'"

# --version and --help: exit 0, on stdout.
out=$("$B/llmfs" --version)
rc=$?
check "llmfs --version exits 0 (got $rc)" [ "$rc" = 0 ]
check "llmfs --version says 'llmfs $VERSION' (got '$out')" \
	[ "$out" = "llmfs $VERSION" ]
check "llmfs -V is --version" [ "$("$B/llmfs" -V)" = "llmfs $VERSION" ]
"$B/llmfs" --help > "$WORK/help" 2>"$WORK/help.err"
check "llmfs --help exits 0" [ "$?" = 0 ]
check "--help prints the usage on stdout" grep -q '^usage: llmfs' "$WORK/help"
check "--help writes nothing on stderr" [ ! -s "$WORK/help.err" ]
"$B/llmfs" --no-such-option >/dev/null 2>"$WORK/bad"
check "an unknown option exits 1" [ "$?" = 1 ]
check "... with the usage on stderr" grep -q '^usage: llmfs' "$WORK/bad"

# Each man page renders, and man finds it under the installed MANPATH.
if command -v man >/dev/null; then
	for f in llmfs llmfs-run llmfs-inspect; do
		LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l \
			"$D/usr/local/share/man/man1/$f.1" >"$WORK/man" 2>"$WORK/man.err"
		check "$f.1 renders" [ -s "$WORK/man" ]
		check "$f.1 renders without warnings" [ ! -s "$WORK/man.err" ]
		sed 's/^/  /' "$WORK/man.err"
		check "man finds $f(1) under the installed MANPATH" \
			[ "$(MANPATH=$D/usr/local/share/man man -w "$f")" = \
			  "$D/usr/local/share/man/man1/$f.1" ]
	done
	check "llmfs(1) has the fstab example" grep -qF \
		'/srv/models  /mnt/llm  fuse.llmfs  allow_other,threads=8,nofail  0 0' \
		"$D/usr/local/share/man/man1/llmfs.1"
else
	fail "man is absent (man-db, make deps): the man pages cannot be rendered"
fi

# PREFIX=/usr: the unit goes where Debian's units are.
make_install "$WORK/usr-root" PREFIX=/usr || exit 1
check "PREFIX=/usr: unit in /usr/lib/systemd/system, running /usr/bin/llmfs" \
	grep -qx 'ExecStart=/usr/bin/llmfs -f ${SOURCE} %f $OPTIONS' \
	"$WORK/usr-root/usr/lib/systemd/system/llmfs@.service"
check "PREFIX=/usr: the binaries in /usr/bin" [ -x "$WORK/usr-root/usr/bin/llmfs" ]

# The installed llmfs mounts a shared model and generates.
P='Once upon a time, there was a little girl named Lily.'
"$B/llmfs-run" -m "$STORIES" -p "$P" --temp 0 -n 32 > "$WORK/expect" 2>/dev/null
check "the installed llmfs-run generates" [ -s "$WORK/expect" ]
LLMFS=$B/llmfs
mount_llmfs --name stories="$STORIES"
wait_loaded || fail "model loaded"
printf 'temperature=0\nmax_tokens=32\n' > "$MNT/stories/config"
printf '%s' "$P" > "$MNT/stories/generate"
cat "$MNT/stories/generate" > "$WORK/got-text"
same "$WORK/expect" "$WORK/got-text" "the installed llmfs generates what llmfs-run does"
unmount_llmfs

# The installed llmfs loads the installed CUDA module: asked for GPUs
# (--devices auto), its status lists the module's GPUs, or it says why
# there are none in the module's words (no driver here), never that it
# has no module.
if [ -f "$BUILD/lib/llmfs-cuda.so" ]; then
	before=$(wc -l <"$WORK/daemon.log")
	mount_llmfs --name stories="$STORIES" --devices auto
	wait_loaded || fail "model loaded (--devices auto)"
	cp "$MNT/status" "$WORK/status-auto"
	unmount_llmfs
	tail -n +$((before + 1)) "$WORK/daemon.log" >"$WORK/daemon-auto.log"
	check "the installed llmfs loads the installed CUDA module" \
		bash -c "! grep -q 'no CUDA module' '$WORK/daemon-auto.log' &&
			{ grep -q '^device gpu' '$WORK/status-auto' ||
			  grep -q '^llmfs: --devices auto: no CUDA device' \
				'$WORK/daemon-auto.log'; }"
	sed 's/^/  /' "$WORK/daemon-auto.log"
fi

# The form mount.fuse3 uses, by hand: options after SOURCE and MOUNTPOINT,
# long options spelled with '-' or '_' inside -o.
"$B/llmfs" -f "$STORIES" "$MNT" -o idle-timeout=5,threads=1,ctx=128,nofail \
	>>"$WORK/daemon.log" 2>&1 &
PID=$!
wait_for 60 mounted_up "$PID"
wait_loaded || fail "model loaded"
check "llmfs SOURCE MOUNTPOINT -o threads=1: status says threads=1" \
	grep -q '^device cpu threads=1' "$MNT/status"
check "... ctx=128: kv says n_ctx 128" grep -qx 'n_ctx 128' "$MNT/stories260k/kv"
unmount_llmfs

# systemd-analyze verify on the unit as installed: in a private mount
# namespace the DESTDIR tree is /usr/local, so the binary and the man page
# it names are where the unit says (verify checks both). It exits 0 on
# warnings too: any output is a failure.
if command -v systemd-analyze >/dev/null; then
	unshare -m sh -c "mount --bind '$D/usr/local' /usr/local &&
		systemd-analyze verify /usr/local/lib/systemd/system/llmfs@.service" \
		>"$WORK/verify" 2>&1
	rc=$?
	check "systemd-analyze verify accepts llmfs@.service (exit $rc)" \
		[ "$rc" = 0 ]
	check "... and says nothing (no warning)" [ ! -s "$WORK/verify" ]
	sed 's/^/  /' "$WORK/verify"
	# The same check refuses a broken copy (so it can fail).
	sed 's/^Type=notify/Type=notifyy/' "$U" > "$WORK/broken@.service"
	unshare -m sh -c "mount --bind '$D/usr/local' /usr/local &&
		systemd-analyze verify '$WORK/broken@.service'" >"$WORK/verify" 2>&1
	check "systemd-analyze verify reports a broken copy" \
		grep -q 'Failed to parse service type' "$WORK/verify"
else
	fail "systemd-analyze is absent (Debian package systemd)"
fi

make -s --no-print-directory uninstall BUILD="$BUILD" DESTDIR="$D" >/dev/null
check "make uninstall removes every file" [ -z "$(find "$D" -type f)" ]
finish
