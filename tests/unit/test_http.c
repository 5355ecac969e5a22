// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_http.c - the agent's HTTP server: request parsing (strict, bounded),
 * addresses, and a real server on loopback facing good requests, garbage,
 * oversized heads, slow and silent clients and too many clients.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <zlib.h>
#include "agent/http.h"

static int parse(const char *req)
{
	struct http_request r;

	return http__parse_request(req, strlen(req), NULL, &r);
}

static void test_parse_good(void **state)
{
	const char *req = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
	struct http_request r;

	assert_int_equal(http__parse_request(req, strlen(req), NULL, &r), (int)strlen(req));
	assert_false(r.head);
	assert_string_equal(r.path, "/metrics");
	assert_string_equal(r.query, "x=1");
	assert_int_equal(r.nr_headers, 2);
	req = "HEAD / HTTP/1.0\r\n\r\n";
	assert_int_equal(http__parse_request(req, strlen(req), NULL, &r), (int)strlen(req));
	assert_true(r.head);
	/* a pipelined second request is not part of this head */
	req = "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /x HTTP/1.1\r\n";
	assert_int_equal(parse(req), 27);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"), 46);
	/* POST without a body: an action */
	req = "POST /tensors/arm HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
	assert_int_equal(http__parse_request(req, strlen(req), NULL, &r), (int)strlen(req));
	assert_true(r.post);
	assert_false(r.head);
	assert_string_equal(r.path, "/tensors/arm");
}

static void test_parse_incomplete(void **state)
{
	assert_int_equal(parse(""), 0);
	assert_int_equal(parse("GET / HTTP/1.1\r\n"), 0);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n\r"), 0);
}

static void test_parse_bad(void **state)
{
	static const struct {
		const char *req;
		int want;
	} cases[] = {
		{ "PUT /metrics HTTP/1.1\r\nHost: a\r\n\r\n", -405 },
		{ "POST /tensors/arm HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n", -400 },
		{ "DELETE / HTTP/1.1\r\nHost: a\r\n\r\n", -405 },
		{ "get / HTTP/1.1\r\nHost: a\r\n\r\n", -405 },
		{ "GET / HTTP/2.0\r\nHost: a\r\n\r\n", -505 },
		{ "GET / HTTP/1.1\r\n\r\n", -400 },			/* no Host */
		{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", -400 },
		{ "GET http://x/ HTTP/1.1\r\nHost: a\r\n\r\n", -400 },	/* absolute form */
		{ "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
		{ "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", -400 },
		{ "GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
		{ "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", -400 },
		{ "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", -400 },
		{ "GET / HTTP/1.1\r\nNoColon\r\n\r\n", -400 },
		{ "GET / HTTP/1.1\r\nBad Name: x\r\nHost: a\r\n\r\n", -400 },
		{ "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", -400 },	/* bare LF */
		{ "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", -400 },
		{ "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", -400 },
		{ "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", -400 },
		{ "\r\n\r\n", -400 },
		{ "\x16\x03\x01\x02\x05\x01\x05\x01\xfc\x03\x03\r\n\r\n", -400 }, /* TLS hello */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(parse(cases[i].req), cases[i].want);
	}
}

static void test_parse_bounds(void **state)
{
	struct http_opts o = { .max_request = 256, .max_headers = 3 };
	char buf[2048];
	struct http_request r;
	int n;

	memset(buf, 'a', sizeof(buf));
	memcpy(buf, "GET /", 5);
	assert_int_equal(http__parse_request(buf, 256, &o, &r), -414); /* no line end in 256 */
	n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nX-Big: %0240d\r\n", 0);
	assert_int_equal(http__parse_request(buf, n, &o, &r), -431);
	n = snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
	assert_int_equal(http__parse_request(buf, n, &o, &r), -431);
	n = snprintf(buf, sizeof(buf), "GET /%01100d HTTP/1.1\r\nHost: a\r\n\r\n", 0);
	assert_int_equal(http__parse_request(buf, n, NULL, &r), -414);
	assert_int_equal(http__parse_request("GET /\0 HTTP/1.1\r\n\r\n", 20, NULL, &r), -400);
}

static void test_addr(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len;

	assert_int_equal(http__parse_addr("127.0.0.1:9464", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9464);
	assert_int_equal(http__parse_addr("[::1]:80", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(http__parse_addr("0.0.0.0:1", NULL, NULL), 0);
	assert_int_equal(http__parse_addr("[::]:0", NULL, NULL), 0);
	assert_int_equal(http__parse_addr("::1:80", NULL, NULL), -EINVAL);
	assert_int_equal(http__parse_addr("localhost:80", NULL, NULL), -EINVAL);
	assert_int_equal(http__parse_addr("127.0.0.1", NULL, NULL), -EINVAL);
	assert_int_equal(http__parse_addr("127.0.0.1:65536", NULL, NULL), -EINVAL);
	assert_int_equal(http__parse_addr("127.0.0.1:-1", NULL, NULL), -EINVAL);
	assert_int_equal(http__parse_addr(":80", NULL, NULL), -EINVAL);
	assert_int_equal(http__parse_addr("[::1]80", NULL, NULL), -EINVAL);
}

/* A live server */

static int handler(void *ctx, const struct http_request *req, struct http_reply *rep)
{
	int *calls = ctx;

	(*calls)++;
	rep->status = strcmp(req->path, "/metrics") ? 404 : 200;
	rep->body = strdup(rep->status == 200 ? "up 1\n" : "nope\n");
	rep->len = strlen(rep->body);
	return 0;
}

static int connect_to(struct http_server *h)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(http__parse_addr(http__bound(h), &ss, &len), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&ss, len), 0);
	return fd;
}

static void say(int fd, const char *text)
{
	assert_int_equal(send(fd, text, strlen(text), 0), (ssize_t)strlen(text));
}

/* Runs the server until fd has a whole reply (the server closed) or ms pass. */
static char *pump(struct http_server *h, int fd, int ms, char *out, size_t cap)
{
	struct pollfd fds[64];
	size_t got = 0;

	out[0] = '\0';
	for (int t = 0; t < ms; t += 5) {
		int n = http__pollfds(h, fds, 64);
		ssize_t r;

		poll(fds, n, 5);
		http__process(h, fds, n);
		if (fd < 0)
			continue;
		r = recv(fd, out + got, cap - 1 - got, MSG_DONTWAIT);
		if (r > 0) {
			got += r;
			out[got] = '\0';
		} else if (r == 0) {
			return out;
		}
	}
	return out;
}

static void test_server(void **state)
{
	struct http_opts o = { .max_clients = 2, .timeout_ms = 300, .max_request = 512 };
	int calls = 0, a, b, c;
	struct http_server *h = http__new("127.0.0.1:0", &o, handler, &calls);
	char out[4096], big[2048];

	assert_non_null(h);
	assert_non_null(strstr(http__bound(h), "127.0.0.1:"));

	a = connect_to(h);
	say(a, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	pump(h, a, 1000, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(out, "Content-Length: 5\r\n"));
	assert_non_null(strstr(out, "Connection: close\r\n"));
	assert_non_null(strstr(out, "\r\n\r\nup 1\n"));
	close(a);

	/* HEAD: the head alone */
	a = connect_to(h);
	say(a, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	pump(h, a, 1000, out, sizeof(out));
	assert_non_null(strstr(out, "Content-Length: 5\r\n"));
	assert_null(strstr(out, "up 1"));
	close(a);

	/* garbage, a method we do not serve, an oversized head: answered by the server */
	a = connect_to(h);
	say(a, "\x16\x03\x01garbage\r\n\r\n");
	pump(h, a, 1000, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 400 Bad Request\r\n"));
	close(a);
	a = connect_to(h);
	say(a, "PUT / HTTP/1.1\r\nHost: x\r\n\r\n");
	pump(h, a, 1000, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 405 Method Not Allowed\r\n"));
	assert_non_null(strstr(out, "Allow: GET, HEAD, POST\r\n"));
	close(a);
	a = connect_to(h);
	memset(big, 'x', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nHost: x\r\nX: ", 28);
	assert_true(send(a, big, sizeof(big), 0) > 0);
	pump(h, a, 1000, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 431 "));
	close(a);
	assert_int_equal(calls, 2);
	assert_int_equal(http__stats(h)->bad_requests, 3);

	/* two silent clients hold both slots; a third takes the oldest one's slot */
	a = connect_to(h);
	pump(h, -1, 20, out, sizeof(out));
	b = connect_to(h);
	say(b, "GET /met"); /* slow: never finishes */
	pump(h, -1, 20, out, sizeof(out));
	c = connect_to(h);
	say(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	pump(h, c, 1000, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 200 OK"));
	assert_int_equal(http__stats(h)->refused, 1);
	assert_int_equal(recv(a, out, sizeof(out), MSG_DONTWAIT), 0); /* a was closed */
	close(c);
	/* b's deadline frees its slot */
	pump(h, b, 1000, out, sizeof(out));
	assert_int_equal(http__stats(h)->timeouts, 1);
	close(a);
	close(b);
	a = connect_to(h);
	say(a, "GET /nothing HTTP/1.0\r\n\r\n");
	pump(h, a, 1000, out, sizeof(out));
	assert_non_null(strstr(out, "HTTP/1.1 404 Not Found\r\n"));
	close(a);
	http__free(h);
}

static void test_accepts_gzip(void **state)
{
	static const struct {
		const char *v;
		bool gzip;
	} cases[] = {
		{ "gzip", true },
		{ "GZip", true },
		{ "x-gzip", true },
		{ "deflate, gzip;q=1.0, *;q=0.5", true },
		{ "gzip;q=0.001", true },
		{ " br ,  gzip ; q=0.8 ", true },
		{ "*", true },
		{ "", false },
		{ "identity", false },
		{ "deflate, br", false },
		{ "gzip;q=0", false },
		{ "gzip;q=0.000", false },
		{ "gzip;q=0, *", false },	/* gzip named: its weight decides */
		{ "*;q=0", false },
		{ "gzipx", false },
		{ "gzip;level=9", false },	/* not a weight: allows nothing */
		{ "gzip;q=2", false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (http__accepts_gzip(cases[i].v, strlen(cases[i].v)) != cases[i].gzip)
			fail_msg("Accept-Encoding: %s: want %d", cases[i].v, cases[i].gzip);
	}
	/* through the parser, repeated fields combined */
	{
		const char *req = "GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: br\r\n"
				  "accept-encoding: gzip\r\n\r\n";
		struct http_request r;

		assert_true(http__parse_request(req, strlen(req), NULL, &r) > 0);
		assert_true(r.accept_gzip);
		req = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
		assert_true(http__parse_request(req, strlen(req), NULL, &r) > 0);
		assert_false(r.accept_gzip);
	}
}

/* Inflates a gzip member; returns the bytes written to out, or -1. */
static long gunzip(const char *in, size_t len, char *out, size_t cap)
{
	z_stream z = {};
	long n;

	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = len;
	z.next_out = (Bytef *)out;
	z.avail_out = cap;
	n = inflate(&z, Z_FINISH) == Z_STREAM_END && z.avail_in == 0 ? (long)z.total_out : -1;
	inflateEnd(&z);
	return n;
}

static char big_body[6000];

static int big_handler(void *ctx, const struct http_request *req, struct http_reply *rep)
{
	rep->status = 200;
	rep->body = malloc(sizeof(big_body));
	memcpy(rep->body, big_body, sizeof(big_body));
	rep->len = sizeof(big_body);
	rep->compressible = strcmp(req->path, "/raw") != 0;
	return 0;
}

static void test_gzip_replies(void **state)
{
	struct http_server *h = http__new("127.0.0.1:0", NULL, big_handler, NULL);
	static char out[16384], plain[16384];
	const char *body;
	size_t zlen;
	int a;

	assert_non_null(h);
	for (size_t i = 0; i < sizeof(big_body); i++)
		big_body[i] = "metric_a{x=\"1\"} 1\n"[i % 19];
	a = connect_to(h);
	say(a, "GET /m HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
	pump(h, a, 1000, out, sizeof(out));
	close(a);
	assert_non_null(strstr(out, "Content-Encoding: gzip\r\n"));
	assert_non_null(strstr(out, "Vary: Accept-Encoding\r\n"));
	body = strstr(out, "\r\n\r\n") + 4;
	assert_true(sscanf(strstr(out, "Content-Length: "), "Content-Length: %zu", &zlen) == 1);
	assert_true(zlen < sizeof(big_body) / 4); /* repetitive text compresses */
	assert_int_equal(gunzip(body, zlen, plain, sizeof(plain)), (long)sizeof(big_body));
	assert_memory_equal(plain, big_body, sizeof(big_body));

	/* not asked, refused, or a body that must not be compressed: sent as it is */
	for (int i = 0; i < 3; i++) {
		static const char *const reqs[] = {
			"GET /m HTTP/1.1\r\nHost: x\r\n\r\n",
			"GET /m HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip;q=0\r\n\r\n",
			"GET /raw HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
		};

		a = connect_to(h);
		say(a, reqs[i]);
		pump(h, a, 1000, out, sizeof(out));
		close(a);
		assert_null(strstr(out, "Content-Encoding"));
		assert_non_null(strstr(out, "Content-Length: 6000\r\n"));
		assert_memory_equal(strstr(out, "\r\n\r\n") + 4, big_body, sizeof(big_body));
	}
	/* HEAD: the compressed length, no body */
	a = connect_to(h);
	say(a, "HEAD /m HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
	pump(h, a, 1000, out, sizeof(out));
	close(a);
	assert_non_null(strstr(out, "Content-Encoding: gzip\r\n"));
	snprintf(plain, sizeof(plain), "Content-Length: %zu\r\n", zlen);
	assert_non_null(strstr(out, plain));
	assert_string_equal(strstr(out, "\r\n\r\n"), "\r\n\r\n");
	http__free(h);
}

static void test_listen_errors(void **state)
{
	int calls = 0;
	struct http_server *h = http__new("127.0.0.1:0", NULL, handler, &calls), *h2;

	assert_non_null(h);
	h2 = http__new(http__bound(h), NULL, handler, &calls);
	assert_null(h2);
	assert_int_equal(errno, EADDRINUSE);
	http__free(h);
	assert_null(http__new("nonsense", NULL, handler, &calls));
	assert_int_equal(errno, EINVAL);
	h = http__new("[::1]:0", NULL, handler, &calls);
	if (h) /* IPv6 loopback where the kernel has it */
		assert_non_null(strstr(http__bound(h), "[::1]:"));
	http__free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),
		cmocka_unit_test(test_parse_incomplete),
		cmocka_unit_test(test_parse_bad),
		cmocka_unit_test(test_parse_bounds),
		cmocka_unit_test(test_addr),
		cmocka_unit_test(test_server),
		cmocka_unit_test(test_accepts_gzip),
		cmocka_unit_test(test_gzip_replies),
		cmocka_unit_test(test_listen_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
