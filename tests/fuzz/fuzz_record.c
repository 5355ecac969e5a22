// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_record.c - libFuzzer target: the recording reader, the replay into the
 * books and every report (text, JSON, folded, SVG, pprof, top), on any input. The first byte picks how the rest is
 * used, so that mutations get past the checksums:
 *   0: a recording file as it is;
 *   1: a stream of records (type, length, payload), wrapped here into a
 *      header and stored chunks with right checksums;
 *   2: a recording file whose header and chunk checksums are set right here
 *      before reading (the chunk layout and compressed data are fuzzed).
 * Module files are never opened (the paths are the fuzzer's).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "recording/replay.h"
#include "report/report.h"
#include "recording/record.h"
#include "recording/recread.h"
#include "util/log.h"
#include "util/procfs.h"

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	procfs_root = "/nonexistent-gpuleak-fuzz";
	sink = fopen("/dev/null", "w");
	return 0;
}

/* Mode 1: records split into stored chunks of at most 64 KiB. */
static uint8_t *wrap(const uint8_t *data, size_t size, size_t *len)
{
	size_t chunks = size / 65536 + 1;
	uint8_t *out = malloc(GLR_HDR_SIZE + chunks * GLR_CHUNK_HDR + size), *p;
	size_t off = 0;

	if (!out)
		return NULL;
	record__file_header(out);
	p = out + GLR_HDR_SIZE;
	do {
		size_t n = size - off < 65536 ? size - off : 65536;

		memcpy(p + GLR_CHUNK_HDR, data + off, n);
		record__chunk_header(p, 0, n, n, p + GLR_CHUNK_HDR);
		p += GLR_CHUNK_HDR + n;
		off += n;
	} while (off < size);
	*len = p - out;
	return out;
}

/* Mode 2: the checksums of the header and of every chunk made right. */
static void fix_checksums(uint8_t *d, size_t size)
{
	size_t off = GLR_HDR_SIZE;

	if (size < GLR_HDR_SIZE)
		return;
	glr_put(d + 28, crc32(0, d, 28), 4);
	while (off + GLR_CHUNK_HDR <= size) {
		uint64_t stored;

		if (glr_get(d + off, 4) != GLR_CHUNK_MAGIC) {
			off++;
			continue;
		}
		stored = glr_get(d + off + 12, 4);
		if (stored <= size - off - GLR_CHUNK_HDR)
			glr_put(d + off + 16, crc32(0, d + off + GLR_CHUNK_HDR, stored), 4);
		glr_put(d + off + 20, crc32(0, d + off, 20), 4);
		if (stored > size - off - GLR_CHUNK_HDR)
			break;
		off += GLR_CHUNK_HDR + stored;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct replay_opts ro = { .no_files = true };
	struct text_opts to = { .max_stacks = 0, .max_frames = 0 };
	struct rec_reader *rr = NULL;
	struct replay *rp = NULL;
	struct snapshot *snap;
	uint8_t *buf;
	size_t len = size ? size - 1 : 0;
	char why[256];

	if (!size)
		return 0;
	if (data[0] % 3 == 1) {
		buf = wrap(data + 1, len, &len);
	} else {
		buf = malloc(len + 1);
		if (buf)
			memcpy(buf, data + 1, len);
		if (buf && data[0] % 3 == 2)
			fix_checksums(buf, len);
	}
	if (!buf || recread__mem(buf, len, &rr, why, sizeof(why)))
		goto cleanup;
	rp = replay__new(&ro);
	if (!rp)
		goto cleanup;
	replay__read(rp, rr, "fuzz");
	snap = replay__snapshot(rp, data[0] & 0x80 ? 3 : 0);
	if (snap) {
		report__text(sink, snap, &to);
		report__json(sink, snap);
		report__folded(sink, snap, &(struct folded_opts){ .leak_only = data[0] & 0x40 });
		report__svg(sink, snap, &(struct svg_opts){ .leak_only = data[0] & 0x40 });
		report__pprof(sink, snap, &(struct pprof_opts){ .default_sample = (data[0] >> 4) % 4,
								.time_ns = 1 });
		report__top(sink, snap, &(struct top_opts){ .sort_bytes = data[0] & 0x40 });
		snapshot__free(snap);
	}
cleanup:
	replay__free(rp);
	recread__free(rr);
	free(buf);
	return 0;
}
