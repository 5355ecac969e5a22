/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * recread.h - reading a recording (format in record.c) from a file or from
 * memory: chunks checked and inflated, records decoded and bounds-checked,
 * damage skipped and counted. Nothing after this check needs to distrust a
 * record's lengths; values are the writer's (or an attacker's) and are
 * validated where they are used.
 */
#ifndef GL_RECREAD_H
#define GL_RECREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "record.h"

struct rr_frame {
	uint8_t kind; /* enum glr_frame_kind (checked) */
	uint32_t mod;
	uint64_t addr;
};

/* One decoded record. Pointers are valid until the callback returns. */
struct rr_item {
	enum glr_type type;
	uint64_t chunk_off; /* file offset of the chunk holding it */
	union {
		struct {
			uint64_t start_ns, wall_ns, series_width_ns;
			uint8_t stack_mode;
			uint8_t flags; /* GLR_SESSION_* */
			const char *host, *version;
		} session;
		struct {
			uint32_t id;
			uint64_t dev, ino;
			const char *path;
			const char *build_id; /* lower-case hex digits only, "" if none */
		} module;
		struct {
			uint32_t id;
			const char *function, *file;
		} pycode;
		struct {
			uint32_t id, n;
			const struct rr_frame *frames;
		} stack;
		struct {
			uint32_t pid, ns_pid;
			uint64_t start_time, first_ns;
			char comm[16]; /* terminated */
		} procinfo;
		struct {
			uint32_t stack;
			struct gl_call call;
		} call;
		struct gl_proc proc;
		struct {
			uint64_t ts;
			uint64_t stats[GL_NR_STATS];
		} stats;
		struct {
			uint32_t pid;
			struct gl_proc_stats st;
		} bpf_proc;
		struct {
			uint64_t ts, max_size;
		} truncated;
		struct {
			uint64_t end_ns, calls, malformed;
			uint32_t nr_probes;
		} end;
		struct {
			uint8_t mode; /* enum glr_tensor_mode (checked) */
			uint64_t sample_bytes;
		} tensors;
		struct {
			uint64_t ts;
			uint8_t event; /* enum glr_window_event (checked) */
			uint8_t why;   /* < GLR_WHY_NR (checked) */
			uint8_t flags; /* GLR_WINDOW_FORGOT; unknown bits cleared */
			uint32_t pid;  /* whose window; 0: every process's (older recordings) */
		} window;
	} u;
};

/* What reading found, damage included. */
struct rr_counts {
	uint64_t file_bytes;	  /* bytes read or skipped, header included */
	uint64_t chunks;	  /* read whole */
	uint64_t bad_chunks;	  /* damaged: checksum, header or compressed data */
	uint64_t skipped_bytes;	  /* in damaged chunks, garbage between chunks, a cut end */
	uint64_t records;	  /* decoded and handed over */
	uint64_t bad_records;	  /* malformed inside a sound chunk */
	uint64_t unknown_records; /* of a type this version does not know (skipped) */
	bool cut;		  /* the file ends inside a chunk (writer killed, copy cut) */
	bool header_damaged;	  /* the header's checksum is wrong (read as version 1) */
};

struct rec_reader;

/*
 * Opens a recording and checks its header. Returns 0 with *out set, or
 * -errno with a one-line reason in why: -EBADMSG (not a gpuleak recording),
 * -EPROTONOSUPPORT (a format version this gpuleak does not read), or the
 * error of opening or reading the file.
 */
int recread__open(const char *path, struct rec_reader **out, char *why, size_t len);
/* The same over len bytes at data (not copied: they must outlive the reader). */
int recread__mem(const void *data, size_t size, struct rec_reader **out, char *why, size_t len);
void recread__free(struct rec_reader *r);

/*
 * Decodes every record in file order and calls fn for each sound one; fn
 * returning non-zero stops the reading and is returned. Returns 0, or -errno
 * when reading the file failed (what was read was handed over).
 */
int recread__each(struct rec_reader *r, int (*fn)(void *ctx, const struct rr_item *it), void *ctx);
const struct rr_counts *recread__counts(const struct rec_reader *r);
uint32_t recread__version(const struct rec_reader *r);

#endif /* GL_RECREAD_H */
