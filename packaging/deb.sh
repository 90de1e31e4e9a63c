#!/usr/bin/env bash
# packaging/deb.sh STAGE OUTDIR: turn STAGE/root (what `make install
# PREFIX=/usr DESTDIR=STAGE/root` wrote) into OUTDIR/llmfs_VERSION_ARCH.deb.
# Run by `make deb`, which sets VERSION and MAINTAINER.
#
# Depends are what dpkg-shlibdeps finds the binaries linked against (so a
# library added to the build is added here with no edit), plus fuse3 for
# fusermount3 and mount.fuse3. Binaries are stripped and man pages
# compressed, as Debian policy asks; nothing else differs from make install.
set -eu
stage=$1
out=$2
root=$stage/root
arch=$(dpkg --print-architecture)
deb=$out/llmfs_${VERSION}_$arch.deb

strip --strip-unneeded --remove-section=.comment --remove-section=.note \
	"$root"/usr/bin/*
gzip -9n "$root"/usr/share/man/man1/*.1

# dpkg-shlibdeps reads debian/control from its working directory.
mkdir -p "$stage/src/debian"
printf 'Source: llmfs\n\nPackage: llmfs\nArchitecture: any\n' \
	> "$stage/src/debian/control"
# the CUDA module too, where the build has one (libstdc++ for it)
bins=$(cd "$root" && printf -- '-e%s ' "$PWD"/usr/bin/* \
	$(ls "$PWD"/usr/lib/llmfs/*.so 2>/dev/null))
shlibs=$(cd "$stage/src" && dpkg-shlibdeps -O $bins 2>/dev/null |
	sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || { echo "deb.sh: dpkg-shlibdeps found no libraries" >&2; exit 1; }

mkdir -p "$root/DEBIAN"
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) \
	> "$root/DEBIAN/md5sums"
cat > "$root/DEBIAN/control" <<EOF
Package: llmfs
Version: $VERSION
Architecture: $arch
Maintainer: $MAINTAINER
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $shlibs, fuse3
Section: utils
Priority: optional
Description: local language models (GGUF) as a FUSE filesystem
 llmfs mounts GGUF models as directories: write a prompt to a model's
 generate file and read the answer from it. Includes llmfs-run (generate
 from the command line), llmfs-inspect (a GGUF file's metadata and
 tensors) and a systemd unit, llmfs@.service. Where it was built with
 CUDA it computes on an NVIDIA GPU (the driver's libcuda.so.1), and on
 the CPU without one.
EOF
mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
