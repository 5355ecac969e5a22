// SPDX-License-Identifier: BSD-2-Clause
/*
 * test_probes.c - trace/probes.c: every name of the probe table round-trips
 * through its id, descriptors match the table, classes and CUDA errors are
 * named as the JSON contract spells them; and the table itself is coherent.
 */
#include "unit.h"
#include "trace/probes.h"

struct api_row {
	const char *name;
	struct gl_api_desc desc;
};

#define ROW(sym, role, cls, kind, flags) \
	{ #sym, { GL_ROLE_##role, GL_CLASS_##cls, GL_KIND_##kind, (flags) } },
static const struct api_row rows[] = { GL_APIS(ROW) };
#undef ROW

#define NROWS (sizeof(rows) / sizeof(rows[0]))

static void test_names_round_trip(void **state)
{
	assert_int_equal(NROWS, GL_NR_APIS);
	for (unsigned int i = 0; i < NROWS; i++) {
		assert_string_equal(probe__name(i), rows[i].name);
		assert_int_equal(probe__lookup(rows[i].name), i);
		assert_int_equal(probe__lookup(probe__name(i)), i);
	}
	/* a few ids the code names directly */
	assert_string_equal(probe__name(GL_API_cuMemAlloc_v2), "cuMemAlloc_v2");
	assert_string_equal(probe__name(GL_API_cuMemFree_v2), "cuMemFree_v2");
	assert_string_equal(probe__name(GL_API_cuDevicePrimaryCtxReset),
			    "cuDevicePrimaryCtxReset");
	assert_int_equal(probe__lookup("cuCtxPopCurrent_v2"), GL_API_cuCtxPopCurrent_v2);
}

static void test_names_unique(void **state)
{
	for (unsigned int i = 0; i < NROWS; i++)
		for (unsigned int j = i + 1; j < NROWS; j++)
			if (!strcmp(rows[i].name, rows[j].name))
				fail_msg("%s appears twice", rows[i].name);
}

static void test_lookup_misses(void **state)
{
	assert_int_equal(probe__lookup(""), -1);
	assert_int_equal(probe__lookup("cuMemAlloc_v"), -1);
	assert_int_equal(probe__lookup("cuMemAlloc_v22"), -1);
	assert_int_equal(probe__lookup("cumemalloc_v2"), -1);
	assert_int_equal(probe__lookup(" cuMemAlloc"), -1);
	assert_int_equal(probe__lookup("cudaMalloc"), -1);
	assert_int_equal(probe__lookup("?"), -1);
	assert_string_equal(probe__name(GL_NR_APIS), "?");
	assert_string_equal(probe__name(UINT32_MAX), "?");
	assert_null(probe__desc(GL_NR_APIS));
	assert_null(probe__desc(UINT32_MAX));
}

static void test_descriptors(void **state)
{
	for (unsigned int i = 0; i < NROWS; i++) {
		const struct gl_api_desc *d = probe__desc(i);

		assert_non_null(d);
		assert_int_equal(d->role, rows[i].desc.role);
		assert_int_equal(d->cls, rows[i].desc.cls);
		assert_int_equal(d->kind, rows[i].desc.kind);
		assert_int_equal(d->flags, rows[i].desc.flags);
	}
	assert_int_equal(probe__desc(GL_API_cuMemAllocPitch_v2)->role, GL_ROLE_ALLOC_PITCH);
	assert_int_equal(probe__desc(GL_API_cuMemAllocManaged)->cls, GL_CLASS_MANAGED);
	assert_int_equal(probe__desc(GL_API_cuMemHostRegister_v2)->kind, GL_KIND_HOSTREG);
	assert_int_equal(probe__desc(GL_API_cuMemAlloc)->flags & GL_API_V1, GL_API_V1);
}

static bool is_alloc_role(uint8_t role)
{
	switch (role) {
	case GL_ROLE_ALLOC:
	case GL_ROLE_ALLOC_PITCH:
	case GL_ROLE_HOST_REGISTER:
	case GL_ROLE_VMM_CREATE:
	case GL_ROLE_VA_RESERVE:
	case GL_ROLE_IMPORT:
	case GL_ROLE_IPC_OPEN:
	case GL_ROLE_ARRAY_CREATE:
	case GL_ROLE_ARRAY3D_CREATE:
	case GL_ROLE_MIPMAP_CREATE:
		return true;
	}
	return false;
}

static bool is_free_role(uint8_t role)
{
	return role == GL_ROLE_FREE || role == GL_ROLE_VMM_RELEASE || role == GL_ROLE_VA_FREE;
}

/* The table's own rules: each namespace that is filled can be emptied, and back. */
static void test_table_coherent(void **state)
{
	for (unsigned int i = 0; i < NROWS; i++) {
		const struct gl_api_desc *d = &rows[i].desc;
		bool freed = false, allocated = false;
		size_t len = strlen(rows[i].name);

		if (d->flags & GL_API_STACK)
			assert_true(is_alloc_role(d->role));
		assert_true(d->cls < GL_NR_CLASSES);
		assert_true(d->kind < GL_NR_KINDS);
		assert_true(d->role >= GL_ROLE_ALLOC && d->role <= GL_ROLE_CTX_POP);
		if (len > 5 && !strcmp(rows[i].name + len - 5, "_ptsz"))
			assert_non_null(strstr(rows[i].name, "Async"));
		for (unsigned int j = 0; j < NROWS; j++) {
			const struct gl_api_desc *e = &rows[j].desc;

			if (e->kind != d->kind || e->role >= GL_ROLE_CTX_CREATE)
				continue;
			freed |= is_free_role(e->role);
			allocated |= is_alloc_role(e->role);
		}
		if (is_alloc_role(d->role) && !freed)
			fail_msg("nothing frees what %s allocates", rows[i].name);
		if (is_free_role(d->role) && !allocated)
			fail_msg("nothing allocates what %s frees", rows[i].name);
	}
	assert_true(rows[GL_API_cuMemAlloc_v2].desc.flags & GL_API_REQUIRED);
	assert_true(rows[GL_API_cuMemFree_v2].desc.flags & GL_API_REQUIRED);
}

static void test_class_names(void **state)
{
	assert_string_equal(class__name(GL_CLASS_DEVICE), "device");
	assert_string_equal(class__name(GL_CLASS_MANAGED), "managed");
	assert_string_equal(class__name(GL_CLASS_HOST_PINNED), "host_pinned");
	assert_string_equal(class__name(GL_CLASS_TORCH_BLOCK), "torch_block");
	assert_string_equal(class__name(GL_CLASS_ADDRESS), "address_space");
	assert_string_equal(class__name(GL_CLASS_IMPORTED), "imported");
	assert_string_equal(class__name(GL_NR_CLASSES), "unknown");
	assert_string_equal(class__name(GL_CLASS_SLOTS - 1), "unknown");
	assert_string_equal(class__name(255), "unknown");
	assert_string_equal(class__name(UINT32_MAX), "unknown");
}

static void test_error_names(void **state)
{
	static const struct {
		int rc;
		const char *name;
	} known[] = {
		{ 0, "CUDA_SUCCESS" },
		{ 1, "CUDA_ERROR_INVALID_VALUE" },
		{ 2, "CUDA_ERROR_OUT_OF_MEMORY" },
		{ 3, "CUDA_ERROR_NOT_INITIALIZED" },
		{ 4, "CUDA_ERROR_DEINITIALIZED" },
		{ 100, "CUDA_ERROR_NO_DEVICE" },
		{ 101, "CUDA_ERROR_INVALID_DEVICE" },
		{ 201, "CUDA_ERROR_INVALID_CONTEXT" },
		{ 400, "CUDA_ERROR_INVALID_HANDLE" },
		{ 700, "CUDA_ERROR_ILLEGAL_ADDRESS" },
		{ 801, "CUDA_ERROR_NOT_SUPPORTED" },
		{ 999, "CUDA_ERROR_UNKNOWN" },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		assert_string_equal(cuda__error_name(known[i].rc), known[i].name);
	assert_string_equal(cuda__error_name(5), "CUDA_ERROR_OTHER");
	assert_string_equal(cuda__error_name(-1), "CUDA_ERROR_OTHER");
	assert_string_equal(cuda__error_name(1000), "CUDA_ERROR_OTHER");
	assert_string_equal(cuda__error_name(INT32_MIN), "CUDA_ERROR_OTHER");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_round_trip),
		cmocka_unit_test(test_names_unique),
		cmocka_unit_test(test_lookup_misses),
		cmocka_unit_test(test_descriptors),
		cmocka_unit_test(test_table_coherent),
		cmocka_unit_test(test_class_names),
		cmocka_unit_test(test_error_names),
	};

	return cmocka_run_group_tests_name("probes", tests, NULL, NULL);
}
