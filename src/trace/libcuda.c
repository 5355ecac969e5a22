// SPDX-License-Identifier: BSD-2-Clause
/*
 * libcuda.c - locating the CUDA driver library and its exported functions.
 *
 * A process's libcuda is found in /proc/PID/maps and reached through
 * /proc/PID/root so that containers with their own copy work; the file's
 * (dev, inode) as the tracer sees it identifies it. Symbol offsets come from
 * .dynsym (and .symtab where present), converted to file offsets through the
 * PT_LOAD segments, as uprobes want them; from the dynamic segment when the
 * section headers are missing or damaged (elfdyn.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libgen.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "elfdyn.h"
#include "libcuda.h"
#include "probes.h"
#include "util/elfsym.h"
#include "util/log.h"
#include "util/procfs.h"

bool libcuda__is_driver_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "libcuda.so", 10) && (base[10] == '\0' || base[10] == '.');
}

bool libcuda__is_xla_path(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "libxla", 6) || !strncmp(base, "xla_", 4) ||
	       !strncmp(base, "libjax", 6) || strstr(path, "/jaxlib/") || strstr(path, "/xla/") ||
	       strstr(path, "/jax_plugins/") || strstr(path, "/jax_cuda");
}

/* File offset of virtual address vaddr, from the PT_LOAD segment holding it. */
static int vaddr_to_offset(Elf *e, uint64_t vaddr, uint64_t *off)
{
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_memsz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

struct scan_ctx {
	Elf *e;
	struct cuda_lib *lib;
};

static void note_symbol(const GElf_Sym *sym, const char *name, void *ctx)
{
	struct scan_ctx *sc = ctx;
	uint64_t off;
	int api;

	if (GELF_ST_TYPE(sym->st_info) != STT_FUNC || !sym->st_value || name[0] != 'c' ||
	    name[1] != 'u')
		return;
	api = probe__lookup(name);
	if (api < 0 || sc->lib->offsets[api] || vaddr_to_offset(sc->e, sym->st_value, &off))
		return;
	sc->lib->offsets[api] = off;
	sc->lib->nr_found++;
}

static int add_dynamic(const char *name, uint64_t off, void *ctx)
{
	struct cuda_lib *lib = ctx;
	int api;

	if (name[0] != 'c' || name[1] != 'u')
		return 0;
	api = probe__lookup(name);
	if (api < 0 || lib->offsets[api])
		return 0;
	lib->offsets[api] = off;
	lib->nr_found++;
	return 0;
}

/*
 * The section headers gave nothing (missing, damaged, cut off): the symbols
 * the dynamic loader itself uses, from the program headers. Returns 0 or -errno.
 */
static int open_dynamic(int fd, size_t size, struct cuda_lib *lib)
{
	void *base = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	int n;

	if (base == MAP_FAILED) {
		lib->why = "it is empty or cannot be mapped";
		return -ENOEXEC;
	}
	n = elfdyn__for_each_func(base, size, add_dynamic, lib, &lib->why);
	munmap(base, size);
	if (n < 0)
		return n;
	log_debug("%s: no usable section headers; %d functions read from its dynamic segment",
		  lib->display, n);
	return 0;
}

int libcuda__open(const char *path, const char *display, struct cuda_lib *lib)
{
	struct stat st;
	Elf_Scn *scn = NULL;
	Elf *e = NULL;
	int fd, err = 0;

	memset(lib, 0, sizeof(*lib));
	if (snprintf(lib->path, sizeof(lib->path), "%s", path) >= (int)sizeof(lib->path) ||
	    snprintf(lib->display, sizeof(lib->display), "%s", display ? display : path) >=
		    (int)sizeof(lib->display))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto cleanup;
	}
	lib->dev = st.st_dev;
	lib->ino = st.st_ino;
	if (!S_ISREG(st.st_mode)) {
		lib->why = "not a regular file";
		err = -ENOEXEC;
		goto cleanup;
	}
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (e && elf_kind(e) == ELF_K_ELF && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB))
			elfsym__for_each(e, scn, &sh, note_symbol, &(struct scan_ctx){ e, lib });
	}
	if (!lib->nr_found)
		err = open_dynamic(fd, st.st_size, lib);
	if (!err && !lib->nr_found) {
		lib->why = "it exports none of the CUDA driver functions gpuleak traces";
		err = -ENOEXEC;
	}
cleanup:
	elf_end(e);
	close(fd);
	return err;
}

struct find_ctx {
	int pid;
	bool (*match)(const char *path);
	char display[PATH_MAX];
	char path[PATH_MAX];
};

static char torch_name[64] = "libc10_cuda.so";

void libcuda__set_torch_name(const char *prefix)
{
	snprintf(torch_name, sizeof(torch_name), "%s", prefix);
}

static bool is_torch_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, torch_name, strlen(torch_name));
}

/* glibc's dynamic loader: ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ld-2.31.so */
static bool is_ldso_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "ld-linux", 8) || (!strncmp(base, "ld-2.", 5) && strstr(base, ".so"));
}

static int find_map(const struct map_entry *m, void *data)
{
	struct find_ctx *fc = data;
	int n;

	if (!m->inode || !fc->match(m->path))
		return 0;
	n = snprintf(fc->path, sizeof(fc->path), "%s/%d/root%s", procfs_root, fc->pid, m->path);
	/* deleted, or a name the kernel escaped in maps (a newline is "\012"): the mapping's
	 * own link reaches the file whatever its name */
	if (m->deleted || n >= (int)sizeof(fc->path) || access(fc->path, F_OK))
		n = snprintf(fc->path, sizeof(fc->path), "%s/%d/map_files/%llx-%llx", procfs_root,
			     fc->pid, (unsigned long long)m->start, (unsigned long long)m->end);
	if (n >= (int)sizeof(fc->path))
		return 0;
	snprintf(fc->display, sizeof(fc->display), "%s", m->path);
	return 1;
}

int libcuda__find_in_process(int pid, struct cuda_lib *lib)
{
	struct find_ctx fc = { .pid = pid, .match = libcuda__is_driver_name };
	int ret = procfs__for_each_map(pid, find_map, &fc);

	if (ret == -ENOENT)
		return -ESRCH;
	if (ret < 0)
		return ret;
	if (ret == 0)
		return -ENOENT;
	return libcuda__open(fc.path, fc.display, lib);
}

static int find_file(int pid, bool (*match)(const char *), char *path, size_t len, char *display,
		     size_t dlen, dev_t *dev, ino_t *ino)
{
	struct find_ctx *fc = calloc(1, sizeof(*fc));
	struct stat st;
	int ret;

	if (!fc)
		return -ENOMEM;
	fc->pid = pid;
	fc->match = match;
	ret = procfs__for_each_map(pid, find_map, fc);
	if (ret == -ENOENT)
		ret = -ESRCH;
	else if (ret == 0)
		ret = -ENOENT;
	else if (ret == 1)
		ret = stat(fc->path, &st) ? -errno : 0;
	if (!ret) {
		*dev = st.st_dev;
		*ino = st.st_ino;
		if (snprintf(path, len, "%s", fc->path) >= (int)len ||
		    snprintf(display, dlen, "%s", fc->display) >= (int)dlen)
			ret = -ENAMETOOLONG;
	}
	free(fc);
	return ret;
}

int libcuda__find_torch(int pid, char *path, size_t len, char *display, size_t dlen, dev_t *dev,
			ino_t *ino)
{
	return find_file(pid, is_torch_name, path, len, display, dlen, dev, ino);
}

int libcuda__find_ldso(int pid, char *path, size_t len, char *display, size_t dlen, dev_t *dev,
		       ino_t *ino)
{
	return find_file(pid, is_ldso_name, path, len, display, dlen, dev, ino);
}

struct find_ctx_sym {
	Elf *e;
	const char *name;
	uint64_t *off;
	int err; /* -ENOENT until found */
};

static void match_symbol(const GElf_Sym *sym, const char *name, void *ctx)
{
	struct find_ctx_sym *fs = ctx;

	if (fs->err && GELF_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_value &&
	    !strcmp(name, fs->name))
		fs->err = vaddr_to_offset(fs->e, sym->st_value, fs->off);
}

int libcuda__symbol_offset(const char *path, const char *name, uint64_t *off)
{
	struct find_ctx_sym fs = { .name = name, .off = off, .err = -ENOENT };
	Elf_Scn *scn = NULL;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	fs.e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (fs.e && fs.err && (scn = elf_nextscn(fs.e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    (sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_SYMTAB))
			elfsym__for_each(fs.e, scn, &sh, match_symbol, &fs);
	}
	elf_end(fs.e);
	close(fd);
	return fs.err;
}

/* The ld.so cache (glibc's "glibc-ld.so.cache1.1" format): a 64-bit libcuda.so.1. */
static int search_ld_cache(char *path, size_t len)
{
	static const char magic[] = "glibc-ld.so.cache1.1";
	const size_t hdr = 48, entry = 24;
	struct stat st;
	const char *base;
	size_t size, start = 0;
	int fd, err = -ENOENT;
	uint32_t nlibs;

	fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) || st.st_size < (off_t)hdr) {
		close(fd);
		return -ENOENT;
	}
	size = st.st_size;
	base = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		return -ENOENT;
	/* an old-format header may come first; the new one follows it */
	for (start = 0; start + hdr <= size; start += 8)
		if (!memcmp(base + start, magic, sizeof(magic) - 1))
			break;
	if (start + hdr > size)
		goto cleanup;
	memcpy(&nlibs, base + start + 20, sizeof(nlibs));
	for (uint32_t i = 0; i < nlibs; i++) {
		size_t e = start + hdr + (size_t)i * entry;
		int32_t flags;
		uint32_t key, value;

		if (e + entry > size)
			break;
		memcpy(&flags, base + e, 4);
		memcpy(&key, base + e + 4, 4);
		memcpy(&value, base + e + 8, 4);
		if ((flags & 0xff00) != 0x0300 || start + key >= size || start + value >= size)
			continue; /* not an x86-64 library */
		if (strnlen(base + start + key, size - start - key) == size - start - key ||
		    strnlen(base + start + value, size - start - value) == size - start - value)
			continue;
		if (strcmp(base + start + key, "libcuda.so.1"))
			continue;
		if (access(base + start + value, R_OK) == 0 &&
		    snprintf(path, len, "%s", base + start + value) < (int)len) {
			err = 0;
			break;
		}
	}
cleanup:
	munmap((void *)base, size);
	return err;
}

static int try_dir(const char *dir, size_t dirlen, char *path, size_t len)
{
	if (dirlen == 0)
		return -ENOENT;
	if (snprintf(path, len, "%.*s/libcuda.so.1", (int)dirlen, dir) >= (int)len)
		return -ENAMETOOLONG;
	return access(path, R_OK) ? -ENOENT : 0;
}

/* Tries each directory of a ':'-separated list; $ORIGIN expands to origin. */
static int try_dirs(const char *list, const char *origin, char *path, size_t len)
{
	const char *p = list;

	while (p && *p) {
		size_t n = strcspn(p, ":;");
		char dir[PATH_MAX];
		int m;

		if (n >= 7 && !strncmp(p, "$ORIGIN", 7) && origin)
			m = snprintf(dir, sizeof(dir), "%s%.*s", origin, (int)(n - 7), p + 7);
		else if (n >= 9 && !strncmp(p, "${ORIGIN}", 9) && origin)
			m = snprintf(dir, sizeof(dir), "%s%.*s", origin, (int)(n - 9), p + 9);
		else
			m = snprintf(dir, sizeof(dir), "%.*s", (int)n, p);
		if (m > 0 && m < (int)sizeof(dir) && !try_dir(dir, strlen(dir), path, len))
			return 0;
		p += n;
		if (*p)
			p++;
	}
	return -ENOENT;
}

/* DT_RPATH and DT_RUNPATH of an executable (either may be empty). */
static void read_rpaths(const char *exe, char *rpath, char *runpath, size_t len)
{
	Elf_Scn *scn = NULL;
	Elf *e = NULL;
	int fd;

	rpath[0] = runpath[0] = '\0';
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *str;

			if (!gelf_getdyn(data, i, &dyn) ||
			    (dyn.d_tag != DT_RPATH && dyn.d_tag != DT_RUNPATH))
				continue;
			str = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
			if (str)
				snprintf(dyn.d_tag == DT_RPATH ? rpath : runpath, len, "%s", str);
		}
	}
	elf_end(e);
	close(fd);
}

/* The executable a command name runs: itself if it has a '/', else found in $PATH. */
static int resolve_exe(const char *cmd, char *out, size_t len)
{
	const char *p = getenv("PATH");

	if (strchr(cmd, '/'))
		return snprintf(out, len, "%s", cmd) < (int)len ? 0 : -ENAMETOOLONG;
	while (p && *p) {
		size_t n = strcspn(p, ":");

		if (snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", cmd) < (int)len &&
		    access(out, X_OK) == 0)
			return 0;
		p += n;
		if (*p)
			p++;
	}
	return -ENOENT;
}

int libcuda__search(const char *exe_cmd, const char *ld_library_path, char *path, size_t len)
{
	static const char *const dirs[] = {
		"/usr/local/nvidia/lib64",
		"/usr/lib/x86_64-linux-gnu",
		"/usr/lib64",
		"/lib64",
		"/usr/lib",
		"/usr/lib/wsl/lib",
	};
	char exe[PATH_MAX], real[PATH_MAX], rpath[PATH_MAX], runpath[PATH_MAX], *origin = NULL;

	rpath[0] = runpath[0] = '\0';
	if (exe_cmd && !resolve_exe(exe_cmd, exe, sizeof(exe)) && realpath(exe, real)) {
		read_rpaths(real, rpath, runpath, sizeof(rpath));
		origin = dirname(real);
	}
	/* the dynamic loader's order: RPATH (without RUNPATH), LD_LIBRARY_PATH, RUNPATH */
	if (!runpath[0] && !try_dirs(rpath, origin, path, len))
		return 0;
	if (!try_dirs(ld_library_path, NULL, path, len))
		return 0;
	if (!try_dirs(runpath, origin, path, len))
		return 0;
	if (!search_ld_cache(path, len))
		return 0;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!try_dir(dirs[i], strlen(dirs[i]), path, len))
			return 0;
	return -ENOENT;
}

void libcuda__missing(const struct cuda_lib *lib, bool required_only, char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (int i = 0; i < GL_NR_APIS; i++) {
		int n;

		if (lib->offsets[i] ||
		    (required_only && !(probe__desc(i)->flags & GL_API_REQUIRED)))
			continue;
		n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", probe__name(i));
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += n;
	}
}

const char *libcuda__strerror(const struct cuda_lib *lib, int err)
{
	return err == -ENOEXEC && lib->why ? lib->why : strerror(-err);
}
