/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * unit.h - helpers shared by the cmocka unit tests: capturing what a function
 * writes to a FILE or to stderr, and comparing text with an expected-output
 * file under tests/unit/expected/ (the tests run from tests/unit/).
 *
 * GL_UPDATE_EXPECTED=1 rewrites the expected files instead of comparing; the
 * diff then shows what changed.
 */
#ifndef GL_UNIT_H
#define GL_UNIT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#define UNIT_UNUSED __attribute__((unused))

/* An in-memory stream; unit_mem_close() returns its text (caller frees). */
struct unit_mem {
	FILE *f;
	char *buf;
	size_t len;
};

static UNIT_UNUSED FILE *unit_mem_open(struct unit_mem *m)
{
	m->buf = NULL;
	m->len = 0;
	m->f = open_memstream(&m->buf, &m->len);
	assert_non_null(m->f);
	return m->f;
}

static UNIT_UNUSED char *unit_mem_close(struct unit_mem *m)
{
	assert_int_equal(fclose(m->f), 0);
	m->f = NULL;
	return m->buf;
}

/* Everything written to fd 2 between begin and end; end returns it (caller frees). */
struct unit_stderr {
	int saved;
	FILE *tmp;
};

static UNIT_UNUSED void unit_stderr_begin(struct unit_stderr *c)
{
	fflush(stderr);
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	c->saved = dup(STDERR_FILENO);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->tmp), STDERR_FILENO) >= 0);
}

static UNIT_UNUSED char *unit_stderr_end(struct unit_stderr *c)
{
	long n;
	char *buf;

	fflush(stderr);
	assert_true(dup2(c->saved, STDERR_FILENO) >= 0);
	close(c->saved);
	assert_int_equal(fseek(c->tmp, 0, SEEK_END), 0);
	n = ftell(c->tmp);
	assert_true(n >= 0);
	rewind(c->tmp);
	buf = calloc(1, n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, c->tmp), (size_t)n);
	fclose(c->tmp);
	return buf;
}

/* Removes a directory tree made by a test (no symbolic links followed). */
static UNIT_UNUSED void unit_rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[512];

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!lstat(path, &st) && S_ISDIR(st.st_mode))
			unit_rm_tree(path);
		else
			unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* Number of '\n' in s. */
static UNIT_UNUSED int unit_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static UNIT_UNUSED char *unit_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	if (!f)
		return NULL;
	do {
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

static UNIT_UNUSED void unit_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
	assert_int_equal(fclose(f), 0);
}

/* Fails with the first differing line when actual is not expected/<name>. */
static UNIT_UNUSED void unit_check_expected(const char *name, const char *actual)
{
	char path[256], *want;
	const char *a, *w;
	int line = 1;

	assert_true(snprintf(path, sizeof(path), "expected/%s", name) < (int)sizeof(path));
	if (getenv("GL_UPDATE_EXPECTED")) {
		unit_write_file(path, actual);
		return;
	}
	want = unit_read_file(path, NULL);
	if (!want)
		fail_msg("cannot read %s (run from tests/unit/): %s", path, strerror(errno));
	for (a = actual, w = want; *a && *a == *w; a++, w++)
		line += *a == '\n';
	if (*a || *w) {
		const char *ae = strchr(a, '\n'), *we = strchr(w, '\n');

		while (a > actual && a[-1] != '\n')
			a--;
		while (w > want && w[-1] != '\n')
			w--;
		print_error("%s differs at line %d:\n  expected: %.*s\n  actual:   %.*s\n", path,
			    line, (int)(we ? we - w : (ptrdiff_t)strlen(w)), w,
			    (int)(ae ? ae - a : (ptrdiff_t)strlen(a)), a);
		free(want);
		fail();
	}
	free(want);
}

#endif /* GL_UNIT_H */
