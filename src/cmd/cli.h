/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cli.h - command-line parsing into struct gl_opts.
 */
#ifndef GL_CLI_H
#define GL_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <linux/types.h>
#include "model/opts.h"

/*
 * Parses argv into o. Returns EXIT_OK, or EXIT_USAGE after printing one line
 * saying what is wrong.
 */
int cli__parse(int argc, char **argv, struct gl_opts *o);
void cli__usage(FILE *f);

#endif /* GL_CLI_H */
