// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_procfs.c - libFuzzer target: the /proc parsers on any input. The input
 * is parsed as one maps line, then written as every file of process 1 of a
 * fake /proc (maps, stat, statm, comm, status, cgroup) and read through procfs.c,
 * the address map (modules.c) and the library finders (libcuda.c,
 * pyproc.c), as they read a real process.
 */
#include <errno.h>
#include <sys/stat.h>
#include "fuzz.h"
#include "stacks/modules.h"
#include "stacks/python/pyproc.h"
#include "trace/libcuda.h"
#include "agent/cgroup.h"
#include "util/procfs.h"

static char proc_dir[64];
static struct cuda_lib lib;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	procfs_root = fuzz_tmpdir();
	snprintf(proc_dir, sizeof(proc_dir), "%s/1", procfs_root);
	if (mkdir(proc_dir, 0700)) {
		perror(proc_dir);
		exit(1);
	}
	return 0;
}

static int count_map(const struct map_entry *e, void *ctx)
{
	(*(size_t *)ctx) += strlen(e->path) + e->deleted;
	return 0;
}

static void write_all(const uint8_t *data, size_t size)
{
	static const char *const files[] = { "maps", "stat", "statm", "comm", "status",
					     "cgroup" };
	char path[128];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", proc_dir, files[i]);
		fuzz_write(path, data, size);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = fuzz_strdup(data, size), comm[16], state, path[256], display[256];
	struct py_target pt;
	struct proc_ident id;
	struct map_entry e;
	struct modules *m;
	struct addr_map *am;
	uint64_t ticks, off;
	size_t total = 0;
	dev_t dev;
	ino_t ino;
	int ppid;

	if (!line)
		return 0;
	procfs__parse_map_line(line, &e);
	free(line);
	write_all(data, size);
	procfs__for_each_map(1, count_map, &total);
	procfs__comm(1, comm, sizeof(comm));
	procfs__stat(1, &ppid, &state);
	procfs__start_ticks(1, &ticks);
	procfs__same_process(1, 12345);
	procfs__ns_pid(1);
	cgroup__read(1, &id);
	libcuda__find_in_process(1, &lib);
	libcuda__find_torch(1, path, sizeof(path), display, sizeof(display), &dev, &ino);
	libcuda__find_ldso(1, path, sizeof(path), display, sizeof(display), &dev, &ino);
	pyproc__find(1, &pt);
	m = modules__new();
	am = m ? addr_map__new(m, 1) : NULL;
	if (am) {
		addr_map__resolve(am, 0x400000, &off);
		addr_map__resolve(am, 0x7f0000001000, &off);
		addr_map__refresh(am);
		for (uint32_t i = 1; i <= modules__count(m); i++)
			modules__info(m, i);
	}
	addr_map__free(am);
	modules__free(m);
	return 0;
}
