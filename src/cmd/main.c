// SPDX-License-Identifier: BSD-2-Clause
/*
 * main.c - gpuleak's entry point: parse the command line, run the subcommand's
 * row of the table (commands.c).
 */
#include "cli.h"
#include "commands.h"
#include "util/log.h"

int main(int argc, char **argv)
{
	struct gl_opts o;
	int status;

	status = cli__parse(argc, argv, &o);
	if (status)
		return status;
	log_level = o.verbosity < 0 ? LOG_ERROR : LOG_INFO + o.verbosity;
	return cli__run(&o);
}
