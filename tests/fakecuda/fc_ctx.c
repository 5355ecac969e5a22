// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * fc_ctx.c - initialization, devices, errors and contexts of the stand-in.
 *
 * It owns the context objects (one primary per device, retained and released
 * by count; created contexts, destroyed once) and each thread's stack of
 * current contexts. Tearing a context down drops the records it owns. Context
 * objects are kept until the library is unloaded, so a stale CUcontext is
 * answered with 201 rather than a crash.
 */
#include <stdlib.h>
#include <string.h>

#include "fc_internal.h"

static __thread struct fc_ctx *tls_stack[FC_MAX_STACK];
static __thread int tls_depth;

struct fc_ctx *fc_current(void)
{
	return tls_depth ? tls_stack[tls_depth - 1] : NULL;
}

void fc_ctx_setup(void)
{
	int i;

	for (i = 0; i < fc.ndevices; i++) {
		fc.primary[i].dev = i;
		fc.primary[i].primary = 1;
		fc.primary[i].next = fc.ctxs;
		fc.ctxs = &fc.primary[i];
	}
}

void fc_ctx_reset(void)
{
	struct fc_ctx *c, *next;

	for (c = fc.ctxs; c; c = next) {
		next = c->next;
		if (!c->primary)
			free(c);
	}
	fc.ctxs = NULL;
	memset(fc.primary, 0, sizeof(fc.primary));
	tls_depth = 0;
}

/* A context this library made (lock held). */
static int known(const struct fc_ctx *ctx)
{
	const struct fc_ctx *c;

	for (c = fc.ctxs; c; c = c->next) {
		if (c == ctx)
			return 1;
	}
	return 0;
}

static CUresult need_device(CUdevice dev)
{
	if (!fc.initialized)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (dev < 0 || dev >= fc.ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

static CUresult push(struct fc_ctx *ctx)
{
	if (tls_depth == FC_MAX_STACK)
		return CUDA_ERROR_INVALID_VALUE;
	tls_stack[tls_depth++] = ctx;
	return CUDA_SUCCESS;
}

static CUresult init(const char *api, unsigned int flags)
{
	CUresult rc = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&fc_lock);
	if (flags)
		goto cleanup;
	if (fc.initialized) {
		rc = CUDA_SUCCESS;
		goto cleanup;
	}
	rc = fc_setup();
	if (!rc)
		fc_ctx_setup();
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "%u", flags);
	return rc;
}

FC_EXPORT CUresult cuInit(unsigned int flags)
{
	return init(__func__, flags);
}

FC_EXPORT CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = 13000;
	return CUDA_SUCCESS;
}

FC_EXPORT CUresult cuDeviceGetCount(int *count)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc && !count)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc)
		*count = fc.ndevices;
	pthread_mutex_unlock(&fc_lock);
	return rc;
}

FC_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = need_device(ordinal);
	if (!rc && !dev)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc)
		*dev = ordinal;
	pthread_mutex_unlock(&fc_lock);
	return rc;
}

FC_EXPORT CUresult cuGetErrorName(CUresult error, const char **name)
{
	static const struct {
		CUresult rc;
		const char *name;
	} names[] = {
		{ CUDA_SUCCESS, "CUDA_SUCCESS" },
		{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE" },
		{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY" },
		{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED" },
		{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE" },
		{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT" },
		{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE" },
	};
	size_t i;

	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i].rc == error) {
			*name = names[i].name;
			return CUDA_SUCCESS;
		}
	}
	*name = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* cuCtxCreate*: a new context, pushed on the calling thread's stack. */
static CUresult ctx_create(const char *api, CUcontext *pctx, CUdevice dev)
{
	struct fc_ctx *ctx = NULL;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = need_device(dev);
	if (!rc && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (rc)
		goto cleanup;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto cleanup;
	}
	rc = push(ctx);
	if (rc) {
		free(ctx);
		ctx = NULL;
		goto cleanup;
	}
	ctx->dev = dev;
	ctx->alive = 1;
	ctx->next = fc.ctxs;
	fc.ctxs = ctx;
	*pctx = (CUcontext)ctx;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "dev=%d ctx=%p", dev, (void *)ctx);
	return rc;
}

FC_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_create(__func__, pctx, dev);
}

FC_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_create(__func__, pctx, dev);
}

FC_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int nparams,
				  unsigned int flags, CUdevice dev)
{
	(void)flags;
	if (nparams < 0 || (nparams && !params))
		return CUDA_ERROR_INVALID_VALUE;
	return ctx_create(__func__, pctx, dev);
}

FC_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
				  CUdevice dev)
{
	(void)flags;
	if (params && params->numExecAffinityParams < 0)
		return CUDA_ERROR_INVALID_VALUE;
	return ctx_create(__func__, pctx, dev);
}

static CUresult ctx_destroy(const char *api, CUcontext handle)
{
	struct fc_ctx *ctx = (struct fc_ctx *)handle;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc && (!ctx || !known(ctx) || ctx->primary || !ctx->alive))
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (rc)
		goto cleanup;
	fc_drop_ctx(ctx);
	ctx->alive = 0;
	if (fc_current() == ctx)
		tls_depth--;
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "ctx=%p", (void *)ctx);
	return rc;
}

FC_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	return ctx_destroy(__func__, ctx);
}

FC_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	return ctx_destroy(__func__, ctx);
}

/* Replaces the top of the stack; NULL pops it. A primary may be current while inactive. */
FC_EXPORT CUresult cuCtxSetCurrent(CUcontext handle)
{
	struct fc_ctx *ctx = (struct fc_ctx *)handle;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (rc)
		goto cleanup;
	if (!ctx) {
		if (tls_depth)
			tls_depth--;
		goto cleanup;
	}
	if (!known(ctx) || (!ctx->primary && !ctx->alive)) {
		rc = CUDA_ERROR_INVALID_CONTEXT;
		goto cleanup;
	}
	if (tls_depth)
		tls_stack[tls_depth - 1] = ctx;
	else
		rc = push(ctx);
cleanup:
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "ctx=%p", (void *)ctx);
	return rc;
}

FC_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc)
		*pctx = (CUcontext)fc_current();
	pthread_mutex_unlock(&fc_lock);
	return rc;
}

FC_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
	struct fc_ctx *ctx;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc && !dev)
		rc = CUDA_ERROR_INVALID_VALUE;
	ctx = rc ? NULL : fc_current();
	if (!rc && !ctx)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (!rc)
		*dev = ctx->dev;
	pthread_mutex_unlock(&fc_lock);
	return rc;
}

static CUresult ctx_push(const char *api, CUcontext handle)
{
	struct fc_ctx *ctx = (struct fc_ctx *)handle;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc && (!ctx || !known(ctx) || (!ctx->primary && !ctx->alive)))
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (!rc)
		rc = push(ctx);
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "ctx=%p", (void *)ctx);
	return rc;
}

FC_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
	return ctx_push(__func__, ctx);
}

FC_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	return ctx_push(__func__, ctx);
}

static CUresult ctx_pop(const char *api, CUcontext *pctx)
{
	struct fc_ctx *ctx = NULL;
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = fc_need_init();
	if (!rc && !tls_depth)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (!rc) {
		ctx = tls_stack[--tls_depth];
		if (pctx)
			*pctx = (CUcontext)ctx;
	}
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "ctx=%p", (void *)ctx);
	return rc;
}

FC_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	return ctx_pop(__func__, pctx);
}

FC_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	return ctx_pop(__func__, pctx);
}

FC_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = need_device(dev);
	if (!rc && !pctx)
		rc = CUDA_ERROR_INVALID_VALUE;
	if (!rc) {
		fc.primary[dev].refs++;
		fc.primary[dev].alive = 1;
		*pctx = (CUcontext)&fc.primary[dev];
	}
	pthread_mutex_unlock(&fc_lock);
	fc_trace(__func__, rc, "dev=%d", dev);
	return rc;
}

/* The last release tears the primary context down, as cuDevicePrimaryCtxReset does. */
static CUresult primary_release(const char *api, CUdevice dev)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = need_device(dev);
	if (!rc && !fc.primary[dev].refs)
		rc = CUDA_ERROR_INVALID_CONTEXT;
	if (!rc && !--fc.primary[dev].refs) {
		fc_drop_ctx(&fc.primary[dev]);
		fc.primary[dev].alive = 0;
	}
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "dev=%d", dev);
	return rc;
}

FC_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return primary_release(__func__, dev);
}

FC_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	return primary_release(__func__, dev);
}

/* Frees every non-VMM allocation of the primary context; it must be retained again. */
static CUresult primary_reset(const char *api, CUdevice dev)
{
	CUresult rc;

	pthread_mutex_lock(&fc_lock);
	rc = need_device(dev);
	if (!rc) {
		fc_drop_ctx(&fc.primary[dev]);
		fc.primary[dev].refs = 0;
		fc.primary[dev].alive = 0;
	}
	pthread_mutex_unlock(&fc_lock);
	fc_trace(api, rc, "dev=%d", dev);
	return rc;
}

FC_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	return primary_reset(__func__, dev);
}

FC_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	return primary_reset(__func__, dev);
}
