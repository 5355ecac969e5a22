// SPDX-License-Identifier: BSD-2-Clause
/*
 * cli.c - subcommands and options. Every number goes through util/parse.h;
 * every error is one line on stderr and exit status 2.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "agent/http.h"
#include "util/log.h"
#include "util/parse.h"

#ifndef GPULEAK_VERSION
#define GPULEAK_VERSION "0.1.0"
#endif

/* --tensors sampled: a tensor-block stack per MiB allocated, on average */
#define DEFAULT_TENSOR_SAMPLE (1ULL << 20)

enum {
	OPT_JSON = 256,
	OPT_STACKS,
	OPT_STACK_BYTES,
	OPT_TOP,
	OPT_FRAMES,
	OPT_RINGBUF,
	OPT_MAX_ALLOCS,
	OPT_LIBCUDA,
	OPT_NO_FOLLOW,
	OPT_NO_PYTHON,
	OPT_TORCH,
	OPT_NO_TORCH,
	OPT_TORCH_STACKS,
	OPT_TENSORS,
	OPT_TENSOR_WINDOW,
	OPT_TENSOR_DUTY,
	OPT_TENSOR_SAMPLE,
	OPT_LISTEN,
	OPT_STATE_DIR,
	OPT_PROFILE_DIR,
	OPT_PROFILE_EVERY,
	OPT_PROFILE_KEEP,
	OPT_MAX_PROCS,
	OPT_MAX_STACKS,
	OPT_SORT,
	OPT_RESOLUTION,
	OPT_FOLDED,
	OPT_SVG,
	OPT_PPROF,
	OPT_BENCH_FLOOR,
	OPT_BENCH_TORCH_LIB,
	OPT_MAX_SIZE,
	OPT_KEEP_MODULES,
	OPT_KEEP_MAX,
	OPT_DEBUG_DIR,
};

static const struct option long_opts[] = {
	{ "all", no_argument, NULL, 'a' },
	{ "interval", required_argument, NULL, 'i' },
	{ "duration", required_argument, NULL, 'd' },
	{ "wait", required_argument, NULL, 'w' },
	{ "json", required_argument, NULL, OPT_JSON },
	{ "folded", required_argument, NULL, OPT_FOLDED },
	{ "svg", required_argument, NULL, OPT_SVG },
	{ "pprof", required_argument, NULL, OPT_PPROF },
	{ "stacks", required_argument, NULL, OPT_STACKS },
	{ "stack-bytes", required_argument, NULL, OPT_STACK_BYTES },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "frames", required_argument, NULL, OPT_FRAMES },
	{ "ringbuf-size", required_argument, NULL, OPT_RINGBUF },
	{ "max-allocs", required_argument, NULL, OPT_MAX_ALLOCS },
	{ "libcuda", required_argument, NULL, OPT_LIBCUDA },
	{ "no-follow-forks", no_argument, NULL, OPT_NO_FOLLOW },
	{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
	{ "torch", no_argument, NULL, OPT_TORCH },
	{ "no-torch", no_argument, NULL, OPT_NO_TORCH },
	{ "torch-stacks", required_argument, NULL, OPT_TORCH_STACKS },
	{ "tensors", required_argument, NULL, OPT_TENSORS },
	{ "tensor-window", required_argument, NULL, OPT_TENSOR_WINDOW },
	{ "tensor-duty", required_argument, NULL, OPT_TENSOR_DUTY },
	{ "tensor-sample", required_argument, NULL, OPT_TENSOR_SAMPLE },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "profile-dir", required_argument, NULL, OPT_PROFILE_DIR },
	{ "profile-every", required_argument, NULL, OPT_PROFILE_EVERY },
	{ "profile-keep", required_argument, NULL, OPT_PROFILE_KEEP },
	{ "max-procs", required_argument, NULL, OPT_MAX_PROCS },
	{ "max-stacks", required_argument, NULL, OPT_MAX_STACKS },
	{ "pid", required_argument, NULL, 'p' },
	{ "sort", required_argument, NULL, OPT_SORT },
	{ "resolution", required_argument, NULL, OPT_RESOLUTION },
	{ "bench-floor", no_argument, NULL, OPT_BENCH_FLOOR },
	{ "bench-torch-lib", required_argument, NULL,
	  OPT_BENCH_TORCH_LIB }, /* hidden: bench/ only */
	{ "output", required_argument, NULL, 'o' },
	{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
	{ "keep-modules", required_argument, NULL, OPT_KEEP_MODULES },
	{ "keep-modules-max", required_argument, NULL, OPT_KEEP_MAX },
	{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
	{ "verbose", no_argument, NULL, 'v' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

void cli__usage(FILE *f)
{
	fputs("usage: gpuleak attach [options] PID [PID...]   trace running processes\n"
	      "       gpuleak attach [options] -a              trace every process using CUDA\n"
	      "       gpuleak run [options] -- CMD [ARG...]    start CMD and trace it from its "
	      "first call\n"
	      "       gpuleak top [options] [-p PID]...        live view (every process by default)\n"
	      "       gpuleak serve [options]                  host-wide agent: Prometheus metrics\n"
	      "                                                and heap profiles over HTTP\n"
	      "       gpuleak record -o FILE [options] (PID... | -a | -- CMD [ARG...])\n"
	      "                                                record to FILE, report later\n"
	      "       gpuleak report [options] FILE            the report of a recording\n"
	      "       gpuleak version | help\n"
	      "\n"
	      "options:\n"
	      "  -a, --all             every process that maps libcuda, now and later\n"
	      "  -i, --interval T      print a summary every T (10s; 0 = never)\n"
	      "  -d, --duration T      stop after T (default: when the targets exit)\n"
	      "  -w, --wait T          how long to wait for a target to load libcuda (30s)\n"
	      "      --json FILE       write the final report as JSON to FILE ('-' = stdout)\n"
	      "      --folded FILE     write folded stacks of outstanding bytes (flamegraph.pl)\n"
	      "      --svg FILE        write an interactive flame graph of outstanding bytes\n"
	      "      --pprof FILE      write a gzipped pprof profile (inuse/alloc space/objects)\n"
	      "      --stacks MODE     dwarf (default: CFI unwinding in user space), fp (frame\n"
	      "                        pointers, in the kernel) or none\n"
	      "      --stack-bytes N   user stack copied per call in dwarf mode (16k, max 32k)\n"
	      "      --top N           stacks shown per process in text (10; 0 = all)\n"
	      "      --frames N        frames shown per stack in text (32; 0 = all)\n"
	      "      --ringbuf-size N  ring buffer size, a power of two (128M with dwarf stacks,\n"
	      "                        else 32M)\n"
	      "      --max-allocs N    allocations the kernel side can track (1048576)\n"
	      "      --max-stacks N    distinct call stacks kept, which bounds gpuleak's memory;\n"
	      "                        past it, stacks count as one \"other stacks\" (16384)\n"
	      "      --libcuda PATH    the CUDA driver library to probe (run mode)\n"
	      "      --no-follow-forks do not trace children of the targets\n"
	      "      --no-python       do not walk CPython frames\n"
	      "      --torch           PyTorch tensor blocks through libc10_cuda's USDT probes\n"
	      "                        (on by default when the target maps libc10_cuda.so)\n"
	      "      --no-torch        driver level only\n"
	      "      --torch-stacks S  stacks of tensor blocks: full (as --stacks) or python\n"
	      "                        (Python frames only: much cheaper per tensor)\n"
	      "      --tensors MODE    when tensor blocks are traced: windowed (default: in\n"
	      "                        windows, see README), sampled (always: every block\n"
	      "                        booked, stacks for a byte-weighted sample), full\n"
	      "                        (always: every block with its stack) or off\n"
	      "      --tensor-sample N tensor-block stacks one per N bytes on average\n"
	      "                        (Poisson; 0 = every block; 1M with --tensors sampled)\n"
	      "      --tensor-window T a window's length (16 x --resolution: 16s)\n"
	      "      --tensor-duty PCT automatic windows' share of the time (2); SIGUSR1 or\n"
	      "                        serve's POST /tensors/arm opens one at once\n"
	      "  -p, --pid PID         a process to trace (top; also as attach's PID arguments)\n"
	      "      --sort KEY        top: growth (default) or bytes\n"
	      "      --resolution T    time resolution of leak verdicts (1s); a verdict needs 8 T\n"
	      "\n"
	      "serve options:\n"
	      "      --listen ADDR:PORT  HTTP address for /metrics and /debug/pprof/gpu_heap\n"
	      "                        (127.0.0.1:9464; [::1]:9464 for IPv6; 0.0.0.0 only if asked)\n"
	      "      --state-dir DIR   the only directory serve writes to (default: none)\n"
	      "      --profile-dir DIR write heap profiles here (inside --state-dir)\n"
	      "      --profile-every T how often to write a profile (60s)\n"
	      "      --profile-keep N  profiles kept on disk, oldest removed first (10)\n"
	      "      --max-procs N     processes tracked at once (8192)\n"
	      "\n"
	      "  -o, --output FILE     record: the recording (created 0600, symlinks refused)\n"
	      "      --max-size N      record: stop recording when FILE reaches N (min 16k)\n"
	      "      --keep-modules DIR  copy the modules of recorded stacks into DIR by build-id\n"
	      "      --keep-modules-max N  most bytes DIR may hold (2G)\n"
	      "      --debug-dir DIR   report: where modules are found by build-id (DIR/xx/yyyy,\n"
	      "                        DIR/xx/yyyy.debug; a --keep-modules DIR is one), before\n"
	      "                        /usr/lib/debug/.build-id; repeatable\n"
	      "  -v, --verbose         more messages on stderr (-vv, -vvv)\n"
	      "  -q, --quiet           errors only on stderr\n"
	      "\n"
	      "T is a duration: 10, 10s, 500ms, 2m, 1h. Sizes take k, M, G suffixes.\n"
	      "exit status: 0 ok, 1 runtime error, 2 usage error, 3 not a readable recording,\n"
	      "4 missing privileges\n",
	      f);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "gpuleak: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see 'gpuleak help')\n", stderr);
	return EXIT_USAGE;
}

static int serve_only(const struct gl_opts *o, const char *opt)
{
	return o->cmd == CMD_SERVE ? 0 : usage_error("%s belongs to serve", opt);
}

/* serve: no operands; --profile-dir needs --state-dir and lies inside it. */
static int check_serve(struct gl_opts *o, int argc, char **argv)
{
	size_t n;

	if (optind + 1 < argc)
		return usage_error("serve takes no operands ('%s')", argv[optind + 1]);
	if (o->nr_pids)
		return usage_error("serve traces every process; -p belongs to attach and top");
	o->all = true;
	if (!o->profile_dir)
		return EXIT_OK;
	if (!o->state_dir)
		return usage_error("--profile-dir needs --state-dir (the only place serve writes)");
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
	o->max_stacks = 16384;
	o->keep_max = 2ULL << 30;
}

static int parse_option(struct gl_opts *o, int c, const char *arg)
{
	uint64_t v;

	switch (c) {
	case 'a': o->all = true; return 0;
	case 'i':
		return parse_duration_ms(arg, 0, 86400000ULL * 365, &o->interval_ms) ?
			       usage_error("invalid --interval '%s': expected a duration", arg) :
			       0;
	case 'd':
		return parse_duration_ms(arg, 1, 86400000ULL * 365, &o->duration_ms) ?
			       usage_error("invalid --duration '%s': expected a positive duration",
					   arg) :
			       0;
	case 'w':
		return parse_duration_ms(arg, 0, 86400000ULL, &o->wait_ms) ?
			       usage_error("invalid --wait '%s': expected a duration up to 24h",
					   arg) :
			       0;
	case OPT_JSON:
		if (!*arg)
			return usage_error("--json needs a file name ('-' for stdout)");
		o->json_path = arg;
		return 0;
	case OPT_FOLDED: o->folded_path = arg; return 0;
	case OPT_SVG: o->svg_path = arg; return 0;
	case OPT_PPROF: o->pprof_path = arg; return 0;
	case OPT_STACKS:
		if (!strcmp(arg, "fp"))
			o->stack_mode = GL_STACK_FP;
		else if (!strcmp(arg, "dwarf"))
			o->stack_mode = GL_STACK_DWARF;
		else if (!strcmp(arg, "none"))
			o->stack_mode = GL_STACK_NONE;
		else
			return usage_error("invalid --stacks '%s': expected fp, dwarf or none",
					   arg);
		return 0;
	case OPT_STACK_BYTES:
		if (parse_size(arg, 256, GL_MAX_STACK_COPY, &v))
			return usage_error("invalid --stack-bytes '%s': expected 256 to 32k", arg);
		o->stack_bytes = v;
		return 0;
	case OPT_TOP:
		return parse_u32(arg, 0, 1000000, &o->top) ?
			       usage_error("invalid --top '%s': expected 0 to 1000000", arg) :
			       0;
	case OPT_FRAMES:
		return parse_u32(arg, 0, 4096, &o->frames) ?
			       usage_error("invalid --frames '%s': expected 0 to 4096", arg) :
			       0;
	case OPT_RINGBUF:
		if (parse_size(arg, 4096, 1ULL << 31, &v) || (v & (v - 1)))
			return usage_error("invalid --ringbuf-size '%s': expected a power of two "
					   "from 4k to 2G",
					   arg);
		o->ringbuf_bytes = v;
		return 0;
	case OPT_MAX_ALLOCS:
		return parse_u32(arg, 1, 1 << 26, &o->max_allocs) ?
			       usage_error("invalid --max-allocs '%s': expected 1 to 67108864",
					   arg) :
			       0;
	case OPT_LIBCUDA:
		if (!*arg)
			return usage_error("--libcuda needs a path");
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
			return usage_error("invalid --torch-stacks '%s': expected full or python",
					   arg);
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
			return usage_error(
				"invalid --tensors '%s': expected windowed, sampled, full "
				"or off",
				arg);
		}
		return 0;
	case OPT_TENSOR_WINDOW:
		return parse_duration_ms(arg, 100, 3600000, &o->tensor_window_ms) ?
			       usage_error("invalid --tensor-window '%s': expected 100ms to 1h",
					   arg) :
			       0;
	case OPT_TENSOR_SAMPLE:
		return parse_size(arg, 0, 1ULL << 40, &o->tensor_sample_bytes) ?
			       usage_error("invalid --tensor-sample '%s': expected a size, 0 to 1T",
					   arg) :
			       0;
	case OPT_TENSOR_DUTY:
		return parse_u32(arg, 1, 100, &o->tensor_duty_pct) ?
			       usage_error("invalid --tensor-duty '%s': expected 1 to 100", arg) :
			       0;
	case OPT_LISTEN:
		if (http__parse_addr(arg, NULL, NULL))
			return usage_error(
				"invalid --listen '%s': expected ADDR:PORT or [IPv6]:PORT", arg);
		o->listen = arg;
		return serve_only(o, "--listen");
	case OPT_STATE_DIR:
		if (arg[0] != '/')
			return usage_error("invalid --state-dir '%s': expected an absolute path",
					   arg);
		o->state_dir = arg;
		return serve_only(o, "--state-dir");
	case OPT_PROFILE_DIR:
		if (!arg[0])
			return usage_error("invalid --profile-dir: empty");
		o->profile_dir = arg;
		return serve_only(o, "--profile-dir");
	case OPT_PROFILE_EVERY:
		if (parse_duration_ms(arg, 1000, 86400000ULL, &o->profile_every_ms))
			return usage_error("invalid --profile-every '%s': expected 1s to 24h", arg);
		return serve_only(o, "--profile-every");
	case OPT_PROFILE_KEEP:
		if (parse_u32(arg, 1, 100000, &o->profile_keep))
			return usage_error("invalid --profile-keep '%s': expected 1 to 100000",
					   arg);
		return serve_only(o, "--profile-keep");
	case OPT_MAX_PROCS:
		if (parse_u32(arg, 1, 1 << 20, &o->max_procs))
			return usage_error("invalid --max-procs '%s': expected 1 to 1048576", arg);
		return serve_only(o, "--max-procs");
	case OPT_MAX_STACKS:
		if (parse_u32(arg, 16, 1 << 24, &o->max_stacks))
			return usage_error("invalid --max-stacks '%s': expected 16 to 16777216",
					   arg);
		return 0;
	case 'p':
		if (o->nr_pids == GL_MAX_PIDS)
			return usage_error("too many PIDs (at most %d)", GL_MAX_PIDS);
		if (parse_pid(arg, &o->pids[o->nr_pids]))
			return usage_error("invalid PID '%s': expected a process id", arg);
		o->nr_pids++;
		return 0;
	case OPT_SORT:
		if (!strcmp(arg, "bytes"))
			o->sort_bytes = true;
		else if (!strcmp(arg, "growth"))
			o->sort_bytes = false;
		else
			return usage_error("invalid --sort '%s': expected growth or bytes", arg);
		return 0;
	case OPT_RESOLUTION:
		return parse_duration_ms(arg, 1, 3600000, &o->resolution_ms) ?
			       usage_error("invalid --resolution '%s': expected 1ms to 1h", arg) :
			       0;
	case OPT_BENCH_TORCH_LIB:
		if (!*arg || strlen(arg) >= 64 || strchr(arg, '/'))
			return usage_error("invalid --bench-torch-lib '%s': expected a file-name "
					   "prefix under 64 bytes",
					   arg);
		o->bench_torch_lib = arg;
		return 0;
	case OPT_BENCH_FLOOR: o->bench_floor = true; return 0;
	case 'o':
		if (!*arg)
			return usage_error("-o needs a file name");
		o->record_path = arg;
		return 0;
	case OPT_MAX_SIZE:
		if (parse_size(arg, 16384, 1ULL << 50, &o->max_size))
			return usage_error("invalid --max-size '%s': expected 16k or more", arg);
		return 0;
	case OPT_KEEP_MODULES:
		if (!*arg)
			return usage_error("--keep-modules needs a directory");
		o->keep_dir = arg;
		return 0;
	case OPT_KEEP_MAX:
		if (parse_size(arg, 1, 1ULL << 50, &o->keep_max))
			return usage_error("invalid --keep-modules-max '%s': expected a size", arg);
		return 0;
	case OPT_DEBUG_DIR:
		if (o->nr_debug_dirs == GL_MAX_DEBUG_DIRS)
			return usage_error("too many --debug-dir (at most %d)", GL_MAX_DEBUG_DIRS);
		if (!*arg)
			return usage_error("--debug-dir needs a directory");
		o->debug_dirs[o->nr_debug_dirs++] = arg;
		return 0;
	case 'v': o->verbosity++; return 0;
	case 'q': o->verbosity = -1; return 0;
	case 'h': o->cmd = CMD_HELP; return 0;
	default: return EXIT_USAGE;
	}
}

/* At most one of the report files may be stdout. */
static int check_outputs(const struct gl_opts *o)
{
	const char *paths[] = { o->json_path, o->folded_path, o->svg_path, o->pprof_path };
	int on_stdout = 0;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		on_stdout += paths[i] && !strcmp(paths[i], "-");
	return on_stdout > 1 ? usage_error("only one of --json, --folded, --svg and --pprof can "
					   "be '-' (stdout)") :
			       0;
}

static int parse_pids(struct gl_opts *o, int argc, char **argv)
{
	for (int i = optind + 1; i < argc; i++) {
		if (o->nr_pids == GL_MAX_PIDS)
			return usage_error("too many PIDs (at most %d)", GL_MAX_PIDS);
		if (parse_pid(argv[i], &o->pids[o->nr_pids]))
			return usage_error("invalid PID '%s': expected a process id", argv[i]);
		o->nr_pids++;
	}
	if (!o->nr_pids && !o->all && o->cmd == CMD_TOP)
		o->all = true;
	if (!o->nr_pids && !o->all)
		return usage_error(o->cmd == CMD_RECORD ? "record needs PIDs, -a or -- CMD" :
							  "attach needs PIDs or -a");
	if (o->nr_pids && o->all)
		return usage_error("give PIDs or -a, not both");
	return EXIT_OK;
}

/* Options of record and report; report's FILE. */
static int check_offline(struct gl_opts *o, int argc, char **argv)
{
	if (o->cmd != CMD_RECORD && (o->record_path || o->max_size))
		return usage_error("-o and --max-size belong to record");
	if (o->cmd != CMD_REPORT && o->nr_debug_dirs)
		return usage_error("--debug-dir belongs to report");
	if (o->cmd == CMD_RECORD && !o->record_path)
		return usage_error("record needs -o FILE");
	if (o->cmd == CMD_RECORD &&
	    (o->json_path || o->folded_path || o->svg_path || o->pprof_path))
		return usage_error("record writes no report: gpuleak report FILE makes them");
	if (o->cmd != CMD_REPORT)
		return EXIT_OK;
	if (o->keep_dir || o->all || o->nr_pids)
		return usage_error("report reads a recording: --keep-modules, -a and PIDs belong "
				   "to record");
	if (optind + 1 >= argc)
		return usage_error("report needs a recording: gpuleak report FILE");
	if (optind + 2 < argc)
		return usage_error("report reads one recording, not '%s'", argv[optind + 2]);
	o->record_path = argv[optind + 1];
	return EXIT_OK;
}

int cli__parse(int argc, char **argv, struct gl_opts *o)
{
	const char *sub, *optstr;
	int c, err, at = 1;

	defaults(o);
	if (argc < 2)
		return usage_error("missing command");
	sub = argv[1];
	if (!strcmp(sub, "attach"))
		o->cmd = CMD_ATTACH;
	else if (!strcmp(sub, "run"))
		o->cmd = CMD_RUN;
	else if (!strcmp(sub, "serve"))
		o->cmd = CMD_SERVE;
	else if (!strcmp(sub, "top"))
		o->cmd = CMD_TOP;
	else if (!strcmp(sub, "record"))
		o->cmd = CMD_RECORD;
	else if (!strcmp(sub, "report"))
		o->cmd = CMD_REPORT;
	else if (!strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h"))
		o->cmd = CMD_HELP;
	else if (!strcmp(sub, "version") || !strcmp(sub, "--version"))
		o->cmd = CMD_VERSION;
	else
		return usage_error("unknown command '%s'", sub);
	if (o->cmd == CMD_HELP || o->cmd == CMD_VERSION)
		return EXIT_OK;
	if (o->cmd == CMD_TOP)
		o->interval_ms = 2000;

	/*
	 * Options follow the subcommand: getopt reads argv + 1, where optind
	 * indexes are one less. optind = 0 restarts it with no state left from
	 * an earlier parse; at is the element it is reading.
	 */
	optind = 0;
	opterr = 0;
	/* report's FILE may come before its options; elsewhere options end at the first word */
	optstr = o->cmd == CMD_REPORT ? "ai:d:w:p:o:vqh" : "+ai:d:w:p:o:vqh";
	while ((c = getopt_long(argc - 1, argv + 1, optstr, long_opts, NULL)) != -1) {
		if (c == '?') {
			if (o->cmd == CMD_REPORT)
				at = optind - 1;
			if (!strncmp(argv[1 + at], "--", 2))
				return usage_error("unknown or incomplete option '%s'",
						   argv[1 + at]);
			return usage_error("option '-%c' is unknown or needs a value", optopt);
		}
		err = parse_option(o, c, optarg);
		if (err)
			return err;
		if (o->cmd == CMD_HELP)
			return EXIT_OK;
		at = optind;
	}
	if (o->tensors_sampled && !o->tensor_sample_bytes)
		o->tensor_sample_bytes = DEFAULT_TENSOR_SAMPLE;
	if (!o->tensor_window_ms)
		o->tensor_window_ms = 16 * o->resolution_ms;
	/* a DWARF stack record carries the stack (16 KiB): bursts need more room */
	if (!o->ringbuf_bytes)
		o->ringbuf_bytes = o->stack_mode == GL_STACK_DWARF ? 128 << 20 : 32 << 20;
	err = check_outputs(o);
	if (err)
		return err;
	err = check_offline(o, argc, argv);
	if (err || o->cmd == CMD_REPORT)
		return err;
	if (o->cmd == CMD_RECORD && !strcmp(argv[optind], "--")) {
		if (o->all || o->nr_pids)
			return usage_error("record traces PIDs, -a or a command, one of them");
		if (optind + 1 >= argc)
			return usage_error("record needs a command after '--'");
		o->argv = &argv[optind + 1];
		return EXIT_OK;
	}
	if (o->cmd == CMD_RUN) {
		if (o->all)
			return usage_error("run traces its command; -a belongs to attach");
		if (optind + 1 >= argc)
			return usage_error("run needs a command: gpuleak run -- CMD [ARG...]");
		o->argv = &argv[optind + 1];
		return EXIT_OK;
	}
	if (o->cmd == CMD_SERVE)
		return check_serve(o, argc, argv);
	return parse_pids(o, argc, argv);
}
