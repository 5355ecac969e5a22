/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * http.h - a small, strict HTTP/1.1 server for the agent's endpoints.
 *
 * GET and HEAD only, one request per connection (Connection: close), request
 * size and header count bounded, a bounded number of clients, a deadline per
 * client, non-blocking sockets driven by the caller's poll(). It never reads
 * a request body: a request announcing one is refused. A reply the handler
 * marks compressible is sent gzipped when the request's Accept-Encoding
 * allows it (RFC 9110, 12.5.3). The server is in http.c; parsing, reasons,
 * addresses and gzip, pure functions of bytes, in http_proto.c.
 */
#ifndef GL_HTTP_H
#define GL_HTTP_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define HTTP_MAX_REQUEST 8192 /* request line and headers */
#define HTTP_MAX_HEADERS 64
#define HTTP_MAX_CLIENTS 32
#define HTTP_TIMEOUT_MS 10000

struct http_request {
	bool head;	  /* HEAD: the reply carries no body */
	bool post;	  /* POST (with no body): an action, e.g. serve's /tensors/arm */
	char path[1024];  /* the target's path, without the query */
	char query[1024]; /* after '?', "" if none */
	int nr_headers;
	bool has_host;
	bool accept_gzip; /* Accept-Encoding allows gzip (q > 0) */
};

/* What a handler answers. body is malloc'd and freed by the server. */
struct http_reply {
	int status;
	const char *content_type; /* static string */
	char *body;
	size_t len;
	bool compressible; /* gzip it when the request allows (not for gzipped bodies) */
};

/*
 * Fills rep for req. Returns 0; a handler that could not build its body
 * leaves rep->status at 500.
 */
typedef int (*http_handler_fn)(void *ctx, const struct http_request *req, struct http_reply *rep);

struct http_opts {
	size_t max_request; /* 0: HTTP_MAX_REQUEST */
	int max_headers;    /* 0: HTTP_MAX_HEADERS */
	int max_clients;    /* 0: HTTP_MAX_CLIENTS */
	int timeout_ms;	    /* 0: HTTP_TIMEOUT_MS; from accept to the last byte sent */
};

/* What the server has done, for the agent's health metrics. */
struct http_stats {
	uint64_t requests;	/* answered by the handler */
	uint64_t bad_requests;	/* answered 4xx/5xx by the server itself */
	uint64_t timeouts;	/* clients closed at their deadline */
	uint64_t refused;	/* connections closed for lack of a slot (the oldest idle reader) */
	uint64_t accept_paused; /* accept ran out of descriptors or memory: the listener rested */
};

struct http_server;

/*
 * Parses "ADDR:PORT" (IPv4 or a name-free dotted quad) or "[IPv6]:PORT".
 * ss and len may be NULL (validation only). Returns 0 or -EINVAL.
 */
int http__parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/*
 * Parses a request head buf[0..len). Returns the bytes of the head (> 0)
 * once it is complete and valid, 0 if more bytes are needed, or the negated
 * HTTP status to answer: -400, -405 (not GET/HEAD), -414 (target too long),
 * -431 (too many or too large headers), -505 (not HTTP/1.x).
 */
int http__parse_request(const char *buf, size_t len, const struct http_opts *o,
			struct http_request *req);

/*
 * Whether an Accept-Encoding value v[0..n) allows gzip: "gzip" or "x-gzip"
 * with q > 0, or else "*" with q > 0. Case-insensitive; malformed elements
 * allow nothing.
 */
bool http__accepts_gzip(const char *v, size_t n);

/*
 * Compresses in[0..len) into a gzip member (RFC 1952). *out is malloc'd,
 * freed by the caller. Returns 0, -ENOMEM or -EIO (zlib failed).
 */
int http__gzip(const void *in, size_t len, char **out, size_t *out_len);

/* Reason phrase of a status code ("OK", "Not Found"; "Error" if unknown). */
const char *http__reason(int status);

/*
 * Binds and listens on addr (see http__parse_addr); sockets are non-blocking
 * and close-on-exec. NULL with errno on failure (EADDRINUSE, EACCES, ...).
 */
struct http_server *http__new(const char *addr, const struct http_opts *o, http_handler_fn fn,
			      void *ctx);
void http__free(struct http_server *h);

/* Number of pollfd entries http__pollfds may fill (listener + clients). */
int http__max_pollfds(const struct http_server *h);
/* Fills fds with what the server waits for; returns the number filled. */
int http__pollfds(struct http_server *h, struct pollfd *fds, int max);
/* Milliseconds until the next client deadline (-1: none). */
int http__timeout_ms(const struct http_server *h);
/* Handles what poll() reported in fds[0..n) (as filled by http__pollfds), and deadlines. */
void http__process(struct http_server *h, const struct pollfd *fds, int n);
const struct http_stats *http__stats(const struct http_server *h);
/* The bound address as "ADDR:PORT" (port resolved when 0 was asked). */
const char *http__bound(const struct http_server *h);

#endif /* GL_HTTP_H */
