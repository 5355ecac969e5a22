/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * html_assets.h - the HTML report's page: what goes before its data (a JSON
 * text inside <script type="application/json">) and what goes after it.
 */
#ifndef GL_HTML_ASSETS_H
#define GL_HTML_ASSETS_H

extern const char html__head[];
extern const char html__tail[];

#endif /* GL_HTML_ASSETS_H */
