// SPDX-License-Identifier: BSD-2-Clause
/*
 * fuzz_cgroup.c - libFuzzer target: the cgroup path parser (container id, pod
 * UID, runtime) and the OCI config.json reader on any input: as the text of
 * /proc/PID/cgroup, as a config.json text, and as the config.json file of a
 * container under a fake containerd or CRI-O state directory.
 */
#include <errno.h>
#include <sys/stat.h>
#include "fuzz.h"
#include "agent/cgroup.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char config[2][512];

static void mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) && errno != EEXIST) {
			perror(path);
			exit(1);
		}
		*p = '/';
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *root = fuzz_tmpdir();

	log_level = -1;
	snprintf(config[0], sizeof(config[0]),
		 "%s/run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json", root, CID);
	snprintf(config[1], sizeof(config[1]),
		 "%s/run/containers/storage/overlay-containers/%s/userdata/config.json", root, CID);
	mkdirs(config[0]);
	mkdirs(config[1]);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_strdup(data, size);
	struct proc_ident id;

	if (!text)
		return 0;
	cgroup__parse(text, &id);
	cgroup__oci_names(fuzz_dir, &id);
	cgroup__parse_oci_names(text, &id);
	fuzz_write(config[size % 2], data, size);
	memset(&id, 0, sizeof(id));
	memcpy(id.container_id, CID, sizeof(CID));
	cgroup__oci_names(fuzz_dir, &id);
	unlink(config[size % 2]);
	free(text);
	return 0;
}
