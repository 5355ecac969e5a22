// SPDX-License-Identifier: BSD-2-Clause
/*
 * event.c - record validation. Everything after this check may trust the
 * counts inside a record; nothing before it may.
 */
#include <errno.h>
#include "event.h"

int event__validate(const void *data, size_t size)
{
	const struct gl_hdr *h = data;
	const struct gl_stack *s = data;
	uint64_t need;

	if (!data || size < sizeof(*h) || h->size != size)
		return -EINVAL;
	switch (h->type) {
	case GL_REC_CALL:
		if (h->size != sizeof(struct gl_call) ||
		    ((const struct gl_call *)data)->api >= GL_NR_APIS ||
		    ((const struct gl_call *)data)->kind >= GL_NR_KINDS)
			return -EINVAL;
		return GL_REC_CALL;
	case GL_REC_PROC: return h->size == sizeof(struct gl_proc) ? GL_REC_PROC : -EINVAL;
	case GL_REC_STACK:
		if (h->size < sizeof(*s) || s->nr_ips > GL_MAX_FP_FRAMES ||
		    s->nr_py > GL_MAX_PY_FRAMES || s->stack_bytes > GL_MAX_STACK_COPY ||
		    s->api >= GL_NR_APIS || (s->cache_id && (s->nr_ips || s->stack_bytes)))
			return -EINVAL;
		need = sizeof(*s) + (uint64_t)s->nr_py * sizeof(struct gl_py_frame) +
		       (uint64_t)s->nr_ips * 8 + s->stack_bytes;
		return need == h->size ? GL_REC_STACK : -EINVAL;
	default: return -EINVAL;
	}
}

void event__stack_view(const void *data, struct stack_view *v)
{
	const uint8_t *p = data;

	v->rec = data;
	p += sizeof(struct gl_stack);
	v->py = (const struct gl_py_frame *)p;
	p += v->rec->nr_py * sizeof(struct gl_py_frame);
	v->ips = (const uint64_t *)p;
	p += v->rec->nr_ips * 8;
	v->stack = p;
}

int event__decode(const void *data, size_t size, struct event *ev)
{
	int type = event__validate(data, size);

	if (type < 0)
		return type;
	ev->type = type;
	ev->hdr = data;
	if (type == GL_REC_STACK)
		event__stack_view(data, &ev->stack);
	else if (type == GL_REC_CALL)
		ev->call = data;
	else
		ev->proc = data;
	return type;
}
