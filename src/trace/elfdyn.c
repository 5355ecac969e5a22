// SPDX-License-Identifier: BSD-2-Clause
/*
 * elfdyn.c - dynamic symbols from the program headers alone (see elfdyn.h).
 * Every offset and count read from the file is checked against its size.
 */
#include <elf.h>
#include <errno.h>
#include <string.h>
#include "elfdyn.h"

struct image {
	const uint8_t *base;
	size_t size;
	const Elf64_Phdr *ph;
	size_t phnum;
};

/* Whether [off, off + len) lies in the image. */
static int in_image(const struct image *im, uint64_t off, uint64_t len)
{
	return off <= im->size && len <= im->size - off;
}

/* File offset of vaddr, from the PT_LOAD whose file bytes hold it (exec: PF_X only). */
static int to_offset(const struct image *im, uint64_t vaddr, int exec, uint64_t *off)
{
	for (size_t i = 0; i < im->phnum; i++) {
		const Elf64_Phdr *p = &im->ph[i];

		if (p->p_type != PT_LOAD || (exec && !(p->p_flags & PF_X)))
			continue;
		if (vaddr >= p->p_vaddr && vaddr - p->p_vaddr < p->p_filesz) {
			*off = vaddr - p->p_vaddr + p->p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

/*
 * A pointer to len bytes at vaddr in the image, aligned to align (a power of two) as the
 * tables read through it must be, or NULL: a table the linker would have aligned is malformed
 * when it is not.
 */
static const void *at_vaddr(const struct image *im, uint64_t vaddr, uint64_t len, uint64_t align)
{
	uint64_t off;

	if (to_offset(im, vaddr, 0, &off) || !in_image(im, off, len) ||
	    ((uintptr_t)(im->base + off) & (align - 1)))
		return NULL;
	return im->base + off;
}

/* Symbols in DT_GNU_HASH: one past the highest index any chain reaches. */
static int gnu_hash_count(const struct image *im, uint64_t vaddr, uint64_t *count)
{
	const uint32_t *h = at_vaddr(im, vaddr, 16, 4), *buckets, *chain;
	uint32_t nbuckets, symoffset, bloom, max = 0;

	if (!h)
		return -ENOEXEC;
	nbuckets = h[0];
	symoffset = h[1];
	bloom = h[2];
	buckets = at_vaddr(im, vaddr + 16 + (uint64_t)bloom * 8, (uint64_t)nbuckets * 4, 4);
	if (!buckets || !nbuckets)
		return -ENOEXEC;
	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i] > max)
			max = buckets[i];
	if (max < symoffset) {
		*count = symoffset;
		return 0;
	}
	/* the chain of the last bucket ends at the last symbol: its low bit is set */
	for (uint64_t i = max; i < (1u << 24); i++) {
		uint64_t cv = vaddr + 16 + (uint64_t)bloom * 8 + (uint64_t)nbuckets * 4 +
			      (i - symoffset) * 4;

		chain = at_vaddr(im, cv, 4, 4);
		if (!chain)
			return -ENOEXEC;
		if (*chain & 1) {
			*count = i + 1;
			return 0;
		}
	}
	return -ENOEXEC;
}

static int read_headers(struct image *im, const char **why)
{
	const Elf64_Ehdr *eh = (const void *)im->base;

	if (im->size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG)) {
		*why = "not an ELF file";
		return -ENOEXEC;
	}
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB) {
		*why = "not a 64-bit little-endian ELF file";
		return -ENOEXEC;
	}
	if (eh->e_phentsize != sizeof(Elf64_Phdr) || !eh->e_phnum || eh->e_phoff % 8 ||
	    !in_image(im, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr))) {
		*why = "its program headers lie outside the file";
		return -ENOEXEC;
	}
	im->ph = (const void *)(im->base + eh->e_phoff);
	im->phnum = eh->e_phnum;
	return 0;
}

int elfdyn__for_each_func(const void *base, size_t size, elfdyn_fn fn, void *ctx, const char **why)
{
	struct image im = { .base = base, .size = size };
	uint64_t symtab = 0, strtab = 0, strsz = 0, syment = 0, hash = 0, gnu_hash = 0, count;
	const Elf64_Dyn *dyn = NULL;
	const Elf64_Sym *syms;
	const char *strs;
	size_t ndyn = 0;
	int n = 0;

	if (read_headers(&im, why))
		return -ENOEXEC;
	for (size_t i = 0; i < im.phnum; i++) {
		if (im.ph[i].p_type != PT_DYNAMIC)
			continue;
		if (im.ph[i].p_offset % 8 || !in_image(&im, im.ph[i].p_offset, im.ph[i].p_filesz))
			break;
		dyn = (const void *)(im.base + im.ph[i].p_offset);
		ndyn = im.ph[i].p_filesz / sizeof(*dyn);
	}
	if (!dyn) {
		*why = "it has no dynamic segment inside the file";
		return -ENOEXEC;
	}
	for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
		uint64_t v = dyn[i].d_un.d_val;

		switch (dyn[i].d_tag) {
		case DT_SYMTAB: symtab = v; break;
		case DT_STRTAB: strtab = v; break;
		case DT_STRSZ: strsz = v; break;
		case DT_SYMENT: syment = v; break;
		case DT_HASH: hash = v; break;
		case DT_GNU_HASH: gnu_hash = v; break;
		}
	}
	if (!symtab || !strtab || !strsz || (syment && syment != sizeof(Elf64_Sym))) {
		*why = "its dynamic segment has no usable DT_SYMTAB/DT_STRTAB";
		return -ENOEXEC;
	}
	if (hash) {
		const uint32_t *h = at_vaddr(&im, hash, 8, 4);

		if (!h) {
			*why = "its DT_HASH table lies outside the file or is misaligned";
			return -ENOEXEC;
		}
		count = h[1];
	} else if (!gnu_hash || gnu_hash_count(&im, gnu_hash, &count)) {
		*why = "its dynamic segment has no readable DT_HASH or DT_GNU_HASH to count symbols";
		return -ENOEXEC;
	}
	strs = at_vaddr(&im, strtab, strsz, 1);
	syms = at_vaddr(&im, symtab, count * sizeof(Elf64_Sym), 8);
	if (!strs || !syms) {
		*why = "its dynamic symbol or string table lies outside the file or is misaligned";
		return -ENOEXEC;
	}
	for (uint64_t i = 0; i < count; i++) {
		const Elf64_Sym *sym = &syms[i];
		uint64_t off;

		if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC || sym->st_shndx == SHN_UNDEF ||
		    !sym->st_value || sym->st_name >= strsz ||
		    !memchr(strs + sym->st_name, '\0', strsz - sym->st_name))
			continue;
		if (to_offset(&im, sym->st_value, 1, &off))
			continue;
		n++;
		if (fn(strs + sym->st_name, off, ctx))
			break;
	}
	return n;
}
