#!/usr/bin/env bash
# fstab and mount -t fuse.llmfs, in a private mount namespace: a temporary
# fstab line is mounted by mount(8) through mount.fuse3, which runs the
# installed llmfs as `llmfs SOURCE MOUNTPOINT -o OPTIONS`; its options take
# effect (threads= in status, ctx= and kv_type_k= in kv, name=ALIAS:PATH,
# remote= with an escaped comma, a ':' list of models), mount(8)'s own
# options are ignored, bad ones fail the mount; the
# mount is used by root, by another user and from a new user+mount+pid
# namespace (a container without a container engine) with allow_other and
# refused without it; umount unmounts and the daemon exits.
set -u
# mount(8) clears PATH for mount.fuse3, whose shell then finds llmfs in
# /usr/local/bin: this namespace shows the DESTDIR tree there.
if [ -z "${LLMFS_FSTAB_NS:-}" ]; then
	unshare -m true 2>/dev/null || { echo "skip: unshare -m fails"; exit 77; }
	LLMFS_FSTAB_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../fs/mount-lib.bash"
. "$(dirname "$0")/install-lib.bash"
command -v mount.fuse3 >/dev/null || skip "mount.fuse3 is absent (package fuse3)"
command -v setpriv >/dev/null || skip "setpriv is absent"

# the daemon serving mount point $1 (it detached from mount(8))
daemon_of() {
	pgrep -f "^llmfs .*$1( |\$)" | head -n 1
}

# mount-lib's cleanup knows $MNT only: the other mounts and their daemons
# first (their namespace is this one, which their daemons keep alive).
fstab_cleanup() {
	local m pid
	for m in "$WORK"/mnt2 "$WORK"/mnt3* "$WORK"/mnt4; do
		pid=$(daemon_of "$m")
		mountpoint -q "$m" 2>/dev/null && umount -l "$m"
		[ -n "$pid" ] && kill "$pid" 2>/dev/null
	done
	cleanup
}
trap fstab_cleanup EXIT

D=$WORK/root
make_install "$D" || exit 1
mount --bind "$D/usr/local" /usr/local || skip "cannot bind-mount over /usr/local"
check "llmfs is found as mount.fuse3's shell finds it" \
	[ "$(env -i /bin/sh -c 'command -v llmfs')" = /usr/local/bin/llmfs ]

chmod 755 "$WORK"    # nobody must reach the mount points
NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
CONTAINER="unshare -U -m -p -f --map-root-user"
P='Once upon a time, there was a little girl named Lily.'
"$RUN" -m "$STORIES" -p "$P" --temp 0 -n 32 > "$WORK/expect" 2>/dev/null
GEN="printf '%s' '$P' > '$MNT/story/generate'; cat '$MNT/story/generate'"

# umount_fstab MOUNTPOINT: umount(8), then the daemon must go.
umount_fstab() {
	local pid
	pid=$(daemon_of "$1")
	check "the daemon of $1 is running" [ -n "$pid" ]
	check "umount $1" umount "$1"
	check "... not mounted any more" bash -c "! mountpoint -q '$1'"
	check "... and its daemon exited" wait_for 60 gone "${pid:-0}"
	[ "$1" = "$MNT" ] && PID=
}

FSTAB=$WORK/fstab
OPTS="allow_other,threads=3,ctx=256,idle_timeout=60,numa=default,kv_type_k=q8_0"
OPTS="$OPTS,name=story:$STORIES,nofail,_netdev,x-systemd.automount"
OPTS="$OPTS,x-systemd.device-timeout=10s,comment=llmfs,defaults"
# a value with a comma: "\," (--remote NAME=URL,timeout=S)
OPTS="$OPTS,remote=big=http://127.0.0.1:9/v1\\,timeout=7"
mkdir -p "$WORK/mnt2" "$WORK/mnt3"
cat > "$FSTAB" <<FSTAB_EOF
# a temporary fstab: mount -T reads it instead of /etc/fstab
$STORIES:$QWEN  $MNT  fuse.llmfs  $OPTS  0 0
$STORIES  $WORK/mnt2  fuse.llmfs  name=story:$STORIES  0 0
$STORIES  $WORK/mnt4  fuse.llmfs  ro,default_permissions,allow_other  0 0
$STORIES  $WORK/mnt3  fuse.llmfs  threads=many  0 0
$STORIES  $WORK/mnt3b  fuse.llmfs  threads  0 0
$STORIES  $WORK/mnt3c  fuse.llmfs  no_such_option  0 0
FSTAB_EOF

mount -T "$FSTAB" "$MNT" 2>"$WORK/mount.err"
rc=$?
check "mount -T FSTAB MOUNTPOINT exits 0 (got $rc)" [ "$rc" = 0 ]
sed 's/^/  /' "$WORK/mount.err"
check "mounted" mountpoint -q "$MNT"
PID=$(daemon_of "$MNT")    # for mount-lib's cleanup
check "the daemon runs as 'llmfs SOURCE MOUNTPOINT -o ...'" [ -n "$PID" ]
line=$(awk -v m="$MNT" '$2 == m' /proc/self/mounts)
echo "# /proc/self/mounts: $line"
check "type fuse.llmfs, allow_other" \
	bash -c "[[ '$line' == *' fuse.llmfs '*allow_other* ]]"
check "its source is the fstab SOURCE field" \
	bash -c "[[ '$line' == '$(realpath "$STORIES"):$QWEN '* || '$line' == '$STORIES:$QWEN '* ]]"
wait_loaded || fail "models loaded"
check "every model of the ':' list, name= and remote= is mounted" \
	[ "$(cut -d' ' -f1 "$MNT/models" | sort | tr '\n' ' ')" = \
	  "big stories260k story tiny-qwen3-bpe16k-f16 " ]
check "remote=...\\,timeout=7 kept its comma (info: $(grep timeout "$MNT/big/info"))" \
	grep -qx 'timeout_s 7' "$MNT/big/info"
check "threads=3 took effect (status: $(grep '^device' "$MNT/status"))" \
	grep -q '^device cpu threads=3' "$MNT/status"
check "ctx=256 took effect (kv: $(grep '^n_ctx' "$MNT/story/kv"))" \
	grep -qx 'n_ctx 256' "$MNT/story/kv"
K=$MNT/tiny-qwen3-bpe16k-f16/kv
check "kv_type_k=q8_0 took effect (kv: $(grep '^type_k' "$K"))" \
	grep -qx 'type_k q8_0' "$K"
grep "^$STORIES:" "$FSTAB" > "$WORK/fstab-a"
mount -T "$WORK/fstab-a" -a 2>/dev/null
check "mount -a sees the line is mounted (no second mount)" \
	[ "$(awk -v m="$MNT" '$2 == m' /proc/self/mounts | wc -l)" = 1 ]

printf 'temperature=0\nmax_tokens=32\n' > "$MNT/story/config"
bash -c "$GEN" > "$WORK/root-text"
same "$WORK/expect" "$WORK/root-text" "root generates through the fstab mount"
$NOBODY bash -c "$GEN" > "$WORK/nobody-text" 2>"$WORK/err"
same "$WORK/expect" "$WORK/nobody-text" "another user (uid 65534) generates (allow_other)"
$CONTAINER bash -c "$GEN" > "$WORK/ns-text" 2>"$WORK/err"
same "$WORK/expect" "$WORK/ns-text" "unshare -U -m -p -f --map-root-user (as root) generates"
$NOBODY $CONTAINER bash -c "[ \$(id -u) = 0 ] && [ \$\$ = 1 ] && $GEN" \
	> "$WORK/ns-nobody-text" 2>"$WORK/err"
same "$WORK/expect" "$WORK/ns-nobody-text" \
	"a container of uid 65534 (root and pid 1 inside) generates"
sed 's/^/  /' "$WORK/err"

# The second line has no allow_other: the kernel keeps the others out.
check "mount -T the line without allow_other" mount -T "$FSTAB" "$WORK/mnt2"
check "without allow_other root reads it" grep -q '^story ' "$WORK/mnt2/models"
check "without allow_other another user is refused" \
	bash -c "! $NOBODY cat '$WORK/mnt2/models' 2>/dev/null"
check "without allow_other a container of another user is refused" \
	bash -c "! $NOBODY $CONTAINER cat '$WORK/mnt2/models' 2>/dev/null"
umount_fstab "$WORK/mnt2"

# FUSE's own options pass through: ro reaches the kernel and llmfs.
mkdir -p "$WORK/mnt4"
check "mount -T a line with ro,default_permissions" mount -T "$FSTAB" "$WORK/mnt4"
check "ro: the kernel mount is read-only" \
	bash -c "awk -v m='$WORK/mnt4' '\$2 == m { print \$4 }' /proc/self/mounts | grep -q '^ro,'"
check "ro: status says ro" grep -q '^device cpu .* ro$' "$WORK/mnt4/status"
if { printf x > "$WORK/mnt4/stories260k/generate"; } 2>"$WORK/err"; then
	fail "ro: generate refuses a prompt"
else
	check "ro: generate refuses a prompt with EROFS" \
		grep -q 'Read-only file system' "$WORK/err"
fi
umount_fstab "$WORK/mnt4"

# Bad options fail the mount, with the reason.
mkdir -p "$WORK/mnt3b" "$WORK/mnt3c"
for m in mnt3:"bad number 'many'" mnt3b:"-o threads: wants a value" \
		mnt3c:"unknown option"; do
	dir=$WORK/${m%%:*} want=${m#*:}
	if mount -T "$FSTAB" "$dir" 2>"$WORK/err"; then
		fail "a bad option fails the mount (${m%%:*})"
		umount "$dir"
	else
		check "a bad option fails the mount: '$want'" grep -qF -- "$want" "$WORK/err"
	fi
	check "... and nothing is mounted" bash -c "! mountpoint -q '$dir'"
done

umount_fstab "$MNT"
finish
