// SPDX-License-Identifier: BSD-2-Clause
/*
 * pyproc.c - finding CPython in a process: candidate files from
 * /proc/PID/maps (libpython3.X.so first, then executables named python*),
 * their ELF symbols (.dynsym, then .symtab) and load bias, and reads of the
 * process's memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>
#include "pyproc.h"
#include "util/elfsym.h"
#include "util/parse.h"
#include "util/procfs.h"

#define MAX_CANDIDATES 8
#define MAX_SEGS 16

enum {
	SYM_RUNTIME,
	SYM_VERSION,
	SYM_EVAL,
	SYM_CODE_TYPE,
	SYM_STR_TYPE,
	SYM_BYTES_TYPE,
	SYM_AITER,
	NR_SYMS
};

static const char *const sym_names[NR_SYMS] = {
	[SYM_RUNTIME] = "_PyRuntime",
	[SYM_VERSION] = "Py_Version",
	[SYM_EVAL] = "_PyEval_EvalFrameDefault",
	[SYM_CODE_TYPE] = "PyCode_Type",
	[SYM_STR_TYPE] = "PyUnicode_Type",
	[SYM_BYTES_TYPE] = "PyBytes_Type",
	[SYM_AITER] = "PyAIter_Check", /* new in 3.10 */
};

struct candidate {
	uint64_t dev, ino;	     /* dev as struct modules keys it: major << 20 | minor */
	uint64_t start, end, offset; /* a mapping of the file, for opening it */
	uint64_t base_start;	     /* start of the mapping at file offset 0 */
	bool has_base;
	bool deleted;
	int rank; /* 0 libpython, 1 python executable */
	char path[512];
};

struct scan {
	struct candidate c[MAX_CANDIDATES];
	int n;
};

struct elf_info {
	uint64_t value[NR_SYMS], size[NR_SYMS];
	bool found[NR_SYMS];
	GElf_Phdr segs[MAX_SEGS];
	int nr_segs;
};

int pyproc__minor_from_name(const char *path)
{
	const char *base = strrchr(path, '/'), *p;
	char digits[4];
	uint32_t minor;
	size_t n = 0;

	base = base ? base + 1 : path;
	p = strstr(base, "python3.");
	if (!p)
		return 0;
	p += strlen("python3.");
	while (p[n] >= '0' && p[n] <= '9' && n < sizeof(digits) - 1) {
		digits[n] = p[n];
		n++;
	}
	digits[n] = '\0';
	if (parse_u32(digits, 0, 99, &minor))
		return 0;
	return minor;
}

static int rank_of(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "libpython3", 10))
		return 0;
	if (!strncmp(base, "python", 6))
		return 1;
	return -1;
}

static int scan_map(const struct map_entry *e, void *data)
{
	struct scan *s = data;
	uint64_t dev = ((uint64_t)e->dev_major << 20) | e->dev_minor;
	struct candidate *c = NULL;
	int rank;

	if (!e->inode || e->path[0] != '/')
		return 0;
	rank = rank_of(e->path);
	if (rank < 0)
		return 0;
	for (int i = 0; i < s->n; i++)
		if (s->c[i].dev == dev && s->c[i].ino == e->inode)
			c = &s->c[i];
	if (!c) {
		if (s->n == MAX_CANDIDATES)
			return 0;
		c = &s->c[s->n++];
		memset(c, 0, sizeof(*c));
		c->dev = dev;
		c->ino = e->inode;
		c->rank = rank;
		c->deleted = e->deleted;
		c->start = e->start;
		c->end = e->end;
		c->offset = e->offset;
		snprintf(c->path, sizeof(c->path), "%s", e->path);
	}
	if (e->offset == 0 && !c->has_base) {
		c->base_start = e->start;
		c->has_base = true;
	}
	return 0;
}

/* Opens a mapped file: our view when it is the same inode, else through the target's root. */
static int open_candidate(int pid, const struct candidate *c)
{
	char path[700];
	struct stat st;
	int fd;

	if (!c->deleted && stat(c->path, &st) == 0 && st.st_ino == c->ino &&
	    major(st.st_dev) == c->dev >> 20 && minor(st.st_dev) == (c->dev & 0xfffff)) {
		fd = open(c->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	if (c->deleted)
		snprintf(path, sizeof(path), "%s/%d/map_files/%llx-%llx", procfs_root, pid,
			 (unsigned long long)c->start, (unsigned long long)c->end);
	else if (snprintf(path, sizeof(path), "%s/%d/root%s", procfs_root, pid, c->path) >=
		 (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static void note_symbol(const GElf_Sym *sym, const char *name, void *ctx)
{
	struct elf_info *info = ctx;

	if (name[0] != '_' && name[0] != 'P')
		return;
	for (int k = 0; k < NR_SYMS; k++) {
		if (info->found[k] || strcmp(name, sym_names[k]))
			continue;
		info->found[k] = true;
		info->value[k] = sym->st_value;
		info->size[k] = sym->st_size;
	}
}

static int read_elf(int fd, struct elf_info *info)
{
	Elf_Scn *scn = NULL;
	size_t nph;
	Elf *e;
	int err = 0;

	memset(info, 0, sizeof(*info));
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -EINVAL;
	if (elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &nph)) {
		err = -EINVAL;
		goto cleanup;
	}
	for (size_t i = 0; i < nph && info->nr_segs < MAX_SEGS; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, i, &ph) && ph.p_type == PT_LOAD)
			info->segs[info->nr_segs++] = ph;
	}
	/* .dynsym first: it is what a stripped file keeps */
	for (int pass = 0; pass < 2; pass++) {
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh))
				continue;
			if (sh.sh_type == (pass ? SHT_SYMTAB : SHT_DYNSYM))
				elfsym__for_each(e, scn, &sh, note_symbol, info);
		}
		if (info->found[SYM_RUNTIME] && info->found[SYM_EVAL])
			break;
	}
	if (!info->found[SYM_RUNTIME] || !info->nr_segs)
		err = -ENOENT;
cleanup:
	elf_end(e);
	return err;
}

/* File offset of a virtual address inside a loaded segment's file part; -1 if none. */
static int64_t vaddr_to_off(const struct elf_info *info, uint64_t v)
{
	for (int i = 0; i < info->nr_segs; i++) {
		const GElf_Phdr *ph = &info->segs[i];

		if (v >= ph->p_vaddr && v < ph->p_vaddr + ph->p_filesz)
			return v - ph->p_vaddr + ph->p_offset;
	}
	return -1;
}

static int fill_target(const struct candidate *c, const struct elf_info *info, struct py_target *t)
{
	const GElf_Phdr *first = &info->segs[0];
	uint64_t bias;
	int64_t off;

	if (!c->has_base || (first->p_offset & ~4095ULL) != 0)
		return -ENOENT;
	bias = c->base_start - (first->p_vaddr & ~4095ULL);
	memset(t, 0, sizeof(*t));
	t->runtime = bias + info->value[SYM_RUNTIME];
	if (info->found[SYM_VERSION])
		t->version_addr = bias + info->value[SYM_VERSION];
	if (info->found[SYM_CODE_TYPE])
		t->code_type = bias + info->value[SYM_CODE_TYPE];
	if (info->found[SYM_STR_TYPE])
		t->str_type = bias + info->value[SYM_STR_TYPE];
	if (info->found[SYM_BYTES_TYPE])
		t->bytes_type = bias + info->value[SYM_BYTES_TYPE];
	if (info->found[SYM_EVAL]) {
		off = vaddr_to_off(info, info->value[SYM_EVAL]);
		if (off >= 0) {
			t->eval_start = off;
			t->eval_end = off + (info->size[SYM_EVAL] ?: 1);
		}
	}
	t->dev = c->dev;
	t->ino = c->ino;
	t->minor = pyproc__minor_from_name(c->path);
	if (!t->minor && !info->found[SYM_VERSION] && info->found[SYM_AITER])
		t->minor = 10;
	snprintf(t->path, sizeof(t->path), "%s", c->path);
	return 0;
}

int pyproc__find(int pid, struct py_target *t)
{
	struct scan *s = calloc(1, sizeof(*s));
	struct elf_info info;
	int err;

	if (!s)
		return -ENOMEM;
	err = procfs__for_each_map(pid, scan_map, s);
	if (err) {
		err = err == -ENOENT ? -ESRCH : err;
		goto cleanup;
	}
	err = -ENOENT;
	for (int rank = 0; rank < 2 && err; rank++) {
		for (int i = 0; i < s->n && err; i++) {
			int fd;

			if (s->c[i].rank != rank)
				continue;
			fd = open_candidate(pid, &s->c[i]);
			if (fd < 0)
				continue;
			if (read_elf(fd, &info) == 0)
				err = fill_target(&s->c[i], &info, t);
			close(fd);
		}
	}
cleanup:
	free(s);
	return err;
}

ssize_t pyproc__read(int pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n;

	if (!addr)
		return -EFAULT;
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	return n < 0 ? -errno : n;
}
