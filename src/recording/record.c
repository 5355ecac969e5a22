// SPDX-License-Identifier: BSD-2-Clause
/*
 * record.c - writing a recording: the books' input (call and process
 * records, with stacks already resolved) and the tables needed to rebuild
 * them and name their frames anywhere, later.
 *
 * Format, version 1. Integers are little-endian, without padding.
 *
 *   header (32 bytes): "GPULEAKR", u16 version (1), u16 header size (32),
 *     u32 flags (1: little-endian), u32 GL_ABI_VERSION, u32 largest chunk
 *     written, u32 0, u32 crc32 of the 28 bytes before it. Call and process
 *     records hold struct gl_call and gl_proc of that ABI (a change to those
 *     structs bumps GL_ABI_VERSION). A reader takes its own ABI and the ABIs
 *     whose records it converts (recread.c: ABI 2's calls), and refuses others.
 *   chunks, each: u32 "GLCK", u16 flags (1: deflated with zlib), u16 0,
 *     u32 raw length (at most 1 MiB), u32 stored length, u32 crc32 of the
 *     stored bytes, u32 crc32 of the 20 header bytes before it; then the
 *     stored bytes. A chunk holds whole records:
 *   record: u16 type, u16 0, u32 length, then that many bytes:
 *     SESSION   u64 start_ns, u64 wall-clock ns, u64 series width ns,
 *               u8 stack mode, u8 flags (GLR_SESSION_*), 2 x u8 0, str host,
 *               str gpuleak version
 *     MODULE    u32 id, u64 dev, u64 inode, str path, str build-id (hex)
 *     PYCODE    u32 id, str function, str file
 *     STACK     u32 id, u16 n, u16 0, n x (u8 kind, 3 x u8 0, u32 mod, u64 addr),
 *               innermost first; kind as enum glr_frame_kind
 *     PROCINFO  u32 pid, u32 pid in its namespace, u64 start time, u64 first ns,
 *               char comm[16]
 *     CALL      u32 stack id (0: its entry parked none), u32 0, struct gl_call
 *     PROC      struct gl_proc (exit, exec, fork)
 *     STATS     u64 ts, u32 n, u32 0, n x u64 (enum gl_stat order)
 *     BPF_PROC  u32 pid, u32 0, struct gl_proc_stats (processes running at the end)
 *     TRUNCATED u64 ts, u64 --max-size
 *     END       u64 end ns, u64 call records, u64 records the books rejected,
 *               u32 probes, u32 0
 *     TENSORS   u8 mode (0 off, 1 windowed, 2 sampled, 3 full), 7 x u8 0,
 *               u64 --tensor-sample bytes (0: a stack for every block)
 *     WINDOW    u64 ts, u8 event (1 open, 2 tail, 3 close, 4 stop), u8 why it
 *               opened (0 start, 1 duty, 2 growth, 3 capacity, 4 request; 0
 *               for other events), u8 flags (1: the books forgot every tensor
 *               block of the last window as it opened), 5 x u8 0, u32 PID
 *               whose window it is, u32 0 (recordings before the PID: a
 *               window of every process)
 *   str: u16 length (at most 4095), the bytes, no terminator.
 *
 * Definitions come before their first use. Readers skip record types they do
 * not know (later versions add types; a new layout changes the version), and
 * the bytes after the fields they know (later versions may append fields).
 * TENSORS and WINDOW came after the first recordings of version 1: a
 * recording without them is read as one whose tensor level is not known.
 * Chunks are written at least every second and at the end, so a crash loses
 * at most the last second; a damaged chunk costs only itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "books/procs.h"
#include "record.h"
#include "stacks/modules.h"
#include "stacks/stacks.h"
#include "util/htab.h"
#include "util/log.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the recording format is little-endian: write its fields byte by byte here first"
#endif

#define FLUSH_NS 900000000ULL
/* Room kept under --max-size for the trailer: truncation mark, counters, end. */
#define TRAILER_RESERVE 1024
#define SCRATCH (16 + GLR_FRAMES_MAX * 16 + 2 * (GLR_STR_MAX + 2) + 64)

struct recorder {
	int fd;
	struct recorder_opts o;
	struct modules *mods;
	struct stacks *stacks;
	uint8_t *buf; /* records not yet in a chunk */
	size_t len;
	uint8_t *zbuf;
	uLong zcap;
	uint8_t scratch[SCRATCH];
	uint64_t size; /* bytes in the file */
	uint64_t last_flush_ns;
	uint32_t stacks_done; /* stack ids 1..stacks_done are written */
	uint8_t *mods_done;   /* per module id: written */
	uint32_t nr_mods_done;
	struct htab *codes; /* Python code ids written */
	uint64_t stats[GL_NR_STATS];
	uint64_t calls;
	uint64_t last_ts; /* of the newest record applied */
	bool truncated, failed;
	char *path;   /* where the recording goes */
	char *tmp;    /* replacing a recording: written here, renamed to path at the end */
	int lock_fd;  /* replacing: the old file, locked; -1 */
	bool created; /* path was created by this recorder */
};

struct enc {
	uint8_t *p;
	size_t len, cap;
};

static void enc_u(struct enc *e, uint64_t v, int bytes)
{
	if (e->len + bytes <= e->cap)
		glr_put(e->p + e->len, v, bytes);
	e->len += bytes;
}

static void enc_bytes(struct enc *e, const void *data, size_t n)
{
	if (e->len + n <= e->cap)
		memcpy(e->p + e->len, data, n);
	e->len += n;
}

static void enc_str(struct enc *e, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n > GLR_STR_MAX)
		n = GLR_STR_MAX;
	enc_u(e, n, 2);
	enc_bytes(e, s, n);
}

static int write_all(int fd, const struct iovec *iov, int n)
{
	struct iovec v[2] = {};
	ssize_t done;

	memcpy(v, iov, n * sizeof(*v));
	while (n) {
		done = writev(fd, v, n);
		if (done < 0 && errno == EINTR)
			continue;
		if (done < 0)
			return -errno;
		while (n && (size_t)done >= v[0].iov_len) {
			done -= v[0].iov_len;
			v[0] = v[1];
			n--;
		}
		if (n) {
			v[0].iov_base = (char *)v[0].iov_base + done;
			v[0].iov_len -= done;
		}
	}
	return 0;
}

static void fail(struct recorder *r, int err)
{
	if (r->failed)
		return;
	r->failed = true;
	log_error("writing the recording failed: %s", strerror(-err));
}

void record__file_header(uint8_t *h)
{
	memset(h, 0, GLR_HDR_SIZE);
	memcpy(h, GLR_MAGIC, 8);
	glr_put(h + 8, GLR_VERSION, 2);
	glr_put(h + 10, GLR_HDR_SIZE, 2);
	glr_put(h + 12, GLR_F_LITTLE_ENDIAN, 4);
	glr_put(h + 16, GL_ABI_VERSION, 4);
	glr_put(h + 20, GLR_CHUNK_RAW_MAX, 4);
	glr_put(h + 28, crc32(0, h, 28), 4);
}

void record__chunk_header(uint8_t *h, uint32_t flags, uint32_t raw, uint32_t stored,
			  const uint8_t *data)
{
	glr_put(h, GLR_CHUNK_MAGIC, 4);
	glr_put(h + 4, flags, 2);
	glr_put(h + 6, 0, 2);
	glr_put(h + 8, raw, 4);
	glr_put(h + 12, stored, 4);
	glr_put(h + 16, crc32(0, data, stored), 4);
	glr_put(h + 20, crc32(0, h, 20), 4);
}

/* Writes the buffered records as one chunk. Returns 0 or -errno. */
static int flush(struct recorder *r)
{
	uint8_t hdr[GLR_CHUNK_HDR];
	struct iovec iov[2];
	uLongf zlen = r->zcap;
	const uint8_t *data = r->buf;
	uint32_t stored = r->len, flags = 0;
	int err;

	if (!r->len || r->failed)
		return r->failed ? -EIO : 0;
	if (compress2(r->zbuf, &zlen, r->buf, r->len, Z_BEST_SPEED) == Z_OK && zlen < r->len) {
		data = r->zbuf;
		stored = zlen;
		flags = GLR_CHUNK_DEFLATE;
	}
	record__chunk_header(hdr, flags, r->len, stored, data);
	iov[0] = (struct iovec){ hdr, sizeof(hdr) };
	iov[1] = (struct iovec){ (void *)data, stored };
	err = write_all(r->fd, iov, 2);
	if (err) {
		fail(r, err);
		return err;
	}
	r->size += sizeof(hdr) + stored;
	r->len = 0;
	return 0;
}

/*
 * Appends one record. An event record that would take the file past
 * --max-size (less the trailer's room) ends the recording of events.
 */
static void add(struct recorder *r, uint16_t type, const void *payload, size_t plen, bool trailer)
{
	size_t need = GLR_REC_HDR + plen;
	uint64_t limit;

	if (r->failed || (r->truncated && !trailer))
		return;
	if (r->len + need > GLR_CHUNK_RAW_MAX && flush(r))
		return;
	limit = r->o.max_size ? r->o.max_size - (trailer ? 0 : TRAILER_RESERVE) : UINT64_MAX;
	/* near the limit, what is buffered is compressed first to see what room is left */
	if (r->size + GLR_CHUNK_HDR + r->len + need > limit && r->len && flush(r))
		return;
	if (r->size + GLR_CHUNK_HDR + r->len + need > limit) {
		uint8_t mark[16];

		if (trailer)
			return;
		r->truncated = true;
		glr_put(mark, r->last_ts, 8);
		glr_put(mark + 8, r->o.max_size, 8);
		add(r, GLR_TRUNCATED, mark, sizeof(mark), true);
		flush(r);
		return;
	}
	glr_put(r->buf + r->len, type, 2);
	glr_put(r->buf + r->len + 2, 0, 2);
	glr_put(r->buf + r->len + 4, plen, 4);
	memcpy(r->buf + r->len + GLR_REC_HDR, payload, plen);
	r->len += need;
}

static void add_enc(struct recorder *r, uint16_t type, const struct enc *e, bool trailer)
{
	if (e->len <= e->cap)
		add(r, type, e->p, e->len, trailer);
}

static struct enc scratch(struct recorder *r)
{
	return (struct enc){ r->scratch, 0, sizeof(r->scratch) };
}

/* Whether the open file fd is a regular file of ours with no other link: 0 or -errno. */
static int check_own_file(int fd, struct stat *st)
{
	if (fstat(fd, st))
		return -errno;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	if (st->st_nlink > 1)
		return -EMLINK;
	return st->st_uid != geteuid() ? -EPERM : 0;
}

/* Takes fd's lock (no wait): -EBUSY while another recorder writes that file. */
static int lock_file(int fd)
{
	if (!flock(fd, LOCK_EX | LOCK_NB))
		return 0;
	return errno == EWOULDBLOCK ? -EBUSY : -errno;
}

/*
 * A temporary file beside path (".NAME.XXXXXX", 0600), its name into r->tmp.
 * Returns its descriptor or -errno.
 */
static int create_temp(struct recorder *r, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t dir = base ? (size_t)(base - path) + 1 : 0;
	size_t len = strlen(path) + 9;
	int fd;

	r->tmp = malloc(len);
	if (!r->tmp)
		return -ENOMEM;
	snprintf(r->tmp, len, "%.*s.%s.XXXXXX", (int)dir, path, path + dir);
	fd = mkostemp(r->tmp, O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;

		free(r->tmp);
		r->tmp = NULL;
		return err;
	}
	return fd;
}

/*
 * Opens the file the recording goes to; see recorder__new. A new file is
 * created exclusively and written in place; an existing one is locked first
 * (a second recorder of the same path is refused with EBUSY) and, unless
 * empty, replaced only at a successful end: the recording is written to a
 * temporary file beside it, renamed over it by recorder__finish.
 */
static int create_file(struct recorder *r, const char *path, bool replace)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	int err;

	if (fd >= 0) {
		/* another recorder may have opened it between the two calls: it is theirs */
		err = lock_file(fd);
		if (err) {
			close(fd);
			return err;
		}
		r->created = true;
		return fd;
	}
	if (errno != EEXIST)
		return -errno;
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	err = check_own_file(fd, &st);
	err = err ?: lock_file(fd);
	if (!err && st.st_size && !replace)
		err = -EEXIST;
	if (!err && !st.st_size && (fchmod(fd, 0600) || fcntl(fd, F_SETFL, 0)))
		err = -errno;
	if (err || !st.st_size) {
		if (err)
			close(fd);
		return err ? err : fd;
	}
	/* the old recording stays whole until the new one is */
	r->lock_fd = fd;
	return create_temp(r, path);
}

static int write_header(struct recorder *r)
{
	uint8_t h[GLR_HDR_SIZE];
	struct iovec iov = { h, sizeof(h) };
	int err;

	record__file_header(h);
	err = write_all(r->fd, &iov, 1);
	if (!err)
		r->size = sizeof(h);
	return err;
}

static void write_session(struct recorder *r, uint64_t start_ns, uint64_t series_width_ns)
{
	struct enc e = scratch(r);
	struct timespec wall;
	char host[256] = "";

	clock_gettime(CLOCK_REALTIME, &wall);
	if (r->o.host)
		snprintf(host, sizeof(host), "%s", r->o.host);
	else
		gethostname(host, sizeof(host) - 1);
	enc_u(&e, start_ns, 8);
	enc_u(&e, r->o.wall_ns ?: wall.tv_sec * 1000000000ULL + wall.tv_nsec, 8);
	enc_u(&e, series_width_ns, 8);
	enc_u(&e, r->o.stack_mode, 1);
	enc_u(&e, r->o.ran_command ? GLR_SESSION_COMMAND : 0, 1);
	enc_u(&e, 0, 2);
	enc_str(&e, host);
#ifdef GPULEAK_VERSION
	enc_str(&e, GPULEAK_VERSION);
#else
	enc_str(&e, "");
#endif
	add_enc(r, GLR_SESSION, &e, false);
}

struct recorder *recorder__new(const char *path, const struct recorder_opts *o)
{
	struct recorder *r = calloc(1, sizeof(*r));
	int err = -ENOMEM;

	if (!r)
		return NULL;
	r->fd = -1;
	r->lock_fd = -1;
	r->o = *o;
	r->path = strdup(path);
	r->zcap = compressBound(GLR_CHUNK_RAW_MAX);
	r->buf = malloc(GLR_CHUNK_RAW_MAX);
	r->zbuf = malloc(r->zcap);
	r->codes = htab__new(sizeof(uint32_t), 1);
	if (!r->buf || !r->zbuf || !r->codes || !r->path)
		goto fail;
	if (o->max_size && o->max_size < GLR_HDR_SIZE + 4 * TRAILER_RESERVE) {
		err = -ENOSPC;
		goto fail;
	}
	r->fd = create_file(r, path, o->replace);
	if (r->fd < 0) {
		err = r->fd;
		goto fail;
	}
	err = write_header(r);
	if (err)
		goto fail;
	return r;
fail:
	recorder__discard(r);
	errno = -err;
	return NULL;
}

void recorder__begin(struct recorder *r, struct modules *m, struct stacks *s, uint64_t start_ns,
		     uint64_t series_width_ns)
{
	r->mods = m;
	r->stacks = s;
	r->last_flush_ns = start_ns;
	write_session(r, start_ns, series_width_ns);
	flush(r);
}

static void release(struct recorder *r, bool discard)
{
	if (r->fd >= 0) {
		if (!discard)
			flush(r);
		close(r->fd);
	}
	/* a replacement that did not end well: the old recording stays as it was */
	if (r->tmp)
		unlink(r->tmp);
	else if (discard && r->created)
		unlink(r->path);
	if (r->lock_fd >= 0)
		close(r->lock_fd);
	free(r->tmp);
	free(r->path);
	htab__free(r->codes);
	free(r->mods_done);
	free(r->buf);
	free(r->zbuf);
	free(r);
}

void recorder__free(struct recorder *r)
{
	if (r)
		release(r, false);
}

void recorder__discard(struct recorder *r)
{
	if (r)
		release(r, true);
}

void recorder__proc_new(struct recorder *r, const struct proc *proc)
{
	const struct proc_totals *t = proc__totals(proc);
	struct enc e = scratch(r);

	enc_u(&e, (uint32_t)t->pid, 4);
	enc_u(&e, (uint32_t)t->ns_pid, 4);
	enc_u(&e, t->start_time, 8);
	enc_u(&e, t->first_ns, 8);
	enc_bytes(&e, t->comm, sizeof(t->comm));
	add_enc(r, GLR_PROCINFO, &e, false);
}

void recorder__proc_exit(struct recorder *r, const struct proc *proc)
{
	const struct proc_totals *t = proc__totals(proc);
	struct gl_proc rec = {
		.hdr = { GL_REC_PROC, sizeof(rec), t->pid, t->pid, t->start_time, t->exit_ns },
		.event = GL_PROC_EXIT,
		.stats = t->final,
	};

	memcpy(rec.comm, t->comm, sizeof(rec.comm));
	if (t->exit_ns > r->last_ts)
		r->last_ts = t->exit_ns;
	add(r, GLR_PROC, &rec, sizeof(rec), false);
}

static void define_module(struct recorder *r, uint32_t id)
{
	const struct module_info *mi;
	struct enc e = scratch(r);

	if (id >= r->nr_mods_done) {
		uint32_t n = modules__count(r->mods) + 1;
		uint8_t *done;

		if (id >= n)
			return;
		done = realloc(r->mods_done, n);
		if (!done)
			return;
		memset(done + r->nr_mods_done, 0, n - r->nr_mods_done);
		r->mods_done = done;
		r->nr_mods_done = n;
	}
	if (r->mods_done[id])
		return;
	mi = modules__info(r->mods, id);
	if (!mi)
		return;
	enc_u(&e, id, 4);
	enc_u(&e, mi->dev, 8);
	enc_u(&e, mi->ino, 8);
	enc_str(&e, mi->path);
	enc_str(&e, mi->build_id);
	add_enc(r, GLR_MODULE, &e, false);
	r->mods_done[id] = !r->truncated && !r->failed;
}

static void define_code(struct recorder *r, uint32_t id)
{
	const char *function = NULL, *file = NULL;
	struct enc e = scratch(r);
	bool created;

	if (!htab__upsert(r->codes, &id, &created) || !created)
		return;
	if (r->o.code_info)
		r->o.code_info(r->o.code_ctx, id, &function, &file);
	enc_u(&e, id, 4);
	enc_str(&e, function ? function : "?");
	enc_str(&e, file ? file : "?");
	add_enc(r, GLR_PYCODE, &e, false);
}

static void define_stack(struct recorder *r, uint32_t id)
{
	struct enc e = scratch(r);
	const struct frame *f;
	uint32_t n;

	f = stacks__get(r->stacks, id, &n);
	if (n > GLR_FRAMES_MAX)
		n = GLR_FRAMES_MAX;
	for (uint32_t i = 0; i < n; i++) {
		if (f[i].kind == FRAME_NATIVE)
			define_module(r, f[i].mod);
		else if (f[i].kind == FRAME_PYTHON)
			define_code(r, f[i].mod);
	}
	enc_u(&e, id, 4);
	enc_u(&e, n, 2);
	enc_u(&e, 0, 2);
	for (uint32_t i = 0; i < n; i++) {
		enc_u(&e, f[i].kind, 1);
		enc_u(&e, 0, 3);
		enc_u(&e, f[i].mod, 4);
		enc_u(&e, f[i].addr, 8);
	}
	add_enc(r, GLR_STACK, &e, false);
}

void recorder__applied(struct recorder *r, const void *data, size_t size, uint32_t stack)
{
	const struct gl_hdr *h = data;
	struct enc e = scratch(r);
	uint32_t count;

	if (r->truncated || r->failed || size < sizeof(*h) || !r->stacks)
		return;
	if (h->ts > r->last_ts)
		r->last_ts = h->ts;
	if (h->type == GL_REC_PROC && size == sizeof(struct gl_proc)) {
		uint32_t event = ((const struct gl_proc *)data)->event;

		if (event == GL_PROC_FORK || event == GL_PROC_EXEC)
			add(r, GLR_PROC, data, size, false);
		return;
	}
	if (h->type != GL_REC_CALL || size != sizeof(struct gl_call))
		return;
	/* stack ids are handed out in order: the new ones are those above stacks_done */
	count = stacks__count(r->stacks);
	while (r->stacks_done < count && !r->truncated)
		define_stack(r, ++r->stacks_done);
	enc_u(&e, stack, 4);
	enc_u(&e, 0, 4);
	enc_bytes(&e, data, size);
	add_enc(r, GLR_CALL, &e, false);
	if (!r->truncated)
		r->calls++;
}

static void add_stats(struct recorder *r, uint64_t ts, const uint64_t *stats, bool trailer)
{
	struct enc e = scratch(r);

	enc_u(&e, ts, 8);
	enc_u(&e, GL_NR_STATS, 4);
	enc_u(&e, 0, 4);
	for (int i = 0; i < GL_NR_STATS; i++)
		enc_u(&e, stats[i], 8);
	add_enc(r, GLR_STATS, &e, trailer);
	memcpy(r->stats, stats, sizeof(r->stats));
}

int recorder__tick(struct recorder *r, uint64_t now_ns, const uint64_t *stats)
{
	if (r->failed)
		return -EIO;
	if (now_ns - r->last_flush_ns < FLUSH_NS)
		return 0;
	r->last_flush_ns = now_ns;
	if (stats && memcmp(stats, r->stats, sizeof(r->stats)))
		add_stats(r, now_ns, stats, false);
	return flush(r);
}

void recorder__bpf_proc(struct recorder *r, int pid, const struct gl_proc_stats *st)
{
	struct enc e = scratch(r);

	enc_u(&e, (uint32_t)pid, 4);
	enc_u(&e, 0, 4);
	enc_bytes(&e, st, sizeof(*st));
	add_enc(r, GLR_BPF_PROC, &e, true);
}

int recorder__finish(struct recorder *r, uint64_t end_ns, const uint64_t *stats, uint64_t malformed,
		     uint32_t nr_probes)
{
	struct enc e = scratch(r);
	int err;

	if (stats)
		add_stats(r, end_ns, stats, true);
	enc_u(&e, end_ns, 8);
	enc_u(&e, r->calls, 8);
	enc_u(&e, malformed, 8);
	enc_u(&e, nr_probes, 4);
	enc_u(&e, 0, 4);
	add_enc(r, GLR_END, &e, true);
	err = flush(r);
	if (!err && fsync(r->fd))
		err = -errno;
	/* a replacement takes the old recording's place in one step */
	if (!err && r->tmp && rename(r->tmp, r->path))
		err = -errno;
	if (!err && r->tmp) {
		free(r->tmp);
		r->tmp = NULL;
	}
	if (err)
		fail(r, err);
	return err;
}

static const char *const tensor_modes[GLR_TENSORS_NR] = {
	[GLR_TENSORS_OFF] = "off",
	[GLR_TENSORS_WINDOWED] = "windowed",
	[GLR_TENSORS_SAMPLED] = "sampled",
	[GLR_TENSORS_FULL] = "full",
};

const char *record__tensor_mode_name(unsigned int mode)
{
	return mode < GLR_TENSORS_NR ? tensor_modes[mode] : NULL;
}

void recorder__tensor_level(struct recorder *r, const char *mode, uint64_t sample_bytes)
{
	struct enc e = scratch(r);
	unsigned int m;

	for (m = 0; m < GLR_TENSORS_NR; m++)
		if (mode && !strcmp(mode, tensor_modes[m]))
			break;
	if (m == GLR_TENSORS_NR)
		return;
	enc_u(&e, m, 1);
	enc_u(&e, 0, 7);
	enc_u(&e, sample_bytes, 8);
	add_enc(r, GLR_TENSORS, &e, false);
}

void recorder__window(struct recorder *r, int pid, unsigned int event, unsigned int why,
		      uint64_t ts, bool forgot)
{
	struct enc e = scratch(r);

	if (ts > r->last_ts)
		r->last_ts = ts;
	enc_u(&e, ts, 8);
	enc_u(&e, event, 1);
	enc_u(&e, why, 1);
	enc_u(&e, forgot ? GLR_WINDOW_FORGOT : 0, 1);
	enc_u(&e, 0, 5);
	enc_u(&e, pid > 0 ? (uint32_t)pid : 0, 4);
	enc_u(&e, 0, 4);
	add_enc(r, GLR_WINDOW, &e, false);
}

bool recorder__truncated(const struct recorder *r)
{
	return r->truncated;
}

bool recorder__failed(const struct recorder *r)
{
	return r->failed;
}

uint64_t recorder__size(const struct recorder *r)
{
	return r->size;
}

uint64_t recorder__calls(const struct recorder *r)
{
	return r->calls;
}
