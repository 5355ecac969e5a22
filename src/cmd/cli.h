/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cli.h - command-line parsing into struct gl_opts, from the tables of
 * commands.h.
 */
#ifndef GL_CLI_H
#define GL_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <linux/types.h>
#include "model/opts.h"

/*
 * Parses argv into o; options may come anywhere (getopt's permuting mode), '--'
 * ends them, and for run they end at the command. argv's elements may be
 * reordered; o points into them. Returns EXIT_OK, or EXIT_USAGE after printing
 * one line saying what is wrong and what to type instead.
 */
int cli__parse(int argc, char **argv, struct gl_opts *o);
/* Runs the subcommand o names (its row's run function); returns the exit status. */
int cli__run(const struct gl_opts *o);

#endif /* GL_CLI_H */
