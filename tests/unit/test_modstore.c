// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_modstore.c - stacks/modstore.c: modules kept by build-id (this test's
 * own executable stands for a module), once, under the size cap, never
 * through a symlink; a recorded module found by its path only when the
 * build-id matches, else in the store and debug directories.
 */
#include "unit.h"
#include "stacks/modstore.h"
#include "stacks/modules.h"
#include "stacks/stacks.h"
#include "util/log.h"

static char dir[64], store[128], self_bid[65];
static struct modules *mods;
static struct stacks *stacks;
static uint32_t self_mod;

static int setup(void **state)
{
	struct stat st;
	int fd;

	log_level = LOG_ERROR;
	snprintf(dir, sizeof(dir), "/tmp/glstoreXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(store, sizeof(store), "%s/store", dir);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	modules__file_build_id(fd, self_bid, sizeof(self_bid));
	assert_true(strlen(self_bid) >= 16); /* the toolchain writes build-ids */
	assert_int_equal(fstat(fd, &st), 0);
	mods = modules__new();
	stacks = stacks__new();
	self_mod = modules__add(mods, st.st_dev, st.st_ino, "/proc/self/exe", NULL);
	assert_int_equal(modules__set_fd(mods, self_mod, fd), 0);
	assert_int_equal(modules__set_fd(mods, self_mod + 1, -1), -ENOENT);
	return 0;
}

static int teardown(void **state)
{
	stacks__free(stacks);
	modules__free(mods);
	unit_rm_tree(dir);
	return 0;
}

static void intern_self_stack(uint64_t off)
{
	struct frame f[] = { { off, self_mod, FRAME_NATIVE }, { 3, 1, FRAME_API } };

	assert_true(stacks__intern(stacks, f, 2) > 0);
}

static void stored_path(char *out, size_t len, const char *suffix)
{
	snprintf(out, len, "%s/%.2s/%s%s", store, self_bid, self_bid + 2, suffix);
}

static void test_keeps_each_module_once(void **state)
{
	struct modstore *k = modstore__new(store, 1ULL << 30);
	char kept[256];
	struct stat st, self;
	char *a, *b;
	size_t la, lb;

	assert_non_null(k);
	intern_self_stack(0x100);
	modstore__sync(k, stacks, mods);
	intern_self_stack(0x200); /* the same module again */
	modstore__sync(k, stacks, mods);
	modstore__free(k);
	stored_path(kept, sizeof(kept), "");
	assert_int_equal(lstat(kept, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat("/proc/self/exe", &self), 0);
	assert_int_equal(st.st_size, self.st_size);
	a = unit_read_file(kept, &la);
	b = unit_read_file("/proc/self/exe", &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, la);
	free(a);
	free(b);
	assert_int_equal(stat(store, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
}

static void test_cap(void **state)
{
	struct modstore *k = modstore__new(store, 4096);
	char kept[256];
	struct stat st;

	assert_non_null(k);
	intern_self_stack(0x100);
	modstore__sync(k, stacks, mods);
	modstore__free(k);
	stored_path(kept, sizeof(kept), "");
	assert_int_equal(lstat(kept, &st), -1);
}

static void test_store_not_written_through_symlinks(void **state)
{
	char sub[256], victim[256], kept[400];
	struct modstore *k;
	struct stat st;
	char *text;

	assert_int_equal(mkdir(store, 0700), 0);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	assert_int_equal(mkdir(victim, 0700), 0);
	snprintf(sub, sizeof(sub), "%s/%.2s", store, self_bid);
	assert_int_equal(symlink(victim, sub), 0); /* xx/ planted as a symlink */
	k = modstore__new(store, 1ULL << 30);
	assert_non_null(k);
	intern_self_stack(0x100);
	modstore__sync(k, stacks, mods);
	modstore__free(k);
	snprintf(kept, sizeof(kept), "%s/%s", victim, self_bid + 2);
	assert_int_equal(lstat(kept, &st), -1);
	/* a symlink planted at the final name counts as kept: nothing is written through it */
	assert_int_equal(unlink(sub), 0);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(victim, sizeof(victim), "%s/victim/file", dir);
	unit_write_file(victim, "precious\n");
	stored_path(kept, sizeof(kept), "");
	assert_int_equal(symlink(victim, kept), 0);
	k = modstore__new(store, 1ULL << 30);
	assert_non_null(k);
	intern_self_stack(0x300);
	modstore__sync(k, stacks, mods); /* kept already (the name exists): skipped */
	modstore__free(k);
	text = unit_read_file(victim, NULL);
	assert_string_equal(text, "precious\n");
	free(text);
}

static void test_open_module(void **state)
{
	const char *dirs[] = { "/nonexistent", store };
	char found[512], kept[256], debug[256], other_bid[65];
	int fd;

	/* the recorded path, when the build-id matches */
	fd = modstore__open_module("/proc/self/exe", self_bid, 0, 0, NULL, 0, found, sizeof(found));
	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(found, "/proc/self/exe");
	/* not when it differs: the store is searched, and it is not there yet */
	snprintf(other_bid, sizeof(other_bid), "%s", self_bid);
	other_bid[0] = other_bid[0] == '0' ? '1' : '0';
	assert_int_equal(modstore__open_module("/proc/self/exe", other_bid, 0, 0, dirs, 2, NULL, 0),
			 -ENOENT);
	/* moved away, found in the store, by build-id */
	intern_self_stack(0x100);
	{
		struct modstore *k = modstore__new(store, 1ULL << 30);

		modstore__sync(k, stacks, mods);
		modstore__free(k);
	}
	stored_path(kept, sizeof(kept), "");
	fd = modstore__open_module("/gone/train", self_bid, 0, 0, dirs, 2, found, sizeof(found));
	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(found, kept);
	/* a .debug file comes first */
	stored_path(debug, sizeof(debug), ".debug");
	assert_int_equal(link(kept, debug), 0);
	fd = modstore__open_module("/gone/train", self_bid, 0, 0, dirs, 2, found, sizeof(found));
	assert_true(fd >= 0);
	close(fd);
	assert_string_equal(found, debug);
	/* a file with the name but another build-id is refused */
	assert_int_equal(modstore__open_module("/gone/train", other_bid, 0, 0, dirs, 2, NULL, 0),
			 -ENOENT);
	/* build-ids that are not hex never become paths */
	assert_int_equal(modstore__open_module(NULL, "../../etc/passwd", 0, 0, dirs, 2, NULL, 0),
			 -ENOENT);
	/* without a build-id: the path only if it is the very file recorded */
	assert_int_equal(modstore__open_module("/proc/self/exe", "", 1, 2, dirs, 2, NULL, 0),
			 -ENOENT);
	assert_int_equal(modstore__open_module("/dev/null", "", 0, 0, dirs, 2, NULL, 0), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_keeps_each_module_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_not_written_through_symlinks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_open_module, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
