/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * xml.h - escaping text for XML documents (the SVG flame graph).
 */
#ifndef GL_XML_H
#define GL_XML_H

#include <stddef.h>
#include <stdio.h>

/*
 * Writes at most max characters of s (SIZE_MAX: all), escaped for XML text
 * and attribute values; what XML cannot carry is written as '?'.
 */
void xml__put(FILE *f, const char *s, size_t max);
/* The number of characters xml__put() counts in s. */
size_t xml__chars(const char *s);

#endif /* GL_XML_H */
