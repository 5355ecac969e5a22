// SPDX-License-Identifier: BSD-2-Clause
/*
 * xml.c - text into XML: the five markup characters become entities, and
 * whatever XML 1.0 cannot carry (invalid UTF-8, overlong forms, surrogates,
 * control characters other than tab, U+FFFE and U+FFFF) becomes '?', so
 * names read from arbitrary binaries never break the document.
 */
#include <stdint.h>
#include "xml.h"

/* Decodes one UTF-8 character at s; returns its length, or 0 if it is invalid in XML. */
static int utf8_len(const unsigned char *s)
{
	uint32_t cp;
	int len;

	if (s[0] < 0x80)
		return s[0] >= 0x20 || s[0] == '\t' ? 1 : 0;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
		return 0;
	return len;
}

static const char *xml_entity(unsigned char c)
{
	switch (c) {
	case '&': return "&amp;";
	case '<': return "&lt;";
	case '>': return "&gt;";
	case '"': return "&quot;";
	case '\'': return "&apos;";
	default: return NULL;
	}
}

void xml__put(FILE *f, const char *str, size_t max)
{
	const unsigned char *s = (const unsigned char *)str, *run = s;

	for (size_t n = 0; *s && n < max; n++) {
		int len = utf8_len(s);
		const char *entity = len ? xml_entity(*s) : "?";

		if (!entity) {
			s += len;
			continue;
		}
		fwrite(run, 1, s - run, f);
		fputs(entity, f);
		s += len ? len : 1;
		run = s;
	}
	fwrite(run, 1, s - run, f);
}

size_t xml__chars(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = 0;

	for (; *s; n++) {
		int len = utf8_len(s);

		s += len ? len : 1;
	}
	return n;
}
