// SPDX-License-Identifier: BSD-2-Clause
/*
 * probes.c - names and descriptors of the probe table, generated from the
 * X-macro list in gpuleak_abi.h so that the table exists in one place.
 */
#include <string.h>
#include "probes.h"

#define GL_API_NAME(sym, role, cls, kind, flags) #sym,
static const char *const api_names[GL_NR_APIS] = { GL_APIS(GL_API_NAME) };
#undef GL_API_NAME

#define GL_API_DESC(sym, role, cls, kind, flags) \
	{ GL_ROLE_##role, GL_CLASS_##cls, GL_KIND_##kind, (flags) },
static const struct gl_api_desc api_descs[GL_NR_APIS] = { GL_APIS(GL_API_DESC) };
#undef GL_API_DESC

const char *probe__name(unsigned int api)
{
	return api < GL_NR_APIS ? api_names[api] : "?";
}

const struct gl_api_desc *probe__desc(unsigned int api)
{
	return api < GL_NR_APIS ? &api_descs[api] : NULL;
}

int probe__lookup(const char *name)
{
	for (int i = 0; i < GL_NR_APIS; i++)
		if (!strcmp(api_names[i], name))
			return i;
	return -1;
}

const char *class__name(unsigned int cls)
{
	static const char *const names[GL_NR_CLASSES] = {
		[GL_CLASS_DEVICE] = "device",		[GL_CLASS_MANAGED] = "managed",
		[GL_CLASS_HOST_PINNED] = "host_pinned", [GL_CLASS_TORCH_BLOCK] = "torch_block",
		[GL_CLASS_ADDRESS] = "address_space",	[GL_CLASS_IMPORTED] = "imported",
	};

	return cls < GL_NR_CLASSES ? names[cls] : "unknown";
}

const char *cuda__error_name(int rc)
{
	switch (rc) {
	case 0: return "CUDA_SUCCESS";
	case 1: return "CUDA_ERROR_INVALID_VALUE";
	case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
	case 3: return "CUDA_ERROR_NOT_INITIALIZED";
	case 4: return "CUDA_ERROR_DEINITIALIZED";
	case 100: return "CUDA_ERROR_NO_DEVICE";
	case 101: return "CUDA_ERROR_INVALID_DEVICE";
	case 201: return "CUDA_ERROR_INVALID_CONTEXT";
	case 400: return "CUDA_ERROR_INVALID_HANDLE";
	case 700: return "CUDA_ERROR_ILLEGAL_ADDRESS";
	case 801: return "CUDA_ERROR_NOT_SUPPORTED";
	case 999: return "CUDA_ERROR_UNKNOWN";
	default: return "CUDA_ERROR_OTHER";
	}
}

const char *stack_mode__name(enum gl_stack_mode m)
{
	return m == GL_STACK_DWARF ? "dwarf" : m == GL_STACK_FP ? "fp" : "none";
}
