/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * log.h - levelled messages on stderr. stdout carries report data only.
 */
#ifndef GL_LOG_H
#define GL_LOG_H

#include <stdbool.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3, LOG_TRACE = 4 };

extern int log_level;
extern bool log_json; /* errors become {"error": ...} on stdout's consumer side */

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif /* GL_LOG_H */
