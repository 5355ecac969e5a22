// SPDX-License-Identifier: BSD-2-Clause
/*
 * mouth.c - the ring buffer's mouth (mouth.h).
 *
 * The backlog is a list of chunks, records laid end to end: slots of one region
 * reserved at the start, taken in turn and given back in the same order (a
 * record larger than a slot, or a backlog of large records' wasted tails, gets
 * a mapping of its own). The thread makes no mapping while records flow: a
 * mapping, or a populate, waits for the address space's lock, which another
 * thread of gpuleak's may hold (to map an ELF file it unwinds with, a large
 * allocation) and, starved of CPU, keep; on the CPU machine that held a
 * burst's copying up long enough to fill a 16 MiB ring in about one run in ten
 * of test_load's burst. A fault takes none (the kernel locks the one mapping
 * it faults in, from Linux 6.4). The region asks for huge pages, so that a
 * slot is faulted in at once, not a page at a time (a fault a page cost a
 * fill up to 90 ms on that guest); the reader drops a slot's pages as it
 * gives it back.
 *
 * One writer appends: the thread, once it runs (before, a reader that fills in
 * its own thread; ring_lock keeps the two apart); one reader takes from the
 * front. Once the thread runs, a reader's fill asks it for one (kick_fd)
 * rather than read the ring itself: a reader preempted while it read (a main
 * thread starved on a busy CPU) would hold the thread, and the ring's
 * draining, up for as long as it waits for a CPU, and the ring would fill. A
 * record is published by the release store of its chunk's tail, a chunk
 * closed by the release store of its next: the reader sees a record whole, and
 * a chunk as finished only once every record in it was published.
 */
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "gpuleak_abi.h"
#include "mouth.h"

/* a slot: a huge page on x86-64 */
#define CHUNK_BYTES (2 << 20)
/* the thread's wait when the programs raised no wakeup (their last records wait below
 * the wakeup threshold: the reader's kick at each of its timeouts fills too) */
#define IDLE_WAIT_MS 100
/* and while records flow: it looks at the ring this often itself, and the programs raise
 * no wakeup but the fill's (an interrupt the traced thread would pay; mouth_polls) */
#define POLL_MS 8
/* and while the backlog is at its limit */
#define FULL_WAIT_US 1000
/*
 * Records one fill copies at most: libbpf reads for as long as records keep coming, and
 * under a stream that never pauses the reader must hear of copies (event_fd) as they
 * are made, and a kick or a stop be seen between two fills.
 */
#define FILL_RECORDS 4096
/* The thread's nice value where it may set it (root, CAP_SYS_NICE). */
#define MOUTH_NICE (-10)

struct chunk {
	struct chunk *next; /* set once this chunk takes no more records */
	size_t cap;	    /* bytes of data */
	size_t tail;	    /* bytes published */
	bool slot;	    /* one of the region's, else mapped for itself */
	unsigned char data[] __attribute__((aligned(8))); /* records are 8-byte aligned */
};

struct mouth {
	struct ring_buffer *rb;
	const unsigned long *cons; /* the ring's consumer position */
	uint32_t (*trim)(const void *data, uint32_t size);
	uint32_t *polls; /* the programs' mouth_polls, or NULL */
	size_t limit;
	pthread_mutex_t ring_lock; /* one writer: the ring's reads and the appends */
	unsigned char *region;	   /* nr_slots slots of CHUNK_BYTES */
	size_t nr_slots;
	/* the writer's */
	uint64_t slots_taken;
	struct chunk *tail;
	uint64_t peak, full;
	uint64_t lost[4]; /* by record type: read atomically */
	bool at_limit;
	unsigned int fill_left; /* records this fill may still copy */
	/* the reader's */
	struct chunk *head;
	size_t head_off;
	uint64_t slots_freed;	/* slots the reader gave back: atomically */
	unsigned long last_end; /* the end of the last record taken */
	size_t bytes;		/* in the backlog: both, atomically */
	int event_fd;		/* written after the thread copied records */
	int stop_fd;		/* written to end the thread */
	int kick_fd;		/* written by a reader that wants a fill */
	int epoll_fd;
	pthread_t thread;
	bool started;
	bool stopping; /* the thread ends at its next look: atomically */
};

static size_t rec_bytes(uint32_t size)
{
	return (sizeof(struct mouth_rec) + size + 7) & ~(size_t)7;
}

/* A chunk mapped for itself, for a record larger than a slot or past the slots. */
static struct chunk *chunk_map(size_t need)
{
	size_t bytes = sizeof(struct chunk) + (need > CHUNK_BYTES ? need : CHUNK_BYTES);
	struct chunk *c = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (c == MAP_FAILED)
		return NULL;
	c->cap = bytes - sizeof(*c);
	return c;
}

/*
 * The region: nr_slots slots, aligned to a slot so that each can be a huge page,
 * reserved (no memory until written). NULL on failure.
 */
static unsigned char *map_region(size_t nr_slots)
{
	size_t bytes = nr_slots * CHUNK_BYTES;
	unsigned char *p = mmap(NULL, bytes + CHUNK_BYTES, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	unsigned char *at;

	if (p == MAP_FAILED)
		return NULL;
	at = (unsigned char *)(((uintptr_t)p + CHUNK_BYTES - 1) & ~(uintptr_t)(CHUNK_BYTES - 1));
	if (at > p)
		munmap(p, (size_t)(at - p));
	munmap(at + bytes, (size_t)(p + CHUNK_BYTES - at));
	/* where transparent huge pages are off, a slot's pages fault in one at a time */
	(void)madvise(at, bytes, MADV_HUGEPAGE);
	return at;
}

/* The writer's next chunk: the region's next slot where it is free and need fits. */
static struct chunk *chunk_get(struct mouth *m, size_t need)
{
	struct chunk *c;

	if (sizeof(*c) + need > CHUNK_BYTES ||
	    m->slots_taken - __atomic_load_n(&m->slots_freed, __ATOMIC_ACQUIRE) >= m->nr_slots)
		return chunk_map(need);
	c = (struct chunk *)(m->region + (m->slots_taken++ % m->nr_slots) * CHUNK_BYTES);
	c->next = NULL;
	c->cap = CHUNK_BYTES - sizeof(*c);
	c->tail = 0;
	c->slot = true;
	return c;
}

/* The reader is done with chunk c: its slot's pages dropped and the slot given back. */
static void chunk_put(struct mouth *m, struct chunk *c)
{
	if (!c->slot) {
		munmap(c, sizeof(*c) + c->cap);
		return;
	}
	(void)madvise(c, CHUNK_BYTES, MADV_DONTNEED);
	__atomic_add_fetch(&m->slots_freed, 1, __ATOMIC_RELEASE);
}

/* libbpf's callback: the record is consumed once this returns, whatever it returns */
static int on_ring_record(void *ctx, void *data, size_t ring_size)
{
	struct mouth *m = ctx;
	uint32_t size = m->trim ? m->trim(data, (uint32_t)ring_size) : (uint32_t)ring_size;
	size_t need = rec_bytes(size), total;
	struct mouth_rec *r;
	struct chunk *c = m->tail;

	if (c->tail + need > c->cap) {
		struct chunk *n = chunk_get(m, need);

		if (!n) {
			const struct gl_hdr *h = data;
			uint32_t type = ring_size >= sizeof(*h) && h->type < 4 ? h->type : 0;

			/* consumed from the ring: lost, and said as lost */
			__atomic_add_fetch(&m->lost[type], 1, __ATOMIC_RELAXED);
			return 0;
		}
		__atomic_store_n(&c->next, n, __ATOMIC_RELEASE);
		m->tail = c = n;
	}
	r = (struct mouth_rec *)(c->data + c->tail);
	/* libbpf stores the consumer position after this callback: it is this record's */
	r->start = __atomic_load_n(m->cons, __ATOMIC_RELAXED);
	r->end = r->start + ((ring_size + BPF_RINGBUF_HDR_SZ + 7) & ~7UL);
	r->size = size;
	r->ring_size = (uint32_t)ring_size;
	memcpy(r->data, data, size);
	__atomic_store_n(&c->tail, c->tail + need, __ATOMIC_RELEASE);
	total = __atomic_add_fetch(&m->bytes, need, __ATOMIC_RELAXED);
	if (total > m->peak)
		m->peak = total;
	if (total >= m->limit) {
		if (!m->at_limit)
			m->full++;
		m->at_limit = true;
		return -EAGAIN; /* the next records stay in the ring */
	}
	m->at_limit = false;
	return --m->fill_left ? 0 : -EAGAIN;
}

/* Copies what the ring holds, FILL_RECORDS at most; *cut: it held more. */
static int fill(struct mouth *m, bool *cut)
{
	int n;

	*cut = false;
	pthread_mutex_lock(&m->ring_lock);
	if (__atomic_load_n(&m->bytes, __ATOMIC_RELAXED) >= m->limit) {
		pthread_mutex_unlock(&m->ring_lock);
		return 0;
	}
	m->fill_left = FILL_RECORDS;
	n = ring_buffer__consume(m->rb);
	*cut = !m->fill_left;
	pthread_mutex_unlock(&m->ring_lock);
	return n == -EAGAIN ? 1 : n;
}

int mouth__fill(struct mouth *m)
{
	uint64_t one = 1;
	bool cut;

	if (!m->started) /* set by the reader's thread */
		return fill(m, &cut);
	if (write(m->kick_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: the thread has a kick waiting already */
	}
	return 0;
}

/* The thread needs no privilege to read a ring already mapped: it keeps none. */
static void drop_all_capabilities(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = {};

	syscall(SYS_capset, &h, d);
}

static void *mouth_main(void *arg)
{
	struct mouth *m = arg;
	uint64_t one = 1;
	bool cut = false, polling = false;

	/* first when it wakes: its work is short (a copy of what the programs wrote), and a
	 * turn missed on a busy machine loses records once the ring is full. It takes
	 * what the jobs' records cost and no more; without CAP_SYS_NICE it stays as it is. */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), MOUTH_NICE);
	prctl(PR_SET_NAME, "gpuleak-ring"); /* as ps -L and top show it */
	drop_all_capabilities();
	while (!__atomic_load_n(&m->stopping, __ATOMIC_ACQUIRE)) {
		struct epoll_event ev[3];
		bool timed_out = false;
		int n, got;

		if (__atomic_load_n(&m->bytes, __ATOMIC_RELAXED) >= m->limit) {
			usleep(FULL_WAIT_US);
			n = 0;
		} else {
			/* no wait while the last fill left records in the ring */
			n = epoll_wait(m->epoll_fd, ev, 3,
				       cut     ? 0 :
				       polling ? POLL_MS :
						 IDLE_WAIT_MS);
			timed_out = !n && !cut;
		}
		for (int i = 0; i < n; i++) {
			uint64_t kicks;

			if (ev[i].data.fd == m->stop_fd)
				return NULL;
			if (ev[i].data.fd == m->kick_fd &&
			    read(m->kick_fd, &kicks, sizeof(kicks)) < 0) {
				/* taken by an earlier read: the fill below is for them all */
			}
		}
		got = fill(m, &cut);
		if (got > 0 && write(m->event_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: the reader has a wakeup waiting already */
		}
		/* records came since the last look: poll until a look a whole POLL_MS after
		 * the last finds none (a look at a kick or a wakeup may come just after a
		 * fill). A record submitted as the flag falls waits for the reader's next
		 * kick, as one below the wakeup threshold always has. */
		if (m->polls && (got > 0 || (polling && !timed_out)) != polling) {
			polling = !polling;
			__atomic_store_n(m->polls, polling, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

struct mouth *mouth__new(int ring_fd, const unsigned long *cons, size_t limit,
			 uint32_t (*trim)(const void *data, uint32_t size), uint32_t *polls)
{
	struct mouth *m = calloc(1, sizeof(*m));
	struct epoll_event ev = { .events = EPOLLIN };
	int err;

	if (!m)
		return NULL;
	m->event_fd = m->stop_fd = m->kick_fd = m->epoll_fd = -1;
	m->cons = cons;
	m->trim = trim;
	m->polls = polls;
	m->limit = limit;
	pthread_mutex_init(&m->ring_lock, NULL);
	/* the limit, and a slot's tail each record may leave unused, and one being read */
	m->nr_slots = (limit + CHUNK_BYTES - 1) / CHUNK_BYTES + 2;
	m->region = map_region(m->nr_slots);
	if (!m->region)
		goto fail;
	m->head = m->tail = chunk_get(m, 0);
	if (!m->head)
		goto fail;
	m->rb = ring_buffer__new(ring_fd, on_ring_record, m, NULL);
	if (!m->rb)
		goto fail;
	m->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	m->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	m->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	m->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (m->event_fd < 0 || m->stop_fd < 0 || m->kick_fd < 0 || m->epoll_fd < 0)
		goto fail;
	ev.data.fd = ring_buffer__epoll_fd(m->rb);
	if (epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev))
		goto fail;
	ev.data.fd = m->stop_fd;
	if (epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev))
		goto fail;
	ev.data.fd = m->kick_fd;
	if (epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, ev.data.fd, &ev))
		goto fail;
	return m;
fail:
	err = errno;
	mouth__free(m);
	errno = err;
	return NULL;
}

int mouth__start(struct mouth *m)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&m->thread, NULL, mouth_main, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	m->started = true;
	return 0;
}

void mouth__free(struct mouth *m)
{
	uint64_t one = 1;
	struct chunk *c, *next;

	if (!m)
		return;
	if (m->started) {
		__atomic_store_n(&m->stopping, true, __ATOMIC_RELEASE);
		if (write(m->stop_fd, &one, sizeof(one)) != sizeof(one)) {
			/* the thread sees the flag at its next wait's end (at most IDLE_WAIT_MS) */
		}
		pthread_join(m->thread, NULL);
	}
	ring_buffer__free(m->rb);
	for (c = m->head; c; c = next) {
		next = c->next;
		if (!c->slot)
			munmap(c, sizeof(*c) + c->cap);
	}
	if (m->region)
		munmap(m->region, m->nr_slots * CHUNK_BYTES);
	for (int *fd = &m->event_fd; fd <= &m->epoll_fd; fd++)
		if (*fd >= 0)
			close(*fd);
	pthread_mutex_destroy(&m->ring_lock);
	free(m);
}

const struct mouth_rec *mouth__peek(struct mouth *m)
{
	for (;;) {
		struct chunk *c = m->head, *next;

		if (m->head_off < __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE))
			return (const struct mouth_rec *)(c->data + m->head_off);
		next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
		if (!next)
			return NULL;
		/* closed, and every record in it taken: the writer is past it */
		if (m->head_off < __atomic_load_n(&c->tail, __ATOMIC_ACQUIRE))
			continue;
		m->head = next;
		m->head_off = 0;
		chunk_put(m, c);
	}
}

void mouth__pop(struct mouth *m)
{
	const struct mouth_rec *r = mouth__peek(m);
	size_t need;

	if (!r)
		return;
	need = rec_bytes(r->size);
	m->last_end = r->end;
	m->head_off += need;
	__atomic_sub_fetch(&m->bytes, need, __ATOMIC_RELAXED);
}

unsigned long mouth__taken(struct mouth *m)
{
	/* the position first: a record copied after it was read lies above it */
	unsigned long cons = __atomic_load_n(m->cons, __ATOMIC_ACQUIRE);
	const struct mouth_rec *r = mouth__peek(m);

	if (r)
		return r->start;
	return cons > m->last_end ? cons : m->last_end;
}

int mouth__event_fd(const struct mouth *m)
{
	return m->event_fd;
}

bool mouth__clear_event(struct mouth *m)
{
	uint64_t v;

	/* fails (EAGAIN) where nothing was written */
	return read(m->event_fd, &v, sizeof(v)) == sizeof(v);
}

void mouth__stats(struct mouth *m, struct mouth_stats *out)
{
	pthread_mutex_lock(&m->ring_lock);
	out->peak_bytes = m->peak;
	out->full = m->full;
	out->limit = m->limit;
	for (int i = 0; i < 4; i++)
		out->lost[i] = __atomic_load_n(&m->lost[i], __ATOMIC_RELAXED);
	pthread_mutex_unlock(&m->ring_lock);
}
