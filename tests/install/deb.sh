#!/usr/bin/env bash
# make deb: llmfs_VERSION_ARCH.deb holds what make install PREFIX=/usr
# installs and depends on the runtime libraries the binaries link and on
# fuse3; it installs on this machine with dpkg -i, the installed llmfs
# answers --version and mounts a model, and dpkg -r then dpkg -P remove it
# again. A machine with an llmfs package of its own is left alone (skip).
. "$(dirname "$0")/../fs/mount-lib.bash"
. "$(dirname "$0")/install-lib.bash"
for c in dpkg dpkg-deb dpkg-shlibdeps flock; do
	command -v $c >/dev/null || skip "$c is absent (packages dpkg-dev, util-linux)"
done

# One dpkg -i at a time on this machine (another checkout may run this).
exec 9>/tmp/llmfs-deb-test.lock
flock -w 600 9 || skip "another test holds /tmp/llmfs-deb-test.lock"
status=$(dpkg-query -W -f='${db:Status-Status}' llmfs 2>/dev/null)
[ -z "$status" ] || [ "$status" = not-installed ] ||
	skip "an llmfs package is on this machine ($status): not touching it"

# dpkg may be busy (apt-get in another checkout's make deps): wait for it.
dpkg_retry() {
	for _ in $(seq 120); do
		"$@" 2>"$WORK/dpkg.err" && return 0
		grep -q 'lock' "$WORK/dpkg.err" || break
		sleep 1
	done
	cat "$WORK/dpkg.err"
	return 1
}
INSTALLED=
deb_cleanup() {
	[ -n "$INSTALLED" ] && dpkg_retry dpkg -P llmfs >/dev/null
	cleanup
}
trap deb_cleanup EXIT

make -s --no-print-directory deb BUILD="$BUILD" DEB_OUT="$WORK/out" \
	DEB_STAGE="$WORK/stage" > "$WORK/deb.log" 2>&1
check "make deb exits 0" [ "$?" = 0 ]
DEB=$WORK/out/llmfs_${VERSION}_$(dpkg --print-architecture).deb
check "make deb wrote $(basename "$DEB")" [ -f "$DEB" ] || { cat "$WORK/deb.log"; finish; }

field() { dpkg-deb -f "$DEB" "$1"; }
check "Package: llmfs" [ "$(field Package)" = llmfs ]
check "Version: $VERSION" [ "$(field Version)" = "$VERSION" ]
deps=$(field Depends)
echo "# Depends: $deps"
for p in libfuse3-3 liburing2 libnuma1 libpcre2-8-0 libnettle8 libsystemd0 fuse3; do
	check "Depends names $p" grep -qE "(^|, )$p( |,|$)" <<<"$deps"
done
# Every library llmfs links comes from a package it depends on.
for lib in $(objdump -p "$BUILD/bin/llmfs" | awk '$1 == "NEEDED" { print $2 }'); do
	path=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
	pkg=$(dpkg -S "$(realpath "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
	[ -z "$pkg" ] && pkg=$(dpkg -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1)
	check "$lib ($pkg) is in Depends" grep -qE "(^|, )$pkg( |,|$)" <<<"$deps"
done

# The same files as make install PREFIX=/usr (man pages compressed).
make_install "$WORK/ref" PREFIX=/usr || exit 1
(cd "$WORK/ref" && find . -type f | sed 's/\.1$/.1.gz/' | sort) > "$WORK/want"
dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ { print $NF }' | sort > "$WORK/got"
if cmp -s "$WORK/want" "$WORK/got"; then
	ok "the package holds what make install installs ($(wc -l < "$WORK/want") files)"
else
	fail "the package holds what make install installs"
	diff "$WORK/want" "$WORK/got" | sed 's/^/  /'
fi

dpkg_retry dpkg -i "$DEB" > "$WORK/dpkg.log"
rc=$?
[ $rc = 0 ] && INSTALLED=1
check "dpkg -i installs it (exit $rc)" [ $rc = 0 ]
check "dpkg says it is installed" \
	[ "$(dpkg-query -W -f='${db:Status-Status}' llmfs)" = installed ]
out=$(/usr/bin/llmfs --version)
check "/usr/bin/llmfs --version says 'llmfs $VERSION' (got '$out')" \
	[ "$out" = "llmfs $VERSION" ]
check "/usr/bin/llmfs-inspect reads a model" \
	bash -c "/usr/bin/llmfs-inspect '$STORIES' | grep -q '^general.architecture  string  \"llama\"'"
check "/usr/bin/llmfs-run generates" \
	bash -c "/usr/bin/llmfs-run -m '$STORIES' -p 'Once upon' --temp 0 -n 8 2>/dev/null | grep -q ."
check "man -w llmfs finds the package's page" \
	[ "$(man -w llmfs 2>/dev/null)" = /usr/share/man/man1/llmfs.1.gz ]
check "the unit is in /usr/lib/systemd/system" \
	grep -qx 'ExecStart=/usr/bin/llmfs -f ${SOURCE} %f $OPTIONS' \
	/usr/lib/systemd/system/llmfs@.service
LLMFS=/usr/bin/llmfs
mount_llmfs --name stories="$STORIES"
wait_loaded
check "the packaged llmfs mounts a model" grep -q '^stories llama .* ready ' "$MNT/models"
unmount_llmfs

dpkg_retry dpkg -r llmfs > "$WORK/dpkg.log"
check "dpkg -r removes it" [ $? = 0 ]
check "/usr/bin/llmfs is gone" [ ! -e /usr/bin/llmfs ]
check "the unit is gone" [ ! -e /usr/lib/systemd/system/llmfs@.service ]
dpkg_retry dpkg -P llmfs > "$WORK/dpkg.log" && INSTALLED=
status=$(dpkg-query -W -f='${db:Status-Status}' llmfs 2>/dev/null)
check "dpkg knows no llmfs afterwards ('$status')" \
	bash -c "[ -z '$status' ] || [ '$status' = not-installed ]"
finish
