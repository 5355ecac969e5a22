// SPDX-License-Identifier: BSD-2-Clause
/*
 * fw_raw.cu - a CUDA C++ program, built by frameworks.sh with
 * nvcc -O2 -Xcompiler -fomit-frame-pointer (no frame pointers anywhere), that keeps one
 * allocation a step through each of cudaMalloc (leak_malloc), cudaMallocAsync
 * (leak_async), cudaMallocHost (leak_host) and the driver's virtual memory API
 * (leak_vmm: cuMemCreate + cuMemAddressReserve + cuMemMap). gpuleak must unwind each
 * stack (DWARF CFI) from libcuda through these functions to main. Protocol as
 * fw_common.py: "ready <pid>" before the first CUDA call, the file $FW_GO, figures to
 * $FW_DONE, the file $FW_EXIT.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEPS 24
#define STEP_US 150000
#define DEV_BYTES (4u << 20)
#define ASYNC_BYTES (3u << 20)
#define HOST_BYTES (2u << 20)

static void check(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "fw_raw: %s failed: %d\n", what, rc);
		exit(1);
	}
}

static void wait_for(const char *path)
{
	struct stat st;

	for (int i = 0; i < 60 * 100 && stat(path, &st); i++)
		usleep(10000);
}

__attribute__((noinline)) static void *leak_malloc(void)
{
	void *p;

	check(cudaMalloc(&p, DEV_BYTES), "cudaMalloc");
	return p;
}

__attribute__((noinline)) static void *leak_async(cudaStream_t s)
{
	void *p;

	check(cudaMallocAsync(&p, ASYNC_BYTES, s), "cudaMallocAsync");
	return p;
}

__attribute__((noinline)) static void *leak_host(void)
{
	void *p;

	check(cudaMallocHost(&p, HOST_BYTES), "cudaMallocHost");
	return p;
}

__attribute__((noinline)) static CUdeviceptr leak_vmm(size_t gran)
{
	CUmemAllocationProp prop = {};
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	CUmemAccessDesc acc = {};

	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	check(cuMemCreate(&h, gran, &prop, 0), "cuMemCreate");
	check(cuMemAddressReserve(&va, gran, 0, 0, 0), "cuMemAddressReserve");
	check(cuMemMap(va, gran, 0, h, 0), "cuMemMap");
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	check(cuMemSetAccess(va, gran, &acc, 1), "cuMemSetAccess");
	return va;
}

__attribute__((noinline)) static void train_step(cudaStream_t s, size_t gran)
{
	leak_malloc();
	leak_async(s);
	leak_host();
	leak_vmm(gran);
	check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

int main(void)
{
	const char *go = getenv("FW_GO"), *done = getenv("FW_DONE"), *ex = getenv("FW_EXIT");
	CUmemAllocationProp prop = {};
	size_t gran = 0, freeb, total;
	cudaStream_t s;
	char tmp[4096];
	FILE *f;

	if (!go || !done || !ex) {
		fprintf(stderr, "fw_raw: FW_GO, FW_DONE and FW_EXIT must be set\n");
		return 2;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	wait_for(go);
	check(cudaSetDevice(0), "cudaSetDevice");
	check(cudaStreamCreate(&s), "cudaStreamCreate");
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	check(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
	      "cuMemGetAllocationGranularity");
	for (int i = 0; i < STEPS; i++) {
		train_step(s, gran);
		usleep(STEP_US);
	}
	check(cudaMemGetInfo(&freeb, &total), "cudaMemGetInfo");
	snprintf(tmp, sizeof(tmp), "%s.tmp", done);
	f = fopen(tmp, "w");
	if (!f)
		return 1;
	fprintf(f,
		"{\"pid\":%d,\"framework\":\"CUDA runtime %d\",\"steps\":%d,\"sites\":{"
		"\"leak_malloc\":%llu,\"leak_async\":%llu,\"leak_host\":%llu,\"leak_vmm\":%llu},"
		"\"device_free\":%llu,\"device_total\":%llu}\n",
		(int)getpid(), CUDART_VERSION, STEPS, (unsigned long long)STEPS * DEV_BYTES,
		(unsigned long long)STEPS * ASYNC_BYTES, (unsigned long long)STEPS * HOST_BYTES,
		(unsigned long long)STEPS * gran, (unsigned long long)freeb,
		(unsigned long long)total);
	fclose(f);
	rename(tmp, done);
	wait_for(ex);
	return 0;
}
