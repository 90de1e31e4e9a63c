/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the config parser (fs/config.c): each input is one
 * write(2) to a config file. A refusal must leave the settings untouched
 * and say why in one line; an acceptance must format to text that parses
 * back to the same settings (what `cat config > config` does). The first
 * byte picks whether the write goes to fresh defaults or on top of a
 * previous accepted write, so sequences of writes are fuzzed too.
 * tests/fuzz/run builds and runs it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../fs/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fs_config fuzz_prev;
static int fuzz_prev_set;

static void fuzz_format(const struct fs_config *c, struct fs_buf *b)
{
	if (fs_config_format(c, b))
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_config c, again;
	struct fs_buf before = { 0 }, after = { 0 }, round = { 0 };
	struct err err = { 0 };
	int rc;

	if (!fuzz_prev_set) {
		fs_config_defaults(&fuzz_prev);
		fuzz_prev_set = 1;
	}
	if (size && (data[0] & 1)) {
		if (fs_config_copy(&c, &fuzz_prev))
			return 0;
	} else {
		fs_config_defaults(&c);
	}
	fuzz_format(&c, &before);
	rc = fs_config_write(&c, (const char *)data + !!size,
			     size ? size - 1 : 0, &err);
	fuzz_format(&c, &after);
	if (rc) {
		/* all or nothing, and one line that says why */
		if (rc != -EINVAL && rc != -ENOMEM)
			__builtin_trap();
		if (before.len != after.len ||
		    memcmp(before.p, after.p, before.len))
			__builtin_trap();
		if (!err.msg[0] || strchr(err.msg, '\n'))
			__builtin_trap();
	} else {
		/* the text read back is accepted and means the same */
		fs_config_defaults(&again);
		if (fs_config_write(&again, after.p, after.len, &err))
			__builtin_trap();
		fuzz_format(&again, &round);
		if (round.len != after.len ||
		    memcmp(round.p, after.p, after.len))
			__builtin_trap();
		fs_config_free(&again);
		fs_config_free(&fuzz_prev);
		if (fs_config_copy(&fuzz_prev, &c))
			fs_config_defaults(&fuzz_prev);
	}
	fs_config_free(&c);
	fs_buf_free(&before);
	fs_buf_free(&after);
	fs_buf_free(&round);
	return 0;
}
