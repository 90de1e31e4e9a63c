/* SPDX-License-Identifier: MIT */
/* The one error record of io.h: a code up, one message. */
#include <stdarg.h>
#include <stdio.h>

#include "io.h"

int err_set(struct err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -code;
}
