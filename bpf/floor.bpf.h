/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * floor.bpf.h - programs that do nothing, for benchmarks only.
 *
 * `gpuleak --bench-floor` attaches these on the same functions, through the
 * same links, instead of call_enter/call_exit: what a traced call then costs
 * is the price of the uprobe and uretprobe themselves, the floor that no
 * tracer built on them can go below.
 */
#ifndef GPULEAK_FLOOR_BPF_H
#define GPULEAK_FLOOR_BPF_H

/* uprobe on every traced function, in place of call_enter. */
SEC("uprobe")
int floor_enter(struct pt_regs *ctx)
{
	return 0;
}

/* uretprobe on every traced function, in place of call_exit. */
SEC("uretprobe")
int floor_exit(struct pt_regs *ctx)
{
	return 0;
}

/* pytorch:malloc, in place of torch_malloc: the USDT probe's own price. */
SEC("usdt")
int floor_torch_malloc(struct pt_regs *ctx)
{
	return 0;
}

/* pytorch:free, in place of torch_free. */
SEC("usdt")
int floor_torch_free(struct pt_regs *ctx)
{
	return 0;
}

#endif /* GPULEAK_FLOOR_BPF_H */
