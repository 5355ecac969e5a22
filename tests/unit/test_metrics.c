// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_metrics.c - the Prometheus exposition of hand-made snapshots: exact
 * samples, label escaping, leak bytes from verdicts, exited processes left
 * out, families whole and well-formed, no stack frames in the output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "report/metrics.h"

static struct snap_frame frame = { .kind = "native", .function = "secret_frame_fn",
				   .module = "/opt/job/libsecret.so" };

static struct snap_stack stacks[] = {
	{ .id = 1, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 3000, .verdict = "leak",
	  .growth_bytes_per_s = 12.5, .nframes = 1, .frames = &frame },
	{ .id = 2, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 500, .verdict = "steady",
	  .nframes = 1, .frames = &frame },
	{ .id = 3, .cls = GL_CLASS_HOST_PINNED, .outstanding_bytes = 70, .verdict = "leak",
	  .growth_bytes_per_s = 1, .nframes = 1, .frames = &frame },
};

static struct snap_oom ooms[] = {
	{ .cause = "fragmentation", .why = "", .action = "" },
	{ .cause = "fragmentation", .why = "", .action = "" },
};

static struct snap_failure failures[] = {
	{ .api = "cuMemAlloc_v2", .error = "CUDA_ERROR_OUT_OF_MEMORY", .oom = &ooms[0] },
	{ .api = "cuMemAlloc_v2", .error = "CUDA_ERROR_OUT_OF_MEMORY", .oom = &ooms[1] },
	{ .api = "cuMemAlloc_v2", .error = "CUDA_ERROR_INVALID_VALUE" },
};

static struct snap_proc procs[3];
static struct snapshot snap;
static struct proc_ident idents[3];

static void setup_snapshot(void)
{
	memset(procs, 0, sizeof(procs));
	procs[0].pid = 4242;
	procs[0].ns_pid = 17;
	snprintf(procs[0].comm, sizeof(procs[0].comm), "python3");
	procs[0].bytes[GL_CLASS_DEVICE] = 3500;
	procs[0].nallocs[GL_CLASS_DEVICE] = 2;
	procs[0].bytes[GL_CLASS_HOST_PINNED] = 70;
	procs[0].alloc_bytes[GL_CLASS_DEVICE] = 10000;
	procs[0].free_bytes[GL_CLASS_DEVICE] = 6500;
	procs[0].dev_bytes[3] = 3500;
	procs[0].device_growth_bytes_per_s = 20.25;
	procs[0].projected_oom_s = 1800.5;
	procs[0].alloc_calls = 9;
	procs[0].free_calls = 7;
	procs[0].failures = 3;
	procs[0].oom_failures = 2;
	procs[0].consistent = true;
	procs[0].nstacks = 3;
	procs[0].stacks = stacks;
	procs[0].nfailures = 3;
	procs[0].failures_list = failures;
	procs[0].memory = (struct snap_memory){
		.valid = true, .blocks_seen = true, .ndevs = 1, .nvml_valid = true,
		.nvml_bytes = 4000, .device_bytes = 3500, .torch_reserved = 3000,
		.torch_allocated = 1000, .torch_cached = 2000, .outside_torch = 500,
		.largest_free = 500, .fragmentation = 0.75, .unseen = 500, .pinned_host = 70,
		.npools = 1,
	};
	procs[0].memory.pools[0] = (struct snap_pool){ .dev = 3, .bytes = 400, .library = "xla",
						       .framework = "XLA" };
	procs[0].memory.devs[0] = (struct snap_mem_dev){
		.dev = 3, .device_bytes = 3500, .outside_torch = 500, .nlibs = 1,
		.libs = { { "nccl", 500 } },
	};
	procs[1].pid = 7;
	procs[1].dev_bytes[1] = 64;
	procs[1].projected_oom_s = -1;
	/* quote, backslash, newline, invalid UTF-8, a control byte */
	memcpy(procs[1].comm, "a\"b\\c\nd\xff\x01" "\xc3\xa9", 11);
	procs[2].pid = 99;
	snprintf(procs[2].comm, sizeof(procs[2].comm), "gone");
	procs[2].exited = true;
	procs[2].bytes[GL_CLASS_DEVICE] = 1;
	memset(&snap, 0, sizeof(snap));
	snap.nprocs = 3;
	snap.procs = procs;
	snap.stack_mode = "fp";
	snap.stats[GL_STAT_LOST_CALL] = 5;
	snap.unread_bytes = 4096;
	snap.stats[GL_STAT_ALLOC_TABLE_FULL] = 11;
	snap.complete = false;
	memset(idents, 0, sizeof(idents));
	snprintf(idents[0].container_id, sizeof(idents[0].container_id), "%s",
		 "3f5a8c2be1d94a7b6e0f1c2d3a4b5c6d7e8f90123456789abcdef0123456789a");
	snprintf(idents[0].pod_uid, sizeof(idents[0].pod_uid), "%s",
		 "d6e2b4a1-5c3f-4e8a-9b7d-0f1e2d3c4b5a");
	snprintf(idents[0].namespace, sizeof(idents[0].namespace), "ml");
	snprintf(idents[0].pod, sizeof(idents[0].pod), "train-0");
	idents[0].runtime = "containerd";
}

static char *render(const struct metrics_opts *o)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(report__metrics(f, &snap, o), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void assert_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p += n)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return;
	fail_msg("missing line: %s", line);
}

#define LBL "pid=\"4242\",comm=\"python3\",container_id=\"3f5a8c2be1d94a7b6e0f1c2d3a4b5c6d7e8f90" \
	    "123456789abcdef0123456789a\",pod_uid=\"d6e2b4a1-5c3f-4e8a-9b7d-0f1e2d3c4b5a\"," \
	    "namespace=\"ml\",pod=\"train-0\""

static void test_process_samples(void **state)
{
	/* NVML named the GPU of the first process (index 2, not its CUDA ordinal 3), not the
	 * second's */
	struct metrics_gpu gpus[3] = { { "GPU-dddd", 2 }, { NULL, -1 }, { NULL, -1 } };
	struct agent_health h = { .version = "1.2.3", .max_procs = 8, .procs_refused = 4,
				  .stacks_overflow = 6 };
	struct metrics_opts o = { .health = &h, .idents = idents, .gpus = gpus };
	char *t;

	setup_snapshot();
	t = render(&o);
	assert_line(t, "gpuleak_process_info{" LBL ",ns_pid=\"17\",runtime=\"containerd\"} 1");
	assert_line(t, "gpuleak_process_memory_bytes{" LBL ",class=\"device\"} 3500");
	assert_line(t, "gpuleak_process_memory_bytes{" LBL ",class=\"host_pinned\"} 70");
	assert_line(t, "gpuleak_process_allocations{" LBL ",class=\"device\"} 2");
	assert_line(t, "gpuleak_process_allocated_bytes_total{" LBL ",class=\"device\"} 10000");
	assert_line(t, "gpuleak_process_freed_bytes_total{" LBL ",class=\"device\"} 6500");
	/* only stacks judged leak count, per class */
	assert_line(t, "gpuleak_process_leak_bytes{" LBL ",class=\"device\"} 3000");
	assert_line(t, "gpuleak_process_leak_bytes{" LBL ",class=\"host_pinned\"} 70");
	assert_line(t, "gpuleak_process_leak_growth_bytes_per_second{" LBL "} 13.5");
	/* dcgm-exporter's spelling: gpu (NVML index) and UUID, beside the CUDA ordinal */
	assert_line(t, "gpuleak_process_device_memory_bytes{" LBL ",cuda_device=\"3\",gpu=\"2\","
		       "UUID=\"GPU-dddd\"} 3500");
	/* a GPU NVML did not name: the ordinal alone, never as gpu */
	assert_non_null(strstr(t, "\",cuda_device=\"1\"} 64\n"));
	assert_null(strstr(t, "gpu=\"-1\""));
	assert_line(t, "gpuleak_process_device_growth_bytes_per_second{" LBL "} 20.25");
	assert_line(t, "gpuleak_process_projected_oom_seconds{" LBL "} 1800.5");
	assert_null(strstr(t, "gpuleak_process_projected_oom_seconds{pid=\"7\""));
	assert_line(t, "gpuleak_process_alloc_failures_total{" LBL ",error=\"out_of_memory\"} 2");
	assert_line(t, "gpuleak_process_alloc_failures_total{" LBL ",error=\"other\"} 1");
	assert_line(t, "gpuleak_process_books_consistent{" LBL "} 1");
	/* where the memory is, and why allocations ran out */
	assert_line(t, "gpuleak_process_memory_breakdown_bytes{" LBL ",part=\"nvml\"} 4000");
	assert_line(t, "gpuleak_process_memory_breakdown_bytes{" LBL ",part=\"torch_allocated\"} "
		       "1000");
	assert_line(t, "gpuleak_process_memory_breakdown_bytes{" LBL ",part=\"torch_cached\"} 2000");
	assert_line(t, "gpuleak_process_memory_breakdown_bytes{" LBL ",part=\"outside_torch\"} 500");
	assert_line(t, "gpuleak_process_memory_breakdown_bytes{" LBL
		       ",part=\"context_and_pre_attach\"} 500");
	assert_line(t, "gpuleak_process_memory_breakdown_bytes{" LBL ",part=\"pinned_host\"} 70");
	/* every per-device series carries the GPU's gpu and UUID labels */
	assert_line(t, "gpuleak_process_outside_torch_bytes{" LBL ",cuda_device=\"3\",gpu=\"2\","
		       "UUID=\"GPU-dddd\",library=\"nccl\"} 500");
	assert_line(t, "gpuleak_process_preallocated_pool_bytes{" LBL ",cuda_device=\"3\",gpu=\"2\","
		       "UUID=\"GPU-dddd\",library=\"xla\"} 400");
	assert_line(t, "gpuleak_process_torch_largest_free_extent_bytes{" LBL "} 500");
	assert_line(t, "gpuleak_process_torch_fragmentation_ratio{" LBL "} 0.75");
	assert_line(t, "gpuleak_process_oom_explained{" LBL ",cause=\"fragmentation\"} 2");
	assert_line(t, "gpuleak_process_oom_explained{" LBL ",cause=\"leak\"} 0");
	assert_line(t, "gpuleak_build_info{version=\"1.2.3\",abi=\"3\",stack_mode=\"fp\"} 1");
	assert_line(t, "gpuleak_events_lost_total{record=\"call\"} 5");
	assert_line(t, "gpuleak_ring_unread_bytes 4096");
	assert_line(t, "gpuleak_cap_hits_total{cap=\"procs\"} 4");
	assert_line(t, "gpuleak_cap_hits_total{cap=\"stacks\"} 6");
	assert_line(t, "gpuleak_cap_hits_total{cap=\"allocs\"} 11");
	assert_line(t, "gpuleak_cap_limit{cap=\"procs\"} 8");
	assert_line(t, "gpuleak_processes_tracked 2");
	assert_line(t, "gpuleak_books_complete 0");
	/* the process with nothing known about its container has no empty labels */
	assert_non_null(strstr(t, "gpuleak_process_memory_bytes{pid=\"7\",comm="));
	/* exited processes are left out; stacks never become labels */
	assert_null(strstr(t, "pid=\"99\""));
	assert_null(strstr(t, "secret_frame_fn"));
	assert_null(strstr(t, "libsecret"));
	free(t);
}

static void test_escaping(void **state)
{
	struct metrics_opts o = {};
	char *t;

	setup_snapshot();
	t = render(&o);
	assert_line(t, "gpuleak_process_alloc_calls_total{pid=\"7\",comm=\"a\\\"b\\\\c\\nd??\xc3\xa9\"} 0");
	free(t);
}

static void test_label_value(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "plain", "plain" },
		{ "\"q\"", "\\\"q\\\"" },
		{ "a\\b", "a\\\\b" },
		{ "l1\nl2", "l1\\nl2" },
		{ "\xe2\x82\xac ok", "\xe2\x82\xac ok" },   /* a valid 3-byte sequence stays */
		{ "\xe2\x82", "??" },			    /* truncated */
		{ "\xc0\xaf", "??" },			    /* overlong */
		{ "\xed\xa0\x80", "???" },		    /* a surrogate */
		{ "\xf4\x90\x80\x80", "????" },		    /* beyond U+10FFFF */
		{ "tab\there\x7f", "tab?here?" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		metrics__label_value(f, cases[i].in);
		fclose(f);
		assert_string_equal(buf, cases[i].out);
		free(buf);
	}
}

/* Every family: one HELP, one TYPE, its samples together; counters end in _total. */
static void test_families_well_formed(void **state)
{
	struct agent_health h = { .version = "x" };
	struct metrics_opts o = { .health = &h, .idents = idents };
	char *t, *save = NULL, seen[200][96];
	char family[96] = "", type[16] = "";
	int nseen = 0;

	setup_snapshot();
	t = render(&o);
	for (char *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[96];

		if (!strncmp(line, "# HELP ", 7)) {
			assert_int_equal(sscanf(line + 7, "%95s", family), 1);
			for (int i = 0; i < nseen; i++)
				if (!strcmp(seen[i], family))
					fail_msg("family %s appears twice", family);
			assert_true(nseen < 200);
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", family);
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			assert_int_equal(sscanf(line + 7, "%95s %15s", name, type), 2);
			assert_string_equal(name, family);
			if (!strcmp(type, "counter"))
				assert_non_null(strstr(family, "_total"));
			else
				assert_string_equal(type, "gauge");
			continue;
		}
		assert_true(sscanf(line, "%95[a-z_]", name) == 1);
		assert_string_equal(name, family);
		assert_true(!strncmp(name, "gpuleak_", 8) || !strncmp(name, "process_", 8));
	}
	assert_true(nseen > 30);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_process_samples),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_label_value),
		cmocka_unit_test(test_families_well_formed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
