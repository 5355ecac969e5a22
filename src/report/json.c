// SPDX-License-Identifier: BSD-2-Clause
/*
 * json.c - the JSON report. Field names are a contract read by other tools
 * and by gpuleak's own commands: add fields, never rename them.
 */
#include <errno.h>
#include "report.h"
#include "trace/probes.h"
#include "util/jsonw.h"

static void write_frame(struct jsonw *w, const struct snap_frame *f)
{
	jsonw__start_object(w);
	jsonw__field_string(w, "kind", f->kind);
	jsonw__field_string(w, "function", f->function);
	if (f->module)
		jsonw__field_string(w, "module", f->module);
	if (f->kind[0] == 'n') {
		jsonw__field_u64(w, "offset", f->offset);
		if (f->function)
			jsonw__field_u64(w, "symbol_offset", f->sym_off);
		if (f->build_id)
			jsonw__field_string(w, "build_id", f->build_id);
		if (!f->module)
			jsonw__field_u64(w, "address", f->address);
	}
	if (f->file)
		jsonw__field_string(w, "file", f->file);
	if (f->line)
		jsonw__field_s64(w, "line", f->line);
	if (f->inferred)
		jsonw__field_bool(w, "inferred", true);
	jsonw__end_object(w);
}

static void write_frames(struct jsonw *w, const struct snap_stack *st)
{
	jsonw__name(w, "frames");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < st->nframes; i++)
		write_frame(w, &st->frames[i]);
	jsonw__end_array(w);
}

static void write_stack(struct jsonw *w, const struct snap_stack *st)
{
	jsonw__start_object(w);
	jsonw__field_string(w, "memory", class__name(st->cls));
	jsonw__field_u64(w, "outstanding_bytes", st->outstanding_bytes);
	jsonw__field_u64(w, "outstanding_allocs", st->outstanding_allocs);
	jsonw__field_u64(w, "allocs", st->allocs);
	jsonw__field_u64(w, "frees", st->frees);
	jsonw__field_u64(w, "alloc_bytes", st->alloc_bytes);
	jsonw__field_u64(w, "peak_bytes", st->peak_bytes);
	jsonw__field_string(w, "verdict", st->verdict);
	jsonw__field_double(w, "growth_bytes_per_s", st->growth_bytes_per_s);
	if (st->why)
		jsonw__field_string(w, "why", st->why);
	if (st->pattern) {
		/* a hint with what it rests on, not a finding */
		jsonw__name(w, "pattern");
		jsonw__start_object(w);
		jsonw__field_string(w, "name", st->pattern);
		jsonw__field_string(w, "evidence", st->evidence);
		jsonw__field_string(w, "fix", st->fix);
		jsonw__end_object(w);
	}
	if (st->estimated) {
		/* sampled stacks: the figures above count the sampled blocks only */
		jsonw__field_bool(w, "sampled", true);
		jsonw__field_double(w, "estimated_outstanding_bytes", st->estimated_bytes);
		jsonw__field_double(w, "estimated_outstanding_allocs", st->estimated_allocs);
	}
	if (st->unsampled)
		jsonw__field_bool(w, "unsampled", true);
	if (st->cls == GL_CLASS_DEVICE || st->cls == GL_CLASS_TORCH_BLOCK) {
		/* outstanding per CUDA ordinal (a live process's) */
		jsonw__name(w, "devices");
		jsonw__start_array(w);
		for (int d = 0; d < SNAP_MAX_DEVS; d++) {
			if (!st->dev_bytes[d])
				continue;
			jsonw__start_object(w);
			jsonw__field_s64(w, "cuda_device", d);
			jsonw__field_u64(w, "bytes", st->dev_bytes[d]);
			jsonw__end_object(w);
		}
		jsonw__end_array(w);
	}
	jsonw__field_u64(w, "stack_id", st->id);
	if (st->nframes) {
		char site[256];

		report__site(st, site, sizeof(site));
		jsonw__field_string(w, "site", site);
	}
	write_frames(w, st);
	jsonw__end_object(w);
}

static void write_bpf(struct jsonw *w, const struct snap_proc *p)
{
	jsonw__name(w, "bpf");
	if (!p->bpf_valid) {
		jsonw__null(w);
		return;
	}
	jsonw__start_object(w);
	jsonw__field_u64(w, "device_bytes", p->bpf.bytes[GL_CLASS_DEVICE]);
	jsonw__field_u64(w, "managed_bytes", p->bpf.bytes[GL_CLASS_MANAGED]);
	jsonw__field_u64(w, "host_pinned_bytes", p->bpf.bytes[GL_CLASS_HOST_PINNED]);
	jsonw__field_u64(w, "address_space_bytes", p->bpf.bytes[GL_CLASS_ADDRESS]);
	jsonw__field_u64(w, "torch_allocated_bytes", p->bpf.bytes[GL_CLASS_TORCH_BLOCK]);
	jsonw__field_u64(w, "outstanding_allocs",
			 p->bpf.allocs[GL_CLASS_DEVICE] + p->bpf.allocs[GL_CLASS_MANAGED] +
				 p->bpf.allocs[GL_CLASS_HOST_PINNED]);
	jsonw__field_u64(w, "alloc_calls", p->bpf.alloc_calls);
	jsonw__field_u64(w, "free_calls", p->bpf.free_calls);
	jsonw__field_u64(w, "failures", p->bpf.failures);
	jsonw__field_u64(w, "unmatched_frees", p->bpf.unmatched_frees);
	jsonw__field_u64(w, "untracked_allocs", p->bpf.untracked_allocs);
	jsonw__field_u64(w, "untracked_bytes", p->bpf.untracked_bytes);
	jsonw__field_u64(w, "context_drops", p->bpf.ctx_drops);
	jsonw__end_object(w);
}

static void field_u64_or_null(struct jsonw *w, const char *name, bool valid, uint64_t v)
{
	jsonw__name(w, name);
	if (valid)
		jsonw__u64(w, v);
	else
		jsonw__null(w);
}

static void write_libs(struct jsonw *w, const struct snap_lib *libs, uint32_t n)
{
	jsonw__name(w, "outside_torch_libraries");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < n; i++) {
		jsonw__start_object(w);
		jsonw__field_string(w, "library", libs[i].name);
		jsonw__field_u64(w, "bytes", libs[i].bytes);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
}

/* PyTorch's part: allocated and cached are null when its blocks were not seen. */
static void write_torch_part(struct jsonw *w, bool blocks, uint64_t reserved, uint64_t alloc,
			     uint64_t cached, uint64_t largest, double frag)
{
	jsonw__field_u64(w, "torch_reserved_bytes", reserved);
	field_u64_or_null(w, "torch_allocated_bytes", blocks, alloc);
	field_u64_or_null(w, "torch_cached_bytes", blocks, cached);
	field_u64_or_null(w, "largest_free_extent_bytes", blocks, largest);
	jsonw__name(w, "fragmentation");
	if (blocks)
		jsonw__double(w, frag);
	else
		jsonw__null(w);
}

/* Preallocated pools: one allocation whose sub-allocations gpuleak cannot see. */
static void write_pools(struct jsonw *w, const struct snap_memory *m)
{
	jsonw__name(w, "pools");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < m->npools; i++) {
		const struct snap_pool *p = &m->pools[i];

		jsonw__start_object(w);
		jsonw__field_s64(w, "device", p->dev);
		jsonw__field_u64(w, "bytes", p->bytes);
		field_u64_or_null(w, "device_total_bytes", p->dev_total != 0, p->dev_total);
		jsonw__field_u64(w, "stack_id", p->stack);
		jsonw__field_string(w, "library", p->library ? p->library : "other");
		jsonw__name(w, "framework");
		if (p->framework)
			jsonw__string(w, p->framework);
		else
			jsonw__null(w);
		jsonw__field_bool(w, "growth_inside_visible", false);
		jsonw__field_string(w, "visible_with", p->visible_with);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
}

static void write_memory(struct jsonw *w, const struct snap_memory *m)
{
	jsonw__name(w, "memory");
	if (!m->valid) {
		jsonw__null(w);
		return;
	}
	jsonw__start_object(w);
	field_u64_or_null(w, "nvml_bytes", m->nvml_valid, m->nvml_bytes);
	jsonw__field_u64(w, "seen_bytes", m->device_bytes);
	jsonw__field_bool(w, "driver_level_only", !m->blocks_seen);
	write_torch_part(w, m->blocks_seen, m->torch_reserved, m->torch_allocated, m->torch_cached,
			 m->largest_free, m->fragmentation);
	jsonw__field_bool(w, "reserve_predates_attach", m->blocks_seen && m->blocks_outside);
	field_u64_or_null(w, "blocks_outside_segments_bytes", m->blocks_seen, m->blocks_outside);
	field_u64_or_null(w, "torch_allocated_in_seen_segments_bytes", m->blocks_seen,
			  m->blocks_in_seen);
	jsonw__field_u64(w, "outside_torch_bytes", m->outside_torch);
	field_u64_or_null(w, "context_and_pre_attach_bytes", m->nvml_valid, m->unseen);
	field_u64_or_null(w, "unexplained_bytes", m->nvml_valid, m->unexplained);
	jsonw__field_u64(w, "pinned_host_bytes", m->pinned_host);
	jsonw__field_u64(w, "managed_bytes", m->managed);
	write_pools(w, m);
	jsonw__name(w, "devices");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < m->ndevs; i++) {
		const struct snap_mem_dev *d = &m->devs[i];

		jsonw__start_object(w);
		jsonw__field_s64(w, "device", d->dev);
		jsonw__name(w, "nvml_index"); /* the NVML device whose figure this row has */
		if (d->nvml_valid && d->nvml_index >= 0)
			jsonw__s64(w, d->nvml_index);
		else
			jsonw__null(w);
		field_u64_or_null(w, "nvml_bytes", d->nvml_valid, d->nvml_bytes);
		jsonw__field_u64(w, "seen_bytes", d->device_bytes);
		write_torch_part(w, m->blocks_seen, d->torch_reserved, d->torch_allocated,
				 d->torch_cached, d->largest_free, d->fragmentation);
		jsonw__field_u64(w, "torch_blocks", d->torch_blocks);
		jsonw__field_u64(w, "free_extents", d->nr_free);
		jsonw__field_u64(w, "blocks_outside_segments_bytes", d->blocks_outside);
		jsonw__field_u64(w, "torch_allocated_in_seen_segments_bytes", d->blocks_in_seen);
		jsonw__field_u64(w, "outside_torch_bytes", d->outside_torch);
		write_libs(w, d->libs, d->nlibs);
		jsonw__field_u64(w, "leak_bytes", d->leak_bytes);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
	jsonw__end_object(w);
}

static void write_oom(struct jsonw *w, const struct snap_failure *f)
{
	const struct snap_oom *o = f->oom;

	jsonw__name(w, "oom");
	if (!o) {
		jsonw__null(w);
		return;
	}
	jsonw__start_object(w);
	jsonw__field_string(w, "cause", o->cause);
	jsonw__field_string(w, "why", o->why);
	jsonw__field_string(w, "action", o->action);
	jsonw__field_u64(w, "request_bytes", f->bytes);
	jsonw__field_s64(w, "device", o->dev);
	field_u64_or_null(w, "device_free_bytes", o->nvml, o->dev_free);
	field_u64_or_null(w, "device_total_bytes", o->nvml, o->dev_total);
	field_u64_or_null(w, "other_processes_bytes", o->nvml, o->others_used);
	jsonw__field_bool(w, "torch_request", o->torch_request);
	jsonw__field_u64(w, "held_bytes", o->held);
	write_torch_part(w, o->blocks_seen, o->torch_reserved, o->torch_allocated, o->free_extents,
			 o->largest_free,
			 o->free_extents ? 1.0 - (double)o->largest_free / (double)o->free_extents :
					   0);
	jsonw__field_u64(w, "free_extents", o->nr_free);
	jsonw__field_u64(w, "leak_bytes", o->leak_bytes);
	jsonw__field_u64(w, "outside_torch_bytes", o->outside_torch);
	jsonw__name(w, "top_library");
	if (o->top_lib) {
		jsonw__start_object(w);
		jsonw__field_string(w, "library", o->top_lib);
		jsonw__field_u64(w, "bytes", o->top_lib_bytes);
		jsonw__end_object(w);
	} else {
		jsonw__null(w);
	}
	jsonw__name(w, "torch_retry");
	if (o->retry)
		jsonw__string(w, o->retry);
	else
		jsonw__null(w);
	jsonw__field_bool(w, "is_torch_retry", o->is_retry);
	jsonw__field_u64(w, "retry_freed_bytes", o->retry_freed);
	jsonw__end_object(w);
}

/* One cap's object, left open: {"LIMIT_NAME": limit, "reached": reached, "COUNT_NAME": count. */
static void write_cap(struct jsonw *w, const char *name, const char *limit_name, uint64_t limit,
		      bool reached, const char *count_name, uint64_t count)
{
	jsonw__name(w, name);
	jsonw__start_object(w);
	jsonw__field_u64(w, limit_name, limit);
	jsonw__field_bool(w, "reached", reached);
	jsonw__field_u64(w, count_name, count);
}

/* The caps on what gpuleak keeps, and what reaching them cost. */
static void write_caps(struct jsonw *w, const struct snapshot *s)
{
	const struct snap_limits *l = &s->limits;
	char why[320];

	jsonw__name(w, "caps");
	jsonw__start_object(w);
	write_cap(w, "max_allocs", "limit", s->cap_allocs, s->stats[GL_STAT_ALLOC_TABLE_FULL] != 0,
		  "untracked_allocs", s->untracked_allocs);
	jsonw__field_u64(w, "untracked_bytes", s->untracked_bytes);
	jsonw__end_object(w);
	write_cap(w, "max_stacks", "limit", s->cap_stacks, s->stack_overflows != 0, "allocs_past",
		  s->stack_overflows);
	jsonw__end_object(w);
	write_cap(w, "max_procs", "limit", s->cap_procs, s->procs_refused != 0, "refused_records",
		  s->procs_refused);
	jsonw__end_object(w);
	write_cap(w, "max_libraries", "limit", l->max_libs, l->libs_refused != 0,
		  "refused_mappings", l->libs_refused);
	jsonw__end_object(w);
	write_cap(w, "max_python_procs", "limit", l->max_py_procs, l->py_refused != 0,
		  "refused_procs", l->py_refused);
	jsonw__end_object(w);
	write_cap(w, "hold_timeout", "limit_ms", l->hold_timeout_ns / 1000000,
		  l->holds_expired != 0, "expired_holds", l->holds_expired);
	jsonw__end_object(w);
	jsonw__end_object(w);
	jsonw__field_string(w, "incomplete_why", report__incomplete_why(s, why, sizeof(why)));
}

static void write_failures(struct jsonw *w, const struct snap_proc *p)
{
	jsonw__name(w, "failures_list");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < p->nfailures; i++) {
		const struct snap_failure *f = &p->failures_list[i];

		jsonw__start_object(w);
		jsonw__field_string(w, "api", f->api);
		jsonw__field_string(w, "error", f->error);
		jsonw__field_s64(w, "rc", f->rc);
		jsonw__field_string(w, "memory", class__name(f->cls));
		jsonw__field_u64(w, "bytes", f->bytes);
		jsonw__field_u64(w, "held_device_bytes", f->held_device);
		jsonw__field_u64(w, "ts_ns", f->ts);
		if (f->stack)
			write_frames(w, f->stack);
		write_oom(w, f);
		jsonw__name(w, "top_holders");
		jsonw__start_array(w);
		for (uint32_t h = 0; h < f->nholders; h++) {
			jsonw__start_object(w);
			jsonw__field_string(w, "memory", class__name(f->holders[h].cls));
			jsonw__field_u64(w, "outstanding_bytes", f->holders[h].outstanding_bytes);
			jsonw__field_u64(w, "outstanding_allocs", f->holders[h].outstanding_allocs);
			write_frames(w, &f->holders[h]);
			jsonw__end_object(w);
		}
		jsonw__end_array(w);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
}

/* What the process's tensor-level figures (class torch_block) cover. */
static void write_tensors(struct jsonw *w, const struct snap_tensors *t)
{
	if (!t)
		return;
	jsonw__name(w, "tensor_level");
	jsonw__start_object(w);
	jsonw__field_string(w, "mode", t->mode);
	jsonw__field_string(w, "coverage", t->coverage);
	jsonw__field_bool(w, "armed", t->armed);
	jsonw__field_u64(w, "sample_bytes", t->sample_bytes);
	jsonw__field_double(w, "armed_s", t->armed_s);
	jsonw__field_u64(w, "windows_total", t->windows_total);
	jsonw__name(w, "windows");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < t->nwindows; i++) {
		jsonw__start_object(w);
		jsonw__field_double(w, "start_s", t->windows[i].start_s);
		jsonw__name(w, "end_s");
		if (t->windows[i].end_s >= 0)
			jsonw__double(w, t->windows[i].end_s);
		else
			jsonw__null(w);
		jsonw__field_string(w, "why", t->windows[i].why);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
	jsonw__end_object(w);
}

static void write_proc(struct jsonw *w, const struct snapshot *s, const struct snap_proc *p,
		       const struct snap_tensors *t)
{
	jsonw__start_object(w);
	jsonw__field_s64(w, "pid", p->pid);
	if (p->ns_pid && p->ns_pid != p->pid)
		jsonw__field_s64(w, "ns_pid", p->ns_pid);
	jsonw__field_string(w, "comm", p->comm);
	jsonw__field_string(w, "state", p->exited ? "exited" : "running");
	jsonw__field_u64(w, "device_bytes", p->bytes[GL_CLASS_DEVICE]);
	jsonw__field_u64(w, "managed_bytes", p->bytes[GL_CLASS_MANAGED]);
	jsonw__field_u64(w, "host_pinned_bytes", p->bytes[GL_CLASS_HOST_PINNED]);
	jsonw__field_u64(w, "address_space_bytes", p->bytes[GL_CLASS_ADDRESS]);
	jsonw__field_u64(w, "torch_allocated_bytes", p->bytes[GL_CLASS_TORCH_BLOCK]);
	jsonw__field_u64(w, "torch_blocks", p->nallocs[GL_CLASS_TORCH_BLOCK]);
	jsonw__field_u64(w, "torch_reserved_bytes", p->torch_reserved_bytes);
	jsonw__field_u64(w, "outstanding_allocs", p->outstanding_allocs);
	jsonw__field_u64(w, "peak_device_bytes", p->peak_device);
	jsonw__name(w, "devices");
	jsonw__start_array(w);
	for (int d = 0; d < 16; d++) {
		if (!p->dev_bytes[d])
			continue;
		jsonw__start_object(w);
		jsonw__field_s64(w, "device", d);
		jsonw__field_u64(w, "device_bytes", p->dev_bytes[d]);
		jsonw__end_object(w);
	}
	if (p->unknown_dev_bytes) {
		jsonw__start_object(w);
		jsonw__field_s64(w, "device", -1);
		jsonw__field_u64(w, "device_bytes", p->unknown_dev_bytes);
		jsonw__end_object(w);
	}
	jsonw__end_array(w);
	report__gpus_json(w, s, p);
	jsonw__field_u64(w, "alloc_calls", p->alloc_calls);
	jsonw__field_u64(w, "free_calls", p->free_calls);
	jsonw__field_u64(w, "failures", p->failures);
	jsonw__field_u64(w, "oom_failures", p->oom_failures);
	jsonw__field_u64(w, "failed_frees", p->failed_frees);
	jsonw__field_u64(w, "unmatched_frees", p->unmatched_frees);
	jsonw__field_u64(w, "context_dropped_bytes", p->dropped_bytes);
	jsonw__field_u64(w, "unheld_mappings", p->unheld);
	jsonw__field_double(w, "observed_s", p->duration_ns / 1e9);
	jsonw__field_double(w, "device_growth_bytes_per_s", p->device_growth_bytes_per_s);
	jsonw__name(w, "projected_oom_s");
	if (p->projected_oom_s >= 0)
		jsonw__double(w, p->projected_oom_s);
	else
		jsonw__null(w);
	if (p->pre_attach_valid)
		jsonw__field_u64(w, "pre_attach_bytes", p->pre_attach_bytes);
	write_memory(w, &p->memory);
	jsonw__field_bool(w, "consistent", p->consistent);
	if (p->totals_from_kernel) {
		/* records were lost: the totals above are the kernel's exact counters;
		 * this is what the (incomplete) stacks add up to */
		jsonw__name(w, "attributed");
		jsonw__start_object(w);
		jsonw__field_u64(w, "device_bytes", p->attributed_bytes[GL_CLASS_DEVICE]);
		jsonw__field_u64(w, "managed_bytes", p->attributed_bytes[GL_CLASS_MANAGED]);
		jsonw__field_u64(w, "host_pinned_bytes", p->attributed_bytes[GL_CLASS_HOST_PINNED]);
		jsonw__field_u64(w, "outstanding_allocs", p->attributed_allocs);
		jsonw__end_object(w);
	}
	write_tensors(w, t);
	write_bpf(w, p);
	jsonw__name(w, "stacks");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < p->nstacks; i++)
		if (report__is_memory_class(p->stacks[i].cls))
			write_stack(w, &p->stacks[i]);
	jsonw__end_array(w);
	write_failures(w, p);
	jsonw__end_object(w);
}

static void write_stats(struct jsonw *w, const struct snapshot *s)
{
	static const char *const names[GL_NR_STATS] = {
		[GL_STAT_LOST_STACK] = "lost_stack_records",
		[GL_STAT_LOST_CALL] = "lost_call_records",
		[GL_STAT_LOST_PROC] = "lost_process_records",
		[GL_STAT_INFLIGHT_FULL] = "inflight_full",
		[GL_STAT_NESTED_OVERFLOW] = "nested_overflow",
		[GL_STAT_UNPAIRED_RETURN] = "unpaired_returns",
		[GL_STAT_STALE_ENTRY] = "stale_entries",
		[GL_STAT_ALLOC_TABLE_FULL] = "alloc_table_full",
		[GL_STAT_STACK_ERROR] = "stack_errors",
		[GL_STAT_READ_ERROR] = "read_errors",
		[GL_STAT_PROC_TABLE_FULL] = "proc_table_full",
		[GL_STAT_SCACHE_HIT] = "stack_cache_hits",
		[GL_STAT_SCACHE_MISS] = "stack_cache_misses",
		[GL_STAT_PY_REREAD] = "python_block_rereads",
	};

	jsonw__name(w, "stats");
	jsonw__start_object(w);
	for (int i = 0; i < GL_NR_STATS; i++)
		jsonw__field_u64(w, names[i], s->stats[i]);
	jsonw__field_u64(w, "malformed_records", s->malformed);
	jsonw__field_u64(w, "stack_records", s->ring_stack_records);
	jsonw__field_u64(w, "stack_record_ring_bytes", s->ring_stack_bytes);
	jsonw__field_u64(w, "ring_bytes", s->ring.bytes);
	jsonw__field_u64(w, "backlog_peak_bytes", s->ring.backlog_peak);
	jsonw__field_u64(w, "backlog_limit_bytes", s->ring.backlog_limit);
	jsonw__field_u64(w, "backlog_full", s->ring.backlog_full);
	if (s->self_cpu_ns)
		jsonw__field_u64(w, "self_cpu_ns", s->self_cpu_ns);
	if (s->nprogs) {
		jsonw__name(w, "programs");
		jsonw__start_object(w);
		for (uint32_t i = 0; i < s->nprogs; i++) {
			jsonw__name(w, s->progs[i].name);
			jsonw__start_object(w);
			jsonw__field_u64(w, "runs", s->progs[i].runs);
			jsonw__field_u64(w, "run_ns", s->progs[i].run_ns);
			jsonw__end_object(w);
		}
		jsonw__end_object(w);
	}
	jsonw__name(w, "calls");
	jsonw__start_object(w);
	for (int i = 0; i < GL_NR_APIS; i++)
		if (s->api_calls[i])
			jsonw__field_u64(w, probe__name(i), s->api_calls[i]);
	jsonw__end_object(w);
	jsonw__field_u64(w, "stacks_missing", s->stack_missing);
	jsonw__end_object(w);
}

static void write_recording(struct jsonw *w, const struct snap_recording *r)
{
	jsonw__name(w, "recording");
	jsonw__start_object(w);
	jsonw__field_string(w, "file", r->file);
	jsonw__field_string(w, "host", r->host);
	jsonw__field_u64(w, "started_unix_ns", r->wall_start_ns);
	jsonw__field_u64(w, "format_version", r->version);
	jsonw__field_bool(w, "complete", r->complete);
	jsonw__field_bool(w, "ended", r->ended);
	jsonw__field_bool(w, "truncated", r->truncated);
	jsonw__field_bool(w, "cut", r->cut);
	jsonw__field_u64(w, "max_size", r->max_size);
	jsonw__field_u64(w, "bytes", r->bytes);
	jsonw__field_u64(w, "skipped_bytes", r->skipped_bytes);
	jsonw__field_u64(w, "bad_chunks", r->bad_chunks);
	jsonw__field_u64(w, "bad_records", r->bad_records);
	jsonw__field_u64(w, "unknown_records", r->unknown_records);
	jsonw__field_u64(w, "calls", r->calls);
	jsonw__field_u64(w, "modules", r->modules);
	jsonw__field_u64(w, "modules_missing", r->modules_missing);
	jsonw__end_object(w);
}

int report__json(FILE *f, const struct snapshot *s)
{
	struct jsonw *w = jsonw__new(f, false);

	if (!w)
		return -ENOMEM;
	jsonw__start_object(w);
	jsonw__field_u64(w, "version", 1);
	jsonw__field_u64(w, "lost_events", s->lost_events);
	jsonw__field_u64(w, "unread_ring_bytes", s->unread_bytes);
	jsonw__field_u64(w, "unmatched_frees", s->unmatched_frees);
	jsonw__field_bool(w, "complete", s->complete);
	jsonw__field_double(w, "duration_s", s->duration_s);
	if (s->stack_mode)
		jsonw__field_string(w, "stack_mode", s->stack_mode);
	jsonw__field_u64(w, "probes", s->nr_probes);
	jsonw__field_u64(w, "processes_without_cuda", s->nprocs_idle);
	if (s->recording)
		write_recording(w, s->recording);
	write_stats(w, s);
	write_caps(w, s);
	jsonw__name(w, "processes");
	jsonw__start_array(w);
	for (uint32_t i = 0; i < s->nprocs; i++)
		write_proc(w, s, &s->procs[i],
			   s->procs[i].tensors_known ? &s->procs[i].tensors : NULL);
	jsonw__end_array(w);
	report__jobs_json(w, s);
	jsonw__end_object(w);
	return jsonw__free(w);
}
