// SPDX-License-Identifier: BSD-2-Clause
/*
 * log.c - levelled messages on stderr, prefixed with the program's name.
 */
#include <stdarg.h>
#include <stdio.h>
#include "log.h"

int log_level = LOG_INFO;
bool log_json;

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const prefix[] = { "error: ", "warning: ", "", "debug: ", "trace: " };
	va_list ap;

	if ((int)level > log_level)
		return;
	fprintf(stderr, "gpuleak: %s", prefix[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
