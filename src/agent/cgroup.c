// SPDX-License-Identifier: BSD-2-Clause
/*
 * cgroup.c - container id and pod UID from /proc/PID/cgroup.
 *
 * Every line's path is split into components and each component is matched
 * against the forms runtimes and kubelets give them:
 *   docker-<id>.scope, cri-containerd-<id>.scope, crio-<id>.scope,
 *   libpod-<id>.scope (systemd driver); <id> under /docker/ or a pod
 *   directory (cgroupfs driver); pod<uid> (cgroupfs) and
 *   kubepods-<qos>-pod<uid with underscores>.slice (systemd).
 * The innermost container component wins (nested containers, kind nodes);
 * ".." components (a reader in another cgroup namespace) are skipped.
 * Conmon scopes (crio-conmon-, libpod-conmon-) are not containers.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cgroup.h"
#include "util/procfs.h"

#define ID_LEN 64
#define UID_LEN 36
#define OCI_MAX (512 * 1024)

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

/* A pod UID (with dashes or, from the systemd driver, underscores) into out. */
static bool take_uid(const char *s, size_t n, char out[UID_LEN + 1])
{
	if (n != UID_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool sep = i == 8 || i == 13 || i == 18 || i == 23;

		if (sep ? c != '-' && c != '_' : !isxdigit((unsigned char)c))
			return false;
		out[i] = sep ? '-' : (char)tolower((unsigned char)c);
	}
	out[n] = '\0';
	return true;
}

struct prefix {
	const char *text;
	const char *runtime;
};

static const struct prefix container_prefixes[] = {
	{ "docker-", "docker" },
	{ "cri-containerd-", "containerd" },
	{ "crio-", "cri-o" },
	{ "libpod-", "podman" },
};

/* A container component: returns its runtime ("" if unknown), or NULL if not one. */
static const char *container_of(const char *c, size_t n, const char *parent, size_t pn, bool in_pod,
				char id[ID_LEN + 1])
{
	const char *runtime = "";

	if (n > 6 && !memcmp(c + n - 6, ".scope", 6))
		n -= 6;
	for (size_t i = 0; i < sizeof(container_prefixes) / sizeof(container_prefixes[0]); i++) {
		size_t pl = strlen(container_prefixes[i].text);

		if (n > pl && !memcmp(c, container_prefixes[i].text, pl)) {
			c += pl;
			n -= pl;
			runtime = container_prefixes[i].runtime;
			break;
		}
	}
	if (n != ID_LEN || !all_hex(c, n))
		return NULL;
	if (!runtime[0] && !in_pod && !(pn == 6 && !memcmp(parent, "docker", 6)))
		return NULL; /* a bare id outside /docker/ or a pod: not known to be a container */
	if (!runtime[0] && pn == 6 && !memcmp(parent, "docker", 6))
		runtime = "docker";
	memcpy(id, c, ID_LEN);
	id[ID_LEN] = '\0';
	return runtime;
}

/* A pod component: pod<uid> or kubepods[-qos]-pod<uid>.slice. */
static bool pod_of(const char *c, size_t n, char uid[UID_LEN + 1])
{
	if (n > 6 && !memcmp(c + n - 6, ".slice", 6)) {
		n -= 6;
		if (n < 3 + UID_LEN || strncmp(c, "kubepods", 8))
			return false;
		c += n - UID_LEN - 3;
		n = UID_LEN + 3;
	}
	return n == 3 + UID_LEN && !memcmp(c, "pod", 3) && take_uid(c + 3, UID_LEN, uid);
}

/* One path; fills what it finds. */
static void parse_path(const char *p, size_t len, struct proc_ident *id)
{
	const char *end = p + len, *parent = "";
	size_t pn = 0;
	bool in_pod = false;

	while (p < end) {
		const char *slash = memchr(p, '/', end - p), *c = p;
		size_t n = (slash ? slash : end) - p;
		const char *rt;
		char cid[ID_LEN + 1];

		p = slash ? slash + 1 : end;
		if (!n || (n == 2 && !memcmp(c, "..", 2)))
			continue;
		if (pod_of(c, n, id->pod_uid)) {
			in_pod = true;
		} else if ((rt = container_of(c, n, parent, pn, in_pod, cid))) {
			memcpy(id->container_id, cid, sizeof(cid));
			id->runtime = rt[0] ? rt : NULL;
		}
		parent = c;
		pn = n;
	}
}

int cgroup__parse(const char *text, struct proc_ident *id)
{
	const char *line = text;

	memset(id, 0, sizeof(*id));
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		const char *c1 = memchr(line, ':', len), *c2;

		/* hierarchy-id:controllers:path */
		c2 = c1 ? memchr(c1 + 1, ':', len - (c1 + 1 - line)) : NULL;
		if (c2 && !id->container_id[0]) {
			struct proc_ident one = {};

			parse_path(c2 + 1, len - (c2 + 1 - line), &one);
			if (one.container_id[0] || (one.pod_uid[0] && !id->pod_uid[0]))
				*id = one;
		}
		line = nl ? nl + 1 : NULL;
	}
	return id->container_id[0] || id->pod_uid[0] ? 0 : -ENOENT;
}

int cgroup__read(int pid, struct proc_ident *id)
{
	char path[64], buf[8192];
	ssize_t n;

	memset(id, 0, sizeof(*id));
	if (snprintf(path, sizeof(path), "%s/%d/cgroup", procfs_root, pid) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	n = read_small_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return cgroup__parse(buf, id);
}

/* The JSON string value of "key" in json into out (ASCII; others become '?'). */
static bool json_string(const char *json, const char *key, char *out, size_t len)
{
	char pat[80];
	const char *p;
	size_t n = 0;

	if (snprintf(pat, sizeof(pat), "\"%s\"", key) >= (int)sizeof(pat))
		return false;
	p = strstr(json, pat);
	if (!p)
		return false;
	p += strlen(pat);
	while (isspace((unsigned char)*p))
		p++;
	if (*p++ != ':')
		return false;
	while (isspace((unsigned char)*p))
		p++;
	if (*p++ != '"')
		return false;
	for (; *p && *p != '"'; p++) {
		char c = *p;

		if (c == '\\') {
			p++;
			if (!*p)
				return false;
			c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
			if (*p == 'u') {
				for (int i = 0; i < 4; i++)
					if (!isxdigit((unsigned char)p[1 + i]))
						return false;
				p += 4;
				c = '?';
			}
		} else if ((unsigned char)c < 0x20) {
			return false;
		} else if ((unsigned char)c >= 0x80) {
			c = '?';
		}
		if (n + 1 >= len)
			return false;
		out[n++] = c;
	}
	if (*p != '"')
		return false;
	out[n] = '\0';
	return true;
}

int cgroup__parse_oci_names(const char *json, struct proc_ident *id)
{
	/* CRI-O's annotations, then containerd's CRI plugin's */
	static const char *const keys[2][3] = {
		{ "io.kubernetes.pod.namespace", "io.kubernetes.pod.name",
		  "io.kubernetes.container.name" },
		{ "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name",
		  "io.kubernetes.cri.container-name" },
	};

	for (int k = 0; k < 2; k++) {
		char ns[sizeof(id->namespace)], pod[sizeof(id->pod)], ctr[sizeof(id->container)];

		if (!json_string(json, keys[k][1], pod, sizeof(pod)))
			continue;
		if (!json_string(json, keys[k][0], ns, sizeof(ns)))
			ns[0] = '\0';
		if (!json_string(json, keys[k][2], ctr, sizeof(ctr)))
			ctr[0] = '\0';
		memcpy(id->namespace, ns, sizeof(ns));
		memcpy(id->pod, pod, sizeof(pod));
		memcpy(id->container, ctr, sizeof(ctr));
		return 0;
	}
	return -ENOENT;
}

int cgroup__oci_names(const char *root, struct proc_ident *id)
{
	static const char *const layouts[][2] = {
		{ "/run/containerd/io.containerd.runtime.v2.task/k8s.io/", "/config.json" },
		{ "/run/containers/storage/overlay-containers/", "/userdata/config.json" },
	};
	char path[512], *buf;
	int err = -ENOENT;

	if (strlen(id->container_id) != ID_LEN || !all_hex(id->container_id, ID_LEN))
		return -ENOENT;
	if (!strcmp(root, "/"))
		root = "";
	buf = malloc(OCI_MAX);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]) && err; i++) {
		if (snprintf(path, sizeof(path), "%s%s%s%s", root, layouts[i][0], id->container_id,
			     layouts[i][1]) >= (int)sizeof(path))
			continue;
		if (read_small_file(path, buf, OCI_MAX) > 0)
			err = cgroup__parse_oci_names(buf, id);
	}
	free(buf);
	return err;
}
