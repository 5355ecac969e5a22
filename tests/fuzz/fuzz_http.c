// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_http.c - libFuzzer target: the agent's HTTP request parser on any
 * bytes a client may send, under the default limits and under small ones
 * (the first byte picks them), the Accept-Encoding parser and the listen
 * address parser on the same bytes.
 */
#include "fuzz.h"
#include "agent/http.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	log_level = -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_opts o = { 0 };
	struct http_request req;
	struct sockaddr_storage ss;
	socklen_t len;
	char *copy, *text;

	if (!size)
		return 0;
	if (data[0] & 1) {
		o.max_request = 16 + data[0] * 4;
		o.max_headers = data[0] >> 4;
	}
	/* a copy of the exact size, so that ASan sees any read past the end */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	/* as the bytes arrive: every short prefix, then every 64 bytes, then all */
	for (size_t n = 0; n < size - 1; n += n < 64 ? 1 : 64)
		http__parse_request(copy, n, &o, &req);
	http__parse_request(copy, size - 1, &o, &req);
	/* the same bytes as an Accept-Encoding value */
	http__accepts_gzip(copy, size - 1);
	free(copy);
	text = fuzz_strdup(data + 1, size - 1);
	if (text)
		http__parse_addr(text, &ss, &len);
	free(text);
	return 0;
}
