// SPDX-License-Identifier: MIT
/*
 * llmfs: mount GGUF models as a filesystem. See Documentation/llmfs.1.
 *
 *   $ llmfs ../shared/models/ /mnt/llm
 *   $ cat /mnt/llm/models
 *   $ fusermount3 -u /mnt/llm
 */
#include "../fs/fs.h"

int main(int argc, char **argv)
{
	return fs_main(argc, argv);
}
