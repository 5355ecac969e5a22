// SPDX-License-Identifier: BSD-2-Clause
/*
 * cli.c - parsing the command line with the tables of commands.h. Every number
 * goes through util/parse.h; every error is one line on stderr, exit status 2,
 * that says what is wrong and what to type instead.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/http.h"
#include "cli.h"
#include "commands.h"
#include "report/formats.h"
#include "util/log.h"
#include "util/parse.h"

/* --tensors sampled: a tensor-block stack per MiB allocated, on average */
#define DEFAULT_TENSOR_SAMPLE (1ULL << 20)

/* The subcommand being parsed: its name is in every error's hint. */
static const struct cli_command *parsing;

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "gpuleak: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (parsing && parsing->cmd != CMD_HELP)
		fprintf(stderr, " (see 'gpuleak %s --help')\n", parsing->name);
	else
		fputs(" (see 'gpuleak help')\n", stderr);
	return EXIT_USAGE;
}

/* A value the option does not take: what was expected, and a value it takes. */
static int bad_value(int key, const char *arg, const char *expected)
{
	const struct cli_option *op = cli__option_of(key);

	return usage_error("invalid --%s '%s': expected %s, e.g. --%s %s", op->name, arg, expected,
			   op->name, op->example ? op->example : "");
}

static int bad_duration(int key, const char *arg, const char *range)
{
	const struct cli_option *op = cli__option_of(key);

	return usage_error("invalid --%s '%s': expected a duration%s such as %s", op->name, arg,
			   range, PARSE_DURATION_FORMS);
}

/* serve: no operands; --profile-dir needs --state-dir and lies inside it. */
static int check_serve(struct gl_opts *o, int argc, char **argv)
{
	size_t n;

	if (optind + 1 < argc)
		return usage_error("serve takes no operands ('%s')", argv[optind + 1]);
	if (o->nr_pids)
		return usage_error("serve traces every process; PIDs belong to attach and top");
	o->all = true;
	if (!o->profile_dir)
		return EXIT_OK;
	if (!o->state_dir)
		return usage_error("--profile-dir needs --state-dir (the only place serve writes): "
				   "e.g. --state-dir /var/lib/gpuleak --profile-dir "
				   "/var/lib/gpuleak/profiles");
	n = strlen(o->state_dir);
	while (n > 1 && o->state_dir[n - 1] == '/')
		n--;
	if (o->profile_dir[0] == '/' &&
	    (strncmp(o->profile_dir, o->state_dir, n) || o->profile_dir[n] != '/'))
		return usage_error("--profile-dir '%s' is not inside --state-dir '%s'",
				   o->profile_dir, o->state_dir);
	if (strstr(o->profile_dir, ".."))
		return usage_error("--profile-dir '%s' must not contain '..'", o->profile_dir);
	return EXIT_OK;
}

static void defaults(struct gl_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->interval_ms = 10000;
	o->wait_ms = 30000;
	o->resolution_ms = 1000;
	o->imbalance_pct = 150;
	o->tensor_duty_pct = 2;
#if defined(__x86_64__)
	o->stack_mode = GL_STACK_DWARF; /* the record's stack copy is unwound for x86-64 */
#else
	o->stack_mode = GL_STACK_FP;
#endif
	o->stack_bytes = 16384;
	o->top = 10;
	o->frames = 32;
	o->ringbuf_bytes = 0; /* set_ringbuf(): by stack mode */
	o->max_allocs = 1 << 20;
	o->follow_forks = true;
	o->listen = "127.0.0.1:9464";
	o->profile_every_ms = 60000;
	o->profile_keep = 10;
	o->max_procs = 8192;
	o->max_held = 4096;
	o->max_stacks = 16384;
	o->keep_max = 2ULL << 30;
}

/* --FORMAT FILE: a report file of report/formats.h's table. */
static int parse_format(struct gl_opts *o, enum report_format i, const char *arg)
{
	const struct report_format_row *row = &report_formats[i];

	if (!*arg)
		return usage_error("--%s needs a file name, e.g. --%s %s ('-': stdout)",
				   row->option, row->option, row->example);
	o->out[i] = arg;
	o->needs |= row->needs;
	return 0;
}

static int parse_option(struct gl_opts *o, int c, const char *arg)
{
	uint64_t v;

	if (c >= OPT_FORMAT && c < OPT_FORMAT + REPORT_NR_FORMATS)
		return parse_format(o, c - OPT_FORMAT, arg);
	switch (c) {
	case 'a': o->all = true; return 0;
	case 'i':
		return parse_duration_ms(arg, 0, 86400000ULL * 365, &o->interval_ms) ?
			       bad_duration(c, arg, " (0: never)") :
			       0;
	case 'd':
		return parse_duration_ms(arg, 1, 86400000ULL * 365, &o->duration_ms) ?
			       bad_duration(c, arg, " above 0") :
			       0;
	case 'w':
		return parse_duration_ms(arg, 0, 86400000ULL, &o->wait_ms) ?
			       bad_duration(c, arg, " up to 24h") :
			       0;
	case OPT_STACKS:
		if (!strcmp(arg, "fp"))
			o->stack_mode = GL_STACK_FP;
		else if (!strcmp(arg, "dwarf"))
			o->stack_mode = GL_STACK_DWARF;
		else if (!strcmp(arg, "none"))
			o->stack_mode = GL_STACK_NONE;
		else
			return bad_value(c, arg, "dwarf, fp or none");
		return 0;
	case OPT_STACK_BYTES:
		if (parse_size(arg, 256, GL_MAX_STACK_COPY, &v))
			return bad_value(c, arg, "a size from 256 to 32k");
		o->stack_bytes = v;
		return 0;
	case OPT_TOP:
		return parse_u32(arg, 0, 1000000, &o->top) ?
			       bad_value(c, arg, "0 (all) to 1000000") :
			       0;
	case OPT_FRAMES:
		return parse_u32(arg, 0, 4096, &o->frames) ? bad_value(c, arg, "0 (all) to 4096") :
							     0;
	case OPT_RINGBUF:
		if (parse_size(arg, 4096, 1ULL << 31, &v) || (v & (v - 1)))
			return bad_value(c, arg, "a power of two from 4k to 2G");
		o->ringbuf_bytes = v;
		return 0;
	case OPT_MAX_ALLOCS:
		return parse_u32(arg, 1, 1 << 26, &o->max_allocs) ?
			       bad_value(c, arg, "1 to 67108864") :
			       0;
	case OPT_LIBCUDA:
		if (!*arg)
			return bad_value(c, arg, "a path");
		o->libcuda = arg;
		return 0;
	case OPT_NO_FOLLOW: o->follow_forks = false; return 0;
	case OPT_NO_PYTHON: o->no_python = true; return 0;
	case OPT_TORCH:
		o->torch = true;
		o->no_torch = false;
		return 0;
	case OPT_NO_TORCH:
		o->no_torch = true;
		o->torch = false;
		return 0;
	case OPT_TORCH_STACKS:
		if (!strcmp(arg, "python"))
			o->torch_python_only = true;
		else if (!strcmp(arg, "full"))
			o->torch_python_only = false;
		else
			return bad_value(c, arg, "full or python");
		return 0;
	case OPT_TENSORS:
		if (!strcmp(arg, "full") || !strcmp(arg, "windowed") || !strcmp(arg, "sampled")) {
			o->tensors_full = arg[0] != 'w';
			o->tensors_sampled = arg[0] == 's';
			o->no_torch = false;
		} else if (!strcmp(arg, "off")) {
			o->no_torch = true;
			o->torch = o->tensors_full = o->tensors_sampled = false;
		} else {
			return bad_value(c, arg, "windowed, sampled, full or off");
		}
		return 0;
	case OPT_TENSOR_WINDOW:
		return parse_duration_ms(arg, 100, 3600000, &o->tensor_window_ms) ?
			       bad_duration(c, arg, " from 100ms to 1h") :
			       0;
	case OPT_TENSOR_SAMPLE:
		return parse_size(arg, 0, 1ULL << 40, &o->tensor_sample_bytes) ?
			       bad_value(c, arg, "a size from 0 (every block) to 1T") :
			       0;
	case OPT_TENSOR_DUTY:
		return parse_u32(arg, 1, 100, &o->tensor_duty_pct) ?
			       bad_value(c, arg, "a percentage from 1 to 100") :
			       0;
	case OPT_LISTEN:
		if (http__parse_addr(arg, NULL, NULL))
			return bad_value(c, arg, "ADDR:PORT or [IPv6]:PORT");
		o->listen = arg;
		return 0;
	case OPT_STATE_DIR:
		if (arg[0] != '/')
			return bad_value(c, arg, "an absolute path");
		o->state_dir = arg;
		return 0;
	case OPT_PROFILE_DIR:
		if (!arg[0])
			return bad_value(c, arg, "a directory inside --state-dir");
		o->profile_dir = arg;
		return 0;
	case OPT_PROFILE_EVERY:
		if (parse_duration_ms(arg, 1000, 86400000ULL, &o->profile_every_ms))
			return bad_duration(c, arg, " from 1s to 24h");
		return 0;
	case OPT_PROFILE_KEEP:
		if (parse_u32(arg, 1, 100000, &o->profile_keep))
			return bad_value(c, arg, "1 to 100000");
		return 0;
	case OPT_MAX_PROCS:
		if (parse_u32(arg, 1, 1 << 20, &o->max_procs))
			return bad_value(c, arg, "1 to 1048576");
		return 0;
	case OPT_MAX_HELD:
		if (parse_u32(arg, 1, 1 << 20, &o->max_held))
			return bad_value(c, arg, "1 to 1048576");
		return 0;
	case OPT_MAX_STACKS:
		if (parse_u32(arg, 16, 1 << 24, &o->max_stacks))
			return bad_value(c, arg, "16 to 16777216");
		return 0;
	case 'p':
		if (o->nr_pids == GL_MAX_PIDS)
			return usage_error("too many PIDs (at most %d)", GL_MAX_PIDS);
		if (parse_pid(arg, &o->pids[o->nr_pids]))
			return usage_error("invalid PID '%s': expected a process id such as 1234 "
					   "(pgrep NAME finds it)",
					   arg);
		o->nr_pids++;
		return 0;
	case OPT_SORT:
		if (!strcmp(arg, "bytes"))
			o->sort = GL_SORT_BYTES;
		else if (!strcmp(arg, "growth"))
			o->sort = GL_SORT_GROWTH;
		else if (!strcmp(arg, "name"))
			o->sort = GL_SORT_NAME;
		else
			return bad_value(c, arg, "growth, bytes or name");
		return 0;
	case OPT_MAX_PY_PROCS:
		if (parse_u32(arg, 1, 1 << 20, &o->max_py_procs))
			return bad_value(c, arg, "1 to 1048576");
		return 0;
	case OPT_FULL_STACKS: o->full_stacks = true; return 0;
	case OPT_RESCAN:
		return parse_duration_ms(arg, 1000, 3600000, &o->rescan_ms) ?
			       bad_duration(c, arg, " from 1s to 1h") :
			       0;
	case OPT_HOLD_TIMEOUT:
		return parse_duration_ms(arg, 100, 60000, &o->hold_timeout_ms) ?
			       bad_duration(c, arg, " from 100ms to 60s") :
			       0;
	case OPT_RESOLUTION:
		return parse_duration_ms(arg, 1, 3600000, &o->resolution_ms) ?
			       bad_duration(c, arg, " from 1ms to 1h") :
			       0;
	case OPT_BENCH_TORCH_LIB:
		if (!*arg || strlen(arg) >= 64 || strchr(arg, '/'))
			return usage_error("invalid --bench-torch-lib '%s': expected a file-name "
					   "prefix under 64 bytes",
					   arg);
		o->bench_torch_lib = arg;
		return 0;
	case OPT_BENCH_FLOOR: o->bench_floor = true; return 0;
	case OPT_RANKS_ENV: o->ranks_env = true; return 0;
	case OPT_IMBALANCE:
		if (parse_u32(arg, 101, 100000, &o->imbalance_pct))
			return bad_value(c, arg, "a percentage from 101 to 100000");
		return 0;
	case OPT_NO_STACK_CACHE: o->no_stack_cache = true; return 0;
	case 'o':
		if (!*arg)
			return usage_error("-o needs a file name, e.g. -o job.glr");
		o->record_path = arg;
		return 0;
	case OPT_MAX_SIZE:
		if (parse_size(arg, 16384, 1ULL << 50, &o->max_size))
			return bad_value(c, arg, "a size of 16k or more such as " PARSE_SIZE_FORMS);
		return 0;
	case OPT_INCIDENT_DIR:
		if (!*arg)
			return bad_value(c, arg, "a directory");
		o->incident_dir = arg;
		return 0;
	case OPT_INCIDENT_MAX:
		return parse_u32(arg, 1, 1000000, &o->incident_max) ?
			       bad_value(c, arg, "1 to 1000000") :
			       0;
	case OPT_INCIDENT_MAX_BYTES:
		if (parse_size(arg, 1 << 20, 1ULL << 50, &o->incident_max_bytes))
			return bad_value(c, arg, "a size of 1M or more such as " PARSE_SIZE_FORMS);
		return 0;
	case OPT_KEEP_MODULES:
		if (!*arg)
			return bad_value(c, arg, "a directory");
		o->keep_dir = arg;
		return 0;
	case OPT_KEEP_MAX:
		if (parse_size(arg, 1, 1ULL << 50, &o->keep_max))
			return bad_value(c, arg, "a size such as " PARSE_SIZE_FORMS);
		return 0;
	case OPT_DEBUG_DIR:
		if (o->nr_debug_dirs == GL_MAX_DEBUG_DIRS)
			return usage_error("too many --debug-dir (at most %d)", GL_MAX_DEBUG_DIRS);
		if (!*arg)
			return bad_value(c, arg, "a directory");
		o->debug_dirs[o->nr_debug_dirs++] = arg;
		return 0;
	case 'v': o->verbosity++; return 0;
	case 'q': o->verbosity = -1; return 0;
	case OPT_FORCE: o->force = true; return 0;
	case OPT_CENSUS: o->census = true; return 0;
	case OPT_CENSUS_ON_OOM: o->census_on_oom = true; return 0;
	case OPT_NO_PAUSE: o->census_no_pause = true; return 0;
	case OPT_MAX_OBJECTS:
		if (parse_u64(arg, 1, 1ULL << 32, &o->census_max_objects))
			return bad_value(c, arg, "a count from 1 to 4294967296");
		return 0;
	case OPT_MAX_READ:
		if (parse_size(arg, 4096, 1ULL << 40, &o->census_max_read))
			return bad_value(c, arg, "a size from 4K to 1T such as " PARSE_SIZE_FORMS);
		return 0;
	case OPT_MAX_TIME:
		if (parse_duration_ms(arg, 1, 3600000, &o->census_max_ms))
			return bad_duration(c, arg, " from 1ms to 1h");
		return 0;
	case 'h':
		o->help_topic = parsing->name;
		o->cmd = CMD_HELP;
		return 0;
	default: return EXIT_USAGE;
	}
}

/* At most one of the report files may be stdout. */
static int check_outputs(const struct gl_opts *o)
{
	char names[256];
	size_t len = 0;
	int on_stdout = 0;

	for (int i = 0; i < REPORT_NR_FORMATS; i++)
		on_stdout += o->out[i] && !strcmp(o->out[i], "-");
	if (on_stdout <= 1)
		return 0;
	for (int i = 0; i < REPORT_NR_FORMATS && len < sizeof(names); i++)
		len += snprintf(names + len, sizeof(names) - len, "%s--%s",
				!i			  ? "" :
				i + 1 < REPORT_NR_FORMATS ? ", " :
							    " and ",
				report_formats[i].option);
	return usage_error("only one of %s can be '-' (stdout)", names);
}

static int parse_pids(struct gl_opts *o, int argc, char **argv)
{
	for (int i = optind + 1; i < argc; i++) {
		if (o->nr_pids == GL_MAX_PIDS)
			return usage_error("too many PIDs (at most %d)", GL_MAX_PIDS);
		if (parse_pid(argv[i], &o->pids[o->nr_pids]))
			return usage_error("invalid PID '%s': expected a process id such as 1234 "
					   "(pgrep NAME finds it)",
					   argv[i]);
		o->nr_pids++;
	}
	if (!o->nr_pids && !o->all && o->cmd == CMD_TOP)
		o->all = true;
	if (!o->nr_pids && !o->all && o->cmd == CMD_RECORD)
		return usage_error("record needs PIDs, -a or -- CMD: e.g. gpuleak record -o "
				   "job.glr 1234");
	if (o->cmd == CMD_CENSUS && o->nr_pids != 1)
		return usage_error("census reads one process: e.g. gpuleak census 1234 (pgrep "
				   "NAME finds a PID)");
	if (!o->nr_pids && !o->all)
		return usage_error(
			o->cmd == CMD_EXPLAIN ?
				"explain needs PIDs: e.g. gpuleak explain 1234 (pgrep NAME "
				"finds a PID)" :
				"attach needs PIDs or -a: e.g. gpuleak attach 1234 (pgrep "
				"NAME finds a PID)");
	if (o->nr_pids && o->all)
		return usage_error("give PIDs or -a, not both");
	return EXIT_OK;
}

/* Options of record and report; report's FILE. */
static int check_offline(struct gl_opts *o, int argc, char **argv)
{
	if (o->cmd == CMD_RECORD && !o->record_path)
		return usage_error("record needs -o FILE: e.g. gpuleak record -o job.glr 1234");
	if (o->cmd != CMD_REPORT)
		return EXIT_OK;
	if (optind + 1 >= argc)
		return usage_error("report needs a recording: e.g. gpuleak report job.glr");
	if (optind + 2 < argc)
		return usage_error("report reads one recording, not '%s'", argv[optind + 2]);
	o->record_path = argv[optind + 1];
	return EXIT_OK;
}

/* getopt's tables for one subcommand, from its row. */
struct getopt_tables {
	struct option longs[CLI_MAX_OPTIONS + 1];
	char shorts[2 * CLI_MAX_OPTIONS + 4];
};

static void build_tables(const struct cli_command *c, struct getopt_tables *t)
{
	size_t nl = 0, ns = 0;

	/* '+': options end at the first operand; ':': a missing value is told apart */
	if (c->stop_at_operand)
		t->shorts[ns++] = '+';
	t->shorts[ns++] = ':';
	for (const struct cli_option *op = cli_options; op->name; op++) {
		if (!cli__offers(c, op) || nl == CLI_MAX_OPTIONS)
			continue;
		t->longs[nl++] = (struct option){ op->name,
						  op->arg ? required_argument : no_argument, NULL,
						  op->key };
		if (op->key < 256) {
			t->shorts[ns++] = (char)op->key;
			if (op->arg)
				t->shorts[ns++] = ':';
		}
	}
	t->longs[nl] = (struct option){ NULL, 0, NULL, 0 };
	t->shorts[ns] = '\0';
}

/* The subcommands that take an option, for "--listen belongs to serve". */
static void owners(const char *name, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		int w;

		if (c->hidden || !cli__takes(c, name))
			continue;
		w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", c->name);
		if (w < 0 || (size_t)w >= len - n)
			return;
		n += (size_t)w;
	}
}

/* The option a "--name[=value]" element names, or NULL. */
static const struct cli_option *long_written(const char *arg, char *name, size_t len)
{
	if (!arg || strncmp(arg, "--", 2))
		return NULL;
	snprintf(name, len, "%.*s", (int)strcspn(arg, "="), arg);
	return cli__option(name + 2);
}

/*
 * getopt refused an option (c is '?' or ':'); prev is the element before its
 * optind, the one a long option or the end of a cluster was read from. Says
 * which option, as it was written, and why.
 */
static int option_error(int c, const char *prev)
{
	const struct cli_option *op = long_written(prev, (char[64]){ 0 }, 64);
	char name[64], who[128];
	bool is_long;

	/* getopt names a long option by its key; a short letter is its own */
	is_long = optopt == 0 || optopt >= 256 || (op && op->key == optopt);
	if (is_long && prev && !strncmp(prev, "--", 2)) {
		op = long_written(prev, name, sizeof(name));
	} else {
		snprintf(name, sizeof(name), "-%c", optopt);
		op = cli__option_of(optopt);
	}
	if (op && op->hidden)
		op = NULL;
	if (op && !cli__takes(parsing, op->name)) {
		owners(op->name, who, sizeof(who));
		return usage_error("%s is not an option of %s: it belongs to %s", name,
				   parsing->name, who);
	}
	if (c == ':' && op)
		return usage_error("%s needs a value, e.g. %s %s", name, name,
				   op->example ? op->example : op->arg);
	if (op && !op->arg)
		return usage_error("%s takes no value: write %s alone", name, name);
	return usage_error("unknown option '%s'", name);
}

static int find_command(const char *sub, struct gl_opts *o)
{
	if (!strcmp(sub, "--help") || !strcmp(sub, "-h"))
		sub = "help";
	else if (!strcmp(sub, "--version") || !strcmp(sub, "-V"))
		sub = "version";
	parsing = cli__command(sub);
	if (!parsing) {
		char names[256];
		size_t n = 0;

		names[0] = '\0';
		for (const struct cli_command *c = cli_commands; c->name; c++) {
			int w = c->hidden ? 0 :
					    snprintf(names + n, sizeof(names) - n, "%s%s",
						     n ? ", " : "", c->name);

			if (w < 0 || (size_t)w >= sizeof(names) - n)
				break;
			n += (size_t)w;
		}
		return usage_error("unknown subcommand '%s': the subcommands are %s", sub, names);
	}
	o->cmd = parsing->cmd;
	o->command = parsing;
	return EXIT_OK;
}

/* help [SUBCOMMAND], completion SHELL, version: their operands. */
static int check_printers(struct gl_opts *o, int argc, char **argv)
{
	const char *arg = optind + 1 < argc ? argv[optind + 1] : NULL;

	if (optind + 2 < argc)
		return usage_error("%s takes at most one operand, not '%s'", parsing->name,
				   argv[optind + 2]);
	if (o->cmd == CMD_HELP && arg) {
		const struct cli_command *c = cli__command(arg);

		if (!c || c->hidden)
			return usage_error("no subcommand '%s': gpuleak help lists them", arg);
		o->help_topic = c->name;
	} else if (o->cmd == CMD_COMPLETION) {
		if (!arg || (strcmp(arg, "bash") && strcmp(arg, "zsh")))
			return usage_error("completion needs a shell: gpuleak completion bash, or "
					   "zsh");
		o->shell = arg;
	} else if (arg && o->cmd != CMD_HELP) {
		return usage_error("%s takes no operand ('%s')", parsing->name, arg);
	}
	return EXIT_OK;
}

/*
 * The token among the last one or two getopt took (args[ind-2..ind-1]) that named long
 * option name, if it was abbreviated ("--census" for --census-on-oom), else NULL: getopt
 * takes any unambiguous prefix, and a prefix that is another subcommand's option would
 * then be read as this one's.
 */
static const char *abbreviated(char **args, int ind, const char *name)
{
	size_t len = strlen(name);

	for (int k = 1; k <= 2 && ind - k >= 0; k++) {
		const char *a = args[ind - k];
		size_t n;

		if (strncmp(a, "--", 2))
			continue;
		n = strcspn(a + 2, "=");
		if (n <= len && !strncmp(a + 2, name, n))
			return n < len ? a : NULL;
	}
	return NULL;
}

static int parse_options(struct gl_opts *o, int argc, char **argv)
{
	struct getopt_tables t;
	int c, err, li = -1;
	const char *abbr;

	build_tables(parsing, &t);
	/*
	 * getopt reads argv + 1, whose argv[0] is the subcommand: its optind is one
	 * less than argv's. optind = 0 restarts it with no state left from an
	 * earlier parse.
	 */
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, t.shorts, t.longs, &li)) != -1) {
		if (c == '?' || c == ':')
			return option_error(c, optind > 0 ? argv[optind] : NULL);
		if (li >= 0 && (abbr = abbreviated(argv + 1, optind, t.longs[li].name))) {
			optopt = 0;
			return option_error('?', abbr);
		}
		li = -1;
		err = parse_option(o, c, optarg);
		if (err || o->cmd == CMD_HELP)
			return err;
	}
	return EXIT_OK;
}

int cli__parse(int argc, char **argv, struct gl_opts *o)
{
	int err;

	defaults(o);
	parsing = NULL;
	if (argc < 2)
		return usage_error("missing subcommand: e.g. gpuleak attach PID, gpuleak run -- "
				   "CMD, gpuleak top");
	err = find_command(argv[1], o);
	if (err)
		return err;
	if (o->cmd == CMD_TOP)
		o->interval_ms = 2000;
	if (o->cmd == CMD_EXPLAIN)
		o->interval_ms = 0; /* one answer */
	err = parse_options(o, argc, argv);
	if (err || (o->cmd == CMD_HELP && parsing->cmd != CMD_HELP)) /* SUBCOMMAND --help */
		return err;
	if (o->cmd == CMD_HELP || o->cmd == CMD_VERSION || o->cmd == CMD_COMPLETION ||
	    o->cmd == CMD_MAN)
		return err ?: check_printers(o, argc, argv);
	if (o->tensors_sampled && !o->tensor_sample_bytes)
		o->tensor_sample_bytes = DEFAULT_TENSOR_SAMPLE;
	if (!o->tensor_window_ms)
		o->tensor_window_ms = 16 * o->resolution_ms;
	/*
	 * A DWARF stack record carries the stack (16 KiB): bursts need room. Without them a
	 * record is about a hundred bytes, and the smaller the ring, the likelier its lines
	 * are still in the CPU's caches when a record is written into them again (a driver
	 * pair's BPF work ~10 % less than at 8 MiB, bench/RESULTS.md). 2 MiB holds 20,000
	 * such records, and the programs wake gpuleak-ring once an eighth of it waits.
	 */
	if (!o->ringbuf_bytes)
		o->ringbuf_bytes = o->stack_mode == GL_STACK_DWARF ? 16 << 20 : 2 << 20;
	err = check_outputs(o);
	if (err)
		return err;
	err = check_offline(o, argc, argv);
	if (err || o->cmd == CMD_REPORT)
		return err;
	if (o->census_on_oom && o->cmd == CMD_SERVE && !o->state_dir)
		return usage_error(
			"--census-on-oom writes into incident bundles, under --state-dir: "
			"e.g. --state-dir /var/lib/gpuleak --census-on-oom");
	if (o->census_on_oom && o->cmd != CMD_SERVE && !o->incident_dir)
		return usage_error("--census-on-oom writes into incident bundles: give "
				   "--incident-dir DIR too");
	/* getopt stepped over a '--' that ended the options */
	if (o->cmd == CMD_RECORD && optind + 1 < argc && !strcmp(argv[optind], "--")) {
		if (o->all || o->nr_pids)
			return usage_error("record traces PIDs, -a or -- CMD: one of them");
		o->argv = &argv[optind + 1];
		return EXIT_OK;
	}
	if (o->cmd == CMD_RUN) {
		if (optind + 1 >= argc)
			return usage_error("run needs a command: gpuleak run -- CMD [ARG...]");
		o->argv = &argv[optind + 1];
		return EXIT_OK;
	}
	if (o->cmd == CMD_SERVE)
		return check_serve(o, argc, argv);
	/* explain answers once (its row takes no -a and no -i): a moment, by default */
	if (o->cmd == CMD_EXPLAIN && !o->duration_ms)
		o->duration_ms = 1000;
	return parse_pids(o, argc, argv);
}

int cli__run(const struct gl_opts *o)
{
	/* SUBCOMMAND --help runs help's row */
	const struct cli_command *c = o->cmd == CMD_HELP ? cli__command_of(CMD_HELP) : o->command;

	return c && c->run ? c->run(o) : EXIT_USAGE;
}
