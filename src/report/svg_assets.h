/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * svg_assets.h - the inline style sheet and script of the SVG flame graph.
 */
#ifndef GL_SVG_ASSETS_H
#define GL_SVG_ASSETS_H

/* CSS for the <style> element; contains no "]]>". */
extern const char svg__style[];
/* ECMAScript for the <script> element; contains no "]]>". */
extern const char svg__script[];

#endif /* GL_SVG_ASSETS_H */
