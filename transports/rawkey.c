/* SPDX-License-Identifier: MIT */
/* rawkey.c - imported raw keys, counted (rawkey.h). */
#include "rawkey.h"

#include "common/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sfs_rawkeys_get(struct sfs_rawkeys *t, uint64_t raddr, const uint8_t *raw,
		    size_t len, const struct sfs_rawkey_ops *ops, uint64_t *key)
{
	if (len == 0 || len > SFS_XPORT_RAWKEY_MAX)
		return -EINVAL;
	for (size_t i = 0; i < t->n; i++) {
		struct sfs_rawkey *e = &t->v[i];
		if (e->raddr == raddr && e->len == len &&
		    !memcmp(e->raw, raw, len) && e->refs < UINT32_MAX) {
			e->refs++;
			*key = e->key;
			return 0;
		}
	}
	uint64_t k;
	int rc = ops->map(ops->arg, raddr, raw, len, &k);
	if (rc)
		return rc;
	if (sfs_grow((void **)&t->v, &t->cap, t->n + 1, sizeof(t->v[0]))) {
		ops->unmap(ops->arg, k); /* unrecorded, it would never go */
		return -ENOMEM;
	}
	struct sfs_rawkey *e = &t->v[t->n++];
	memset(e, 0, sizeof(*e));
	e->raddr = raddr;
	e->key = k;
	e->len = (uint32_t)len;
	e->refs = 1;
	memcpy(e->raw, raw, len);
	*key = k;
	return 0;
}

int sfs_rawkeys_put(struct sfs_rawkeys *t, uint64_t key,
		    const struct sfs_rawkey_ops *ops)
{
	for (size_t i = 0; i < t->n; i++) {
		struct sfs_rawkey *e = &t->v[i];
		if (e->key != key)
			continue;
		if (--e->refs == 0) {
			ops->unmap(ops->arg, e->key);
			t->v[i] = t->v[--t->n];
		}
		return 0;
	}
	return -ENOENT;
}

void sfs_rawkeys_clear(struct sfs_rawkeys *t, const struct sfs_rawkey_ops *ops)
{
	for (size_t i = 0; i < t->n; i++)
		ops->unmap(ops->arg, t->v[i].key);
	free(t->v);
	memset(t, 0, sizeof(*t));
}
