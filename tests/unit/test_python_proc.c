// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_python_proc.c - finding CPython in a live process and reading its code
 * objects, without BPF: a python3 child (GPULEAK_TEST_PYTHON, else python3 on
 * the PATH) prints the address of a code object and the line of one of its
 * instructions; python__merge() must name it from the child's memory alone.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "stacks/modules.h"
#include "stacks/python/python.h"

/* Non-ASCII names on purpose: a Latin-1 function name, a file name with a UCS-2 character. */
static const char script[] =
	"import sys\n"
	"src = ('def outer():\\n    def gr\\u00fc\\u00dfe():\\n        return 1\\n'\n"
	"       '    return gr\\u00fc\\u00dfe\\n')\n"
	"ns = {}\n"
	"exec(compile(src, '/tmp/d\\u00e4tei_\\u03c0.py', 'exec'), ns)\n"
	"c = ns['outer']().__code__\n"
	"lines = {}\n"
	"for s, e, l in c.co_lines():\n"
	"    for i in range(s // 2, e // 2):\n"
	"        lines[i] = l or 0\n"
	"last = len(c.co_code) // 2 - 1\n"
	"name = c.co_qualname if sys.version_info >= (3, 11) else c.co_name\n"
	"sys.stdout.buffer.write(('%d %d %d %s\\n' % (id(c), last, lines[last], name)).encode())\n"
	"sys.stdout.flush()\n"
	"sys.stdin.readline()\n";

struct child {
	pid_t pid;
	FILE *out;
	int in_fd;
};

static int spawn(struct child *c, char *const argv[])
{
	int to[2], from[2];

	if (pipe(to) || pipe(from))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[1]);
		close(from[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	c->in_fd = to[1];
	c->out = fdopen(from[0], "r");
	return c->out ? 0 : -1;
}

static void reap(struct child *c)
{
	close(c->in_fd);
	fclose(c->out);
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
}

static void test_names_and_lines_from_memory(void **state)
{
	const char *python = getenv("GPULEAK_TEST_PYTHON") ?: "python3";
	char *argv[] = { (char *)python, "-c", (char *)script, NULL };
	uint8_t rec_buf[sizeof(struct gl_stack) + 2 * sizeof(struct gl_py_frame)] = { 0 };
	struct gl_stack *rec = (struct gl_stack *)rec_buf;
	struct gl_py_frame *pyf = (struct gl_py_frame *)(rec + 1);
	struct stack_view v = { .rec = rec, .py = pyf };
	struct frame frames[8] = { { .addr = 0x1234, .mod = 1, .kind = FRAME_NATIVE } };
	unsigned long long code;
	unsigned int last;
	int line, n;
	char name[64], line_buf[256];
	const char *function, *file;
	struct modules *mods = modules__new();
	struct python *py = python__new(mods);
	struct stack_owner proc = { .start_time = 1 };
	struct child c;

	assert_non_null(py);
	assert_int_equal(spawn(&c, argv), 0);
	assert_non_null(fgets(line_buf, sizeof(line_buf), c.out));
	assert_int_equal(sscanf(line_buf, "%llu %u %d %63s", &code, &last, &line, name), 4);
	proc.pid = c.pid;
	assert_int_equal(python__attach(py, c.pid), 0);
	assert_int_equal(python__attach(py, c.pid), 0); /* again: cheap, same answer */

	/* innermost: the code object; then a pointer that is no code object */
	rec->nr_py = 2;
	pyf[0] = (struct gl_py_frame){ .code = code, .lasti = last, .flags = GL_PY_ENTRY };
	pyf[1] = (struct gl_py_frame){ .code = code + 8, .lasti = 0, .flags = GL_PY_ENTRY };
	n = python__merge(py, &proc, &v, frames, 1, 8);
	assert_int_equal(n, 3);
	assert_int_equal(frames[0].kind, FRAME_NATIVE);
	assert_int_equal(frames[1].kind, FRAME_PYTHON);
	assert_int_equal(frames[1].addr, line);
	python__code_info(py, frames[1].mod, &function, &file);
	assert_non_null(function);
	assert_string_equal(function, name);
	assert_non_null(strstr(function, "gr\xc3\xbc\xc3\x9f" "e")); /* UTF-8 of the Latin-1 name */
	assert_string_equal(file, "/tmp/d\xc3\xa4tei_\xcf\x80.py");
	assert_int_equal(frames[2].kind, FRAME_PYTHON);
	python__code_info(py, frames[2].mod, &function, &file);
	assert_null(function);

	python__detach(py, c.pid);
	reap(&c);
	python__free(py);
	modules__free(mods);
}

static void test_not_python(void **state)
{
	char *argv[] = { "sleep", "30", NULL };
	struct modules *mods = modules__new();
	struct python *py = python__new(mods);
	struct child c;

	assert_int_equal(spawn(&c, argv), 0);
	usleep(100000);
	assert_int_equal(python__attach(py, c.pid), -ENOENT);
	reap(&c);
	python__free(py);
	modules__free(mods);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_lines_from_memory),
		cmocka_unit_test(test_not_python),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
