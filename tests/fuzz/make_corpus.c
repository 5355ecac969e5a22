// SPDX-License-Identifier: BSD-2-Clause
/*
 * make_corpus.c - writes the fuzzer's seed corpus into a directory: small
 * recordings made by the real writer (tests/unit/record_fixture.h) and
 * truncated, cut and corrupted variants, each prefixed with the fuzz target's
 * mode byte (fuzz_record.c). Run by `make fuzz-corpus`; the output is kept in
 * the repository.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>
#include "../unit/record_fixture.h"

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = malloc(1 << 20);

	if (!f || !buf) {
		perror(path);
		exit(1);
	}
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

static void seed(const char *dir, const char *name, int mode, const void *data, size_t len)
{
	char path[4096];
	unsigned char m = mode;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(&m, 1, 1, f) != 1 || fwrite(data, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* The records of every chunk, inflated and put end to end (mode 1's input). */
static unsigned char *records_of(const unsigned char *d, size_t len, size_t *out_len)
{
	unsigned char *out = malloc(4 << 20);
	size_t off = GLR_HDR_SIZE, n = 0;

	while (out && off + GLR_CHUNK_HDR <= len) {
		uLongf raw = glr_get(d + off + 8, 4), stored = glr_get(d + off + 12, 4);

		if (glr_get(d + off + 4, 2) & GLR_CHUNK_DEFLATE)
			uncompress(out + n, &raw, d + off + GLR_CHUNK_HDR, stored);
		else
			memcpy(out + n, d + off + GLR_CHUNK_HDR, raw);
		n += raw;
		off += GLR_CHUNK_HDR + stored;
	}
	*out_len = n;
	return out;
}

static void variant(const char *dir, const char *tmp, const char *name, const struct rf_opts *o)
{
	unsigned char *d;
	size_t len;

	if (rf_write(tmp, o)) {
		fprintf(stderr, "writing %s failed\n", name);
		exit(1);
	}
	d = slurp(tmp, &len);
	seed(dir, name, 0, d, len);
	free(d);
}

int main(int argc, char **argv)
{
	char tmp[] = "/tmp/gpuleak-corpusXXXXXX";
	struct rf_opts full = { .churn = 3 }, trunc = { .max_size = 6000, .churn = 300 };
	struct rf_opts noend = { .no_end = true }, windows = { .windows = true };
	unsigned char *d, *c, *recs;
	size_t len, rlen;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: make_corpus DIR\n");
		return 2;
	}
	fd = mkstemp(tmp);
	if (fd < 0)
		return 1;
	close(fd);
	variant(argv[1], tmp, "truncated", &trunc);
	variant(argv[1], tmp, "no-end", &noend);
	variant(argv[1], tmp, "tensor-windows", &windows);
	if (rf_write(tmp, &full))
		return 1;
	d = slurp(tmp, &len);
	unlink(tmp);
	seed(argv[1], "valid", 0, d, len);
	seed(argv[1], "valid-checksums-fixed", 2, d, len);
	recs = records_of(d, len, &rlen);
	seed(argv[1], "valid-records", 1, recs, rlen);
	seed(argv[1], "cut-in-header", 0, d, 20);
	seed(argv[1], "cut-in-first-chunk", 0, d, GLR_HDR_SIZE + 30);
	seed(argv[1], "cut-in-last-chunk", 0, d, len - 40);
	c = malloc(len);
	memcpy(c, d, len);
	c[len / 2] ^= 0x5a; /* inside the data of the big chunk */
	seed(argv[1], "flipped-data", 0, c, len);
	seed(argv[1], "flipped-data-checksums-fixed", 2, c, len);
	memcpy(c, d, len);
	c[GLR_HDR_SIZE + 9] ^= 0x01; /* the first chunk's raw length */
	seed(argv[1], "flipped-chunk-header", 0, c, len);
	memcpy(c, d, len);
	c[9] = 7; /* format version 7 */
	seed(argv[1], "other-version-checksums-fixed", 2, c, len);
	seed(argv[1], "not-a-recording", 0, "hello, world\n", 13);
	free(c);
	free(recs);
	free(d);
	return 0;
}
