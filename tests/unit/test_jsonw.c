// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_jsonw.c - util/jsonw.c: nesting and commas (compact and pretty),
 * string escaping (quotes, backslashes, control characters, invalid and
 * valid UTF-8), numbers and non-finite doubles, and write errors.
 */
#include <math.h>
#include "unit.h"
#include "util/jsonw.h"

static char *escaped(const char *s)
{
	struct unit_mem m;

	json_escape(unit_mem_open(&m), s);
	return unit_mem_close(&m);
}

static void expect_escape(const char *in, const char *want)
{
	char *got = escaped(in);

	assert_string_equal(got, want);
	free(got);
}

static void test_nesting_compact(void **state)
{
	struct unit_mem m;
	struct jsonw *w = jsonw__new(unit_mem_open(&m), false);
	char *out;

	assert_non_null(w);
	jsonw__start_object(w);
	jsonw__field_u64(w, "a", 1);
	jsonw__name(w, "list");
	jsonw__start_array(w);
	jsonw__u64(w, 1);
	jsonw__s64(w, -2);
	jsonw__start_object(w);
	jsonw__field_bool(w, "t", true);
	jsonw__field_bool(w, "f", false);
	jsonw__end_object(w);
	jsonw__start_array(w);
	jsonw__end_array(w);
	jsonw__null(w);
	jsonw__string(w, NULL);
	jsonw__end_array(w);
	jsonw__name(w, "empty");
	jsonw__start_object(w);
	jsonw__end_object(w);
	jsonw__field_string(w, "s", "x");
	jsonw__field_s64(w, "neg", INT64_MIN);
	jsonw__field_u64(w, "big", UINT64_MAX);
	jsonw__field_double(w, "d", 0.5);
	jsonw__end_object(w);
	assert_int_equal(jsonw__free(w), 0);
	out = unit_mem_close(&m);
	assert_string_equal(out, "{\"a\":1,\"list\":[1,-2,{\"t\":true,\"f\":false},[],null,null],"
				 "\"empty\":{},\"s\":\"x\",\"neg\":-9223372036854775808,"
				 "\"big\":18446744073709551615,\"d\":0.5}\n");
	free(out);
}

static void test_nesting_pretty(void **state)
{
	struct unit_mem m;
	struct jsonw *w = jsonw__new(unit_mem_open(&m), true);
	char *out;

	assert_non_null(w);
	jsonw__start_object(w);
	jsonw__field_u64(w, "a", 1);
	jsonw__name(w, "b");
	jsonw__start_array(w);
	jsonw__u64(w, 2);
	jsonw__start_object(w);
	jsonw__field_string(w, "c", "d");
	jsonw__end_object(w);
	jsonw__end_array(w);
	jsonw__name(w, "e");
	jsonw__start_array(w);
	jsonw__end_array(w);
	jsonw__end_object(w);
	assert_int_equal(jsonw__free(w), 0);
	out = unit_mem_close(&m);
	assert_string_equal(out, "{\n"
				 "  \"a\": 1,\n"
				 "  \"b\": [\n"
				 "    2,\n"
				 "    {\n"
				 "      \"c\": \"d\"\n"
				 "    }\n"
				 "  ],\n"
				 "  \"e\": []\n"
				 "}\n");
	free(out);
}

/* A top-level array of arrays: commas between siblings at every depth, none before the first. */
static void test_commas_deep(void **state)
{
	struct unit_mem m;
	struct jsonw *w = jsonw__new(unit_mem_open(&m), false);
	char *out;

	jsonw__start_array(w);
	for (int d = 0; d < 20; d++) {
		jsonw__start_array(w);
		jsonw__u64(w, d);
	}
	for (int d = 0; d < 20; d++) {
		jsonw__u64(w, 100 + d);
		jsonw__end_array(w);
	}
	jsonw__end_array(w);
	assert_int_equal(jsonw__free(w), 0);
	out = unit_mem_close(&m);
	assert_string_equal(out, "[[0,[1,[2,[3,[4,[5,[6,[7,[8,[9,[10,[11,[12,[13,[14,[15,[16,"
				 "[17,[18,[19,100],101],102],103],104],105],106],107],108],109],"
				 "110],111],112],113],114],115],116],117],118],119]]\n");
	free(out);
}

static void test_doubles(void **state)
{
	struct unit_mem m;
	struct jsonw *w = jsonw__new(unit_mem_open(&m), false);
	char *out;

	jsonw__start_array(w);
	jsonw__double(w, 0);
	jsonw__double(w, -1.25);
	jsonw__double(w, 1e6);
	jsonw__double(w, 123456789.0);
	jsonw__double(w, NAN);
	jsonw__double(w, INFINITY);
	jsonw__double(w, -INFINITY);
	jsonw__end_array(w);
	assert_int_equal(jsonw__free(w), 0);
	out = unit_mem_close(&m);
	assert_string_equal(out, "[0,-1.25,1e+06,1.23457e+08,null,null,null]\n");
	free(out);
}

static void test_escape_specials(void **state)
{
	expect_escape("", "\"\"");
	expect_escape(NULL, "\"\"");
	expect_escape("plain text", "\"plain text\"");
	expect_escape("a\"b", "\"a\\\"b\"");
	expect_escape("a\\b", "\"a\\\\b\"");
	expect_escape("\\\"", "\"\\\\\\\"\"");
	expect_escape("/", "\"/\"");
	expect_escape("l1\nl2\tx", "\"l1\\nl2\\tx\"");
	expect_escape("\r\b\f", "\"\\u000d\\u0008\\u000c\"");
	expect_escape("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"");
	expect_escape(" ~", "\" ~\"");
}

static void test_escape_valid_utf8(void **state)
{
	expect_escape("caf\xc3\xa9", "\"caf\xc3\xa9\"");			/* U+00E9 */
	expect_escape("\xc2\x80", "\"\xc2\x80\"");				/* U+0080 */
	expect_escape("\xdf\xbf", "\"\xdf\xbf\"");				/* U+07FF */
	expect_escape("\xe0\xa0\x80", "\"\xe0\xa0\x80\"");			/* U+0800 */
	expect_escape("\xe2\x82\xac 5", "\"\xe2\x82\xac 5\"");			/* U+20AC */
	expect_escape("\xed\x9f\xbf", "\"\xed\x9f\xbf\"");			/* U+D7FF */
	expect_escape("\xee\x80\x80", "\"\xee\x80\x80\"");			/* U+E000 */
	expect_escape("\xef\xbf\xbf", "\"\xef\xbf\xbf\"");			/* U+FFFF */
	expect_escape("\xf0\x90\x80\x80", "\"\xf0\x90\x80\x80\"");		/* U+10000 */
	expect_escape("\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\"");		/* U+1F600 */
	expect_escape("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");		/* U+10FFFF */
}

static void test_escape_invalid_utf8(void **state)
{
	/* stray continuation and lead bytes */
	expect_escape("\x80", "\"\\u0080\"");
	expect_escape("a\xbf" "b", "\"a\\u00bfb\"");
	expect_escape("\xff\xfe", "\"\\u00ff\\u00fe\"");
	/* truncated sequences, at the end and before ASCII */
	expect_escape("\xc3", "\"\\u00c3\"");
	expect_escape("\xc3(", "\"\\u00c3(\"");
	expect_escape("\xe2\x82", "\"\\u00e2\\u0082\"");
	expect_escape("\xf0\x9f\x98", "\"\\u00f0\\u009f\\u0098\"");
	/* overlong encodings of '\0', '/' and U+07FF */
	expect_escape("\xc0\x80", "\"\\u00c0\\u0080\"");
	expect_escape("\xc1\xaf", "\"\\u00c1\\u00af\"");
	expect_escape("\xe0\x9f\xbf", "\"\\u00e0\\u009f\\u00bf\"");
	expect_escape("\xf0\x8f\xbf\xbf", "\"\\u00f0\\u008f\\u00bf\\u00bf\"");
	/* UTF-16 surrogates are not characters */
	expect_escape("\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\"");
	expect_escape("\xed\xbf\xbf", "\"\\u00ed\\u00bf\\u00bf\"");
	/* beyond U+10FFFF, and 5-byte forms */
	expect_escape("\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\"");
	expect_escape("\xf5\x80\x80\x80", "\"\\u00f5\\u0080\\u0080\\u0080\"");
	expect_escape("\xf8\x88\x80\x80\x80", "\"\\u00f8\\u0088\\u0080\\u0080\\u0080\"");
	/* a valid character right after an invalid byte survives */
	expect_escape("\xc3\xc3\xa9", "\"\\u00c3\xc3\xa9\"");
}

/* Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF. */
static bool valid_utf8(const unsigned char *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = p[i];
		int n;
		unsigned char lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3;
		else
			return false;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
		else if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
		if (i + n >= len)
			return false;
		if (p[i + 1] < lo || p[i + 1] > hi)
			return false;
		for (int k = 2; k <= n; k++)
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
		i += n + 1;
	}
	return true;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/*
 * Undoes json_escape on a literal it wrote, with \u00XX read back as byte XX:
 * returns the byte length, or -1 if the literal is not well-formed JSON.
 */
static int unescape(const char *lit, unsigned char *out)
{
	const unsigned char *p = (const unsigned char *)lit;
	int n = 0;

	if (*p++ != '"')
		return -1;
	for (; *p && *p != '"'; p++) {
		if (*p < 0x20)
			return -1;
		if (*p != '\\') {
			out[n++] = *p;
			continue;
		}
		p++;
		switch (*p) {
		case '"': case '\\': case '/': out[n++] = *p; break;
		case 'n': out[n++] = '\n'; break;
		case 't': out[n++] = '\t'; break;
		case 'u': {
			int v = 0;

			for (int k = 1; k <= 4; k++) {
				if (hexval(p[k]) < 0)
					return -1;
				v = v * 16 + hexval(p[k]);
			}
			if (v > 0xff)
				return -1;
			out[n++] = v;
			p += 4;
			break;
		}
		default:
			return -1;
		}
	}
	if (*p != '"' || p[1])
		return -1;
	return n;
}

/* Random bytes: the literal is always valid JSON in valid UTF-8, and loses nothing. */
static void test_escape_random_bytes(void **state)
{
	uint64_t x = 0x2545f4914f6cdd1dULL;

	for (int iter = 0; iter < 20000; iter++) {
		unsigned char in[24], back[24];
		int len, got;
		char *lit;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		len = x % 20;
		for (int i = 0; i < len; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			/* favour bytes near the UTF-8 boundaries */
			in[i] = (x >> 8) % 4 ? 0x7f + (x >> 16) % 0x81 : 1 + (x >> 16) % 0x7f;
			if (!in[i])
				in[i] = 0x80;
		}
		in[len] = '\0';
		lit = escaped((const char *)in);
		if (!valid_utf8((const unsigned char *)lit, strlen(lit)))
			fail_msg("json_escape wrote invalid UTF-8 for input %d", iter);
		got = unescape(lit, back);
		if (got != len || memcmp(back, in, len))
			fail_msg("json_escape lost bytes for input %d: %s", iter, lit);
		free(lit);
	}
}

static void test_write_error(void **state)
{
	FILE *f = fopen("/dev/full", "w");
	struct jsonw *w;

	assert_non_null(f);
	w = jsonw__new(f, false);
	assert_non_null(w);
	jsonw__start_object(w);
	jsonw__field_string(w, "k", "v");
	jsonw__end_object(w);
	assert_int_equal(jsonw__free(w), -EIO);
	fclose(f);
	assert_int_equal(jsonw__free(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nesting_compact),
		cmocka_unit_test(test_nesting_pretty),
		cmocka_unit_test(test_commas_deep),
		cmocka_unit_test(test_doubles),
		cmocka_unit_test(test_escape_specials),
		cmocka_unit_test(test_escape_valid_utf8),
		cmocka_unit_test(test_escape_invalid_utf8),
		cmocka_unit_test(test_escape_random_bytes),
		cmocka_unit_test(test_write_error),
	};

	return cmocka_run_group_tests_name("jsonw", tests, NULL, NULL);
}
