// SPDX-License-Identifier: BSD-2-Clause
#include <stddef.h>
#include "elfsym.h"

void elfsym__for_each(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh,
		      void (*cb)(const GElf_Sym *sym, const char *name, void *ctx), void *ctx)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n;

	if (!data || !sh->sh_entsize)
		return;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		const char *name;

		if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF || !sym.st_name)
			continue;
		name = elf_strptr(e, sh->sh_link, sym.st_name);
		if (name)
			cb(&sym, name, ctx);
	}
}
