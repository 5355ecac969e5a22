// SPDX-License-Identifier: BSD-2-Clause
/*
 * http_proto.c - HTTP/1.1 as bytes, with no sockets: parsing a request head
 * (strictly: request line, header fields, the bounds of http_opts), the
 * status lines' reasons, a listen address, the Accept-Encoding negotiation
 * and gzip compression of a reply body (zlib). Pure functions, fuzzed on
 * their own; the server in http.c uses them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include "http.h"
#include "util/parse.h"

const char *http__reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 202: return "Accepted";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

int http__parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_storage tmp = {};
	const char *colon, *host = s;
	char addr[INET6_ADDRSTRLEN + 1];
	size_t host_len;
	uint32_t port;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		host = s + 1;
		host_len = end - host;
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', colon - s))
			return -EINVAL; /* IPv6 needs brackets */
		host_len = colon - s;
	}
	if (!host_len || host_len >= sizeof(addr) || parse_u32(colon + 1, 0, 65535, &port))
		return -EINVAL;
	memcpy(addr, host, host_len);
	addr[host_len] = '\0';
	if (s[0] == '[') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&tmp;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(port);
		if (inet_pton(AF_INET6, addr, &a->sin6_addr) != 1)
			return -EINVAL;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&tmp;

		a->sin_family = AF_INET;
		a->sin_port = htons(port);
		if (inet_pton(AF_INET, addr, &a->sin_addr) != 1)
			return -EINVAL;
	}
	if (ss)
		*ss = tmp;
	if (len)
		*len = s[0] == '[' ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	return 0;
}

static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Whether the coding's weight e[0..n) (after ';', "q=0.5") is above zero. */
static bool weight_above_zero(const char *e, size_t n)
{
	while (n && (*e == ' ' || *e == '\t'))
		e++, n--;
	if (n < 3 || (e[0] != 'q' && e[0] != 'Q') || e[1] != '=')
		return false;
	e += 2;
	n -= 2;
	if (e[0] == '1')
		return true;
	if (e[0] != '0')
		return false;
	for (size_t i = 1; i < n; i++)
		if (e[i] >= '1' && e[i] <= '9')
			return true;
	return false;
}

bool http__accepts_gzip(const char *v, size_t n)
{
	int gzip = -1, any = -1; /* -1: not named; 0: refused; 1: allowed */
	size_t i = 0;

	while (i < n) {
		size_t start, end, tlen, next;
		const char *semi, *tok;
		int allowed;

		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		start = i;
		while (i < n && v[i] != ',')
			i++;
		next = i;
		end = i;
		while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
			end--;
		if (end == start)
			continue;
		tok = v + start;
		semi = memchr(tok, ';', end - start);
		tlen = semi ? (size_t)(semi - tok) : end - start;
		while (tlen && (tok[tlen - 1] == ' ' || tok[tlen - 1] == '\t'))
			tlen--;
		allowed = semi ? weight_above_zero(semi + 1, v + end - semi - 1) : 1;
		if ((tlen == 4 && !strncasecmp(tok, "gzip", 4)) ||
		    (tlen == 6 && !strncasecmp(tok, "x-gzip", 6)))
			gzip = allowed;
		else if (tlen == 1 && tok[0] == '*')
			any = allowed;
		i = next;
	}
	return gzip >= 0 ? gzip == 1 : any == 1;
}

int http__gzip(const void *in, size_t len, char **out, size_t *out_len)
{
	z_stream z = {};
	size_t cap;
	char *buf;
	int err = 0;

	*out = NULL;
	*out_len = 0;
	/* gzip: windowBits 15 + 16 */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY))
		return -ENOMEM;
	cap = deflateBound(&z, len);
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto cleanup;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = len;
	z.next_out = (Bytef *)buf;
	z.avail_out = cap;
	/* deflateBound leaves room for the whole stream: one call finishes it */
	if (deflate(&z, Z_FINISH) != Z_STREAM_END) {
		err = -EIO;
		goto cleanup;
	}
	*out = buf;
	*out_len = z.total_out;
	buf = NULL;
cleanup:
	free(buf);
	deflateEnd(&z);
	return err;
}

/* The request line: METHOD SP origin-form SP HTTP/1.x. Returns 0 or a negated status. */
static int parse_request_line(const char *p, size_t n, struct http_request *req)
{
	const char *sp1 = memchr(p, ' ', n), *sp2, *target, *q, *ver;
	size_t mlen, tlen, vlen, plen;

	if (!sp1 || sp1 == p)
		return -400;
	mlen = sp1 - p;
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar(p[i]))
			return -400;
	target = sp1 + 1;
	sp2 = memchr(target, ' ', n - (target - p));
	if (!sp2 || sp2 == target)
		return -400;
	tlen = sp2 - target;
	ver = sp2 + 1;
	vlen = n - (ver - p);
	if (vlen != 8 || memcmp(ver, "HTTP/", 5))
		return -400;
	if (ver[5] != '1' || ver[6] != '.' || (ver[7] != '0' && ver[7] != '1'))
		return (ver[5] >= '0' && ver[5] <= '9') ? -505 : -400;
	if (target[0] != '/')
		return -400;
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)target[i] <= 0x20 || target[i] == 0x7f)
			return -400;
	if (mlen == 3 && !memcmp(p, "GET", 3))
		req->head = false;
	else if (mlen == 4 && !memcmp(p, "HEAD", 4))
		req->head = true;
	else if (mlen == 4 && !memcmp(p, "POST", 4))
		req->post = true;
	else
		return -405;
	q = memchr(target, '?', tlen);
	plen = q ? (size_t)(q - target) : tlen;
	if (plen >= sizeof(req->path) || (q && tlen - plen - 1 >= sizeof(req->query)))
		return -414;
	memcpy(req->path, target, plen);
	req->path[plen] = '\0';
	req->query[0] = '\0';
	if (q) {
		memcpy(req->query, q + 1, tlen - plen - 1);
		req->query[tlen - plen - 1] = '\0';
	}
	return 0;
}

/* One header line "name: value". Returns 0 or a negated status. */
static int parse_header(const char *p, size_t n, struct http_request *req)
{
	const char *colon = memchr(p, ':', n), *v;
	size_t nlen, vlen;

	if (!colon || colon == p)
		return -400; /* also obs-fold: a line starting with whitespace has no name */
	nlen = colon - p;
	for (size_t i = 0; i < nlen; i++)
		if (!is_tchar(p[i]))
			return -400;
	v = colon + 1;
	vlen = n - (v - p);
	for (size_t i = 0; i < vlen; i++)
		if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
			return -400;
	while (vlen && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	if (nlen == 4 && !strncasecmp(p, "host", 4)) {
		if (req->has_host)
			return -400;
		req->has_host = true;
	} else if (nlen == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
		return -400; /* no bodies here */
	} else if (nlen == 14 && !strncasecmp(p, "content-length", 14)) {
		if (vlen != 1 || v[0] != '0')
			return -400;
	} else if (nlen == 15 && !strncasecmp(p, "accept-encoding", 15)) {
		/* repeated fields combine as one list (RFC 9110, 5.3) */
		req->accept_gzip |= http__accepts_gzip(v, vlen);
	}
	return 0;
}

int http__parse_request(const char *buf, size_t len, const struct http_opts *o,
			struct http_request *req)
{
	size_t max = o && o->max_request ? o->max_request : HTTP_MAX_REQUEST;
	int max_headers = o && o->max_headers ? o->max_headers : HTTP_MAX_HEADERS;
	const char *end = NULL, *line, *eol;
	bool http11;
	int err;

	for (size_t i = 0; i + 3 < len && i + 3 < max; i++) {
		if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
		    buf[i + 3] == '\n') {
			end = buf + i;
			break;
		}
	}
	if (memchr(buf, '\0', len < max ? len : max))
		return -400;
	if (!end) {
		if (len < max)
			return 0;
		return memchr(buf, '\n', max) ? -431 : -414;
	}
	memset(req, 0, sizeof(*req));
	eol = memchr(buf, '\r', end - buf + 1);
	if (eol[1] != '\n')
		return -400;
	err = parse_request_line(buf, eol - buf, req);
	if (err)
		return err;
	http11 = buf[eol - buf - 1] == '1';
	for (line = eol + 2; line < end + 2; line = eol + 2) {
		eol = memchr(line, '\r', end + 2 - line);
		if (!eol || eol[1] != '\n')
			return -400;
		if (eol == line)
			break;
		if (memchr(line, '\n', eol - line))
			return -400; /* a bare LF */
		if (++req->nr_headers > max_headers)
			return -431;
		err = parse_header(line, eol - line, req);
		if (err)
			return err;
	}
	if (http11 && !req->has_host)
		return -400;
	return (int)(end - buf) + 4;
}
