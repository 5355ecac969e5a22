// SPDX-License-Identifier: BSD-2-Clause
/*
 * main.c - gpuleak's entry point: parse the command line, run the subcommand's
 * row of the table (commands.c). A row with its own parser (census) is handed
 * argv from the subcommand on.
 */
#include "cli.h"
#include "commands.h"
#include "util/log.h"

int main(int argc, char **argv)
{
	const struct cli_command *c = argc > 1 ? cli__command(argv[1]) : NULL;
	struct gl_opts o;
	int status;

	if (c && c->main) {
		log_level = LOG_INFO;
		return c->main(argc - 1, argv + 1);
	}
	status = cli__parse(argc, argv, &o);
	if (status)
		return status;
	log_level = o.verbosity < 0 ? LOG_ERROR : LOG_INFO + o.verbosity;
	return cli__run(&o);
}
