// SPDX-License-Identifier: BSD-2-Clause
/*
 * symbolize.c - ELF symbol tables (.symtab, else .dynsym) sorted by address,
 * searched by binary search; C++ names demangled with the C++ runtime's
 * __cxa_demangle. Source file and line from the module's DWARF line table
 * (elfutils' libdw) where it has one.
 *
 * A table keeps each function's address, size and the offset of its name: a
 * name is read from the string table only when a pc falls in its function. The
 * library's own mapping of the file then holds, once the table is sorted, only
 * the few pages of names that were looked up: the exported names of a large C++
 * library (libtorch's) run to a hundred megabytes.
 */
#include <errno.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "symbolize.h"
#include "util/htab.h"
#include "util/log.h"

char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct elf_sym {
	uint64_t addr;
	uint32_t size; /* UINT32_MAX: that or more */
	uint32_t name; /* in the string table strndx */
};

struct segment {
	uint64_t off, filesz, vaddr;
};

struct symtab {
	bool loaded;
	bool dw_tried;
	Dwarf *dw; /* NULL: no debug information */
	Elf *elf;
	struct elf_sym *syms;
	size_t nr;
	size_t strndx; /* the string table of syms' names */
	struct segment *segs;
	size_t nr_segs;
};

struct cache_key {
	uint32_t mod;
	uint32_t pad;
	uint64_t off;
};

struct cache_val {
	char *function;
	uint64_t sym_off;
	char *file;
	int line;
};

struct symbolizer {
	struct modules *m;
	struct symtab *tabs; /* index = module id - 1 */
	uint32_t nr_tabs;
	struct htab *cache;
};

char *demangle(const char *name)
{
	int status = 0;
	char *out;

	if (!name || name[0] != '_' || name[1] != 'Z')
		return NULL;
	out = __cxa_demangle(name, NULL, NULL, &status);
	if (status) {
		free(out);
		return NULL;
	}
	return out;
}

struct symbolizer *symbolizer__new(struct modules *m)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->m = m;
	s->cache = htab__new(sizeof(struct cache_key), sizeof(struct cache_val));
	if (!s->cache) {
		free(s);
		return NULL;
	}
	return s;
}

void symbolizer__free(struct symbolizer *s)
{
	struct cache_val *v;
	size_t it = 0;

	if (!s)
		return;
	while ((v = htab__next(s->cache, &it, NULL))) {
		free(v->function);
		free(v->file);
	}
	htab__free(s->cache);
	for (uint32_t i = 0; i < s->nr_tabs; i++) {
		free(s->tabs[i].syms);
		free(s->tabs[i].segs);
		if (s->tabs[i].dw)
			dwarf_end(s->tabs[i].dw);
		elf_end(s->tabs[i].elf);
	}
	free(s->tabs);
	free(s);
}

static int cmp_sym(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* prefer sized, global-looking names: longer size first */
	return x->size > y->size ? -1 : x->size < y->size;
}

/* Symbols read between two drops of the table's pages read so far. */
#define DROP_EVERY 65536

/*
 * The file's pages of bytes [off, off + len) of the file leave this process's
 * memory (they are read again from the page cache if needed): a table read once.
 */
static void drop_pages(Elf *e, uint64_t off, uint64_t len)
{
	size_t size, page = (size_t)sysconf(_SC_PAGESIZE);
	char *raw = elf_rawfile(e, &size);
	uintptr_t from, to;

	if (!raw || off >= size || len > size - off)
		return;
	from = ((uintptr_t)raw + off + page - 1) & ~(uintptr_t)(page - 1);
	to = ((uintptr_t)raw + off + len) & ~(uintptr_t)(page - 1);
	if (to > from)
		madvise((void *)from, to - from, MADV_DONTNEED);
}

static int collect(struct symtab *t, Elf_Scn *scn, GElf_Shdr *sh)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	if (!data || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	t->syms = malloc((n ? n : 1) * sizeof(*t->syms));
	if (!t->syms)
		return -ENOMEM;
	t->nr = 0;
	t->strndx = sh->sh_link;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		int type;

		if (i && i % DROP_EVERY == 0)
			drop_pages(t->elf, sh->sh_offset + (i - DROP_EVERY) * sh->sh_entsize,
				   DROP_EVERY * sh->sh_entsize);
		if (!gelf_getsym(data, i, &sym) || !sym.st_value || sym.st_shndx == SHN_UNDEF ||
		    !sym.st_name)
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		t->syms[t->nr++] = (struct elf_sym){
			sym.st_value, sym.st_size < UINT32_MAX ? (uint32_t)sym.st_size : UINT32_MAX,
			(uint32_t)sym.st_name
		};
	}
	qsort(t->syms, t->nr, sizeof(*t->syms), cmp_sym);
	drop_pages(t->elf, sh->sh_offset, sh->sh_size);
	return 0;
}

static void load_segments(struct symtab *t)
{
	size_t n;

	if (elf_getphdrnum(t->elf, &n) || !n)
		return;
	t->segs = calloc(n, sizeof(*t->segs));
	if (!t->segs)
		return;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(t->elf, i, &ph) && ph.p_type == PT_LOAD)
			t->segs[t->nr_segs++] =
				(struct segment){ ph.p_offset, ph.p_filesz, ph.p_vaddr };
	}
}

static struct symtab *symtab_of(struct symbolizer *s, uint32_t mod)
{
	const struct module_info *info = modules__info(s->m, mod);
	Elf_Scn *scn = NULL, *dynsym = NULL, *symtab = NULL;
	GElf_Shdr dyn_sh, sym_sh;
	struct symtab *t;

	if (!info)
		return NULL;
	if (mod > s->nr_tabs) {
		uint32_t nr = modules__count(s->m);
		struct symtab *tabs = realloc(s->tabs, nr * sizeof(*tabs));

		if (!tabs)
			return NULL;
		memset(tabs + s->nr_tabs, 0, (nr - s->nr_tabs) * sizeof(*tabs));
		s->tabs = tabs;
		s->nr_tabs = nr;
	}
	t = &s->tabs[mod - 1];
	if (t->loaded)
		return t;
	t->loaded = true;
	if (info->fd < 0)
		return t;
	elf_version(EV_CURRENT);
	t->elf = elf_begin(info->fd, ELF_C_READ_MMAP, NULL);
	if (!t->elf)
		return t;
	while ((scn = elf_nextscn(t->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB) {
			symtab = scn;
			sym_sh = sh;
		} else if (sh.sh_type == SHT_DYNSYM) {
			dynsym = scn;
			dyn_sh = sh;
		}
	}
	load_segments(t);
	if (symtab && collect(t, symtab, &sym_sh) == 0 && t->nr)
		return t;
	free(t->syms);
	t->syms = NULL;
	t->nr = 0;
	if (dynsym)
		collect(t, dynsym, &dyn_sh);
	return t;
}

static bool off_to_vaddr(const struct symtab *t, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < t->nr_segs; i++) {
		const struct segment *sg = &t->segs[i];

		if (off >= sg->off && off < sg->off + sg->filesz) {
			*vaddr = off - sg->off + sg->vaddr;
			return true;
		}
	}
	return false;
}

/* The symbol covering vaddr: the last one starting at or below it. */
static const struct elf_sym *find_sym(const struct symtab *t, uint64_t vaddr)
{
	size_t lo = 0, hi = t->nr;
	const struct elf_sym *best;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	best = &t->syms[lo - 1];
	/* among aliases at the same address, the first sorted one wins */
	while (best > t->syms && best[-1].addr == best->addr)
		best--;
	if (best->size && vaddr >= best->addr + best->size)
		return NULL;
	return best;
}

/*
 * The source line of vaddr, from the line table of the compilation unit that
 * covers it (frames above the innermost already point into their call, not
 * after it: books.c's intern_stack()).
 */
static void source_line(struct symtab *t, uint64_t vaddr, struct cache_val *v)
{
	Dwarf_Die cu;
	Dwarf_Line *l;
	const char *src;
	int line = 0;

	if (!t->dw_tried) {
		t->dw_tried = true;
		t->dw = dwarf_begin_elf(t->elf, DWARF_C_READ, NULL);
	}
	if (!t->dw || !dwarf_addrdie(t->dw, vaddr, &cu))
		return;
	l = dwarf_getsrc_die(&cu, vaddr);
	if (!l || dwarf_lineno(l, &line) || line <= 0)
		return;
	src = dwarf_linesrc(l, NULL, NULL);
	if (!src || !(v->file = strdup(src)))
		return;
	v->line = line;
}

int symbolizer__lookup(struct symbolizer *s, uint32_t mod, uint64_t off, struct sym_result *out)
{
	struct cache_key k = { .mod = mod, .off = off };
	struct cache_val *v;
	struct symtab *t;
	bool created;
	uint64_t vaddr;

	memset(out, 0, sizeof(*out));
	v = htab__upsert(s->cache, &k, &created);
	if (!v)
		return -ENOMEM;
	if (created) {
		t = symtab_of(s, mod);
		if (t && t->nr && off_to_vaddr(t, off, &vaddr)) {
			const struct elf_sym *sym = find_sym(t, vaddr);
			const char *name = sym ? elf_strptr(t->elf, t->strndx, sym->name) : NULL;

			if (name && *name) {
				v->function = demangle(name);
				if (!v->function)
					v->function = strdup(name);
				v->sym_off = vaddr - sym->addr;
			}
			source_line(t, vaddr, v);
		}
	}
	out->function = v->function;
	out->sym_off = v->sym_off;
	out->file = v->file;
	out->line = v->line;
	return 0;
}
