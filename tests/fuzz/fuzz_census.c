// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_census.c - libFuzzer target: the census's heap walk over a hostile
 * heap. Each input starts from one synthetic CPython 3.11 heap
 * (census_heap.h) and patches it:
 *   byte 0:     the minor version the walk is told (11 + byte % 3)
 *   then:       patches, each a little-endian u16 offset into the heap, a length
 *               byte, and that many bytes written there
 * The walk must stay within its caps (objects, bytes read) whatever the
 * patches do, and keep no tensor figure when the layout was not verified;
 * the unpatched heap must give its two tensors, their holders and their
 * storage's bytes exactly.
 */
#include "fuzz.h"

#include "census_heap.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	return 0;
}

static void check_clean(const struct census *c)
{
	const struct census_tensor *t = c->tensors;

	if (c->nr_tensors != 2 || !c->layout_ok || c->nr_storages != 1 || c->bytes != 64 ||
	    c->nr_groups != 1 || strcmp(c->groups[0].path, "__main__.h") ||
	    c->groups[0].tensors != 2 || c->groups[0].length != 2 || t[0].nr_holders != 1 ||
	    strcmp(t[0].holders[0], "__main__.h[0]") || strcmp(t[1].holders[0], "__main__.h[1]") ||
	    t[1].ndim != 2 || t[1].sizes[1] != 4 || t[1].storage_offset != 4 ||
	    t[0].data != BASE + DATA || c->torn || c->truncated_by) {
		fprintf(stderr, "fuzz_census: the unpatched heap was misread\n");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct census_mem m = { .read = census_heap_read };
	struct census_caps caps = { .max_objects = 5000, .max_read_bytes = 1 << 20,
				    .max_ns = 2000000000ULL };
	struct census_py py = census_heap_py;
	struct census c;
	size_t i = 1;
	int err;

	census_heap_build();
	if (size)
		py.minor = 11 + data[0] % 3;
	while (i + 3 <= size) {
		uint16_t off;
		uint8_t len;

		memcpy(&off, data + i, 2);
		len = data[i + 2];
		i += 3;
		if (len > size - i)
			len = size - i;
		off %= HEAP;
		if (len > HEAP - off)
			len = HEAP - off;
		memcpy(heap + off, data + i, len);
		i += len;
	}
	err = census__walk(&m, &py, &caps, &c);
	if (c.bytes_read > caps.max_read_bytes || c.objects_visited > caps.max_objects) {
		fprintf(stderr, "fuzz_census: the walk went past its caps\n");
		abort();
	}
	for (size_t k = 0; !c.layout_ok && k < c.nr_tensors; k++) {
		if (c.tensors[k].storage || c.tensors[k].nbytes || c.tensors[k].ndim >= 0) {
			fprintf(stderr, "fuzz_census: a figure kept from an unverified layout\n");
			abort();
		}
	}
	if (size <= 1 && py.minor == 11 && (err || (check_clean(&c), 0)))
		abort();
	census__free(&c);
	return 0;
}
