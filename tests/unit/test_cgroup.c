// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_cgroup.c - container id and pod UID from /proc/PID/cgroup texts in the
 * forms runtimes and kubelets really write (docker, containerd, CRI-O,
 * Podman; cgroupfs and systemd drivers; cgroup v1 and v2), and Kubernetes
 * names from OCI config.json annotations.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "agent/cgroup.h"

#define ID "3f5a8c2be1d94a7b6e0f1c2d3a4b5c6d7e8f90123456789abcdef0123456789a"
#define UID "d6e2b4a1-5c3f-4e8a-9b7d-0f1e2d3c4b5a"
#define UID_ "d6e2b4a1_5c3f_4e8a_9b7d_0f1e2d3c4b5a"

struct sample {
	const char *what;
	const char *text;
	const char *id, *uid, *runtime;
};

static const struct sample samples[] = {
	{ "docker, cgroupfs, v1",
	  "12:pids:/docker/" ID "\n11:memory:/docker/" ID "\n1:name=systemd:/docker/" ID "\n",
	  ID, "", "docker" },
	{ "docker, systemd, v2", "0::/system.slice/docker-" ID ".scope\n", ID, "", "docker" },
	{ "docker, systemd, v1",
	  "11:devices:/system.slice/docker-" ID ".scope\n0::/system.slice/docker-" ID ".scope\n",
	  ID, "", "docker" },
	{ "kubernetes cgroupfs, containerd, v1, burstable",
	  "10:cpu,cpuacct:/kubepods/burstable/pod" UID "/" ID "\n", ID, UID, NULL },
	{ "kubernetes cgroupfs, guaranteed", "0::/kubepods/pod" UID "/" ID "\n", ID, UID, NULL },
	{ "kubernetes systemd, containerd, v2",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	  ".slice/cri-containerd-" ID ".scope\n", ID, UID, "containerd" },
	{ "kubernetes systemd, guaranteed QoS",
	  "0::/kubepods.slice/kubepods-pod" UID_ ".slice/cri-containerd-" ID ".scope\n", ID, UID,
	  "containerd" },
	{ "kubernetes systemd, CRI-O, v1",
	  "9:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	  ".slice/crio-" ID ".scope\n", ID, UID, "cri-o" },
	{ "kubernetes cgroupfs, CRI-O", "0::/kubepods/besteffort/pod" UID "/crio-" ID "\n", ID, UID,
	  "cri-o" },
	{ "kubernetes, dockershim, systemd",
	  "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	  ".slice/docker-" ID ".scope\n", ID, UID, "docker" },
	{ "reader in another cgroup namespace",
	  "0::/../../kubepods-besteffort-pod" UID_ ".slice/cri-containerd-" ID ".scope\n", ID, UID,
	  "containerd" },
	{ "podman rootless, v2",
	  "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID ".scope\n", ID,
	  "", "podman" },
	{ "podman root, nested container cgroup",
	  "0::/machine.slice/libpod-" ID ".scope/container\n", ID, "", "podman" },
	{ "kind node: kubernetes inside docker",
	  "0::/docker/1111111111111111111111111111111111111111111111111111111111111111/kubepods/"
	  "besteffort/pod" UID "/" ID "\n", ID, UID, NULL },
	{ "v1 and an empty v2 line (hybrid)",
	  "0::/\n4:memory:/kubepods/burstable/pod" UID "/" ID "\n", ID, UID, NULL },
	{ "pod sandbox cgroup only (no container)",
	  "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice\n", "",
	  UID, NULL },
};

static void test_runtime_formats(void **state)
{
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		const struct sample *s = &samples[i];
		struct proc_ident id;

		print_message("%s\n", s->what);
		assert_int_equal(cgroup__parse(s->text, &id), 0);
		assert_string_equal(id.container_id, s->id);
		assert_string_equal(id.pod_uid, s->uid);
		if (s->runtime)
			assert_string_equal(id.runtime, s->runtime);
		else
			assert_null(id.runtime);
	}
}

static void test_not_containers(void **state)
{
	static const char *const texts[] = {
		"0::/user.slice/user-1000.slice/session-3.scope\n",
		"0::/system.slice/sshd.service\n",
		"0::/\n",
		"12:pids:/\n11:memory:/user.slice\n",
		/* conmon, not the container */
		"0::/machine.slice/libpod-conmon-" ID ".scope\n",
		"0::/system.slice/crio-conmon-" ID ".scope\n",
		/* a bare id outside /docker/ or a pod */
		"0::/system.slice/" ID "\n",
		/* near misses: short, upper-case, not hex */
		"0::/docker/3f5a8c2be1d94a7b\n",
		"0::/docker/3F5A8C2BE1D94A7B6E0F1C2D3A4B5C6D7E8F90123456789ABCDEF0123456789A\n",
		"0::/docker/zz5a8c2be1d94a7b6e0f1c2d3a4b5c6d7e8f90123456789abcdef0123456789a\n",
		"0::/kubepods/burstable/podnot-a-uid/\n",
		"garbage without colons\n",
		"",
	};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct proc_ident id;

		print_message("%s", texts[i]);
		assert_int_equal(cgroup__parse(texts[i], &id), -ENOENT);
		assert_string_equal(id.container_id, "");
		assert_string_equal(id.pod_uid, "");
	}
}

static void test_oci_names(void **state)
{
	static const char crio[] =
		"{\"ociVersion\":\"1.0.2\",\"annotations\":{\"io.kubernetes.container.name\":"
		"\"trainer\",\"io.kubernetes.pod.name\":\"llm-finetune-7f9c\",\"io.kubernetes.pod."
		"namespace\" : \"ml-team\"}}";
	static const char containerd[] =
		"{\"annotations\": {\"io.kubernetes.cri.container-name\": \"worker\",\n"
		"  \"io.kubernetes.cri.sandbox-name\": \"job-\\\"x\\\"-0\",\n"
		"  \"io.kubernetes.cri.sandbox-namespace\": \"default\"}}";
	struct proc_ident id = {};

	assert_int_equal(cgroup__parse_oci_names(crio, &id), 0);
	assert_string_equal(id.namespace, "ml-team");
	assert_string_equal(id.pod, "llm-finetune-7f9c");
	assert_string_equal(id.container, "trainer");
	memset(&id, 0, sizeof(id));
	assert_int_equal(cgroup__parse_oci_names(containerd, &id), 0);
	assert_string_equal(id.namespace, "default");
	assert_string_equal(id.pod, "job-\"x\"-0");
	assert_string_equal(id.container, "worker");
	memset(&id, 0, sizeof(id));
	assert_int_equal(cgroup__parse_oci_names("{\"annotations\":{}}", &id), -ENOENT);
	assert_int_equal(cgroup__parse_oci_names("{\"io.kubernetes.pod.name\":\"unterminated", &id),
			 -ENOENT);
	assert_string_equal(id.pod, "");
}

static void test_oci_state_lookup(void **state)
{
	char root[] = "/tmp/gpuleak-cgroup-XXXXXX", path[512];
	struct proc_ident id = {};
	FILE *f;

	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "mkdir -p %s/run/containerd/io.containerd.runtime.v2.task/"
		 "k8s.io/%s", root, ID);
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof(path), "%s/run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/"
		 "config.json", root, ID);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"p\","
	      "\"io.kubernetes.cri.sandbox-namespace\":\"n\","
	      "\"io.kubernetes.cri.container-name\":\"c\"}}", f);
	fclose(f);
	snprintf(id.container_id, sizeof(id.container_id), "%s", ID);
	assert_int_equal(cgroup__oci_names(root, &id), 0);
	assert_string_equal(id.pod, "p");
	assert_string_equal(id.namespace, "n");
	assert_string_equal(id.container, "c");
	/* an id that is not 64 hex digits never becomes a path */
	snprintf(id.container_id, sizeof(id.container_id), "../../etc");
	assert_int_equal(cgroup__oci_names(root, &id), -ENOENT);
	snprintf(path, sizeof(path), "rm -rf %s", root);
	assert_int_equal(system(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runtime_formats),
		cmocka_unit_test(test_not_containers),
		cmocka_unit_test(test_oci_names),
		cmocka_unit_test(test_oci_state_lookup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
