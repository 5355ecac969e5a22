// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fc_array.c - CUDA arrays and mipmapped arrays of the stand-in.
 *
 * It owns the size rules of arrays (documented in fakecuda.h, computed the same
 * way by gpuleak) and their records. Array handles are fake addresses; an
 * array belongs to the context current at its creation.
 */
#include "fc_internal.h"

/* Bytes per channel of an array format, 0 if the format is unknown. */
static uint64_t format_size(int format)
{
	switch (format) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 0;
	}
}

/*
 * Size of levels mipmap levels of a w x h x d array (levels 1: a plain array);
 * 0 when the descriptor is invalid or the size overflows.
 */
static uint64_t array_size(uint64_t w, uint64_t h, uint64_t d, int format, unsigned int channels,
			   unsigned int levels)
{
	uint64_t elem = format_size(format) * channels, total = 0, lw, lh, ld, size;
	unsigned int l;

	if (!elem || !w || (channels != 1 && channels != 2 && channels != 4) || !levels ||
	    levels > 32)
		return 0;
	h = h ? h : 1;
	d = d ? d : 1;
	for (l = 0; l < levels; l++) {
		lw = l < 64 && (w >> l) ? w >> l : 1;
		lh = l < 64 && (h >> l) ? h >> l : 1;
		ld = l < 64 && (d >> l) ? d >> l : 1;
		if (__builtin_mul_overflow(lw, lh, &size) ||
		    __builtin_mul_overflow(size, ld, &size) ||
		    __builtin_mul_overflow(size, elem, &size) ||
		    __builtin_add_overflow(total, size, &total))
			return 0;
	}
	return total;
}

/* Records an array (kind FC_K_ARRAY or FC_K_MIPMAP) of size bytes; size 0 is refused. */
static CUresult array_create(const char *api, int kind, uint64_t *out, uint64_t size)
{
	struct fc_ctx *ctx;
	uint64_t addr = 0;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	ctx = fc_need_ctx(&rc);
	if (!ctx)
		goto cleanup;
	rc = CUDA_ERROR_INVALID_VALUE;
	if (!out || !size)
		goto cleanup;
	rc = fc_over_capacity(FAKECUDA_DEVICE, size);
	if (rc)
		goto cleanup;
	addr = fc_bump(&fc.next_obj, 64, 64, FC_BASE_VA);
	if (!addr || !fc_insert(kind, addr, size, FAKECUDA_DEVICE, ctx)) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto cleanup;
	}
	*out = addr;
cleanup:
	fc_count_alloc_result(rc);
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "size=%llu -> 0x%llx", (unsigned long long)size,
		 (unsigned long long)addr);
	return rc;
}

static CUresult array_destroy(const char *api, int kind, uint64_t key)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	if (!fc_need_ctx(&rc))
		goto cleanup;
	if (!fc_free_key(kind, key))
		rc = CUDA_ERROR_INVALID_HANDLE;
cleanup:
	if (rc)
		fc_count_free_failure();
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "0x%llx", (unsigned long long)key);
	return rc;
}

FC_EXPORT CUresult cuArrayCreate_v2(CUarray *array, const CUDA_ARRAY_DESCRIPTOR *desc)
{
	uint64_t addr = 0, size = 0;
	CUresult rc;

	if (desc)
		size = array_size(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels, 1);
	rc = array_create(__func__, FC_K_ARRAY, array ? &addr : NULL, size);
	if (!rc)
		*array = (CUarray)(uintptr_t)addr;
	return rc;
}

FC_EXPORT CUresult cuArray3DCreate_v2(CUarray *array, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
	uint64_t addr = 0, size = 0;
	CUresult rc;

	if (desc)
		size = array_size(desc->Width, desc->Height, desc->Depth, desc->Format,
				  desc->NumChannels, 1);
	rc = array_create(__func__, FC_K_ARRAY, array ? &addr : NULL, size);
	if (!rc)
		*array = (CUarray)(uintptr_t)addr;
	return rc;
}

FC_EXPORT CUresult cuArrayDestroy(CUarray array)
{
	return array_destroy(__func__, FC_K_ARRAY, (uint64_t)(uintptr_t)array);
}

FC_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *array,
					  const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels)
{
	uint64_t addr = 0, size = 0;
	CUresult rc;

	if (desc)
		size = array_size(desc->Width, desc->Height, desc->Depth, desc->Format,
				  desc->NumChannels, levels);
	rc = array_create(__func__, FC_K_MIPMAP, array ? &addr : NULL, size);
	if (!rc)
		*array = (CUmipmappedArray)(uintptr_t)addr;
	return rc;
}

FC_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array)
{
	return array_destroy(__func__, FC_K_MIPMAP, (uint64_t)(uintptr_t)array);
}
