/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * python.bpf.h - CPython frames of the calling thread.
 */
#ifndef GPULEAK_PYTHON_BPF_H
#define GPULEAK_PYTHON_BPF_H

static __always_inline __u16 py_walk(struct task_struct *task, __u64 pid_tgid,
				     struct gl_py_frame *out, __u16 *status)
{
	return 0;
}

#endif /* GPULEAK_PYTHON_BPF_H */
