// SPDX-License-Identifier: BSD-2-Clause
/*
 * sym_bench.c - what symbolizing a frame costs in a large library: the first
 * lookup (reading and sorting its symbol table, opening its DWARF), a new
 * address after that (binary search, demangling, line table) and a repeated
 * one (the cache).
 *
 *   .output/bench/sym_bench LIBRARY [N]   (N addresses, default 10000)
 *
 * Prints "first MS", "new US" and "repeat US" (medians), and the symbols found.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include "stacks/modules.h"
#include "stacks/native/symbolize.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[2]) : 10000, fd, found = 0;
	struct modules *m = modules__new();
	struct symbolizer *s = m ? symbolizer__new(m) : NULL;
	double t0, first, *fresh, *again;
	struct sym_result r;
	struct stat st;
	uint64_t *offs;
	uint32_t id;

	if (argc < 2 || n < 1 || !s) {
		fprintf(stderr, "usage: sym_bench LIBRARY [N]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	id = modules__add(m, st.st_dev, st.st_ino, argv[1], "");
	if (!id || modules__set_fd(m, id, fd))
		return 1;
	offs = malloc(n * sizeof(*offs));
	fresh = malloc(n * sizeof(*fresh));
	again = malloc(n * sizeof(*again));
	if (!offs || !fresh || !again)
		return 1;
	srand(1);
	/* file offsets spread over the file's first 90 % (its code comes first) */
	for (int i = 0; i < n; i++)
		offs[i] = (uint64_t)((double)rand() / RAND_MAX * st.st_size * 0.9);
	t0 = now_us();
	symbolizer__lookup(s, id, offs[0], &r);
	first = now_us() - t0;
	for (int i = 1; i < n; i++) {
		t0 = now_us();
		symbolizer__lookup(s, id, offs[i], &r);
		fresh[i - 1] = now_us() - t0;
		found += r.function != NULL;
	}
	for (int i = 1; i < n; i++) {
		t0 = now_us();
		symbolizer__lookup(s, id, offs[i], &r);
		again[i - 1] = now_us() - t0;
	}
	printf("first %.1f ms\nnew %.2f us\nrepeat %.3f us\nnamed %d of %d\n", first / 1e3,
	       median(fresh, n - 1), median(again, n - 1), found, n - 1);
	symbolizer__free(s);
	modules__free(m);
	return 0;
}
