/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * pause.h - holding every thread of a process still while its heap is read,
 * the way py-spy does: PTRACE_SEIZE and PTRACE_INTERRUPT per thread, then
 * PTRACE_DETACH. Should gpuleak die meanwhile, the kernel detaches and the
 * threads run on: no state is left in the target.
 */
#ifndef GL_CENSUS_PAUSE_H
#define GL_CENSUS_PAUSE_H

#include <stdint.h>

struct census_pause {
	int pid;
	int nr;	  /* threads held now */
	int held; /* threads that were held */
	int tids[4096];
	int sigs[4096];	       /* a signal that stopped a thread first, given back at detach */
	uint64_t start_ns, ns; /* when the first thread was stopped; how long they were */
};

/*
 * Stops every thread of pid (threads started meanwhile too). Returns 0;
 * -EPERM without the right to trace pid (CAP_SYS_PTRACE, or the same user
 * under kernel.yama.ptrace_scope 0); -EBUSY when another tracer holds it;
 * -ESRCH; -E2BIG for more threads than can be held; -ETIMEDOUT when a
 * thread did not stop within 2 s. On error no thread is left stopped (one
 * that never stopped is let go when gpuleak exits).
 */
int census_pause__stop(int pid, struct census_pause *p);
/* Lets the threads run again and sets p->ns. */
void census_pause__resume(struct census_pause *p);

#endif /* GL_CENSUS_PAUSE_H */
