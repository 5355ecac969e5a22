// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_elf.c - libFuzzer target: every ELF reader on a corrupt file. The input
 * is written to a file and read as the CUDA driver (libcuda__open,
 * libcuda__symbol_offset), as an executable whose DT_RPATH/DT_RUNPATH lead to
 * libcuda (libcuda__search), and as a module of the symbolizer (build-id by
 * modules__info, symbol table by symbolizer__lookup at the offsets the
 * driver reader found and at a few fixed ones).
 */
#include <errno.h>
#include <limits.h>
#include "fuzz.h"
#include "stacks/modules.h"
#include "stacks/native/symbolize.h"
#include "trace/libcuda.h"

static char elf_path[64];
static struct cuda_lib lib;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	snprintf(elf_path, sizeof(elf_path), "%s/a.out", fuzz_tmpdir());
	return 0;
}

static void symbolize(const uint8_t *data, size_t size)
{
	static const uint64_t fixed[] = { 0, 0x40, 0x1000, 0x1010, 0x2000, UINT64_MAX };
	struct modules *m = modules__new();
	struct symbolizer *s = m ? symbolizer__new(m) : NULL;
	struct sym_result r;
	char build_id[41];
	uint32_t id;
	int fd;

	if (!s)
		goto cleanup;
	id = modules__add(m, 1, 1, elf_path, NULL);
	fd = open(elf_path, O_RDONLY | O_CLOEXEC);
	if (!id || fd < 0 || modules__set_fd(m, id, fd)) {
		if (fd >= 0)
			close(fd);
		goto cleanup;
	}
	modules__file_build_id(fd, build_id, sizeof(build_id));
	modules__info(m, id);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		symbolizer__lookup(s, id, fixed[i], &r);
	for (int i = 0; i < GL_NR_APIS; i++)
		if (lib.offsets[i])
			symbolizer__lookup(s, id, lib.offsets[i], &r);
	symbolizer__lookup(s, id, 0x40, &r);
cleanup:
	symbolizer__free(s);
	modules__free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char found[PATH_MAX];
	uint64_t off;

	fuzz_write(elf_path, data, size);
	libcuda__open(elf_path, NULL, &lib);
	libcuda__symbol_offset(elf_path, "cuMemAlloc_v2", &off);
	libcuda__search(elf_path, NULL, found, sizeof(found));
	symbolize(data, size);
	return 0;
}
