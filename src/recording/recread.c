// SPDX-License-Identifier: BSD-2-Clause
/*
 * recread.c - the recording reader. A chunk whose header is damaged is
 * skipped by looking for the next sound chunk header; a chunk whose data is
 * damaged is skipped by its length; a malformed record ends its chunk. Files
 * are read with pread through a window, never mapped, so a file cut or
 * rewritten while it is read cannot fault.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "recread.h"

#define WINDOW (GLR_CHUNK_HDR + GLR_CHUNK_READ_MAX + 4096 + (64 << 10))
#define STORED_MAX (GLR_CHUNK_READ_MAX + 4096)

struct rec_reader {
	int fd; /* -1: reading memory */
	const uint8_t *mem;
	uint64_t size;	/* bytes known to exist */
	uint64_t start; /* first chunk */
	uint8_t *win;	/* file window: [win_off, win_off + win_len) */
	uint64_t win_off;
	size_t win_len;
	uint8_t *raw; /* the chunk being decoded */
	struct rr_frame frames[GLR_FRAMES_MAX];
	char str[2][GLR_STR_MAX + 1];
	struct rr_item item;
	struct rr_counts counts;
	uint32_t version;
	uint32_t abi; /* GL_ABI_VERSION of the recording's call and process records */
	int io_err;
};

struct dec {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};

/* len bytes at off, or NULL if the file is shorter. */
static const uint8_t *at(struct rec_reader *r, uint64_t off, size_t len)
{
	size_t got = 0;

	if (r->mem)
		return off <= r->size && len <= r->size - off ? r->mem + off : NULL;
	if (off >= r->win_off && off - r->win_off <= r->win_len &&
	    len <= r->win_len - (off - r->win_off))
		return r->win + (off - r->win_off);
	if (len > WINDOW)
		return NULL;
	while (got < WINDOW) {
		ssize_t n = pread(r->fd, r->win + got, WINDOW - got, off + got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r->io_err = -errno;
		if (n <= 0)
			break;
		got += n;
	}
	r->win_off = off;
	r->win_len = got;
	if (off + got > r->size)
		r->size = off + got;
	return got >= len ? r->win : NULL;
}

static int check_header(struct rec_reader *r, char *why, size_t len)
{
	const uint8_t *h = at(r, 0, GLR_HDR_SIZE);
	uint32_t flags, hdr_size;

	if (!h && r->io_err) {
		snprintf(why, len, "cannot read it: %s", strerror(-r->io_err));
		return r->io_err;
	}
	if (!h || memcmp(h, GLR_MAGIC, 8)) {
		snprintf(why, len, "not a gpuleak recording");
		return -EBADMSG;
	}
	r->version = GLR_VERSION;
	r->abi = GL_ABI_VERSION;
	r->start = GLR_HDR_SIZE;
	if (glr_get(h + 28, 4) != crc32(0, h, 28)) {
		r->counts.header_damaged = true;
		return 0;
	}
	r->version = glr_get(h + 8, 2);
	hdr_size = glr_get(h + 10, 2);
	flags = glr_get(h + 12, 4);
	if (r->version != GLR_VERSION) {
		snprintf(why, len,
			 "a gpuleak recording of format version %u; this gpuleak reads "
			 "version %u",
			 r->version, GLR_VERSION);
		return -EPROTONOSUPPORT;
	}
	r->abi = glr_get(h + 16, 4);
	if (r->abi != GL_ABI_VERSION && r->abi != GLR_ABI_CALLS_V2) {
		snprintf(why, len, "recorded by a gpuleak of BPF ABI %u; this one has ABI %u",
			 (unsigned int)glr_get(h + 16, 4), GL_ABI_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (!(flags & GLR_F_LITTLE_ENDIAN)) {
		snprintf(why, len, "a big-endian gpuleak recording: this gpuleak cannot read it");
		return -EPROTONOSUPPORT;
	}
	if (hdr_size < GLR_HDR_SIZE) {
		snprintf(why, len, "not a gpuleak recording (header of %u bytes)", hdr_size);
		return -EBADMSG;
	}
	r->start = hdr_size;
	return 0;
}

static int finish_open(struct rec_reader *r, struct rec_reader **out, char *why, size_t len)
{
	int err;

	r->raw = malloc(GLR_CHUNK_READ_MAX);
	if (!r->raw || (r->fd >= 0 && !(r->win = malloc(WINDOW)))) {
		snprintf(why, len, "out of memory");
		err = -ENOMEM;
	} else {
		err = check_header(r, why, len);
	}
	if (err) {
		recread__free(r);
		return err;
	}
	*out = r;
	return 0;
}

int recread__open(const char *path, struct rec_reader **out, char *why, size_t len)
{
	struct rec_reader *r = calloc(1, sizeof(*r));
	struct stat st;
	int err;

	if (!r) {
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (r->fd < 0 || fstat(r->fd, &st)) {
		err = -errno;
		snprintf(why, len, "cannot open it: %s", strerror(errno));
		recread__free(r);
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, len, "not a regular file");
		recread__free(r);
		return -EBADMSG;
	}
	r->size = st.st_size;
	return finish_open(r, out, why, len);
}

int recread__mem(const void *data, size_t size, struct rec_reader **out, char *why, size_t len)
{
	struct rec_reader *r = calloc(1, sizeof(*r));

	if (!r) {
		snprintf(why, len, "out of memory");
		return -ENOMEM;
	}
	r->fd = -1;
	r->mem = data ? data : (const uint8_t *)"";
	r->size = data ? size : 0;
	return finish_open(r, out, why, len);
}

void recread__free(struct rec_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	free(r->win);
	free(r->raw);
	free(r);
}

const struct rr_counts *recread__counts(const struct rec_reader *r)
{
	return &r->counts;
}

uint32_t recread__version(const struct rec_reader *r)
{
	return r->version;
}

static uint64_t dec_u(struct dec *d, int bytes)
{
	uint64_t v;

	if (d->len - d->pos < (size_t)bytes) {
		d->bad = true;
		d->pos = d->len;
		return 0;
	}
	v = glr_get(d->p + d->pos, bytes);
	d->pos += bytes;
	return v;
}

static void dec_bytes(struct dec *d, void *out, size_t n)
{
	if (d->len - d->pos < n) {
		d->bad = true;
		d->pos = d->len;
		memset(out, 0, n);
		return;
	}
	memcpy(out, d->p + d->pos, n);
	d->pos += n;
}

static void dec_skip(struct dec *d, size_t n)
{
	if (d->len - d->pos < n) {
		d->bad = true;
		n = d->len - d->pos;
	}
	d->pos += n;
}

/* A string into buf (GLR_STR_MAX + 1 bytes): no NUL inside; control characters become '?'. */
static const char *dec_str(struct dec *d, char *buf)
{
	size_t n = dec_u(d, 2);

	if (n > GLR_STR_MAX || d->len - d->pos < n) {
		d->bad = true;
		buf[0] = '\0';
		return buf;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = d->p[d->pos + i];

		if (!c)
			d->bad = true;
		buf[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	buf[n] = '\0';
	d->pos += n;
	return buf;
}

static bool is_build_id(const char *s)
{
	size_t n = strlen(s);

	if (n > GLR_BUILD_ID_MAX || n % 2)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static bool dec_stack(struct rec_reader *r, struct dec *d, struct rr_item *it)
{
	it->u.stack.id = dec_u(d, 4);
	it->u.stack.n = dec_u(d, 2);
	dec_u(d, 2);
	if (it->u.stack.n > GLR_FRAMES_MAX)
		return false;
	for (uint32_t i = 0; i < it->u.stack.n && !d->bad; i++) {
		struct rr_frame *f = &r->frames[i];

		f->kind = dec_u(d, 1);
		dec_u(d, 3);
		f->mod = dec_u(d, 4);
		f->addr = dec_u(d, 8);
		if (f->kind > GLR_FRAME_API && f->kind != GLR_FRAME_NOTE)
			return false;
	}
	it->u.stack.frames = r->frames;
	return true;
}

/*
 * A call record of ABI 2 (168 bytes) as this ABI's struct gl_call. ABI 2 sent
 * the call's duration where this one sends the contexts' teardowns counted at
 * its entry, and a teardown's time in bytes where this one sends its number:
 * the entry's time (its return's less its duration) and the teardown's time
 * order the two as the counts do (ctx_gone() in books.c only compares them).
 * The per-class figures of a teardown it sent after them were never read.
 */
static void dec_call_v2(struct dec *d, struct gl_call *c)
{
	uint64_t dur;

	memset(c, 0, sizeof(*c));
	c->hdr.type = dec_u(d, 4);
	dec_u(d, 4);
	c->hdr.size = sizeof(*c);
	c->hdr.pid = dec_u(d, 4);
	c->hdr.tid = dec_u(d, 4);
	c->hdr.start_time = dec_u(d, 8);
	c->hdr.ts = dec_u(d, 8);
	c->seq = dec_u(d, 8);
	c->key = dec_u(d, 8);
	c->bytes = dec_u(d, 8);
	c->ctx = dec_u(d, 8);
	dur = dec_u(d, 8);
	dec_skip(d, GL_CLASS_SLOTS * 8 + 4); /* a teardown's bytes per class, and allocations */
	c->rc = (int32_t)dec_u(d, 4);
	c->api = dec_u(d, 2);
	c->op = dec_u(d, 1);
	c->cls = dec_u(d, 1);
	c->dev = (int16_t)dec_u(d, 2);
	c->flags = dec_u(d, 2);
	c->kind = dec_u(d, 1);
	dec_skip(d, 7);
	c->id = dec_u(d, 8);
	if (c->op == GL_OP_CTX_DROP) {
		c->teardowns = c->bytes ? c->bytes : c->hdr.ts;
		c->bytes = 0;
	} else {
		c->teardowns = c->hdr.ts > dur ? c->hdr.ts - dur : 0;
	}
}

/* Decodes one record: 1 done, 0 unknown type, -1 malformed. Fields may be appended later. */
static int decode(struct rec_reader *r, uint16_t type, const uint8_t *p, size_t len,
		  struct rr_item *it)
{
	struct dec d = { p, len, 0, false };
	bool ok = true;

	it->type = type;
	switch (type) {
	case GLR_SESSION:
		it->u.session.start_ns = dec_u(&d, 8);
		it->u.session.wall_ns = dec_u(&d, 8);
		it->u.session.series_width_ns = dec_u(&d, 8);
		it->u.session.stack_mode = dec_u(&d, 1);
		it->u.session.flags = dec_u(&d, 1);
		dec_u(&d, 2);
		it->u.session.host = dec_str(&d, r->str[0]);
		it->u.session.version = dec_str(&d, r->str[1]);
		break;
	case GLR_MODULE:
		it->u.module.id = dec_u(&d, 4);
		it->u.module.dev = dec_u(&d, 8);
		it->u.module.ino = dec_u(&d, 8);
		it->u.module.path = dec_str(&d, r->str[0]);
		it->u.module.build_id = dec_str(&d, r->str[1]);
		ok = is_build_id(it->u.module.build_id);
		break;
	case GLR_PYCODE:
		it->u.pycode.id = dec_u(&d, 4);
		it->u.pycode.function = dec_str(&d, r->str[0]);
		it->u.pycode.file = dec_str(&d, r->str[1]);
		break;
	case GLR_STACK: ok = dec_stack(r, &d, it); break;
	case GLR_PROCINFO:
		it->u.procinfo.pid = dec_u(&d, 4);
		it->u.procinfo.ns_pid = dec_u(&d, 4);
		it->u.procinfo.start_time = dec_u(&d, 8);
		it->u.procinfo.first_ns = dec_u(&d, 8);
		dec_bytes(&d, it->u.procinfo.comm, sizeof(it->u.procinfo.comm));
		it->u.procinfo.comm[sizeof(it->u.procinfo.comm) - 1] = '\0';
		break;
	case GLR_CALL:
		it->u.call.stack = dec_u(&d, 4);
		dec_u(&d, 4);
		if (r->abi == GLR_ABI_CALLS_V2)
			dec_call_v2(&d, &it->u.call.call);
		else
			dec_bytes(&d, &it->u.call.call, sizeof(it->u.call.call));
		ok = d.pos == len;
		break;
	case GLR_PROC:
		dec_bytes(&d, &it->u.proc, sizeof(it->u.proc));
		ok = d.pos == len;
		break;
	case GLR_STATS: {
		uint32_t n;

		memset(it->u.stats.stats, 0, sizeof(it->u.stats.stats));
		it->u.stats.ts = dec_u(&d, 8);
		n = dec_u(&d, 4);
		dec_u(&d, 4);
		if (n > GLR_STATS_MAX)
			return -1;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t v = dec_u(&d, 8);

			if (i < GL_NR_STATS)
				it->u.stats.stats[i] = v;
		}
		break;
	}
	case GLR_BPF_PROC:
		it->u.bpf_proc.pid = dec_u(&d, 4);
		dec_u(&d, 4);
		dec_bytes(&d, &it->u.bpf_proc.st, sizeof(it->u.bpf_proc.st));
		ok = d.pos == len;
		break;
	case GLR_TRUNCATED:
		it->u.truncated.ts = dec_u(&d, 8);
		it->u.truncated.max_size = dec_u(&d, 8);
		break;
	case GLR_END:
		it->u.end.end_ns = dec_u(&d, 8);
		it->u.end.calls = dec_u(&d, 8);
		it->u.end.malformed = dec_u(&d, 8);
		it->u.end.nr_probes = dec_u(&d, 4);
		dec_u(&d, 4);
		break;
	case GLR_TENSORS:
		it->u.tensors.mode = dec_u(&d, 1);
		dec_u(&d, 7);
		it->u.tensors.sample_bytes = dec_u(&d, 8);
		ok = it->u.tensors.mode < GLR_TENSORS_NR;
		break;
	case GLR_WINDOW:
		it->u.window.ts = dec_u(&d, 8);
		it->u.window.event = dec_u(&d, 1);
		it->u.window.why = dec_u(&d, 1);
		it->u.window.flags = dec_u(&d, 1) & GLR_WINDOW_FORGOT;
		dec_u(&d, 5);
		/* a recording before the PID: a window of every process (0) */
		it->u.window.pid = d.len - d.pos >= 8 ? (uint32_t)dec_u(&d, 4) : 0;
		ok = it->u.window.event >= GLR_WINDOW_OPEN && it->u.window.event < GLR_WINDOW_NR &&
		     it->u.window.why < GLR_WHY_NR;
		break;
	default: return 0;
	}
	return ok && !d.bad ? 1 : -1;
}

static bool chunk_header_ok(const uint8_t *h)
{
	uint32_t flags = glr_get(h + 4, 2), raw = glr_get(h + 8, 4), stored = glr_get(h + 12, 4);

	return glr_get(h, 4) == GLR_CHUNK_MAGIC && glr_get(h + 20, 4) == crc32(0, h, 20) &&
	       !(flags & ~GLR_CHUNK_DEFLATE) && raw <= GLR_CHUNK_READ_MAX && stored <= STORED_MAX &&
	       ((flags & GLR_CHUNK_DEFLATE) || stored == raw);
}

/* The offset of the next sound chunk header after off, or UINT64_MAX. */
static uint64_t resync(struct rec_reader *r, uint64_t off)
{
	const uint8_t *h;

	for (off++; (h = at(r, off, GLR_CHUNK_HDR)); off++)
		if (h[0] == 'G' && chunk_header_ok(h))
			return off;
	return UINT64_MAX;
}

static int records(struct rec_reader *r, size_t n, uint64_t off,
		   int (*fn)(void *ctx, const struct rr_item *it), void *ctx)
{
	struct rr_item *it = &r->item;
	size_t pos = 0;

	while (pos < n) {
		uint32_t len;
		int rc;

		if (n - pos < GLR_REC_HDR) {
			r->counts.bad_records++;
			break;
		}
		len = glr_get(r->raw + pos + 4, 4);
		if (len > n - pos - GLR_REC_HDR) {
			r->counts.bad_records++;
			break;
		}
		it->chunk_off = off;
		rc = decode(r, glr_get(r->raw + pos, 2), r->raw + pos + GLR_REC_HDR, len, it);
		pos += GLR_REC_HDR + len;
		if (rc < 0) {
			r->counts.bad_records++;
		} else if (rc == 0) {
			r->counts.unknown_records++;
		} else {
			r->counts.records++;
			rc = fn(ctx, it);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* The chunk's records into r->raw; false if its data is damaged. */
static bool unpack(struct rec_reader *r, const uint8_t *h, const uint8_t *data)
{
	uLongf raw = glr_get(h + 8, 4), stored = glr_get(h + 12, 4);

	if (glr_get(h + 16, 4) != crc32(0, data, stored))
		return false;
	if (!(glr_get(h + 4, 2) & GLR_CHUNK_DEFLATE)) {
		memcpy(r->raw, data, raw);
		return true;
	}
	return uncompress(r->raw, &raw, data, stored) == Z_OK && raw == glr_get(h + 8, 4);
}

int recread__each(struct rec_reader *r, int (*fn)(void *ctx, const struct rr_item *it), void *ctx)
{
	uint64_t off = r->start, next;
	const uint8_t *h, *data;
	uint8_t hdr[GLR_CHUNK_HDR];
	int rc;

	while ((h = at(r, off, GLR_CHUNK_HDR))) {
		if (!chunk_header_ok(h)) {
			r->counts.bad_chunks++;
			next = resync(r, off);
			if (next == UINT64_MAX) {
				/* garbage to the end: the rest is skipped below, not "cut" */
				r->counts.skipped_bytes += r->size - off;
				off = r->size;
				break;
			}
			r->counts.skipped_bytes += next - off;
			off = next;
			continue;
		}
		memcpy(hdr, h, sizeof(hdr));
		data = at(r, off + GLR_CHUNK_HDR, glr_get(hdr + 12, 4));
		if (!data)
			break;
		next = off + GLR_CHUNK_HDR + glr_get(hdr + 12, 4);
		if (!unpack(r, hdr, data)) {
			r->counts.bad_chunks++;
			r->counts.skipped_bytes += next - off;
			off = next;
			continue;
		}
		r->counts.chunks++;
		rc = records(r, glr_get(hdr + 8, 4), off, fn, ctx);
		off = next;
		if (rc) {
			r->counts.file_bytes = off;
			return rc;
		}
	}
	if (r->size > off) {
		/* the rest holds no whole chunk: the end of the file was cut */
		r->counts.cut = true;
		r->counts.skipped_bytes += r->size - off;
	}
	r->counts.file_bytes = r->size > off ? r->size : off;
	return r->io_err;
}
