/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * cgroup.h - who a process belongs to, from its cgroup path alone: the
 * container id and, under Kubernetes, the pod UID. Docker, containerd (and
 * cri-containerd), CRI-O and Podman, cgroup v1 and v2, the cgroupfs and the
 * systemd cgroup drivers. Names (namespace, pod, container) are not in the
 * cgroup path; cgroup__oci_names() reads them from the runtime's state where
 * that is reachable, without the Kubernetes API.
 */
#ifndef GL_CGROUP_H
#define GL_CGROUP_H

#include <stddef.h>
#include "report/metrics.h" /* struct proc_ident */

/*
 * Fills id from the text of /proc/PID/cgroup (every line; the unified v2
 * line or any v1 hierarchy that names a container). Returns 0 when a
 * container or pod was recognized, -ENOENT when not (id zeroed).
 */
int cgroup__parse(const char *text, struct proc_ident *id);

/* Reads procfs_root/PID/cgroup and parses it. Returns 0, -ENOENT, or -errno of the read. */
int cgroup__read(int pid, struct proc_ident *id);

/*
 * Pulls the io.kubernetes.pod.namespace, io.kubernetes.pod.name and
 * io.kubernetes.container.name annotations out of an OCI config.json text
 * (as containerd and CRI-O write them). Returns 0 if the pod name was found,
 * -ENOENT otherwise.
 */
int cgroup__parse_oci_names(const char *json, struct proc_ident *id);

/*
 * Looks for id->container_id's OCI config.json under the runtimes' state
 * directories below root (e.g. "/" or "/host"), and fills the names from it.
 * Returns 0, or -ENOENT when no state was found.
 */
int cgroup__oci_names(const char *root, struct proc_ident *id);

#endif /* GL_CGROUP_H */
