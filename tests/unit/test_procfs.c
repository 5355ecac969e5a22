// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_procfs.c - util/procfs.c: /proc/PID/maps lines (normal, deleted,
 * spaces, anonymous, malformed), and the stat, comm, status and directory
 * readers against a fake /proc tree made in a temporary directory; a
 * process's address map (stacks/modules.c) as it lives and once it exited.
 */
#include "unit.h"
#include "stacks/modules.h"
#include "util/procfs.h"

static char root[64];

static void put_file(int pid, const char *name, const char *text)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%d", root, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%d/%s", root, pid, name);
	unit_write_file(path, text);
}

static int setup(void **state)
{
	snprintf(root, sizeof(root), "/tmp/glprocXXXXXX");
	if (!mkdtemp(root))
		return -1;
	procfs_root = root;
	return 0;
}

static int teardown(void **state)
{
	unit_rm_tree(root);
	procfs_root = "/proc";
	return 0;
}

static void parse_ok(const char *text, struct map_entry *e, char *buf)
{
	strcpy(buf, text);
	if (procfs__parse_map_line(buf, e))
		fail_msg("rejected: %s", text);
}

static void test_map_line_file(void **state)
{
	struct map_entry e;
	char buf[256];

	parse_ok("7f1c2a000000-7f1c2a1b0000 r-xp 00028000 fd:01 1835093                    "
		 "/usr/lib/x86_64-linux-gnu/libc.so.6", &e, buf);
	assert_int_equal(e.start, 0x7f1c2a000000ULL);
	assert_int_equal(e.end, 0x7f1c2a1b0000ULL);
	assert_int_equal(e.offset, 0x28000);
	assert_int_equal(e.dev_major, 0xfd);
	assert_int_equal(e.dev_minor, 0x01);
	assert_int_equal(e.inode, 1835093);
	assert_string_equal(e.perms, "r-xp");
	assert_false(e.deleted);
	assert_string_equal(e.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");

	parse_ok("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  "
		 "[vsyscall]", &e, buf);
	assert_int_equal(e.start, 0xffffffffff600000ULL);
	assert_int_equal(e.end, 0xffffffffff601000ULL);
	assert_string_equal(e.perms, "--xp");
	assert_string_equal(e.path, "[vsyscall]");

	/* major and minor at their widest */
	parse_ok("1000-2000 rw-s 7fffffffffff fff:fffff 18446744073709551615 /dev/x", &e, buf);
	assert_int_equal(e.offset, 0x7fffffffffffULL);
	assert_int_equal(e.dev_major, 0xfff);
	assert_int_equal(e.dev_minor, 0xfffff);
	assert_int_equal(e.inode, UINT64_MAX);
	assert_string_equal(e.perms, "rw-s");
}

static void test_map_line_deleted_and_spaces(void **state)
{
	struct map_entry e;
	char buf[256];

	parse_ok("7f0000000000-7f0000001000 r-xp 00000000 08:02 42 /tmp/libfoo.so (deleted)", &e,
		 buf);
	assert_true(e.deleted);
	assert_string_equal(e.path, "/tmp/libfoo.so");

	parse_ok("1000-2000 r-xp 00000000 08:02 42 /opt/my libs/lib cuda.so.1", &e, buf);
	assert_false(e.deleted);
	assert_string_equal(e.path, "/opt/my libs/lib cuda.so.1");

	parse_ok("1000-2000 r-xp 00000000 08:02 42 /opt/a b/x.so (deleted)", &e, buf);
	assert_true(e.deleted);
	assert_string_equal(e.path, "/opt/a b/x.so");

	/* " (deleted)" only counts at the very end */
	parse_ok("1000-2000 r-xp 00000000 08:02 42 /x (deleted) y", &e, buf);
	assert_false(e.deleted);
	assert_string_equal(e.path, "/x (deleted) y");

	/* a name that ends with spaces keeps them */
	parse_ok("1000-2000 r-xp 00000000 08:02 42 /x  ", &e, buf);
	assert_string_equal(e.path, "/x  ");
}

static void test_map_line_anonymous(void **state)
{
	struct map_entry e;
	char buf[256];

	parse_ok("7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0", &e, buf);
	assert_string_equal(e.path, "");
	assert_int_equal(e.inode, 0);
	assert_false(e.deleted);
	parse_ok("7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0                          ", &e,
		 buf);
	assert_string_equal(e.path, "");
	parse_ok("55d000000000-55d000021000 rw-p 00000000 00:00 0                          [heap]",
		 &e, buf);
	assert_string_equal(e.path, "[heap]");
	parse_ok("7f0000000000-7f0000001000 rw-s 00000000 00:01 2049 /dev/zero (deleted)", &e, buf);
	assert_true(e.deleted);
	assert_string_equal(e.path, "/dev/zero");
}

static void test_map_line_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"garbage",
		"1000",
		"1000-",
		"1000-2000",
		"1000-2000 ",
		"1000 2000 r-xp 00000000 08:02 42 /x",
		"-1000-2000 r-xp 00000000 08:02 42 /x",
		"g000-2000 r-xp 00000000 08:02 42 /x",
		"1000-2000r-xp 00000000 08:02 42 /x",
		"1000-2000 r-x 00000000 08:02 42 /x",
		"1000-2000 r-xpp 00000000 08:02 42 /x",
		"1000-2000 r-xp",
		"1000-2000 r-xp ",
		"1000-2000 r-xp 0000000z 08:02 42 /x",
		"1000-2000 r-xp 00000000 0802 42 /x",
		"1000-2000 r-xp 00000000 08:02",
		"1000-2000 r-xp 00000000 08-02 42 /x",
		"1000-2000 r-xp 00000000 1000:02 42 /x",
		"1000-2000 r-xp 00000000 08:100000 42 /x",
		"1000-2000 r-xp 00000000 08:02 x42 /x",
		"1000-2000 r-xp 00000000 08:02 42x /x",
		"1000-2000 r-xp 00000000 08:02 -42 /x",
		"1000-2000 r-xp 00000000 08:02 99999999999999999999 /x",
		"10000000000000000-2000 r-xp 00000000 08:02 42 /x",
		"1000-2000 r-xp 00000000 08:02  42 /x",
	};
	struct map_entry e;
	char buf[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		strcpy(buf, bad[i]);
		if (procfs__parse_map_line(buf, &e) != -EINVAL)
			fail_msg("accepted malformed line '%s'", bad[i]);
	}
}

static int count_maps(const struct map_entry *e, void *ctx)
{
	int *n = ctx;

	if (*n == 0)
		assert_string_equal(e->path, "/lib/a.so");
	if (*n == 1)
		assert_string_equal(e->path, "");
	if (*n == 2) {
		assert_string_equal(e->path, "/lib/b c.so");
		assert_true(e->deleted);
	}
	(*n)++;
	return 0;
}

static int stop_at_second(const struct map_entry *e, void *ctx)
{
	int *n = ctx;

	return ++(*n) == 2 ? 77 : 0;
}

static void test_for_each_map(void **state)
{
	int n = 0;

	put_file(100, "maps",
		 "1000-2000 r-xp 00000000 08:02 42 /lib/a.so\n"
		 "this line is not a mapping\n"
		 "3000-4000 rw-p 00000000 00:00 0 \n"
		 "\n"
		 "5000-6000 r-xp 00001000 08:02 43 /lib/b c.so (deleted)");
	assert_int_equal(procfs__for_each_map(100, count_maps, &n), 0);
	assert_int_equal(n, 3);
	n = 0;
	assert_int_equal(procfs__for_each_map(100, stop_at_second, &n), 77);
	assert_int_equal(n, 2);
	assert_int_equal(procfs__for_each_map(101, count_maps, &n), -ENOENT);
}

static void test_comm(void **state)
{
	char buf[16], small[4];

	put_file(200, "comm", "my (weird) prog\n");
	assert_int_equal(procfs__comm(200, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "my (weird) prog");
	put_file(201, "comm", "x) S 1 (y\n");
	assert_int_equal(procfs__comm(201, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "x) S 1 (y");
	put_file(202, "comm", "");
	assert_int_equal(procfs__comm(202, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	put_file(203, "comm", "nonewline");
	assert_int_equal(procfs__comm(203, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "nonewline");
	/* truncated to the buffer, always terminated */
	assert_int_equal(procfs__comm(200, small, sizeof(small)), 0);
	assert_string_equal(small, "my ");
	assert_int_equal(procfs__comm(299, buf, sizeof(buf)), -ENOENT);
}

/* A stat line with fields 1..52 where field i is 1000 + i, comm and state aside. */
static void write_stat(int pid, const char *comm, uint64_t start_ticks, int nfields)
{
	char text[2048];
	int off;

	off = snprintf(text, sizeof(text), "%d (%s) S", pid, comm);
	for (int i = 4; i <= nfields; i++)
		off += snprintf(text + off, sizeof(text) - off, " %llu",
				i == 22 ? (unsigned long long)start_ticks : 1000ULL + i);
	snprintf(text + off, sizeof(text) - off, "\n");
	put_file(pid, "stat", text);
}

static void test_stat(void **state)
{
	uint64_t ticks = 0;
	char st = 0;
	int ppid = 0;

	write_stat(300, "a b) (c", 123456, 52);
	assert_int_equal(procfs__stat(300, &ppid, &st), 0);
	assert_int_equal(st, 'S');
	assert_int_equal(ppid, 1004);
	assert_int_equal(procfs__start_ticks(300, &ticks), 0);
	assert_int_equal(ticks, 123456);

	/* a comm made to look like the fields that follow it */
	write_stat(301, "x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 (", 987654321, 52);
	assert_int_equal(procfs__stat(301, &ppid, &st), 0);
	assert_int_equal(st, 'S');
	assert_int_equal(ppid, 1004);
	assert_int_equal(procfs__start_ticks(301, &ticks), 0);
	assert_int_equal(ticks, 987654321);

	write_stat(302, "", 5, 23);
	assert_int_equal(procfs__start_ticks(302, &ticks), 0);
	assert_int_equal(ticks, 5);
}

static void test_stat_malformed(void **state)
{
	uint64_t ticks = 7;
	char st = 0;
	int ppid = 0;

	/* too few fields for the start time */
	write_stat(310, "short", 1, 21);
	assert_int_equal(procfs__start_ticks(310, &ticks), -EINVAL);
	assert_int_equal(ticks, 7);
	assert_int_equal(procfs__stat(310, &ppid, &st), 0);
	put_file(311, "stat", "311 (no closing paren S 1 2 3\n");
	assert_int_equal(procfs__stat(311, &ppid, &st), -EINVAL);
	assert_int_equal(procfs__start_ticks(311, &ticks), -EINVAL);
	put_file(312, "stat", "312 (x)");
	assert_int_equal(procfs__stat(312, &ppid, &st), -EINVAL);
	assert_int_equal(procfs__start_ticks(312, &ticks), -EINVAL);
	put_file(313, "stat", "313 (x) S notanumber\n");
	assert_int_equal(procfs__stat(313, &ppid, &st), -EINVAL);
	put_file(314, "stat", "");
	assert_int_equal(procfs__stat(314, &ppid, &st), -EINVAL);
	put_file(315, "stat",
		 "315 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -5 20 21\n");
	assert_int_equal(procfs__start_ticks(315, &ticks), -EINVAL);
	assert_int_equal(procfs__stat(399, &ppid, &st), -ENOENT);
	assert_int_equal(procfs__start_ticks(399, &ticks), -ENOENT);
	assert_int_equal(ticks, 7);
}

static void test_same_process(void **state)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t ns_per_tick = 1000000000ULL / (uint64_t)hz;

	write_stat(320, "p", 4242, 52);
	assert_true(procfs__same_process(320, 4242 * ns_per_tick));
	/* nanoseconds inside the same tick */
	assert_true(procfs__same_process(320, 4242 * ns_per_tick + ns_per_tick - 1));
	assert_false(procfs__same_process(320, 4243 * ns_per_tick));
	assert_false(procfs__same_process(320, 4241 * ns_per_tick));
	assert_false(procfs__same_process(321, 4242 * ns_per_tick));
}

static void test_ns_pid(void **state)
{
	put_file(330, "status", "Name:\tx\nTgid:\t330\nNSpid:\t330\t7\nPPid:\t1\n");
	assert_int_equal(procfs__ns_pid(330), 7);
	put_file(331, "status", "Name:\tx\nNSpid:\t331\n");
	assert_int_equal(procfs__ns_pid(331), 331);
	put_file(332, "status", "Name:\tx\nPPid:\t1\n");
	assert_int_equal(procfs__ns_pid(332), 0);
	put_file(333, "status", "NSpid:\t333\tbogus\n");
	assert_int_equal(procfs__ns_pid(333), 0);
	put_file(334, "status", "NSpid:\t334\t12\t3\n");
	assert_int_equal(procfs__ns_pid(334), 3);
	assert_int_equal(procfs__ns_pid(339), 0);
}

struct pid_seen {
	int pids[16];
	int n;
	int stop_after;
};

static int collect_pid(int pid, void *ctx)
{
	struct pid_seen *s = ctx;

	assert_true(s->n < 16);
	s->pids[s->n++] = pid;
	return s->n == s->stop_after ? -42 : 0;
}

static void test_for_each_pid(void **state)
{
	static const char *const dirs[] = { "11", "4194303", "self", "0", "12a", "4194304", "-3" };
	char path[128], sub[96];
	struct pid_seen s = { .n = 0 };
	int sum = 0;

	/* a /proc of its own: the other tests' processes are not in it */
	snprintf(sub, sizeof(sub), "%s/pids", root);
	assert_int_equal(mkdir(sub, 0755), 0);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", sub, dirs[i]);
		assert_int_equal(mkdir(path, 0755), 0);
	}
	procfs_root = sub;
	assert_int_equal(procfs__for_each_pid(collect_pid, &s), 0);
	assert_int_equal(s.n, 2);
	for (int i = 0; i < s.n; i++)
		sum += s.pids[i];
	assert_int_equal(sum, 11 + 4194303);
	s = (struct pid_seen){ .stop_after = 1 };
	assert_int_equal(procfs__for_each_pid(collect_pid, &s), -42);
	assert_int_equal(s.n, 1);
	procfs_root = root;
}

static void test_read_small_file(void **state)
{
	char path[128], buf[8];

	snprintf(path, sizeof(path), "%s/small", root);
	unit_write_file(path, "0123456789");
	assert_int_equal(read_small_file(path, buf, sizeof(buf)), 7);
	assert_string_equal(buf, "0123456");
	assert_int_equal(read_small_file(path, buf, 1), 0);
	assert_string_equal(buf, "");
	assert_int_equal(read_small_file(path, buf, 0), -EINVAL);
	snprintf(path, sizeof(path), "%s/missing", root);
	assert_int_equal(read_small_file(path, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(read_small_file(root, buf, sizeof(buf)), -EISDIR);
}

/*
 * RANK, LOCAL_RANK and WORLD_SIZE out of a NUL-separated environment; nothing else.
 * A name's first entry decides, valid or not, as getenv() reads it.
 */
static void test_environ_ints(void **state)
{
	static const char env[] = "PATH=/bin\0RANKX=9\0RANK=1\0LOCAL_RANK=x1\0"
				  "MY_RANK=7\0WORLD_SIZE=4\0WORLD_SIZE\0RANK=2\0"
				  "LOCAL_RANK=3\0WORLD_SIZE=5";
	static const char *const names[] = { "RANK", "LOCAL_RANK", "WORLD_SIZE", "HOME" };
	char path[128];
	int v[4];
	FILE *f;

	(void)state;
	put_file(77, "comm", "x\n");
	snprintf(path, sizeof(path), "%s/77/environ", root);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(env, 1, sizeof(env) - 1, f), sizeof(env) - 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(procfs__environ_ints(77, names, v, 4), 0);
	assert_int_equal(v[0], 1);  /* RANK, not RANKX nor MY_RANK, nor the second RANK */
	assert_int_equal(v[1], -1); /* not a number, and a later LOCAL_RANK does not count */
	assert_int_equal(v[2], 4);  /* an entry without '=' is not one of the name */
	assert_int_equal(v[3], -1); /* absent */
	assert_int_equal(procfs__environ_ints(77, names, v, 65), -EINVAL);
	assert_int_equal(procfs__environ_ints(78, names, v, 4), -ENOENT);
	assert_int_equal(v[0], -1);
}

/*
 * A process that exited and is not reaped yet reads as no mapping at all: it is gone, and the
 * maps read while it lived still place its frames (records are read after the exit).
 */
static void test_address_map_outlives_the_process(void **state)
{
	struct modules *m = modules__new();
	struct addr_map *am;
	uint64_t off = 0;
	uint32_t mod;

	put_file(90, "maps",
		 "1000-2000 r-xp 00001000 08:02 42 /lib/a.so\n"
		 "3000-4000 rw-p 00000000 00:00 0 \n");
	put_file(90, "statm", "300 20 10 1 0 50 0\n");
	assert_non_null(m);
	am = addr_map__new(m, 90);
	assert_non_null(am);
	mod = addr_map__resolve(am, 0x1800, &off);
	assert_int_not_equal(mod, 0);
	assert_int_equal(off, 0x1800);
	put_file(90, "maps", ""); /* a zombie's */
	put_file(90, "statm", "0 0 0 0 0 0 0\n");
	assert_int_equal(addr_map__refresh(am), -ESRCH);
	assert_false(addr_map__refresh_after_miss(am, 1));
	off = 0;
	assert_int_equal(addr_map__resolve(am, 0x1800, &off), mod);
	assert_int_equal(off, 0x1800);
	/* first read after the exit: none */
	errno = 0;
	assert_null(addr_map__new(m, 90));
	assert_int_equal(errno, ESRCH);
	/* a read the exit cut short (its first page, and no memory after it): not kept */
	put_file(90, "maps", "1000-2000 r-xp 00001000 08:02 43 /lib/b.so\n");
	assert_int_equal(addr_map__refresh(am), -ESRCH);
	assert_int_equal(addr_map__resolve(am, 0x1800, &off), mod);
	errno = 0;
	assert_null(addr_map__new(m, 90));
	assert_int_equal(errno, ESRCH);
	/* nor one whose process cannot be told to be alive after it */
	unit_rm_tree(root);
	assert_int_equal(mkdir(root, 0700), 0);
	put_file(90, "maps", "1000-2000 r-xp 00001000 08:02 42 /lib/a.so\n");
	assert_null(addr_map__new(m, 90));
	addr_map__free(am);
	modules__free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_line_file),
		cmocka_unit_test(test_map_line_deleted_and_spaces),
		cmocka_unit_test(test_map_line_anonymous),
		cmocka_unit_test(test_map_line_malformed),
		cmocka_unit_test(test_for_each_map),
		cmocka_unit_test(test_comm),
		cmocka_unit_test(test_stat),
		cmocka_unit_test(test_stat_malformed),
		cmocka_unit_test(test_same_process),
		cmocka_unit_test(test_ns_pid),
		cmocka_unit_test(test_for_each_pid),
		cmocka_unit_test(test_read_small_file),
		cmocka_unit_test(test_environ_ints),
		cmocka_unit_test(test_address_map_outlives_the_process),
	};

	return cmocka_run_group_tests_name("procfs", tests, setup, teardown);
}
