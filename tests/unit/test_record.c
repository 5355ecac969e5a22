// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_record.c - the recording format: written by recording/record.c, read by
 * recording/recread.c, replayed into the books by recording/replay.c. A recording of
 * every record type rebuilds the books to the byte; cut at every length and
 * with any one byte damaged it still reads without a crash and says what it
 * lacks; files that are not recordings are told apart; --max-size holds; the
 * file is never written through a symlink; the books' replay API and hooks;
 * record's and report's command lines; the tensor windows kept and replayed
 * (what the live books did at each), and recordings from before them.
 */
#include "unit.h"
#include "record_fixture.h"
#include "books/books.h"
#include "recording/replay.h"
#include "cmd/cli.h"
#include "report/formats.h"
#include "report/report.h"
#include "recording/recread.h"
#include "util/log.h"
#include <dirent.h>
#include <zlib.h>

static char dir[64];
static char path[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/glrecXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/rec.glr", dir);
	log_level = LOG_ERROR;
	return 0;
}

static int teardown(void **state)
{
	unit_rm_tree(dir);
	return 0;
}

/* Files of d whose name starts with prefix. */
static int count_files(const char *d, const char *prefix)
{
	DIR *dh = opendir(d);
	struct dirent *de;
	int n = 0;

	assert_non_null(dh);
	while ((de = readdir(dh)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(dh);
	return n;
}

struct replayed {
	struct rec_reader *rr;
	struct replay *rp;
	struct snapshot *snap;
	const struct snap_recording *info;
};

/* Reads data[0..len) (or the file at path if data is NULL); -errno if the header is refused. */
static int replay_of(const void *data, size_t len, struct replayed *out)
{
	struct replay_opts ro = { .no_files = true };
	char why[256];
	int err;

	memset(out, 0, sizeof(*out));
	err = data ? recread__mem(data, len, &out->rr, why, sizeof(why)) :
		     recread__open(path, &out->rr, why, sizeof(why));
	if (err)
		return err;
	out->rp = replay__new(&ro);
	assert_non_null(out->rp);
	replay__read(out->rp, out->rr, "rec.glr");
	out->snap = replay__snapshot(out->rp, 0);
	assert_non_null(out->snap);
	out->info = replay__info(out->rp);
	return 0;
}

static void replayed_free(struct replayed *r)
{
	snapshot__free(r->snap);
	replay__free(r->rp);
	recread__free(r->rr);
}

static const struct snap_proc *find_proc(const struct snapshot *s, int pid)
{
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	return NULL;
}

static const struct snap_stack *stack_with(const struct snap_proc *p, uint64_t offset)
{
	for (uint32_t i = 0; i < p->nstacks; i++)
		for (uint32_t j = 0; j < p->stacks[i].nframes; j++)
			if (p->stacks[i].frames[j].offset == offset)
				return &p->stacks[i];
	return NULL;
}

static void test_round_trip(void **state)
{
	struct rf_opts o = { .churn = 2 };
	const struct snap_proc *p, *w;
	const struct snap_stack *st;
	struct replayed r;

	assert_int_equal(rf_write(path, &o), 0);
	assert_int_equal(replay_of(NULL, 0, &r), 0);
	assert_true(r.info->complete);
	assert_true(r.info->ended);
	assert_false(r.info->truncated);
	assert_int_equal(r.info->calls, 9 + 2 * 2);
	assert_int_equal(r.info->modules, 3);
	assert_int_equal(r.info->modules_missing, 3); /* no files opened */
	assert_string_equal(r.info->host, "gpu-node-7");
	assert_int_equal(r.info->wall_start_ns, 1700000000000000000ULL);
	assert_int_equal(r.info->version, GLR_VERSION);
	assert_string_equal(r.snap->stack_mode, "fp");
	assert_int_equal(r.snap->nr_probes, 100);
	assert_int_equal(r.snap->stats[GL_STAT_STALE_ENTRY], 1);
	assert_true(r.snap->complete);
	p = find_proc(r.snap, RF_PID);
	assert_non_null(p);
	assert_string_equal(p->comm, "train");
	assert_int_equal(p->ns_pid, 7);
	assert_false(p->exited);
	assert_int_equal(p->bytes[GL_CLASS_DEVICE], RF_DEVICE_BYTES);
	assert_int_equal(p->nallocs[GL_CLASS_DEVICE], RF_DEVICE_ALLOCS);
	assert_int_equal(p->bytes[GL_CLASS_HOST_PINNED], RF_PINNED_BYTES);
	assert_int_equal(p->dev_bytes[0], RF_DEVICE_BYTES); /* the context's device */
	assert_int_equal(p->failures, 1);
	assert_int_equal(p->oom_failures, 1);
	assert_int_equal(p->unmatched_frees, 1);
	assert_int_equal(p->alloc_calls, 4 + 2);
	assert_int_equal(p->free_calls, 2 + 2);
	assert_true(p->bpf_valid);
	assert_true(p->consistent);
	/* frames: native as module + offset with the build-id, Python named as recorded */
	st = stack_with(p, 0x2040);
	assert_non_null(st);
	assert_int_equal(st->outstanding_bytes, RF_DEVICE_BYTES);
	assert_int_equal(st->nframes, 5);
	assert_string_equal(st->frames[0].module, RF_CUDA);
	assert_string_equal(st->frames[0].build_id, RF_CUDA_BUILD_ID);
	assert_string_equal(st->frames[1].module, RF_APP);
	assert_null(st->frames[1].function);
	assert_string_equal(st->frames[2].kind, "python");
	assert_string_equal(st->frames[2].function, "train_step");
	assert_string_equal(st->frames[2].file, "/opt/app/train.py");
	assert_int_equal(st->frames[2].line, 42);
	assert_string_equal(st->frames[3].function, "<module>");
	assert_null(st->frames[4].build_id); /* libc was recorded without one */
	/* the failure keeps its stack, with the unknown frame's address */
	assert_int_equal(p->nfailures, 1);
	assert_int_equal(p->failures_list[0].stack->nframes, 3);
	assert_int_equal(p->failures_list[0].stack->frames[2].address, 0x7fff0000);
	assert_int_equal(p->failures_list[0].nholders, 1);
	assert_string_equal(p->failures_list[0].holders[0].frames[2].function, "train_step");
	/* the API-only stack of the pinned buffer */
	for (uint32_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].cls == GL_CLASS_HOST_PINNED)
			assert_string_equal(p->stacks[i].frames[0].function, "cuMemHostAlloc");
	w = find_proc(r.snap, RF_PID2);
	assert_non_null(w);
	assert_true(w->exited);
	assert_string_equal(w->comm, "worker");
	assert_int_equal(w->bytes[GL_CLASS_DEVICE], RF_MIB / 2);
	assert_true(w->consistent);
	/* a recording with no tensor-level records: not known, as before they existed */
	assert_null(r.snap->tensors);
	replayed_free(&r);
}

static void test_reports_of_a_replay(void **state)
{
	struct text_opts to = {};
	struct unit_mem m;
	struct replayed r;
	char *text;

	assert_int_equal(rf_write(path, &(struct rf_opts){}), 0);
	assert_int_equal(replay_of(NULL, 0, &r), 0);
	assert_int_equal(report__text(unit_mem_open(&m), r.snap, &to), 0);
	text = unit_mem_close(&m);
	assert_non_null(strstr(text, "PID 4242 train (running): device 2.00 MiB"));
	assert_non_null(strstr(text, "0x2040 (train)"));
	assert_non_null(strstr(text, "train_step (/opt/app/train.py:42) [python]"));
	free(text);
	assert_int_equal(report__json(unit_mem_open(&m), r.snap), 0);
	text = unit_mem_close(&m);
	assert_non_null(strstr(text, "\"recording\":{\"file\":\"rec.glr\""));
	assert_non_null(strstr(text, "\"complete\":true,\"ended\":true,\"truncated\":false"));
	assert_non_null(strstr(text, "\"build_id\":\"" RF_APP_BUILD_ID "\""));
	free(text);
	replayed_free(&r);
}

static void test_no_end_record(void **state)
{
	struct replayed r;

	assert_int_equal(rf_write(path, &(struct rf_opts){ .no_end = true }), 0);
	assert_int_equal(replay_of(NULL, 0, &r), 0);
	assert_false(r.info->ended);
	assert_false(r.info->complete);
	assert_false(r.snap->complete);
	/* what was flushed is all there; BPF's books of the running process are not */
	assert_int_equal(find_proc(r.snap, RF_PID)->bytes[GL_CLASS_DEVICE], RF_DEVICE_BYTES);
	assert_false(find_proc(r.snap, RF_PID)->consistent);
	assert_true(find_proc(r.snap, RF_PID2)->consistent);
	replayed_free(&r);
}

static void test_max_size(void **state)
{
	struct rf_opts o = { .max_size = 8192, .churn = 2000 };
	struct replayed r;
	struct stat st;

	assert_int_equal(rf_write(path, &o), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size <= 8192);
	assert_true(st.st_size > 4096);
	assert_int_equal(replay_of(NULL, 0, &r), 0);
	assert_true(r.info->truncated);
	assert_true(r.info->ended);
	assert_false(r.info->complete);
	assert_false(r.snap->complete);
	assert_int_equal(r.info->max_size, 8192);
	assert_true(r.info->calls > 10 && r.info->calls < 10 + 2 * 2000);
	replayed_free(&r);
	/* too small to hold even the trailer */
	o.max_size = 2048;
	assert_int_equal(rf_write(path, &o), -ENOSPC);
}

static char *fixture_bytes(size_t *len)
{
	char *d;

	assert_int_equal(rf_write(path, &(struct rf_opts){ .churn = 3 }), 0);
	d = unit_read_file(path, len);
	assert_non_null(d);
	return d;
}

static void test_cut_at_every_length(void **state)
{
	size_t len;
	char *d = fixture_bytes(&len);

	for (size_t cut = 0; cut <= len; cut++) {
		struct replayed r;
		int err = replay_of(d, cut, &r);

		if (cut < GLR_HDR_SIZE) {
			assert_int_equal(err, -EBADMSG);
			continue;
		}
		assert_int_equal(err, 0);
		assert_int_equal(r.info->bytes, cut);
		assert_int_equal(r.info->complete, cut == len);
		if (cut < len)
			assert_true(r.info->cut || !r.info->ended);
		replayed_free(&r);
	}
	free(d);
}

static void test_any_damaged_byte_is_seen(void **state)
{
	size_t len;
	char *d = fixture_bytes(&len);

	for (size_t i = 0; i < len; i++) {
		struct replayed r;
		int err;

		d[i] ^= 0x20;
		err = replay_of(d, len, &r);
		d[i] ^= 0x20;
		if (i < 8) {
			assert_int_equal(err, -EBADMSG); /* the magic */
			continue;
		}
		assert_int_equal(err, 0);
		if (r.info->complete)
			fail_msg("a damaged byte at %zu went unseen", i);
		assert_false(r.snap->complete);
		replayed_free(&r);
	}
	free(d);
}

static void test_damaged_chunk_costs_itself_only(void **state)
{
	struct rf_opts o = { .churn = 3 };
	struct replayed r;
	size_t len, first;
	char *d;

	assert_int_equal(rf_write(path, &o), 0);
	d = unit_read_file(path, &len);
	/* the first chunk holds the session record; damage its data */
	first = GLR_HDR_SIZE + GLR_CHUNK_HDR + glr_get((uint8_t *)d + GLR_HDR_SIZE + 12, 4);
	d[GLR_HDR_SIZE + GLR_CHUNK_HDR + 2] ^= 1;
	assert_int_equal(replay_of(d, len, &r), 0);
	assert_int_equal(r.info->bad_chunks, 1);
	assert_int_equal(r.info->skipped_bytes, first - GLR_HDR_SIZE);
	assert_int_equal(r.info->wall_start_ns, 0); /* the session record went with it */
	assert_int_equal(find_proc(r.snap, RF_PID)->bytes[GL_CLASS_DEVICE], RF_DEVICE_BYTES);
	replayed_free(&r);
	/* a damaged chunk header: the reader finds the next chunk */
	d[GLR_HDR_SIZE + GLR_CHUNK_HDR + 2] ^= 1;
	d[GLR_HDR_SIZE + 13] ^= 0x40;
	assert_int_equal(replay_of(d, len, &r), 0);
	assert_int_equal(r.info->bad_chunks, 1);
	assert_int_equal(r.info->skipped_bytes, first - GLR_HDR_SIZE);
	assert_int_equal(find_proc(r.snap, RF_PID)->bytes[GL_CLASS_DEVICE], RF_DEVICE_BYTES);
	replayed_free(&r);
	free(d);
}

static void test_not_recordings(void **state)
{
	uint8_t h[GLR_HDR_SIZE + 8] = {};
	struct rec_reader *rr;
	struct replayed r;
	char why[256];

	assert_int_equal(replay_of("", 0, &r), -EBADMSG);
	assert_int_equal(replay_of("{\"version\":1}\n", 14, &r), -EBADMSG);
	assert_int_equal(recread__mem("\177ELF", 4, &rr, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "not a gpuleak recording");
	memcpy(h, GLR_MAGIC, 8);
	glr_put(h + 8, 2, 2);
	glr_put(h + 10, GLR_HDR_SIZE, 2);
	glr_put(h + 12, GLR_F_LITTLE_ENDIAN, 4);
	glr_put(h + 28, crc32(0, h, 28), 4);
	assert_int_equal(recread__mem(h, sizeof(h), &rr, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "format version 2"));
	glr_put(h + 8, GLR_VERSION, 2);
	glr_put(h + 16, GL_ABI_VERSION + 1, 4);
	glr_put(h + 28, crc32(0, h, 28), 4);
	assert_int_equal(recread__mem(h, sizeof(h), &rr, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_non_null(strstr(why, "BPF ABI"));
	glr_put(h + 16, GL_ABI_VERSION, 4);
	glr_put(h + 28, crc32(0, h, 28), 4);
	assert_int_equal(recread__mem(h, sizeof(h), &rr, why, sizeof(why)), 0);
	recread__free(rr);
	assert_int_equal(recread__open("/nonexistent/rec.glr", &rr, why, sizeof(why)), -ENOENT);
	assert_int_equal(recread__open("/dev/null", &rr, why, sizeof(why)), -EBADMSG);
	assert_int_equal(recread__open(dir, &rr, why, sizeof(why)), -EBADMSG);
}

/* A chunk of hand-made records: an unknown type is skipped, a malformed one counted. */
static void test_unknown_and_malformed_records(void **state)
{
	uint8_t buf[512] = {}, *p = buf + GLR_HDR_SIZE + GLR_CHUNK_HDR, *rec = p;
	struct replayed r;

	glr_put(rec, 99, 2);	/* a type of a later version */
	glr_put(rec + 4, 3, 4);
	rec += GLR_REC_HDR + 3;
	glr_put(rec, GLR_CALL, 2); /* a call record of the wrong size */
	glr_put(rec + 4, 10, 4);
	rec += GLR_REC_HDR + 10;
	glr_put(rec, GLR_TRUNCATED, 2);
	glr_put(rec + 4, 16, 4);
	glr_put(rec + GLR_REC_HDR + 8, 12345, 8);
	rec += GLR_REC_HDR + 16;
	record__file_header(buf);
	record__chunk_header(p - GLR_CHUNK_HDR, 0, rec - p, rec - p, p);
	assert_int_equal(replay_of(buf, rec - buf, &r), 0);
	assert_int_equal(r.info->unknown_records, 1);
	assert_int_equal(r.info->bad_records, 1);
	assert_true(r.info->truncated);
	assert_int_equal(r.info->max_size, 12345);
	assert_int_equal(r.snap->nprocs, 0);
	replayed_free(&r);
}

/*
 * The tensor windows: the mode and each window as recorded; the second window's
 * opening forgot the first's blocks, as the live books did; the tail ended
 * PyTorch's whole map; the reports say what the blocks cover.
 */
static void test_tensor_windows(void **state)
{
	const struct snap_tensors *tl;
	const struct snap_proc *p;
	struct text_opts to = {};
	struct unit_mem m;
	struct replayed r;
	char *text;

	assert_int_equal(rf_write(path, &(struct rf_opts){ .windows = true }), 0);
	assert_int_equal(replay_of(NULL, 0, &r), 0);
	assert_true(r.info->complete);
	assert_int_equal(r.info->unknown_records, 0);
	/* the session's: every process's windows counted, each process has its list */
	tl = r.snap->tensors;
	assert_non_null(tl);
	assert_string_equal(tl->mode, "windowed");
	assert_true(tl->armed);
	assert_int_equal(tl->windows_total, 2);
	assert_int_equal(tl->nwindows, 0);
	p = find_proc(r.snap, RF_PID);
	assert_non_null(p);
	assert_true(p->tensors_known);
	tl = &p->tensors;
	assert_string_equal(tl->mode, "windowed");
	assert_string_equal(tl->coverage, "windowed");
	assert_true(tl->armed);
	assert_int_equal(tl->windows_total, 2);
	assert_int_equal(tl->nwindows, 2);
	assert_string_equal(tl->windows[0].why, "start");
	assert_true(tl->windows[0].start_s == 0);
	assert_true(tl->windows[0].end_s > 0);
	assert_string_equal(tl->windows[1].why, "request");
	assert_true(tl->windows[1].start_s > tl->windows[0].end_s);
	assert_true(tl->windows[1].end_s < 0); /* still open at the end */
	assert_true(tl->armed_s > tl->windows[0].end_s);
	assert_int_equal(p->bytes[GL_CLASS_TORCH_BLOCK], RF_BLOCKS2 * RF_BLOCK);
	assert_int_equal(p->nallocs[GL_CLASS_TORCH_BLOCK], RF_BLOCKS2);
	assert_int_equal(p->bytes[GL_CLASS_DEVICE], RF_DEVICE_BYTES);
	assert_false(p->memory.blocks_seen); /* the first window's tail ended the whole map */
	/* the other process had no window of its own: none of RF_PID's is its */
	p = find_proc(r.snap, RF_PID2);
	assert_non_null(p);
	assert_true(p->tensors_known);
	assert_int_equal(p->tensors.windows_total, 0);
	assert_int_equal(p->tensors.nwindows, 0);
	assert_false(p->tensors.armed);
	assert_int_equal(report__text(unit_mem_open(&m), r.snap, &to), 0);
	text = unit_mem_close(&m);
	assert_non_null(strstr(text, "tensor blocks: windowed: traced now, in window 2"));
	free(text);
	assert_int_equal(report__json(unit_mem_open(&m), r.snap), 0);
	text = unit_mem_close(&m);
	assert_non_null(strstr(text, "\"tensor_level\":{\"mode\":\"windowed\",\"coverage\":"
				     "\"windowed\",\"armed\":true"));
	assert_non_null(strstr(text, "\"why\":\"request\"}]}"));
	free(text);
	replayed_free(&r);
}

/*
 * Windows are each process's: one process's window opening forgets its own
 * blocks only, and its windows are in its tensor level alone.
 */
static void test_tensor_windows_per_process(void **state)
{
	struct recorder_opts ro = { .stack_mode = GL_STACK_FP, .host = "h" };
	struct modules *m = modules__new();
	struct stacks *s = stacks__new();
	struct recorder *rec = recorder__new(path, &ro);
	struct proc pa = { .t = { .pid = RF_PID, .start_time = RF_START } };
	struct proc pb = { .t = { .pid = RF_PID2, .start_time = RF_START2 } };
	uint64_t ts = RF_REC_START, stats[GL_NR_STATS] = {};
	const struct snap_proc *a, *b;
	struct replayed r;

	assert_non_null(rec);
	recorder__begin(rec, m, s, RF_REC_START, 1000000000ULL);
	recorder__tensor_level(rec, "windowed", 0);
	recorder__proc_new(rec, &pa);
	recorder__proc_new(rec, &pb);
	recorder__window(rec, RF_PID, GLR_WINDOW_OPEN, 0, ts, false);
	recorder__window(rec, RF_PID2, GLR_WINDOW_OPEN, 0, ts, false);
	for (int i = 0; i < 3; i++) {
		rf_call(rec, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_pytorch_malloc,
			.op = GL_OP_ALLOC, .key = 0x10100000 + i * RF_BLOCK, .bytes = RF_BLOCK,
			.seq = 1 + i }, 0);
		rf_call(rec, RF_PID2, RF_START2, &ts, (struct gl_call){ .api = GL_API_pytorch_malloc,
			.op = GL_OP_ALLOC, .key = 0x10100000 + i * RF_BLOCK, .bytes = RF_BLOCK,
			.seq = 1 + i }, 0);
	}
	/* RF_PID's window ends; its next (growth) forgets its blocks, not RF_PID2's */
	recorder__window(rec, RF_PID, GLR_WINDOW_TAIL, 0, ts += 1000000, false);
	recorder__window(rec, RF_PID, GLR_WINDOW_CLOSE, 0, ts += 1000000, false);
	recorder__window(rec, RF_PID, GLR_WINDOW_OPEN, 2 /* growth */, ts += 1000000, true);
	rf_call(rec, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_pytorch_malloc,
		.op = GL_OP_ALLOC, .key = 0x10200000, .bytes = RF_BLOCK, .seq = 9 }, 0);
	assert_int_equal(recorder__finish(rec, ts + 1000000, stats, 0, 2), 0);
	recorder__free(rec);
	stacks__free(s);
	modules__free(m);

	assert_int_equal(replay_of(NULL, 0, &r), 0);
	a = find_proc(r.snap, RF_PID);
	b = find_proc(r.snap, RF_PID2);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->nallocs[GL_CLASS_TORCH_BLOCK], 1);
	assert_int_equal(b->nallocs[GL_CLASS_TORCH_BLOCK], 3);
	assert_int_equal(a->tensors.windows_total, 2);
	assert_string_equal(a->tensors.windows[1].why, "growth");
	assert_string_equal(a->tensors.coverage, "windowed");
	assert_int_equal(b->tensors.windows_total, 1);
	assert_string_equal(b->tensors.windows[0].why, "start");
	assert_string_equal(b->tensors.coverage, "complete"); /* its first window, still open */
	assert_int_equal(r.snap->tensors->windows_total, 3);
	replayed_free(&r);
}

/*
 * Windows of no process (PID 0, as the WINDOW records of 16 bytes from before
 * windows were per process read: test_malformed_tensor_records) are every
 * process's, and an opening forgets every process's blocks, as the books of
 * then did.
 */
static void test_tensor_windows_without_pid(void **state)
{
	struct recorder_opts ro = { .stack_mode = GL_STACK_FP, .host = "h" };
	struct modules *m = modules__new();
	struct stacks *s = stacks__new();
	struct recorder *rec = recorder__new(path, &ro);
	struct proc pa = { .t = { .pid = RF_PID, .start_time = RF_START } };
	struct proc pb = { .t = { .pid = RF_PID2, .start_time = RF_START2 } };
	uint64_t ts = RF_REC_START, stats[GL_NR_STATS] = {};
	struct replayed r;

	assert_non_null(rec);
	recorder__begin(rec, m, s, RF_REC_START, 1000000000ULL);
	recorder__tensor_level(rec, "windowed", 0);
	recorder__proc_new(rec, &pa);
	recorder__proc_new(rec, &pb);
	recorder__window(rec, 0, GLR_WINDOW_OPEN, 0, ts, false);
	for (int i = 0; i < 2; i++) {
		rf_call(rec, RF_PID, RF_START, &ts, (struct gl_call){ .api = GL_API_pytorch_malloc,
			.op = GL_OP_ALLOC, .key = 0x10100000 + i * RF_BLOCK, .bytes = RF_BLOCK,
			.seq = 1 + i }, 0);
		rf_call(rec, RF_PID2, RF_START2, &ts, (struct gl_call){ .api = GL_API_pytorch_malloc,
			.op = GL_OP_ALLOC, .key = 0x10100000 + i * RF_BLOCK, .bytes = RF_BLOCK,
			.seq = 1 + i }, 0);
	}
	recorder__window(rec, 0, GLR_WINDOW_TAIL, 0, ts += 1000000, false);
	recorder__window(rec, 0, GLR_WINDOW_CLOSE, 0, ts += 1000000, false);
	recorder__window(rec, 0, GLR_WINDOW_OPEN, 1, ts += 1000000, true);
	assert_int_equal(recorder__finish(rec, ts + 1000000, stats, 0, 2), 0);
	recorder__free(rec);
	stacks__free(s);
	modules__free(m);

	assert_int_equal(replay_of(NULL, 0, &r), 0);
	for (int pid = RF_PID; pid; pid = pid == RF_PID ? RF_PID2 : 0) {
		const struct snap_proc *p = find_proc(r.snap, pid);

		assert_non_null(p);
		assert_int_equal(p->nallocs[GL_CLASS_TORCH_BLOCK], 0); /* the second forgot all */
		assert_int_equal(p->tensors.windows_total, 2);
		assert_string_equal(p->tensors.windows[1].why, "duty");
	}
	replayed_free(&r);
}

/* Cut anywhere, a windowed recording reads; no more windows than written, never more blocks. */
static void test_tensor_windows_cut(void **state)
{
	size_t len;
	char *d;

	assert_int_equal(rf_write(path, &(struct rf_opts){ .windows = true }), 0);
	d = unit_read_file(path, &len);
	assert_non_null(d);
	for (size_t cut = GLR_HDR_SIZE; cut <= len; cut++) {
		const struct snap_proc *p;
		struct replayed r;

		assert_int_equal(replay_of(d, cut, &r), 0);
		assert_int_equal(r.info->complete, cut == len);
		if (r.snap->tensors)
			assert_true(r.snap->tensors->windows_total <= 2);
		p = find_proc(r.snap, RF_PID);
		if (p)
			assert_true(p->nallocs[GL_CLASS_TORCH_BLOCK] <= RF_BLOCKS1);
		replayed_free(&r);
	}
	free(d);
}

static uint8_t *put_record(uint8_t *rec, uint16_t type, uint32_t len)
{
	glr_put(rec, type, 2);
	glr_put(rec + 4, len, 4);
	return rec + GLR_REC_HDR;
}

/*
 * Hand-made tensor records: an unknown mode, event or reason, and a short
 * record are malformed (counted, skipped); later fields and flags are
 * ignored; a window with its mode record lost reads as windowed.
 */
static void test_malformed_tensor_records(void **state)
{
	uint8_t buf[512] = {}, *p = buf + GLR_HDR_SIZE + GLR_CHUNK_HDR, *rec = p, *f;
	struct replayed r;

	f = put_record(rec, GLR_TENSORS, 16); /* mode 9 */
	f[0] = 9;
	rec = f + 16;
	f = put_record(rec, GLR_WINDOW, 16); /* event 0 */
	glr_put(f, 5, 8);
	rec = f + 16;
	f = put_record(rec, GLR_WINDOW, 16); /* why 7 */
	glr_put(f, 5, 8);
	f[8] = GLR_WINDOW_OPEN;
	f[9] = 7;
	rec = f + 16;
	f = put_record(rec, GLR_WINDOW, 8); /* no event */
	glr_put(f, 5, 8);
	rec = f + 8;
	f = put_record(rec, GLR_WINDOW, 24); /* sound, with a later version's flag and field */
	glr_put(f, 7000000000ULL, 8);
	f[8] = GLR_WINDOW_OPEN;
	f[9] = 2;
	f[10] = 0x80 | GLR_WINDOW_FORGOT;
	rec = f + 24;
	record__file_header(buf);
	record__chunk_header(p - GLR_CHUNK_HDR, 0, rec - p, rec - p, p);
	assert_int_equal(replay_of(buf, rec - buf, &r), 0);
	assert_int_equal(r.info->bad_records, 4);
	assert_int_equal(r.info->unknown_records, 0);
	assert_false(r.info->complete);
	assert_non_null(r.snap->tensors);
	assert_string_equal(r.snap->tensors->mode, "windowed");
	assert_int_equal(r.snap->tensors->windows_total, 1);
	assert_string_equal(r.snap->tensors->windows[0].why, "growth");
	replayed_free(&r);
}

/* Each recorded mode reads back as the live view names it; windows are for windowed only. */
static void test_tensor_modes(void **state)
{
	static const char *const want[][2] = { { "off", "none" },
					       { "windowed", "complete" }, /* open from the start */
					       { "sampled", "sampled" },
					       { "full", "complete" } };

	for (unsigned int mode = 0; mode < GLR_TENSORS_NR; mode++) {
		uint8_t buf[256] = {}, *p = buf + GLR_HDR_SIZE + GLR_CHUNK_HDR, *rec = p, *f;
		struct replayed r;

		f = put_record(rec, GLR_TENSORS, 16);
		f[0] = mode;
		glr_put(f + 8, mode == GLR_TENSORS_SAMPLED ? 1 << 20 : 0, 8);
		rec = f + 16;
		f = put_record(rec, GLR_WINDOW, 16); /* ignored but in windowed mode */
		glr_put(f, 5000000000ULL, 8);
		f[8] = GLR_WINDOW_OPEN;
		f[9] = 1;
		rec = f + 16;
		record__file_header(buf);
		record__chunk_header(p - GLR_CHUNK_HDR, 0, rec - p, rec - p, p);
		assert_int_equal(replay_of(buf, rec - buf, &r), 0);
		assert_int_equal(r.info->bad_records, 0);
		assert_non_null(r.snap->tensors);
		assert_string_equal(r.snap->tensors->mode, want[mode][0]);
		assert_string_equal(r.snap->tensors->mode, record__tensor_mode_name(mode));
		assert_string_equal(r.snap->tensors->coverage, want[mode][1]);
		assert_int_equal(r.snap->tensors->windows_total, mode == GLR_TENSORS_WINDOWED);
		assert_int_equal(r.snap->tensors->armed, mode != GLR_TENSORS_OFF);
		replayed_free(&r);
	}
	assert_null(record__tensor_mode_name(GLR_TENSORS_NR));
}

static void test_never_through_a_symlink(void **state)
{
	char target[160], sym[160], hard[160];
	struct recorder_opts ro = {};
	struct modules *m = modules__new();
	struct stacks *s = stacks__new();
	struct recorder *r;
	struct stat st;
	char *text;

	snprintf(target, sizeof(target), "%s/victim", dir);
	snprintf(sym, sizeof(sym), "%s/link.glr", dir);
	snprintf(hard, sizeof(hard), "%s/hard.glr", dir);
	unit_write_file(target, "precious\n");
	assert_int_equal(symlink(target, sym), 0);
	assert_null(recorder__new(sym, &ro));
	assert_int_equal(errno, ELOOP);
	assert_int_equal(link(target, hard), 0);
	assert_null(recorder__new(hard, &ro));
	assert_int_equal(errno, EMLINK);
	text = unit_read_file(target, NULL);
	assert_string_equal(text, "precious\n");
	free(text);
	assert_null(recorder__new(dir, &ro));
	/* a file someone else made there first */
	unit_write_file(path, "theirs\n");
	assert_int_equal(chown(path, 65534, 65534), 0);
	assert_null(recorder__new(path, &ro));
	assert_int_equal(errno, EPERM);
	unlink(path);
	/* an existing file of its own: refused unless replace */
	unit_write_file(path, "old contents, longer than a header and then some more\n");
	assert_int_equal(chmod(path, 0644), 0);
	assert_null(recorder__new(path, &ro));
	assert_int_equal(errno, EEXIST);
	/* replaced only by a recording that ends well: one that does not leaves it whole */
	ro.replace = true;
	r = recorder__new(path, &ro);
	assert_non_null(r);
	recorder__free(r);
	text = unit_read_file(path, NULL);
	assert_string_equal(text, "old contents, longer than a header and then some more\n");
	free(text);
	assert_int_equal(count_files(dir, ".rec.glr."), 0);
	r = recorder__new(path, &ro);
	assert_non_null(r);
	recorder__begin(r, m, s, 1, 1000000);
	assert_int_equal(recorder__finish(r, 2, NULL, 0, 0), 0);
	recorder__free(r);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	text = unit_read_file(path, NULL);
	assert_memory_equal(text, GLR_MAGIC, 8);
	free(text);
	unlink(path);
	ro.replace = false;
	r = recorder__new(path, &ro);
	assert_non_null(r);
	recorder__free(r);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	unlink(path);
	stacks__free(s);
	modules__free(m);
}

/* Two recorders of one path at once: the second is refused, the first's file stays whole;
 * a recorder that recorded nothing removes only what it made. */
static void test_one_recorder_a_path(void **state)
{
	struct recorder_opts ro = { .replace = true };
	struct modules *m = modules__new();
	struct stacks *s = stacks__new();
	struct recorder *a, *b;
	char *text;

	a = recorder__new(path, &ro);
	assert_non_null(a);
	b = recorder__new(path, &ro);
	assert_null(b);
	assert_int_equal(errno, EBUSY);
	recorder__begin(a, m, s, 1, 1000000);
	assert_int_equal(recorder__finish(a, 2, NULL, 0, 0), 0);
	recorder__free(a);
	text = unit_read_file(path, NULL);
	assert_memory_equal(text, GLR_MAGIC, 8);
	free(text);
	/* discarding a replacement keeps the old file; discarding a new file removes it */
	a = recorder__new(path, &ro);
	assert_non_null(a);
	recorder__discard(a);
	assert_int_equal(access(path, F_OK), 0);
	unlink(path);
	a = recorder__new(path, &ro);
	assert_non_null(a);
	recorder__discard(a);
	assert_int_equal(access(path, F_OK), -1);
	stacks__free(s);
	modules__free(m);
}

struct seen {
	uint32_t stack;
	uint32_t type;
	int calls;
};

static void on_applied(void *ctx, const void *data, size_t size, uint32_t stack)
{
	struct seen *s = ctx;

	s->type = ((const struct gl_hdr *)data)->type;
	s->stack = stack;
	s->calls++;
}

/* books__replay_call charges the given stack; 0 behaves as a call whose stack never came. */
static void test_books_replay_call(void **state)
{
	struct books_opts bo = { .series_width_ns = 1000000000ULL, .no_proc_files = true };
	struct modules *m = modules__new();
	struct stacks *s = stacks__new();
	struct books *b = books__new(m, s, NULL, NULL, &bo);
	struct frame f = { 0x10, 0, FRAME_UNKNOWN };
	uint32_t id = stacks__intern(s, &f, 1);
	struct seen seen = {};
	struct books_hooks h = { .applied = on_applied, .ctx = &seen };
	struct gl_call c = { .hdr = { GL_REC_CALL, sizeof(c), 5, 5, 99, 1000 },
			     .api = GL_API_cuMemAlloc_v2, .op = GL_OP_ALLOC, .kind = GL_KIND_DPTR,
			     .cls = GL_CLASS_DEVICE, .key = 0x1000, .bytes = 4096, .dev = -1 };
	struct proc *p;
	struct agg_key k = { .stack = id, .cls = GL_CLASS_DEVICE };

	assert_non_null(b);
	books__set_hooks(b, &h);
	assert_ptr_equal(books__hooks(b)->ctx, &seen);
	assert_int_equal(books__replay_call(b, &c, id), 0);
	assert_int_equal(seen.stack, id);
	assert_int_equal(seen.type, GL_REC_CALL);
	p = procs__find_pid(books__procs(b), 5);
	assert_non_null(p);
	assert_int_equal(((struct agg *)htab__lookup(p->aggs, &k))->bytes, 4096);
	c.key = 0x2000;
	assert_int_equal(books__replay_call(b, &c, 0), 0);
	assert_int_equal(seen.stack, 0);
	assert_int_equal(books__counters(b)->stack_missing, 1);
	assert_int_equal(proc__totals(p)->bytes[GL_CLASS_DEVICE], 8192);
	/* only call records replay */
	c.hdr.type = GL_REC_STACK;
	assert_int_equal(books__replay_call(b, &c, id), -EINVAL);
	assert_int_equal(books__counters(b)->malformed, 1);
	assert_int_equal(seen.calls, 2);
	books__free(b);
	stacks__free(s);
	modules__free(m);
}

static int parse(struct gl_opts *o, const char *const *args)
{
	char *argv[32];
	struct unit_stderr cap;
	int argc = 0, rc;

	argv[argc++] = (char *)"gpuleak";
	while (*args)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	unit_stderr_begin(&cap);
	rc = cli__parse(argc, argv, o);
	free(unit_stderr_end(&cap));
	return rc;
}

static void test_command_lines(void **state)
{
	const char *rec_cmd[] = { "record", "-o", "f.glr", "--max-size", "1M", "--", "python3",
				  "train.py", NULL };
	const char *rec_pids[] = { "record", "--output", "f.glr", "-p", "13", "12", NULL };
	const char *rec_all[] = { "record", "-a", "-o", "f.glr", "--keep-modules", "/s",
				  "--keep-modules-max", "10M", NULL };
	const char *rep[] = { "report", "f.glr", "--json", "-", "--top", "3", "--debug-dir", "/a",
			      "--debug-dir", "/b", NULL };
	struct gl_opts o;

	assert_int_equal(parse(&o, rec_cmd), EXIT_OK);
	assert_int_equal(o.cmd, CMD_RECORD);
	assert_string_equal(o.record_path, "f.glr");
	assert_int_equal(o.max_size, 1 << 20);
	assert_string_equal(o.argv[0], "python3");
	assert_int_equal(parse(&o, rec_pids), EXIT_OK);
	assert_null(o.argv);
	assert_int_equal(o.nr_pids, 2);
	assert_int_equal(parse(&o, rec_all), EXIT_OK);
	assert_true(o.all);
	assert_string_equal(o.keep_dir, "/s");
	assert_int_equal(o.keep_max, 10 << 20);
	assert_int_equal(parse(&o, rep), EXIT_OK);
	assert_int_equal(o.cmd, CMD_REPORT);
	assert_string_equal(o.record_path, "f.glr");
	assert_string_equal(o.out[REPORT_JSON], "-");
	assert_int_equal(o.top, 3);
	assert_int_equal(o.nr_debug_dirs, 2);
	assert_string_equal(o.debug_dirs[1], "/b");
	assert_int_equal(parse(&o, (const char *[]){ "record", "12", NULL }), EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "record", "-o", "f", NULL }), EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "record", "-o", "f", "-a", "--", "x", NULL }),
			 EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "record", "-o", "f", "--max-size", "1k", "1",
						    NULL }), EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "attach", "-o", "f", "1", NULL }), EXIT_USAGE);
	/* record writes its own session's final report as JSON, and no other report */
	assert_int_equal(parse(&o, (const char *[]){ "record", "-o", "f", "--json", "j", "1", NULL }),
			 EXIT_OK);
	assert_string_equal(o.out[REPORT_JSON], "j");
	assert_int_equal(parse(&o, (const char *[]){ "record", "-o", "f", "--svg", "j", "1", NULL }),
			 EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "attach", "--debug-dir", "d", "1", NULL }),
			 EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "report", NULL }), EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "report", "a", "b", NULL }), EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "report", "-a", "f", NULL }), EXIT_USAGE);
	assert_int_equal(parse(&o, (const char *[]){ "report", "f", "--bogus", NULL }), EXIT_USAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reports_of_a_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_end_record, setup, teardown),
		cmocka_unit_test_setup_teardown(test_max_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_at_every_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_any_damaged_byte_is_seen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_damaged_chunk_costs_itself_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_not_recordings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_and_malformed_records, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tensor_windows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tensor_windows_per_process, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tensor_windows_without_pid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tensor_windows_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_tensor_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tensor_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_never_through_a_symlink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_recorder_a_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_books_replay_call, setup, teardown),
		cmocka_unit_test_setup_teardown(test_command_lines, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
