// SPDX-License-Identifier: BSD-2-Clause
/*
 * commands.c - the tables of subcommands and options (commands.h says who reads
 * them), and the man page's other sections. Help lines are at most 56 columns,
 * so that `gpuleak SUBCOMMAND --help` fits 80.
 */
#include <string.h>
#include "attach.h"
#include "census_cmd.h"
#include "commands.h"
#include "offline.h"
#include "report/formats.h"
#include "top.h"
#include "util/parse.h"

#define F COMPLETE_FILE
#define D COMPLETE_DIR
#define W COMPLETE_WORDS

/* Rows name their leading fields in order and leave the rest zero. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
const struct cli_option cli_options[] = {
	{ "all", 'a', NULL, "every process that maps libcuda, now and later" },
	{ "pid", 'p', "PID",
	  "a process to trace (repeatable; PIDs may also\n"
	  "be given as operands)",
	  "1234", COMPLETE_PID },
	{ "interval", 'i', "T", "print a summary every T (10s; 0: never)", "10s" },
	{ "duration", 'd', "T",
	  "stop after T (default: when the targets exit,\n"
	  "or at Ctrl-C)",
	  "30s" },
	{ "wait", 'w', "T",
	  "how long to wait for a target to load libcuda\n"
	  "(30s)",
	  "2m" },
#define FORMAT_OPTION(id, option, help, example, needs, write) \
	{ option, OPT_FORMAT + REPORT_##id, "FILE", help, example, F },
	REPORT_FORMATS(FORMAT_OPTION)
#undef FORMAT_OPTION
		{ "top", OPT_TOP, "N", "stacks shown per process (10; 0: all)", "20" },
	{ "frames", OPT_FRAMES, "N", "frames shown per stack in text (32; 0: all)", "64" },
	{ "full-stacks", OPT_FULL_STACKS, NULL,
	  "text stacks show every frame (by default a run\n"
	  "of the interpreter's, libffi's, the CUDA\n"
	  "libraries' or start-up frames is one line; JSON,\n"
	  "pprof and recordings keep them all)" },
	{ "stacks", OPT_STACKS, "MODE",
	  "dwarf (default on x86-64: CFI unwinding in user\n"
	  "space), fp (frame pointers, in the kernel) or none",
	  "fp", W, "dwarf fp none" },
	{ "stack-bytes", OPT_STACK_BYTES, "SIZE",
	  "user stack copied per call with dwarf (16k,\n"
	  "256 to 32k)",
	  "16k" },
	{ "ringbuf-size", OPT_RINGBUF, "SIZE",
	  "the kernel's ring buffer, a power of two from\n"
	  "4k to 2G (16M with dwarf stacks, else 2M); a\n"
	  "thread copies records out of it at once, and up\n"
	  "to 64M (or 4 times its size) waits in gpuleak's\n"
	  "memory",
	  "64M" },
	{ "max-allocs", OPT_MAX_ALLOCS, "N",
	  "allocations the kernel side can track\n"
	  "(1048576, and up to 4096 more in the\n"
	  "table's front)",
	  "4194304" },
	{ "libcuda", OPT_LIBCUDA, "PATH",
	  "with -a: the CUDA driver library new processes\n"
	  "load, probed before any maps it (default: as\n"
	  "the dynamic loader finds libcuda.so.1); a\n"
	  "PID's own is found in its maps",
	  "/usr/lib/x86_64-linux-gnu/libcuda.so.1", F },
	{ "no-follow-forks", OPT_NO_FOLLOW, NULL, "do not trace children of the targets" },
	{ "no-python", OPT_NO_PYTHON, NULL, "do not walk CPython frames" },
	{ "torch", OPT_TORCH, NULL,
	  "insist on PyTorch's allocator probes (on by\n"
	  "default when the target maps libc10_cuda.so)" },
	{ "no-torch", OPT_NO_TORCH, NULL, "driver calls only, no PyTorch tensor blocks" },
	{ "torch-stacks", OPT_TORCH_STACKS, "S",
	  "stacks of tensor blocks: full (as --stacks)\n"
	  "or python (Python frames only: cheaper)",
	  "python", W, "full python" },
	{ "tensors", OPT_TENSORS, "MODE",
	  "when tensor blocks are traced: windowed (default:\n"
	  "in windows), sampled (always: every block booked,\n"
	  "stacks for a byte-weighted sample), full (always:\n"
	  "every block with its stack) or off",
	  "sampled", W, "windowed sampled full off" },
	{ "tensor-sample", OPT_TENSOR_SAMPLE, "SIZE",
	  "tensor-block stacks one per N bytes on\n"
	  "average (Poisson; 0: every block; 1M with\n"
	  "--tensors sampled)",
	  "4M" },
	{ "tensor-window", OPT_TENSOR_WINDOW, "T",
	  "a tensor window's length (16 x --resolution:\n"
	  "16s)",
	  "30s" },
	{ "tensor-duty", OPT_TENSOR_DUTY, "PCT",
	  "automatic windows' share of each process's\n"
	  "time (2); SIGUSR1 or serve's POST\n"
	  "/tensors/arm opens one in every process",
	  "5" },
	{ "resolution", OPT_RESOLUTION, "T", "time resolution of leak verdicts (1s)", "500ms" },
	{ "ranks-from-env", OPT_RANKS_ENV, NULL,
	  "read RANK, LOCAL_RANK and WORLD_SIZE (no other\n"
	  "variable) from each process's environment" },
	{ "imbalance", OPT_IMBALANCE, "PCT",
	  "say a GPU or rank is unbalanced when it holds\n"
	  "PCT % of its largest peer and 16 MiB more (150)",
	  "200" },
	{ "sort", OPT_SORT, "KEY",
	  "top: order of stacks and processes: growth\n"
	  "(default), bytes or name",
	  "bytes", W, "growth bytes name" },
	{ "output", 'o', "FILE",
	  "the recording to write (created 0600; symbolic\n"
	  "links refused)",
	  "job.glr", F },
	{ "force", OPT_FORCE, NULL, "replace an existing recording at -o FILE" },
	{ "max-size", OPT_MAX_SIZE, "SIZE",
	  "stop recording when FILE reaches N (16k or\n"
	  "more)",
	  "1G" },
	{ "incident-dir", OPT_INCIDENT_DIR, "DIR",
	  "write a bundle here for each out-of-memory\n"
	  "failure that reaches the program, each traced\n"
	  "process killed by a signal and each that exits\n"
	  "holding memory where it leaked (serve: under\n"
	  "--state-dir/incidents)",
	  "/var/lib/gpuleak/incidents", D },
	{ "census-on-oom", OPT_CENSUS_ON_OOM, NULL,
	  "hold a process at its out-of-memory failure\n"
	  "(before the program sees it) for a census of\n"
	  "what holds its tensors, written into the bundle;\n"
	  "the pause is bounded by --hold-timeout and\n"
	  "written there too (needs --incident-dir; serve:\n"
	  "--state-dir)" },
	{ "incident-max", OPT_INCIDENT_MAX, "N", "bundles kept, the oldest go first (32)", "100" },
	{ "incident-max-bytes", OPT_INCIDENT_MAX_BYTES, "SIZE", "their bytes at most (256M)",
	  "1G" },
	{ "keep-modules", OPT_KEEP_MODULES, "DIR",
	  "copy the modules of recorded stacks into\n"
	  "DIR by build-id, for report --debug-dir",
	  "/var/lib/gpuleak/modules", D },
	{ "keep-modules-max", OPT_KEEP_MAX, "SIZE", "most bytes DIR may hold (2G)", "4G" },
	{ "debug-dir", OPT_DEBUG_DIR, "DIR",
	  "where modules are found by build-id\n"
	  "(DIR/xx/yyyy[.debug]), before\n"
	  "/usr/lib/debug/.build-id; repeatable",
	  "/var/lib/gpuleak/modules", D },
	{ "listen", OPT_LISTEN, "ADDR:PORT",
	  "HTTP address of /metrics and\n"
	  "/debug/pprof/gpu_heap (127.0.0.1:9464;\n"
	  "[::1]:9464 for IPv6)",
	  "127.0.0.1:9464" },
	{ "state-dir", OPT_STATE_DIR, "DIR",
	  "the only directory serve writes to (default:\n"
	  "none; an absolute path)",
	  "/var/lib/gpuleak", D },
	{ "profile-dir", OPT_PROFILE_DIR, "DIR", "write heap profiles here (inside --state-dir)",
	  "/var/lib/gpuleak/profiles", D },
	{ "profile-every", OPT_PROFILE_EVERY, "T",
	  "how often to write a profile (60s; 1s to\n"
	  "24h)",
	  "5m" },
	{ "profile-keep", OPT_PROFILE_KEEP, "N",
	  "profiles kept on disk, oldest removed first\n"
	  "(10)",
	  "24" },
	{ "max-procs", OPT_MAX_PROCS, "N",
	  "processes kept in the books (8192; attach\n"
	  "and run keep exited ones for the report); past\n"
	  "it, new processes are left out and the report\n"
	  "says so",
	  "16384" },
	{ "max-held", OPT_MAX_HELD, "N",
	  "processes stopped at once at a library's\n"
	  "mapping until its probes are in (4096); one past\n"
	  "it runs on, is named, and the report says so",
	  "8192" },
	{ "max-python-procs", OPT_MAX_PY_PROCS, "N",
	  "processes using CUDA whose Python frames are\n"
	  "walked at once (4096); one past it gets native\n"
	  "stacks, is named, and the report says so",
	  "8192" },
	{ "rescan", OPT_RESCAN, "T",
	  "with -a, and serve: every process's maps read\n"
	  "every T (1m; 1s to 1h; new processes every\n"
	  "5s); a libcuda file no process maps for T is\n"
	  "let go",
	  "10m" },
	{ "hold-timeout", OPT_HOLD_TIMEOUT, "T",
	  "a process stopped at a library's mapping runs\n"
	  "on after T even if its probes are not in (5s;\n"
	  "100ms to 60s); it is named, and the report\n"
	  "says so",
	  "2s" },
	{ "census", OPT_CENSUS, NULL,
	  "after the final report, the census of every PID\n"
	  "still alive (as gpuleak census: tensors and\n"
	  "what holds them)" },
	{ "no-pause", OPT_NO_PAUSE, NULL,
	  "read while the process runs (figures may be\n"
	  "torn; the census says so)" },
	{ "max-objects", OPT_MAX_OBJECTS, "N", "objects visited at most (4000000)", "1000000" },
	{ "max-read", OPT_MAX_READ, "SIZE", "bytes read from the process at most (1G)", "4G" },
	{ "max-time", OPT_MAX_TIME, "T",
	  "time spent reading at most, the pause\n"
	  "included (10s)",
	  "30s" },
	{ "max-stacks", OPT_MAX_STACKS, "N",
	  "distinct call stacks kept, which bounds gpuleak's\n"
	  "memory; past it, stacks count as one \"other\n"
	  "stacks\" (16384)",
	  "65536" },
	{ "bench-floor", OPT_BENCH_FLOOR, NULL, "do-nothing probes, for bench/", NULL,
	  .hidden = true },
	{ "no-stack-cache", OPT_NO_STACK_CACHE, NULL,
	  "copy every native stack (no BPF stack cache),\n"
	  "for tests and bench/",
	  NULL, .hidden = true },
	{ "bench-torch-lib", OPT_BENCH_TORCH_LIB, "NAME",
	  "the file-name prefix of PyTorch's\n"
	  "library, for bench/",
	  "libc10_cuda", .hidden = true },
	{ "verbose", 'v', NULL, "more messages on stderr (-vv, -vvv)" },
	{ "quiet", 'q', NULL, "errors only on stderr" },
	{ "help", 'h', NULL, "this subcommand's options and an example" },
	{ .name = NULL },
};
#pragma GCC diagnostic pop

#undef F
#undef D
#undef W

#define TRACE_OPTS                                                                                            \
	"duration wait stacks stack-bytes ringbuf-size max-allocs max-stacks no-follow-forks "                \
	"no-python torch no-torch torch-stacks tensors tensor-sample tensor-window "                          \
	"tensor-duty resolution max-held hold-timeout max-python-procs ranks-from-env imbalance bench-floor " \
	"bench-torch-lib no-stack-cache "
#define REPORT_OPTS REPORT_FORMAT_OPTIONS "top frames full-stacks "
#define LOG_OPTS "verbose quiet help"
#define INCIDENT_OPTS "incident-dir incident-max incident-max-bytes census-on-oom "

const struct cli_command cli_commands[] = {
	{
		.name = "attach",
		.cmd = CMD_ATTACH,
		.operands = "PID [PID...]\n-a",
		.summary = "trace running processes until they exit or Ctrl-C",
		.description =
			"Finds the libcuda each process has mapped (containers too), attaches "
			"its probes and waits up to --wait for a process that has not loaded "
			"libcuda yet. Prints a summary every --interval and the final report "
			"when the targets exit, --duration ends, or at Ctrl-C; children are "
			"traced too. With -a, every process that maps libcuda, now and later.",
		.options =
			"all pid libcuda interval census max-procs rescan " INCIDENT_OPTS TRACE_OPTS
			"keep-modules keep-modules-max " REPORT_OPTS LOG_OPTS,
		.examples = "sudo gpuleak attach 1234 --duration 30s\t"
			    "trace PID 1234 for 30 seconds, then report\n"
			    "sudo gpuleak attach -a --json report.json\t"
			    "every CUDA process until Ctrl-C; JSON too\n",
		.operand = COMPLETE_PID,
		.run = session__run,
	},
	{
		.name = "run",
		.cmd = CMD_RUN,
		.operands = "[--] CMD [ARG...]",
		.summary = "start CMD, trace it from its first call, exit with its status",
		.description =
			"Starts CMD held until the probes are attached, so that its first CUDA "
			"call is seen, and reports when it exits. gpuleak exits with CMD's "
			"status (128 + N when a signal N killed it; 127 when there is no such "
			"command, 126 when it cannot be run). Options end at CMD: what follows is CMD's own. Children "
			"are traced too; the report shows the processes that used CUDA and "
			"counts the others in one line.",
		.option_help =
			(const struct cli_opt_help[]){
				{ "libcuda", "the CUDA driver library CMD loads, probed\n"
					     "before it starts (default: as the dynamic\n"
					     "loader finds libcuda.so.1 for CMD)" },
				{ NULL, NULL } },
		.options = "libcuda interval max-procs " INCIDENT_OPTS TRACE_OPTS
			   "keep-modules keep-modules-max " REPORT_OPTS LOG_OPTS,
		.examples = "sudo gpuleak run -- python3 train.py --epochs 3\t"
			    "trace a training job from its first call\n"
			    "sudo gpuleak run --svg leaks.svg ./a.out\t"
			    "a flame graph of what a.out still holds at exit\n",
		.operand = COMPLETE_COMMAND,
		.stop_at_operand = true,
		.run = session__run,
	},
	{
		.name = "top",
		.cmd = CMD_TOP,
		.operands = "[PID...]",
		.summary = "live view: GPUs, processes and their growing stacks",
		.description =
			"A full-screen view, redrawn every --interval: a header per GPU (used, "
			"free, growth), the processes and the stacks that grow the most, in the "
			"terminal's alternate screen, redrawn on a resize. A process's DEVICE is "
			"what gpuleak saw allocated since it attached: a line says so where NVML "
			"has no figure for it, or how much more NVML counts. Keys: up/down or j/k "
			"move, Tab switches between processes and stacks, s cycles the sort, g "
			"(growth), b (bytes) and n (name) choose it, / filters by name, PID or "
			"site, Enter on a process shows its stacks only, h or ? help, q quits. "
			"Without PIDs, every process that maps libcuda. When "
			"stdout is not a terminal it prints plain text blocks.",
		.options = "all pid libcuda interval sort top rescan " TRACE_OPTS LOG_OPTS,
		.option_help =
			(const struct cli_opt_help[]){
				{ "interval", "redraw every T (2s)" },
				{ "top", "stacks shown per process (20; 0: all)" },
				{ NULL, NULL } },
		.examples = "sudo gpuleak top\tevery process that uses CUDA\n"
			    "sudo gpuleak top 1234 --sort bytes\t"
			    "one process, largest holders first\n",
		.operand = COMPLETE_PID,
		.run = top__run,
	},
	{
		.name = "record",
		.cmd = CMD_RECORD,
		.operands = "-o FILE PID [PID...]\n-o FILE -a\n-o FILE -- CMD [ARG...]",
		.summary = "record to a file (as attach or run), report later",
		.description =
			"Traces as attach and run do and writes, as it goes, what the books "
			"need, with each stack already resolved; it flushes every second. On a "
			"terminal, a progress line on stderr shows the time, events, file size "
			"and lost events. An existing FILE is kept: record refuses to replace "
			"it without --force. With -- CMD it exits with CMD's status, as run. "
			"--json FILE writes the session's own final report, which the report "
			"of the recording equals.",
		.options =
			"output force max-size all pid libcuda json rescan " INCIDENT_OPTS TRACE_OPTS
			"keep-modules keep-modules-max " LOG_OPTS,
		.examples = "sudo gpuleak record -o job.glr -- python3 train.py\t"
			    "record a job; gpuleak report job.glr later\n"
			    "sudo gpuleak record -o job.glr --max-size 1G 1234\t"
			    "record PID 1234, at most 1 GiB\n",
		.operand = COMPLETE_PIDS_OR_COMMAND,
		.run = record_cmd__run,
	},
	{
		.name = "report",
		.cmd = CMD_REPORT,
		.operands = "FILE",
		.summary = "the reports of a recording, on any machine",
		.description =
			"Rebuilds the books from a recording, without the processes, and writes "
			"the reports a live session writes, plus what the recording lacks "
			"(truncated, no end record, damaged bytes skipped). Native frames are "
			"read from the recorded module, else by build-id from --debug-dir.",
		.options = REPORT_OPTS "debug-dir " LOG_OPTS,
		.examples = "gpuleak report job.glr --svg leaks.svg\ttext on stdout, a flame graph "
			    "to leaks.svg\n",
		.operand = COMPLETE_FILE,
		.run = report_cmd__run,
	},
	{
		.name = "explain",
		.cmd = CMD_EXPLAIN,
		.operands = "PID [PID...]",
		.summary = "attach for a moment: where the GPU memory is, why it ran out",
		.description =
			"Attaches for --duration (1s), then prints only where each process's "
			"GPU memory is (PyTorch's blocks and cache, other libraries, the "
			"context, memory from before attach) and, for each out-of-memory "
			"failure seen, its cause: a leak, fragmentation, a library outside "
			"PyTorch, a peak, or memory from before attach. It answers once: it "
			"takes PIDs, not -a, and no --interval.",
		.options = "pid " TRACE_OPTS REPORT_OPTS LOG_OPTS,
		.option_help =
			(const struct cli_opt_help[]){
				{ "duration", "how long to watch before answering (1s)" },
				{ NULL, NULL } },
		.examples = "sudo gpuleak explain 1234\twhere PID 1234's GPU memory is, now\n"
			    "sudo gpuleak explain 1234 --duration 10s --json -\t"
			    "watch 10 seconds; the answer as JSON\n",
		.operand = COMPLETE_PID,
		.run = session__run,
	},
	{
		.name = "census",
		.cmd = CMD_CENSUS,
		.operands = "PID",
		.summary = "every live tensor of a PyTorch process and what holds it",
		.description =
			"Finds the process's CPython (3.11 to 3.13), holds its threads still "
			"with ptrace (unless --no-pause), reads its heap with process_vm_readv "
			"and prints every live torch.Tensor, its storage and the objects that "
			"hold it, then lets the process go. --json FILE writes the census as "
			"JSON too ('-': JSON alone on stdout); docs/census.md has the contract. "
			"attach --census joins it with the line that allocated each tensor.",
		.options = "json no-pause max-objects max-read max-time " LOG_OPTS,
		.examples = "sudo gpuleak census 1234\tPID 1234's tensors and their holders\n"
			    "sudo gpuleak census --json - --no-pause 1234\t"
			    "as JSON, without stopping the process\n",
		.operand = COMPLETE_PID,
		.run = census_cmd__run,
	},
	{
		.name = "serve",
		.cmd = CMD_SERVE,
		.operands = "",
		.summary = "host-wide agent: Prometheus metrics, heap profiles over HTTP",
		.description =
			"Traces every process that maps libcuda and serves /metrics "
			"(Prometheus) and /debug/pprof/gpu_heap (pprof) on --listen; with "
			"--profile-dir it also writes a profile every --profile-every. It writes "
			"nowhere but --state-dir. GET /census?pid=N gives the census of a traced "
			"process, read without pausing it; POST /census?pid=N&pause=1 pauses it "
			"for the read.",
		.options = "libcuda listen state-dir profile-dir profile-every profile-keep rescan "
			   "max-procs incident-max incident-max-bytes census-on-oom " TRACE_OPTS
				   LOG_OPTS,
		.examples = "sudo gpuleak serve --listen 127.0.0.1:9464\t"
			    "metrics at http://127.0.0.1:9464/metrics\n",
		.run = census_cmd__serve,
	},
	{
		.name = "help",
		.cmd = CMD_HELP,
		.operands = "[SUBCOMMAND]",
		.summary = "the subcommands, or one subcommand's options",
		.description = "Without a subcommand, lists them all; with one, prints its "
			       "options and examples, as gpuleak SUBCOMMAND --help does.",
		.options = "help",
		.examples = "gpuleak help attach\tattach's options and examples\n",
		.operand = COMPLETE_SUBCOMMAND,
		.run = doc__run_help,
	},
	{
		.name = "version",
		.cmd = CMD_VERSION,
		.operands = "",
		.summary = "gpuleak's version and BPF ABI (also -V, --version)",
		.description = "Prints gpuleak's version and the version of the records its BPF "
			       "programs write.",
		.options = "help",
		.examples = "gpuleak --version\tthe version, as gpuleak version prints it\n",
		.run = doc__run_version,
	},
	{
		.name = "completion",
		.cmd = CMD_COMPLETION,
		.operands = "bash|zsh",
		.summary = "shell completion script for bash or zsh",
		.description = "Prints a completion script for the shell; make install installs "
			       "both where bash-completion and zsh find them.",
		.options = "help",
		.examples = "source <(gpuleak completion bash)\tcompletion in this bash\n"
			    "gpuleak completion zsh > ~/.zfunc/_gpuleak\tfor zsh, with ~/.zfunc "
			    "in $fpath\n",
		.operand = COMPLETE_WORDS,
		.choices = "bash zsh",
		.run = doc__run_completion,
	},
	{
		.name = "man",
		.cmd = CMD_MAN,
		.operands = "",
		.summary = "the man page's scdoc source (make builds gpuleak.1 from it)",
		.options = "help",
		.hidden = true,
		.run = doc__run_man,
	},
	{ .name = NULL },
};

const struct cli_doc cli_doc = {
	.name_line = "gpuleak - find GPU memory leaks in running processes",
	.description =
		"gpuleak attaches BPF uprobes to the CUDA driver library (libcuda.so), and to "
		"PyTorch's caching-allocator probes when the process has them, accounts every "
		"allocation and free per process and per call stack, and tells which line "
		"holds the memory and whether it keeps climbing, without stopping, restarting "
		"or changing the process.\n\n"
		"Options may come anywhere on the line, before or after operands; -- ends "
		"them. For run, and for record after --, the options end at the command: what "
		"follows is the command's own.\n\n"
		"Leak verdicts: each (process, stack) keeps a bounded history of its "
		"outstanding bytes. A stack is a leak when the floor of its history keeps "
		"rising with no plateau (a staircase); steady when it rose and plateaued, "
		"churns around a level or returns to an old low; unknown while the evidence is "
		"short. A verdict needs 8 x --resolution of history, and a leak's floor then "
		"rose at least 4 times through more than half of it; a staircase of at least 8 "
		"equal rises is a leak sooner, after 2 x --resolution.",
	.durations = "A duration T is a number and a unit: " PARSE_DURATION_FORMS
		     "; a bare number is seconds.",
	.sizes = "A SIZE takes k, M, G, T (powers of 1024): " PARSE_SIZE_FORMS ".",
	.overhead = "gpuleak traces the allocating and freeing functions of libcuda (and "
		    "PyTorch's allocator probes), not kernels or copies: a program's cost grows "
		    "with its allocation calls only, and a CUDA program that allocates up front "
		    "pays nothing in its steady state. Each traced call pays a uprobe and a "
		    "uretprobe, about 10 us per allocate-and-free pair in a virtual machine where "
		    "one probe hit costs 2.3 us (bare metal is cheaper), plus copying "
		    "--stack-bytes of stack with --stacks dwarf. With the PyTorch probes every "
		    "tensor block is a call: --torch-stacks python makes them nearly free. "
		    "Symbolization and unwinding run in gpuleak's own process. Measure on your "
		    "machine with make bench (bench/RESULTS.md).",
	.exit_status =
		"0\tsuccess (a partial report of a damaged recording included)\n"
		"1\tthe tracing could not be done: no such process, libcuda never "
		"loaded, an output file could not be written\n"
		"2\tthe command line is wrong (the message says what to type)\n"
		"3\treport: the file is not a readable gpuleak recording\n"
		"4\tmissing privileges (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE or root)\n"
		"N\trun, and record -- CMD: the command's own exit status; 128 + S when "
		"signal S killed it; 127 when there is no such command, 126 when it cannot be "
		"run\n",
	.see_also = "*perf*(1), *bpftool*(8), *nvidia-smi*(1)",
};

const struct cli_command *cli__command(const char *name)
{
	for (const struct cli_command *c = cli_commands; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

const struct cli_command *cli__command_of(enum gl_cmd cmd)
{
	for (const struct cli_command *c = cli_commands; c->name; c++)
		if (c->cmd == cmd && cmd != CMD_NONE)
			return c;
	return NULL;
}

const struct cli_option *cli__option(const char *long_name)
{
	for (const struct cli_option *op = cli_options; op->name; op++)
		if (!strcmp(op->name, long_name))
			return op;
	return NULL;
}

const struct cli_option *cli__option_of(int key)
{
	for (const struct cli_option *op = cli_options; op->name; op++)
		if (op->key == key)
			return op;
	return NULL;
}

bool cli__offers(const struct cli_command *cmd, const struct cli_option *op)
{
	return cli__takes(cmd, op->name);
}

bool cli__takes(const struct cli_command *cmd, const char *long_name)
{
	size_t n = strlen(long_name);

	for (const char *p = cmd->options; (p = strstr(p, long_name)); p += n)
		if ((p == cmd->options || p[-1] == ' ') && (!p[n] || p[n] == ' '))
			return true;
	return false;
}
