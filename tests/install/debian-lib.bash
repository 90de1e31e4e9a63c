# Shared by tests/install/podman.sh and nspawn.sh (sourced after
# tests/fs/mount-lib.bash): a Debian 12 tree made by debootstrap, kept as a
# tarball outside the clone so that only the first run downloads it.
#
# debian_tree_tar: sets DEBIAN_TAR to the tarball's path, making it if
# needed (or skips the test, with the reason; returns 1 if debootstrap
# failed). The tree is minbase plus systemd and the
# libraries the built llmfs links (from ldd, so that a new library makes a
# new tree); its file name carries a digest of every input (suite, variant,
# packages, mirror, debootstrap's version, architecture), so a change of
# any makes another. LLMFS_CACHE (default ~/.cache/llmfs, as
# tools/build-llama.sh) is where; LLMFS_DEBIAN_MIRROR the mirror.

DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${LLMFS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_CACHE=${LLMFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/llmfs}

# The Debian packages of the libraries llmfs links, sorted.
debian_llmfs_libs() {
	ldd "$LLMFS" | awk '/=> \// { print $3 }' | while read -r lib; do
		dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
			dpkg -S "$lib" 2>/dev/null
	done | cut -d: -f1 | sort -u | tr '\n' ',' | sed 's/,$//'
}

debian_tree_tar() {
	local include key tar log
	command -v debootstrap >/dev/null || skip "debootstrap is absent (make deps)"
	include="systemd,systemd-sysv,dbus,fuse3,$(debian_llmfs_libs)"
	key=$(printf '%s\n' "$DEBIAN_SUITE" minbase "$include" "$DEBIAN_MIRROR" \
		"$(dpkg-query -W -f '${Version}' debootstrap)" "$(uname -m)" |
		sha256sum | cut -c1-16)
	tar=$DEBIAN_CACHE/debian-$DEBIAN_SUITE-$key.tar
	mkdir -p "$DEBIAN_CACHE"
	# one maker at a time; the others wait and use its tarball
	exec 8>"$tar.lock"
	flock 8
	if [ ! -s "$tar" ]; then
		curl -sfI --max-time 20 "$DEBIAN_MIRROR/dists/$DEBIAN_SUITE/Release" \
			>/dev/null || skip "the Debian mirror $DEBIAN_MIRROR cannot be reached"
		log=$WORK/debootstrap.log
		echo "# debootstrap $DEBIAN_SUITE (once; cached as $tar)" >&2
		if ! debootstrap --variant=minbase --include="$include" \
			"$DEBIAN_SUITE" "$WORK/debootstrap" "$DEBIAN_MIRROR" \
			>"$log" 2>&1; then
			tail -n 20 "$log" >&2
			flock -u 8
			return 1
		fi
		rm -rf "$WORK/debootstrap/var/cache/apt/archives/"*.deb
		tar -C "$WORK/debootstrap" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
		rm -rf "$WORK/debootstrap"
	fi
	flock -u 8
	DEBIAN_TAR=$tar
}
