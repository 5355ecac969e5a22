// SPDX-License-Identifier: BSD-2-Clause
/*
 * http.c - the agent's HTTP/1.1 server: one listening socket and a fixed
 * table of clients, each reading one bounded request head, then writing one
 * reply and closing. Everything is non-blocking; the caller's poll() drives
 * it. A client that is slow, silent or sends garbage costs one slot until
 * its deadline at most. Compressible replies are gzipped when the client's
 * Accept-Encoding allows it. Parsing and compression are in http_proto.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "http.h"
#include "util/log.h"

#define ACCEPT_BURST 16

enum client_state { C_FREE = 0, C_READ, C_WRITE };

struct client {
	enum client_state state;
	int fd;
	uint64_t deadline_ms;
	size_t len; /* bytes read */
	char *in;   /* max_request + 1 bytes */
	char *out;  /* head + body */
	size_t out_len, out_off;
};

struct http_server {
	int fd;
	struct http_opts o;
	http_handler_fn fn;
	void *ctx;
	struct client *clients;
	struct http_stats stats;
	char bound[80];
	uint64_t accept_paused_until_ms; /* out of descriptors: the listener rests until then */
	bool said_emfile;
};

/* The listener rests this long after accept ran out of descriptors or memory. */
#define ACCEPT_BACKOFF_MS 200

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->state = C_FREE;
	c->len = c->out_len = c->out_off = 0;
}

/*
 * Builds the reply (head, then body unless HEAD) into c->out, gzipped when
 * the reply may be and the client allows it. Returns 0 or -ENOMEM.
 */
static int set_reply(struct client *c, const struct http_reply *rep, bool head, bool gzip)
{
	const char *type = rep->content_type ? rep->content_type : "text/plain; charset=utf-8";
	const char *body = rep->body;
	size_t len = rep->len;
	char hdr[512], *zbody = NULL;
	int n, err = 0;

	/* without memory to compress, the plain body is as good an answer */
	if (gzip && rep->compressible && len && http__gzip(body, len, &zbody, &len) == 0)
		body = zbody;
	else
		len = rep->len;
	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\nCache-Control: no-store\r\n%s%s%s\r\n",
		     rep->status, http__reason(rep->status), type, len,
		     rep->status == 405 ? "Allow: GET, HEAD, POST\r\n" : "",
		     rep->compressible ? "Vary: Accept-Encoding\r\n" : "",
		     zbody ? "Content-Encoding: gzip\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(hdr)) {
		err = -EINVAL;
		goto cleanup;
	}
	c->out_len = n + (head ? 0 : len);
	c->out = malloc(c->out_len);
	if (!c->out) {
		err = -ENOMEM;
		goto cleanup;
	}
	memcpy(c->out, hdr, n);
	if (!head && len)
		memcpy(c->out + n, body, len);
	c->out_off = 0;
	c->state = C_WRITE;
cleanup:
	free(zbody);
	return err;
}

static void reply_error(struct client *c, int status, bool head)
{
	char body[64];
	struct http_reply rep = { .status = status, .body = body };
	int n = snprintf(body, sizeof(body), "%d %s\n", status, http__reason(status));

	rep.len = n > 0 && (size_t)n < sizeof(body) ? (size_t)n : 0;
	if (set_reply(c, &rep, head, false))
		client_close(c);
}

static void client_write(struct client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			client_close(c);
			return;
		}
		c->out_off += n;
	}
	shutdown(c->fd, SHUT_WR);
	client_close(c);
}

static void client_answer(struct http_server *h, struct client *c, const struct http_request *req)
{
	struct http_reply rep = { .status = 500 };

	h->fn(h->ctx, req, &rep);
	h->stats.requests++;
	if (set_reply(c, &rep, req->head, req->accept_gzip))
		client_close(c);
	free(rep.body);
}

static void client_read(struct http_server *h, struct client *c)
{
	size_t max = h->o.max_request;
	struct http_request req;
	ssize_t n;
	int r;

	n = recv(c->fd, c->in + c->len, max - c->len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(c); /* closed (or failed) before a whole request */
		return;
	}
	c->len += n;
	c->in[c->len] = '\0';
	r = http__parse_request(c->in, c->len, &h->o, &req);
	if (r == 0)
		return;
	if (r < 0) {
		h->stats.bad_requests++;
		reply_error(c, -r, false);
	} else {
		client_answer(h, c, &req);
	}
	if (c->state == C_WRITE)
		client_write(c);
}

/*
 * A free slot; with none, the slot of the reader with the oldest deadline
 * (a silent or slow client), whose connection is closed: a flood of idle
 * connections cannot lock the scraper out.
 */
static struct client *take_slot(struct http_server *h)
{
	struct client *oldest = NULL;

	for (int j = 0; j < h->o.max_clients; j++) {
		struct client *c = &h->clients[j];

		if (c->state == C_FREE)
			return c;
		if (c->state == C_READ && (!oldest || c->deadline_ms < oldest->deadline_ms))
			oldest = c;
	}
	if (oldest) {
		h->stats.refused++;
		client_close(oldest);
	}
	return oldest;
}

static void accept_clients(struct http_server *h)
{
	static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
				   "Connection: close\r\n\r\n";

	for (int i = 0; i < ACCEPT_BURST; i++) {
		int fd = accept4(h->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct client *c;

		if (fd < 0 &&
		    (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
			/* the connection waits in the backlog: polling the listener again at
			 * once would spin */
			h->stats.accept_paused++;
			h->accept_paused_until_ms = now_ms() + ACCEPT_BACKOFF_MS;
			if (!h->said_emfile)
				log_warn(
					"cannot accept an HTTP connection: %s: new connections wait "
					"%d ms at a time (raise the file limit, ulimit -n)",
					strerror(errno), ACCEPT_BACKOFF_MS);
			h->said_emfile = true;
			return;
		}
		if (fd < 0)
			return;
		c = take_slot(h);
		if (!c) {
			/* every slot is writing a reply */
			h->stats.refused++;
			if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
				(void)0;
			close(fd);
			continue;
		}
		c->state = C_READ;
		c->fd = fd;
		c->deadline_ms = now_ms() + h->o.timeout_ms;
		c->len = 0;
	}
}

struct http_server *http__new(const char *addr, const struct http_opts *o, http_handler_fn fn,
			      void *ctx)
{
	struct http_server *h = calloc(1, sizeof(*h));
	struct sockaddr_storage ss, got;
	socklen_t len, glen = sizeof(got);
	char host[INET6_ADDRSTRLEN];
	int one = 1, err = 0, port;

	if (!h)
		return NULL;
	h->fd = -1;
	h->fn = fn;
	h->ctx = ctx;
	h->o = o ? *o : (struct http_opts){};
	h->o.max_request = h->o.max_request ?: HTTP_MAX_REQUEST;
	h->o.max_headers = h->o.max_headers ?: HTTP_MAX_HEADERS;
	h->o.max_clients = h->o.max_clients ?: HTTP_MAX_CLIENTS;
	h->o.timeout_ms = h->o.timeout_ms ?: HTTP_TIMEOUT_MS;
	h->clients = calloc(h->o.max_clients, sizeof(*h->clients));
	if (!h->clients) {
		err = -ENOMEM;
		goto cleanup;
	}
	for (int i = 0; i < h->o.max_clients; i++) {
		h->clients[i].fd = -1;
		h->clients[i].in = malloc(h->o.max_request + 1);
		if (!h->clients[i].in) {
			err = -ENOMEM;
			goto cleanup;
		}
	}
	if (http__parse_addr(addr, &ss, &len)) {
		err = -EINVAL;
		goto cleanup;
	}
	h->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->fd < 0) {
		err = -errno;
		goto cleanup;
	}
	setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(h->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(h->fd, (struct sockaddr *)&ss, len) || listen(h->fd, 64) ||
	    getsockname(h->fd, (struct sockaddr *)&got, &glen)) {
		err = -errno;
		goto cleanup;
	}
	if (got.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, host, sizeof(host));
		port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
		snprintf(h->bound, sizeof(h->bound), "[%s]:%d", host, port);
	} else {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, host, sizeof(host));
		port = ntohs(((struct sockaddr_in *)&got)->sin_port);
		snprintf(h->bound, sizeof(h->bound), "%s:%d", host, port);
	}
	return h;
cleanup:
	http__free(h);
	errno = -err;
	return NULL;
}

void http__free(struct http_server *h)
{
	if (!h)
		return;
	for (int i = 0; h->clients && i < h->o.max_clients; i++) {
		client_close(&h->clients[i]);
		free(h->clients[i].in);
	}
	free(h->clients);
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}

int http__max_pollfds(const struct http_server *h)
{
	return 1 + h->o.max_clients;
}

int http__pollfds(struct http_server *h, struct pollfd *fds, int max)
{
	int n = 0;

	if (max < 1)
		return 0;
	/* a resting listener is left out (a negative fd is ignored by poll) */
	fds[n++] = (struct pollfd){ .fd = now_ms() < h->accept_paused_until_ms ? -1 : h->fd,
				    .events = POLLIN };
	for (int i = 0; i < h->o.max_clients && n < max; i++) {
		struct client *c = &h->clients[i];

		if (c->state == C_FREE)
			continue;
		fds[n++] = (struct pollfd){ .fd = c->fd,
					    .events = c->state == C_READ ? POLLIN : POLLOUT };
	}
	return n;
}

int http__timeout_ms(const struct http_server *h)
{
	uint64_t now = now_ms(), first = UINT64_MAX;

	for (int i = 0; i < h->o.max_clients; i++)
		if (h->clients[i].state != C_FREE && h->clients[i].deadline_ms < first)
			first = h->clients[i].deadline_ms;
	if (first == UINT64_MAX)
		return -1;
	return first <= now ? 0 : (int)(first - now);
}

static struct client *client_of(struct http_server *h, int fd)
{
	for (int i = 0; i < h->o.max_clients; i++)
		if (h->clients[i].state != C_FREE && h->clients[i].fd == fd)
			return &h->clients[i];
	return NULL;
}

void http__process(struct http_server *h, const struct pollfd *fds, int n)
{
	uint64_t now;

	for (int i = 0; i < n; i++) {
		struct client *c;

		if (!fds[i].revents)
			continue;
		if (fds[i].fd == h->fd) {
			accept_clients(h);
			continue;
		}
		c = client_of(h, fds[i].fd);
		if (!c)
			continue;
		if (c->state == C_READ)
			client_read(h, c);
		else if (c->state == C_WRITE)
			client_write(c);
	}
	now = now_ms();
	for (int i = 0; i < h->o.max_clients; i++) {
		struct client *c = &h->clients[i];

		if (c->state != C_FREE && now >= c->deadline_ms) {
			h->stats.timeouts++;
			client_close(c);
		}
	}
}

const struct http_stats *http__stats(const struct http_server *h)
{
	return &h->stats;
}

const char *http__bound(const struct http_server *h)
{
	return h->bound;
}
