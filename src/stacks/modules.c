// SPDX-License-Identifier: BSD-2-Clause
/*
 * modules.c - module table and per-process address maps.
 *
 * A module is identified by the (dev, inode) of its file; gpuleak keeps an
 * open descriptor to each so that symbols can be read after the process
 * exits or the file is replaced, and reaches files of other mount namespaces
 * through /proc/PID/root.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "modules.h"
#include "util/htab.h"
#include "util/procfs.h"

#define MAP_REFRESH_MIN_NS 10000000ULL
#define MAP_REFRESH_MAX_NS 1000000000ULL

struct module {
	struct module_info info;
	char *path;
	char build_id[41];
	bool build_id_read;
};

struct modules {
	struct module *mods; /* index = id - 1 */
	uint32_t nr, cap;
	struct htab *by_file; /* {dev, ino} -> id */
};

struct file_key {
	uint64_t dev, ino;
};

struct mapping {
	uint64_t start, end, off;
	uint32_t mod;
};

struct addr_map {
	struct modules *m;
	int pid;
	struct mapping *maps;
	size_t nr, cap;
	uint64_t generation;
	uint64_t missed_ns;  /* the last re-read after a miss */
	uint64_t backoff_ns; /* before the next one */
};

struct modules *modules__new(void)
{
	struct modules *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->by_file = htab__new(sizeof(struct file_key), sizeof(uint32_t));
	if (!m->by_file) {
		free(m);
		return NULL;
	}
	return m;
}

void modules__free(struct modules *m)
{
	if (!m)
		return;
	for (uint32_t i = 0; i < m->nr; i++) {
		if (m->mods[i].info.fd >= 0)
			close(m->mods[i].info.fd);
		free(m->mods[i].path);
	}
	free(m->mods);
	htab__free(m->by_file);
	free(m);
}

uint32_t modules__count(const struct modules *m)
{
	return m->nr;
}

uint32_t modules__add(struct modules *m, dev_t dev, ino_t ino, const char *path,
		      const char *build_id)
{
	struct file_key k = { dev, ino };
	struct module *mod;
	bool created;
	uint32_t *id = htab__upsert(m->by_file, &k, &created);

	if (!id)
		return 0;
	if (!created)
		return *id;
	if (m->nr == m->cap) {
		uint32_t cap = m->cap ? m->cap * 2 : 64;
		struct module *mods = realloc(m->mods, cap * sizeof(*mods));

		if (!mods) {
			htab__delete(m->by_file, &k);
			return 0;
		}
		m->mods = mods;
		m->cap = cap;
	}
	mod = &m->mods[m->nr];
	memset(mod, 0, sizeof(*mod));
	mod->path = strdup(path ? path : "");
	mod->info.fd = -1;
	mod->info.dev = dev;
	mod->info.ino = ino;
	if (build_id) {
		snprintf(mod->build_id, sizeof(mod->build_id), "%s", build_id);
		mod->build_id_read = true;
	}
	*id = ++m->nr;
	return *id;
}

int modules__set_fd(struct modules *m, uint32_t id, int fd)
{
	struct module *mod;

	if (id == 0 || id > m->nr)
		return -ENOENT;
	mod = &m->mods[id - 1];
	if (mod->info.fd >= 0)
		close(mod->info.fd);
	mod->info.fd = fd;
	return 0;
}

/* Hex build-id from the ELF notes of fd; "" if none. */
static void read_build_id(int fd, char *out, size_t len)
{
	Elf_Scn *scn = NULL;
	Elf *e;

	out[0] = '\0';
	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		while (data && (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
			const unsigned char *d = (const unsigned char *)data->d_buf + desc_off;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((char *)data->d_buf + name_off, "GNU", 4))
				continue;
			for (size_t i = 0; i < nh.n_descsz && 2 * i + 2 < len; i++)
				snprintf(out + 2 * i, 3, "%02x", d[i]);
			goto done;
		}
	}
done:
	elf_end(e);
}

void modules__file_build_id(int fd, char *out, size_t len)
{
	if (len)
		read_build_id(fd, out, len);
}

const struct module_info *modules__info(struct modules *m, uint32_t id)
{
	struct module *mod;

	if (id == 0 || id > m->nr)
		return NULL;
	mod = &m->mods[id - 1];
	if (!mod->build_id_read) {
		read_build_id(mod->info.fd, mod->build_id, sizeof(mod->build_id));
		mod->build_id_read = true;
	}
	mod->info.path = mod->path;
	mod->info.build_id = mod->build_id;
	return &mod->info;
}

/* Opens the file of a mapping, preferring our own view when it is the same file. */
static int open_mapped(int pid, const struct map_entry *e)
{
	char path[4096 + 64];
	struct stat st;
	int fd;

	if (!e->deleted && stat(e->path, &st) == 0 && st.st_ino == e->inode) {
		fd = open(e->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			return fd;
	}
	if (e->deleted)
		snprintf(path, sizeof(path), "%s/%d/map_files/%llx-%llx", procfs_root, pid,
			 (unsigned long long)e->start, (unsigned long long)e->end);
	else if (snprintf(path, sizeof(path), "%s/%d/root%s", procfs_root, pid, e->path) >=
		 (int)sizeof(path))
		return -1;
	return open(path, O_RDONLY | O_CLOEXEC);
}

struct refresh_ctx {
	struct addr_map *am;
	struct mapping *maps;
	size_t nr, cap;
};

static int add_mapping(const struct map_entry *e, void *data)
{
	struct refresh_ctx *rc = data;
	struct modules *m = rc->am->m;
	struct file_key k;
	uint32_t *idp, id;

	if (e->perms[2] != 'x' || !e->inode || e->path[0] != '/')
		return 0;
	k.dev = ((uint64_t)e->dev_major << 20) | e->dev_minor;
	k.ino = e->inode;
	idp = htab__lookup(m->by_file, &k);
	if (idp) {
		id = *idp;
	} else {
		id = modules__add(m, k.dev, k.ino, e->path, NULL);
		if (!id)
			return -ENOMEM;
		m->mods[id - 1].info.fd = open_mapped(rc->am->pid, e);
	}
	if (rc->nr == rc->cap) {
		size_t cap = rc->cap ? rc->cap * 2 : 64;
		struct mapping *maps = realloc(rc->maps, cap * sizeof(*maps));

		if (!maps)
			return -ENOMEM;
		rc->maps = maps;
		rc->cap = cap;
	}
	rc->maps[rc->nr++] = (struct mapping){ e->start, e->end, e->offset, id };
	return 0;
}

int addr_map__refresh(struct addr_map *am)
{
	struct refresh_ctx rc = { .am = am };
	int err = procfs__for_each_map(am->pid, add_mapping, &rc);

	/*
	 * A process that has exited but is not yet reaped reads as no mapping at
	 * all: it is gone, and the maps kept (of its life) still say where its
	 * frames were. One that exits during the read (the file is read a page at a
	 * time) leaves it cut short, its libraries at the top missing: a read is
	 * whole only if the process still has its memory after it.
	 */
	if (!err && (!rc.nr || !procfs__has_memory(am->pid)))
		err = -ESRCH;
	if (err) {
		free(rc.maps);
		return err == -ENOENT ? -ESRCH : err;
	}
	/* /proc/PID/maps is sorted by address already */
	if (rc.nr != am->nr || (rc.nr && memcmp(rc.maps, am->maps, rc.nr * sizeof(*rc.maps))))
		am->generation++;
	free(am->maps);
	am->maps = rc.maps;
	am->nr = rc.nr;
	am->cap = rc.cap;
	return 0;
}

struct addr_map *addr_map__new(struct modules *m, int pid)
{
	struct addr_map *am = calloc(1, sizeof(*am));
	int err;

	if (!am)
		return NULL;
	am->m = m;
	am->pid = pid;
	err = addr_map__refresh(am);
	if (err) {
		free(am);
		errno = -err;
		return NULL;
	}
	return am;
}

void addr_map__free(struct addr_map *am)
{
	if (!am)
		return;
	free(am->maps);
	free(am);
}

uint32_t addr_map__resolve(const struct addr_map *am, uint64_t addr, uint64_t *file_off)
{
	size_t lo = 0, hi = am ? am->nr : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct mapping *mp = &am->maps[mid];

		if (addr < mp->start) {
			hi = mid;
		} else if (addr >= mp->end) {
			lo = mid + 1;
		} else {
			*file_off = addr - mp->start + mp->off;
			return mp->mod;
		}
	}
	return 0;
}

int addr_map__for_each(const struct addr_map *am,
		       int (*cb)(uint64_t start, uint64_t end, uint64_t off, uint32_t mod,
				 void *ctx),
		       void *ctx)
{
	for (size_t i = 0; i < am->nr; i++) {
		int ret = cb(am->maps[i].start, am->maps[i].end, am->maps[i].off, am->maps[i].mod,
			     ctx);

		if (ret)
			return ret;
	}
	return 0;
}

uint64_t addr_map__generation(const struct addr_map *am)
{
	return am->generation;
}

bool addr_map__refresh_after_miss(struct addr_map *am, uint64_t now)
{
	uint64_t gen;

	if (!am || now - am->missed_ns < am->backoff_ns)
		return false;
	gen = am->generation;
	am->missed_ns = now;
	if (addr_map__refresh(am) == 0 && am->generation != gen) {
		am->backoff_ns = MAP_REFRESH_MIN_NS;
		return true;
	}
	if (am->backoff_ns < MAP_REFRESH_MAX_NS)
		am->backoff_ns = am->backoff_ns * 2 ?: MAP_REFRESH_MIN_NS;
	return false;
}
