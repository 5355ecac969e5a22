// SPDX-License-Identifier: BSD-2-Clause
/*
 * holders.c - from the walk's nodes to the census's answer: each tensor's
 * paths from a root ("__main__.model.history[17]"), the Python objects whose
 * autograd graph holds tensors, and the groups of tensors by the container
 * (or name) that holds them, with their distinct storages' bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "census_int.h"

/* Keys named by their own path at most this deep (a key whose path has a key...). */
#define MAX_KEY_DEPTH 2

static void node_path_d(struct census_walk *w, uint32_t i, char *buf, size_t len, int depth);

/*
 * One label into buf: a key of a dict that is not a str or an int ("[<TYPE @0xADDR>]")
 * named by its own path where the census reached it ("[<Parameter __main__.w>]"), else
 * by its type alone. Returns what snprintf returns.
 */
static int label_into(struct census_walk *w, const char *label, char *buf, size_t len, int depth)
{
	const char *at = strstr(label, " @0x"), *end;
	unsigned long long addr;
	uint32_t *node;
	char path[512];

	if (!at)
		return snprintf(buf, len, "%s", label);
	addr = strtoull(at + 4, (char **)&end, 16);
	node = htab__lookup(w->seen, &(uint64_t){ addr });
	if (!node || depth >= MAX_KEY_DEPTH)
		return snprintf(buf, len, "%.*s key%s", (int)(at - label), label, end);
	node_path_d(w, *node, path, sizeof(path), depth + 1);
	return snprintf(buf, len, "%.*s %s%s", (int)(at - label), label, path, end);
}

static void node_path_d(struct census_walk *w, uint32_t i, char *buf, size_t len, int depth)
{
	uint32_t chain[MAX_DEPTH];
	int n = 0;
	size_t used = 0;

	buf[0] = '\0';
	for (uint32_t j = i; j != NO_NODE && n < MAX_DEPTH; j = w->nodes[j].parent)
		chain[n++] = j;
	if (n == MAX_DEPTH)
		used = snprintf(buf, len, "...");
	for (int k = n - 1; k >= 0 && used < len; k--) {
		int r = label_into(w, w->labels + w->nodes[chain[k]].label, buf + used, len - used,
				   depth);

		if (r < 0)
			break;
		used += r;
	}
}

/* The path of node i from its root, into buf. */
static void node_path(struct census_walk *w, uint32_t i, char *buf, size_t len)
{
	node_path_d(w, i, buf, len, 0);
}

static char *path_with(struct census_walk *w, uint32_t parent, uint32_t label)
{
	char buf[1024];
	size_t n;

	node_path(w, parent, buf, sizeof(buf));
	n = strlen(buf);
	label_into(w, w->labels + label, buf + n, sizeof(buf) - n, 0);
	return strdup(buf);
}

struct gkey {
	char *path;
	const char *kind;
	uint64_t length;
	size_t tensor;
};

static int gkey_cmp(const void *a, const void *b)
{
	const struct gkey *x = a, *y = b;
	int r = strcmp(x->path, y->path);

	if (r)
		return r;
	return x->tensor < y->tensor ? -1 : x->tensor > y->tensor;
}

/* The group of a tensor: the list, tuple or dict that holds it, else its own name. */
static void group_key(struct census_walk *w, uint32_t node, struct gkey *k)
{
	struct census_node *n = &w->nodes[node];
	struct census_node *p = n->parent == NO_NODE ? NULL : &w->nodes[n->parent];
	uint64_t len = 0;
	char buf[1024];

	if (p && (p->kind == K_LIST || p->kind == K_TUPLE || (p->kind == K_DICT && !p->attrs))) {
		node_path(w, n->parent, buf, sizeof(buf));
		census__rd64(w, p->addr + 16, &len); /* ma_used, ob_size */
		k->kind = p->kind == K_LIST ? "list" : p->kind == K_TUPLE ? "tuple" : "dict";
		k->length = len;
	} else {
		node_path(w, node, buf, sizeof(buf));
		const struct census_node *pp = p && p->parent != NO_NODE ? &w->nodes[p->parent] :
									   NULL;

		k->kind = !p		    ? (strncmp(buf, "thread ", 7) ? "global" : "local") :
			  p->kind == K_CELL ? "cell" :
			  (p->parent == NO_NODE && p->kind == K_DICT) ||
					  (pp && pp->kind == K_MODULE) ?
					      "global" :
					      "attribute";
		k->length = 0;
	}
	k->path = strdup(buf);
}

static int storage_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Distinct storages among tensors idx[0..n) and their bytes. */
static size_t distinct_storages(const struct census *c, const size_t *idx, size_t n,
				uint64_t *bytes)
{
	uint64_t *s = malloc((n ? n : 1) * 2 * sizeof(*s));
	size_t k = 0;

	*bytes = 0;
	if (!s)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (c->tensors[idx[i]].storage) {
			s[2 * k] = c->tensors[idx[i]].storage;
			s[2 * k + 1] = c->tensors[idx[i]].nbytes;
			k++;
		}
	qsort(s, k, 2 * sizeof(*s), storage_cmp);
	n = 0;
	for (size_t i = 0; i < k; i++)
		if (i == 0 || s[2 * i] != s[2 * (i - 1)]) {
			n++;
			*bytes += s[2 * i + 1];
		}
	free(s);
	return n;
}

int census__build_groups(struct census_walk *w)
{
	struct census *c = w->out;
	struct gkey *keys = calloc(c->nr_tensors + 1, sizeof(*keys));
	size_t *idx = calloc(c->nr_tensors + 1, sizeof(*idx)), nk = 0, no = 0;
	int err = -ENOMEM;

	if (!keys || !idx)
		goto cleanup;
	for (size_t i = 0; i < c->nr_tensors; i++) {
		uint32_t node = w->tensor_node[i];

		c->tensors[i].group = -1;
		if (node == NO_NODE)
			continue;
		group_key(w, node, &keys[nk]);
		if (!keys[nk].path)
			goto cleanup;
		keys[nk++].tensor = i;
	}
	qsort(keys, nk, sizeof(*keys), gkey_cmp);
	c->groups = calloc(nk + 1, sizeof(*c->groups));
	if (!c->groups)
		goto cleanup;
	for (size_t i = 0; i < nk;) {
		struct census_group *g = &c->groups[c->nr_groups];
		size_t j = i, n = 0;

		while (j < nk && !strcmp(keys[j].path, keys[i].path)) {
			idx[n++] = keys[j].tensor;
			c->tensors[keys[j].tensor].group = c->nr_groups;
			j++;
		}
		g->path = keys[i].path;
		keys[i].path = NULL;
		g->kind = keys[i].kind;
		g->length = keys[i].length;
		g->tensors = n;
		g->storages = distinct_storages(c, idx, n, &g->bytes);
		c->nr_groups++;
		i = j;
	}
	/* storages no Python-held tensor shares */
	for (size_t i = 0; i < c->nr_tensors; i++)
		idx[i] = i;
	c->nr_storages = distinct_storages(c, idx, c->nr_tensors, &c->bytes);
	for (size_t i = 0; i < c->nr_tensors; i++) {
		bool held = false;

		if (c->tensors[i].nr_holders)
			continue;
		c->orphan_tensors++;
		for (size_t j = 0; j < c->nr_tensors && !held; j++)
			held = c->tensors[j].nr_holders &&
			       c->tensors[j].storage == c->tensors[i].storage;
		if (!held)
			idx[no++] = i;
	}
	distinct_storages(c, idx, no, &c->orphan_bytes);
	err = 0;
cleanup:
	for (size_t i = 0; keys && i < nk; i++)
		free(keys[i].path);
	free(keys);
	free(idx);
	return err;
}

int census__fill_holders(struct census_walk *w)
{
	struct census *c = w->out;
	char buf[1024];

	for (size_t i = 0; i < c->nr_tensors; i++) {
		struct census_tensor *t = &c->tensors[i];

		if (w->tensor_node[i] == NO_NODE)
			continue;
		node_path(w, w->tensor_node[i], buf, sizeof(buf));
		t->holders[t->nr_holders] = strdup(buf);
		if (!t->holders[t->nr_holders])
			return -ENOMEM;
		t->nr_holders++;
		if (t->grad_fn) {
			char **g = realloc(c->graphs, (c->nr_graphs + 1) * sizeof(*g));
			size_t n = strlen(buf);

			if (!g)
				return -ENOMEM;
			c->graphs = g;
			snprintf(buf + n, sizeof(buf) - n, ".grad_fn");
			c->graphs[c->nr_graphs] = strdup(buf);
			if (c->graphs[c->nr_graphs])
				c->nr_graphs++;
		}
	}
	for (size_t e = 0; e < w->nr_extras; e++) {
		struct census_tensor *t = &c->tensors[w->extras[e].tensor];

		if (t->nr_holders >= CENSUS_MAX_HOLDERS)
			continue;
		t->holders[t->nr_holders] = path_with(w, w->extras[e].parent, w->extras[e].label);
		if (t->holders[t->nr_holders])
			t->nr_holders++;
	}
	return 0;
}
