/* SPDX-License-Identifier: MIT */
/*
 * fs: the llmfs FUSE filesystem. Each GGUF model becomes a directory whose
 * files generate text, show its configuration and statistics, and expose its
 * weights; Documentation/ABI.md describes every file, Documentation/fs.md
 * the design (one scheduler thread per model owns the engine; FUSE handlers
 * only queue work and reply when it is done).
 *
 *   $ llmfs -f ../shared/models/stories260K.gguf /mnt/llm &
 *   $ echo temperature=0 > /mnt/llm/stories260k/config
 *   $ echo "Once upon a time" > /mnt/llm/stories260k/generate
 *   $ cat /mnt/llm/stories260k/generate
 *   $ fusermount3 -u /mnt/llm
 */
#ifndef LLMFS_FS_H
#define LLMFS_FS_H

/*
 * The whole `llmfs` command: parse argv (see Documentation/llmfs.1), mount,
 * serve until unmounted or signalled, clean up. Returns the process exit
 * status: 0 after a clean unmount, 1 on a usage or mount error (after one
 * line on stderr).
 */
int fs_main(int argc, char **argv);

#endif
