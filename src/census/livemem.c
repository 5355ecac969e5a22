// SPDX-License-Identifier: BSD-2-Clause
/*
 * livemem.c - page-cached reads of a live process's memory for the census.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "livemem.h"
#include "util/htab.h"

#define PAGE 4096ULL

struct census_live {
	int pid;
	struct htab *pages; /* page address -> uint8_t * (NULL: unreadable) */
	uint64_t bytes, max_bytes, calls;
	uint64_t last_page; /* the page read last, most reads fall in it again */
	const uint8_t *last;
};

static ssize_t direct(struct census_live *l, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
	ssize_t n;

	l->calls++;
	n = process_vm_readv(l->pid, &local, 1, &remote, 1, 0);
	return n < 0 ? -errno : n;
}

/* The cached page at page (read now if new); NULL if unreadable or not cacheable. */
static const uint8_t *page_of(struct census_live *l, uint64_t page, bool *cacheable)
{
	uint8_t **slot, *p;
	bool created;

	*cacheable = true;
	if (l->last && l->last_page == page)
		return l->last;
	slot = htab__lookup(l->pages, &page);
	if (slot && *slot) {
		l->last_page = page;
		l->last = *slot;
	}
	if (slot)
		return *slot;
	if (l->bytes + PAGE > l->max_bytes) {
		*cacheable = false;
		return NULL;
	}
	p = malloc(PAGE);
	if (p && direct(l, page, p, PAGE) != (ssize_t)PAGE) {
		free(p);
		p = NULL;
	}
	slot = htab__upsert(l->pages, &page, &created);
	if (!slot) {
		free(p);
		*cacheable = false;
		return NULL;
	}
	*slot = p;
	if (p)
		l->bytes += PAGE;
	return p;
}

static ssize_t live_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct census_live *l = ctx;
	size_t done = 0;

	while (done < len) {
		uint64_t a = addr + done, page = a & ~(PAGE - 1);
		size_t n = PAGE - (a - page);
		bool cacheable;
		const uint8_t *p;

		if (n > len - done)
			n = len - done;
		p = page_of(l, page, &cacheable);
		if (!p && !cacheable) {
			ssize_t r = direct(l, a, (uint8_t *)buf + done, len - done);

			return r < 0 ? (done ? (ssize_t)done : r) : (ssize_t)(done + r);
		}
		if (!p)
			return done ? (ssize_t)done : -EFAULT;
		memcpy((uint8_t *)buf + done, p + (a - page), n);
		done += n;
	}
	return done;
}

struct census_live *census_live__new(int pid, uint64_t max_bytes)
{
	struct census_live *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->pid = pid;
	l->max_bytes = max_bytes;
	l->pages = htab__new(sizeof(uint64_t), sizeof(uint8_t *));
	if (!l->pages) {
		free(l);
		return NULL;
	}
	return l;
}

void census_live__free(struct census_live *l)
{
	size_t iter = 0;
	uint8_t **p;

	if (!l)
		return;
	while ((p = htab__next(l->pages, &iter, NULL)))
		free(*p);
	htab__free(l->pages);
	free(l);
}

struct census_mem census_live__mem(struct census_live *l)
{
	return (struct census_mem){ .read = live_read, .ctx = l };
}

uint64_t census_live__calls(const struct census_live *l)
{
	return l->calls;
}
