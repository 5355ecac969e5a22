// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_jobs.c - model/jobs.c: the imbalance between a process's GPUs and the
 * stacks that make it, the grouping of ranks into jobs (by RANK, by parent
 * and program, never across parents or programs), the imbalance between ranks,
 * and the text, JSON and metrics lines that show them.
 */
#include "unit.h"
#include "model/snapshot.h"
#include "report/metrics.h"
#include "report/report.h"

#define MIB (1ULL << 20)

static struct snap_frame gather_frame = { .kind = "native", .function = "gather_site" };
static struct snap_frame replica_frame = { .kind = "native", .function = "replica_site" };

/* A DataParallel process: replicas on both devices, outputs gathered on device 0. */
static void dp_proc(struct snap_proc *p, struct snap_stack *st, uint64_t gathered)
{
	*p = (struct snap_proc){ .pid = 100, .ppid = 1, .job = -1, .rank = -1 };
	memcpy(p->comm, "python3", 8);
	st[0] = (struct snap_stack){ .id = 1, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 2 * 64 * MIB,
				     .nframes = 1, .frames = &replica_frame };
	st[0].dev_bytes[0] = st[0].dev_bytes[1] = 64 * MIB;
	st[1] = (struct snap_stack){ .id = 2, .cls = GL_CLASS_DEVICE, .outstanding_bytes = gathered,
				     .nframes = 1, .frames = &gather_frame };
	st[1].dev_bytes[0] = gathered;
	p->stacks = st;
	p->nstacks = 2;
	p->dev_bytes[0] = 64 * MIB + gathered;
	p->dev_bytes[1] = 64 * MIB;
	p->bytes[GL_CLASS_DEVICE] = p->dev_bytes[0] + p->dev_bytes[1];
}

/* The imbalance of p alone, as snapshot__proc_imbalances sets it in a snapshot. */
static void proc_imbalance(struct snap_proc *p, double ratio)
{
	struct snapshot s = { .nprocs = 1, .procs = p };

	snapshot__proc_imbalances(&s, ratio);
}

static void test_proc_imbalance_names_the_gathering_stack(void **state)
{
	struct snap_stack st[2];
	struct snap_proc p;

	(void)state;
	dp_proc(&p, st, 96 * MIB);
	proc_imbalance(&p, 0);
	assert_true(p.imbalance.found);
	assert_int_equal(p.imbalance.hi, 0);
	assert_int_equal(p.imbalance.peer, 1);
	assert_int_equal(p.imbalance.hi_bytes, 160 * MIB);
	assert_int_equal(p.imbalance.peer_bytes, 64 * MIB);
	assert_int_equal(p.imbalance.nstacks, 1); /* the replicas hold the same on both */
	assert_int_equal(p.imbalance.stacks[0].stack, 1);
	assert_int_equal(p.imbalance.stacks[0].bytes, 96 * MIB);
	/* 2.5x: not at 3x */
	proc_imbalance(&p, 3.0);
	assert_false(p.imbalance.found);
}

static void test_proc_imbalance_needs_bytes_and_two_devices(void **state)
{
	struct snap_stack st[2];
	struct snap_proc p;

	(void)state;
	dp_proc(&p, st, 8 * MIB); /* 1.125x */
	proc_imbalance(&p, 0);
	assert_false(p.imbalance.found);
	dp_proc(&p, st, 12 * MIB);
	p.dev_bytes[0] = 12 * MIB; /* 12 MiB against 0: the ratio is there, the bytes not */
	p.dev_bytes[1] = 0;
	proc_imbalance(&p, 0);
	assert_false(p.imbalance.found);
	p.dev_bytes[1] = 0;
	p.dev_bytes[0] = 512 * MIB; /* one device only */
	proc_imbalance(&p, 0);
	assert_false(p.imbalance.found);
}

static struct snap_stack rank_stacks[3][2];

/* Rank r of a job launched by ppid; leak: bytes of a stack only it has. */
static void rank_proc(struct snap_proc *p, int i, int pid, int ppid, int rank, uint64_t leak)
{
	struct snap_stack *st = rank_stacks[i];

	*p = (struct snap_proc){ .pid = pid, .ppid = ppid, .job = -1, .rank = rank,
				 .ranked = rank >= 0, .local_rank = rank,
				 .world_size = rank >= 0 ? 2 : -1 };
	memcpy(p->comm, "python3", 8);
	for (int d = 0; d < SNAP_MAX_DEVS; d++)
		p->gpus[d].nvml_index = -1;
	st[0] = (struct snap_stack){ .id = 7, .cls = GL_CLASS_DEVICE, .outstanding_bytes = 300 * MIB,
				     .nframes = 1, .frames = &replica_frame };
	st[0].dev_bytes[rank > 0 ? rank : 0] = 300 * MIB;
	st[1] = (struct snap_stack){ .id = 9, .cls = GL_CLASS_DEVICE, .outstanding_bytes = leak,
				     .nframes = 1, .frames = &gather_frame };
	p->stacks = st;
	p->nstacks = leak ? 2 : 1;
	p->bytes[GL_CLASS_DEVICE] = 300 * MIB + leak;
	p->dev_bytes[rank > 0 ? rank : 0] = p->bytes[GL_CLASS_DEVICE];
}

static void test_jobs_by_rank_and_their_imbalance(void **state)
{
	struct snap_proc procs[4];
	struct snapshot s = { .procs = procs, .nprocs = 4 };
	const struct snap_job *j;

	(void)state;
	rank_proc(&procs[0], 0, 501, 500, 1, 200 * MIB); /* listed before rank 0 */
	rank_proc(&procs[1], 1, 502, 500, 0, 0);
	rank_proc(&procs[2], 2, 601, 600, 0, 0); /* another launcher: its own, alone */
	procs[3] = (struct snap_proc){ .pid = 700, .ppid = 1, .rank = -1 }; /* init's child */
	assert_int_equal(snapshot__group_jobs(&s, 0), 0);
	assert_int_equal(s.njobs, 1);
	j = &s.jobs[0];
	assert_int_equal(j->id, 500);
	assert_string_equal(j->basis, "environment");
	assert_int_equal(j->world_size, 2);
	assert_int_equal(j->nmembers, 2);
	assert_int_equal(j->members[0], 1); /* rank 0 first */
	assert_int_equal(j->members[1], 0);
	assert_int_equal(j->device_bytes, 800 * MIB);
	assert_ptr_equal(snap_job_of(&s, &procs[0]), j);
	assert_null(snap_job_of(&s, &procs[2]));
	assert_true(j->imbalance.found);
	assert_int_equal(j->imbalance.hi, 1); /* the member at position 1: rank 1 */
	assert_int_equal(j->imbalance.nstacks, 1);
	assert_int_equal(j->imbalance.stacks[0].proc, 0);
	assert_int_equal(j->imbalance.stacks[0].stack, 1);
	assert_int_equal(j->imbalance.stacks[0].bytes, 200 * MIB);
	free(s.jobs);
}

static void test_jobs_by_parent_need_one_program(void **state)
{
	struct snap_proc procs[3];
	struct snapshot s = { .procs = procs, .nprocs = 3 };

	(void)state;
	rank_proc(&procs[0], 0, 501, 500, -1, 0);
	rank_proc(&procs[1], 1, 502, 500, -1, 0);
	rank_proc(&procs[2], 2, 503, 500, -1, 0);
	memcpy(procs[2].comm, "other", 6); /* a sibling running another program */
	assert_int_equal(snapshot__group_jobs(&s, 0), 0);
	assert_int_equal(s.njobs, 1);
	assert_string_equal(s.jobs[0].basis, "parent");
	assert_int_equal(s.jobs[0].nmembers, 2);
	assert_false(s.jobs[0].imbalance.found); /* equal members */
	assert_null(snap_job_of(&s, &procs[2]));
	/* one ranked, one not: not one job */
	procs[0].ranked = true;
	procs[0].rank = 0;
	procs[0].world_size = 2;
	assert_int_equal(snapshot__group_jobs(&s, 0), 0);
	assert_int_equal(s.njobs, 0);
	free(s.jobs);
}

static void test_reports_show_gpus_ranks_and_jobs(void **state)
{
	struct snap_proc procs[2];
	struct snapshot s = { .procs = procs, .nprocs = 2 };
	struct metrics_opts mo = { 0 };
	struct unit_mem m;
	FILE *f;

	(void)state;
	rank_proc(&procs[0], 0, 501, 500, 0, 0);
	rank_proc(&procs[1], 1, 502, 500, 1, 200 * MIB);
	procs[1].gpu_basis = "one";
	procs[1].gpus[1].nvml_index = 3;
	snprintf(procs[1].gpus[1].uuid, sizeof(procs[1].gpus[1].uuid), "GPU-cafe");
	assert_int_equal(snapshot__group_jobs(&s, 0), 0);
	f = unit_mem_open(&m);
	report__gpus_text(f, &s, &procs[1]);
	report__jobs_text(f, &s);
	assert_int_equal(report__metrics(f, &s, &mo), 0);
	unit_mem_close(&m);
	assert_non_null(strstr(m.buf, "  job: launched by PID 500, rank 1 (local rank 1) of 2\n"));
	assert_non_null(strstr(m.buf, "JOB launched by PID 500: 2 processes (ranks from RANK, "
				      "world size 2), device 800.00 MiB\n"));
	assert_non_null(strstr(m.buf, "  rank 1 PID 502 (running): device 500.00 MiB on cuda 1 "
				      "(NVML 3, GPU-cafe) 500.00 MiB\n"));
	assert_non_null(strstr(m.buf, "  imbalance: rank 1 (PID 502) holds 500.00 MiB, 1.7x rank 0 "
				      "(PID 501)'s 300.00 MiB; the difference:\n"
				      "    +200.00 MiB device at gather_site (?)\n"));
	assert_non_null(strstr(m.buf, "gpuleak_process_device_memory_bytes{pid=\"502\",comm="
				      "\"python3\",rank=\"1\",local_rank=\"1\",cuda_device=\"1\","
				      "gpu=\"3\",UUID=\"GPU-cafe\"} 524288000\n"));
	assert_non_null(strstr(m.buf, "gpuleak_job_device_memory_bytes{job=\"500\","
				      "grouped_by=\"environment\"} 838860800\n"));
	assert_non_null(strstr(m.buf, "gpuleak_job_imbalance_bytes{pid=\"502\",comm=\"python3\","
				      "rank=\"1\",local_rank=\"1\",job=\"500\"} 209715200\n"));
	free(m.buf);
	free(s.jobs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_proc_imbalance_names_the_gathering_stack),
		cmocka_unit_test(test_proc_imbalance_needs_bytes_and_two_devices),
		cmocka_unit_test(test_jobs_by_rank_and_their_imbalance),
		cmocka_unit_test(test_jobs_by_parent_need_one_program),
		cmocka_unit_test(test_reports_show_gpus_ranks_and_jobs),
	};

	return cmocka_run_group_tests_name("jobs", tests, NULL, NULL);
}
