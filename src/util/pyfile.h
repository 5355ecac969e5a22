/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pyfile.h - whether a Python source file is a library's (installed packages, the
 * standard library, frozen modules) rather than the program's: a site is the innermost
 * frame of the program's own code, so that a tensor made inside torch.nn is named at the
 * user's line that called it. Code that torch.compile generates is a library's too:
 * Inductor's modules in its cache directory (TMPDIR/torchinductor_USER/) and torch.fx's
 * graph modules ("<eval_with_key>.N").
 */
#ifndef GL_PYFILE_H
#define GL_PYFILE_H

#include <stdbool.h>
#include <string.h>

static inline bool pyfile__is_library(const char *file)
{
	if (!file)
		return false;
	return strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
	       strstr(file, "/lib/python3") || !strncmp(file, "<frozen ", 8) ||
	       strstr(file, "/torchinductor_") || !strncmp(file, "<eval_with_key>", 15);
}

#endif /* GL_PYFILE_H */
