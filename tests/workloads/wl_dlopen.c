// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * wl_dlopen.c - the driver loaded with dlopen, unloaded and loaded again.
 *
 * Not linked to the stand-in: it loads --lib PATH (default
 * ../fakecuda/libcuda.so.1 next to the executable), allocates two buffers at
 * dl_site_first and frees one, dlcloses the library (which must really go
 * away: its state is lost), loads it again, likely at another address, and
 * allocates at dl_site_second. The truth is the sum of both loads' books
 * (taken just before the dlclose, and at the end).
 *
 * Options: --lib PATH, --size BYTES (default 1 MiB), --late-ms N: the first load
 * comes only after "go", N ms later (a tracer attached to a process that has not
 * loaded the driver yet), and its calls follow at once. --failed-map 1: just
 * before that first load, one mmap(2) of the library that the kernel refuses
 * once the address space is locked (MAP_FIXED_NOREPLACE over a mapping of its
 * own): a tracer that stops the process at that mmap finds no library mapped.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "wl.h"

enum { S_FIRST, S_SECOND };

static struct wl_site sites[] = {
	[S_FIRST] = { "dl_site_first", FAKECUDA_DEVICE, 0, 0 },
	[S_SECOND] = { "dl_site_second", FAKECUDA_DEVICE, 0, 0 },
};

/* The driver as loaded: resolved by name, as the CUDA runtime does. */
struct driver {
	void *dl;
	CUresult (*init)(unsigned int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	void (*mark)(void);
	void (*truth)(struct fakecuda_truth *);
	int (*truth_write)(FILE *, const struct fakecuda_truth *, const char *);
};

static struct driver drv;
static struct fakecuda_truth first; /* the first load's books before dlclose */

static void *sym(void *dl, const char *name)
{
	void *p = dlsym(dl, name);

	if (!p)
		wl_die("dlsym %s: %s", name, dlerror());
	return p;
}

/* A plain assignment: no control flow hides in it. */
#define RESOLVE(field, name) (drv.field = (__typeof__(drv.field))sym(drv.dl, name))

static void load(const char *path)
{
	CUcontext ctx = NULL;

	drv.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!drv.dl)
		wl_die("dlopen %s: %s", path, dlerror());
	RESOLVE(init, "cuInit");
	RESOLVE(primary_retain, "cuDevicePrimaryCtxRetain");
	RESOLVE(set_current, "cuCtxSetCurrent");
	RESOLVE(mem_alloc, "cuMemAlloc_v2");
	RESOLVE(mem_free, "cuMemFree_v2");
	RESOLVE(mark, "fakecuda_mark");
	RESOLVE(truth, "fakecuda_truth");
	RESOLVE(truth_write, "fakecuda_truth_write");
	wl_check(drv.init(0), "cuInit");
	wl_check(drv.primary_retain(&ctx, 0), "cuDevicePrimaryCtxRetain");
	wl_check(drv.set_current(ctx), "cuCtxSetCurrent");
}

static void unload(const char *path)
{
	if (dlclose(drv.dl))
		wl_die("dlclose %s: %s", path, dlerror());
	if (dlopen(path, RTLD_NOW | RTLD_NOLOAD))
		wl_die("%s is still loaded after dlclose", path);
	memset(&drv, 0, sizeof(drv));
}

WL_SITE CUdeviceptr dl_site_first(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(drv.mem_alloc(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_FIRST], size);
	return p;
}

WL_SITE CUdeviceptr dl_site_second(size_t size)
{
	CUdeviceptr p = 0;

	wl_check(drv.mem_alloc(&p, size), "cuMemAlloc_v2");
	wl_site_alloc(&sites[S_SECOND], size);
	return p;
}

/* Both loads' books: the counters add up, the pid is this one. */
static int write_sum(FILE *f, const char *extra)
{
	struct fakecuda_truth t;
	unsigned int i;

	drv.truth(&t);
	for (i = 0; i < FAKECUDA_NR_CLASSES; i++) {
		t.bytes[i] += first.bytes[i];
		t.allocs[i] += first.allocs[i];
		t.total_bytes[i] += first.total_bytes[i];
		t.total_allocs[i] += first.total_allocs[i];
	}
	t.alloc_calls += first.alloc_calls;
	t.free_calls += first.free_calls;
	t.unmatched_frees += first.unmatched_frees;
	t.oom_failures += first.oom_failures;
	t.other_failures += first.other_failures;
	t.free_failures += first.free_failures;
	t.ctx_dropped_bytes += first.ctx_dropped_bytes;
	t.ctx_dropped_allocs += first.ctx_dropped_allocs;
	t.pre_attach_dropped_bytes += first.pre_attach_dropped_bytes;
	t.reserved_bytes += first.reserved_bytes;
	t.imported_bytes += first.imported_bytes;
	return drv.truth_write(f, &t, extra);
}

/* An executable mapping of path that fails with EEXIST inside the kernel's mmap. */
static void failed_map(const char *path)
{
	size_t len = 4096;
	void *own = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	void *p;

	if (own == MAP_FAILED || fd < 0)
		wl_die("cannot prepare the failing mapping of %s", path);
	p = mmap(own, len, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
	if (p != MAP_FAILED || errno != EEXIST)
		wl_die("mmap of %s over a mapping did not fail with EEXIST", path);
	close(fd);
	munmap(own, len);
}

/* ../fakecuda/libcuda.so.1 relative to the executable's directory. */
static void default_lib(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n;
	char *slash;
	int m;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		wl_die("cannot read /proc/self/exe");
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	m = snprintf(buf, len, "%s/../fakecuda/libcuda.so.1", exe);
	if (m < 0 || (size_t)m >= len)
		wl_die("library path too long");
}

int main(int argc, char **argv)
{
	struct wl_opts o = { .size = WL_MIB };
	char lib[PATH_MAX + 32];
	unsigned long late_ms = wl_take_num(&argc, argv, "--late-ms", 60000, ULONG_MAX);
	unsigned long fail_map = wl_take_num(&argc, argv, "--failed-map", 1, 0);

	wl_parse(&o, argc, argv, WL_OPT_LIB | WL_OPT_SIZE);
	if (!o.size)
		wl_die("--size must not be 0");
	if (!o.lib) {
		default_lib(lib, sizeof(lib));
		o.lib = lib;
	}
	if (late_ms == ULONG_MAX) {
		load(o.lib);
		wl_ready(&o);
	} else {
		wl_ready(&o);
		usleep(late_ms * 1000);
		if (fail_map)
			failed_map(o.lib);
		load(o.lib);
	}
	drv.mark();
	dl_site_first(o.size);
	wl_check(drv.mem_free(dl_site_first(2 * o.size)), "cuMemFree_v2");
	wl_site_free(&sites[S_FIRST], 2 * o.size);
	drv.truth(&first);
	unload(o.lib);

	load(o.lib);
	drv.mark();
	dl_site_second(3 * o.size);
	wl_finish(&o, write_sum, sites, WL_NSITES(sites), "\"loads\":2");
	return 0;
}
