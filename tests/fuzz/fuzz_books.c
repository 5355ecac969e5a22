// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_books.c - libFuzzer target: the first code that reads ring-buffer
 * data, event__validate and books__apply, on arbitrary byte records. The
 * input is
 *   byte 0:     bit 0: the DWARF unwinder (else frame pointers); bit 1: compact the
 *               stacks and build a snapshot at the end
 *   the rest:   records, each a 16-bit little-endian length and that many bytes.
 * The books read no /proc file (no_proc_files) and start empty for each input.
 */
#include "fuzz.h"
#include "books/books.h"
#include "model/snapshot.h"
#include "stacks/native/symbolize.h"
#include "stacks/native/unwind.h"
#include "trace/event.h"
#include "util/procfs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	procfs_root = fuzz_tmpdir();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct books_opts o = { .series_width_ns = 1000000000ULL, .no_proc_files = true };
	struct modules *m = modules__new();
	struct stacks *s = stacks__new();
	struct unwinder *u = NULL;
	struct books *b = NULL;
	struct symbolizer *sym = NULL;
	size_t off = 1;

	if (!size || !m || !s)
		goto cleanup;
	u = unwinder__new(m, data[0] & 1 ? GL_STACK_DWARF : GL_STACK_FP);
	b = u ? books__new(m, s, u, NULL, &o) : NULL;
	if (!b)
		goto cleanup;
	while (off + 2 <= size) {
		size_t len = data[off] | data[off + 1] << 8;
		uint8_t *rec;

		off += 2;
		if (len > size - off)
			len = size - off;
		/* an exact-size copy, 8-aligned as in the ring buffer */
		rec = malloc(len ? len : 1);
		if (!rec)
			break;
		memcpy(rec, data + off, len);
		event__validate(rec, len);
		books__apply_bytes(b, rec, len);
		free(rec);
		off += len;
	}
	if (data[0] & 2) {
		struct snapshot_opts so = { .stack_mode = "fp" };
		struct snapshot *snap;

		books__compact_stacks(b);
		sym = symbolizer__new(m);
		snap = sym ? snapshot__build(b, sym, &so) : NULL;
		snapshot__free(snap);
	}
cleanup:
	symbolizer__free(sym);
	books__free(b);
	unwinder__free(u);
	stacks__free(s);
	modules__free(m);
	return 0;
}
