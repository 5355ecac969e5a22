// SPDX-License-Identifier: BSD-2-Clause
/*
 * pyoffsets.c - CPython layouts: a table for 3.10 to 3.12 (offsetof() of
 * each field in CPython's own headers, x86-64 release builds, checked
 * against 3.10.13, 3.11.2, 3.11.7 and 3.12.1), and a reader of the
 * _Py_DebugOffsets that 3.13 and later keep at the start of _PyRuntime.
 */
#include <errno.h>
#include <string.h>
#include "pyoffsets.h"

/* Words of _Py_DebugOffsets (after the 8-byte cookie, each a uint64_t), per layout. */
struct debug_words {
	int free_threaded;
	int rt_size, rt_interp_head;
	int is_size, is_next, is_threads_head;
	int ts_size, ts_next, ts_interp, ts_frame, ts_thread_id, ts_native_tid;
	int fr_size, fr_previous, fr_code, fr_instr, fr_owner;
	int co_size, co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_code;
	int bytes_size, bytes_len, bytes_data;
	int str_size, str_state, str_length, str_ascii_size;
	int owner_shim;
};

/* 3.13: interpreter_state has 13 words, interpreter_frame 6, code_object 10. */
/* fields grouped by the structure they describe */
/* clang-format off */
static const struct debug_words words_3_13 = {
	.free_threaded = 2,
	.rt_size = 3, .rt_interp_head = 5,
	.is_size = 6, .is_next = 8, .is_threads_head = 9,
	.ts_size = 19, .ts_next = 21, .ts_interp = 22, .ts_frame = 23, .ts_thread_id = 24,
	.ts_native_tid = 25,
	.fr_size = 28, .fr_previous = 29, .fr_code = 30, .fr_instr = 31, .fr_owner = 33,
	.co_size = 34, .co_filename = 35, .co_name = 36, .co_qualname = 37, .co_linetable = 38,
	.co_firstlineno = 39, .co_code = 43,
	.bytes_size = 64, .bytes_len = 65, .bytes_data = 66,
	.str_size = 67, .str_state = 68, .str_length = 69, .str_ascii_size = 70,
	.owner_shim = 3, /* FRAME_OWNED_BY_CSTACK */
};
/* clang-format on */

/*
 * 3.14: interpreter_state gained threads_main, code_object_generation and
 * tlbc_generation; interpreter_frame stackpointer and tlbc_index; code_object
 * co_tlbc; a set_object block sits before dict_object.
 */
/* fields grouped by the structure they describe */
/* clang-format off */
static const struct debug_words words_3_14 = {
	.free_threaded = 2,
	.rt_size = 3, .rt_interp_head = 5,
	.is_size = 6, .is_next = 8, .is_threads_head = 9,
	.ts_size = 22, .ts_next = 24, .ts_interp = 25, .ts_frame = 26, .ts_thread_id = 27,
	.ts_native_tid = 28,
	.fr_size = 31, .fr_previous = 32, .fr_code = 33, .fr_instr = 34, .fr_owner = 36,
	.co_size = 39, .co_filename = 40, .co_name = 41, .co_qualname = 42, .co_linetable = 43,
	.co_firstlineno = 44, .co_code = 48,
	.bytes_size = 74, .bytes_len = 75, .bytes_data = 76,
	.str_size = 77, .str_state = 78, .str_length = 79, .str_ascii_size = 80,
	.owner_shim = 3, /* FRAME_OWNED_BY_INTERPRETER, then FRAME_OWNED_BY_CSTACK */
};
/* clang-format on */

static void common_objects(struct py_layout *l, uint16_t ascii_size, uint16_t compact_extra)
{
	l->ts_interp = 16;
	l->ob_type = 8;
	l->str_state = 32;
	l->str_length = 16;
	l->str_ascii_data = ascii_size;
	l->str_compact_data = ascii_size + compact_extra;
	l->bytes_size = 16;
	l->bytes_data = 32;
}

int pyoffsets__table(int minor, uint32_t hexversion, struct py_layout *out)
{
	struct py_layout *l = out;
	struct gl_py_proc *w = &out->walk;

	memset(out, 0, sizeof(*out));
	l->minor = minor;
	l->hexversion = hexversion;
	w->version = 3 << 8 | minor;
	switch (minor) {
	case 10:
		*w = (struct gl_py_proc){
			.version = w->version,
			.flags = GL_PY_F_LASTI_INT | GL_PY_F_ALL_ENTRY,
			.rt_interp_head = 32,
			.is_next = 0,
			.is_threads_head = 8,
			.ts_next = 8,
			.ts_thread_id = 176,
			.ts_frame = 24,
			.fr_previous = 24,
			.fr_code = 32,
			.fr_instr = 96,
			.win_ts = 184,
			.win_fr = 100,
		};
		common_objects(l, 48, 24);
		l->co_filename = 104;
		l->co_name = 112;
		l->co_qualname = 112; /* 3.10 has no co_qualname */
		l->co_linetable = 120;
		l->co_firstlineno = 40;
		l->co_size = 128;
		return 0;
	case 11:
		*w = (struct gl_py_proc){
			.version = w->version,
			.flags = GL_PY_F_CFRAME | GL_PY_F_IS_ENTRY | GL_PY_F_NATIVE_TID,
			.rt_interp_head = 40,
			.is_next = 0,
			.is_threads_head = 16,
			.ts_next = 8,
			.ts_thread_id = 152,
			.ts_native_tid = 160,
			.ts_frame = 56,
			.cf_frame = 8,
			.fr_previous = 48,
			.fr_code = 32,
			.fr_instr = 56,
			.fr_is_entry = 68,
			.fr_owner = 69,
			.co_code = 184,
			.win_ts = 168,
			.win_fr = 72,
		};
		common_objects(l, 48, 24);
		break;
	case 12:
		*w = (struct gl_py_proc){
			.version = w->version,
			.flags = GL_PY_F_CFRAME | GL_PY_F_NATIVE_TID,
			.rt_interp_head = 40,
			.is_next = 0,
			.is_threads_head = 72,
			.ts_next = 8,
			.ts_thread_id = 136,
			.ts_native_tid = 144,
			.ts_frame = 56,
			.cf_frame = 0,
			.fr_previous = 8,
			.fr_code = 0,
			.fr_instr = 56,
			.fr_owner = 70,
			.owner_shim = 3,
			.co_code = 192,
			.win_ts = 152,
			.win_fr = 72,
		};
		common_objects(l, 40, 16);
		break;
	default: return -ENOTSUP;
	}
	/* 3.11 and 3.12 agree on the code object's name fields */
	l->co_filename = 112;
	l->co_name = 120;
	l->co_qualname = 128;
	l->co_linetable = 136;
	l->co_firstlineno = minor == 11 ? 72 : 68;
	l->co_size = 144;
	return 0;
}

static uint64_t word(const uint8_t *buf, int i)
{
	uint64_t v;

	memcpy(&v, buf + 8 * i, sizeof(v));
	return v;
}

static uint16_t max16(uint16_t a, uint16_t b)
{
	return a > b ? a : b;
}

/* Each field inside its struct, the struct of a sane size, the walk's fields in a window. */
static int check_debug(const uint8_t *b, const struct debug_words *dw)
{
	const int pairs[][2] = {
		{ dw->rt_size, dw->rt_interp_head },  { dw->is_size, dw->is_next },
		{ dw->is_size, dw->is_threads_head }, { dw->ts_size, dw->ts_next },
		{ dw->ts_size, dw->ts_interp },	      { dw->ts_size, dw->ts_frame },
		{ dw->ts_size, dw->ts_thread_id },    { dw->ts_size, dw->ts_native_tid },
		{ dw->fr_size, dw->fr_previous },     { dw->fr_size, dw->fr_code },
		{ dw->fr_size, dw->fr_instr },	      { dw->fr_size, dw->fr_owner },
		{ dw->co_size, dw->co_filename },     { dw->co_size, dw->co_name },
		{ dw->co_size, dw->co_qualname },     { dw->co_size, dw->co_linetable },
		{ dw->co_size, dw->co_firstlineno },  { dw->co_size, dw->co_code },
		{ dw->bytes_size, dw->bytes_len },    { dw->bytes_size, dw->bytes_data },
		{ dw->str_size, dw->str_state },      { dw->str_size, dw->str_length },
	};

	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		uint64_t size = word(b, pairs[i][0]), off = word(b, pairs[i][1]);

		if (size == 0 || size > (1 << 20) || off >= size || off > 0xffff)
			return -EINVAL;
	}
	if (word(b, dw->ts_thread_id) > GL_PY_WINDOW - 8 ||
	    word(b, dw->ts_native_tid) > GL_PY_WINDOW - 8 ||
	    word(b, dw->ts_next) > GL_PY_WINDOW - 8 || word(b, dw->ts_frame) > GL_PY_WINDOW - 8 ||
	    word(b, dw->fr_size) > GL_PY_WINDOW || word(b, dw->str_ascii_size) > 256 ||
	    word(b, dw->co_size) > 4096)
		return -EINVAL;
	return 0;
}

int pyoffsets__from_debug(const void *buf, size_t len, struct py_layout *out)
{
	const uint8_t *b = buf;
	const struct debug_words *dw;
	struct gl_py_proc *w = &out->walk;
	uint64_t version;
	int minor, err;

	memset(out, 0, sizeof(*out));
	if (len < 8 * 16 || memcmp(b, "xdebugpy", 8))
		return -ENOENT;
	version = word(b, 1);
	if ((version >> 24) != 3 || ((version >> 16) & 0xff) < 13)
		return -ENOTSUP;
	minor = (version >> 16) & 0xff;
	dw = minor == 13 ? &words_3_13 : &words_3_14;
	if ((size_t)(dw->str_ascii_size + 1) * 8 > len)
		return -EINVAL;
	if (word(b, dw->free_threaded))
		return -ENOTSUP;
	err = check_debug(b, dw);
	if (err)
		return err;
	out->hexversion = version;
	out->minor = minor;
	w->version = 3 << 8 | minor;
	w->flags = GL_PY_F_NATIVE_TID;
	w->rt_interp_head = word(b, dw->rt_interp_head);
	w->is_next = word(b, dw->is_next);
	w->is_threads_head = word(b, dw->is_threads_head);
	w->ts_next = word(b, dw->ts_next);
	w->ts_thread_id = word(b, dw->ts_thread_id);
	w->ts_native_tid = word(b, dw->ts_native_tid);
	w->ts_frame = word(b, dw->ts_frame);
	w->fr_previous = word(b, dw->fr_previous);
	w->fr_code = word(b, dw->fr_code);
	w->fr_instr = word(b, dw->fr_instr);
	w->fr_owner = word(b, dw->fr_owner);
	w->owner_shim = dw->owner_shim;
	w->co_code = word(b, dw->co_code);
	w->win_ts =
		max16(max16(w->ts_next, w->ts_thread_id), max16(w->ts_native_tid, w->ts_frame)) + 8;
	w->win_fr = max16(max16(w->fr_previous, w->fr_code), w->fr_instr) + 8;
	w->win_fr = max16(w->win_fr, w->fr_owner + 1);
	out->ts_interp = word(b, dw->ts_interp);
	out->ob_type = 8;
	out->co_filename = word(b, dw->co_filename);
	out->co_name = word(b, dw->co_name);
	out->co_qualname = word(b, dw->co_qualname);
	out->co_linetable = word(b, dw->co_linetable);
	out->co_firstlineno = word(b, dw->co_firstlineno);
	out->co_size = max16(max16(out->co_filename, out->co_name),
			     max16(out->co_qualname, out->co_linetable)) +
		       8;
	out->co_size = max16(out->co_size, out->co_firstlineno + 4);
	out->str_state = word(b, dw->str_state);
	out->str_length = word(b, dw->str_length);
	out->str_ascii_data = word(b, dw->str_ascii_size);
	/* PyCompactUnicodeObject adds utf8_length and utf8 (3.12+) */
	out->str_compact_data = out->str_ascii_data + 16;
	out->bytes_size = word(b, dw->bytes_len);
	out->bytes_data = word(b, dw->bytes_data);
	return 0;
}
