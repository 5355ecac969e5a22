// SPDX-License-Identifier: BSD-2-Clause
/*
 * main.c - gpuleak's entry point: parse the command line, dispatch.
 */
#include <stdio.h>
#include "cli.h"
#include "agent/serve.h"
#include "attach.h"
#include "offline.h"
#include "top.h"
#include "util/log.h"

#ifndef GPULEAK_VERSION
#define GPULEAK_VERSION "0.1.0"
#endif

int main(int argc, char **argv)
{
	struct gl_opts o;
	int status = cli__parse(argc, argv, &o);

	if (status)
		return status;
	log_level = o.verbosity < 0 ? LOG_ERROR : LOG_INFO + o.verbosity;
	switch (o.cmd) {
	case CMD_HELP: cli__usage(stdout); return EXIT_OK;
	case CMD_VERSION:
		printf("gpuleak %s (BPF ABI %d)\n", GPULEAK_VERSION, GL_ABI_VERSION);
		return EXIT_OK;
	case CMD_SERVE: return serve__run(&o);
	case CMD_TOP: return top__run(&o);
	case CMD_RECORD: return record_cmd__run(&o);
	case CMD_REPORT: return report_cmd__run(&o);
	default: return session__run(&o);
	}
}
