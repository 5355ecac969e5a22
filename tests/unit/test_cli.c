// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_cli.c - cmd/cli.c: subcommands, every option with valid, out-of-range,
 * negative, non-numeric and huge values, '--', PIDs. A usage error returns
 * EXIT_USAGE and prints exactly one line on stderr; success prints nothing.
 */
#include "unit.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "report/formats.h"

#define MAX_ARGS 300

static struct gl_opts opts;
static char *err_text;

/* Parses "gpuleak" + args (NULL-terminated) from freshly allocated strings, as main gets them. */
static int parse_v(const char *const *args)
{
	char *argv[MAX_ARGS + 2];
	struct unit_stderr cap;
	int argc = 0, rc;

	argv[argc++] = strdup("gpuleak");
	for (; *args; args++) {
		assert_true(argc <= MAX_ARGS);
		argv[argc++] = strdup(*args);
	}
	argv[argc] = NULL;
	free(err_text);
	unit_stderr_begin(&cap);
	rc = cli__parse(argc, argv, &opts);
	err_text = unit_stderr_end(&cap);
	/* run keeps pointers into argv: copy them before the strings go */
	if (rc == EXIT_OK && opts.argv) {
		static char run_args[16][64];
		static char *run_argv[17];
		int i;

		for (i = 0; opts.argv[i] && i < 16; i++) {
			snprintf(run_args[i], sizeof(run_args[i]), "%s", opts.argv[i]);
			run_argv[i] = run_args[i];
		}
		run_argv[i] = NULL;
		opts.argv = run_argv;
	}
	if (opts.out[REPORT_JSON]) {
		static char json[256];

		snprintf(json, sizeof(json), "%s", opts.out[REPORT_JSON]);
		opts.out[REPORT_JSON] = json;
	}
	if (opts.libcuda) {
		static char lib[256];

		snprintf(lib, sizeof(lib), "%s", opts.libcuda);
		opts.libcuda = lib;
	}
	for (int i = 0; i < argc; i++) {
		memset(argv[i], 'X', strlen(argv[i]));
		free(argv[i]);
	}
	return rc;
}

#define parse(...) parse_v((const char *const[]){ __VA_ARGS__, NULL })

static void expect_ok_v(const char *const *args)
{
	int rc = parse_v(args);

	if (rc != EXIT_OK || err_text[0])
		fail_msg("'%s ...' failed with %d: %s", args[0] ? args[0] : "", rc, err_text);
}

#define ok(...) expect_ok_v((const char *const[]){ __VA_ARGS__, NULL })

/* A usage error: status 2, one line on stderr that names what is wrong. */
static void expect_usage_v(const char *what, const char *const *args)
{
	int rc = parse_v(args);
	size_t len = strlen(err_text);

	if (rc != EXIT_USAGE)
		fail_msg("expected a usage error naming '%s', got status %d", what, rc);
	if (unit_lines(err_text) != 1 || !len || err_text[len - 1] != '\n')
		fail_msg("expected one line on stderr, got: '%s'", err_text);
	if (strncmp(err_text, "gpuleak: ", 9))
		fail_msg("message does not start with 'gpuleak: ': %s", err_text);
	if (what && !strstr(err_text, what))
		fail_msg("message does not name '%s': %s", what, err_text);
}

#define usage(what, ...) expect_usage_v(what, (const char *const[]){ __VA_ARGS__, NULL })

static int teardown(void **state)
{
	free(err_text);
	err_text = NULL;
	return 0;
}

static void test_subcommands(void **state)
{
	expect_usage_v("missing subcommand", (const char *const[]){ NULL });
	usage("frobnicate", "frobnicate");
	usage("'-v'", "-v");
	usage("ATTACH", "ATTACH", "1");
	ok("help");
	assert_int_equal(opts.cmd, CMD_HELP);
	ok("--help");
	assert_int_equal(opts.cmd, CMD_HELP);
	ok("-h");
	assert_int_equal(opts.cmd, CMD_HELP);
	ok("version");
	assert_int_equal(opts.cmd, CMD_VERSION);
	ok("--version");
	assert_int_equal(opts.cmd, CMD_VERSION);
	/* help inside a subcommand wins over what follows */
	ok("attach", "-h");
	assert_int_equal(opts.cmd, CMD_HELP);
	ok("run", "--help", "--bogus");
	assert_int_equal(opts.cmd, CMD_HELP);
}

static void test_defaults(void **state)
{
	ok("attach", "1");
	assert_int_equal(opts.cmd, CMD_ATTACH);
	assert_int_equal(opts.nr_pids, 1);
	assert_int_equal(opts.pids[0], 1);
	assert_false(opts.all);
	assert_int_equal(opts.interval_ms, 10000);
	assert_int_equal(opts.duration_ms, 0);
	assert_int_equal(opts.wait_ms, 30000);
	assert_null(opts.out[REPORT_JSON]);
	assert_null(opts.libcuda);
#if defined(__x86_64__)
	assert_int_equal(opts.stack_mode, GL_STACK_DWARF);
#else
	assert_int_equal(opts.stack_mode, GL_STACK_FP);
#endif
	assert_int_equal(opts.stack_bytes, 16384);
	assert_false(opts.no_python);
	assert_int_equal(opts.top, 10);
	assert_int_equal(opts.frames, 32);
#if defined(__x86_64__)
	assert_int_equal(opts.ringbuf_bytes, 16 << 20); /* DWARF records carry the stack */
#else
	assert_int_equal(opts.ringbuf_bytes, 2 << 20);
#endif
	assert_int_equal(opts.max_allocs, 1 << 20);
	assert_true(opts.follow_forks);
	assert_int_equal(opts.verbosity, 0);
}

static void test_pids(void **state)
{
	ok("attach", "4242", "1", "4194303");
	assert_int_equal(opts.nr_pids, 3);
	assert_int_equal(opts.pids[0], 4242);
	assert_int_equal(opts.pids[1], 1);
	assert_int_equal(opts.pids[2], 4194303);
	usage("needs PIDs", "attach");
	usage("'0'", "attach", "0");
	usage("'4194304'", "attach", "4194304");
	usage("'99999999999999999999999'", "attach", "99999999999999999999999");
	usage("'12abc'", "attach", "12abc");
	usage("'abc'", "attach", "abc");
	usage("' 12'", "attach", " 12");
	usage("''", "attach", "");
	usage("'1.5'", "attach", "1", "1.5");
	/* a negative number is an option, not a PID */
	usage("-5", "attach", "-5");
	/* after '--' it is a PID, and not a valid one */
	usage("'-5'", "attach", "--", "-5");
	ok("attach", "--", "77");
	assert_int_equal(opts.nr_pids, 1);
	assert_int_equal(opts.pids[0], 77);
}

static void test_pid_limit(void **state)
{
	const char *args[GL_MAX_PIDS + 3];
	char pids[GL_MAX_PIDS + 1][12];
	int n = 0;

	args[n++] = "attach";
	for (int i = 0; i < GL_MAX_PIDS; i++) {
		snprintf(pids[i], sizeof(pids[i]), "%d", 100 + i);
		args[n++] = pids[i];
	}
	args[n] = NULL;
	expect_ok_v(args);
	assert_int_equal(opts.nr_pids, GL_MAX_PIDS);
	assert_int_equal(opts.pids[GL_MAX_PIDS - 1], 100 + GL_MAX_PIDS - 1);
	snprintf(pids[GL_MAX_PIDS], sizeof(pids[0]), "%d", 99);
	args[n++] = pids[GL_MAX_PIDS];
	args[n] = NULL;
	expect_usage_v("too many PIDs", args);
}

static void test_all(void **state)
{
	ok("attach", "-a");
	assert_true(opts.all);
	assert_int_equal(opts.nr_pids, 0);
	ok("attach", "--all");
	assert_true(opts.all);
	usage("not both", "attach", "-a", "42");
	usage("-a", "run", "-a", "--", "true");
	usage("--all", "attach", "--all=1");
}

static void test_run(void **state)
{
	ok("run", "--", "python3", "train.py", "--epochs", "3");
	assert_int_equal(opts.cmd, CMD_RUN);
	assert_string_equal(opts.argv[0], "python3");
	assert_string_equal(opts.argv[1], "train.py");
	assert_string_equal(opts.argv[2], "--epochs");
	assert_string_equal(opts.argv[3], "3");
	assert_null(opts.argv[4]);
	assert_int_equal(opts.nr_pids, 0);
	/* the command's own options are its own, with or without '--' */
	ok("run", "-i", "5", "./a.out", "-i", "7", "--json", "x");
	assert_int_equal(opts.interval_ms, 5000);
	assert_null(opts.out[REPORT_JSON]);
	assert_string_equal(opts.argv[0], "./a.out");
	assert_string_equal(opts.argv[1], "-i");
	assert_string_equal(opts.argv[2], "7");
	ok("run", "--json", "out.json", "--libcuda", "/opt/lib/libcuda.so.1", "--", "true");
	assert_string_equal(opts.out[REPORT_JSON], "out.json");
	assert_string_equal(opts.libcuda, "/opt/lib/libcuda.so.1");
	assert_string_equal(opts.argv[0], "true");
	assert_null(opts.argv[1]);
	/* '--' ends the options: what follows is the command even if it looks like one */
	ok("run", "--", "--version");
	assert_string_equal(opts.argv[0], "--version");
	usage("needs a command", "run");
	usage("needs a command", "run", "--");
	usage("needs a command", "run", "-v", "--");
}

static void test_durations(void **state)
{
	ok("attach", "-i", "5", "1");
	assert_int_equal(opts.interval_ms, 5000);
	ok("attach", "--interval", "250ms", "1");
	assert_int_equal(opts.interval_ms, 250);
	ok("attach", "--interval=2m", "1");
	assert_int_equal(opts.interval_ms, 120000);
	ok("attach", "-i0", "1");
	assert_int_equal(opts.interval_ms, 0);
	ok("attach", "-i", "8760h", "1");
	assert_int_equal(opts.interval_ms, 8760ULL * 3600000);
	usage("'8761h'", "attach", "-i", "8761h", "1");
	usage("'-1'", "attach", "-i", "-1", "1");
	usage("'abc'", "attach", "--interval", "abc", "1");
	usage("'1d'", "attach", "--interval", "1d", "1");
	usage("'18446744073709551616'", "attach", "-i", "18446744073709551616", "1");
	usage("'18446744073709552'", "attach", "-i", "18446744073709552", "1");
	usage("''", "attach", "-i", "", "1");

	ok("attach", "-d", "1.5s", "1");
	assert_int_equal(opts.duration_ms, 1500);
	ok("attach", "1", "-d", "1m30s");
	assert_int_equal(opts.duration_ms, 90000);
	/* the error shows forms that are accepted */
	usage("such as 500ms, 1.5s, 90s, 1m30s or 2h", "attach", "-d", "soon", "1");
	ok("attach", "-d", "1ms", "1");
	assert_int_equal(opts.duration_ms, 1);
	ok("attach", "--duration", "1h", "1");
	assert_int_equal(opts.duration_ms, 3600000);
	usage("'0'", "attach", "-d", "0", "1");
	usage("'0s'", "attach", "--duration", "0s", "1");
	usage("'8761h'", "attach", "-d", "8761h", "1");
	usage("'-3s'", "attach", "-d", "-3s", "1");
	usage("'3x'", "attach", "-d", "3x", "1");
	usage("'99999999999999999999'", "attach", "-d", "99999999999999999999", "1");

	ok("attach", "-w", "0", "1");
	assert_int_equal(opts.wait_ms, 0);
	ok("attach", "--wait", "24h", "1");
	assert_int_equal(opts.wait_ms, 86400000);
	usage("'25h'", "attach", "-w", "25h", "1");
	usage("'-1'", "attach", "--wait", "-1", "1");
	usage("'soon'", "attach", "--wait", "soon", "1");
	usage("'99999999999999999999s'", "attach", "-w", "99999999999999999999s", "1");
}

static void test_stacks(void **state)
{
	ok("attach", "--stacks", "dwarf", "1");
	assert_int_equal(opts.stack_mode, GL_STACK_DWARF);
	ok("attach", "--stacks", "none", "1");
	assert_int_equal(opts.stack_mode, GL_STACK_NONE);
	ok("attach", "--stacks", "fp", "1");
	assert_int_equal(opts.stack_mode, GL_STACK_FP);
	usage("'FP'", "attach", "--stacks", "FP", "1");
	usage("''", "attach", "--stacks", "", "1");
	usage("'lbr'", "attach", "--stacks=lbr", "1");

	ok("attach", "--stack-bytes", "256", "1");
	assert_int_equal(opts.stack_bytes, 256);
	ok("attach", "--stack-bytes", "32k", "1");
	assert_int_equal(opts.stack_bytes, 32768);
	ok("attach", "--stack-bytes", "8K", "1");
	assert_int_equal(opts.stack_bytes, 8192);
	usage("'255'", "attach", "--stack-bytes", "255", "1");
	usage("'32769'", "attach", "--stack-bytes", "32769", "1");
	usage("'1M'", "attach", "--stack-bytes", "1M", "1");
	usage("'-1'", "attach", "--stack-bytes", "-1", "1");
	usage("'big'", "attach", "--stack-bytes", "big", "1");
	usage("'18446744073709551616'", "attach", "--stack-bytes", "18446744073709551616", "1");
	/* k times 2^54 wraps to 0 in 64 bits: still out of range */
	usage("'18014398509481984k'", "attach", "--stack-bytes", "18014398509481984k", "1");

	ok("attach", "--no-python", "1");
	assert_true(opts.no_python);
}

static void test_counts(void **state)
{
	ok("attach", "--top", "0", "1");
	assert_int_equal(opts.top, 0);
	ok("attach", "--top", "1000000", "1");
	assert_int_equal(opts.top, 1000000);
	usage("'1000001'", "attach", "--top", "1000001", "1");
	usage("'-1'", "attach", "--top", "-1", "1");
	usage("'ten'", "attach", "--top", "ten", "1");
	usage("'4294967296'", "attach", "--top", "4294967296", "1");
	usage("'99999999999999999999'", "attach", "--top", "99999999999999999999", "1");
	usage("'5k'", "attach", "--top", "5k", "1");

	ok("attach", "--frames", "4096", "1");
	assert_int_equal(opts.frames, 4096);
	ok("attach", "--frames", "0", "1");
	assert_int_equal(opts.frames, 0);
	usage("'4097'", "attach", "--frames", "4097", "1");
	usage("'-2'", "attach", "--frames", "-2", "1");
	usage("'x'", "attach", "--frames", "x", "1");
	usage("'99999999999999999999'", "attach", "--frames", "99999999999999999999", "1");

	ok("attach", "--max-allocs", "1", "1");
	assert_int_equal(opts.max_allocs, 1);
	ok("attach", "--max-allocs", "67108864", "1");
	assert_int_equal(opts.max_allocs, 67108864);
	usage("'0'", "attach", "--max-allocs", "0", "1");
	usage("'67108865'", "attach", "--max-allocs", "67108865", "1");
	usage("'-1'", "attach", "--max-allocs", "-1", "1");
	usage("'1M'", "attach", "--max-allocs", "1M", "1");
	usage("'99999999999999999999'", "attach", "--max-allocs", "99999999999999999999", "1");
}

static void test_ringbuf(void **state)
{
	ok("attach", "--stacks", "fp", "1");
	assert_int_equal(opts.ringbuf_bytes, 2 << 20);
	ok("attach", "--stacks", "none", "1");
	assert_int_equal(opts.ringbuf_bytes, 2 << 20);
	ok("attach", "--stacks", "dwarf", "1");
	assert_int_equal(opts.ringbuf_bytes, 16 << 20);
	ok("attach", "--stacks", "dwarf", "--ringbuf-size", "64M", "1");
	assert_int_equal(opts.ringbuf_bytes, 64 << 20);
	ok("attach", "--ringbuf-size", "4k", "1");
	assert_int_equal(opts.ringbuf_bytes, 4096);
	ok("attach", "--ringbuf-size", "4096", "1");
	assert_int_equal(opts.ringbuf_bytes, 4096);
	ok("attach", "--ringbuf-size", "1M", "1");
	assert_int_equal(opts.ringbuf_bytes, 1 << 20);
	ok("attach", "--ringbuf-size", "2G", "1");
	assert_int_equal(opts.ringbuf_bytes, 1ULL << 31);
	usage("'4G'", "attach", "--ringbuf-size", "4G", "1");
	usage("'2k'", "attach", "--ringbuf-size", "2k", "1");
	usage("'12k'", "attach", "--ringbuf-size", "12k", "1");
	usage("'0'", "attach", "--ringbuf-size", "0", "1");
	usage("'-4k'", "attach", "--ringbuf-size", "-4k", "1");
	usage("'lots'", "attach", "--ringbuf-size", "lots", "1");
	usage("'18446744073709551616'", "attach", "--ringbuf-size", "18446744073709551616",
	      "1");
}

static void test_flags(void **state)
{
	ok("attach", "-v", "1");
	assert_int_equal(opts.verbosity, 1);
	ok("attach", "-vvv", "1");
	assert_int_equal(opts.verbosity, 3);
	ok("attach", "--verbose", "-v", "1");
	assert_int_equal(opts.verbosity, 2);
	ok("attach", "-q", "1");
	assert_int_equal(opts.verbosity, -1);
	ok("attach", "--quiet", "1");
	assert_int_equal(opts.verbosity, -1);
	ok("attach", "--no-follow-forks", "1");
	assert_false(opts.follow_forks);
	ok("attach", "--json", "-", "1");
	assert_string_equal(opts.out[REPORT_JSON], "-");
	ok("attach", "--json=/tmp/r.json", "-a");
	assert_string_equal(opts.out[REPORT_JSON], "/tmp/r.json");
	/* an empty file name would only fail when the report is written, at the end */
	usage("--json", "attach", "--json", "", "1");
	usage("--json", "attach", "--json=", "1");
	usage("--libcuda", "run", "--libcuda", "", "--", "x");
	ok("run", "--libcuda", "libcuda.so.1", "x");
	assert_string_equal(opts.libcuda, "libcuda.so.1");
	/* clustered short options with a value */
	ok("attach", "-vai5s");
	assert_int_equal(opts.verbosity, 1);
	assert_true(opts.all);
	assert_int_equal(opts.interval_ms, 5000);
}

static void test_tensors(void **state)
{
	/* windowed by default: 16 x the resolution, 2 % duty, every block's stack */
	ok("attach", "1");
	assert_false(opts.tensors_full);
	assert_false(opts.no_torch);
	assert_int_equal(opts.tensor_window_ms, 16000);
	assert_int_equal(opts.tensor_duty_pct, 2);
	assert_int_equal(opts.tensor_sample_bytes, 0);
	ok("attach", "--resolution", "50ms", "1");
	assert_int_equal(opts.tensor_window_ms, 800);
	ok("attach", "--tensor-window", "3s", "--tensor-duty", "10", "1");
	assert_int_equal(opts.tensor_window_ms, 3000);
	assert_int_equal(opts.tensor_duty_pct, 10);
	ok("attach", "--tensors", "full", "1");
	assert_true(opts.tensors_full);
	assert_false(opts.tensors_sampled);
	ok("attach", "--tensors", "sampled", "1");
	assert_true(opts.tensors_full && opts.tensors_sampled);
	assert_int_equal(opts.tensor_sample_bytes, 1 << 20);
	ok("attach", "--tensors", "sampled", "--tensor-sample", "64k", "1");
	assert_int_equal(opts.tensor_sample_bytes, 65536);
	ok("attach", "--tensors", "off", "1");
	assert_true(opts.no_torch);
	usage("--tensors", "attach", "--tensors", "some", "1");
	usage("--tensor-duty", "attach", "--tensor-duty", "0", "1");
	usage("--tensor-duty", "attach", "--tensor-duty", "101", "1");
	usage("--tensor-window", "attach", "--tensor-window", "10ms", "1");
}

static void test_bad_options(void **state)
{
	usage("--bogus", "attach", "--bogus", "1");
	usage("-z", "attach", "-z", "1");
	usage("-z", "attach", "-vz", "1");
	/* a missing value names the option as it was written */
	usage("--json", "attach", "--json");
	usage("--top", "attach", "1", "--top");
	usage("--top", "attach", "--top");
	usage("--ringbuf-size", "attach", "--ringbuf-size");
	usage("-i", "attach", "-i");
	usage("--no-python", "attach", "--no-python=yes", "1");
	/* an option of another subcommand names the ones that take it */
	usage("belongs to serve", "attach", "--listen", "127.0.0.1:1", "1");
	usage("belongs to attach, top, record", "run", "-a", "--", "x");
	usage("belongs to record", "attach", "-o", "x.glr", "1");
	usage("belongs to report", "attach", "--debug-dir", "d", "1");
	/* the missing value comes with an accepted one */
	usage("e.g. --json report.json", "attach", "1", "--json");
	usage("e.g. -i 10s", "attach", "1", "-i");
	usage("takes no value", "attach", "--all=1");
}

/* py-spy's, perf's and bcc's habit: options after the operands, '--' ends them. */
static void test_options_anywhere(void **state)
{
	ok("attach", "13039", "--duration", "3");
	assert_int_equal(opts.nr_pids, 1);
	assert_int_equal(opts.pids[0], 13039);
	assert_int_equal(opts.duration_ms, 3000);
	ok("attach", "1", "--json", "x", "2", "-v");
	assert_int_equal(opts.nr_pids, 2);
	assert_string_equal(opts.out[REPORT_JSON], "x");
	assert_int_equal(opts.verbosity, 1);
	ok("record", "13039", "-o", "job.glr", "--duration", "1m30s");
	assert_int_equal(opts.pids[0], 13039);
	assert_int_equal(opts.duration_ms, 90000);
	ok("top", "42", "--sort", "name");
	assert_int_equal(opts.pids[0], 42);
	assert_int_equal(opts.sort, GL_SORT_NAME);
	ok("report", "job.glr", "--top", "3");
	assert_int_equal(opts.top, 3);
	/* '--' ends them: what follows is an operand even if it looks like an option */
	usage("'-d'", "attach", "1", "--", "-d", "3");
	ok("record", "-o", "r.glr", "--", "python3", "-c", "pass");
	assert_string_equal(opts.argv[0], "python3");
	assert_string_equal(opts.argv[1], "-c");
	ok("record", "-o", "r.glr", "-d", "2s", "--force", "--", "x");
	assert_true(opts.force);
	/* record with a command needs the '--' */
	usage("'python3'", "record", "-o", "r.glr", "python3");
}

static void test_help_and_version(void **state)
{
	ok("attach", "--help");
	assert_int_equal(opts.cmd, CMD_HELP);
	assert_string_equal(opts.help_topic, "attach");
	ok("serve", "-h");
	assert_string_equal(opts.help_topic, "serve");
	ok("help", "top");
	assert_string_equal(opts.help_topic, "top");
	ok("help");
	assert_null(opts.help_topic);
	usage("'nope'", "help", "nope");
	usage("'man'", "help", "man"); /* hidden */
	ok("-V");
	assert_int_equal(opts.cmd, CMD_VERSION);
	ok("completion", "bash");
	assert_int_equal(opts.cmd, CMD_COMPLETION);
	usage("needs a shell", "completion", "fish");
	usage("needs a shell", "completion");
}

/* The tables agree with themselves: a misspelt option name would silently drop it. */
static void test_tables(void **state)
{
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		char names[1024], *save = NULL;
		int n = 0;

		assert_non_null(c->run);
		assert_non_null(c->summary);
		assert_true(cli__command(c->name) == c);
		snprintf(names, sizeof(names), "%s", c->options);
		for (char *w = strtok_r(names, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
			if (!cli__option(w))
				fail_msg("%s takes --%s, which is no option", c->name, w);
			n++;
		}
		assert_true(n <= CLI_MAX_OPTIONS);
		if (!c->hidden && !c->examples)
			fail_msg("%s has no example", c->name);
	}
	for (const struct cli_option *op = cli_options; op->name; op++) {
		bool taken = false;

		assert_true(cli__option(op->name) == op); /* one row per name */
		assert_true(cli__option_of(op->key) == op); /* keys are unique */
		for (const struct cli_command *c = cli_commands; c->name; c++)
			taken |= cli__takes(c, op->name);
		if (!taken)
			fail_msg("no subcommand takes --%s", op->name);
		if (op->arg && !op->example && !op->hidden)
			fail_msg("--%s has no example value for its errors", op->name);
	}
}

/* Each subcommand's help: its options, no others, an example, 80 columns. */
static void test_command_help(void **state)
{
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		struct unit_mem m;
		char *out, want[96], *section, *end;

		if (c->hidden)
			continue;
		assert_int_equal(doc__command_help(unit_mem_open(&m), c), 0);
		out = unit_mem_close(&m);
		snprintf(want, sizeof(want), "usage: gpuleak %s", c->name);
		if (strncmp(out, want, strlen(want)))
			fail_msg("%s --help does not start with '%s': %.80s", c->name, want, out);
		if (!strstr(out, "examples:\n  ") || !strstr(out, "gpuleak"))
			fail_msg("%s --help has no example", c->name);
		/* the options section: from "options:" to the blank line */
		section = strstr(out, "options:\n");
		assert_non_null(section);
		end = strstr(section, "\n\n");
		assert_non_null(end);
		*end = '\0';
		for (const struct cli_option *op = cli_options; op->name; op++) {
			char label[80];
			bool listed, takes;

			takes = !op->hidden && cli__offers(c, op);

			snprintf(label, sizeof(label), "--%s ", op->name);
			listed = strstr(section, label) != NULL;
			if (listed != takes)
				fail_msg("%s --help %s --%s", c->name, listed ? "lists" : "misses",
					 op->name);
		}
		*end = '\n';
		for (char *line = out, *nl; (nl = strchr(line, '\n')); line = nl + 1)
			if (nl - line > 80)
				fail_msg("%s --help: a line of %d columns", c->name, (int)(nl - line));
		free(out);
	}
}


/* After any error, the next parse starts from a clean state. */
static void test_parse_again(void **state)
{
	usage("-z", "attach", "-zv", "1");
	ok("attach", "2");
	assert_int_equal(opts.verbosity, 0);
	assert_int_equal(opts.nr_pids, 1);
	assert_int_equal(opts.pids[0], 2);
	usage("-x", "attach", "-ax", "1");
	ok("attach", "3");
	assert_false(opts.all);
	assert_int_equal(opts.pids[0], 3);
	usage("'foo'", "attach", "-i", "foo", "-v", "1");
	ok("run", "-v", "--", "x");
	assert_int_equal(opts.verbosity, 1);
	assert_string_equal(opts.argv[0], "x");
}

static void test_explain(void **state)
{
	ok("explain", "42");
	assert_int_equal(opts.cmd, CMD_EXPLAIN);
	assert_int_equal(opts.nr_pids, 1);
	assert_int_equal(opts.pids[0], 42);
	assert_int_equal(opts.duration_ms, 1000); /* a moment, by default */
	assert_int_equal(opts.interval_ms, 0);	  /* one answer, no summaries */
	ok("explain", "-d", "5s", "--json", "out.json", "42", "43");
	assert_int_equal(opts.duration_ms, 5000);
	assert_int_equal(opts.nr_pids, 2);
	assert_string_equal(opts.out[REPORT_JSON], "out.json");
	usage("explain needs PIDs", "explain");
	/* it answers once, for the PIDs it is given: the table gives it no -a, no -i */
	usage("-a is not an option of explain: it belongs to attach", "explain", "-a");
	usage("-i is not an option of explain: it belongs to attach", "explain", "-i", "5s",
	      "42");
}

/* census is a row of the one table: --json FILE as everyone's, its caps, one PID. */
static void test_census(void **state)
{
	const struct cli_command *c = cli__command("census");

	assert_non_null(c);
	assert_true(cli__takes(c, "json") && cli__takes(c, "no-pause") &&
		    cli__takes(c, "max-objects") && cli__takes(c, "max-read") &&
		    cli__takes(c, "max-time"));
	ok("census", "42");
	assert_int_equal(opts.cmd, CMD_CENSUS);
	assert_int_equal(opts.pids[0], 42);
	assert_false(opts.census_no_pause);
	assert_null(opts.out[REPORT_JSON]);
	assert_int_equal(opts.census_max_objects, 0); /* the defaults of census_cmd */
	ok("census", "--json", "-", "--no-pause", "--max-objects", "2000", "--max-read", "64K",
	   "--max-time", "1500ms", "42");
	assert_string_equal(opts.out[REPORT_JSON], "-");
	assert_true(opts.census_no_pause);
	assert_int_equal(opts.census_max_objects, 2000);
	assert_int_equal(opts.census_max_read, 64 << 10);
	assert_int_equal(opts.census_max_ms, 1500);
	usage("--json needs a value", "census", "--json");
	usage("census reads one process", "census");
	usage("census reads one process", "census", "1", "2");
	usage("invalid --max-read '1'", "census", "--max-read", "1", "42");
	usage("-a is not an option of census", "census", "-a");
	ok("attach", "--census", "42");
	assert_true(opts.census);
	usage("--census is not an option of run: it belongs to attach", "run", "--census",
	      "--", "true");
}

static void test_usage_text(void **state)
{
	struct unit_mem m;
	char *out;

	assert_int_equal(doc__help(unit_mem_open(&m)), 0);
	out = unit_mem_close(&m);
	for (const struct cli_command *c = cli_commands; c->name; c++) {
		char want[64];

		snprintf(want, sizeof(want), "\n  %-12s%s\n", c->name, c->summary);
		if (c->hidden ? strstr(out, want) != NULL : strstr(out, want) == NULL)
			fail_msg("help and the table disagree on %s", c->name);
	}
	assert_non_null(strstr(out, "exit status"));
	assert_non_null(strstr(out, "1m30s"));
	/* fits a terminal */
	for (char *line = out, *nl; (nl = strchr(line, '\n')); line = nl + 1)
		assert_true(nl - line <= 80);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_subcommands, teardown),
		cmocka_unit_test_teardown(test_defaults, teardown),
		cmocka_unit_test_teardown(test_pids, teardown),
		cmocka_unit_test_teardown(test_pid_limit, teardown),
		cmocka_unit_test_teardown(test_all, teardown),
		cmocka_unit_test_teardown(test_run, teardown),
		cmocka_unit_test_teardown(test_durations, teardown),
		cmocka_unit_test_teardown(test_stacks, teardown),
		cmocka_unit_test_teardown(test_counts, teardown),
		cmocka_unit_test_teardown(test_ringbuf, teardown),
		cmocka_unit_test_teardown(test_flags, teardown),
		cmocka_unit_test_teardown(test_tensors, teardown),
		cmocka_unit_test_teardown(test_bad_options, teardown),
		cmocka_unit_test_teardown(test_parse_again, teardown),
		cmocka_unit_test_teardown(test_explain, teardown),
		cmocka_unit_test_teardown(test_census, teardown),
		cmocka_unit_test_teardown(test_usage_text, teardown),
		cmocka_unit_test_teardown(test_options_anywhere, teardown),
		cmocka_unit_test_teardown(test_help_and_version, teardown),
		cmocka_unit_test_teardown(test_command_help, teardown),
		cmocka_unit_test_teardown(test_tables, teardown),
	};

	return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
