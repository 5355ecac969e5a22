/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * elfsym.h - walking an ELF symbol table (.dynsym or .symtab) with libelf.
 */
#ifndef GL_ELFSYM_H
#define GL_ELFSYM_H

#include <gelf.h>

/*
 * Calls cb for each defined symbol with a name in the symbol table section
 * scn (header sh) of e, in table order. A section without entries calls
 * nothing.
 */
void elfsym__for_each(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh,
		      void (*cb)(const GElf_Sym *sym, const char *name, void *ctx), void *ctx);

#endif /* GL_ELFSYM_H */
